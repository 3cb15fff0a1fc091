"""Write row changes to Parquet, per table, and publish them with a manifest, atomically.

Rows are streamed into Parquet row groups (memory stays bounded whatever the transaction size).
Everything is written under a hidden ``.incomplete-*`` directory; :meth:`StagingWriter.publish`
writes the manifest last and renames the directory into place, so a dump killed at any moment
publishes nothing; the next writer in the same staging directory removes what it left.

Staging on an object store (``s3://bucket/prefix``, see :mod:`.storage`): the work directory
is local (under the system's temporary directory), and publishing uploads its files under an
attempt prefix of the batch, then creates the batch's manifest only if none exists.
"""
from __future__ import annotations

import datetime as dt
import fcntl
import json
import logging
import multiprocessing
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, cast

from ..codec.events import ABSENT, RowsEvent, TableMap
from ..codec.positions import binlog_sequence
from .contract import MANIFEST_FORMAT, MANIFEST_NAME, ROW_FILES_VERSION, column_descriptions, schema_fingerprint
from .convert import Counters
from .manifest import Manifest, ManifestError, load_manifest, write_json_atomically
from .masking import Masking, mask_ddl_record, masked_entry
from .parts import PART_FILE_BYTES, Stager, safe_name
from .remote import UNKNOWN, delete_quietly, local_work_root, prepare_location_once, published_attempt
from .sealed import PROGRESS_NAME, RESUMABLE, download_sealed, read_local_state, read_remote_state, upload_sealed
from .publish_local import publish_directory, same_manifest
from .storage import ObjectStaging, StagingStorageError, StorageOptions, is_object_store, local_path
from .tidy import tidy_location

if TYPE_CHECKING:
    from .parallel import PoolResult, WorkerPool

UTC = dt.timezone.utc
log = logging.getLogger(__name__)
_Absent = type(ABSENT)

#: (schema, table)
_Key = tuple[str, str]
#: the envelope of one rows event: (file, seq, pos, gtid, commit_ts, txn)
_Envelope = tuple[str, int, int, Optional[str], dt.datetime, str]
#: the description of one part file, as the manifest lists it
_FileDesc = dict[str, Any]
#: the absent column names of each row (None: none absent)
_Absents = list[Optional[list[str]]]


class _TableStage:
    """What the writer knows of one table: its layout generation and row counts."""

    def __init__(self, schema: str, table: str) -> None:
        self.schema, self.table = schema, table
        self.counts = {"insert": 0, "update": 0, "delete": 0}
        self.table_map: Optional[TableMap] = None
        self.fingerprint: Optional[str] = None
        self.generation = -1


