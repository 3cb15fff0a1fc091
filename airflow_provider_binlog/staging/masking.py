"""Column exclusion and masking, applied as rows are staged: the staged files (and so Iceberg)
never hold the raw values of the columns they name.

Rules name columns by ``schema.table.column`` patterns (``*`` and ``?``, compared without
case, as MySQL compares column names); the first kind that matches decides, in this order:

- ``exclude``: the column is left out of the staged images and of the schema changes the
  batch records, as if the source table did not have it;
- ``hash``: the value is replaced by its keyed hash, the lower-case hex HMAC-SHA256 of the
  value's bytes (text as UTF-8, binary as is, other types as their Arrow text form) under a
  secret key; the column becomes a string column. Equal values hash equal, so a hashed
  column still joins and groups, and a changed value still changes the row;
- ``truncate``: text and binary values are cut to their first N characters (bytes).

Written as JSON (``exclude`` and ``hash`` lists, ``truncate`` an object of pattern -> N)::

    {"exclude": ["shop.customers.password_hash", "*.*.ssn"],
     "hash": ["shop.customers.email"],
     "truncate": {"shop.customers.phone": 4}}
"""
from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional, cast

from ..errors import ProviderError

if TYPE_CHECKING:
    import pyarrow as pa

    from ..schema_history.ops import AlterOp

EXCLUDE, HASH, TRUNCATE = "exclude", "hash", "truncate"


def hashed_type() -> "pa.DataType":
    """The type of a hashed column in the staged files (and in Iceberg): a string. (pyarrow is
    imported when masking is applied, not with the rules, which a DAG file parses.)"""
    import pyarrow as pa

    return pa.string()


def __getattr__(name: str) -> Any:
    if name == "HASHED_TYPE":  # the name this module had for hashed_type()
        return hashed_type()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class MaskingError(ProviderError, ValueError):
    """Masking rules that cannot be used: a bad pattern, a missing secret, a truncation of a
    column that is not text or binary."""


@dataclass(frozen=True)
class ColumnRule:
    pattern: str
    action: str
    length: int = 0

    def matches(self, schema: str, table: str, column: str) -> bool:
        return fnmatch.fnmatchcase(f"{schema}.{table}.{column}".lower(), self.pattern.lower())


