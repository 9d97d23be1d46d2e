"""Rendering a validated recovery policy into what the cluster and the container image need.

``render(manifest, spec)`` is pure: it deep-copies the AscendJob once and returns the merged
manifest, the recovery labels/annotations (set and removed), merge patches for the AscendJob and its
PodGroup, the ``taskd-manager-<job>`` ConfigMap, the image/launcher/flag artifacts, and when each part
takes effect (design.md §3). ``owned_keys()`` names the keys a push may touch.
"""

from __future__ import annotations

from .keys import owned_keys
from .render import render
from .result import Artifacts, Effect, RenderResult

__all__ = ["Artifacts", "Effect", "RenderResult", "owned_keys", "render"]
