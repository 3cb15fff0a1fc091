"""The memory of the running process, for the log lines that report what a snapshot or a merge
driver held: its resident set now and at its peak, in MiB (Linux; elsewhere the peak only)."""
from __future__ import annotations

import resource
import sys
from typing import Optional


def current_rss_mib() -> Optional[float]:
    """The process's resident set now (``VmRSS`` of ``/proc/self/status``); None where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def peak_rss_mib() -> float:
    """The process's peak resident set since it started (``ru_maxrss``: KiB on Linux, bytes on
    macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024
