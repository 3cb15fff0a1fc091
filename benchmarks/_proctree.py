"""Memory of a process and all its descendants, sampled from outside through /proc.

:class:`TreeSampler` is a thread that, every ``interval`` seconds (50 ms by default), finds
the process ``pid`` and its descendants (``/proc/<pid>/task/*/children`` where the kernel
has it, otherwise by the parent pid in every ``/proc/<n>/stat``) and reads, for each one:

* ``VmRSS`` and ``VmHWM`` from ``/proc/<n>/status``;
* ``Pss`` from ``/proc/<n>/smaps_rollup``: the proportional set size, in which a page
  shared by k processes counts 1/k in each.  Forked children share their parent's pages
  copy-on-write, so RSS summed over the tree counts those pages once per process; the
  summed PSS counts them once and is the fair figure of the tree's memory.

Each sample sums RSS and PSS over the tree and counts its live processes (zombies, which
hold no memory, are left out).  :meth:`TreeSampler.stop` returns a :class:`TreeReport` with
the peaks (summed RSS, summed PSS, process count), each process's largest ``VmHWM``, RSS and
PSS seen, the time series when asked for, and the processes of the tree still alive after
the root exited (children that outlived their parent are reparented elsewhere, so they are
remembered by pid and start time).

Stop the sampler after the root process has exited but before it is reaped (see
:func:`wait_exited`), so that its pid cannot be reused while it is still being sampled.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

_CHILDREN_FILES = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


@dataclass
class ProcessPeak:
    pid: int
    name: str
    first_seen: float
    last_seen: float
    vmhwm_mb: float = 0.0   # the largest VmHWM read (the process's own peak RSS)
    rss_mb: float = 0.0     # the largest VmRSS sampled
    pss_mb: float = 0.0     # the largest Pss sampled


@dataclass
class TreeReport:
    peak_rss_mb: float = 0.0      # largest RSS summed over the tree in one sample
    peak_pss_mb: float = 0.0      # largest PSS summed over the tree in one sample
    max_processes: int = 0        # most live processes in one sample (the root included)
    samples: int = 0
    seconds: float = 0.0
    pss_available: bool = True    # smaps_rollup could be read
    processes: list = field(default_factory=list)   # ProcessPeak, root first, by first seen
    #: (seconds, summed RSS MB, summed PSS MB, processes, root RSS MB, root PSS MB)
    series: list = field(default_factory=list)
    #: (pid, name) of descendants still running after the root exited
    survivors: list = field(default_factory=list)

    @property
    def workers(self) -> int:
        """Most descendants alive at once."""
        return max(0, self.max_processes - 1)

    def at(self, fraction: float) -> Optional[tuple]:
        """The sample at ``fraction`` (0..1) of the series."""
        if not self.series:
            return None
        return self.series[min(len(self.series) - 1, int(fraction * len(self.series)))]


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as fh:
            return fh.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None


def _stat(pid: int) -> Optional[tuple]:
    """(name, state, ppid, start time in clock ticks) of a process, or None when it is gone."""
    text = _read(f"/proc/{pid}/stat")
    if not text:
        return None
    head, _, rest = text.rpartition(")")
    name = head.partition("(")[2]
    fields = rest.split()
    # after the name: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime priority nice num_threads itrealvalue starttime ...
    return name, fields[0], int(fields[1]), int(fields[19])


def _children_of(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        text = _read(f"/proc/{pid}/task/{tid}/children")
        if text:
            out.extend(int(c) for c in text.split())
    return out


def descendants(root: int) -> list[int]:
    """``root`` (when it exists) and every process below it."""
    if _CHILDREN_FILES:
        found, todo = [], [root]
        while todo:
            pid = todo.pop()
            if not os.path.exists(f"/proc/{pid}"):
                continue
            found.append(pid)
            todo.extend(_children_of(pid))
        return found
    children: dict[int, list[int]] = {}
    alive = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = _stat(int(entry))
        if st is None:
            continue
        alive.add(int(entry))
        children.setdefault(st[2], []).append(int(entry))
    if root not in alive:
        return []
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _status_kb(text: str, *fields: str) -> dict:
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in fields:
            values[key] = int(rest.split()[0])
    return values


def own_status_mb(field: str = "VmHWM") -> float:
    """A memory field of this process's /proc status (VmHWM: its peak RSS), in MB."""
    return _status_kb(_read("/proc/self/status") or "", field).get(field, 0) / 1024


