"""Binlog file names and the order of positions in a binlog series.

A position is a binlog file and a byte offset in it; files of one series share a base name
and number up (``mysql-bin.000009`` < ``mysql-bin.000010`` < ``mysql-bin.1000000``).
:func:`position_key` is the one sort key of a position; checkpoints, the dump and the staging
envelope (``_binlog_seq``) all use it.
"""
from __future__ import annotations

import re

_FILE_RE = re.compile(r"(?P<base>[^\s/\\:]+)\.(?P<index>\d+)")


def split_binlog_file_name(name: str) -> tuple[str, int]:
    """``mysql-bin.000010`` -> (``mysql-bin``, 10)."""
    m = _FILE_RE.fullmatch(name)
    if not m:
        raise ValueError(f"invalid binlog file name {name!r}: expected basename.number, "
                         f"e.g. mysql-bin.000003")
    return m.group("base"), int(m.group("index"))


def binlog_sequence(name: str) -> int:
    """The number of a binlog file (``mysql-bin.000042`` -> 42)."""
    return split_binlog_file_name(name)[1]


def position_key(file: str, pos: int) -> tuple[int, int]:
    """The sort key of a position within one binlog series."""
    return binlog_sequence(file), pos


__all__ = ["binlog_sequence", "position_key", "split_binlog_file_name"]
