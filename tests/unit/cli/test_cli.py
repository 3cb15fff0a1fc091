"""The ``decode`` command: JSON lines per row change, a mysqlbinlog-like text view, errors on
stderr with file and offset and a non-zero exit status."""
from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys
from decimal import Decimal

import pytest

from airflow_provider_binlog.cli import main
from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec import read_binlog_file
from airflow_provider_binlog.codec.errors import BinlogError
from airflow_provider_binlog.codec.events import (ABSENT, GtidEvent, JsonDiffs, MariadbGtidEvent, RowsEvent,
                                                  TransactionPayloadEvent)
from airflow_provider_binlog.codec.json_text import to_json_compatible
from airflow_provider_binlog.cli.values_json import RowRenderer
from tests.corpus import CORPUS, manifest

if not CORPUS.exists():
    pytest.skip(f"binlog corpus not found at {CORPUS}", allow_module_level=True)

ALL_TYPES = CORPUS / "rusuly__MySqlCdc/samples/MySqlCdc.Sample/mysql-bin.000001"  # MySQL 5.7
ENUM_SET = CORPUS / "blackbeam__rust_mysql_common/test-data/binlogs/mysql-enum-string-set.000001"
MARIADB = CORPUS / "blackbeam__rust_mysql_common/test-data/binlogs/mariadb-bin.000001"


