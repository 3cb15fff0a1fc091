"""The schema history is saved with the checkpoint, in the same write, and only with it."""
from airflow_provider_binlog.checkpoints import ABSENT, Checkpoint, FileCheckpointStore

A = Checkpoint(file="mariadb-bin.000001", position=400)
B = Checkpoint(file="mariadb-bin.000001", position=900)
HISTORY = {"format": 1, "tables": [{"schema": "s", "name": "t", "columns": [{"name": "id", "data_type": "int"}]}]}


def test_the_history_saved_with_a_checkpoint_comes_back_with_it(tmp_path):
    store = FileCheckpointStore(tmp_path)
    store.save("k", A, expected=ABSENT, schema_history=HISTORY)
    assert store.load("k") == A
    assert store.load_schema_history("k") == (A, HISTORY)


def test_a_checkpoint_saved_without_a_history_drops_the_previous_one(tmp_path):
    store = FileCheckpointStore(tmp_path)
    store.save("k", A, schema_history=HISTORY)
    store.save("k", B, expected=A)
    assert store.load("k") == B
    assert store.load_schema_history("k") is None


def test_a_refused_compare_and_set_keeps_checkpoint_and_history_together(tmp_path):
    import pytest

    from airflow_provider_binlog.checkpoints import CheckpointConflictError

    store = FileCheckpointStore(tmp_path)
    store.save("k", A, schema_history=HISTORY)
    with pytest.raises(CheckpointConflictError):
        store.save("k", B, expected=B, schema_history={"format": 1, "tables": []})
    assert store.load_schema_history("k") == (A, HISTORY)
