"""Partial updates of JSON columns: the diffs of ``PARTIAL_UPDATE_ROWS_EVENT``.

With ``binlog_row_value_options=PARTIAL_JSON`` MySQL logs, instead of a
JSON column's full after-image, the list of changes made to it.
:func:`parse_json_diffs` reads that list (its values decoded by
:mod:`.json_binary`), :func:`apply_json_diffs` applies it to the before-image
document as a replica does.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Union

from ._bytes import read_packed
from .errors import CorruptEventError
from .json_binary import decode_json_value

__all__ = ["JsonDiff", "apply_json_diffs", "parse_json_diffs"]

_OPERATIONS = ("replace", "insert", "remove")
# Bytes after the first byte of a packed integer (net_field_length) that starts with it.
_PACKED_SIZES = {252: 2, 253: 3, 254: 8}

#: One leg of a JSON path: ``("member", name)`` or ``("cell", index, from_end)``.
_Member = tuple[Literal["member"], str]
_Cell = tuple[Literal["cell"], int, bool]
_Leg = Union[_Member, _Cell]


@dataclass(frozen=True)
class JsonDiff:
    """One logical change of a JSON column, from PARTIAL_UPDATE_ROWS_EVENT.

    ``operation`` is ``"replace"``, ``"insert"`` or ``"remove"``; ``path``
    the MySQL JSON path it applies to (e.g. ``$.a[2]."x y"``); ``value``
    the decoded new value (None for ``"remove"``).
    """

    operation: str
    path: str
    value: object


def _read_packed_int(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """Read a MySQL packed integer (net_field_length); return (value, next_pos)."""
    if pos >= end:
        raise CorruptEventError(f"JSON diff: {what} is missing at byte {pos}")
    first = buf[pos]
    if first < 251:
        return first, pos + 1
    size = _PACKED_SIZES.get(first)
    if size is None:
        raise CorruptEventError(f"JSON diff: {what} at byte {pos} starts with invalid byte 0x{first:02x}")
    if pos + 1 + size > end:
        raise CorruptEventError(f"JSON diff: {what} at byte {pos} is cut off")
    value, next_pos = read_packed(buf, pos)
    return value, next_pos


def parse_json_diffs(data: Union[bytes, bytearray, memoryview]) -> list[JsonDiff]:
    """Parse the diff vector of a partially updated JSON column.

    ``data`` is the column's payload in the after-image of a
    PARTIAL_UPDATE_ROWS_EVENT when its partial bit is set, without the
    4-byte length in front of it.  It holds diffs until the data ends::

        operation (1 byte: 0 replace, 1 insert, 2 remove)
        path length (packed integer), path (utf8 JSON path)
        unless remove: value length (packed integer), binary JSON value
    """
    if type(data) is not bytes:
        data = bytes(data)
    end = len(data)
    pos = 0
    diffs = []
    while pos < end:
        op_code = data[pos]
        if op_code > 2:
            raise CorruptEventError(f"JSON diff: unknown operation {op_code} at byte {pos}")
        operation = _OPERATIONS[op_code]
        path_len, pos = _read_packed_int(data, pos + 1, end, "path length")
        if pos + path_len > end:
            raise CorruptEventError(f"JSON diff: path of {path_len} bytes at byte {pos} runs past the end ({end})")
        try:
            path = data[pos:pos + path_len].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptEventError(f"JSON diff: path at byte {pos} is not valid UTF-8") from None
        if not path.lstrip().startswith("$"):
            raise CorruptEventError(f"JSON diff: path {path!r} does not start with '$'")
        pos += path_len
        value = None
        if op_code != 2:
            value_len, pos = _read_packed_int(data, pos, end, "value length")
            if value_len == 0:
                raise CorruptEventError(f"JSON diff: empty value for {operation} at {path!r}")
            if pos + value_len > end:
                raise CorruptEventError(f"JSON diff: value of {value_len} bytes at byte {pos} runs past the end "
                                        f"({end})")
            value = decode_json_value(data, pos, pos + value_len)
            pos += value_len
        diffs.append(JsonDiff(operation, path, value))
    return diffs


# long: a hand-written tokenizer of MySQL JSON paths; its branches are the grammar
def _parse_path(path: str) -> list[_Leg]:
    """Parse a simple MySQL JSON path into legs.

    Legs are ``("member", name)`` or ``("cell", index, from_end)``; accepted
    syntax: ``$``, ``.name``, ``."quoted name"``, ``[N]``, ``[last]``,
    ``[last-N]``, with optional blanks between tokens.  Wildcards, ``**``
    and ranges cannot address a single location and are rejected.
    """
    n = len(path)
    i = 0

    def skip(i: int) -> int:
        while i < n and path[i].isspace():
            i += 1
        return i

    def fail(reason: str) -> CorruptEventError:
        return CorruptEventError(f"JSON diff: cannot apply path {path!r}: {reason}")

    i = skip(i)
    if i >= n or path[i] != "$":
        raise fail("it does not start with '$'")
    i += 1
    legs: list[_Leg] = []
    while True:
        i = skip(i)
        if i >= n:
            return legs
        c = path[i]
        if c == ".":
            i = skip(i + 1)
            if i < n and path[i] == '"':
                j = i + 1
                while j < n and path[j] != '"':
                    j += 2 if path[j] == "\\" else 1
                if j >= n:
                    raise fail("unterminated quoted member name")
                try:
                    name: str = json.loads(path[i:j + 1])
                except ValueError:
                    raise fail("invalid quoted member name") from None
                i = j + 1
            else:
                j = i
                while j < n and path[j] not in '.[*"' and not path[j].isspace():
                    j += 1
                if j == i:
                    raise fail("wildcards and empty member names are not supported"
                               if j < n and path[j] == "*" else "missing member name")
                name = path[i:j]
                i = j
            legs.append(("member", name))
        elif c == "[":
            i = skip(i + 1)
            from_end = path.startswith("last", i)
            index = 0
            if from_end:
                i = skip(i + 4)
                if i < n and path[i] == "-":
                    i = skip(i + 1)
                    j = i
                    while j < n and path[j].isdigit():
                        j += 1
                    if j == i:
                        raise fail("missing number after 'last-'")
                    index = int(path[i:j])
                    i = j
            else:
                j = i
                while j < n and "0" <= path[j] <= "9":
                    j += 1
                if j == i:
                    raise fail("array wildcards are not supported" if i < n and path[i] == "*"
                               else "invalid array index")
                index = int(path[i:j])
                i = j
            i = skip(i)
            if i >= n or path[i] != "]":
                raise fail("array ranges are not supported" if path.startswith("to", i)
                           else "missing ']'")
            i += 1
            legs.append(("cell", index, from_end))
        else:
            raise fail(f"unexpected {c!r} at position {i}")


def _cell_position(leg: _Cell, size: int) -> tuple[int, bool]:
    """Resolve an array leg against an array of ``size`` elements.

    Returns (position, within_bounds) like MySQL's Json_array_index: a
    position past the end is clamped to ``size`` (``last-N`` to 0).
    """
    index: int = leg[1]
    from_end: bool = leg[2]
    if from_end:
        return (size - index - 1 if index < size else 0), index < size
    return min(index, size), index < size


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return value


def _key_order(key: str) -> tuple[int, bytes]:
    encoded = key.encode("utf-8")
    return len(encoded), encoded


def _insert_member(obj: dict[str, Any], key: str, value: object) -> None:
    """Add a member where MySQL stores it (keys sorted by length, then bytes)."""
    keys = list(obj)
    order = [_key_order(k) for k in keys]
    if order != sorted(order):
        obj[key] = value  # not in MySQL's order: just append
        return
    new = _key_order(key)
    index = next((i for i, o in enumerate(order) if o > new), len(keys))
    if index == len(keys):
        obj[key] = value
        return
    tail = [(k, obj.pop(k)) for k in keys[index:]]
    obj[key] = value
    obj.update(tail)


def apply_json_diffs(document: object, diffs: Iterable[JsonDiff]) -> object:
    """Apply JSON diffs to a decoded document; return the new document.

    Implements MySQL's replica-side semantics (``apply_json_diffs``):

    * ``replace``: the location must exist; its value is replaced.
    * ``insert``: the parent must exist.  In an object the member must not
      exist yet (it is added in MySQL's key order); in an array the value is
      inserted at the index (an index past the end appends).
    * ``remove``: the member or element must exist and is removed.

    The root itself cannot be replaced, inserted or removed, and no
    auto-wrapping happens.  A diff that cannot be applied raises
    :class:`CorruptEventError`.  The input document is not modified: the
    result is a new tree.
    """
    if document is None:
        raise CorruptEventError("JSON diff: cannot apply diffs to a NULL JSON document")
    doc = _copy(document)
    for diff in diffs:
        path = diff.path
        legs = _parse_path(path)
        if not legs:
            raise CorruptEventError(f"JSON diff: cannot {diff.operation} the document root ({path!r})")
        parent = doc
        for leg in legs[:-1]:
            parent = _step(parent, leg, path)
        leg = legs[-1]
        operation = diff.operation
        if operation == "replace":
            if leg[0] == "member":
                if type(parent) is not dict or leg[1] not in parent:
                    raise CorruptEventError(f"JSON diff: replace target {path!r} does not exist")
                parent[leg[1]] = _copy(diff.value)
            else:
                if type(parent) is not list:
                    raise CorruptEventError(f"JSON diff: replace target {path!r} does not exist")
                position, within = _cell_position(leg, len(parent))
                if not within:
                    raise CorruptEventError(f"JSON diff: replace target {path!r} does not exist")
                parent[position] = _copy(diff.value)
        elif operation == "insert":
            if leg[0] == "member" and type(parent) is dict:
                if leg[1] in parent:
                    raise CorruptEventError(f"JSON diff: insert target {path!r} already exists")
                _insert_member(parent, leg[1], _copy(diff.value))
            elif leg[0] == "cell" and type(parent) is list:
                position, _ = _cell_position(leg, len(parent))
                parent.insert(position, _copy(diff.value))
            else:
                raise CorruptEventError(f"JSON diff: cannot insert at {path!r}: the parent is not "
                                        f"an {'object' if leg[0] == 'member' else 'array'}")
        elif operation == "remove":
            if type(parent) is dict:
                if leg[0] != "member" or leg[1] not in parent:
                    raise CorruptEventError(f"JSON diff: remove target {path!r} does not exist")
                del parent[leg[1]]
            elif type(parent) is list:
                if leg[0] != "cell":
                    raise CorruptEventError(f"JSON diff: remove target {path!r} does not exist")
                position, within = _cell_position(leg, len(parent))
                if not within:
                    raise CorruptEventError(f"JSON diff: remove target {path!r} does not exist")
                del parent[position]
            else:
                raise CorruptEventError(f"JSON diff: remove target {path!r} does not exist")
        else:
            raise CorruptEventError(f"JSON diff: unknown operation {operation!r}")
    return doc


def _step(node: Any, leg: _Leg, path: str) -> Any:
    """Follow one leg of a path to an existing member or element."""
    if leg[0] == "member":
        if type(node) is dict and leg[1] in node:
            return node[leg[1]]
    elif type(node) is list:
        position, within = _cell_position(leg, len(node))
        if within:
            return node[position]
    raise CorruptEventError(f"JSON diff: path {path!r} does not exist in the document")
