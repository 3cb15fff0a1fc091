"""What the typed option classes of the capture and the merge share: reading their JSON form
(an object or its text) against the dataclass's fields, and the number checks, each refusal
raised as the caller's own option error."""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping

from ..errors import ProviderError


def is_whole(value: Any) -> bool:
    """An ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def options_object(cls: Any, data: Mapping[str, Any] | str, *, what: str,
                   error: type[ProviderError]) -> dict[str, Any]:
    """``data`` (a JSON object or its text) as a dict, refused with ``error`` when it is not
    JSON, not an object, or names a key that is not a field of the dataclass ``cls``."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise error(f"the {what} options are not JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise error(f"the {what} options are a JSON object, not {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise error(f"unknown {what} option(s) {', '.join(unknown)}", hint=f"known: {', '.join(sorted(known))}")
    return dict(data)


def known_keys_object(value: Any, known: frozenset[str] | set[str], where: str,
                      error: type[ProviderError], expected: str = "") -> Mapping[str, Any]:
    """``value`` when it is an object whose keys are all ``known``; else ``error``, its message
    starting with ``where`` (``expected``: what the object is, by default its known keys)."""
    if not isinstance(value, Mapping):
        raise error(f"{where}: expected {expected or 'an object with ' + ', '.join(sorted(known))}, not {value!r}")
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise error(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return value


def to_json_text(options: Mapping[str, Any]) -> str:
    """The options' JSON text, keys sorted and without spaces (stable across runs)."""
    return json.dumps(options, sort_keys=True, separators=(",", ":"))
