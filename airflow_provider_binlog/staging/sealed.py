"""Sealed work: what a staging writer records (``progress.json``) so that a later writer can
resume it (:meth:`.writer.StagingWriter.seal` and ``resume``), locally and, staging on an
object store, under ``.resumable/<key>/`` there for a writer on another machine.

Read back, the record is input like anything else of the location (:mod:`.confine`): every
name in it is checked against the names a writer stages before a file is written, downloaded
or uploaded for it, and every object is downloaded only at the size and hash recorded."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NoReturn

from .confine import ATTEMPT_ID, MAX_DOCUMENT_BYTES, UntrustedObjectError, parse_document, staged_file_problem
from .manifest import ManifestError, file_sha256
from .storage import ObjectStaging

#: where sealed work is kept on an object store, per resume key
RESUMABLE = ".resumable"
#: the record of sealed work, in the work directory and under ``.resumable/<key>/``
PROGRESS_NAME = "progress.json"


def _hint(where: str) -> str:
    return (f"nothing was written or uploaded for it; delete {where} (and the objects beside it) so that the "
            f"work starts over, and find out who else writes to the staging location")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def checked_state(state: Any, where: str, resume_key: str) -> dict[str, Any]:
    """``state``, the record of sealed work read at ``where``, when it is one a writer of
    ``resume_key`` made; else an :class:`UntrustedObjectError` naming what is wrong."""
    def refuse(what: str) -> NoReturn:
        raise UntrustedObjectError(f"{where}: {what}", hint=_hint(where))

    if not isinstance(state, dict) or not isinstance(state.get("progress"), dict):
        refuse("not a record of sealed work")
    if state["progress"].get("resume_key") != resume_key:
        refuse(f"not the work of resume key {resume_key!r}")
    if not all(_is_count(state.get(k)) for k in ("rows", "sealed")):
        refuse("rows or sealed is not a count")
    counters, ddl = state.get("counters"), state.get("ddl")
    if not (isinstance(counters, list) and len(counters) == 2 and all(_is_count(c) for c in counters)):
        refuse("counters are not two counts")
    if not (isinstance(ddl, list) and all(isinstance(r, dict) for r in ddl)):
        refuse("ddl is not a list of records")
    paths = _checked_files(state.get("files"), refuse)
    tables = state.get("tables")
    if not isinstance(tables, dict):
        refuse("tables is not an object")
    for name, info in tables.items():
        if "\x00" not in name or not isinstance(info, dict) or not _is_count(info.get("generation")) \
                or not isinstance(info.get("counts"), dict) or not all(_is_count(n) for n in info["counts"].values()):
            refuse(f"table entry {name!r} is malformed")
    objects = state.get("objects")
    if objects is not None:
        if not isinstance(objects, dict):
            refuse("objects is not an object")
        for relative, key in objects.items():
            problem = staged_file_problem(relative)
            if problem:
                refuse(f"sealed file {relative!r} {problem}")
            attempt = key.split("/", 1)[0] if isinstance(key, str) else ""
            if not ATTEMPT_ID.fullmatch(attempt) or key != f"{attempt}/{relative}":
                refuse(f"object {key!r} of {relative!r} is not that file under an attempt id")
        if set(objects) != paths:
            refuse("its objects are not the sealed files it lists")
    return state


def _checked_files(files: Any, refuse: Any) -> set[str]:
    """The staged files of a record's ``files`` (table -> [[generation, file]]), each checked."""
    if not isinstance(files, dict):
        refuse("files is not an object")
    paths = set()
    for name, entries in files.items():
        if "\x00" not in name or not isinstance(entries, list):
            refuse(f"files of {name!r} are not a list")
        for entry in entries:
            if not (isinstance(entry, list) and len(entry) == 2 and _is_count(entry[0])
                    and isinstance(entry[1], dict)):
                refuse(f"a file of {name!r} is not [generation, file]")
            desc = entry[1]
            problem = staged_file_problem(desc.get("path"))
            if problem:
                refuse(f"sealed file {desc.get('path')!r} {problem}")
            sha256 = desc.get("sha256")
            if not (_is_count(desc.get("rows")) and _is_count(desc.get("bytes")) and isinstance(sha256, str)
                    and len(sha256) == 64 and isinstance(desc.get("fingerprint"), str)):
                refuse(f"sealed file {desc['path']!r} has no rows, bytes, sha256 or fingerprint")
            paths.add(desc["path"])
    return paths


