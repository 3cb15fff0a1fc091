"""Command line: ``python -m airflow_provider_binlog decode FILE...`` and
``python -m airflow_provider_binlog quickstart``."""
from __future__ import annotations

import argparse
import codecs
import os
import sys
import time
from typing import Any, Callable, Iterable, Optional

from ..codec import read_binlog_file
from ..codec.decoder import EventDecoder
from ..codec.errors import BinlogError
from ..codec.events import (
    ABSENT,
    FormatDescriptionEvent,
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    RowsEvent,
    TableMapEvent,
    TransactionPayloadEvent,
)
from .render import JsonlRenderer, sql_literal


def _flatten(events: Iterable):
    for event in events:
        yield event
        if isinstance(event, TransactionPayloadEvent):
            yield from event.events


def _jsonl_lines(name: str, event, gtid, renderer: JsonlRenderer) -> list:
    if not isinstance(event, RowsEvent) or event.table_map is None or event.skipped:
        return []
    tm = event.table_map
    head = {"file": name, "pos": event.pos, "ts": event.header.timestamp, "gtid": gtid,
            "schema": tm.schema, "table": tm.table, "op": event.kind}
    if event.deferred is not None:
        return renderer.deferred_lines(head, event.kind, event.deferred)
    return renderer.lines(head, event.kind, tm, event.rows)


def _binary_writer(out) -> Optional[Callable[[bytes], Any]]:
    """The write function of ``out``'s binary layer when ``out`` is UTF-8, else None."""
    binary = getattr(out, "buffer", None)
    try:  # (the lines hold no surrogates: every error handler encodes them alike)
        utf8 = codecs.lookup(out.encoding).name == "utf-8"
    except (AttributeError, LookupError, TypeError):
        utf8 = False
    return binary.write if binary is not None and utf8 else None


def _write_jsonl(out, name: str, events, renderer: JsonlRenderer) -> None:
    """One JSON line per row change. ``events`` come from a decoder that defers rows: the
    rows of an event are decoded (or found corrupt) when the event is written, those of a
    TRANSACTION_PAYLOAD all before any of them is written. The lines are UTF-8: written to
    the binary layer of a UTF-8 ``out``, else decoded and written as text."""
    write = _binary_writer(out)
    if write is not None:
        out.flush()
    else:
        write = lambda data: out.write(data.decode())  # noqa: E731
    _jsonl_to(write, name, events, renderer)


def _jsonl_to(write: Callable[[bytes], Any], name: str, events, renderer: JsonlRenderer) -> None:
    gtid = None
    for event in events:
        if isinstance(event, TransactionPayloadEvent):
            lines = []
            for inner in event.events:
                if isinstance(inner, (GtidEvent, MariadbGtidEvent)):
                    gtid = inner.gtid
                else:
                    lines += _jsonl_lines(name, inner, gtid, renderer)
        elif isinstance(event, (GtidEvent, MariadbGtidEvent)):
            gtid = event.gtid
            continue
        else:
            lines = _jsonl_lines(name, event, gtid, renderer)
        if lines:
            write(b"".join(lines))


def _describe(event) -> str:
    if isinstance(event, QueryEvent):
        return f"Query\tthread_id={event.thread_id}\texec_time={event.exec_time}\terror_code={event.error_code}" \
               f"\n{'use `' + event.schema + '`; ' if event.schema else ''}{event.query}"
    if isinstance(event, TableMapEvent):
        tm = event.table_map
        return f"Table_map: `{tm.schema}`.`{tm.table}` mapped to number {tm.table_id}"
    if isinstance(event, (GtidEvent, MariadbGtidEvent)):
        return f"GTID {event.gtid or 'anonymous'}"
    if isinstance(event, RowsEvent):
        verb = {"insert": "Write_rows", "update": "Update_rows", "delete": "Delete_rows"}[event.kind]
        flags = " flags: STMT_END_F" if event.stmt_end else ""
        return f"{verb}: table id {event.table_id}{flags} ({event.type_name}, {len(event.rows)} rows)"
    if isinstance(event, FormatDescriptionEvent):
        return (f"Start: binlog v {event.binlog_version}, server v {event.server_version}, "
                f"checksum {({0: 'NONE', 1: 'CRC32'}).get(event.checksum_alg, 'none (pre-5.6)')}")
    fields = []
    for slot in getattr(type(event), "__slots__", ()):
        if slot in ("header", "pos", "events", "rows", "table_map", "body"):
            continue
        value = getattr(event, slot, None)
        if value not in (None, b"", ""):
            fields.append(f"{slot}={value}")
    return event.type_name + ("\t" + " ".join(fields) if fields else "")


def _write_text(out, name: str, events) -> None:
    for event in _flatten(events):
        h = event.header
        stamp = time.strftime("%y%m%d %H:%M:%S", time.gmtime(h.timestamp))
        out.write(f"# at {event.pos}\n#{stamp} server id {h.server_id}  end_log_pos {h.log_pos}  "
                  f"{_describe(event)}\n")
        if isinstance(event, RowsEvent) and event.table_map is not None:
            tm = event.table_map
            cols = tm.columns
            verb = {"insert": "INSERT INTO", "update": "UPDATE", "delete": "DELETE FROM"}[event.kind]
            for row in event.rows:
                images = [("SET", row)] if event.kind == "insert" else (
                    [("WHERE", row)] if event.kind == "delete" else [("WHERE", row[0]), ("SET", row[1])])
                out.write(f"### {verb} `{tm.schema}`.`{tm.table}`\n")
                for label, values in images:
                    out.write(f"### {label}\n")
                    for col, value in zip(cols, values):
                        if value is ABSENT:
                            continue
                        literal = sql_literal(value, col)
                        out.write(f"###   @{col.index + 1}={literal} /* {col.name} {col.type_name} */\n")


