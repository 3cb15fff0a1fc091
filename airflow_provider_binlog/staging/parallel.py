"""Stage rows events in worker processes, so that decoding runs on several cores.

Decoding row images is pure Python and holds the GIL; reading the stream, checking CRCs and
following transactions is cheap. With workers, the dump's process hands each rows event
(undecoded, see :class:`~..codec.rows.DeferredRows`) to a worker, round-robin in batches of
about ``batch_bytes``; each worker decodes the rows straight into columns and writes its own
part files (``part-<generation>-<worker>.parquet``) into the dump's work directory. Every
row carries its binlog position, so the order of the files of one layout does not matter;
the files of a new layout come after those of the previous one in the manifest.

A worker reports its row count after each batch and, when closed, its files, counts per table
and counters. A worker's error (a corrupt event, a value that cannot be staged) is raised in
the dump's process at its next batch or at :meth:`WorkerPool.close`. A worker whose dump
process died (SIGKILL included) sees the end of its pipe and exits without writing anything
more; the work directory is then removed like any dead dump's.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Optional, Sequence, cast

from ..codec.events import TableMap
from ..codec.rows import DeferredRows
from ..errors import ProviderError
from .convert import Counters
from .masking import Masking
from .parts import PART_FILE_BYTES, Stager

#: (schema, table)
_Key = tuple[str, str]
#: the fields of a DeferredRows but its table map and decoder: (data, start, end, present,
#: present_after, flavor, source, pos)
_RawRows = tuple[bytes, int, int, int, Optional[int], Optional[str], Optional[str], int]
#: one rows event sent to a worker: (key, generation, table map or None when the worker has
#: it, kind, size, envelope, raw rows or None, decoded rows or None)
_Item = tuple[_Key, int, Optional[TableMap], str, int, tuple[Any, ...], Optional[_RawRows], Any]


class StagingWorkerError(ProviderError, RuntimeError):
    """A staging worker process ended without reporting its files."""


@dataclass
class PoolResult:
    #: (generation, worker, file description) per table
    files: dict[_Key, list[tuple[int, int, dict[str, Any]]]] = field(default_factory=dict)
    counts: dict[_Key, dict[str, int]] = field(default_factory=dict)
    invalid_temporals: int = 0
    replaced_text: int = 0
    peak_rss_mb: list[float] = field(default_factory=list)
    #: the Arrow allocator of each worker
    allocators: list[str] = field(default_factory=list)


def _peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _use_returning_allocator() -> None:
    """Give Arrow an allocator that returns freed memory to the system: pyarrow's default
    (mimalloc) keeps about 35 MB more per worker at the same throughput. Only in the
    worker, which is this package's own process."""
    import pyarrow as pa

    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # a pyarrow built without jemalloc
        pa.set_memory_pool(pa.system_memory_pool())


def _allocator() -> str:
    import pyarrow as pa

    return cast(str, pa.default_memory_pool().backend_name)


def _work(conn: Connection, close_in_child: Sequence[Any], work_dir: str, index: int, row_group_rows: int,
          row_group_bytes: int, masking: Optional[Masking] = None, part_file_bytes: int = PART_FILE_BYTES) -> None:
    """A worker's loop: stage the batches it receives until told to close."""
    for fd in close_in_child:
        try:
            if hasattr(fd, "close"):
                fd.close()
            else:
                os.close(fd)
        except OSError:
            pass

    _use_returning_allocator()
    counters = Counters()
    stager = Stager(Path(work_dir), counters, row_group_rows=row_group_rows,
                     row_group_bytes=row_group_bytes, suffix=f"-{index}", masking=masking,
                     part_file_bytes=part_file_bytes)
    table_maps: dict[_Key, TableMap] = {}
    decoders: dict[Any, Any] = {}
    rows = 0
    failed = False
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                stager.abort()  # the dump process is gone: nothing of this is published
                return
            if message[0] == "events":
                if failed:
                    continue
                try:
                    items: list[_Item] = message[1]
                    for key, generation, tm, kind, size, envelope, raw, decoded in items:
                        if tm is None:
                            tm = table_maps[key]
                        else:
                            table_maps[key] = tm
                        deferred = None if raw is None else DeferredRows.rebuild(tm, *raw, decoders)
                        rows += stager.add(tm, generation, kind, size, envelope, deferred, decoded)
                    conn.send(("rows", rows))
                except Exception as exc:  # reported to the dump, which fails with it
                    failed = True
                    conn.send(("error", exc))
            elif message[0] == "close":
                if failed:
                    stager.abort()
                    conn.send(("closed", None))
                    return
                try:
                    files = stager.close()
                except Exception as exc:
                    conn.send(("error", exc))
                    return
                conn.send(("closed", {
                    "files": {key: [(g, index, f) for g, f in parts] for key, parts in files.items()},
                    "counts": stager.counts, "invalid_temporals": counters.invalid_temporals,
                    "replaced_text": counters.replaced_text, "peak_rss_mb": _peak_rss_mb(),
                    "allocator": _allocator()}))
                return
    finally:
        conn.close()


