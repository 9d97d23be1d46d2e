"""The ``MutatingWebhookConfiguration`` that sends AscendJob CREATEs to the control plane.

One definition for ``register_webhook`` (the built-in cluster, or any cluster reachable by URL) and
for ``deploy/admission-webhook.yaml`` (a real cluster, through a Service with TLS); a test checks
the two agree on everything but ``clientConfig``.
"""

from __future__ import annotations

from typing import Any

from mindcluster import keys as c

WEBHOOK_CONFIGURATION_NAME = "mindcluster-recovery-policy"
WEBHOOK_NAME = "ascendjobs.recovery.mindcluster.io"
MANAGED_LABEL = "recovery.mindcluster.io/managed"
TIMEOUT_SECONDS = 2


def webhook_configuration(
    client_config: dict[str, Any], *, failure_policy: str = "Ignore", timeout_seconds: int = TIMEOUT_SECONDS
) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {
            "name": WEBHOOK_CONFIGURATION_NAME,
            "labels": {"app.kubernetes.io/part-of": "mindcluster-recovery"},
        },
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "admissionReviewVersions": ["v1"],
                # It writes a pending admission, never for a dryRun request (which changes nothing).
                "sideEffects": "NoneOnDryRun",
                "failurePolicy": failure_policy,  # Ignore: the control plane is never on the critical path
                "timeoutSeconds": timeout_seconds,
                "reinvocationPolicy": "Never",
                "clientConfig": client_config,
                "namespaceSelector": {"matchLabels": {MANAGED_LABEL: "true"}},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [c.ASCENDJOB_GROUP],
                        "apiVersions": [c.ASCENDJOB_VERSION],
                        "resources": [c.ASCENDJOB_PLURAL],
                        "scope": "Namespaced",
                    }
                ],
            }
        ],
    }
