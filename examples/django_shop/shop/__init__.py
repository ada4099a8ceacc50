"""The Django project of the shop example (settings, URLs)."""
