"""duly inside web frameworks: ``duly.contrib.django`` and ``duly.contrib.starlette``.

Each needs its framework installed (``pip install 'duly[django]'`` / ``'duly[fastapi]'``);
importing ``duly`` itself never imports a framework.
"""
