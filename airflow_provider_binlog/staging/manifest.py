"""The manifest of a published dump: read, validated, written atomically."""
from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union, cast

from ..common.atomic_file import write_atomically
from ..checkpoints import Checkpoint
from ..errors import ProviderError
from .confine import ATTEMPT_ID, MAX_DOCUMENT_BYTES, staged_file_problem
from .contract import MANIFEST_FORMAT, MANIFEST_NAME, MANIFEST_VERSION
from .storage import StorageOptions, filesystem, is_object_store, local_path

if TYPE_CHECKING:  # imported when read: the schema history's parser is not needed to load a manifest
    from ..schema_history import SchemaHistory


class ManifestError(ProviderError, ValueError):
    """A manifest that is missing, malformed or points at files that are not there."""


#: a manifest's ``mode``: a snapshot of the tables' content, or the changes of a binlog range
MODE_SNAPSHOT = "snapshot"
MODE_INCREMENTAL = "incremental"


@dataclass(frozen=True)
class Manifest:
    """A published batch's manifest: ``path`` on the local filesystem, or, for a batch on an
    object store, its ``uri`` (``path`` is then the path in pyarrow's filesystem).

    Read it through its properties (checkpoints and the schema history parsed once, on first
    use); ``data`` is the JSON as published, kept for readers of fields without a property."""

    path: Path
    data: dict[str, Any]
    uri: Optional[str] = None

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def ref(self) -> str:
        """What names the manifest for the merge: its local path or its URI."""
        return self.uri if self.uri is not None else str(self.path)

    @property
    def directory_ref(self) -> str:
        return self.uri.rsplit("/", 1)[0] if self.uri is not None else str(self.directory)

    @property
    def dump_id(self) -> str:
        return cast(str, self.data["dump_id"])

    @functools.cached_property
    def start(self) -> Checkpoint:
        """Where the batch starts in the binlog (a :class:`ManifestError` when malformed)."""
        return self._checkpoint("start")

    @functools.cached_property
    def end(self) -> Checkpoint:
        """Where the batch ends in the binlog (a snapshot: where its content is taken)."""
        return self._checkpoint("end")

    def _checkpoint(self, name: str) -> Checkpoint:
        try:
            return Checkpoint.from_json(self.data[name])
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"{self.ref}: bad {name} checkpoint: {exc}; the manifest is damaged: "
                                f"dump that range again") from None

    @property
    def mode(self) -> str:
        """:data:`MODE_SNAPSHOT` or :data:`MODE_INCREMENTAL` (a manifest without ``mode``)."""
        return cast(str, self.data.get("mode") or MODE_INCREMENTAL)

    @property
    def is_snapshot(self) -> bool:
        return self.mode == MODE_SNAPSHOT

    @property
    def tables(self) -> list[dict[str, Any]]:
        return cast("list[dict[str, Any]]", self.data["tables"])

    @property
    def ddl(self) -> list[dict[str, Any]]:
        """The batch's schema-change records, in the order the dump wrote them."""
        return cast("list[dict[str, Any]]", self.data.get("ddl") or [])

    @property
    def server(self) -> dict[str, Any]:
        """What the dump recorded of its server (``host``, ``port``, ``flavor`` ...; may be empty)."""
        return cast("dict[str, Any]", self.data.get("server") or {})

    @property
    def binlog_bytes(self) -> Optional[int]:
        """The bytes of binlog the dump read (None when not recorded: a snapshot)."""
        return cast(Optional[int], self.data.get("binlog_bytes"))

    @property
    def schema_history_json(self) -> Optional[dict[str, Any]]:
        """The schema history valid at the batch end, as published (None when the dump had none)."""
        return cast("Optional[dict[str, Any]]", self.data.get("schema_history") or None)

    @functools.cached_property
    def schema_history(self) -> Optional["SchemaHistory"]:
        """:attr:`schema_history_json` read (once; do not change it)."""
        from ..schema_history import SchemaHistory

        data = self.schema_history_json
        return SchemaHistory.from_json(data) if data else None

    def files(self, table: dict[str, Any]) -> list[Union[str, Path]]:
        """The staged files of a table entry: local paths, or URIs on an object store."""
        if self.uri is not None:
            return [f"{self.directory_ref}/{f['path']}" for f in table["files"]]
        return [self.directory / f["path"] for f in table["files"]]


_REQUIRED = ("format", "version", "dump_id", "start", "end", "tables", "ddl", "server")


def load_manifest(path: str | os.PathLike[str], *, verify: bool = False,
                  options: Optional[StorageOptions] = None) -> Manifest:
    """Read and check a manifest (a manifest.json path or its dump directory): its format, and
    that every staged file it lists is there with its size; with ``verify``, also the SHA-256
    of each file (when the manifest records it), which reads them all. ``path`` may be a URI
    of an object store (``s3://bucket/prefix/<dump>/manifest.json`` or the batch's URI),
    reached with ``options`` (default: the environment's credential chain)."""
    uri: Optional[str] = None
    if is_object_store(path):
        uri = os.fspath(path).rstrip("/")
        if not uri.endswith("/" + MANIFEST_NAME):
            uri = f"{uri}/{MANIFEST_NAME}"
        fs, inner = filesystem(uri, options)
        where, manifest_path = uri, Path(inner)
    else:
        manifest_path = Path(local_path(path))
        if manifest_path.is_dir():
            manifest_path = manifest_path / MANIFEST_NAME
        fs, _ = filesystem(str(manifest_path))
        where = str(manifest_path)
    try:
        with fs.open_input_file(str(manifest_path)) as stream:
            if stream.size() > MAX_DOCUMENT_BYTES:
                raise ManifestError(f"{where}: the manifest is larger than {MAX_DOCUMENT_BYTES} bytes "
                                    f"({stream.size()}); the provider writes none that large",
                                    hint="it was not read; find out who else writes to the staging location")
            data = json.loads(stream.read())
    except FileNotFoundError:
        raise ManifestError(f"{where}: no manifest (the dump did not complete, or the path is wrong)") from None
    except ManifestError:
        raise
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{where}: unreadable manifest: {exc}") from None
    manifest = Manifest(manifest_path, data, uri)
    try:
        _checked(where, data)
        _check_files(where, fs, manifest, verify)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(exc, ManifestError):
            raise
        raise ManifestError(f"{where}: malformed manifest: {type(exc).__name__}: {exc}") from None
    return manifest


