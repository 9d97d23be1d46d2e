"""Policy and manifest validation: the one place that decides whether a recovery policy is valid.

Shared by the REST API, the web form, the ``validate_policy``/``render_policy`` commands and the
push task, so every interface reports identical codes, fields and messages. Pure: no Django, no I/O.

``validate_policy(raw, job=None)`` takes untrusted JSON (design.md §4.1) and never raises. Missing
fields take the ``PolicySpec`` defaults; ``strategies`` may be a JSON list or the comma-separated
string users paste from the ``recover-strategy`` annotation. The canonical (stored) shape of platform
mode is::

    {"platform_mode": true, "strategies": ["recover", "dump"],
     "decision_rules": [{"match": {"fault_type": ["uce"], "rank0": false}, "strategy": "retry"},
                        {"match": {}, "strategy": "ask"}],
     "default_strategy": "recover", "decision_timeout_s": 240}

``decision_rules`` may also be given as ``{"rules": [...], "default_strategy": ..., "timeout_s": ...}``
(the shape design.md §4.1 sketches); it is folded into the canonical shape above.

Issue fields are JSON pointers into the policy ("/strategies/2"; the document root is "/"), or
``manifest:``-prefixed pointers into an AscendJob manifest. ``codes()`` lists every code.
"""

from __future__ import annotations

from .issues import Issue, ValidationResult, codes
from .manifest import validate_manifest
from .policy import validate_policy

__all__ = ["Issue", "ValidationResult", "codes", "validate_manifest", "validate_policy"]
