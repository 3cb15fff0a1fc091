"""Interval arithmetic on the GNO ranges of a GTID set: sorted tuples of inclusive
``(first, last)`` ranges, as in the text form ``uuid:1-5:7``."""
from __future__ import annotations

from typing import Iterable

# (first, last): an inclusive range of GNOs, as in the text form.
Interval = tuple[int, int]


def merge_intervals(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    """Sort and coalesce overlapping or adjacent ranges (1-5 and 6-8 give 1-8)."""
    out: list[list[int]] = []
    for first, last in sorted(intervals):
        if out and first <= out[-1][1] + 1:
            if last > out[-1][1]:
                out[-1][1] = last
        else:
            out.append([first, last])
    return tuple((a, b) for a, b in out)


def intersect_intervals(a: tuple[Interval, ...], b: tuple[Interval, ...]) -> tuple[Interval, ...]:
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def subtract_intervals(a: tuple[Interval, ...], b: tuple[Interval, ...]) -> tuple[Interval, ...]:
    out: list[Interval] = []
    j = 0
    for first, last in a:
        while j < len(b) and b[j][1] < first:
            j += 1
        k = j
        cur = first
        while k < len(b) and b[k][0] <= last:
            if b[k][0] > cur:
                out.append((cur, b[k][0] - 1))
            cur = max(cur, b[k][1] + 1)
            k += 1
        if cur <= last:
            out.append((cur, last))
    return tuple(out)


def contains_gno(intervals: tuple[Interval, ...], gno: int) -> bool:
    lo, hi = 0, len(intervals)
    while lo < hi:
        mid = (lo + hi) // 2
        first, last = intervals[mid]
        if gno < first:
            hi = mid
        elif gno > last:
            lo = mid + 1
        else:
            return True
    return False


__all__ = ["Interval", "contains_gno", "intersect_intervals", "merge_intervals", "subtract_intervals"]
