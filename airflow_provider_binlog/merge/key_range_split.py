"""A table's staged changes too large to fold at once, split by key range in one pass: every
staged file is read once, batch by batch, and each batch's rows go to the local spill file of
their key's range, so that each range is then folded alone (see :func:`.direct_changes.
collapse_staged`) and memory holds one batch while splitting and one range while folding.

A row's key is its after image's first key column, else its before image's (a delete); the
ranges come from :func:`.direct_changes.key_ranges`. Changes of a key never span two ranges,
as a direct commit's batch changes no key."""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence

from ..staging.storage import open_parquet
from .direct_changes import CHANGE_COLUMNS, KeyRange, change_keys

#: Rows read from a staged file at a time.
SPLIT_BATCH_ROWS = 65_536


def _in_range(keys: Any, key_range: KeyRange) -> Any:
    import pyarrow.compute as pc

    low, high = key_range
    mask = pc.is_valid(keys)
    if low is not None:
        mask = pc.and_(mask, pc.greater_equal(keys, low))
    if high is not None:
        mask = pc.and_(mask, pc.less(keys, high))
    return pc.fill_null(mask, False)


def split_by_key_range(files: Sequence[str], key: str, ranges: Sequence[KeyRange],
                       directory: str) -> Optional[list[tuple[list[str], int]]]:
    """The staged ``files``' changes (their :data:`CHANGE_COLUMNS`, in staging order) split
    into one local Parquet file per range of ``ranges`` under ``directory``: the files of each
    range (none when no change falls in it) and its rows. None when the files differ in
    columns or a change has no key (then the batch is not simple)."""
    import pyarrow.parquet as pq

    writers: list[Any] = [None] * len(ranges)
    rows = [0] * len(ranges)
    paths = [os.path.join(directory, f"range-{i:03d}.parquet") for i in range(len(ranges))]
    schema = None
    try:
        for path in files:
            for batch in open_parquet(path).iter_batches(batch_size=SPLIT_BATCH_ROWS, columns=list(CHANGE_COLUMNS)):
                if schema is None:
                    schema = batch.schema
                elif batch.schema != schema:
                    return None
                keys = change_keys(batch, key)
                if keys.null_count:
                    return None
                placed = 0
                for i, key_range in enumerate(ranges):
                    part = batch.filter(_in_range(keys, key_range))
                    placed += part.num_rows
                    rows[i] += part.num_rows
                    if not part.num_rows:
                        continue
                    if writers[i] is None:
                        writers[i] = pq.ParquetWriter(paths[i], schema, compression="lz4")
                    writers[i].write_batch(part)
                if placed != batch.num_rows:  # ranges that do not cover every key: nothing is lost
                    return None
    finally:
        for writer in writers:
            if writer is not None:
                writer.close()
    return [([p] if w is not None else [], n) for p, w, n in zip(paths, writers, rows)]


__all__ = ["SPLIT_BATCH_ROWS", "split_by_key_range"]
