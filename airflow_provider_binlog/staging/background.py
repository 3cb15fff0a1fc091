"""Row groups written on a thread of their own while the dump decodes the next rows."""
from __future__ import annotations

import queue
import threading
from typing import Callable, Optional


class BackgroundWriter:
    """Writes row groups on one thread while the caller decodes the next rows.

    Parquet encoding and compression release the GIL, so they run on the second core. At
    most ``depth`` row groups wait (memory stays bounded); the first write error is raised
    by the next :meth:`submit` or :meth:`drain`."""

    def __init__(self, depth: int = 2) -> None:
        self._jobs: queue.Queue[Optional[Callable[[], object]]] = queue.Queue(maxsize=depth)
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if self._error is None:
                    job()
            except BaseException as exc:  # reported to the dump's thread
                self._error = exc
            finally:
                self._jobs.task_done()

    def submit(self, job: Callable[[], object]) -> None:
        self._raise()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="staging-writer", daemon=True)
            self._thread.start()
        self._jobs.put(job)

    def drain(self) -> None:
        """Wait for every submitted write; raise the first error."""
        if self._thread is not None:
            self._jobs.join()
        self._raise()

    def stop(self, *, discard: bool = False) -> None:
        """End the thread after the submitted writes (skipped with ``discard``)."""
        if self._thread is not None:
            if discard and self._error is None:
                self._error = RuntimeError("the staging writer was aborted")
            self._jobs.put(None)
            self._thread.join()
            self._thread = None

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error


__all__ = ["BackgroundWriter"]
