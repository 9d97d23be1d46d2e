from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.api.webhooks.views import WebhookDeliveryListApi, WebhookTestApi, WebhookViewSet

router = SimpleRouter()
router.register("webhooks", WebhookViewSet, basename="webhook")

urlpatterns = [
    path(
        "webhooks/<int:webhook_id>/deliveries/", WebhookDeliveryListApi.as_view(), name="webhook-deliveries"
    ),
    path("webhooks/<int:webhook_id>/test/", WebhookTestApi.as_view(), name="webhook-test"),
    *router.urls,
]
