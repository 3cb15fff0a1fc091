"""Which staged row files a snapshot's direct commit takes as they are: only a file whose own
schema is the table's as Iceberg reads it (the same columns, primitive types, field ids, none
required)."""
from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.merge.iceberg_arrow import arrow_schema  # noqa: E402
from airflow_provider_binlog.merge.lake.direct_snapshot import adoptable  # noqa: E402
from airflow_provider_binlog.staging.row_files import flat_schema  # noqa: E402

TABLE = [{"id": 1, "name": "id", "type": "long"}, {"id": 2, "name": "v", "type": "string"},
         {"id": 3, "name": "at", "type": "timestamp"}]
STAGED = pa.struct([("id", pa.int64()), ("v", pa.string()), ("at", pa.timestamp("us"))])


def test_a_row_file_in_the_tables_layout_is_taken():
    assert adoptable(flat_schema(STAGED), arrow_schema(TABLE))


@pytest.mark.parametrize("why, table, staged", [
    ("a narrower staged type (TINYINT as int16)",
     TABLE, pa.struct([("id", pa.int16()), ("v", pa.string()), ("at", pa.timestamp("us"))])),
    ("other field ids (a table created from other columns)",
     [{**f, "id": f["id"] + 1} for f in TABLE], STAGED),
    ("a column the table lacks", TABLE[:2], STAGED),
    ("a column the file lacks", TABLE, pa.struct([("id", pa.int64()), ("v", pa.string())])),
    ("a required column", [{**TABLE[0], "required": True}, *TABLE[1:]], STAGED),
    ("a list (its element has no field id in the file)",
     [*TABLE, {"id": 4, "name": "vec", "type": {"type": "list", "element-id": 5, "element": "float"}}],
     pa.struct([*STAGED, ("vec", pa.list_(pa.float32()))])),
])
def test_a_row_file_in_another_layout_is_rewritten(why, table, staged):
    assert not adoptable(flat_schema(staged), arrow_schema(table)), why
