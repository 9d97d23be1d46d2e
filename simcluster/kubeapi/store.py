"""Object store with a global etcd-like resourceVersion counter and a bounded change history.

Only the server's event loop touches a :class:`Store`, so there are no locks. Stored objects are
immutable snapshots (:class:`Stored`): the dict is never mutated after commit and its JSON bytes
are computed once, so reads, list pages and watch fan-out reuse the same serialisation.

History keeps the last ``history_limit`` changes (all resource types share the counter, as in
etcd). Everything with ``rv > min_rv`` is retained; a watch or an exact/continued list from an
older version is answered 410 Expired, which is what makes clients relist.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import errors
from .resources import ALL, ResourceType

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


def dumps(obj: Any) -> bytes:
    # ensure_ascii keeps lone surrogates from client JSON encodable and is the C fast path.
    return json.dumps(obj, separators=(",", ":")).encode()


class Stored:
    """An immutable committed object version and its cached JSON bytes."""

    __slots__ = ("obj", "raw")

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.raw = dumps(obj)

    @property
    def key(self) -> tuple[str, str]:
        meta = self.obj["metadata"]
        return meta.get("namespace", ""), meta["name"]

    def copy(self) -> dict[str, Any]:
        """A private deep copy (json round trip is the fastest deep copy for JSON data)."""
        return json.loads(self.raw)


@dataclass(slots=True, eq=False)  # slots: one per write, kept in the history; eq=False: by identity
class Change:
    """One committed write; ``obj`` is the new state (for DELETED the final state at the delete rv)."""

    rv: int
    rt: ResourceType
    namespace: str
    name: str
    type: str
    obj: Stored
    prev: Stored | None
    _lines: dict[str, bytes] = field(default_factory=dict, init=False, repr=False)

    def line(self, etype: str) -> bytes:
        """The serialized watch event for this change as seen by a watcher (cached per event type)."""
        cached = self._lines.get(etype)
        if cached is not None:
            return cached
        if etype == DELETED and self.type != DELETED and self.prev is not None:
            # Object left a selector's scope: the apiserver sends the *previous* content with the
            # event's resourceVersion (cacher.convertToWatchEvent).
            old = dict(self.prev.obj)
            old["metadata"] = {**old["metadata"], "resourceVersion": str(self.rv)}
            raw = dumps(old)
        else:
            raw = self.obj.raw
        cached = b'{"type":"' + etype.encode() + b'","object":' + raw + b"}\n"
        self._lines[etype] = cached
        return cached


def encode_continue(rv: int, key: tuple[str, str]) -> str:
    token = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": [key[0], key[1]]}, separators=(",", ":"))
    return base64.urlsafe_b64encode(token.encode()).decode()


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)))
        rv, start = data["rv"], data["start"]
        if (
            data.get("v") != "meta.k8s.io/v1"
            or not isinstance(rv, int)
            or isinstance(rv, bool)
            or rv < 0
            or not isinstance(start, list)
            or len(start) != 2
            or not all(isinstance(s, str) for s in start)
        ):
            raise ValueError("bad token contents")
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from None
    return rv, (start[0], start[1])


class ChangeListener(Protocol):
    """What the store fans each change out to: a watch stream (``watch.Watcher``).

    Declared here so the store does not import the watch module, which imports the store.
    """

    def offer(self, change: Change) -> None:
        """Queue the change for the stream if it is in the stream's scope."""

    def close(self) -> None:
        """End the stream (the API server is shutting down)."""


