from __future__ import annotations

from django.urls import path

from apps.api.decisions.views import DecisionDetailApi, DecisionListApi, SimulateApi

urlpatterns = [
    path("decisions/", DecisionListApi.as_view(), name="decision-list"),
    path("decisions/<int:decision_id>/", DecisionDetailApi.as_view(), name="decision-detail"),
    path("policies/simulate/", SimulateApi.as_view(), name="policy-simulate"),
]
