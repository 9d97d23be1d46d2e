"""Errors from the Kubernetes adapter, classified by whether trying again can help."""

from __future__ import annotations


class ClusterError(Exception):
    """A failed call to a cluster.

    ``permanent`` errors (403, 404, 422, bad kubeconfig) will not go away by retrying; the others
    (409 handled by the caller, 429, 5xx, timeouts, refused connections) may.
    """

    def __init__(
        self,
        message: str,
        *,
        permanent: bool,
        status: int | None = None,
        retry_after: float | None = None,
        reason: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.status = status
        self.retry_after = retry_after
        self.reason = reason

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def expired(self) -> bool:
        """410 Gone / Expired: the resourceVersion is older than the server keeps; relist."""
        return self.status == 410