def _patterns(value: Any, kind: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise MaskingError(f"masking: {kind} is a list of schema.table.column patterns")
    for p in value:
        if not isinstance(p, str) or p.count(".") < 2:
            raise MaskingError(f"masking: {kind} pattern {p!r} is not schema.table.column "
                               f"(patterns may use * and ?)")
    return list(value)


@dataclass(frozen=True)
class Masking:
    """The rules, and the key of the ``hash`` rules (never written anywhere)."""

    rules: tuple[ColumnRule, ...] = ()
    secret: bytes = field(default=b"", repr=False)

    @classmethod
    def parse(cls, value: Any, secret: Optional[str | bytes] = None) -> "Masking":
        if value is None or value == "" or value == {}:
            return cls()
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise MaskingError(f"masking is not JSON: {exc}") from None
        if not isinstance(value, Mapping) or set(value) - {EXCLUDE, HASH, TRUNCATE}:
            raise MaskingError("masking is an object with 'exclude', 'hash' and/or 'truncate'")
        rules = [ColumnRule(p, EXCLUDE) for p in _patterns(value.get(EXCLUDE), EXCLUDE)]
        rules += [ColumnRule(p, HASH) for p in _patterns(value.get(HASH), HASH)]
        truncate = value.get(TRUNCATE) or {}
        if not isinstance(truncate, Mapping):
            raise MaskingError("masking: truncate maps schema.table.column patterns to a length")
        for p, n in truncate.items():
            _patterns([p], TRUNCATE)
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise MaskingError(f"masking: truncate length of {p!r} must be a whole number >= 0, not {n!r}")
            rules.append(ColumnRule(p, TRUNCATE, n))
        key = secret.encode() if isinstance(secret, str) else (secret or b"")
        if any(r.action == HASH for r in rules) and not key:
            raise MaskingError("masking: hash rules need a secret key; give masking_secret_conn_id (an "
                               "Airflow connection whose password is the key)")
        return cls(tuple(rules), key)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def rule(self, schema: str, table: str, column: str) -> Optional[ColumnRule]:
        return next((r for r in self.rules if r.matches(schema, table, column)), None)

    def for_table(self, schema: str, table: str, columns: list[str]) -> dict[str, ColumnRule]:
        """The rule of each column of the table that has one."""
        out = {}
        for name in columns:
            rule = self.rule(schema, table, name)
            if rule is not None:
                out[name] = rule
        return out

    def to_json(self) -> dict[str, Any]:
        """The rules (not the key)."""
        out: dict[str, Any] = {}
        for r in self.rules:
            if r.action == TRUNCATE:
                out.setdefault(TRUNCATE, {})[r.pattern] = r.length
            else:
                out.setdefault(r.action, []).append(r.pattern)
        return out

    # ----------------------------------------------------------------------------- values

    def hash_bytes(self, value: bytes) -> str:
        return hmac.new(self.secret, value, hashlib.sha256).hexdigest()

    def mask_array(self, rule: ColumnRule, array: pa.Array) -> pa.Array:
        """The staged values of a column under its rule (not ``exclude``)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if rule.action == HASH:
            if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
                raw = array.to_pylist()
            else:
                text = array if pa.types.is_string(array.type) else array.cast(pa.string())
                raw = [None if v is None else v.encode() for v in text.to_pylist()]
            return pa.array([None if v is None else self.hash_bytes(v) for v in raw], hashed_type())
        if pa.types.is_string(array.type):
            return pc.utf8_slice_codeunits(array, 0, rule.length)
        return pc.binary_slice(array, 0, rule.length)

    def mask_text(self, rule: ColumnRule, value: Optional[str]) -> Optional[str]:
        """A value given as text (a column default in a schema change) under its rule."""
        if value is None or rule.action == EXCLUDE:
            return None
        if rule.action == HASH:
            return self.hash_bytes(value.encode())
        return value[:rule.length]


def check_truncatable(rule: ColumnRule, arrow_type: pa.DataType, where: str) -> None:
    import pyarrow as pa

    if rule.action == TRUNCATE and not (pa.types.is_string(arrow_type) or pa.types.is_binary(arrow_type)):
        raise MaskingError(f"masking: {where} is {arrow_type}, not text or binary: it cannot be truncated "
                           f"(rule {rule.pattern!r}); hash or exclude it instead")


def masked_image_type(image: pa.StructType, rules: Mapping[str, ColumnRule], where: str) -> pa.StructType:
    """A staged image type with the rules applied: excluded fields left out, hashed ones strings."""
    import pyarrow as pa

    fields = []
    for f in image:
        rule = rules.get(f.name)
        if rule is None:
            fields.append(f)
        elif rule.action == HASH:
            fields.append(pa.field(f.name, hashed_type(), f.nullable))
        elif rule.action == TRUNCATE:
            check_truncatable(rule, f.type, f"{where}.{f.name}")
            fields.append(f)
    return pa.struct(fields)


HASHED_COLUMN_DEF = {"data_type": "varchar", "length": 64, "charset": "ascii", "collation": "ascii_bin"}


def mask_ddl_record(masking: Masking, record: dict[str, Any]) -> dict[str, Any]:
    """A schema-change record of the batch (see ``schema_history.apply``) with the rules
    applied to the columns it lists: excluded columns left out, hashed ones described as the
    strings they are staged as, defaults masked like values."""
    if not masking:
        return record
    from ..schema_history.ops import AlterOp, DdlOp  # when masking: the parser stays unloaded otherwise

    ops = []
    for raw in record.get("ops") or ():
        op = DdlOp.from_json(raw, position=f"{record.get('file')}:{record.get('pos')}")
        if isinstance(op, AlterOp):
            op = _masked_alter(masking, op)
        ops.append(op.to_json())
    return {**record, "ops": ops}


def _masked_alter(masking: Masking, op: "AlterOp") -> "AlterOp":
    """An ``alter`` operation with the rules applied to the columns it lists."""
    from ..schema_history.ops import AddedColumn

    schema, table = op.table

    def kept(name: str) -> tuple[bool, Optional[ColumnRule]]:
        rule = masking.rule(schema, table, name)
        return rule is None or rule.action != EXCLUDE, rule

    changes: dict[str, Any] = {}
    if op.columns:
        columns = []
        for c in op.columns:
            keep, rule = kept(c["name"])
            if keep:
                columns.append(c if rule is None else _masked_def(masking, rule, dict(c)))
        changes["columns"] = tuple(columns)
    if op.added:
        added = []
        for a in op.added:
            keep, rule = kept(a.name)
            if keep:
                added.append(a if rule is None else AddedColumn(
                    a.name, _masked_def(masking, rule, dict(a.column)) if a.column else None,
                    masking.mask_text(rule, a.value)))
        changes["added"] = tuple(added)
    return dataclasses.replace(op, **changes)


def _masked_def(masking: Masking, rule: ColumnRule, column: dict[str, Any]) -> dict[str, Any]:
    out = dict(column)
    if rule.action == HASH:
        for key in ("unsigned", "precision", "scale", "fsp", "enum_values", "set_values"):
            out.pop(key, None)
        out.update(HASHED_COLUMN_DEF)
    if out.get("default_kind") == "literal":
        out["default"] = masking.mask_text(rule, out.get("default"))
    return out


def masked_entry(masking: Masking, schema: str, table: str, columns: list[dict[str, Any]],
                 history: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """What a manifest's table entry says of the rules: its ``columns`` without the excluded
    ones (hashed ones described as strings), ``masked`` (column -> rule) and
    ``omitted_values``: the masked value an INSERT leaving the column out gives it (from the
    schema history at the batch end; MINIMAL row images do not carry it)."""
    rules = masking.for_table(schema, table, [c["name"] for c in columns])
    if not rules:
        return {}
    kept = []
    for c in columns:
        rule = rules.get(c["name"])
        if rule is None:
            kept.append(c)
        elif rule.action == HASH:
            kept.append({**c, "arrow_type": str(hashed_type()), "masked": HASH})
        elif rule.action == TRUNCATE:
            kept.append({**c, "masked": TRUNCATE})
    omitted: dict[str, str] = {}
    if history:
        from ..schema_history import SchemaHistory

        tdef = SchemaHistory.from_json(history).get(schema, table)
        for c in tdef.columns if tdef is not None else ():
            rule = rules.get(c.name)
            value = c.value_for_omitted()
            if rule is not None and rule.action != EXCLUDE and value is not None:
                omitted[c.name] = cast(str, masking.mask_text(rule, value))
    return {"columns": kept, "masked": {n: r.action for n, r in sorted(rules.items())},
            "omitted_values": omitted}


__all__ = ["ColumnRule", "EXCLUDE", "HASH", "Masking", "MaskingError", "TRUNCATE", "mask_ddl_record",
           "masked_entry", "masked_image_type"]
