"""One bounded, thread-safe LRU cache for the UI's server-wide caches.

Entry point: ``LRU(max_entries)`` with ``get``, ``put``, ``get_or_create``, ``get_or_compute``
and ``pop``: the groups of a workspace, joined signals, live sources; several browser sessions'
page runs use them at once.

Where it sits: under views/state/ (docs/architecture.md: a server-wide cache is an ``LRU``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``size`` entries; the least recently used one leaves first."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("an LRU holds at least one entry")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LRU({len(self)} of {self.size} entries)"

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __iter__(self) -> Iterator[K]:
        with self._lock:
            return iter(list(self._entries))

    def get(self, key: K) -> V | None:
        """The entry (now the most recently used), or None."""
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key]

    def put(self, key: K, value: V) -> V:
        """Store ``value`` as the most recently used entry; the oldest leave past ``size``."""
        with self._lock:
            self._put(key, value)
        return value

    def get_or_create(self, key: K, create: Callable[[], V]) -> V:
        """The entry, or ``create()`` stored under the lock: one value per key, ever (for cheap
        constructors that must not run twice, like a live source)."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            return self._put(key, create())

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        """The entry, or ``compute()`` run outside the lock (other keys are served meanwhile; two
        runs racing on one key may both compute it, the first stored wins)."""
        found = self.get(key)
        if found is not None:
            return found
        value = compute()
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            return self._put(key, value)

    def pop(self, key: K) -> V | None:
        """Remove and return the entry, or None."""
        with self._lock:
            return self._entries.pop(key, None)

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._entries.clear()

    def _put(self, key: K, value: V) -> V:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value
