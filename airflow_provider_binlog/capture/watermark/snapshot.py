"""The entry point of a watermark snapshot (the algorithm is described in
:mod:`~airflow_provider_binlog.capture.watermark`): the tables chosen and their keys, a resume
picked up where it was sealed, the tables read, and the batch published from the first
watermark to the last."""
from __future__ import annotations

import datetime as dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

from .. import arrow_reader
from ...checkpoints import Checkpoint
from ...codec.gtid import Flavor, MariadbGtidPosition, parse_gtid_state
from ...replica.information_schema import estimated_rows, list_tables
from ...schema_history import SchemaHistory, seed_history
from ...staging import Manifest, StagingWriter
from ...staging.masking import Masking
from ...staging.storage import StorageOptions
from ...common.tables import TableFilter
from ..snapshot import SnapshotError, table_map_from_information_schema
from .chunks import Table
from .follower import Follower
from .keys import table_to_read, usable_key
from .positions import binlog_status, start_position
from .resume import restore_tables_progress, tables_progress
from .table_reads import read_consistently, read_round, read_table

log = logging.getLogger(__name__)
UTC = dt.timezone.utc
#: rows per chunk, by default, of a table read into Arrow, and of one read with pymysql
ARROW_CHUNK_ROWS, CHUNK_ROWS = 50_000, 10_000
#: a resumable snapshot seals its staged work (closing every file) once this many rows were
#: staged since the last seal, or this many seconds passed: a killed run reads at most that again,
#: and a row file (``staging/row_files.py``) holds that many rows, not one chunk's
SEAL_ROWS, SEAL_SECONDS = 1 << 20, 30.0


