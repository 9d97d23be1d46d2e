"""The one list → watch loop: every process that follows a resource uses it.

``WatchLoop.run`` lists the resource (unless it resumes from a resourceVersion the caller kept),
then watches from the list's resourceVersion with bookmarks on, call after call, until stopped:

- each watch event goes to the ``WatchHandler`` with the resourceVersion it carries, bookmarks
  (which only advance the version: nothing changed) to ``bookmark``;
- ``410 Gone`` (the version is older than the server keeps, or the server dropped a slow watch)
  means the changes in between are lost to the watch: the loop relists, and ``listed`` hands the
  handler the whole current set (so it can also notice what disappeared meanwhile);
- any other ``ClusterError`` waits the shared backoff (``apps.cluster.backoff``) (many watchers whose
  API server restarted must not come back in step), or the server's ``Retry-After`` when it sent
  one, and tries again from the last version seen; the handler hears of it in ``failed``.

Errors raised by the handler are not the loop's: they end ``run`` (the caller's thread decides).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from apps.cluster import client as kube
from apps.cluster.backoff import Backoff
from apps.cluster.errors import ClusterError

log = logging.getLogger(__name__)

BOOKMARK = "BOOKMARK"
CHANGES = frozenset({"ADDED", "MODIFIED", "DELETED"})


@dataclass(frozen=True)
class WatchTarget:
    """One resource to follow, in one namespace (None: all), optionally narrowed by a field selector."""

    resource: str
    namespace: str | None = None
    field_selector: str = ""

    def describe(self) -> str:
        where = self.namespace or "all namespaces"
        return f"{self.resource} in {where}" + (f" ({self.field_selector})" if self.field_selector else "")


class WatchHandler:
    """What a watcher does with what the loop sees; override what you need (the defaults do nothing)."""

    def listed(self, items: list[dict[str, Any]], resource_version: str) -> None:
        """A (re)list: every object there is now, and the version the watch continues from."""

    def changed(self, event_type: str, obj: dict[str, Any], resource_version: str) -> None:
        """One ADDED / MODIFIED / DELETED event, in the server's order for this watch."""

    def bookmark(self, resource_version: str) -> None:
        """The server has sent everything up to ``resource_version`` (requested by the loop)."""

    def opened(self) -> None:
        """A watch call was answered: the changes since its version come first, from now on."""

    def watch_ended(self) -> None:
        """One watch call ended normally (its timeout): whatever backlog there was has been delivered."""

    def expired(self, error: ClusterError) -> None:
        """410 Gone: the loop relists next."""

    def failed(self, error: ClusterError, delay: float) -> None:
        """Any other cluster error: the loop retries after ``delay`` seconds."""


@dataclass(eq=False)
class WatchLoop:
    """List, then watch ``target`` in ``ref`` until ``stop`` is set; see the module's docstring."""

    ref: kube.ClusterRef
    target: WatchTarget
    handler: WatchHandler
    stop: threading.Event
    _: KW_ONLY
    # Where the next watch starts; "" means list first.
    resource_version: str = ""
    watch_timeout: int = 60
    backoff: Backoff = field(default_factory=Backoff)
    relists: int = field(default=0, init=False)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                if not self.resource_version:
                    self.relist()
                self._watch_once()
                self.backoff.reset()
            except ClusterError as exc:
                if exc.expired:
                    log.info(
                        "cluster %s: %s: watch expired (410), relisting",
                        self.ref.name,
                        self.target.describe(),
                    )
                    self.resource_version = ""
                    self.handler.expired(exc)
                    continue
                delay = self.backoff.next_delay(exc.retry_after)
                log.warning(
                    "cluster %s: %s: %s; retrying in %.1fs",
                    self.ref.name,
                    self.target.describe(),
                    exc.message,
                    delay,
                )
                self.handler.failed(exc, delay)
                self.stop.wait(delay)

    def relist(self) -> str:
        """List now, hand the items to the handler and return the version the next watch starts at."""
        items, resource_version = kube.list_resource(
            self.ref,
            self.target.resource,
            namespace=self.target.namespace,
            field_selector=self.target.field_selector,
        )
        self.relists += 1
        self.handler.listed(items, resource_version)
        self.resource_version = resource_version
        return resource_version

    def _watch_once(self) -> None:
        for event_type, obj in kube.watch_resource(
            self.ref,
            self.target.resource,
            resource_version=self.resource_version,
            namespace=self.target.namespace,
            field_selector=self.target.field_selector,
            timeout_seconds=self.watch_timeout,
        ):
            if event_type == kube.OPENED:
                self.handler.opened()
                continue
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or self.resource_version)
            self.resource_version = rv
            if event_type == BOOKMARK:
                self.handler.bookmark(rv)
            elif event_type in CHANGES:
                self.handler.changed(event_type, obj, rv)
            if self.stop.is_set():
                return
        self.handler.watch_ended()
