"""Field-level decoding of the control and statement events."""
from __future__ import annotations

import struct
import zlib
from decimal import Decimal

import pytest

from airflow_provider_binlog.codec import (BinlogStreamDecoder, EncryptedBinlogError, EventDecoder,
                                           read_binlog_file)
from airflow_provider_binlog.codec.events import (HeartbeatEvent, IncidentEvent, IntvarEvent,
                                                  RandEvent, RawEvent, RowsQueryEvent,
                                                  StartEncryptionEvent, TableMapEvent, UserVarEvent)
from tests.corpus import CORPUS

if not CORPUS.exists():
    pytest.skip(f"binlog corpus not found at {CORPUS}", allow_module_level=True)

RUST_US = CORPUS / "rust-us__mysql-cdc-rs/tests/events/5.7"
BLACKBEAM = CORPUS / "blackbeam__rust_mysql_common/test-data/binlogs"


def _of(path, kind):
    return [e for e in read_binlog_file(path) if isinstance(e, kind)]


def test_intvar_rand_and_user_var_events_carry_their_values():
    (intvar,) = _of(RUST_US / "05_intvar/log.bin", IntvarEvent)
    assert (intvar.pos, intvar.kind, intvar.value) == (736, 1, 0)        # LAST_INSERT_ID() = 0
    (rand,) = _of(RUST_US / "13_rand/log.bin", RandEvent)
    assert (rand.seed1, rand.seed2) == (694882935, 292094996)
    user_vars = {e.name: e for e in _of(RUST_US / "14_user_var/log.bin", UserVarEvent)}
    assert user_vars["val_s"].value == "test blog" and user_vars["val_s"].charset == 33
    assert user_vars["val_i"].value == 100
    assert user_vars["val_d"].value == Decimal("1.00")


def test_incident_event_reports_its_kind():
    (incident,) = _of(BLACKBEAM / "bug40482-bin.000001", IncidentEvent)
    assert (incident.pos, incident.incident, incident.message) == (106, 66, "")


def test_rows_query_event_carries_the_statement():
    (rq,) = _of(RUST_US / "29_row_query/log.bin", RowsQueryEvent)
    assert rq.query == "INSERT INTO `boxercrab` (`title`) VALUES ('hahhhhhhhhh')"


def test_unknown_ignorable_event_from_aurora_is_kept_raw():
    path = CORPUS / "osheroff__mysql-binlog-connector-java/src/test/resources/mysql-bin.aurora-padding"
    (raw,) = _of(path, RawEvent)
    assert (raw.pos, raw.header.type_code, len(raw.body)) == (281, 100, 928 - 19 - 4)


def test_column_visibility_and_names_come_from_optional_metadata():
    maps = _of(BLACKBEAM / "binlog-invisible-columns.000001", TableMapEvent)
    tm = maps[0].table_map
    assert tm.column_names[0] == "f1"
    assert [c.visible for c in tm.columns].count(False) >= 1


def _event(type_code, body, *, crc, log_pos=0, flags=0):
    size = 19 + len(body) + (4 if crc else 0)
    raw = struct.pack("<IBIIIH", 7, type_code, 1, size, log_pos, flags) + body
    return raw + (struct.pack("<I", zlib.crc32(raw)) if crc else b"")


def test_heartbeat_v1_and_v2_give_file_and_position():
    dec = EventDecoder("stream", checksum_alg=1, from_stream=True)
    v1 = dec.decode(_event(27, b"mysql-bin.000042", crc=True, log_pos=1234), 0)
    assert isinstance(v1, HeartbeatEvent)
    assert (v1.log_file, v1.log_position, v1.version) == ("mysql-bin.000042", 1234, 1)
    # v2: type/length/value fields (length-encoded integers), position as a packed integer
    body = b"\x01\x10mysql-bin.000042" + b"\x02\x04\xfd\x40\x42\x0f" + b"\x00"
    v2 = dec.decode(_event(41, body, crc=True), 0)
    assert (v2.log_file, v2.log_position, v2.version) == ("mysql-bin.000042", 1000000, 2)


def test_encrypted_binlog_file_is_refused_with_a_clear_error():
    data = (CORPUS / "blackbeam__rust_mysql_common/test-data/binlogs/mariadb-bin.000001").read_bytes()
    fde_end = struct.unpack_from("<I", data, 4 + 13)[0]
    body = b"\x01" + struct.pack("<I", 1) + b"\x00" * 12
    crafted = data[:fde_end] + _event(164, body, crc=True, log_pos=fde_end + 19 + len(body) + 4)
    stream = BinlogStreamDecoder("mariadb-bin.000001")
    stream.feed(crafted)
    with pytest.raises(EncryptedBinlogError) as info:
        list(stream)
    assert info.value.offset == fde_end and "encrypt" in str(info.value)
    # a server decrypts before sending, so in a replication stream the event is just reported
    dec = EventDecoder("stream", checksum_alg=1, from_stream=True)
    event = dec.decode(crafted[fde_end:], fde_end)
    assert isinstance(event, StartEncryptionEvent) and event.key_version == 1
