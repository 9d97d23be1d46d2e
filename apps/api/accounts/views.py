"""``/tokens/``: each user lists, creates and revokes their own API tokens.

A token created with a token expires no later than that token, and a user holds at most
``API_TOKENS_PER_USER`` active tokens (issue #16: one leaked key must not mint endless ones).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.actors import actor_for, signed_in_user
from apps.accounts.models import ApiToken
from apps.accounts.selectors import tokens_of
from apps.accounts.services import TokenParentRevoked, TooManyTokens, token_issue, token_revoke
from apps.api.accounts.serializers import (
    TokenCreatedSerializer,
    TokenCreateInputSerializer,
    TokenOutputSerializer,
)
from apps.core.api_errors import ApiError
from apps.core.api_inputs import valid_input

TAG = "tokens"


@extend_schema_view(
    list=extend_schema(summary="Your API tokens", tags=[TAG]),
    create=extend_schema(
        summary="Create a token (the key is shown once; capped per user and by the calling token's expiry)",
        tags=[TAG],
        request=TokenCreateInputSerializer,
        responses={201: TokenCreatedSerializer},
    ),
    destroy=extend_schema(summary="Revoke a token", tags=[TAG], responses={204: None}),
)
class TokenViewSet(
    mixins.ListModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    serializer_class = TokenOutputSerializer
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self) -> QuerySet[ApiToken]:
        return tokens_of(self.request.user).order_by("-created_at", "-id")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        values = valid_input(TokenCreateInputSerializer, request.data)
        days = values.get("expires_in_days")
        try:
            token, key = token_issue(
                signed_in_user(request),
                values["name"],
                timezone.now() + timedelta(days=days) if days else None,
                actor=actor_for(request),
                parent=request.auth if isinstance(request.auth, ApiToken) else None,
            )
        except TooManyTokens as exc:
            raise ApiError(str(exc), code="too_many_tokens", field="name") from None
        except TokenParentRevoked as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        # The key is not a column (only its hash is stored): it joins the row's fields here, once.
        body = {**TokenOutputSerializer(token).data, "key": key}
        return Response(body, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        token_revoke(self.get_object(), actor=actor_for(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
