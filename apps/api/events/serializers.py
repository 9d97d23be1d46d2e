from __future__ import annotations

from rest_framework import serializers

from apps.events.models import JobEvent


class EventOutputSerializer(serializers.ModelSerializer):
    """One stored job event; ``seq`` is per job, gap-free, and the resume point of ``after_seq``."""

    job = serializers.IntegerField(source="job_id")
    # A field named like a Serializer attribute: DRF's metaclass takes it off the class; the stubs don't.
    data = serializers.DictField(child=serializers.JSONField())  # type: ignore[assignment]

    class Meta:
        model = JobEvent
        fields = [
            "id",
            "job",
            "seq",
            "kind",
            "severity",
            "message",
            "source",
            "data",
            "occurred_at",
            "stored_at",
        ]


class FeedEventOutputSerializer(EventOutputSerializer):
    """The same event in the all-jobs feed (its own schema name: that feed pages by ``id``, not ``seq``)."""
