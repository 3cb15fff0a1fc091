"""TABLE_MAP event body: column types, type metadata and optional metadata."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from . import constants as C
from ._bytes import U16, Buffer, read_packed
from .errors import SchemaMismatchError
from .events import Column, TableMap
from .gtid import Flavor
from .schema import SchemaSource, TableSchema, lookup_schema, type_compatible

_ONE_BYTE_META = frozenset({
    C.MYSQL_TYPE_FLOAT, C.MYSQL_TYPE_DOUBLE, C.MYSQL_TYPE_TINY_BLOB, C.MYSQL_TYPE_MEDIUM_BLOB,
    C.MYSQL_TYPE_LONG_BLOB, C.MYSQL_TYPE_BLOB, C.MYSQL_TYPE_GEOMETRY, C.MYSQL_TYPE_JSON,
    C.MYSQL_TYPE_VECTOR, C.MYSQL_TYPE_TIMESTAMP2, C.MYSQL_TYPE_DATETIME2, C.MYSQL_TYPE_TIME2,
})
_TWO_BYTE_LE_META = frozenset({C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_VAR_STRING, C.MYSQL_TYPE_BIT})
_TWO_BYTE_BE_META = frozenset({
    C.MYSQL_TYPE_NEWDECIMAL, C.MYSQL_TYPE_STRING, C.MYSQL_TYPE_ENUM, C.MYSQL_TYPE_SET,
})
_CHARACTER_TYPES = frozenset({
    C.MYSQL_TYPE_STRING, C.MYSQL_TYPE_VAR_STRING, C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_BLOB,
    C.MYSQL_TYPE_TINY_BLOB, C.MYSQL_TYPE_MEDIUM_BLOB, C.MYSQL_TYPE_LONG_BLOB,
})
_BINARY_COLLATION = 63
_LEGACY_TEMPORAL = frozenset({C.MYSQL_TYPE_TIMESTAMP, C.MYSQL_TYPE_DATETIME, C.MYSQL_TYPE_TIME})


def resolve_string_type(type_code: int, meta: int) -> tuple[int, int]:
    """MYSQL_TYPE_STRING hides ENUM, SET and long CHAR in its metadata; return (real type, meta).

    For CHAR the returned meta is the maximum byte length; for ENUM/SET the storage size.
    """
    byte0, byte1 = meta >> 8, meta & 0xFF
    if type_code != C.MYSQL_TYPE_STRING or byte0 == 0:
        return type_code, meta
    if (byte0 & 0x30) != 0x30:
        return C.MYSQL_TYPE_STRING, byte1 | (((byte0 & 0x30) ^ 0x30) << 4)
    if byte0 in (C.MYSQL_TYPE_ENUM, C.MYSQL_TYPE_SET):
        return byte0, byte1
    return C.MYSQL_TYPE_STRING, byte1


def _read_column_meta(types: bytes, buf: Buffer, p: int, end: int) -> list[int]:
    metas = []
    for t in types:
        if t in _ONE_BYTE_META:
            metas.append(buf[p])
            p += 1
        elif t in _TWO_BYTE_LE_META:
            metas.append(U16(buf, p)[0])
            p += 2
        elif t in _TWO_BYTE_BE_META:
            metas.append((buf[p] << 8) | buf[p + 1])
            p += 2
        else:
            metas.append(0)
    if p > end:
        raise ValueError("column metadata overruns the TABLE_MAP event")
    return metas


def _bits_msb_first(data: bytes, count: int) -> list[bool]:
    return [bool(data[i >> 3] & (0x80 >> (i & 7))) for i in range(count)]


def _read_strings(data: bytes, codecs: Sequence[Optional[str]] = ()) -> list[list[str]]:
    """SET_STR_VALUE / ENUM_STR_VALUE: per column a count then that many length-prefixed strings.

    The labels are in the column's character set: ``codecs[k]`` is the Python codec of the
    k-th column listed (utf-8 when unknown)."""
    from .charsets import decode_text
    out = []
    p = 0
    while p < len(data):
        codec = codecs[len(out)] if len(out) < len(codecs) else None
        count, p = read_packed(data, p)
        values = []
        for _ in range(count):
            n, p = read_packed(data, p)
            label = decode_text(bytes(data[p:p + n]), codec or "utf-8")
            values.append(label if isinstance(label, str) else label.decode("utf-8", "replace"))
            p += n
        out.append(values)
    return out


def _read_packed_list(data: bytes) -> list[int]:
    out = []
    p = 0
    while p < len(data):
        v, p = read_packed(data, p)
        out.append(v)
    return out


def _read_default_charset(data: bytes) -> tuple[int, dict[int, int]]:
    default, p = read_packed(data, 0)
    overrides = {}
    while p < len(data):
        idx, p = read_packed(data, p)
        coll, p = read_packed(data, p)
        overrides[idx] = coll
    return default, overrides


def parse_optional_metadata(buf: Buffer, p: int, end: int) -> dict[int, bytes]:
    fields: dict[int, bytes] = {}
    while p < end:
        ftype = buf[p]
        length, p = read_packed(buf, p + 1)
        if p + length > end:
            raise ValueError("optional metadata field overruns the TABLE_MAP event")
        fields[ftype] = bytes(buf[p:p + length])
        p += length
    return fields


def _collations(real_types: list[int], fields: dict[int, bytes], default_key: int, column_key: int,
                selector: Callable[[int], bool]) -> dict[int, int]:
    """Map column index -> collation for the columns selected by ``selector``."""
    selected = [i for i, t in enumerate(real_types) if selector(t)]
    result: dict[int, int] = {}
    if default_key in fields:
        default, overrides = _read_default_charset(fields[default_key])
        for n, col in enumerate(selected):
            result[col] = overrides.get(n, default)
    elif column_key in fields:
        colls = _read_packed_list(fields[column_key])
        for col, coll in zip(selected, colls):
            result[col] = coll
    return result


# long: the TABLE_MAP body's fields and optional metadata in wire order, one pass
def parse_table_map(buf: Buffer, p: int, end: int, table_id_len: int, *, schemas: SchemaSource = None,
                    flavor: Optional[str] = None) -> TableMap:
    from .charsets import codec_for_collation, python_codec

    table_id = int.from_bytes(buf[p:p + table_id_len], "little")
    p += table_id_len
    flags = U16(buf, p)[0]
    p += 2
    n = buf[p]
    schema = bytes(buf[p + 1:p + 1 + n]).decode("utf-8", "replace")
    p += 2 + n
    n = buf[p]
    table = bytes(buf[p + 1:p + 1 + n]).decode("utf-8", "replace")
    p += 2 + n
    ncols, p = read_packed(buf, p)
    types = bytes(buf[p:p + ncols])
    p += ncols
    if p == end:
        # MySQL 5.1 development servers wrote no metadata block and no NULL bitmap.
        metas, null_bits = [0] * ncols, (1 << ncols) - 1
    else:
        meta_len, p = read_packed(buf, p)
        metas = _read_column_meta(types, buf, p, p + meta_len)
        p += meta_len
        nb = (ncols + 7) // 8
        null_bits = int.from_bytes(buf[p:p + nb], "little")
        p += nb
    if p > end or len(types) != ncols:
        raise ValueError("TABLE_MAP event is shorter than its column count requires")
    fields = parse_optional_metadata(buf, p, end) if p < end else {}

    resolved = [resolve_string_type(t, m) for t, m in zip(types, metas)]
    real_types = [r[0] for r in resolved]

    unsigned = [False] * ncols
    if C.OPT_SIGNEDNESS in fields:
        # MariaDB gives YEAR (a TINYINT underneath) a bit of its own; MySQL does not
        signed_types = C.NUMERIC_TYPES | {C.MYSQL_TYPE_YEAR} if flavor == Flavor.MARIADB else C.NUMERIC_TYPES
        numeric = [i for i, t in enumerate(real_types) if t in signed_types]
        for i, flag in zip(numeric, _bits_msb_first(fields[C.OPT_SIGNEDNESS], len(numeric))):
            unsigned[i] = flag
    # MariaDB counts GEOMETRY (a BLOB underneath, collation binary) in the charset lists.
    text_colls = _collations(real_types, fields, C.OPT_DEFAULT_CHARSET, C.OPT_COLUMN_CHARSET,
                             lambda t: t in _CHARACTER_TYPES
                             or (flavor == Flavor.MARIADB and t == C.MYSQL_TYPE_GEOMETRY))
    enum_colls = _collations(real_types, fields, C.OPT_ENUM_AND_SET_DEFAULT_CHARSET,
                             C.OPT_ENUM_AND_SET_COLUMN_CHARSET,
                             lambda t: t in (C.MYSQL_TYPE_ENUM, C.MYSQL_TYPE_SET))
    names = None
    if C.OPT_COLUMN_NAME in fields:
        data, q, names = fields[C.OPT_COLUMN_NAME], 0, []
        while q < len(data):
            ln, q = read_packed(data, q)
            names.append(data[q:q + ln].decode("utf-8", "replace"))
            q += ln
    enum_idx = [i for i, t in enumerate(real_types) if t == C.MYSQL_TYPE_ENUM]
    set_idx = [i for i, t in enumerate(real_types) if t == C.MYSQL_TYPE_SET]
    enum_values: dict[int, tuple[str, ...]] = {}
    set_values: dict[int, tuple[str, ...]] = {}

    def codec_of(coll: int) -> Optional[str]:
        try:
            return codec_for_collation(coll, flavor)
        except KeyError:
            return "utf-8"

    if C.OPT_ENUM_STR_VALUE in fields:
        label_codecs = [codec_of(enum_colls[i]) if i in enum_colls else None for i in enum_idx]
        for i, vals in zip(enum_idx, _read_strings(fields[C.OPT_ENUM_STR_VALUE], label_codecs)):
            enum_values[i] = tuple(vals)
    if C.OPT_SET_STR_VALUE in fields:
        label_codecs = [codec_of(enum_colls[i]) if i in enum_colls else None for i in set_idx]
        for i, vals in zip(set_idx, _read_strings(fields[C.OPT_SET_STR_VALUE], label_codecs)):
            set_values[i] = tuple(vals)
    geometry: dict[int, int] = {}
    if C.OPT_GEOMETRY_TYPE in fields:
        geo_idx = [i for i, t in enumerate(real_types) if t == C.MYSQL_TYPE_GEOMETRY]
        geometry = dict(zip(geo_idx, _read_packed_list(fields[C.OPT_GEOMETRY_TYPE])))
    pk: list[int] = []
    if C.OPT_SIMPLE_PRIMARY_KEY in fields:
        pk = _read_packed_list(fields[C.OPT_SIMPLE_PRIMARY_KEY])
    elif C.OPT_PRIMARY_KEY_WITH_PREFIX in fields:
        pk = _read_packed_list(fields[C.OPT_PRIMARY_KEY_WITH_PREFIX])[0::2]
    visible = [True] * ncols
    if C.OPT_COLUMN_VISIBILITY in fields:
        visible = _bits_msb_first(fields[C.OPT_COLUMN_VISIBILITY], ncols)
    vector_dims: dict[int, int] = {}
    if C.OPT_VECTOR_DIMENSIONALITY in fields:
        vec_idx = [i for i, t in enumerate(real_types) if t == C.MYSQL_TYPE_VECTOR]
        vector_dims = dict(zip(vec_idx, _read_packed_list(fields[C.OPT_VECTOR_DIMENSIONALITY])))

    supplied = lookup_schema(schemas, schema, table)
    if supplied is not None:
        if names is None:
            _check_schema(supplied, real_types, schema, table)
        elif len(supplied.columns) != ncols:
            supplied = None  # the names come from the binlog; the caller checks the schema

    columns = []
    for i in range(ncols):
        t, meta = resolved[i]
        coll = text_colls.get(i)
        text = None
        codec = "utf-8" if t in _CHARACTER_TYPES else None
        if coll is not None:
            text = coll != _BINARY_COLLATION
            codec = codec_of(coll) if text else None
        ev = enum_values.get(i)
        sv = set_values.get(i)
        col_unsigned = unsigned[i]
        col_pk = i in pk
        name = names[i] if names is not None and i < len(names) else f"@{i + 1}"
        data_type = None
        hires = None
        if supplied is not None:
            sc = supplied.columns[i]
            if names is None:
                name = sc.name
            data_type = sc.data_type.lower()
            if C.OPT_SIGNEDNESS not in fields:  # the binlog's own flag, where it has one, wins
                col_unsigned = sc.unsigned
            col_pk = col_pk or sc.primary_key
            ev = ev or (tuple(sc.enum_values) if sc.enum_values else None)
            sv = sv or (tuple(sc.set_values) if sc.set_values else None)
            if t in _LEGACY_TEMPORAL and sc.datetime_precision:
                hires = sc.datetime_precision
            if coll is None and t in _CHARACTER_TYPES:
                if sc.charset is None or sc.charset.lower() == "binary" or data_type.endswith("blob") \
                        or data_type in ("binary", "varbinary"):
                    text, codec = False, None
                else:
                    text, codec = True, python_codec(sc.charset.lower())
        columns.append(Column(
            index=i, name=name, type=t, meta=meta, nullable=bool(null_bits >> i & 1),
            unsigned=col_unsigned, collation=coll, codec=codec, text=text, enum_values=ev,
            set_values=sv, geometry_type=geometry.get(i), visible=visible[i], primary_key=col_pk,
            vector_dimensions=vector_dims.get(i), data_type=data_type, hires_fsp=hires,
        ))
    names_from = "metadata" if names is not None else ("schema" if supplied is not None else "positional")
    if not pk and supplied is not None:
        pk = [c.index for c in columns if c.primary_key]
    return TableMap(table_id=table_id, schema=schema, table=table, columns=tuple(columns),
                    flags=flags, primary_key=tuple(pk), names_from=names_from,
                    optional_metadata=tuple(sorted(fields)))


def _check_schema(supplied: TableSchema, real_types: list[int], schema: str, table: str) -> None:
    if len(supplied.columns) != len(real_types):
        logged = ", ".join(C.COLUMN_TYPE_NAMES.get(t, str(t)) for t in real_types)
        given = ", ".join(f"{c.name} {c.data_type}" for c in supplied.columns)
        raise SchemaMismatchError(
            f"table {schema}.{table}: the binlog has {len(real_types)} columns ({logged}) but the "
            f"supplied schema has {len(supplied.columns)} ({given})")
    for i, (sc, t) in enumerate(zip(supplied.columns, real_types)):
        if not type_compatible(sc.data_type, t):
            raise SchemaMismatchError(
                f"table {schema}.{table} column {i + 1} ({sc.name}): the supplied schema says "
                f"{sc.data_type} but the binlog logs type {C.COLUMN_TYPE_NAMES.get(t, t)}")