def _checked(where: str, data: Any) -> None:
    """``data`` is a well-formed manifest (format, version, entries), or a ManifestError."""
    _check_header(where, data)
    if not isinstance(data["dump_id"], str) or not isinstance(data["tables"], list) \
            or not isinstance(data["ddl"], list):
        raise ManifestError(f"{where}: malformed manifest (dump_id, tables or ddl of the wrong type)")
    if not all(isinstance(r, dict) for r in data["ddl"]):
        raise ManifestError(f"{where}: malformed manifest: a DDL record is not an object")
    for table in data["tables"]:
        problem = _table_entry_problem(table)
        if problem:
            raise ManifestError(f"{where}: malformed manifest: a table entry {problem}")


def _check_header(where: str, data: Any) -> None:
    """A staging manifest's format, required fields and a version this release reads."""
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise ManifestError(
            f"{where}: not a staging manifest (format {data.get('format') if isinstance(data, dict) else None!r})")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ManifestError(f"{where}: manifest lacks {', '.join(missing)}")
    if not isinstance(data["version"], int):
        raise ManifestError(f"{where}: malformed manifest: version {data['version']!r}")
    if data["version"] > MANIFEST_VERSION:
        raise ManifestError(f"{where}: manifest version {data['version']!r} is newer than this "
                            f"release understands ({MANIFEST_VERSION}); upgrade airflow-provider-binlog")


def _check_files(where: str, fs: Any, manifest: Manifest, verify: bool) -> None:
    """Every staged file of ``manifest`` is in its directory of filesystem ``fs``, with the size
    the manifest records and, with ``verify``, its SHA-256 (the sizes in one look-up: on an
    object store, one request for them all)."""
    import pyarrow.fs as pafs

    names = [(table, f) for table in manifest.tables for f in table["files"]]
    attempt = manifest.data.get("attempt")
    if attempt is not None and not (isinstance(attempt, str) and ATTEMPT_ID.fullmatch(attempt)):
        raise ManifestError(f"{where}: malformed manifest: attempt {attempt!r}")
    for _, f in names:  # checked before any is looked up: a name is input, not a path to follow
        problem = staged_file_problem(f["path"], attempt=attempt, attempt_allowed=True)
        if problem:
            raise ManifestError(f"{where}: staged file path {f['path']!r} {problem}",
                                hint="nothing of the batch was read; the provider writes no such manifest, so find "
                                     "out who else writes to the staging location")
    base = str(manifest.path.parent)
    paths = [f"{base}/{f['path']}" for _, f in names]
    infos = fs.get_file_info(paths) if paths else []
    for (table, f), path, info in zip(names, paths, infos):
        if info.type != pafs.FileType.File:
            raise ManifestError(f"{where}: staged file {f['path']} of {table['schema']}.{table['table']} is missing")
        if info.size != f["bytes"]:
            raise ManifestError(f"{where}: staged file {f['path']} has {info.size} bytes, "
                                f"the manifest says {f['bytes']}")
        if verify and f.get("sha256"):
            with fs.open_input_stream(path) as stream:
                damaged = _sha256(stream) != f["sha256"]
            if damaged:
                raise ManifestError(f"{where}: staged file {f['path']} is damaged (its sha256 is not the "
                                    f"one the manifest records); dump that range again")


def _table_entry_problem(table: Any) -> str:
    """What is wrong with a manifest's table entry ("" when nothing)."""
    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    if not isinstance(table, dict):
        return "is not an object"
    for key, kind in (("schema", str), ("table", str), ("rows", dict), ("columns", list),
                      ("primary_key", list), ("files", list)):
        if not isinstance(table.get(key), kind):
            return f"has no {key!r} of type {kind.__name__}"
    if not all(is_int(v) for v in table["rows"].values()):
        return "has row counts that are not counts"
    if not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in table["columns"]):
        return "has a column without a name"
    if not all(isinstance(k, str) for k in table["primary_key"]):
        return "has a primary key that is not a list of column names"
    for f in table["files"]:
        if not (isinstance(f, dict) and isinstance(f.get("path"), str) and f["path"]
                and is_int(f.get("rows")) and is_int(f.get("bytes"))):
            return "has a file without path, rows and bytes"
    return ""


def file_sha256(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as fh:
        return _sha256(fh)


def _sha256(stream: Any) -> str:
    """The SHA-256 of what ``stream`` (a binary file or a pyarrow input stream) reads."""
    digest = hashlib.sha256()
    for block in iter(lambda: stream.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def write_json_atomically(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (see
    :func:`~airflow_provider_binlog.common.atomic_file.write_atomically`)."""
    write_atomically(path, json.dumps(data, indent=1, sort_keys=True, default=str))