class Store:
    def __init__(self, history_limit: int = 10_000) -> None:
        self.rv = 0
        self.history_limit = max(1, history_limit)
        self.history: deque[Change] = deque()
        self.min_rv = 0  # every change with rv > min_rv is in history
        # resource -> namespace ("" for cluster-scoped) -> name -> current version
        self.objects: dict[ResourceType, dict[str, dict[str, Stored]]] = {rt: {} for rt in ALL}
        self.watchers: dict[ResourceType, set[ChangeListener]] = {rt: set() for rt in ALL}
        # resource -> (label key, value) -> keys (namespace, name) of the current objects carrying it.
        # A list with ``job-name=X`` (every pod list the operator and ClusterD make) then reads the
        # job's few pods instead of matching every pod of a 1,000-node fleet; the full selector is
        # still applied to what the index returns, so it only narrows the candidates.
        self.label_index: dict[ResourceType, dict[tuple[str, str], set[tuple[str, str]]]] = {
            rt: {} for rt in ALL
        }

    # --- reads -------------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Stored | None:
        bucket = self.objects[rt].get(namespace)
        return bucket.get(name) if bucket else None

    def current(self, rt: ResourceType, namespace: str | None) -> list[Stored]:
        """Current objects of ``rt`` (one namespace, or all when None), ordered by (namespace, name)."""
        by_ns = self.objects[rt]
        if namespace is not None:
            bucket = by_ns.get(namespace, {})
            return [bucket[n] for n in sorted(bucket)]
        return [by_ns[ns][n] for ns in sorted(by_ns) for n in sorted(by_ns[ns])]

    def labelled(
        self, rt: ResourceType, namespace: str | None, key: str, values: Iterable[str]
    ) -> list[Stored]:
        """Current objects of ``rt`` whose label ``key`` has one of ``values``, by (namespace, name)."""
        index = self.label_index[rt]
        found: set[tuple[str, str]] = set()
        for value in values:
            found.update(index.get((key, value), ()))
        out = []
        for ns, name in sorted(found):
            if namespace is None or ns == namespace:
                stored = self.get(rt, ns, name)
                if stored is not None:
                    out.append(stored)
        return out

    def _index_labels(
        self, rt: ResourceType, key: tuple[str, str], old: Stored | None, new: Stored | None
    ) -> None:
        before = (old.obj["metadata"].get("labels") or {}) if old is not None else {}
        after = (new.obj["metadata"].get("labels") or {}) if new is not None else {}
        if before == after:
            return
        index = self.label_index[rt]
        for item in before.items():
            if after.get(item[0]) != item[1]:
                names = index.get(item)
                if names is not None:
                    names.discard(key)
                    if not names:
                        del index[item]
        for item in after.items():
            if before.get(item[0]) != item[1]:
                index.setdefault(item, set()).add(key)

    def snapshot(self, rt: ResourceType, namespace: str | None, rv: int, *, why: str) -> list[Stored]:
        """Objects as they were at ``rv``, rebuilt by undoing retained history (410 if compacted)."""
        if rv == self.rv:
            return self.current(rt, namespace)
        if rv > self.rv:
            raise errors.ApiError(
                504, f"Too large resource version: {rv}, current: {self.rv}", reason="Timeout"
            )
        if rv < self.min_rv:
            raise errors.expired(why)
        state: dict[tuple[str, str], Stored] = {s.key: s for s in self.current(rt, namespace)}
        for change in reversed(self.history):
            if change.rv <= rv:
                break
            if change.rt is not rt or (namespace is not None and change.namespace != namespace):
                continue
            key = (change.namespace, change.name)
            if change.type == ADDED:
                state.pop(key, None)
            elif change.type == MODIFIED:
                assert change.prev is not None
                state[key] = change.prev
            else:
                state[key] = change.prev if change.prev is not None else change.obj
        return [state[k] for k in sorted(state)]

    def changes_since(self, rv: int) -> Iterable[Change]:
        """Retained changes with rv greater than ``rv``; raises 410 when some were discarded."""
        if rv < self.min_rv:
            raise errors.expired(f"too old resource version: {rv} ({self.min_rv + 1})")
        if not self.history or rv >= self.rv:
            return ()
        start = rv + 1 - self.history[0].rv  # rvs in history are contiguous
        return list(self.history)[max(0, start) :]

    # --- writes ------------------------------------------------------------------------------------

    def commit(self, rt: ResourceType, type_: str, obj: dict[str, Any]) -> Change:
        """Persist a new version of ``obj`` (which the store now owns) and fan it out to watchers."""
        self.rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.rv)
        namespace, name = meta.get("namespace", ""), meta["name"]
        stored = Stored(obj)
        bucket = self.objects[rt].setdefault(namespace, {})
        prev = bucket.get(name)
        if type_ == DELETED:
            bucket.pop(name, None)
            if not bucket:
                del self.objects[rt][namespace]
            self._index_labels(rt, (namespace, name), prev, None)
        else:
            bucket[name] = stored
            self._index_labels(rt, (namespace, name), prev, stored)
        change = Change(self.rv, rt, namespace, name, type_, stored, prev)
        self.history.append(change)
        while len(self.history) > self.history_limit:
            self.min_rv = self.history.popleft().rv
        for watcher in tuple(self.watchers[rt]):
            watcher.offer(change)
        return change

    def compact(self) -> None:
        """Forget all history: any resourceVersion older than the current one now yields 410."""
        self.history.clear()
        self.min_rv = self.rv
