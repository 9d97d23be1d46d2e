"""What a render produces: the merged manifest, the live keys, the patches and the artifacts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .when import When

EffectTarget = Literal[
    "podgroup", "ascendjob", "pod-template", "configmap", "image", "launcher", "training-script"
]
EffectWhen = When

# Artifact file names, as written by ``render_policy --artifacts DIR`` and served by the API.
DOCKERFILE_FILE = "Dockerfile.snippet"
LAUNCHER_FILE = "launcher.sh"
TRAINING_FLAGS_FILE = "training-flags.txt"
MANAGER_FILE = "manager.py"


@dataclass(frozen=True)
class Effect:
    """One part of a policy and the moment it starts to matter (the UI shows these)."""

    target: EffectTarget
    when: EffectWhen
    summary: str
    keys: tuple[str, ...] = ()  # the keys (or files) this part sets or removes

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "when": self.when, "summary": self.summary, "keys": list(self.keys)}


@dataclass(frozen=True)
class Artifacts:
    """Text the user puts into the image, the launcher and the training command."""

    dockerfile: str
    launcher: str
    training_flags: str
    manager_py: str | None = None

    def files(self) -> dict[str, str]:
        """File name -> content; ``manager.py`` only when the policy needs a TaskD manager."""
        files = {
            DOCKERFILE_FILE: self.dockerfile,
            LAUNCHER_FILE: self.launcher,
            TRAINING_FLAGS_FILE: self.training_flags,
        }
        if self.manager_py is not None:
            files[MANAGER_FILE] = self.manager_py
        return files


@dataclass(frozen=True)
class RenderResult:
    """Everything a policy turns into for one AscendJob (see ``rendering.render``)."""

    manifest: dict[str, Any]
    labels: dict[str, str]
    annotations: dict[str, str]
    removed_labels: tuple[str, ...]
    removed_annotations: tuple[str, ...]
    podgroup_patch: dict[str, Any]
    job_patch: dict[str, Any]
    configmap: dict[str, Any] | None
    artifacts: Artifacts
    effects: tuple[Effect, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
