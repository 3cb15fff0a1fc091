"""Write a file so that readers see the old content or the new, never a part: a temporary file
in the same directory, flushed to disk, renamed over the target, the directory flushed too.
Used for staging manifests and checkpoint files alike. Imports nothing of the provider."""
from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from typing import Optional, Union


def write_atomically(path: Union[str, "os.PathLike[str]"], data: Union[str, bytes], *,
                     temp_prefix: Optional[str] = None) -> None:
    """Replace ``path`` with ``data`` atomically; the file is created with mode 0600.
    ``temp_prefix`` names the temporary file (default ``.<name>~``), so that a crashed
    writer's leftovers can be recognised."""
    target = os.fspath(path)
    directory = os.path.dirname(target) or "."
    prefix = temp_prefix if temp_prefix is not None else f".{os.path.basename(target)}~"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_directory(directory)


def fsync_directory(directory: str) -> None:
    """Flush a directory's entries (a rename) to disk, where the file system can."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems cannot fsync a directory
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


__all__ = ["fsync_directory", "write_atomically"]
