"""Request examples for the OpenAPI document (shown in /api/docs/ and replayed by schemathesis)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

from mindcluster import keys as k

EXAMPLE_MANIFEST = {
    "apiVersion": k.ASCENDJOB_API_VERSION,
    "kind": k.ASCENDJOB_KIND,
    "metadata": {"name": "llama-7b", "namespace": "team-a", "labels": {k.LABEL_FRAMEWORK: "pytorch"}},
    "spec": {
        "schedulerName": k.VOLCANO_SCHEDULER,
        "replicaSpecs": {
            role: {
                "replicas": 1,
                "restartPolicy": "Never",
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": k.CONTAINER_NAME,
                                "image": "mindspeed-llm:2.3.0",
                                "resources": {"requests": {"huawei.com/Ascend910": 8}},
                            }
                        ]
                    }
                },
            }
            for role in ("Master", "Worker")
        },
    },
}
EXAMPLE_SPEC = {
    "mindcluster_version": "26.1",
    "strategies": ["retry", "recover", "dump"],
    "pod_rescheduling": True,
}

PUT_POLICY = [
    OpenApiExample("strategies", value={"spec": EXAMPLE_SPEC, "comment": "fastest recovery first"}),
    OpenApiExample("from a preset", value={"preset": "retry-first", "comment": "team default"}),
    OpenApiExample("guarded", value={"spec": {"strategies": ["dump"]}, "revision": 1}),
]
PREVIEW = [
    OpenApiExample("draft", value={"spec": EXAMPLE_SPEC}),
    OpenApiExample("current revision", value={}),
]
VALIDATE = [
    OpenApiExample("spec only", value={"spec": EXAMPLE_SPEC}),
    OpenApiExample(
        "with a manifest", value={"spec": {"strategies": ["elastic-training"]}, "manifest": EXAMPLE_MANIFEST}
    ),
]
RENDER = [
    OpenApiExample("JSON manifest and policy", value={"manifest": EXAMPLE_MANIFEST, "policy": EXAMPLE_SPEC}),
    OpenApiExample(
        "YAML manifest and preset",
        value={
            "manifest": "\n".join(
                [
                    "apiVersion: mindxdl.gitee.com/v1",
                    "kind: AscendJob",
                    "metadata: {name: demo, labels: {framework: pytorch}}",
                    "spec:",
                    "  replicaSpecs:",
                    "    Master:",
                    "      replicas: 1",
                    "      template: {spec: {containers: [{name: ascend, image: 'img:1'}]}}",
                    "",
                ]
            ),
            "preset": "retry-first",
        },
    ),
]
PRESET_CREATE = [
    OpenApiExample(
        "preset",
        value={
            "name": "team-default",
            "description": "retry, then migrate",
            "spec": {"strategies": ["retry", "recover"]},
        },
    ),
]