def run(capsys, *args):
    code = main(["decode", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_jsonl_encodes_every_type_as_documented(capsys):
    code, out, err = run(capsys, ALL_TYPES)
    assert code == 0 and err == ""
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 3
    first = records[0]
    assert {k: first[k] for k in ("file", "pos", "ts", "gtid", "schema", "table", "op", "before")} == {
        "file": "mysql-bin.000001", "pos": 1544, "ts": 1631467185, "gtid": None,
        "schema": "test", "table": "mysqlcdc", "op": "insert", "before": None}
    after = first["after"]
    # values from Scripts.sql (the binlog has no column names: positional @N)
    assert after["@6"] == 1234567890987654321
    assert after["@8"] == 123456789.09876543
    assert after["@9"] == "1234567890112233445566778899001112223334445556667778889.9900011112"
    assert after["@13"] == {"id": 1, "name": "John"}
    assert after["@15"] == 0b0111101101010101011110000111
    assert after["@16"] == 2 and after["@17"] == 4          # ENUM/SET without labels: index/bitmask
    assert after["@18"] == 1989
    assert after["@19"] == "1985-10-23"
    assert after["@20"] == "1988-11-27 14:12:13.345"      # DATETIME(3)
    assert after["@21"] == "15:22:33.67"                  # TIME(2)
    assert after["@22"] == "1985-10-13 10:22:23.567"      # TIMESTAMP(3), UTC


def test_jsonl_uses_column_names_and_enum_labels_from_full_metadata(capsys):
    code, out, _ = run(capsys, ENUM_SET)
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [r["op"] for r in records] == ["insert", "update", "delete"]
    assert records[0]["gtid"] is not None and ":" in records[0]["gtid"]
    assert set(records[0]["after"]) == {"f1", "f2", "f3", "f4", "f5"}
    assert records[2]["before"]["f3"] == "variant2" and records[2]["before"]["f4"] == "two,four"


def test_jsonl_carries_mariadb_gtids(capsys):
    code, out, _ = run(capsys, MARIADB)
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and records
    assert all(r["gtid"].count("-") == 2 for r in records)


def test_text_format_shows_every_event_and_row_images(capsys):
    code, out, _ = run(capsys, "--format", "text", CORPUS / "zalora__binlog-parser/data/fixtures/mysql-bin.01")
    assert code == 0
    assert out.count("# at ") == 17
    assert "Table_map: `test_db`.`buildings` mapped to number 70" in out
    assert "### INSERT INTO `test_db`.`buildings`" in out
    assert "###   @2='ACME Headquaters'" in out
    assert "### DELETE FROM" in out and "### UPDATE" in out


def test_positions_limit_the_decoded_range(capsys):
    path = CORPUS / "zalora__binlog-parser/data/fixtures/mysql-bin.01"
    code, out, _ = run(capsys, "--start-position", 428, "--stop-position", 723, path)
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["pos"] for r in records] == [558] * len(records) and records


def test_errors_go_to_stderr_with_file_and_offset_and_nonzero_exit(capsys):
    bad = CORPUS / "blackbeam__rust_mysql_common/test-data/binlogs/binlog_truncated_prev_gtid_event.000001"
    code, out, err = run(capsys, bad)
    assert code != 0
    assert "binlog_truncated_prev_gtid_event.000001 at offset 120" in err
    assert err.startswith("error: ")


def test_checksum_verification_can_be_turned_off(tmp_path, capsys):
    data = bytearray((CORPUS / "zalora__binlog-parser/data/fixtures/mysql-bin.01").read_bytes())
    data[300] ^= 0x01
    broken = tmp_path / "mysql-bin.000007"
    broken.write_bytes(bytes(data))
    code, _, err = run(capsys, broken)
    assert code != 0 and "CRC32 mismatch" in err and "offset 258" in err
    code, out, _ = run(capsys, "--no-verify-checksum", broken)
    assert code == 0 and out.count("\n") == 10
    assert '"@2": "ACME!Headquaters"' in out  # the flipped bit, decoded as stored


def test_module_entry_point_runs_as_a_program():
    proc = subprocess.run([sys.executable, "-m", "airflow_provider_binlog", "decode", str(ENUM_SET)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 3


# ------------------------------------------------------------------------------------------
# Every binlog of the corpus: the JSON lines are those of the codec's decoded rows rendered
# one record at a time with RowRenderer and json.dumps (how the command rendered them before
# the generated renderers), and what a small oracle written from the documented encoding
# makes of the same values.

DAMAGED = "alibaba__canal/parse/src/test/resources/binlog/tsdb/mysql-bin.000001"  # not in manifest.json
CORPUS_FILES = sorted({e.get("source_gz") or e["file"] for e in manifest()} | {DAMAGED})


def _decoded_records(path):
    """([(head, kind, table map, row)], error text or None) from the codec's own row decoding."""
    out, gtid = [], None
    try:
        for event in read_binlog_file(path):
            for ev in [event, *event.events] if isinstance(event, TransactionPayloadEvent) else [event]:
                if isinstance(ev, (GtidEvent, MariadbGtidEvent)):
                    gtid = ev.gtid
                    continue
                if not isinstance(ev, RowsEvent) or ev.table_map is None or ev.skipped:
                    continue
                tm = ev.table_map
                head = {"file": path.name, "pos": ev.pos, "ts": ev.header.timestamp, "gtid": gtid,
                        "schema": tm.schema, "table": tm.table, "op": ev.kind}
                out += [(head, ev.kind, tm, row) for row in ev.rows]
    except BinlogError as exc:
        return out, f"error: {exc}\n"
    except (OSError, ValueError) as exc:
        return out, f"error: {path}: {exc}\n"
    return out, None


def _images(kind, row):
    return (None, row) if kind == "insert" else (row, None) if kind == "delete" else row


def _previous_line(head, kind, tm, row, renderer=RowRenderer()):
    before, after = _images(kind, row)
    record = dict(head)
    record["before"] = None if before is None else renderer.as_json_dict(tm, before)
    record["after"] = None if after is None else renderer.as_json_dict(tm, after)
    return json.dumps(record, ensure_ascii=False) + "\n"


def _fraction(micro, fsp):
    return "." + str(1000000 + micro)[1:1 + fsp] if fsp else ""


def _oracle_value(col, v):
    """The documented JSON encoding of one decoded value (README, decode --format jsonl)."""
    fsp = col.hires_fsp or (col.meta if col.type in (C.MYSQL_TYPE_TIME2, C.MYSQL_TYPE_DATETIME2,
                                                     C.MYSQL_TYPE_TIMESTAMP2) else 0)
    fsp = min(fsp, 6)
    if col.type == C.MYSQL_TYPE_JSON:
        if isinstance(v, JsonDiffs):
            return {"json_diffs": [{"op": d.operation, "path": d.path, "value": to_json_compatible(d.value)}
                                   for d in v.diffs]}
        return to_json_compatible(v)
    if isinstance(v, (bytes, bytearray)):  # binary, GEOMETRY, text that is not valid in its charset
        return base64.b64encode(v).decode()
    if isinstance(v, Decimal):  # exact digits, never an exponent
        sign, digits, exponent = v.as_tuple()
        text = "".join(map(str, digits))
        if exponent < 0:
            text = text.rjust(-exponent + 1, "0")
            text = text[:exponent] + "." + text[exponent:]
        else:
            text += "0" * exponent
        return ("-" if sign else "") + text
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:  # TIMESTAMP: UTC
            v = v.astimezone(dt.timezone.utc)
        return (f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
                + _fraction(v.microsecond, fsp))
    if isinstance(v, dt.date):
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d}"
    if isinstance(v, dt.timedelta):
        micros = abs(v) // dt.timedelta(microseconds=1)
        seconds, micro = divmod(micros, 1000000)
        return (("-" if v < dt.timedelta(0) else "") + f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:"
                f"{seconds % 60:02d}" + _fraction(micro, fsp))
    if isinstance(v, tuple):  # VECTOR
        return list(v)
    assert v is None or type(v) in (int, float, str), (col, v)
    return v


def _oracle_record(head, kind, tm, row):
    images = [None if image is None else {c.name: _oracle_value(c, v) for c, v in zip(tm.columns, image)
                                          if v is not ABSENT}
              for image in _images(kind, row)]
    return {**head, "before": images[0], "after": images[1]}


@pytest.mark.parametrize("relative", CORPUS_FILES)
def test_jsonl_of_every_corpus_file_is_that_of_the_previous_renderer_and_the_documented_encoding(
        relative, capsys):
    path = CORPUS / relative
    decoded, error = _decoded_records(path)
    code, out, err = run(capsys, path)
    assert (code, err) == ((2, error) if error else (0, ""))
    lines = out.splitlines(keepends=True)
    previous = [_previous_line(*d) for d in decoded]
    assert [json.loads(line) for line in lines] == [json.loads(line) for line in previous]
    assert lines == previous  # the same text, character for character
    assert [json.loads(line) for line in lines] == [_oracle_record(*d) for d in decoded]


NON_ASCII = CORPUS / "osheroff__mysql-binlog-connector-java/src/test/resources/mysql-bin.checksum-crc32"


def test_jsonl_to_a_stdout_that_is_not_utf8_is_written_as_text():
    def decode(*env):
        proc = subprocess.run([sys.executable, "-m", "airflow_provider_binlog", "decode", str(NON_ASCII)],
                              capture_output=True, timeout=60, env={**os.environ, **dict(env)})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout
    utf8 = decode(("PYTHONIOENCODING", "utf-8"))
    assert not utf8.isascii()
    assert utf8.decode().encode("ascii", "backslashreplace") == decode(("PYTHONIOENCODING", "ascii:backslashreplace"))