def _fd(out) -> Optional[int]:
    try:
        return out.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None


def _decode_parallel(path: str, start: Optional[int], stop: Optional[int], verify: bool, workers: int,
                     renderer: JsonlRenderer) -> Optional[int]:
    """``decode --format jsonl`` of one file in ``workers`` processes (see
    :mod:`.parallel_decode`); None when the file is not cut into parts (then one process)."""
    from .parallel_decode import plan_parts, run_parts

    parts = plan_parts(path, start, stop)
    if parts is None:
        return None
    name = os.path.basename(path)

    def render(begin: int, end: int, write: Callable[[bytes], None]) -> Optional[str]:
        decoder = EventDecoder(name, verify_checksum=verify, defer_rows=True)
        events = read_binlog_file(path, start_position=begin, stop_position=end,
                                  verify_checksum=verify, decoder=decoder, chunk_size=1 << 20)
        try:
            _jsonl_to(write, name, events, renderer)
        except BrokenPipeError:
            raise
        except BinlogError as exc:
            return f"error: {exc}"
        except (OSError, ValueError) as exc:
            return f"error: {path}: {exc}"
        return None
    return run_parts(parts, workers, render)


def decode_command(args) -> int:
    renderer = JsonlRenderer()
    out = sys.stdout
    files = args.files
    # several processes when each part's lines can go straight to a UTF-8 standard output
    workers = args.workers if args.workers is not None else min(4, os.cpu_count() or 1)
    parallel = (args.format == "jsonl" and workers > 1 and hasattr(os, "fork")
                and _binary_writer(out) is not None and _fd(out) == 1)
    for i, path in enumerate(files):
        start = args.start_position if i == 0 else None
        stop = args.stop_position if i == len(files) - 1 else None
        verify = not args.no_verify_checksum
        if parallel:
            code = _decode_parallel(path, start, stop, verify, workers, renderer)
            if code == 2:
                return 2
            if code is not None:
                continue
        decoder = None
        if args.format == "jsonl":  # rows are decoded by the JSON renderer, straight into text
            decoder = EventDecoder(os.path.basename(path), verify_checksum=verify, defer_rows=True)
        events = read_binlog_file(path, start_position=start, stop_position=stop,
                                  verify_checksum=verify, decoder=decoder)
        try:
            if args.format == "jsonl":
                _write_jsonl(out, os.path.basename(path), events, renderer)
            else:
                _write_text(out, path, events)
        except BrokenPipeError:
            raise
        except BinlogError as exc:
            out.flush()
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except (OSError, ValueError) as exc:
            out.flush()
            print(f"error: {path}: {exc}", file=sys.stderr)
            return 2
    out.flush()
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-provider-binlog",
                                     description="MySQL/MariaDB binlog tools.")
    sub = parser.add_subparsers(dest="command", required=True)
    dec = sub.add_parser("decode", help="decode binlog or relay-log files",
                         description="Decode binlog files: one JSON object per row change "
                                     "(jsonl) or a mysqlbinlog-like view of every event (text).")
    dec.add_argument("files", nargs="+", metavar="FILE")
    dec.add_argument("--format", choices=("jsonl", "text"), default="jsonl")
    dec.add_argument("--start-position", type=int, default=None,
                     help="start at this event offset in the first file")
    dec.add_argument("--stop-position", type=int, default=None,
                     help="stop before the event at or after this offset in the last file")
    dec.add_argument("--no-verify-checksum", action="store_true",
                     help="do not check CRC32 event checksums")
    dec.add_argument("--workers", type=_positive, default=None, metavar="N",
                     help="processes rendering JSON lines (jsonl), each a part of a file in turn, "
                          "the output in file order (default: the CPUs, at most 4; 1: this process)")
    dec.set_defaults(func=decode_command)
    quick = sub.add_parser(
        "quickstart", help="run the whole load end to end on a private MariaDB and a local Spark",
        description="Start a private MariaDB with a sample shop schema, load it into Iceberg with the "
                    "example Airflow DAGs (initial snapshot, then rounds of random changes and "
                    "incremental loads, run with dag.test() on an SQLite metadata database), and "
                    "check that the Iceberg tables equal the MariaDB tables.")
    quick.add_argument("--workdir", default=".work/quickstart",
                       help="where the Airflow home, staging, warehouse and checkpoints go; cleared "
                            "first (default: .work/quickstart)")
    quick.add_argument("--rows", type=int, default=1000,
                       help="sample customers (twice as many orders) (default: 1000)")
    quick.add_argument("--rounds", type=int, default=3,
                       help="rounds of random changes, each followed by an incremental load (default: 3)")
    quick.add_argument("--seed", type=int, default=2024, help="seed of the random data (default: 2024)")
    quick.set_defaults(func=quickstart_command)
    return parser


def quickstart_command(args) -> int:
    if args.rows < 1 or args.rounds < 0:
        print("error: --rows must be at least 1 and --rounds not negative", file=sys.stderr)
        return 2
    from ..local.quickstart import command
    return command(args)


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # the reader (e.g. ``head``) went away: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
