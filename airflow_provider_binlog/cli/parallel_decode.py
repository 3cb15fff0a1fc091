"""``decode --format jsonl`` of one binlog file in several processes: the file is cut at
transaction starts into parts of a few megabytes, worker processes (forked) take the parts in
turn as they become free and render them, and each part's lines are written to standard
output in file order: a worker writes its part's lines as they come once the part before is
written (a counter the workers share), and holds them until then. The output is the same
bytes as one process writes, and memory holds at most one part's lines per worker.

An error in a part (a corrupt event) ends the output where one process would end it: the
lines of that part before the error are written, then the error, and no later part."""
from __future__ import annotations

import mmap
import os
import signal
import struct
import sys
import time
import traceback
from typing import Callable, Optional

from ..codec.boundaries import parts as cut_parts
from ..codec.boundaries import transaction_starts

#: Bytes of binlog per part.
PART_BYTES = 8 * 1024 * 1024


def plan_parts(path: str, start: Optional[int], stop: Optional[int], part_bytes: Optional[int] = None
               ) -> Optional[list[tuple[int, int]]]:
    """The parts of the file (``[start, end)`` offsets, of about ``part_bytes``, by default
    :data:`PART_BYTES`), or None when it is not cut (smaller than two parts, compressed,
    encrypted, without transaction markers)."""
    part_bytes = part_bytes or PART_BYTES
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != b"\xfebin":  # e.g. gzip: read as a stream, in one process
                return None
            size = os.fstat(fh.fileno()).st_size
            if size < 2 * part_bytes:
                return None
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                begin = 4 if start is None else start
                starts = transaction_starts(data, begin, stop)  # type: ignore[arg-type]
    except (OSError, ValueError):
        return None  # the decoder reports what is wrong with the file
    if not starts:
        return None
    end = size if stop is None else min(stop, size)
    part_bytes = max(part_bytes, size // (_MAX_PARTS - 1) + 1)
    found = cut_parts(starts, 4 if start is None else start, end, part_bytes)
    return found if len(found) > 1 else None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_INDEX = struct.Struct("<I")
_WRITTEN = struct.Struct("<q")  # parts written so far; -1: stop (an error, or the reader left)
_MAX_PARTS = 16_000  # part indices queued in one pipe buffer (64 KiB)
Render = Callable[[int, int, Callable[[bytes], None]], Optional[str]]


def run_parts(parts: list[tuple[int, int]], workers: int, render: Render) -> int:
    """Render ``parts`` with ``workers`` forked processes and write their output to file
    descriptor 1 in order. ``render(start, stop, write)`` passes a part's output to ``write``
    and returns None, or the error message (for standard error) after the output it could
    write. Returns the exit status: 0, or 2 after an error."""
    if len(parts) > _MAX_PARTS:
        raise ValueError(f"{len(parts)} parts: at most {_MAX_PARTS}")
    sys.stdout.flush()
    sys.stderr.flush()
    workers = max(1, min(workers, len(parts)))
    shared = mmap.mmap(-1, _WRITTEN.size)  # anonymous and shared with the forked workers
    _WRITTEN.pack_into(shared, 0, 0)
    queue_r, queue_w = os.pipe()
    os.write(queue_w, b"".join(_INDEX.pack(k) for k in range(len(parts))))
    os.close(queue_w)  # a worker reading nothing more has no part left
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child (its outcome is what the tests check)
            code = 3
            try:
                code = _worker(parts, render, queue_r, shared)
            except BaseException:  # noqa: BLE001 - reported, then the parent stops the others
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        children.append(pid)
    os.close(queue_r)
    failed = False
    codes = []
    remaining = set(children)
    while remaining:
        pid, raw = os.waitpid(-1, 0)
        if pid not in remaining:
            continue
        remaining.discard(pid)
        code = os.waitstatus_to_exitcode(raw)
        codes.append(code)
        if code not in (0, 2) and not failed:  # a worker died: the others would wait for it
            failed = True
            for other in remaining:
                try:
                    os.kill(other, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    shared.close()
    if failed:
        print("error: a decoding process ended abnormally", file=sys.stderr)
        return 2
    return 2 if 2 in codes else 0


def _worker(parts: list[tuple[int, int]], render: Render, queue: int, shared: mmap.mmap) -> int:
    while True:
        claimed = os.read(queue, _INDEX.size)  # (reads of a few bytes from a pipe are whole)
        if not claimed:
            return 0
        (k,) = _INDEX.unpack(claimed)
        held: list[bytes] = []

        def write(data: bytes) -> None:
            """Write once the part before is written (the worker's turn), else hold."""
            if _WRITTEN.unpack_from(shared, 0)[0] == k:
                if held:
                    for chunk in held:
                        _write_all(1, chunk)
                    held.clear()
                _write_all(1, data)
            else:
                held.append(data)
        try:
            error = render(parts[k][0], parts[k][1], write)
            while True:  # the part before must be written first
                written = _WRITTEN.unpack_from(shared, 0)[0]
                if written == k or written < 0:
                    break
                time.sleep(0.0002)
            if written < 0:  # an earlier part failed, or the reader went away
                return 0
            write(b"")  # what is held
        except BrokenPipeError:
            _WRITTEN.pack_into(shared, 0, -1)
            return 0
        if error is not None:
            sys.stderr.write(error + "\n")
            sys.stderr.flush()
            _WRITTEN.pack_into(shared, 0, -1)
            return 2
        _WRITTEN.pack_into(shared, 0, k + 1)
