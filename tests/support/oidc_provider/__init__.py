"""A real OpenID Connect provider for the sign-in tests: a tiny standalone Django project using
``django-oauth-toolkit`` in OIDC mode, run as its own process (``serve.py``), never part of the product."""
