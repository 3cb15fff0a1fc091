"""``decode --format jsonl`` in several processes (parallel_decode, codec.boundaries): the file cut
at transaction starts, the parts rendered by forked workers, the output the same bytes as one
process writes, errors where one process reports them; real corpus binlogs."""
from __future__ import annotations

import gzip
import subprocess
import sys

import pytest

from airflow_provider_binlog.codec import read_binlog_file
from airflow_provider_binlog.codec.boundaries import parts, transaction_starts
from airflow_provider_binlog.codec.events import GtidEvent, MariadbGtidEvent
from airflow_provider_binlog.cli.parallel_decode import plan_parts
from tests.corpus import CORPUS

if not CORPUS.is_dir():
    pytest.skip(f"binlog corpus not found at {CORPUS}", allow_module_level=True)

MYSQL8 = CORPUS / "rust-us__mysql-cdc-rs/tests/events/8.0/folder/binlog.000693"      # 663 transactions
MYSQL57 = CORPUS / "osheroff__mysql-binlog-connector-java/src/test/resources/mysql-bin.checksum-crc32"


RUNS: list = []  # (parts, workers) of each run of parts, as the last decode() recorded them


def decode(path, *args, part_bytes=4096, workers=2):
    """The decode command in a child process (the workers write to its standard output); the
    runs of parts it made go to RUNS."""
    import os
    import tempfile

    fd, runs = tempfile.mkstemp(suffix=".runs")
    os.close(fd)
    code = ("import sys\nfrom airflow_provider_binlog.cli import parallel_decode\n"
            f"parallel_decode.PART_BYTES = {part_bytes}\n"
            "run = parallel_decode.run_parts\n"
            "def recorded(parts, workers, render):\n"
            f"    open({runs!r}, 'a').write(f'{{len(parts)}} {{workers}}\\n')\n"
            "    return run(parts, workers, render)\n"
            "parallel_decode.run_parts = recorded\n"
            "from airflow_provider_binlog.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    try:
        proc = subprocess.run([sys.executable, "-c", code, "decode", "--workers", str(workers), *map(str, args),
                               str(path)], capture_output=True, timeout=120)
        with open(runs) as fh:
            RUNS[:] = [tuple(map(int, line.split())) for line in fh]
    finally:
        os.unlink(runs)
    return proc.returncode, proc.stdout, proc.stderr.decode()


def test_transaction_starts_are_the_offsets_of_the_gtid_events():
    data = MYSQL8.read_bytes()
    gtids = [e.pos for e in read_binlog_file(MYSQL8) if isinstance(e, (GtidEvent, MariadbGtidEvent))]
    assert len(gtids) == 663
    assert transaction_starts(data) == gtids
    assert transaction_starts(data, gtids[10], gtids[20]) == gtids[10:20]
    assert transaction_starts(b"\x1f\x8b" + data[2:]) is None  # not a binlog (e.g. gzip)


def test_parts_are_whole_transactions_of_about_the_size_and_cover_the_range():
    data = MYSQL8.read_bytes()
    starts = transaction_starts(data)
    cut = parts(starts, 4, len(data), 65536)
    assert cut[0][0] == 4 and cut[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(cut, cut[1:]))               # contiguous
    assert all(b in starts for b, _ in cut[1:])                          # cut at transaction starts
    assert all(b - a >= 65536 for a, b in cut[:-1]) and 20 < len(cut) < 40


@pytest.mark.parametrize("path", [MYSQL8, MYSQL57], ids=["mysql8", "mysql57"])
@pytest.mark.parametrize("workers", [2, 3])
def test_the_output_of_several_processes_is_that_of_one_byte_for_byte(path, workers):
    one = decode(path, workers=1)
    assert one[0] == 0 and one[1].count(b"\n") > 50, one[2]
    assert RUNS == []
    assert decode(path, workers=workers, part_bytes=2048) == one
    assert len(RUNS) == 1 and RUNS[0][0] > 5 and RUNS[0][1] == workers


def test_positions_limit_the_range_of_the_parts_too():
    gtids = [e.pos for e in read_binlog_file(MYSQL8) if isinstance(e, (GtidEvent, MariadbGtidEvent))]
    args = ("--start-position", gtids[100], "--stop-position", gtids[400] + 1)
    one = decode(MYSQL8, *args, workers=1)
    assert one[0] == 0 and one[1]
    assert decode(MYSQL8, *args, workers=2) == one and RUNS[0][0] > 5


def test_an_error_in_a_part_ends_the_output_where_one_process_ends_it(tmp_path):
    data = bytearray(MYSQL8.read_bytes())
    data[len(data) // 2] ^= 0x40  # inside some event in the middle: its checksum fails
    broken = tmp_path / "binlog.000693"
    broken.write_bytes(bytes(data))
    one = decode(broken, workers=1)
    assert one[0] == 2 and "CRC32 mismatch" in one[2] and one[1].count(b"\n") > 10
    assert decode(broken, workers=2) == one and RUNS[0][0] > 5


def test_small_compressed_or_unmarked_files_are_not_cut(tmp_path):
    assert plan_parts(str(MYSQL8), None, None, part_bytes=1 << 30) is None        # one part
    assert len(plan_parts(str(MYSQL8), None, None, part_bytes=65536)) > 20
    packed = tmp_path / "binlog.000693.gz"
    packed.write_bytes(gzip.compress(MYSQL8.read_bytes()))
    assert plan_parts(str(packed), None, None, part_bytes=4096) is None
    one = decode(packed, workers=1)
    assert one[0] == 0 and decode(packed, workers=2) == one and RUNS == []       # read in one process


def test_workers_below_one_are_refused():
    code, _, err = decode(MYSQL57, workers=0)
    assert code == 2 and "--workers: a whole number of at least 1, not '0'" in err
