"""The URLconf of a process started with ``ADMISSION_WEBHOOK=true``: the webhook, then everything else.

Only ``serve_admission`` runs with it, behind TLS that requires the API server's client certificate;
the rest of the site stays routable so links the admission code renders (events, audit) resolve.
"""

from __future__ import annotations

from django.urls import path

from apps.admission.views import admission_ascendjobs
from controlplane.urls import urlpatterns as public_urlpatterns

urlpatterns = [
    path("admission/ascendjobs/", admission_ascendjobs, name="admission-ascendjobs"),
    *public_urlpatterns,
]
