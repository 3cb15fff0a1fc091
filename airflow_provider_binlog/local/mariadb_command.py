"""The command line of a private ``mariadbd``: where its executables are (``PATH``, the usual
system directories, or the ``MARIADBD`` and ``MARIADB_INSTALL_DB`` environment variables) and
how server options become its flags."""

from __future__ import annotations

import os
import shutil
from typing import Any, Mapping

__all__ = ["BASE_OPTIONS", "find_binary", "mariadb_binaries", "normalize_options", "option_args"]

#: Options every server gets unless the caller overrides them: small
#: memory, no fsync, utf8mb4 as on a Debian-configured server.
BASE_OPTIONS: dict[str, str] = {
    "innodb_buffer_pool_size": "32M",
    "innodb_log_file_size": "8M",
    "innodb_log_buffer_size": "4M",
    "innodb_flush_log_at_trx_commit": "2",
    "innodb_doublewrite": "OFF",
    "innodb_use_native_aio": "OFF",
    "sync_binlog": "0",
    "performance_schema": "OFF",
    "skip_name_resolve": "ON",
    "character_set_server": "utf8mb4",
    "collation_server": "utf8mb4_general_ci",
    "max_connections": "200",
}

_SEARCH_DIRS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")


def find_binary(name: str, env_var: str | None = None) -> str | None:
    """Return the path of executable ``name``, or None if it is absent."""
    if env_var and os.environ.get(env_var):
        path = os.environ[env_var]
        return path if os.access(path, os.X_OK) else None
    found = shutil.which(name)
    if found:
        return found
    for d in _SEARCH_DIRS:
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    return None


def mariadb_binaries() -> tuple[str | None, str | None]:
    """``(mariadbd, mariadb-install-db)`` paths; None for a missing one."""
    return (
        find_binary("mariadbd", "MARIADBD"),
        find_binary("mariadb-install-db", "MARIADB_INSTALL_DB"),
    )


def normalize_options(options: Mapping[str, Any] | None) -> dict[str, str | None]:
    """Server options as :class:`~.mariadb.MariaDBServer` keeps them in ``options``: names in
    lower case with underscores and no leading dashes (``--Binlog-Checksum`` becomes
    ``binlog_checksum``), values as strings, ``True``/``False`` as ``ON``/``OFF``,
    ``None`` (a bare flag) kept.  Equal dicts start equally configured servers."""
    out: dict[str, str | None] = {}
    for key, value in (options or {}).items():
        name = key.strip().lstrip("-").replace("-", "_").lower()
        if value is True:
            value = "ON"
        elif value is False:
            value = "OFF"
        elif value is not None:
            value = str(value)
        out[name] = value
    return out


def option_args(options: Mapping[str, str | None]) -> list[str]:
    """``mariadbd`` command-line flags for normalized options (``None`` gives a bare flag)."""
    args = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        args.append(flag if value is None else f"{flag}={value}")
    return args
