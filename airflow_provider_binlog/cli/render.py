"""The lines the ``decode`` CLI writes: its JSON lines and the values of its text output.

:class:`JsonlRenderer` writes the JSON lines of ``decode --format jsonl`` with code generated
per table (:mod:`.jsonl_codegen`): the text ``json.dumps`` gives for the records
:class:`.values_json.RowRenderer` builds, written straight from the row bytes of events read with
``EventDecoder(defer_rows=True)``. :func:`sql_literal` is a value as the text output shows it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence, TypeVar

from ..codec import constants as C
from ..codec.events import Column, TableMap
from .jsonl_codegen import _Unrenderable, absent_mask, compile_jsonl_renderer, compile_jsonl_rows_renderer
from .jsonl_column_readers import remember
from .values_json import RowRenderer, json_encoder

if TYPE_CHECKING:
    from ..codec.rows import DeferredRows

_T = TypeVar("_T")

#: Keys of :class:`JsonlRenderer`'s cache: (id of the table map, kind, what is cached, the bitmap of
#: the (before) image, the bitmap of the after image or None).
_CacheKey = tuple[int, str, str, int, Optional[int]]


def sql_literal(value: Any, col: Column) -> str:
    """A value the way mysqlbinlog -v shows it in its pseudo-SQL."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, (bytes, bytearray)):
        return "x'" + bytes(value).hex() + "'"
    if col.type == C.MYSQL_TYPE_JSON:
        from ..codec.json_text import to_mysql_json_text
        return "'" + to_mysql_json_text(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    encoded = json_encoder(col)(value)
    if isinstance(encoded, list):
        return "[" + ", ".join(repr(x) for x in encoded) + "]"
    text = str(encoded)
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_MISSING = object()


class JsonlRenderer:
    """The JSON lines of rows events, one generated renderer per table map and image shape.

    A line is ``json.dumps(record, ensure_ascii=False)`` of the record ``{"file", "pos",
    "ts", "gtid", "schema", "table", "op", "before", "after"}`` whose images
    :meth:`RowRenderer.as_json_dict` builds, and a newline, in UTF-8. :meth:`lines` renders
    the decoded rows of an event, :meth:`deferred_lines` the undecoded rows of an event read
    with ``EventDecoder(defer_rows=True)``, decoding them straight into JSON text.
    """

    def __init__(self) -> None:
        # (table map, what was built): a generated renderer or None ("values", "bytes" keys), a
        # row decoder ("decoder" keys)
        self._cache: dict[_CacheKey, tuple[TableMap, Any]] = {}
        # the same by the table map's content: another decoder's equal map (a part of the file
        # decoded by another decoder, see parallel_decode) finds what was built for it
        self._by_content: dict[tuple[Any, ...], Any] = {}
        self._rows = RowRenderer()

    def _cached(self, key: _CacheKey, tm: TableMap, build: Callable[[], _T]) -> _T:
        hit: Optional[tuple[TableMap, _T]] = self._cache.get(key)
        if hit is None or hit[0] is not tm:
            content = (tm, *key[1:])
            built = self._by_content.get(content, _MISSING)
            if built is _MISSING:
                built = remember(self._by_content, content, build(), limit=10_000)
            hit = self._cache[key] = (tm, built)
        return hit[1]

    def _renderer(self, key: _CacheKey, tm: TableMap, build: Callable[[], _T]) -> Optional[_T]:
        """A generated renderer, or None where the general path writes the lines."""
        def guarded() -> Optional[_T]:
            if len(set(tm.column_names)) != len(tm.columns):  # keys repeat: json.dumps keeps the last
                return None
            try:
                return build()
            except (ValueError, KeyError):  # a type the generated code does not read
                return None
        return self._cached(key, tm, guarded)

    @staticmethod
    def _head_text(head: dict[str, object]) -> str:
        import json

        text = json.dumps(head, ensure_ascii=False)
        return text[:-1] + (", " if head else "") + '"before": '

    def lines(self, head: dict[str, object], kind: str, tm: TableMap, rows: Sequence[Any]) -> list[bytes]:
        """The lines (UTF-8, newline included) of the decoded rows of one rows event; ``head``
        holds the record's keys before ``before``."""
        out: list[str] = []
        if not rows:
            return []
        first = rows[0]
        if kind == "update":
            absent, absent_after = absent_mask(first[0]), absent_mask(first[1])
        else:
            absent, absent_after = absent_mask(first), 0
        fn = self._renderer((id(tm), kind, "values", absent, absent_after), tm,
                          lambda: compile_jsonl_renderer(tm, kind, absent, absent_after))
        if fn is not None:
            try:
                fn(rows, self._head_text(head), out.append)
                return [line.encode() for line in out]
            except _Unrenderable:
                out.clear()
        return [line.encode() for line in self._general_lines(head, kind, tm, rows)]

    def deferred_lines(self, head: dict[str, object], kind: str, rows: DeferredRows) -> list[bytes]:
        """The lines of the undecoded rows of one rows event (a :class:`.rows.DeferredRows`).
        Raises the codec's error for rows that do not decode."""
        tm = rows.table_map
        after = rows.present_after if kind == "update" else None
        fn = self._renderer((id(tm), kind, "bytes", rows.present, after), tm,
                          lambda: compile_jsonl_rows_renderer(tm, kind, rows.present, after))
        out: list[bytes] = []
        if fn is not None:
            try:
                if fn(rows.data, rows.start, rows.end, self._head_text(head).encode(), out.append) == rows.end:
                    return out
            except Exception:  # noqa: BLE001 - the value path decides: same text or the codec's error
                pass
            out.clear()
        return self.lines(head, kind, tm, self._decode(rows, kind))

    def _decode(self, rows: DeferredRows, kind: str) -> list[Any]:
        """The decoded rows of deferred rows, as the codec's row decoders give them."""
        from ..codec.errors import CorruptEventError
        from ..codec.rows import DECODE_ERRORS, compile_rows_decoder, row_data_error, rows_end_mismatch

        tm = rows.table_map
        after = rows.present_after if kind == "update" else None
        decode = self._cached((id(tm), kind, "decoder", rows.present, after), tm,
                              lambda: compile_rows_decoder(tm.columns, rows.present, after))
        values: list[Any]
        try:
            values, p = decode(rows.data, rows.start, rows.end)
            if p != rows.end:
                raise CorruptEventError(rows_end_mismatch(tm, p, rows.end))
        except (CorruptEventError, *DECODE_ERRORS) as exc:
            raise row_data_error(tm, rows.flavor, exc).at(rows.source, rows.pos) from None
        return values

    def _general_lines(self, head: dict[str, object], kind: str, tm: TableMap, rows: Iterable[Any]) -> list[str]:
        import json

        out = []
        for row in rows:
            record = dict(head)
            if kind == "insert":
                record["before"], record["after"] = None, self._rows.as_json_dict(tm, row)
            elif kind == "delete":
                record["before"], record["after"] = self._rows.as_json_dict(tm, row), None
            else:
                record["before"] = self._rows.as_json_dict(tm, row[0])
                record["after"] = self._rows.as_json_dict(tm, row[1])
            out.append(json.dumps(record, ensure_ascii=False) + "\n")
        return out