# long: the snapshot's protocol read top to bottom (watermarks, follower, the tables' reads,
# publish, cleanup on failure); each step is a call into its own module
def take_watermark_snapshot(connect: Callable[[], Any], replica_factory: Callable[[], Any], *, staging_dir,
                            tables: TableFilter, flavor: str, server: dict, chunk_rows: Optional[int] = None,
                            progress: Optional[Callable[[str, int, int], None]] = None,
                            masking: Optional[Masking] = None, resume_key: Optional[str] = None,
                            arrow_url: Optional[str] = None, reader: str = "auto",
                            read_connections: int = 1,
                            estimates: Optional[Callable[[dict[str, int]], None]] = None,
                            storage_options: Optional[StorageOptions] = None) -> Manifest:
    """Read the selected tables by key chunks between binlog watermarks and publish them as a
    snapshot batch from the first watermark (``start``) to the last (``end``): staged chunk
    rows, and the changes of rows already read made while the snapshot went on.

    ``connect()`` opens a plain pymysql connection (autocommit), ``replica_factory()`` a
    :class:`~airflow_provider_binlog.replica.ReplicaConnection` (it reads the binlog as server
    id 0, next to any running load).

    With ``resume_key``, the staged work is sealed after the chunk that brings it to about a
    million rows staged since the last seal, or 30 seconds after it; a snapshot with the same
    key whose process died (killed, a lost worker) is continued where its work was last
    sealed, so at most the chunks read since then are read again.

    ``reader``: ``"arrow"`` reads chunks straight into Arrow with connectorx
    (:mod:`~airflow_provider_binlog.capture.arrow_reader`; ``arrow_url`` is its ``mysql://``
    address), ``"pymysql"`` row by row, ``"auto"`` (the default) with connectorx where it can
    (an ``arrow_url``, connectorx installed, every column of the table of a type it reads
    exactly), else with pymysql.
    ``read_connections`` is the connection budget: up to that many tables read into Arrow have a
    chunk read at once, and a chunk of the last such table, when it is keyed by one integer
    column, is split between that many connections.

    ``progress(table, rows_just_read, rows_read_of_the_table)`` is called after each chunk,
    ``estimates({schema.table: estimated rows})`` once the tables are known.

    ``chunk_rows`` (rows per chunk) defaults to :data:`ARROW_CHUNK_ROWS` for a table read into
    Arrow and :data:`CHUNK_ROWS` for one read with pymysql (a chunk's read costs a few
    milliseconds besides its rows, which an Arrow read of 10,000 rows does not dwarf)."""
    if chunk_rows is not None and chunk_rows < 1:
        raise SnapshotError(f"chunk_rows must be at least 1, not {chunk_rows}")
    if reader not in ("auto", "arrow", "pymysql"):
        raise SnapshotError(f"reader is 'auto', 'arrow' or 'pymysql', not {reader!r}")
    if read_connections < 1:
        raise SnapshotError(f"read_connections must be at least 1, not {read_connections}")
    if reader == "arrow" and (arrow_url is None or not arrow_reader.available()):
        raise SnapshotError("reader='arrow' needs connectorx installed (pip install connectorx) and a "
                            "connection without TLS; use reader='auto' or 'pymysql'")
    use_arrow = reader != "pymysql" and arrow_url is not None and arrow_reader.available()
    conn = connect()
    writer: Optional[StagingWriter] = None
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
        selected = list_tables(conn, tables)
        state: dict[tuple[str, str], Table] = {}
        for schema, table in selected:
            tm = table_map_from_information_schema(conn, schema, table, flavor)
            if tm is None:
                continue
            state[(schema, table)] = t = table_to_read(tm, usable_key(conn, tm))
            if t.consistent:  # no usable key: read in one consistent transaction
                continue
            if use_arrow:
                why = arrow_reader.arrow_readable(tm)
                if why is None:
                    t.arrow = arrow_reader.ArrowChunkReader(arrow_url, tm, read_connections)
                elif reader == "arrow":
                    raise SnapshotError(f"{schema}.{table}: {why}, which connectorx does not read exactly; "
                                        f"use reader='auto' (such tables are read with pymysql)")
                else:
                    log.info("watermark snapshot: %s.%s read with pymysql: %s", schema, table, why)
        if estimates is not None:
            estimates(estimated_rows(conn, list(state)))
        resumed = StagingWriter.resume(staging_dir, resume_key, {k: t.tm for k, t in state.items()},
                                       masking=masking, storage_options=storage_options) if resume_key else None
        if resumed is not None:
            writer, saved = resumed
            start_file, start_pos, start_gtid = saved["start"]
            history = SchemaHistory.from_json(saved["history"])
            taken_at = dt.datetime.fromisoformat(saved["taken_at"])
            restore_tables_progress(state, saved["tables"])
            resumed_rows = sum(t.rows for t in state.values())
            log.info("watermark snapshot %s resumed at %s:%d, %d rows staged before", resume_key,
                     saved["follower"][0], saved["follower"][1], resumed_rows)
        else:
            writer = StagingWriter(staging_dir, masking=masking, storage_options=storage_options)
            start_file, start_pos, start_gtid = start_position(conn, flavor)
            history = seed_history(conn, tables.schemas_possibly_included, flavor)
            taken_at = dt.datetime.now(UTC)
            saved = {"follower": [start_file, start_pos], "replayed": 0, "changes": 0,
                     "follower_gtid": (start_gtid or "") if flavor == Flavor.MARIADB else None}
            resumed_rows = 0
        for (schema, table), t in state.items():
            tdef = history.get(schema, table)
            if tdef is None or tdef.column_names != tuple(c.name for c in t.tm.columns):
                raise SnapshotError(f"the schema of {schema}.{table} changed while the snapshot started; "
                                    f"run the snapshot again")
        follower = Follower(replica_factory, state, history, tables, writer, tuple(saved["follower"]))
        follower.replayed, follower.staged_changes = saved["replayed"], saved["changes"]
        if saved.get("follower_gtid") is not None:
            follower.gtid_state = MariadbGtidPosition.parse(saved["follower_gtid"])
        if resumed is not None:
            saved_end = saved.get("follower_txn_end")
            follower.txn_end = (saved_end[0], int(saved_end[1])) if saved_end else None

        last_seal = [writer.rows_staged, time.monotonic()]

        def seal() -> None:
            if resume_key and (writer.rows_staged - last_seal[0] >= SEAL_ROWS
                               or time.monotonic() - last_seal[1] >= SEAL_SECONDS):
                last_seal[:] = [writer.rows_staged, time.monotonic()]
                writer.seal({
                    "resume_key": resume_key, "start": [start_file, start_pos, start_gtid],
                    "history": history.to_json(), "taken_at": taken_at.isoformat(),
                    "follower": [follower.file, follower.pos], "replayed": follower.replayed,
                    "follower_gtid": None if follower.gtid_state is None else str(follower.gtid_state),
                    "follower_txn_end": follower.txn_end,
                    "changes": follower.staged_changes,
                    "tables": tables_progress(state)})

        # several tables read into Arrow: a chunk of each of up to read_connections at once;
        # the last such table (or a table read with pymysql): its chunks one after another,
        # each over the budget when its key is one integer column
        with ThreadPoolExecutor(read_connections, thread_name_prefix="snapshot-read") as pool:
            while True:
                pending = [t for t in state.values() if not t.finished]
                if not pending:
                    break
                in_arrow = [t for t in pending if t.arrow is not None]
                if read_connections > 1 and len(in_arrow) > 1:
                    read_round(conn, flavor, writer, follower, in_arrow[:read_connections],
                               chunk_rows or ARROW_CHUNK_ROWS, taken_at, progress, seal, pool)
                elif pending[0].consistent:
                    read_consistently(conn, flavor, writer, follower, pending[0], chunk_rows or CHUNK_ROWS,
                                      taken_at, progress, seal)
                else:
                    t = pending[0]
                    read_table(conn, flavor, writer, follower, t,
                               chunk_rows or (ARROW_CHUNK_ROWS if t.arrow is not None else CHUNK_ROWS), taken_at,
                               progress, seal)
        # MariaDB: the GTID state at the end is the start's and the transactions followed since
        end_file, end_pos, end_gtid = binlog_status(conn, flavor, gtid=follower.gtid_state is None)
        follower.follow_to(end_file, end_pos, None)
        if follower.gtid_state is not None:
            end_gtid = str(follower.gtid_state) or None

        def checkpoint(file: str, pos: int, gtid_text: Optional[str]) -> Checkpoint:
            gtid = None
            if gtid_text:
                gtid = parse_gtid_state(flavor, gtid_text)
            return Checkpoint(file=file, position=pos, gtid=gtid, flavor=flavor,
                              server_id=server.get("server_id"), server_uuid=server.get("server_uuid"))

        # the schema valid at the end, for the incremental loads (no schema change ran since the start)
        history = seed_history(conn, tables.schemas_possibly_included, flavor)
        chunks = sum(t.chunks for t in state.values())
        log.info("watermark snapshot: %d tables in %d chunks, %d rows replayed on chunks, %d changes staged, "
                 "%s:%d .. %s:%d", len(state), chunks, follower.replayed, follower.staged_changes,
                 start_file, start_pos, end_file, end_pos)
        return writer.publish(
            dump_id=f"snapshot-{start_file}.{start_pos}-{end_file}.{end_pos}-{taken_at:%Y%m%dT%H%M%S%fZ}",
            start=checkpoint(start_file, start_pos, start_gtid).to_json(),
            end=checkpoint(end_file, end_pos, end_gtid).to_json(), server=server,
            extra={"mode": "snapshot", "snapshot_method": "watermark", "tables_filter": tables.to_json(),
                   "schema_history": history.to_json(), "snapshot_tables": [f"{s}.{t}" for s, t in state],
                   "snapshot_stats": {"chunks": chunks, "replayed": follower.replayed,
                                      "changes": follower.staged_changes, "resumed": resumed is not None,
                                      "arrow_chunks": sum(t.arrow_chunks for t in state.values()),
                                      "resumed_after_rows": resumed_rows,
                                      "longest_chunk_read_seconds": round(follower.longest_read, 4)}})
    except BaseException as exc:
        if writer is not None:
            if resume_key and not isinstance(exc, SnapshotError):
                writer.release()  # sealed: a rerun with the same key continues it
            else:
                writer.abort()
        raise
    finally:
        conn.close()


__all__ = ["ARROW_CHUNK_ROWS", "CHUNK_ROWS", "take_watermark_snapshot"]
