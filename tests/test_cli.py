"""The ``decode`` command: JSON lines per row change, a mysqlbinlog-like text view, errors on
stderr with file and offset and a non-zero exit status."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_provider_binlog.cli import main
from tests.corpus import CORPUS

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
