"""A budget of bytes shared by the threads that commit a batch's tables: a direct commit holds
the staged bytes it folds in memory, so the tables committed at once together hold at most the
budget (a table larger than the whole budget waits until it can have all of it)."""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class ByteBudget:
    """``capacity`` bytes handed out by :meth:`hold`, blocking while too few are free."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"a byte budget needs a positive capacity, not {capacity}")
        self.capacity = capacity
        self._free = capacity
        self._changed = threading.Condition()

    @property
    def free(self) -> int:
        with self._changed:
            return self._free

    @contextlib.contextmanager
    def hold(self, size: int) -> Iterator[int]:
        """Hold ``size`` bytes (at most the capacity, at least 0) for the ``with`` block; waits
        until they are free. Yields the bytes held."""
        want = max(0, min(size, self.capacity))
        with self._changed:
            self._changed.wait_for(lambda: self._free >= want)
            self._free -= want
        try:
            yield want
        finally:
            with self._changed:
                self._free += want
                self._changed.notify_all()


__all__ = ["ByteBudget"]
