"""The staged batches the view lists: the newest manifests under a source's staging
locations (directories or object stores), summarised."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

from ..staging.contract import MANIFEST_FORMAT, MANIFEST_NAME
from ..staging.storage import filesystem, is_object_store, read_bytes
from .values import as_int, iso, short_error, utc

DEFAULT_HISTORY = 30
OPS = ("insert", "update", "delete")


def dump_summary(data: Mapping) -> dict:
    """What the view keeps of a manifest."""
    rows = dict.fromkeys(OPS, 0)
    tables = {}
    for t in data.get("tables") or []:
        name = f"{t.get('schema')}.{t.get('table')}"
        counts = {op: as_int((t.get("rows") or {}).get(op)) for op in OPS}
        tables[name] = counts
        for op in OPS:
            rows[op] += counts[op]
    total = sum(rows.values())
    duration = data.get("duration_seconds")
    duration = float(duration) if isinstance(duration, (int, float)) and duration >= 0 else None
    return {
        "dump_id": data.get("dump_id"),
        "kind": data.get("mode") or "dump",
        "created_at": iso(utc(data.get("created_at"))),
        "started_at": iso(utc(data.get("started_at"))),
        "duration_seconds": duration,
        "rows": rows,
        "total_rows": total,
        "rows_per_second": round(total / duration, 1) if duration else None,
        "transactions": data.get("transactions"),
        "binlog_bytes": data.get("binlog_bytes"),
        "start": data.get("start"),
        "end": data.get("end"),
        "tables": tables,
    }


def read_manifests(staging_dirs: Iterable[str], limit: int = DEFAULT_HISTORY) -> tuple[list[dict], list[str]]:
    """Summaries of the newest ``limit`` published manifests (by file time) under the
    staging directories, newest first, and warnings. Reads only the manifests."""
    found, warnings = [], []
    for directory in staging_dirs:
        if is_object_store(directory):
            found += _object_store_manifests(directory, warnings)
            continue
        root = Path(directory)
        if not root.is_dir():
            warnings.append(f"staging directory {directory} does not exist")
            continue
        try:
            children = list(root.iterdir())
        except OSError as exc:
            warnings.append(f"cannot list staging directory {directory}: {exc.strerror or exc}")
            continue
        for child in children:
            if child.name.startswith("."):
                continue
            path = child / MANIFEST_NAME
            try:
                found.append((path.stat().st_mtime, str(path)))
            except OSError:
                continue
    found.sort(reverse=True)
    out = []
    for _, path in found[:max(limit, 0)]:
        try:
            text = read_bytes(path) if is_object_store(path) else Path(path).read_bytes()
            data = json.loads(text or b"")
        except (OSError, ValueError) as exc:
            warnings.append(f"unreadable manifest {path}: {short_error(exc, 120)}")
            continue
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            continue
        out.append(dump_summary(data))
    out.sort(key=lambda d: d["created_at"] or "", reverse=True)
    return out, warnings


def _object_store_manifests(directory: str, warnings: list[str]) -> list[tuple[float, str]]:
    """``(time, URI)`` of each batch's manifest under a staging location on an object store."""
    import pyarrow.fs as pafs

    try:
        fs, root = filesystem(directory)
        if fs.get_file_info(root.split("/", 1)[0]).type == pafs.FileType.NotFound:
            warnings.append(f"staging location {directory}: its bucket does not exist")
            return []
        children = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
        names = [c.base_name for c in children if c.type == pafs.FileType.Directory
                 and not c.base_name.startswith(".")]
        infos = fs.get_file_info([f"{root}/{n}/{MANIFEST_NAME}" for n in names]) if names else []
    except Exception as exc:  # noqa: BLE001 - shown in the view, not raised
        warnings.append(f"cannot list staging location {directory}: {short_error(exc, 120)}")
        return []
    return [(info.mtime.timestamp() if info.mtime else 0.0, f"{directory.rstrip('/')}/{name}/{MANIFEST_NAME}")
            for name, info in zip(names, infos) if info.type == pafs.FileType.File]
