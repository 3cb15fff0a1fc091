"""The manifest of a published dump: read, validated, written atomically."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .contract import MANIFEST_FORMAT, MANIFEST_NAME, MANIFEST_VERSION


class ManifestError(ValueError):
    """A manifest that is missing, malformed or points at files that are not there."""


@dataclass(frozen=True)
class Manifest:
    path: Path
    data: dict

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def dump_id(self) -> str:
        return self.data["dump_id"]

    @property
    def start(self) -> dict:
        return self.data["start"]

    @property
    def end(self) -> dict:
        return self.data["end"]

    @property
    def tables(self) -> list[dict]:
        return self.data["tables"]

    def files(self, table: dict) -> list[Path]:
        return [self.directory / f["path"] for f in table["files"]]


_REQUIRED = ("format", "version", "dump_id", "start", "end", "tables", "ddl", "server")


def load_manifest(path) -> Manifest:
    """Read and check a manifest (a manifest.json path or its dump directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path}: no manifest (the dump did not complete, or the path is wrong)") from None
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{path}: unreadable manifest: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise ManifestError(f"{path}: not a staging manifest (format {data.get('format') if isinstance(data, dict) else None!r})")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ManifestError(f"{path}: manifest lacks {', '.join(missing)}")
    if data["version"] > MANIFEST_VERSION:
        raise ManifestError(f"{path}: manifest version {data['version']} is newer than this "
                            f"release understands ({MANIFEST_VERSION}); upgrade airflow-provider-binlog")
    manifest = Manifest(path, data)
    for table in manifest.tables:
        for f in table["files"]:
            file_path = manifest.directory / f["path"]
            if not file_path.is_file():
                raise ManifestError(f"{path}: staged file {f['path']} of {table['schema']}.{table['table']} is missing")
            if file_path.stat().st_size != f["bytes"]:
                raise ManifestError(f"{path}: staged file {f['path']} has {file_path.stat().st_size} bytes, "
                                    f"the manifest says {f['bytes']}")
    return manifest


def write_json_atomically(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
