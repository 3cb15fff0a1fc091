"""Opening a checkpoint store from its location: a directory, ``file://``, or a SQLAlchemy URL."""
from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from .file_store import FileCheckpointStore
from .store import CheckpointStore

SUPPORTED_STORE_SCHEMES = ("file", "postgresql", "sqlite")


def open_checkpoint_store(uri: str | os.PathLike[str], **options: Any) -> CheckpointStore:
    """Open a store from a plain path or a ``file://`` URI (files, the default), or from a
    SQLAlchemy URL, ``postgresql[+driver]://...`` or ``sqlite:///path`` (a
    :class:`~airflow_provider_binlog.checkpoints.sql_store.SqlCheckpointStore`); ``options`` go to
    the store's constructor (e.g. ``history_limit``)."""
    text = os.fspath(uri)
    if not text:
        raise ValueError("empty checkpoint store location; give a directory path or file:///path")
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", text)
    if m is None:
        return FileCheckpointStore(text, **options)
    scheme = m.group(1).lower()
    if scheme.split("+", 1)[0] in ("postgresql", "sqlite"):
        from .sql_store import SqlCheckpointStore

        return SqlCheckpointStore(text, **options)
    if scheme != "file":
        raise ValueError(f"unsupported checkpoint store scheme {scheme!r}; supported: "
                         f"a plain directory path or {', '.join(s + '://' for s in SUPPORTED_STORE_SCHEMES)}")
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise ValueError(f"file:// URI {text!r} names host {parts.netloc!r}; only local paths "
                         f"are supported (file:///path)")
    path = unquote(parts.path)
    if not path:
        raise ValueError(f"file:// URI {text!r} has no path")
    return FileCheckpointStore(path, **options)
