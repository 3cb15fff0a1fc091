"""Small server-rendered SVG charts for the Binlog CDC view: no JavaScript, no library.

Every text that ends up in the SVG is HTML-escaped; numbers are formatted here. The charts are
``<svg>`` elements meant to be inlined in an HTML page (no XML declaration).
"""
from __future__ import annotations

import datetime as dt
import html
from typing import Callable, Optional, Sequence

#: Colours of the row operations (stacked bars) and of the lag line.
OP_COLOURS = {"insert": "#2e7d32", "update": "#1565c0", "delete": "#c62828"}
LAG_COLOUR = "#6a1b9a"
MERGE_COLOUR = "#00838f"
AXIS_COLOUR = "#9e9e9e"
TEXT_COLOUR = "#424242"

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def esc(value) -> str:
    """HTML-escape anything (quotes too), ``None`` as an empty string."""
    return "" if value is None else html.escape(str(value), quote=True)


def human_bytes(n: Optional[float]) -> str:
    if n is None:
        return "unknown"
    n = float(n)
    for unit in _UNITS:
        if abs(n) < 1024 or unit == _UNITS[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def human_count(n: Optional[float]) -> str:
    if n is None:
        return "unknown"
    n = float(n)
    if abs(n) < 1000:
        return f"{n:.0f}" if n == int(n) else f"{n:.1f}"
    for unit in ("k", "M", "G", "T"):
        n /= 1000
        if abs(n) < 1000 or unit == "T":
            return f"{n:.1f}{unit}"
    return f"{n:.1f}T"  # pragma: no cover


def _time_label(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%m-%d %H:%M")


def _nice_max(value: float, binary: bool = False) -> float:
    """A round upper bound for the y axis: 1, 2, 2.5, 5 or 10 times a power of ten (of a
    power of 1024 first, with ``binary``, so byte axes read 20 KiB rather than 19.5 KiB)."""
    if value <= 0:
        return 1.0
    if binary and value >= 1024:
        unit = 1024.0
        while value / unit >= 1024:
            unit *= 1024
        return _nice_max(value / unit) * unit
    magnitude = 10 ** (len(str(int(value))) - 1) if value >= 1 else 1.0
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude  # pragma: no cover


def _frame(width: int, height: int, css_class: str, label: str, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {esc(css_class)}" role="img" '
            f'aria-label="{esc(label)}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="system-ui, sans-serif" font-size="11">'
            f"<title>{esc(label)}</title>" + "".join(body) + "</svg>")


def _empty(width: int, height: int, css_class: str, label: str, message: str) -> str:
    return _frame(width, height, f"{css_class} chart-empty", label, [
        f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="#fafafa" '
        f'stroke="{AXIS_COLOUR}" stroke-dasharray="4 3"/>',
        f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" '
        f'fill="{TEXT_COLOUR}">{esc(message)}</text>'])


def _axes(width: int, height: int, pad: dict, y_max: float, y_format: Callable[[float], str]) -> list[str]:
    left, right, top, bottom = pad["l"], width - pad["r"], pad["t"], height - pad["b"]
    out = [f'<line class="axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="{AXIS_COLOUR}"/>',
           f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="{AXIS_COLOUR}"/>']
    for frac in (0.5, 1.0):
        y = bottom - frac * (bottom - top)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eeeeee"/>')
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" fill="{TEXT_COLOUR}">'
                   f"{esc(y_format(y_max * frac))}</text>")
    out.append(f'<text x="{left - 4}" y="{bottom + 4}" text-anchor="end" fill="{TEXT_COLOUR}">0</text>')
    return out


def lag_chart(points: Sequence[tuple], *, merges: Sequence[dt.datetime] = (), width: int = 460,
              height: int = 170, label: str = "Binlog lag over time",
              y_format: Callable[[float], str] = human_bytes) -> str:
    """A line of ``(time, value)`` points (oldest first; ``value`` None is skipped), with the
    checkpoint advances (``merges``) as ticks under the x axis."""
    pts = sorted(((t, float(v)) for t, v in points if t is not None and v is not None), key=lambda p: p[0])
    if not pts:
        return _empty(width, height, "lag-chart", label, "no lag history yet")
    pad = {"l": 62, "r": 14, "t": 12, "b": 34}
    left, right, top, bottom = pad["l"], width - pad["r"], pad["t"], height - pad["b"]
    ticks = sorted(m for m in merges if m is not None)
    t0 = min([pts[0][0], *ticks[:1]])
    t1 = max([pts[-1][0], *ticks[-1:]])
    span = (t1 - t0).total_seconds() or 1.0
    y_max = _nice_max(max(v for _, v in pts), binary=y_format is human_bytes)

    def x_of(t: dt.datetime) -> float:
        if t1 == t0:
            return (left + right) / 2
        return left + (t - t0).total_seconds() / span * (right - left)

    def y_of(v: float) -> float:
        return bottom - v / y_max * (bottom - top)

    body = _axes(width, height, pad, y_max, y_format)
    coords = [(x_of(t), y_of(v)) for t, v in pts]
    if len(coords) > 1:
        area = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        body.append(f'<polygon points="{coords[0][0]:.1f},{bottom} {area} {coords[-1][0]:.1f},{bottom}" '
                    f'fill="{LAG_COLOUR}" fill-opacity="0.12"/>')
        body.append(f'<polyline class="lag-line" points="{area}" fill="none" stroke="{LAG_COLOUR}" '
                    f'stroke-width="2"/>')
    for (t, v), (x, y) in zip(pts, coords):
        body.append(f'<circle class="lag-point" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{LAG_COLOUR}">'
                    f"<title>{esc(_time_label(t))} UTC: {esc(y_format(v))}</title></circle>")
    for t in ticks:
        x = x_of(t)
        body.append(f'<path class="merge-tick" d="M{x:.1f},{bottom + 1} l-4,7 h8 z" fill="{MERGE_COLOUR}">'
                    f"<title>checkpoint advanced {esc(_time_label(t))} UTC</title></path>")
    body.append(f'<text x="{left}" y="{height - 6}" fill="{TEXT_COLOUR}">{esc(_time_label(t0))}</text>')
    if t1 != t0:
        body.append(f'<text x="{right}" y="{height - 6}" text-anchor="end" fill="{TEXT_COLOUR}">'
                    f"{esc(_time_label(t1))} UTC</text>")
    return _frame(width, height, "lag-chart", label, body)


def rows_chart(runs: Sequence[dict], *, width: int = 460, height: int = 170,
               label: str = "Rows per run") -> str:
    """Stacked bars of rows per operation, one per run (oldest first). A run is a dict with
    ``at`` (datetime), ``rows`` ({"insert": n, "update": n, "delete": n}), ``merged`` (bool:
    applied to Iceberg, else only staged: drawn lighter) and optionally ``label``."""
    runs = [r for r in runs if r.get("rows") is not None]
    if not runs:
        return _empty(width, height, "rows-chart", label, "no runs yet")
    pad = {"l": 62, "r": 14, "t": 12, "b": 34}
    left, right, top, bottom = pad["l"], width - pad["r"], pad["t"], height - pad["b"]
    totals = [sum(int(r["rows"].get(op) or 0) for op in OP_COLOURS) for r in runs]
    y_max = _nice_max(max(totals))
    slot = (right - left) / len(runs)
    bar = max(2.0, min(28.0, slot * 0.7))
    body = _axes(width, height, pad, y_max, human_count)
    for i, (run, total) in enumerate(zip(runs, totals)):
        x = left + slot * i + (slot - bar) / 2
        y = bottom
        merged = bool(run.get("merged"))
        what = run.get("label") or (_time_label(run["at"]) + " UTC" if run.get("at") else f"run {i + 1}")
        parts = ", ".join(f"{int(run['rows'].get(op) or 0)} {op}" for op in OP_COLOURS)
        body.append(f'<g class="run-bar{"" if merged else " run-pending"}">'
                    f"<title>{esc(what)}: {esc(parts)}{'' if merged else ' (staged, not merged yet)'}"
                    "</title>")
        for op, colour in OP_COLOURS.items():
            n = int(run["rows"].get(op) or 0)
            if not n:
                continue
            h = n / y_max * (bottom - top)
            y -= h
            body.append(f'<rect class="bar-{op}" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                        f'fill="{colour}" fill-opacity="{1.0 if merged else 0.4}"/>')
        if total == 0:
            body.append(f'<rect class="bar-empty" x="{x:.1f}" y="{bottom - 1}" width="{bar:.1f}" height="1" '
                        f'fill="{AXIS_COLOUR}"/>')
        body.append("</g>")
    first, last = runs[0].get("at"), runs[-1].get("at")
    if first is not None:
        body.append(f'<text x="{left}" y="{height - 6}" fill="{TEXT_COLOUR}">{esc(_time_label(first))}</text>')
    if last is not None and len(runs) > 1:
        body.append(f'<text x="{right}" y="{height - 6}" text-anchor="end" fill="{TEXT_COLOUR}">'
                    f"{esc(_time_label(last))} UTC</text>")
    return _frame(width, height, "rows-chart", label, body)


def legend(items: Sequence[tuple]) -> str:
    """An HTML legend of ``(colour, text)`` pairs."""
    return '<span class="legend">' + "".join(
        f'<span class="legend-item"><span class="swatch" style="background:{esc(c)}"></span>{esc(t)}</span>'
        for c, t in items) + "</span>"


__all__ = ["OP_COLOURS", "esc", "human_bytes", "human_count", "lag_chart", "legend", "rows_chart"]
