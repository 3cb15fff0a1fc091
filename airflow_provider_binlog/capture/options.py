"""The options of a dump and of a snapshot: typed, frozen :class:`DumpOptions` and
:class:`SnapshotOptions`, each checked once when made.

``BinlogDumpOperator`` and ``BinlogSnapshotOperator`` check the options that are not templated
when the DAG is parsed (:meth:`DumpOptions.check`, :meth:`SnapshotOptions.check`) and make the
options, once rendered, for :meth:`~airflow_provider_binlog.hooks.binlog.BinlogHook.dump` and
:meth:`~airflow_provider_binlog.hooks.binlog.BinlogHook.snapshot`. No secret belongs here: the
masking rules are kept, their key is read from ``masking_secret_conn_id`` when the data is read.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Optional

from ..common.options_json import is_number, is_whole, options_object, to_json_text
from ..errors import ProviderError
from ..staging.masking import Masking, MaskingError

METHODS = ("watermark", "consistent")
READERS = ("auto", "arrow", "pymysql")


class CaptureOptionError(ProviderError, ValueError):
    """A dump or snapshot option the capture does not take; the message names the option and
    what it allows."""


class MaskingOptionError(CaptureOptionError, MaskingError):
    """Masking rules the staging does not take (a :class:`CaptureOptionError` and a
    :class:`~airflow_provider_binlog.staging.masking.MaskingError`)."""


Check = Callable[[str, Any], Any]


def _whole(minimum: int, what: str, *, optional: bool = False) -> Check:
    def check(name: str, value: Any) -> Any:
        if (value is not None or not optional) and (not is_whole(value) or value < minimum):
            raise CaptureOptionError(f"{name} must be a whole number of {what} of at least {minimum}"
                                     f"{' (or none)' if optional else ''}, not {value!r}")
        return value
    return check


def _optional_whole(minimum: int, what: str) -> Check:
    return _whole(minimum, what, optional=True)


def _seconds(optional: bool, zero: bool) -> Check:
    def check(name: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if not is_number(value) or value < 0 or (value == 0 and not zero):
            bound = "0 or more" if zero else "above 0"
            raise CaptureOptionError(f"{name} must be a number of seconds {bound}"
                                     f"{' (or none)' if optional else ''}, not {value!r}")
        return float(value)
    return check


def _optional_text(name: str, value: Any) -> Any:
    if value is not None and (not isinstance(value, str) or not value):
        raise CaptureOptionError(f"{name} must be a non-empty string (or none), not {value!r}")
    return value


def _patterns(name: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise CaptureOptionError(f"{name} must be a list of schema.table patterns (or none), not {value!r}")
    patterns = tuple(value)
    for pattern in patterns:
        if not isinstance(pattern, str) or "." not in pattern:
            raise CaptureOptionError(f"{name} must be a list of schema.table patterns (wildcards allowed: "
                                     f"shop.*, *.orders), not {pattern!r} in {value!r}")
    return patterns


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(name: str, value: Any) -> Any:
        if value not in choices:
            raise CaptureOptionError(f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}")
        return value
    return check


def _masking_rules(value: Any, secret_conn_id: Optional[str]) -> Optional[dict]:
    """The masking rules as JSON (none: None), checked without their key."""
    if not value:
        return None
    if isinstance(value, Masking):
        return value.to_json() or None
    try:
        masking = Masking.parse(value, secret="checked-at-parse" if secret_conn_id else None)
    except ProviderError as exc:
        message = exc.message if exc.message.startswith("masking") else f"masking: {exc.message}"
        raise MaskingOptionError(message, hint=exc.hint or "see airflow_provider_binlog.staging.masking") from None
    return masking.to_json() or None


def _check_all(cls: type, checks: Mapping[str, Check], values: Mapping[str, Any]) -> dict[str, Any]:
    what = "dump" if cls is DumpOptions else "snapshot"
    unknown = sorted(set(values) - set(checks))
    if unknown:
        raise CaptureOptionError(f"unknown {what} option(s) {', '.join(unknown)}",
                                 hint=f"known: {', '.join(sorted(checks))}")
    out = {name: checks[name](name, value) for name, value in values.items()}
    if "masking" in values:
        out["masking"] = _masking_rules(out["masking"], out.get("masking_secret_conn_id"))
    return out


def _from_json(cls: Any, data: Mapping[str, Any] | str) -> Any:
    what = "dump" if cls is DumpOptions else "snapshot"
    return cls(**options_object(cls, data, what=what, error=CaptureOptionError))


class _Options:
    """What the two option classes share: the checks, :meth:`check` and JSON."""

    _CHECKS: ClassVar[dict[str, Check]] = {}

    def __post_init__(self) -> None:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        for name, value in _check_all(type(self), self._CHECKS, values).items():
            object.__setattr__(self, name, value)

    @classmethod
    def check(cls, **values: Any) -> dict[str, Any]:
        """Check the options ``values`` gives alone, the way the options class does (for a caller
        that makes the options later, when the templated ones are rendered); returns them as the
        options keep them (patterns as tuples, masking rules as JSON)."""
        return _check_all(cls, cls._CHECKS, values)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        for name in ("tables", "exclude"):
            if out[name] is not None:
                out[name] = list(out[name])
        return out

    def to_json_text(self) -> str:
        return to_json_text(self.to_json())


@dataclass(frozen=True)
class DumpOptions(_Options):
    """How a bounded dump runs (``start`` and ``stop`` are the hook's arguments).

    ``tables``/``exclude`` are ``schema.table`` patterns; the dump stops at the first transaction
    boundary at or after ``max_rows`` rows, ``max_bytes`` bytes of binlog or ``max_seconds``
    seconds. ``checkpoint_key`` names the stored checkpoint (default: the connection id).
    ``workers`` staging processes (0: in the dump's process; default: ``[binlog] dump_workers``,
    else the dump's own); ``masking`` (rules, with their key in connection
    ``masking_secret_conn_id``); ``retries``/``backoff_seconds`` the reconnects of a broken
    stream; ``progress_seconds`` between progress lines. A bad value raises :class:`CaptureOptionError` naming it.
    """

    tables: Optional[tuple[str, ...]] = None
    exclude: Optional[tuple[str, ...]] = None
    max_rows: Optional[int] = None
    max_bytes: Optional[int] = None
    max_seconds: Optional[float] = None
    checkpoint_key: Optional[str] = None
    workers: Optional[int] = None
    masking: Optional[dict] = None
    masking_secret_conn_id: Optional[str] = None
    retries: int = 3
    backoff_seconds: float = 1.0
    progress_seconds: float = 5.0

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> "DumpOptions":
        """The options of :meth:`to_json`'s form (an object or its JSON text); keys left out
        take their defaults, unknown ones are refused."""
        return _from_json(cls, data)


@dataclass(frozen=True)
class SnapshotOptions(_Options):
    """How a snapshot runs.

    ``method``: ``watermark`` (key chunks between binlog watermarks) or ``consistent`` (one
    transaction); ``reader``: ``auto``, ``arrow`` or ``pymysql``; ``chunk_rows`` rows per query
    (default: the method's); ``read_connections`` the watermark method's connection budget;
    ``tables``/``exclude`` and ``masking``/``masking_secret_conn_id`` as for
    :class:`DumpOptions`. A bad value raises :class:`CaptureOptionError` naming it.
    """

    method: str = "watermark"
    reader: str = "auto"
    chunk_rows: Optional[int] = None
    read_connections: int = 1
    tables: Optional[tuple[str, ...]] = None
    exclude: Optional[tuple[str, ...]] = None
    masking: Optional[dict] = None
    masking_secret_conn_id: Optional[str] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> "SnapshotOptions":
        """The options of :meth:`to_json`'s form (an object or its JSON text); keys left out
        take their defaults, unknown ones are refused."""
        return _from_json(cls, data)


_COMMON: dict[str, Check] = {
    "tables": _patterns, "exclude": _patterns, "masking": lambda _n, v: v,
    "masking_secret_conn_id": _optional_text,
}
DumpOptions._CHECKS = {
    **_COMMON, "max_rows": _optional_whole(1, "rows"), "max_bytes": _optional_whole(1, "bytes"),
    "max_seconds": _seconds(optional=True, zero=False), "checkpoint_key": _optional_text,
    "workers": _optional_whole(0, "staging processes"), "retries": _whole(0, "retries"),
    "backoff_seconds": _seconds(optional=False, zero=True), "progress_seconds": _seconds(optional=False, zero=False),
}
SnapshotOptions._CHECKS = {
    **_COMMON, "method": _one_of(METHODS), "reader": _one_of(READERS),
    "chunk_rows": _optional_whole(1, "rows"), "read_connections": _whole(1, "connections"),
}

__all__ = ["CaptureOptionError", "DumpOptions", "METHODS", "MaskingOptionError", "READERS", "SnapshotOptions"]
