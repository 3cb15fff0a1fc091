"""Batches in checkpoint order, refused when they leave a gap, overlap or disagree."""
import pytest

from airflow_provider_binlog.merge.batches import plan_batches
from airflow_provider_binlog.merge.errors import BatchGapError, MergeJobError
from tests.unit.merge._manifests import manifest


def test_batches_are_ordered_and_a_repeated_manifest_applies_once(tmp_path):
    a, b, c = manifest(tmp_path, 4, 100), manifest(tmp_path, 100, 250), manifest(tmp_path, 250, 300)
    ordered = plan_batches([c, a, b, a.path])
    assert [x.batch_id for x in ordered] == [a.dump_id, b.dump_id, c.dump_id]


def test_a_gap_between_batches_is_refused_naming_both_ends(tmp_path):
    a, c = manifest(tmp_path, 4, 100), manifest(tmp_path, 250, 300)
    with pytest.raises(BatchGapError, match=r"ends at \[mysql-bin.000001:100\].*starts at \[mysql-bin.000001:250\]"):
        plan_batches([a, c])


def test_overlapping_batches_are_refused(tmp_path):
    with pytest.raises(BatchGapError, match="overlapping batches"):
        plan_batches([manifest(tmp_path, 4, 200), manifest(tmp_path, 100, 300)])


def test_two_manifests_with_one_dump_id_and_different_ranges_are_refused(tmp_path):
    first = manifest(tmp_path / "one", 4, 100)
    other = manifest(tmp_path / "two", 4, 100)
    other.data["end"] = {"file": "mysql-bin.000001", "pos": 120}
    (other.path).write_text(__import__("json").dumps(other.data))
    with pytest.raises(MergeJobError, match="cover different ranges"):
        plan_batches([first, other.path])


def test_batches_across_a_failover_follow_each_other_by_gtid_not_by_offsets(tmp_path):
    """Before the failover the primary (server 101); the batch that resumed by GTID on the
    promoted replica (server 102) starts at the primary's checkpoint and ends at smaller offsets
    of the replica's binlog; the next batch is the replica's alone."""
    def cp(pos, seq, server):
        return {"file": "mariadb-bin.000001", "pos": pos, "gtid": f"0-101-{seq}", "flavor": "mariadb",
                "server_id": server}

    def write(name, start, end):
        m = manifest(tmp_path / name, 4, 5)
        m.data.update(dump_id=name, start=start, end=end)
        m.path.write_text(__import__("json").dumps(m.data))
        return m.path

    before = write("before", cp(4, 1, 101), cp(9000, 40, 101))
    across = write("across", cp(9000, 40, 101), cp(3000, 55, 102))
    after = write("after", cp(3000, 55, 102), cp(4100, 60, 102))
    assert [b.batch_id for b in plan_batches([after, across, before])] == ["before", "across", "after"]
    # a replica's batch from after the primary's end leaves a gap, one from before it overlaps
    late = write("late", cp(2000, 45, 102), cp(3000, 55, 102))
    with pytest.raises(BatchGapError, match="gap between batches"):
        plan_batches([before, late])
    early = write("early", cp(2000, 30, 102), cp(3000, 55, 102))
    with pytest.raises(BatchGapError, match="overlapping batches"):
        plan_batches([before, early])