class WorkerPool:
    """``workers`` staging processes fed by :meth:`submit`, in batches."""

    def __init__(self, work_dir: Path, workers: int, *, row_group_rows: int,
                 row_group_bytes: int, batch_bytes: int = 256 << 10,
                 inherited_fds: tuple[Any, ...] = (), masking: Optional[Masking] = None,
                 part_file_bytes: int = PART_FILE_BYTES) -> None:
        if workers < 1:
            raise ValueError(f"workers must be 1 or more, not {workers}")
        methods = multiprocessing.get_all_start_methods()
        # fork starts a worker in milliseconds; the child only runs _work and leaves with
        # os._exit, never touching what the parent's other threads may hold
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self.batch_bytes = batch_bytes
        self._conns: list[Connection] = []
        self._procs: list[BaseProcess] = []
        self._batches: list[list[_Item]] = []
        self._sizes: list[int] = []
        self._sent_maps: list[dict[_Key, TableMap]] = []
        self._rows: list[int] = []
        self._next = 0
        self._closed = False
        forked = ctx.get_start_method() == "fork"
        if forked:
            # the objects that exist now stay out of the workers' garbage collections: a
            # collection would touch (and so copy) every page the worker shares with the dump
            gc.freeze()
        pipes = [ctx.Pipe() for _ in range(workers)]
        # a forked worker holds copies of every descriptor: it closes the dump's ends of the
        # pipes (so that it sees EOF when the dump dies) and its lock on the work directory
        inherited = [parent for parent, _ in pipes] + list(inherited_fds) if forked else []
        for index, (parent, child) in enumerate(pipes):
            proc = ctx.Process(target=_child_main, name=f"binlog-staging-{index}", daemon=True,
                               args=(forked, child, inherited, str(work_dir), index,
                                     row_group_rows, row_group_bytes, masking, part_file_bytes))
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
            self._batches.append([])
            self._sizes.append(0)
            self._sent_maps.append({})
            self._rows.append(0)
        if forked:
            gc.unfreeze()

    def rows_reported(self) -> int:
        self._poll()
        return sum(self._rows)

    def submit(self, tm: TableMap, generation: int, kind: str, size: int, envelope: tuple[Any, ...],
               deferred: Optional[DeferredRows], rows: Any) -> None:
        k = self._next
        key = (tm.schema, tm.table)
        sent = self._sent_maps[k]
        ship_map = None if sent.get(key) is tm else tm
        sent[key] = tm
        raw: Optional[_RawRows] = None
        if deferred is not None:
            raw = (deferred.data, deferred.start, deferred.end, deferred.present,
                   deferred.present_after, deferred.flavor, deferred.source, deferred.pos)
        self._batches[k].append((key, generation, ship_map, kind, size, envelope, raw, rows))
        self._sizes[k] += size
        if self._sizes[k] >= self.batch_bytes:
            self._send(k)
            self._next = (k + 1) % len(self._conns)

    def _send(self, k: int) -> None:
        self._poll()
        if not self._batches[k]:
            return
        try:
            self._conns[k].send(("events", self._batches[k]))
        except (OSError, EOFError) as exc:
            self._poll()  # an error it reported before dying explains it best
            raise StagingWorkerError(f"staging worker {k} exited (exit code "
                                     f"{self._procs[k].exitcode}): {exc}") from None
        self._batches[k] = []
        self._sizes[k] = 0

    def _handle(self, k: int, message: tuple[Any, ...]) -> Optional[dict[str, Any]]:
        if message[0] == "rows":
            self._rows[k] = message[1]
        elif message[0] == "error":
            self.abort()
            raise message[1]
        elif message[0] == "closed":
            return cast("dict[str, Any]", message[1])
        return None

    def _poll(self) -> None:
        if self._closed:
            return
        for k, conn in enumerate(self._conns):
            while conn.poll():
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    break
                self._handle(k, message)

    def close(self) -> PoolResult:
        """Send what is left, close the workers' files and collect them."""
        for k in range(len(self._conns)):
            self._send(k)
        for k, conn in enumerate(self._conns):
            try:
                conn.send(("close",))
            except OSError as exc:  # the worker is gone: its report (if any) says why
                self._poll()
                self.abort()
                raise StagingWorkerError(f"staging worker {k} exited (exit code "
                                         f"{self._procs[k].exitcode}): {exc}") from None
        result = PoolResult()
        for k, conn in enumerate(self._conns):
            report = None
            while report is None:
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    self.abort()
                    raise StagingWorkerError(f"staging worker {k} exited (exit code "
                                             f"{self._procs[k].exitcode}) before reporting its files") from None
                report = self._handle(k, message)
            for key, files in report["files"].items():
                result.files.setdefault(key, []).extend(files)
            for key, counts in report["counts"].items():
                total = result.counts.setdefault(key, {"insert": 0, "update": 0, "delete": 0})
                for kind, n in counts.items():
                    total[kind] += n
            result.invalid_temporals += report["invalid_temporals"]
            result.replaced_text += report["replaced_text"]
            result.peak_rss_mb.append(report["peak_rss_mb"])
            result.allocators.append(report["allocator"])
        for proc in self._procs:
            proc.join(10)
        self._closed = True
        return result

    def abort(self) -> None:
        """Stop the workers; their files are left for the caller to remove."""
        if self._closed:
            return
        self._closed = True
        for conn in self._conns:
            try:
                conn.close()
            except OSError:
                pass
        for proc in self._procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def _child_main(forked: bool, conn: Connection, close_in_child: Sequence[Any], work_dir: str, index: int,
                row_group_rows: int, row_group_bytes: int, masking: Optional[Masking] = None,
                part_file_bytes: int = PART_FILE_BYTES) -> None:
    code = 0
    try:
        _work(conn, close_in_child, work_dir, index, row_group_rows, row_group_bytes, masking, part_file_bytes)
    except BaseException:
        code = 1
    finally:
        if forked:
            os._exit(code)  # no interpreter shutdown in a forked copy of the dump process
