"""Tables of a batch worked on at once, from several threads: Iceberg commits are per table
(and Spark schedules the jobs of all threads of its one application together), so a batch
touching many tables costs about as much as its largest tables instead of their sum."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, Sequence, TypeVar

Item = TypeVar("Item")
R = TypeVar("R")


def each_table(fn: Callable[[Item], R], items: Sequence[Item], threads: int,
               thread_target: Optional[Callable[[Callable[..., Any]], Callable[..., Any]]] = None) -> list[R]:
    """``[fn(item) for item in items]``, in up to ``threads`` threads; results in the order of
    ``items``.

    Once a call fails, the calls not started yet are not made; the ones running finish (a
    table's commit is atomic: it lands or it does not), then the first error (in the order of
    ``items``) is raised. ``thread_target`` wraps what each thread runs (the Spark engine's
    ``inheritable_thread_target``: the thread inherits the caller's Spark local properties,
    and its JVM thread ends with it)."""
    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    failed = threading.Event()
    skipped = object()

    def call(item: Item) -> object:
        if failed.is_set():
            return skipped
        try:
            return fn(item)
        except BaseException:
            failed.set()
            raise

    target = call if thread_target is None else thread_target(call)
    with ThreadPoolExecutor(max_workers=min(threads, len(items)), thread_name_prefix="binlog-merge") as pool:
        futures = [pool.submit(target, item) for item in items]
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    return [future.result() for future in futures]  # type: ignore[misc]
