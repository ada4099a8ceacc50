"""duly: background jobs that are never lost."""
