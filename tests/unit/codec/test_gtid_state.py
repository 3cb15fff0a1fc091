"""Both kinds of GTID state answer the same calls, so callers never branch on the kind."""
import pytest

from airflow_provider_binlog.codec.gtid import MariadbGtidPosition, MysqlGtidSet

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

KINDS = {
    "mysql": (MysqlGtidSet(f"{U1}:1-5"), f"{U1}:6", f"{U1}:1-6", b""),
    "mariadb": (MariadbGtidPosition("0-1-5"), "0-1-6", "0-1-6", b"0-1-5"),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_add_contains_union_and_empty_behave_alike(kind):
    state, next_gtid, after_text, _ = KINDS[kind]
    after = state.add(next_gtid)
    assert str(after).replace(" ", "") == after_text
    assert after.contains(state) and not state.contains(after)
    assert after.contains(next_gtid) and not state.contains(next_gtid)
    assert state.union(after) == after and after.union(state) == after
    assert not state.is_empty() and type(state)().is_empty()


def test_encode_gives_what_a_replica_sends():
    assert MariadbGtidPosition("0-1-5,1-2-3").encode() == b"0-1-5,1-2-3"
    encoded = MysqlGtidSet(f"{U1}:1-5").encode()
    assert MysqlGtidSet.decode(encoded) == MysqlGtidSet(f"{U1}:1-5")