def _pss_kb(pid: int) -> Optional[int]:
    text = _read(f"/proc/{pid}/smaps_rollup")
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return None


class TreeSampler(threading.Thread):
    """Samples the memory of process ``pid`` and its descendants every ``interval`` seconds."""

    def __init__(self, pid: int, interval: float = 0.05, series: bool = True) -> None:
        super().__init__(daemon=True, name=f"proctree-{pid}")
        self.root = pid
        self.interval = interval
        self.keep_series = series
        self.report = TreeReport()
        self._seen: dict[tuple, ProcessPeak] = {}   # (pid, start time) -> peaks
        self._stopping = threading.Event()
        self.t0 = time.perf_counter()

    def sample(self) -> None:
        t = time.perf_counter() - self.t0
        rss_sum = pss_sum = 0
        root_rss = root_pss = 0
        live = 0
        for pid in descendants(self.root):
            st = _stat(pid)
            status = _read(f"/proc/{pid}/status")
            if st is None or status is None or st[1] in ("Z", "X"):
                continue
            kb = _status_kb(status, "VmRSS", "VmHWM")
            if "VmRSS" not in kb:  # a kernel thread, or exiting
                continue
            pss = _pss_kb(pid)
            if pss is None:
                self.report.pss_available = False
                pss = kb["VmRSS"]
            live += 1
            rss_sum += kb["VmRSS"]
            pss_sum += pss
            if pid == self.root:
                root_rss, root_pss = kb["VmRSS"], pss
            peak = self._seen.get((pid, st[3]))
            if peak is None:
                peak = self._seen[(pid, st[3])] = ProcessPeak(pid, st[0], t, t)
            peak.last_seen = t
            peak.name = st[0]
            peak.vmhwm_mb = max(peak.vmhwm_mb, kb.get("VmHWM", 0) / 1024)
            peak.rss_mb = max(peak.rss_mb, kb["VmRSS"] / 1024)
            peak.pss_mb = max(peak.pss_mb, pss / 1024)
        if not live:
            return
        r = self.report
        r.samples += 1
        r.peak_rss_mb = max(r.peak_rss_mb, rss_sum / 1024)
        r.peak_pss_mb = max(r.peak_pss_mb, pss_sum / 1024)
        r.max_processes = max(r.max_processes, live)
        if self.keep_series:
            r.series.append((t, rss_sum / 1024, pss_sum / 1024, live, root_rss / 1024,
                             root_pss / 1024))

    def run(self) -> None:
        while True:
            self.sample()
            if self._stopping.wait(self.interval):
                return

    def stop(self) -> TreeReport:
        """Take a last sample and return the report (see the module's docstring)."""
        self._stopping.set()
        if self.is_alive():
            self.join()
        self.sample()
        r = self.report
        r.seconds = time.perf_counter() - self.t0
        r.processes = sorted(self._seen.values(),
                             key=lambda p: (p.pid != self.root, p.first_seen, p.pid))
        for (pid, started), peak in self._seen.items():
            if pid == self.root:
                continue
            st = _stat(pid)
            if st is not None and st[3] == started and st[1] not in ("Z", "X"):
                r.survivors.append((pid, peak.name))
        return r


def wait_exited(pid: int) -> None:
    """Wait until child ``pid`` has exited, without reaping it (``os.wait4`` does that)."""
    while True:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            return
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def describe(report: TreeReport) -> str:
    """One line per process: its pid and name, and its largest VmHWM, RSS and PSS."""
    lines = []
    for i, p in enumerate(report.processes):
        role = "dump" if i == 0 else f"worker {i}"
        lines.append(f"{role:<9} pid {p.pid:<7} VmHWM {p.vmhwm_mb:6.0f} MB  max RSS "
                     f"{p.rss_mb:6.0f} MB  max PSS {p.pss_mb:6.0f} MB  "
                     f"alive {p.first_seen:6.1f}s .. {p.last_seen:6.1f}s")
    return "\n".join(lines)
