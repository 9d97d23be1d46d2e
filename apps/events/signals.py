"""Signals apps above the events app listen to, so they can keep their own figures in step with the
incidents without this app importing them (the layers point down only).

``incident_changed`` is sent inside the transaction that saves a closed incident (the job row locked,
before anything is broadcast), with ``incident`` and ``previous_opened_at`` (its ``opened_at`` before
this change, which may move the day it counts in). A receiver that writes joins that transaction:
what it keeps is committed with the incident or not at all.
"""

from __future__ import annotations

from django.dispatch import Signal

incident_changed = Signal()
