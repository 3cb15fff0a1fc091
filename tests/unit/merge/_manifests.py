"""Published manifests without staged files, written by hand for the planning tests."""
import json
from pathlib import Path

from airflow_provider_binlog.staging.contract import MANIFEST_FORMAT, MANIFEST_NAME, MANIFEST_VERSION
from airflow_provider_binlog.staging.manifest import load_manifest


def manifest(root: Path, start: int, end: int, *, ddl=(), history=None, file="mysql-bin.000001"):
    dump_id = f"{file}.{start}-{file}.{end}"
    directory = root / dump_id
    directory.mkdir(parents=True, exist_ok=True)
    data = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "dump_id": dump_id,
            "start": {"file": file, "pos": start}, "end": {"file": file, "pos": end},
            "tables": [], "ddl": list(ddl), "server": {"flavor": "mysql"}}
    if history is not None:
        data["schema_history"] = history
    (directory / MANIFEST_NAME).write_text(json.dumps(data))
    return load_manifest(directory)


def ddl(pos: int, *ops, file="mysql-bin.000001", query="-- a schema statement"):
    return {"file": file, "pos": pos, "schema": "s", "kind": "alter", "tables": [], "query": query,
            "ops": list(ops)}
