"""What is read from a staging location is input, not the provider's own state: whoever can
write the location (an executor's role, another application sharing the bucket) can put
anything there. Names read from it are checked against the names the provider writes before
they are used to write a local file, download or upload anything; documents are read only up
to a bound; batch names are recognised by the grammar of the dump ids the provider makes."""
from __future__ import annotations

import json
import re
from typing import Any, Optional

from ..errors import ProviderError

#: the largest JSON document (a manifest, sealed progress, a marker) read from a location:
#: a manifest with the schema history of thousands of tables stays well below it
MAX_DOCUMENT_BYTES = 64 << 20

#: an attempt id: the uploads of one publish (or one seal) of a batch
ATTEMPT_ID = re.compile(r"[0-9a-f]{32}")
#: a staged file's name in its table's folder (``part-00000-1-s00001-r00002.parquet``)
_FILE_NAME = re.compile(r"(?:part|rows)-[0-9A-Za-z_-]+\.parquet")
#: a table's folder (``<schema>.<table>``, each percent-encoded)
_FOLDER = re.compile(r"[0-9A-Za-z_.~%-]+")
#: a binlog position in a dump id: the file name (``mysql-bin.000042``) and the offset
_AT = r"[0-9A-Za-z_][0-9A-Za-z_.-]*\.[0-9]+\.[0-9]+"
#: the names of batches: ``<start>-<end>`` of a dump (``gtid.0-<end>`` from a GTID state),
#: ``snapshot-<at>[-<at>]-<time>`` of a snapshot
BATCH_NAME = re.compile(rf"(?:{_AT}|gtid\.0)-{_AT}|snapshot-{_AT}(?:-{_AT})?-[0-9]{{8}}T[0-9]{{12}}Z")

_FOREIGN_HINT = ("nothing of it was used; the provider never writes such an object, so find out who else "
                 "writes to this location (keep its write access to the staging role alone)")


class UntrustedObjectError(ProviderError, ValueError):
    """An object of a staging location that the provider would not have written: a name that
    leaves its place, a document too large or malformed. Nothing was written, downloaded or
    uploaded because of it."""

    default_hint = _FOREIGN_HINT


def is_batch_name(name: str) -> bool:
    """Whether ``name`` (a top-level name under a staging location) is one a dump or a snapshot
    publishes its batch under."""
    return BATCH_NAME.fullmatch(name) is not None


def staged_file_problem(path: Any, *, attempt: Optional[str] = None, attempt_allowed: bool = False) -> str:
    """What is wrong with ``path``, a staged file's name relative to its batch (or to a work
    directory): "" when it is ``tables/<schema>.<table>/<part or row file>``, preceded by
    ``attempt/`` when ``attempt`` is given, or by any attempt id when ``attempt_allowed``."""
    if not isinstance(path, str) or not path:
        return "is not a file name"
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or "\x00" in path:
        return "is absolute or not a plain name"
    if any(p in ("", ".", "..") for p in parts):
        return "leaves its directory (an empty, . or .. part)"
    if attempt is not None:
        if parts[0] != attempt:
            return f"is not under the attempt {attempt} the document names"
        parts = parts[1:]
    elif attempt_allowed and ATTEMPT_ID.fullmatch(parts[0]):
        parts = parts[1:]
    if len(parts) != 3 or parts[0] != "tables" or not _FOLDER.fullmatch(parts[1]) \
            or not _FILE_NAME.fullmatch(parts[2]):
        return "is not a staged file under tables/<schema>.<table>/"
    return ""


def check_size(where: str, size: int, limit: int, hint: Optional[str] = None) -> None:
    """Refuse an object of ``size`` bytes above ``limit`` before it is read."""
    if size > limit:
        raise UntrustedObjectError(f"{where}: the object is larger than {limit} bytes ({size}); the provider "
                                   f"writes none that large", hint=hint)


def parse_document(where: str, body: bytes, *, limit: int = MAX_DOCUMENT_BYTES, hint: Optional[str] = None) -> Any:
    """A JSON document read from a location (at most ``limit`` + 1 bytes of it, see
    :func:`.storage.read_bytes`), parsed; an :class:`UntrustedObjectError` when it is larger
    than ``limit`` or not JSON."""
    check_size(where, len(body), limit, hint)
    try:
        return json.loads(body)
    except ValueError as exc:
        raise UntrustedObjectError(f"{where}: not a JSON document ({exc})", hint=hint) from None


__all__ = ["ATTEMPT_ID", "BATCH_NAME", "MAX_DOCUMENT_BYTES", "UntrustedObjectError", "check_size",
           "is_batch_name", "parse_document", "staged_file_problem"]
