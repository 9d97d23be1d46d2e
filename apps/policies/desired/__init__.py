"""The desired state of a job for one policy revision, in one place.

``desired_state`` (``state.py``) renders a policy into a job and stamps the revision; ``diff.py``
compares it with live objects (push patches, preview diffs, drift); ``compare.py`` compares two
states (what a newer revision changes, and when); ``config.py`` is the creation config.
"""

from __future__ import annotations

from .compare import artifact_changes, live_changes
from .config import (
    CONFIG_KEYS,
    PLATFORM_MODE,
    Config,
    config_changes,
    config_from_keys,
    creation_config_of,
    normalize_strategies,
    podgroup_accepts_init,
)
from .diff import (
    Drift,
    ascendjob_patch,
    configmap_current,
    configmap_is_ours,
    configmap_replacement,
    drift,
    key_differences,
    podgroup_patch,
    same_value,
)
from .state import REVISION_ANNOTATION, DesiredKey, DesiredState, PodGroupKeys, desired_state

__all__ = [
    "CONFIG_KEYS",
    "PLATFORM_MODE",
    "REVISION_ANNOTATION",
    "Config",
    "DesiredKey",
    "DesiredState",
    "Drift",
    "PodGroupKeys",
    "artifact_changes",
    "ascendjob_patch",
    "config_changes",
    "config_from_keys",
    "configmap_current",
    "configmap_is_ours",
    "configmap_replacement",
    "creation_config_of",
    "desired_state",
    "drift",
    "key_differences",
    "live_changes",
    "normalize_strategies",
    "podgroup_accepts_init",
    "podgroup_patch",
    "same_value",
]