def read_local_state(path: Path, resume_key: str) -> Any:
    """The record of sealed work at ``path`` in a local work directory (None when there is
    none or it is not JSON: a directory being written), checked when it is ``resume_key``'s."""
    try:
        with open(path, "rb") as fh:
            body = fh.read(MAX_DOCUMENT_BYTES + 1)
    except OSError:
        return None
    try:
        state = parse_document(str(path), body, hint=_hint(str(path)))
    except UntrustedObjectError:
        if len(body) > MAX_DOCUMENT_BYTES:
            raise
        return None
    if not isinstance(state, dict) or not isinstance(state.get("progress"), dict) \
            or state["progress"].get("resume_key") != resume_key:
        return None
    return checked_state(state, str(path), resume_key)


def read_remote_state(remote: ObjectStaging, key: str, resume_key: str) -> Any:
    """The record of sealed work kept under ``.resumable/<key>/``, checked; None when there is none."""
    where = remote.location.uri(RESUMABLE, key, PROGRESS_NAME)
    body = remote.read(RESUMABLE, key, PROGRESS_NAME)
    if body is None:
        return None
    return checked_state(parse_document(where, body, hint=_hint(where)), where, resume_key)


def upload_sealed(remote: ObjectStaging, work: Path, key: str, state: dict[str, Any],
                  uploaded: dict[str, str]) -> bytes:
    """Upload the sealed files of ``state`` not in ``uploaded`` (local name -> object under
    ``.resumable/<key>/``) from the work directory ``work``, adding them there; the record to
    keep beside them."""
    attempt = work.name.removeprefix(".incomplete-")
    for files in state["files"].values():
        for _, desc in files:
            if desc["path"] not in uploaded:
                remote.upload(str(work / desc["path"]), RESUMABLE, key, attempt, desc["path"])
                uploaded[desc["path"]] = f"{attempt}/{desc['path']}"
    return json.dumps({**state, "objects": uploaded}, sort_keys=True, default=str).encode()


def download_sealed(remote: ObjectStaging, key: str, state: dict[str, Any], work: Path) -> None:
    """Download the sealed files a checked record (:func:`checked_state`) names into the new
    work directory ``work``: each at the size the record gives it (the listing says so before
    anything is read), then checked against its hash."""
    listed = {o["Key"]: int(o["Size"]) for o in remote.objects(RESUMABLE, key)}
    descs = {d["path"]: d for files in state["files"].values() for _, d in files}
    for relative, name in state.get("objects", {}).items():
        desc, uri = descs[relative], remote.location.uri(RESUMABLE, key, name)
        if name not in listed:
            raise ManifestError(f"{uri}: a sealed file of the work to resume is missing; start it over")
        if listed[name] != desc["bytes"]:
            raise UntrustedObjectError(f"{uri}: {listed[name]} bytes, where the sealed progress records "
                                       f"{desc['bytes']} bytes", hint=_hint(uri))
        target = work / relative
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not remote.download(str(target), RESUMABLE, key, name, size=desc["bytes"]):
            raise ManifestError(f"{uri}: a sealed file of the work to resume is missing; start it over")
        if os.path.getsize(target) != desc["bytes"] or file_sha256(target) != desc["sha256"]:
            raise UntrustedObjectError(f"{uri}: not the sealed file its progress records (size or sha256)",
                                       hint=_hint(uri))


__all__ = ["PROGRESS_NAME", "RESUMABLE", "checked_state", "download_sealed", "read_local_state",
           "read_remote_state", "upload_sealed"]