class StagingWriter:
    """Collects the row changes of one dump and publishes them as a staged batch.

    Rows are staged in this process, or with ``workers`` > 0 by that many worker processes
    (rows events decoded in parallel, see :mod:`.parallel`). ``row_group_rows`` (see
    :class:`Stager`) applies to each process; the ``row_group_bytes`` budget is shared
    between the workers. A part file ends at about ``part_file_bytes`` (1 GiB) and the next
    rows of its table start another."""

    def __init__(self, staging_dir: str | os.PathLike[str], *, row_group_rows: int = 50_000,
                 row_group_bytes: int = 2 << 20, workers: int = 0,
                 masking: Optional[Masking] = None, storage_options: Optional[StorageOptions] = None,
                 part_file_bytes: int = PART_FILE_BYTES) -> None:
        #: the object store batches are published to (None: ``staging_dir`` is local)
        self.remote: Optional[ObjectStaging] = None
        #: on an object store: sealed files already kept there (local path -> where), and the
        #: resume key they are kept under
        self._uploaded: dict[str, str] = {}
        self._resume_key: Optional[str] = None
        if is_object_store(staging_dir):
            self.remote = ObjectStaging(os.fspath(staging_dir), storage_options)
            staging_dir = local_work_root()
        self.staging_dir = Path(local_path(staging_dir))
        self.staging_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.work_dir = self.staging_dir / f".incomplete-{uuid.uuid4().hex}"
        self.work_dir.mkdir(mode=0o700)
        # held while this writer lives: a work directory whose lock is free is a dead dump's
        self._lock_fd: Optional[int] = _hold_lock(self.work_dir)
        remove_stale_work_dirs(self.staging_dir)
        self.row_group_rows = row_group_rows
        self.row_group_bytes = row_group_bytes
        self.counters = Counters()
        self.tables: dict[_Key, _TableStage] = {}
        self.ddl: list[dict[str, Any]] = []
        self.published: Optional[Manifest] = None
        self._rows = 0
        self._pool: Optional[WorkerPool] = None
        #: what the staging workers reported when closed (:class:`.parallel.PoolResult`)
        self.workers_result: Optional[PoolResult] = None
        #: column exclusion and masking applied to every staged value (see .masking)
        self.masking = masking or Masking()
        self._local = Stager(self.work_dir, self.counters, row_group_rows=row_group_rows,
                              row_group_bytes=row_group_bytes, masking=self.masking or None,
                              part_file_bytes=part_file_bytes)
        if workers and multiprocessing.current_process().daemon:
            # a daemonic process (some executors' workers) may not start processes
            log.warning("staging in the dump's own process: this process is a daemon and "
                        "cannot start %d staging workers", workers)
            workers = 0
        if workers:
            from .parallel import WorkerPool
            # the memory budget is shared: the workers together buffer what one process would
            self._pool = WorkerPool(self.work_dir, workers, row_group_rows=row_group_rows,
                                    row_group_bytes=max(row_group_bytes // workers, 1 << 20),
                                    inherited_fds=(self._lock_fd,), masking=self.masking or None,
                                    part_file_bytes=part_file_bytes)

    @property
    def rows_staged(self) -> int:
        """Rows staged so far (with workers: those the workers have reported)."""
        return self._rows + (self._pool.rows_reported() if self._pool is not None else 0)

    def _stage_for(self, tm: TableMap) -> _TableStage:
        """The table's stage, in a new layout generation when its columns changed."""
        key = (tm.schema, tm.table)
        stage = self.tables.get(key)
        if stage is None:
            stage = self.tables[key] = _TableStage(tm.schema, tm.table)
        if stage.table_map is None or (stage.table_map.columns is not tm.columns
                                       and stage.table_map.columns != tm.columns):
            fingerprint = schema_fingerprint(tm.columns)
            if fingerprint != stage.fingerprint:
                stage.generation += 1
                stage.fingerprint = fingerprint
        stage.table_map = tm
        return stage

    def add_rows(self, event: RowsEvent, *, binlog_file: str, gtid: Optional[str], txn: str,
                 commit_ts: Optional[dt.datetime] = None) -> None:
        """Stage every row of a decoded (or deferred) rows event."""
        deferred = event.deferred
        if event.skipped or event.table_map is None or not (
                event.rows or (deferred is not None and deferred.end > deferred.start)):
            return
        tm = event.table_map
        stage = self._stage_for(tm)
        ts = commit_ts or dt.datetime.fromtimestamp(event.header.timestamp, UTC)
        envelope = (binlog_file, binlog_sequence(binlog_file), event.pos, gtid, ts, txn)
        size = event.header.event_size
        if self._pool is not None:
            self._pool.submit(tm, stage.generation, event.kind, size, envelope, event.deferred,
                              None if event.deferred is not None else event.rows)
            return
        n = self._local.add(tm, stage.generation, event.kind, size, envelope,
                            event.deferred, event.rows)
        stage.counts[event.kind] += n
        self._rows += n

    def add_snapshot_rows(self, table_map: TableMap, rows: Iterable[Sequence[Any]], *, binlog_file: str, position: int,
                          gtid: Optional[str], taken_at: dt.datetime, first_index: int) -> int:
        """Stage rows read by an initial snapshot as inserts at the snapshot's position.

        ``first_index`` continues the row index across chunks so every row keeps a unique
        ordering key."""
        if self._pool is not None:
            raise RuntimeError("snapshots are staged by a writer without workers")
        stage = self._stage_for(table_map)
        part = self._local.part(table_map, stage.generation)
        seq = binlog_sequence(binlog_file)
        txn = f"snapshot:{binlog_file}:{position}"
        rows = list(rows)
        if rows:
            part.append_rows("insert", binlog_file, seq, position, gtid, taken_at, txn, None, rows,
                             first_index=first_index)
        stage.counts["insert"] += len(rows)
        self._rows += len(rows)
        return len(rows)

    def add_snapshot_arrays(self, table_map: TableMap, columns: Sequence[Any], *, binlog_file: str, position: int,
                            gtid: Optional[str], taken_at: dt.datetime, first_index: int) -> int:
        """Like :meth:`add_snapshot_rows`, for rows given as Arrow arrays (one per column, in its
        staging type: see :func:`.contract.arrow_type_for`), staged in the table's row file
        (:mod:`.row_files`)."""
        if self._pool is not None:
            raise RuntimeError("snapshots are staged by a writer without workers")
        stage = self._stage_for(table_map)
        part = self._local.rows_part(table_map, stage.generation)
        n = part.append_arrow_inserts(binlog_file, binlog_sequence(binlog_file), position, gtid, taken_at,
                                      f"snapshot:{binlog_file}:{position}", columns, first_index)
        stage.counts["insert"] += n
        self._rows += n
        return n

    def add_decoded_rows(self, table_map: TableMap, kind: str, rows: Sequence[Any], *, binlog_file: str,
                         position: int, gtid: Optional[str], txn: str, commit_ts: dt.datetime,
                         first_index: int) -> int:
        """Stage decoded rows of one kind (``insert``/``update``/``delete``; an update's rows are
        ``(before, after)`` pairs) as the rows ``first_index``... of the rows event at
        ``position``: some rows of an event, or rows an event became (a watermark snapshot
        keeps of a key change the half that concerns keys already read)."""
        if self._pool is not None:
            raise RuntimeError("decoded rows are staged by a writer without workers")
        if not rows:
            return 0
        stage = self._stage_for(table_map)
        part = self._local.part(table_map, stage.generation)
        befores = [r[0] for r in rows] if kind == "update" else (rows if kind == "delete" else None)
        afters = [r[1] for r in rows] if kind == "update" else (rows if kind == "insert" else None)
        part.append_rows(kind, binlog_file, binlog_sequence(binlog_file), position, gtid, commit_ts, txn,
                         befores, afters, first_index=first_index)
        stage.counts[kind] += len(rows)
        self._rows += len(rows)
        return len(rows)

    # ------------------------------------------------------------------ seal and resume
    def seal(self, progress: dict[str, Any]) -> None:
        """Close every part file and record, with ``progress`` (the caller's state, JSON), what
        a later writer needs to resume this one if this process dies before publishing (see
        :meth:`resume`). ``progress["resume_key"]`` names the work to resume."""
        if self._pool is not None:
            raise RuntimeError("a writer with staging workers cannot be sealed")
        closed = self._local.seal()
        state = {
            "progress": progress,
            "files": {f"{k[0]}\x00{k[1]}": [[g, d] for g, d in files] for k, files in closed.items()},
            "tables": {f"{k[0]}\x00{k[1]}": {"counts": s.counts, "fingerprint": s.fingerprint,
                                              "generation": s.generation} for k, s in self.tables.items()},
            "counters": [self.counters.invalid_temporals, self.counters.replaced_text],
            "ddl": self.ddl, "rows": self._rows, "sealed": self._local.sealed,
        }
        write_json_atomically(self.work_dir / _PROGRESS_NAME, state)
        if self.remote is not None:
            self._seal_remote(self.remote, state)

    def _seal_remote(self, remote: ObjectStaging, state: dict[str, Any]) -> None:
        """Keep the sealed work on the object store too, for a writer on another machine:
        the part files not uploaded yet under ``.resumable/<key>/<attempt>/``, then the state,
        naming where each file is, at ``.resumable/<key>/progress.json`` (written last)."""
        key = self._resume_key = safe_name(str(state["progress"]["resume_key"]))
        prepare_location_once(remote)
        body = upload_sealed(remote, self.work_dir, key, state, self._uploaded)
        remote.put(body, RESUMABLE, key, _PROGRESS_NAME)

    @classmethod
    def resume(cls, staging_dir: str | os.PathLike[str], resume_key: str,
               table_maps: dict[_Key, TableMap], *, masking: Optional[Masking] = None,
               row_group_rows: int = 50_000, row_group_bytes: int = 2 << 20,
               storage_options: Optional[StorageOptions] = None
               ) -> Optional[tuple["StagingWriter", dict[str, Any]]]:
        """Adopt the work directory a dead writer sealed with ``resume_key`` (its process gone:
        its lock is free), with the files it sealed (any file written after is removed), and
        return the writer and the progress it recorded; None when there is none. ``table_maps``
        give the tables' layouts again: a table whose layout changed is refused.

        Staging on an object store, the store's sealed progress is what counts: a local work
        directory is adopted only when it is at the same seal (else it is a leftover, of a batch
        published since or of a later seal made elsewhere), and without progress on the store
        nothing is resumed."""
        remote = ObjectStaging(os.fspath(staging_dir), storage_options) if is_object_store(staging_dir) else None
        # on an object store the sealed work is in this machine's local work area
        staging = Path(local_work_root() if remote is not None else local_path(staging_dir))
        kept: Optional[dict[str, Any]] = None
        if remote is not None:  # checked whole before anything is written, downloaded or uploaded
            kept = read_remote_state(remote, safe_name(resume_key), resume_key)
            if kept is None:
                return None
        for work in sorted(staging.glob(".incomplete-*")):
            state = read_local_state(work / _PROGRESS_NAME, resume_key)
            if state is None:
                continue
            if kept is not None and (state.get("sealed"), state.get("rows")) != (kept.get("sealed"), kept.get("rows")):
                continue  # not the seal the store keeps
            try:
                fd = os.open(work / _LOCK_NAME, os.O_RDWR)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue  # a live writer
            os.close(fd)
            adopted = cls._adopt(staging, work, state, table_maps, masking, row_group_rows, row_group_bytes)
            adopted[0].remote = remote
            return adopted
        if kept is not None and remote is not None:
            return cls._resume_remote(remote, staging, resume_key, kept, table_maps, masking, row_group_rows,
                                      row_group_bytes)
        return None

    @classmethod
    def _resume_remote(cls, remote: ObjectStaging, staging: Path, resume_key: str, state: dict[str, Any],
                       table_maps: dict[_Key, TableMap], masking: Optional[Masking], row_group_rows: int,
                       row_group_bytes: int) -> tuple["StagingWriter", dict[str, Any]]:
        """The sealed work of ``resume_key`` kept on the object store (``state``, its progress
        there; the machine that sealed it is gone), downloaded into a new local work directory
        and adopted."""
        key = safe_name(resume_key)
        state = dict(state)
        work = staging / f".incomplete-{uuid.uuid4().hex}"
        work.mkdir(mode=0o700)
        try:
            download_sealed(remote, key, state, work)
            objects: dict[str, str] = dict(state.pop("objects", {}))
            write_json_atomically(work / _PROGRESS_NAME, state)
            adopted = cls._adopt(staging, work, state, table_maps, masking, row_group_rows, row_group_bytes)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        adopted[0].remote = remote
        adopted[0]._uploaded = objects  # already on the store: not uploaded again at the next seal
        return adopted

    @classmethod
    def _adopt(cls, staging: Path, work: Path, state: dict[str, Any], table_maps: dict[_Key, TableMap],
               masking: Optional[Masking], row_group_rows: int,
               row_group_bytes: int) -> tuple["StagingWriter", dict[str, Any]]:
        self = cls.__new__(cls)
        self.staging_dir, self.work_dir, self.remote = staging, work, None
        self._uploaded, self._resume_key = {}, safe_name(str(state["progress"].get("resume_key", ""))) or None
        self._lock_fd = _hold_lock(work)
        self.row_group_rows, self.row_group_bytes = row_group_rows, row_group_bytes
        self.counters = Counters()
        self.counters.invalid_temporals, self.counters.replaced_text = state["counters"]
        self.tables, self.ddl, self.published = {}, list(state["ddl"]), None
        self._rows, self._pool, self.workers_result = int(state["rows"]), None, None
        self.masking = masking or Masking()
        self._local = Stager(work, self.counters, row_group_rows=row_group_rows,
                              row_group_bytes=row_group_bytes, masking=self.masking or None)
        self._local.sealed = int(state["sealed"])
        kept = set()
        for name, files in state["files"].items():
            key = cast(_Key, tuple(name.split("\x00", 1)))
            self._local.closed[key] = [(int(g), d) for g, d in files]
            kept.update(d["path"] for _, d in files)
        for name, info in state["tables"].items():
            key = cast(_Key, tuple(name.split("\x00", 1)))
            tm = table_maps.get(key)
            if tm is None or schema_fingerprint(tm.columns) != info["fingerprint"]:
                self.abort()
                raise ManifestError(f"{key[0]}.{key[1]}: its columns changed since the work to resume "
                                    f"was staged; start it over")
            stage = self.tables[key] = _TableStage(*key)
            stage.counts, stage.fingerprint, stage.generation = dict(info["counts"]), info["fingerprint"], \
                int(info["generation"])
            stage.table_map = tm
        for path in (work / "tables").rglob("*.parquet") if (work / "tables").exists() else ():
            if str(path.relative_to(work)) not in kept:  # written after the seal: incomplete
                path.unlink()
        return self, dict(state["progress"])

    def add_ddl(self, record: dict[str, Any]) -> None:
        self.ddl.append(mask_ddl_record(self.masking, record))

    def _close_files(self) -> dict[_Key, list[_FileDesc]]:
        """Close every part file (the workers' too); the files of each table, in order."""
        placed = {key: [(generation, 0, f) for generation, f in files]
                  for key, files in self._local.close().items()}
        if self._pool is not None:
            result = self.workers_result = self._pool.close()
            for key, files in result.files.items():
                placed.setdefault(key, []).extend((g, 1 + w, f) for g, w, f in files)
            for key, counts in result.counts.items():
                for kind, n in counts.items():
                    self.tables[key].counts[kind] += n
            self.counters.invalid_temporals += result.invalid_temporals
            self.counters.replaced_text += result.replaced_text
        # generation order (the merge follows layouts in file order), then by process
        return {key: [f for *_, f in sorted(files, key=lambda t: t[:2])] for key, files in placed.items()}

    def publish(self, *, dump_id: str, start: dict[str, Any], end: dict[str, Any], server: dict[str, Any],
                extra: Optional[dict[str, Any]] = None) -> Manifest:
        """Close the files, write the manifest, and move the batch to ``<staging_dir>/<dump_id>``
        (on an object store: upload it there, the manifest last and only if none is there)."""
        files_of = self._close_files()
        tables = []
        history = (extra or {}).get("schema_history")
        for key, stage in sorted(self.tables.items()):
            cols = column_descriptions(cast(TableMap, stage.table_map).columns)
            entry: dict[str, Any] = {
                "schema": stage.schema, "table": stage.table, "rows": dict(stage.counts),
                "columns": cols, "primary_key": [c["name"] for c in cols if c["primary_key"]],
                "fingerprint": stage.fingerprint, "files": files_of.get(key, []),
            }
            if self.masking:
                entry.update(masked_entry(self.masking, stage.schema, stage.table, cols, history))
            tables.append(entry)
        manifest: dict[str, Any] = {
            "format": MANIFEST_FORMAT, "dump_id": dump_id,
            "version": ROW_FILES_VERSION if any(f["path"].rsplit("/", 1)[-1].startswith("rows-")
                                                for t in tables for f in t["files"]) else 1,
            "created_at": dt.datetime.now(UTC).isoformat(), "server": server,
            "start": start, "end": end, "tables": tables, "ddl": self.ddl,
            "invalid_temporals": self.counters.invalid_temporals,
            "replaced_text": self.counters.replaced_text, **(extra or {}),
        }
        (self.work_dir / _PROGRESS_NAME).unlink(missing_ok=True)  # nothing to resume once published
        if self.remote is not None:
            return self._publish_remote(self.remote, dump_id, manifest)
        write_json_atomically(self.work_dir / MANIFEST_NAME, manifest)
        (self.work_dir / _LOCK_NAME).unlink()
        try:
            final = publish_directory(self.work_dir, self.staging_dir / safe_name(dump_id), dump_id, manifest)
        except StagingStorageError:
            self.abort()
            raise
        self._release()
        self.published = load_manifest(final)
        return self.published

    def _publish_remote(self, remote: ObjectStaging, dump_id: str, manifest: dict[str, Any]) -> Manifest:
        """Upload the files under ``<dump_id>/<attempt>/`` (a new attempt id each time) and
        create ``<dump_id>/manifest.json`` if no manifest is there: the one write that makes the
        batch visible. When another dump of the same range published first, its batch is kept
        (if it is the same range and tables) and this attempt's uploads are deleted. Uploads
        are deleted only once the manifest there is known to name another attempt: a create
        whose answer was lost may have gone through."""
        batch = safe_name(dump_id)
        attempt = uuid.uuid4().hex
        uploaded: list[str] = []
        uri = remote.location.uri(batch, MANIFEST_NAME)
        create_sent = False
        try:
            prepare_location_once(remote)  # a store without conditional writes is refused before anything
            for table in manifest["tables"]:
                for f in table["files"]:
                    remote.upload(str(self.work_dir / f["path"]), batch, attempt, f["path"])
                    uploaded.append(f"{batch}/{attempt}/{f['path']}")
                    f["path"] = f"{attempt}/{f['path']}"
            body = json.dumps({**manifest, "attempt": attempt}, indent=1, sort_keys=True, default=str).encode()
            create_sent = True
            created = remote.create_if_absent(body, batch, MANIFEST_NAME)
        except BaseException:
            self.abort()
            winner = published_attempt(remote, batch) if uploaded else UNKNOWN
            # a create that failed may still land after this read: the uploads go only when
            # the create was never sent, or another attempt's manifest is there
            if uploaded and winner not in (attempt, UNKNOWN) and (winner is not None or not create_sent):
                delete_quietly(remote, uploaded)  # else left to remove_stale_attempts
            raise
        if created:
            self._forget_resumable(remote)  # published: a retry must not resume it again
        else:
            winner = published_attempt(remote, batch)
            if winner == attempt:  # the create went through; its answer was lost and retried
                self._forget_resumable(remote)
            else:
                if winner != UNKNOWN:
                    delete_quietly(remote, uploaded)
                existing = load_manifest(uri, options=remote.options)
                if not same_manifest(existing.data, manifest):
                    self.abort()
                    raise StagingStorageError(
                        f"{uri}: another batch is published for {dump_id} (another range or table selection)",
                        hint="an object store cannot replace it atomically: delete that manifest (and its batch) "
                             "if nothing reads it, then dump again")
        shutil.rmtree(self.work_dir, ignore_errors=True)
        self._release()
        self.published = load_manifest(uri, options=remote.options)
        if self._resume_key is not None:
            stale = [o["Key"] for o in remote.objects(RESUMABLE, self._resume_key)]
            delete_quietly(remote, [f"{RESUMABLE}/{self._resume_key}/{k}" for k in stale])
        try:  # uploads of killed dumps, sealed work nobody resumed: at most hourly
            removed = tidy_location(remote)
            if removed:
                log.info("removed from %s what no manifest names: %s", remote.location.uri(), ", ".join(removed))
        except Exception:  # noqa: BLE001 - the batch is published; tidying is for later
            log.warning("could not tidy %s", remote.location.uri(), exc_info=True)
        return self.published

    def _forget_resumable(self, remote: ObjectStaging) -> None:
        """Drop the sealed progress kept on the store (its files go after)."""
        if self._resume_key is not None:
            delete_quietly(remote, [f"{RESUMABLE}/{self._resume_key}/{_PROGRESS_NAME}"])

    def abort(self) -> None:
        if self._pool is not None:
            self._pool.abort()
        self._local.abort()
        shutil.rmtree(self.work_dir, ignore_errors=True)
        self._release()

    def release(self) -> None:
        """Stop without publishing and keep what :meth:`seal` recorded, for :meth:`resume`
        (what was staged after the last seal is removed then); without a seal, :meth:`abort`."""
        if not (self.work_dir / _PROGRESS_NAME).exists():
            self.abort()
            return
        if self._pool is not None:
            self._pool.abort()
        self._local.abort()
        self._release()

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


_LOCK_NAME = ".lock"
#: what a sealed writer records for a writer that resumes it (see StagingWriter.seal)
_PROGRESS_NAME = PROGRESS_NAME
#: a sealed work directory no writer resumed is removed after this many seconds
RESUMABLE_SECONDS = 7 * 24 * 3600


def _hold_lock(directory: Path) -> int:
    """Create ``directory/.lock`` already locked (flock, released when the process dies)."""
    tmp = directory / f".lock-{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.replace(tmp, directory / _LOCK_NAME)
    return fd


def remove_stale_work_dirs(staging_dir: str | os.PathLike[str]) -> list[str]:
    """Remove the work directories of dumps that died before publishing (``.incomplete-*``
    whose lock no live process holds) and the leftovers of interrupted replacements
    (``.replaced-*``); returns their names."""
    removed: list[str] = []
    for path in Path(staging_dir).iterdir():
        if path.name.startswith(".replaced-"):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
            continue
        if not path.name.startswith(".incomplete-"):
            continue
        try:  # sealed to be resumed (StagingWriter.seal): kept for a while
            if time.time() - (path / _PROGRESS_NAME).stat().st_mtime < RESUMABLE_SECONDS:
                continue
        except OSError:
            pass
        try:
            fd = os.open(path / _LOCK_NAME, os.O_RDWR)
        except OSError:
            continue  # being created, or published right now
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a live dump
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)
        removed.append(path.name)
    return removed
