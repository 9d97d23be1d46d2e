from __future__ import annotations

from rest_framework.routers import SimpleRouter

from apps.api.accounts.views import TokenViewSet

router = SimpleRouter()
router.register("tokens", TokenViewSet, basename="token")

urlpatterns = router.urls
