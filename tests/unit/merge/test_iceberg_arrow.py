"""Iceberg schema JSON as the Arrow schema of data files (merge.iceberg_arrow), and the exact
conversions into it; pure pyarrow."""
from decimal import Decimal

import pyarrow as pa

from airflow_provider_binlog.merge.iceberg_arrow import FIELD_ID, arrow_schema, arrow_type, conform

FIELDS = [
    {"id": 1, "name": "id", "required": True, "type": "int"},
    {"id": 2, "name": "amount", "required": False, "type": "decimal(12, 2)"},
    {"id": 3, "name": "at", "required": False, "type": "timestamp"},
    {"id": 4, "name": "ts", "required": False, "type": "timestamptz"},
    {"id": 5, "name": "tags", "required": False,
     "type": {"type": "list", "element-id": 7, "element": "string", "element-required": False}},
    {"id": 6, "name": "raw", "required": False, "type": "fixed[4]"},
]


def test_iceberg_types_map_to_arrow_with_their_field_ids():
    schema = arrow_schema(FIELDS)
    assert [f.type for f in schema] == [pa.int32(), pa.decimal128(12, 2), pa.timestamp("us"),
                                        pa.timestamp("us", tz="UTC"), pa.list_(pa.string()), pa.binary(4)]
    assert [f.metadata[FIELD_ID] for f in schema] == [b"1", b"2", b"3", b"4", b"5", b"6"]
    assert [f.nullable for f in schema] == [False, True, True, True, True, True]
    assert schema.field("tags").type.value_field.metadata[FIELD_ID] == b"7"


def test_types_not_written_directly_have_no_arrow_schema():
    assert arrow_type("uuid") is None and arrow_type("timestamp_ns") is None
    assert arrow_type({"type": "map", "key-id": 1, "value-id": 2, "key": "string", "value": "int"}) is None
    assert arrow_schema(FIELDS + [{"id": 9, "name": "u", "required": False, "type": "uuid"}]) is None


def test_widenings_convert_and_other_changes_refuse():
    schema = arrow_schema([{"id": 1, "name": "id", "required": True, "type": "long"},
                           {"id": 2, "name": "d", "required": False, "type": "decimal(20, 4)"},
                           {"id": 3, "name": "f", "required": False, "type": "double"}])
    data = pa.table({"f": pa.array([1.5], pa.float32()), "id": pa.array([7], pa.int8()),
                     "d": pa.array([Decimal("1.25")], pa.decimal128(12, 2))})
    out = conform(data, schema)
    assert out.schema == schema and out.to_pylist() == [{"id": 7, "d": Decimal("1.2500"), "f": 1.5}]
    # narrower, another kind, or a null in a required column: refused
    assert conform(data.set_column(1, "id", pa.array(["7"])), schema) is None
    assert conform(data.set_column(2, "d", pa.array([Decimal("1.25")], pa.decimal128(30, 2))), schema) is None
    assert conform(data.set_column(1, "id", pa.array([None], pa.int8())), schema) is None
