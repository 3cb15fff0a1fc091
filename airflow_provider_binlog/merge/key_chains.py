"""Keys linked by primary-key changes, folded in binlog order on the driver (when after images
lack columns, a row's unchanged columns come from the row its key came from)."""
from __future__ import annotations

from typing import Any, Sequence

_DELETED = object()


def hashable(value: Any) -> Any:
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    return value


def fold_key_chains(events: Sequence[tuple], n_cols: int) -> list[tuple]:
    """Apply events in order (``(o, kind, side, key, origin_key, has)``, ``has`` the list of
    column presence flags) to a per-key state; for keys linked by primary-key changes whose
    after image lacks columns. Returns, per final key, ``(key_ref, op, origin_ref, sources)``:
    ``key_ref``/``origin_ref`` are ``(o, side)`` of a change holding the key, ``origin_ref``
    the key of the row (before the batch) the unchanged columns come from (None: a row created
    in the batch), ``sources`` the ``o`` of the change holding each column's value (or None)."""
    state: dict = {}
    refs: dict = {}

    def ref(key, o, side):
        refs.setdefault(key, (o, side))
        return refs[key]

    order = {"arrive": 0, "insert": 0, "update": 0, "delete": 1}
    for o, kind, side, key, origin, has in sorted(events, key=lambda e: (e[0], order[e[1]])):
        ref(key, o, side)
        if kind == "delete":
            state[key] = _DELETED
            continue
        if kind == "insert":
            prev_src, prev_origin = {}, None
        else:
            source_key = origin if kind == "arrive" else key
            if kind == "arrive":
                ref(origin, o, "b")
            prev = state.get(source_key)
            if prev is None:
                prev_src, prev_origin = {}, source_key
            elif prev is _DELETED:
                prev_src, prev_origin = {}, None
            else:
                prev_src, prev_origin = prev
        src = dict(prev_src)
        for i, present in enumerate(has):
            if present:
                src[i] = o
        state[key] = (src, prev_origin)
    out = []
    for key, value in state.items():
        if value is _DELETED:
            out.append((refs[key], "delete", None, [None] * n_cols))
        else:
            src, origin = value
            out.append((refs[key], "upsert", None if origin is None else refs[origin],
                        [src.get(i) for i in range(n_cols)]))
    return out


__all__ = ["fold_key_chains", "hashable"]
