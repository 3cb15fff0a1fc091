"""The canonical form of rows read from Iceberg, computed with Arrow and numpy: the same text
per row as the server's SQL of :mod:`airflow_provider_binlog.capture.verify.canonical`, and
its CRC-32."""
from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...capture.verify.canonical import (BYTES, DAYS, DECIMAL, FLOAT, INT, MICROS, NULL_TEXT, SEPARATOR, TEXT,
                                         ColumnForm, VerifyError)


def _text(array: pa.Array) -> pa.Array:
    return pc.cast(array, pa.string())


def _float_text(array: pa.Array) -> pa.Array:
    """``0`` or ``[-]MpE`` of each value, from its bits (see the kind ``float``)."""
    values = pc.cast(array, pa.float64()).to_numpy(zero_copy_only=False)
    valid = np.asarray(pc.is_valid(array))
    magnitude = np.abs(np.where(valid, values, 0.0))
    with np.errstate(all="ignore"):
        _, exp = np.frexp(magnitude)
        e = np.maximum(exp.astype(np.int64) - 1, -1022) - 52
        significand = np.ldexp(magnitude, -e).astype(np.uint64)
    zero = magnitude == 0
    parts = [pa.array(np.where(values < 0, "-", "")), _text(pa.array(significand)), "p", _text(pa.array(e)), ""]
    text = pc.binary_join_element_wise(*parts)
    text = pc.if_else(pa.array(zero), "0", text)
    return pc.if_else(pa.array(valid), text, pa.scalar(None, pa.string()))


def with_length(array: pa.Array) -> pa.Array:
    """``<bytes>:<value>`` of each text or bytes value, as ``large_binary``."""
    if pa.types.is_fixed_size_binary(array.type):
        array = pc.cast(array, pa.binary())
    length = pc.cast(_text(pc.binary_length(array)), pa.large_binary())
    binary = pa.large_binary()
    return pc.binary_join_element_wise(length, pa.scalar(b":", binary), pc.cast(array, binary), pa.scalar(b"", binary))


def column_text(array: pa.Array, form: ColumnForm) -> pa.Array:
    """The canonical text of a column read from Iceberg (string or binary; null for a null)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    t = array.type
    kind = form.kind
    if kind in (INT, DECIMAL):
        return array if pa.types.is_string(t) or pa.types.is_large_string(t) else _text(array)
    if kind == FLOAT:
        return _float_text(array)
    if kind == DAYS:
        return _text(pc.cast(array, pa.int32()))
    if kind == MICROS:
        if pa.types.is_timestamp(t):
            if t.unit != "us":
                array = pc.cast(array, pa.timestamp("us", t.tz))
            array = pc.cast(array, pa.int64())
        return _text(array)
    if kind in (TEXT, BYTES):
        return with_length(array)
    raise VerifyError(f"column {form.name}: unknown kind {kind!r}")


def row_texts(table: pa.Table | pa.RecordBatch, forms: Sequence[ColumnForm]) -> pa.Array:
    """Each row's canonical text, as bytes (one ``large_binary`` array)."""
    n = table.num_rows
    if not forms:
        return pa.array([b""] * n, pa.large_binary())
    pieces = []
    for form in forms:
        text = column_text(table.column(form.name), form)
        if not (pa.types.is_large_binary(text.type)):
            text = pc.cast(text, pa.large_binary())
        pieces.append(pc.fill_null(text, pa.scalar(NULL_TEXT.encode(), pa.large_binary())))
    if len(pieces) == 1:
        return pieces[0]
    return pc.binary_join_element_wise(*pieces, pa.scalar(SEPARATOR.encode(), pa.large_binary()))


def crc32s(texts: pa.Array) -> np.ndarray:
    """The CRC-32 of each value of a ``large_binary`` array (no nulls)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    n = len(texts)
    if n == 0:
        return np.zeros(0, np.uint32)
    offsets_buffer, data_buffer = texts.buffers()[1], texts.buffers()[2]
    offsets = np.frombuffer(offsets_buffer, np.int64, n + 1, texts.offset * 8).tolist()
    data = memoryview(data_buffer) if data_buffer is not None else memoryview(b"")
    crc = zlib.crc32
    return np.fromiter(map(crc, map(data.__getitem__, map(slice, offsets[:-1], offsets[1:]))), np.uint32, n)


def row_hashes(table: pa.Table | pa.RecordBatch, forms: Sequence[ColumnForm]) -> np.ndarray:
    """Each row's hash: the CRC-32 of its canonical text."""
    return crc32s(row_texts(table, forms))


__all__ = ["column_text", "crc32s", "row_hashes", "row_texts", "with_length"]
