"""Sign-in with the company's identity provider (OpenID Connect, issue #24 item 8).

``mozilla-django-oidc`` runs the authorization-code flow (with PKCE and a nonce); this package adds
what a multi-tenant control plane needs on top: users matched by (issuer, subject), ID tokens
checked for audience and issuer, the provider's groups mapped to namespace roles at each sign-in
(``OIDC_GROUP_ROLES``), an audit entry per sign-in, and everything off unless configured.
"""
