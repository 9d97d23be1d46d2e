"""``IsoUtc`` (apps/core/sql_json.py): PostgreSQL writes any timestamp as DRF writes it in UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db.models import Value
from django.db.models.fields import DateTimeField
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.fields import DateTimeField as DrfDateTimeField

from apps.core.sql_json import IsoUtc
from apps.jobs.models import Cluster

pytestmark = pytest.mark.django_db

# Zones either side of UTC: the database converts, as DRF does to the current zone (UTC here).
zones = st.sampled_from([UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-9, minutes=-30))])
moments = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 30), timezones=zones)
whole_seconds = moments.map(lambda moment: moment.replace(microsecond=0))


@settings(max_examples=100, deadline=None)
@given(moment=st.one_of(moments, whole_seconds))
def test_the_database_writes_a_timestamp_as_drf_does(moment: datetime) -> None:
    Cluster.objects.get_or_create(name="probe")
    written = (
        Cluster.objects.filter(name="probe")
        .annotate(at=IsoUtc(Value(moment, output_field=DateTimeField())))
        .values_list("at", flat=True)
        .get()
    )
    assert written == DrfDateTimeField().to_representation(moment.astimezone(UTC))
