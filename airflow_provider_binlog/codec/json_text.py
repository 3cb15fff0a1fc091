"""Decoded JSON values rendered as MySQL prints JSON text.

The values come from :mod:`.json_binary`.  :func:`to_mysql_json_text` gives
the text of ``CAST(col AS CHAR)``; :func:`to_json_compatible` gives plain
JSON-serialisable Python whose MySQL-specific scalars (decimals, temporal
and opaque values) are what that text shows for them.
"""
from __future__ import annotations

import base64
import datetime
import json
from decimal import Decimal
from typing import Any, Callable, cast

from .constants import MYSQL_TYPE_VAR_STRING
from .json_binary import JsonOpaque

__all__ = ["to_json_compatible", "to_mysql_json_text"]

# Double-quote a string the way MySQL's JSON printer does: only '"', '\\'
# and control characters below 0x20 are escaped (\b \t \n \f \r, else
# \u00xx in lowercase hex); everything else, non-ASCII included, is kept.
# The standard library's non-ASCII-escaping JSON string encoder follows
# exactly these rules.
_quote: Callable[[str], str] = json.encoder.encode_basestring


def _format_double(value: float) -> str:
    """Print a double like MySQL's JSON printer (my_gcvt, then ".0" if integral).

    The digits are the shortest that round-trip (as Python's repr).  The
    choice between fixed and exponent notation follows my_gcvt with the
    field width MySQL uses for JSON (34): magnitudes below 1e-15 and from
    1e15 up (unless 17 significant digits fit, e.g. 1234567890123456.8) use
    exponent notation without "+" or leading zeros ("1e-16", "1e15",
    "1e100"); everything else fixed notation ("0.000000000000001",
    "100000000000000.0", "2.5").
    """
    if 1e-4 <= abs(value) < 1e15:
        # Python's repr prints these with the same shortest digits in fixed
        # notation, with ".0" on integral values: identical to MySQL.
        return repr(value)
    if value == 0.0:
        return "-0.0" if str(value)[0] == "-" else "0.0"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple))
    decpt = len(digits) + cast(int, exponent)  # value = 0.<digits> * 10**decpt (finite: an int exponent)
    digits = digits.rstrip("0") or "0"
    length = len(digits)
    width = 33 if sign else 34
    exp_len = 1 + (decpt >= 101 or decpt <= -99) + (decpt >= 11 or decpt <= -9)
    if decpt <= 0:
        have_space = length - decpt + 2 <= width
    elif decpt < length:
        have_space = length + 1 <= width
    else:
        have_space = decpt <= width
    force_e = decpt <= 0 and width <= 2 - decpt and width >= 3 + exp_len
    use_fixed = (
        (have_space or (decpt <= width and (decpt >= -1 or (decpt == -2 and (length > 1 or not force_e)))
                        and not force_e))
        and (not have_space or (decpt >= -14 and (decpt <= 15 or length > decpt)))
    )
    if use_fixed:
        if decpt <= 0:
            text = "0." + "0" * -decpt + digits
        elif decpt < length:
            text = digits[:decpt] + "." + digits[decpt:]
        else:
            text = digits + "0" * (decpt - length) + ".0"
    else:
        exp = decpt - 1
        text = digits[0] + ("." + digits[1:] if length > 1 else "") + "e" + str(exp)
    return "-" + text if sign else text


def _format_time(value: datetime.timedelta) -> str:
    micro = value // _ONE_MICROSECOND
    sign = ""
    if micro < 0:
        sign = "-"
        micro = -micro
    seconds, micro = divmod(micro, 1000000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}.{micro:06d}"


_ONE_MICROSECOND = datetime.timedelta(microseconds=1)


def _format_datetime(value: datetime.datetime) -> str:
    return (f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
            f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}")


def _opaque_text(value: JsonOpaque) -> str:
    """Unquoted text MySQL prints for an opaque value."""
    if value.type_code == MYSQL_TYPE_VAR_STRING:
        # MySQL prints VAR_STRING opaques as plain strings.
        try:
            return value.data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    encoded = base64.b64encode(value.data).decode("ascii")
    if len(encoded) > 76:  # MySQL's base64 breaks lines every 76 characters
        encoded = "\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76))
    return f"base64:type{value.type_code}:{encoded}"


def to_mysql_json_text(value: object) -> str:
    """Render a decoded value as MySQL prints JSON (``CAST(col AS CHAR)``).

    Separators are ``", "`` and ``": "``; strings are escaped like MySQL
    (non-ASCII kept); doubles use MySQL's notation (``2.5``, ``3.0``,
    ``1e100``); decimals print their exact digits unquoted; dates, datetimes
    and times print as quoted strings (``"2012-03-18"``,
    ``"2012-03-18 11:30:45.000000"``, ``"-01:02:03.000000"``); other opaque
    values as ``"base64:typeNN:<base64>"``.
    """
    return _render(value)


def _render(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return _quote(value)
    if kind is int:
        return int.__repr__(value)
    if kind is dict:
        return "{" + ", ".join([_quote(k) + ": " + _render(v) for k, v in value.items()]) + "}"
    if kind is list:
        return "[" + ", ".join([_render(v) for v in value]) + "]"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is float:
        if value - value != 0.0:
            raise ValueError(f"JSON cannot represent {value!r}")
        return _format_double(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"JSON cannot represent {value!r}")
        return format(value, "f")
    if isinstance(value, datetime.datetime):
        return '"' + _format_datetime(value) + '"'
    if isinstance(value, datetime.date):
        return '"' + value.isoformat() + '"'
    if isinstance(value, datetime.timedelta):
        return '"' + _format_time(value) + '"'
    if isinstance(value, JsonOpaque):
        return _quote(_opaque_text(value))
    if isinstance(value, str):
        return _quote(str(value))
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _render(float(value))
    if isinstance(value, dict):
        return _render(dict(value))
    if isinstance(value, (list, tuple)):
        return _render(list(value))
    raise TypeError(f"cannot render {kind.__name__} as MySQL JSON")


def to_json_compatible(value: Any) -> Any:
    """Convert a decoded value to plain JSON-serialisable Python.

    Containers, strings, ints, floats, booleans and None are kept (a fresh
    copy of the containers is returned).  The MySQL-specific scalars become
    what MySQL's JSON text shows for them:

    * :class:`~decimal.Decimal`: an ``int`` when the value is integral
      (``Decimal("9.00")`` -> ``9``, exact at any size), otherwise the exact
      decimal digits as a ``str`` (``"123.456"``); never a lossy float.
    * date -> ``"YYYY-MM-DD"``, datetime -> ``"YYYY-MM-DD HH:MM:SS.ffffff"``,
      timedelta (TIME) -> ``"[-]HH:MM:SS.ffffff"``.
    * :class:`JsonOpaque` -> ``"base64:typeNN:<base64>"`` (a VAR_STRING
      opaque holding UTF-8 text -> that text, as MySQL prints it).
    """
    kind = type(value)
    if kind is dict:
        return {k: to_json_compatible(v) for k, v in value.items()}
    if kind is list:
        return [to_json_compatible(v) for v in value]
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"JSON cannot represent {value!r}")
        if value == value.to_integral_value():
            return int(value)
        return format(value, "f")
    if isinstance(value, datetime.datetime):
        return _format_datetime(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return _format_time(value)
    if isinstance(value, JsonOpaque):
        return _opaque_text(value)
    if isinstance(value, (str, int, float)):
        return value
    if isinstance(value, dict):
        return {k: to_json_compatible(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_compatible(v) for v in value]
    raise TypeError(f"cannot convert {kind.__name__} to JSON")
