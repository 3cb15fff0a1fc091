"""A small cache of the view: values kept for ``[binlog] ui_cache_seconds``."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from ..utils.settings import float_setting


class TtlCache:
    """Values kept for ``[binlog] ui_cache_seconds`` by key, at most ``size`` keys, one
    computation per key at a time. :data:`probe_cache` holds what was read of each source
    (server position and lag, checkpoint store, staging listings), shared by every user's page:
    N users watching the page probe a production server as often as one; the REST reads and the
    access filter stay per user (the view's own cache, by user)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._entries: dict = {}  # key -> [lock, at, value]

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        ttl = float_setting("ui_cache_seconds", zero=True)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = [threading.Lock(), 0.0, None]
                while len(self._entries) > self.size:
                    self._entries.pop(next(iter(self._entries)))
        with entry[0]:
            if entry[2] is None or time.monotonic() - entry[1] >= ttl:
                entry[2] = compute()
                entry[1] = time.monotonic()
            return entry[2]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
