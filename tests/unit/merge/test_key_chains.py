"""Keys linked by primary-key changes resolve in binlog order."""
from airflow_provider_binlog.merge.key_chains import fold_key_chains


def test_fold_key_chains_resolves_key_changes_in_order():
    # target rows 1 and 2; batch: update 1 set a; 1 -> 3 (MINIMAL: only the key); 2 -> 1;
    # update 3 set b
    o = [(1, i, 0) for i in range(5)]
    events = [
        (o[0], "update", "a", (1,), None, [False, True, False]),
        (o[1], "delete", "b", (1,), None, [False] * 3),
        (o[1], "arrive", "a", (3,), (1,), [True, False, False]),
        (o[2], "delete", "b", (2,), None, [False] * 3),
        (o[2], "arrive", "a", (1,), (2,), [True, False, False]),
        (o[3], "update", "a", (3,), None, [False, False, True]),
    ]
    out = {ref: (op, origin, src) for ref, op, origin, src in fold_key_chains(events, 3)}
    assert out[(o[0], "a")] == ("upsert", (o[2], "b"), [o[2], None, None])     # key 1: row 2's
    assert out[(o[1], "a")] == ("upsert", (o[0], "a"), [o[1], o[0], o[3]])     # key 3: row 1's
    assert out[(o[2], "b")] == ("delete", None, [None] * 3)                      # key 2
