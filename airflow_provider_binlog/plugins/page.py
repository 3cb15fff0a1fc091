"""The server-rendered HTML page of the Binlog CDC view.

Every value is HTML-escaped (:func:`~.charts.esc`); the page needs no script and loads nothing
else: styles and charts are inline.
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Optional
from urllib.parse import quote

from .verified import verified_card
from .charts import MERGE_COLOUR, OP_COLOURS, esc, human_bytes, human_count, lag_chart, legend, rows_chart
from .status import OPS, RED_STATES, human_age

STATE_LABELS = {
    "ok": "OK",
    "unknown": "UNKNOWN",
    "warning": "WARNING",
    "stalled": "STALLED",
    "purged": "PURGED",
    "error": "FAILED",
}

_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; padding: 16px 20px 32px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: #212121; background: #f5f6f8; }
header { display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap; margin-bottom: 12px; }
h1 { font-size: 20px; margin: 0; }
h2 { font-size: 17px; margin: 0; display: flex; align-items: center; gap: 10px; }
h3 { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: #616161; margin: 0 0 6px; }
.muted { color: #757575; }
.small { font-size: 12px; }
.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px;
        overflow-wrap: anywhere; }
a { color: #1565c0; }
.page-warning { background: #fff8e1; border: 1px solid #ffcc80; padding: 6px 10px; border-radius: 6px;
                margin: 6px 0; }
.source { background: #fff; border: 1px solid #e0e0e0; border-left: 6px solid #43a047; border-radius: 8px;
          padding: 14px 16px; margin: 14px 0; }
.source.state-warning, .source.state-unknown { border-left-color: #f9a825; }
.source.state-error, .source.state-purged, .source.state-stalled { border-left-color: #d32f2f;
          background: #fffafa; }
.badge { font-size: 11px; font-weight: 700; letter-spacing: .05em; padding: 2px 8px; border-radius: 10px;
         color: #fff; background: #43a047; }
.badge.state-warning, .badge.state-unknown { background: #f9a825; color: #212121; }
.badge.state-error, .badge.state-purged, .badge.state-stalled { background: #d32f2f; }
.problems { list-style: none; padding: 0; margin: 10px 0 0; }
.problem { padding: 6px 10px; border-radius: 6px; margin: 4px 0; }
.problem.red { background: #ffebee; border: 1px solid #ef9a9a; color: #b71c1c; }
.problem.amber { background: #fff8e1; border: 1px solid #ffcc80; color: #6d4c00; }
.grid { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 10px; margin-top: 12px; }
@media (max-width: 980px) { .grid { grid-template-columns: repeat(2, minmax(0, 1fr)); } }
@media (max-width: 620px) { .grid { grid-template-columns: minmax(0, 1fr); } }
.card { border: 1px solid #eeeeee; border-radius: 6px; padding: 8px 10px; background: #fcfcfc; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 0; }
dt { color: #757575; }
dd { margin: 0; overflow-wrap: anywhere; }
.big { font-size: 22px; font-weight: 600; }
.lag-none { color: #2e7d32; }
.charts { display: flex; flex-wrap: wrap; gap: 14px; margin-top: 12px; }
figure { margin: 0; border: 1px solid #eeeeee; border-radius: 6px; padding: 8px; background: #fff;
         flex: 1 1 420px; max-width: 760px; }
svg.chart { display: block; width: 100%; height: auto; }
figcaption { font-size: 12px; color: #616161; margin-bottom: 4px; }
.legend { display: inline-flex; gap: 10px; margin-left: 8px; }
.legend-item { display: inline-flex; align-items: center; gap: 4px; }
.swatch { width: 10px; height: 10px; border-radius: 2px; display: inline-block; }
table { border-collapse: collapse; width: 100%; margin-top: 12px; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eeeeee; }
th { color: #616161; font-weight: 600; font-size: 12px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.no-iceberg .iceberg { display: none; }
details { margin-top: 10px; }
summary { cursor: pointer; color: #616161; }
"""


def _t(value: Any) -> Optional[dt.datetime]:
    if not value:
        return None
    try:
        t = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t


def _ago(value: Any, now: dt.datetime) -> str:
    t = _t(value)
    if t is None:
        return ""
    seconds = (now - t).total_seconds()
    return "just now" if seconds < 0 else f"{human_age(seconds)} ago"


def _when(value: Any, now: dt.datetime) -> str:
    t = _t(value)
    if t is None:
        return '<span class="muted">never</span>'
    return (f'{esc(t.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"))} UTC '
            f'<span class="muted">({esc(_ago(value, now))})</span>')


def _seconds(value: Any) -> str:
    if value is None:
        return '<span class="muted">unknown</span>'
    value = float(value)
    if value < 60:
        return esc(f"{value:.2f} s" if value < 10 else f"{value:.1f} s")
    return esc(f"{int(value) // 60} min {int(value) % 60} s")


def _num(value: Any) -> str:
    return '<span class="muted">unknown</span>' if value is None else esc(f"{value:,}")


def _int_text(value: Any) -> str:
    try:
        return esc(f"{int(value or 0):,}")
    except (TypeError, ValueError):
        return esc(value)


def _rows(rows: Optional[Mapping]) -> str:
    if not rows:
        return '<span class="muted">unknown</span>'
    return " · ".join(f'<span style="color:{OP_COLOURS[op]}">{_int_text(rows.get(op))}</span> '
                      f"{esc(op)}" for op in OPS)


def _dl(items) -> str:
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items if v is not None) + "</dl>"


def _problems(source: Mapping) -> str:
    items = []
    for p in source.get("problems") or []:
        colour = "red" if p.get("state") in RED_STATES else "amber"
        items.append(f'<li class="problem {colour}" data-state="{esc(p.get("state"))}">'
                     f"<strong>{esc(STATE_LABELS.get(p.get('state'), p.get('state')))}</strong> "
                     f"{esc(p.get('message'))}</li>")
    for w in source.get("warnings") or []:
        items.append(f'<li class="problem amber">{esc(w)}</li>')
    return f'<ul class="problems">{"".join(items)}</ul>' if items else ""


_NOT_PROBED = '<span class="muted not-probed">not probed</span>'
_NOT_PROBED_NOTE = "the view does not query the servers ([binlog] ui_probe_sources = False)"


def _probed(source: Mapping) -> bool:
    return source.get("probed", True) is not False


def _lag_card(source: Mapping) -> str:
    lag = source.get("lag")
    if not lag:
        note = "needs the server and a stored checkpoint" if _probed(source) else _NOT_PROBED_NOTE
        return ('<div class="card lag"><h3>Lag</h3><div class="big muted">unknown</div>'
                f'<div class="small muted">{esc(note)}</div></div>')
    nbytes = lag.get("bytes")
    cls = "big lag-value" + (" lag-none" if not lag.get("has_new_data") else "")
    head = human_bytes(nbytes) if nbytes is not None else (
        f"{lag.get('transactions')} transactions" if lag.get("transactions") is not None else "unknown")
    return ('<div class="card lag"><h3>Lag</h3>'
            f'<div class="{cls}" data-bytes="{esc(nbytes)}">{esc(head)}</div>'
            + _dl([("behind by", f'<span class="lag-seconds" data-seconds="{esc(lag["seconds"])}">'
                                 f'{esc(human_age(lag["seconds"]))} of source time</span>'
                    if lag.get("seconds") is not None else None),
                   ("bytes", _num(nbytes)), ("files", _num(lag.get("files"))),
                   ("transactions", _num(lag.get("transactions"))),
                   ("GTIDs", f'<span class="mono">{esc(lag["gtids"])}</span>' if lag.get("gtids") else None)])
            + "</div>")


def _server_card(source: Mapping) -> str:
    server = source.get("server") or {}
    position = source.get("position") or {}
    probed = _probed(source)
    return ('<div class="card server"><h3>Server</h3>' + _dl([
        ("flavor", esc(f"{server.get('flavor')} {server.get('version')}") if server.get("flavor") else
         '<span class="muted">unreachable</span>' if probed else _NOT_PROBED),
        ("address", esc(f"{server.get('host')}:{server.get('port')}") if server.get("host") else None),
        ("server id", esc(server.get("server_id")) if server.get("server_id") is not None else None),
        ("position", f'<span class="mono position">{esc(position.get("text"))}</span>' if position else
         '<span class="muted">unknown</span>' if probed else _NOT_PROBED),
    ]) + "</div>")


def _checkpoint_card(source: Mapping, now: dt.datetime) -> str:
    cp = source.get("checkpoint")
    return ('<div class="card checkpoint"><h3>Checkpoint</h3>' + _dl([
        ("key", f'<span class="mono">{esc(source.get("checkpoint_key"))}</span>'),
        ("stored", f'<span class="mono">{esc(cp.get("text"))}</span>' if cp else '<span class="muted">none</span>'),
        ("last advance", _when(source.get("last_advance"), now)),
        ("stalled after", esc(f"{int(source.get('stall_after_seconds') or 0) // 60} min without advance")),
    ]) + "</div>")


def _retention_card(source: Mapping) -> str:
    r = source.get("retention")
    if not r:
        unknown = '<span class="muted">unknown</span>' if _probed(source) else _NOT_PROBED
        return f'<div class="card retention"><h3>Retention</h3>{unknown}</div>'
    headroom = r.get("files_of_headroom")
    if headroom is None:
        headroom_text = '<span class="muted">unknown</span>'
    elif headroom == 0:
        headroom_text = "none: the checkpoint is in the oldest retained binlog"
    else:
        headroom_text = esc(f"{headroom} file(s): the checkpoint is that many binlogs after the oldest")
    return ('<div class="card retention"><h3>Retention</h3>' + _dl([
        ("oldest binlog", f'<span class="mono">{esc(r.get("oldest_binlog"))}</span>'),
        ("headroom", headroom_text),
        ("retained", esc(f"{r.get('binlog_files')} files, {human_bytes(r.get('retained_bytes'))}")),
        ("gtid_purged", f'<span class="mono">{esc(r["gtid_purged"])}</span>' if r.get("gtid_purged") else None),
    ]) + "</div>")


def _dump_card(source: Mapping, now: dt.datetime) -> str:
    d = source.get("last_dump")
    if not d:
        note = "" if source.get("staging_configured") else (
            "no staging directory configured for this source ([binlog] ui_sources)")
        return (f'<div class="card last-dump"><h3>Last dump</h3><span class="muted">none found</span>'
                f'<div class="small muted">{esc(note)}</div></div>')
    status = ("merged " + _ago(d.get("merged_at"), now) if d.get("merged_at")
              else "empty" if d.get("empty") else "staged, not merged yet")
    return ('<div class="card last-dump"><h3>Last dump</h3>' + _dl([
        ("when", _when(d.get("created_at"), now)),
        ("duration", _seconds(d.get("duration_seconds"))),
        ("rows", _rows(d.get("rows"))),
        ("rows/s", esc(human_count(d.get("rows_per_second"))) if d.get("rows_per_second") is not None else None),
        ("transactions", _num(d.get("transactions"))),
        ("binlog read", esc(human_bytes(d.get("binlog_bytes"))) if d.get("binlog_bytes") is not None else None),
        ("status", esc(status)),
    ]) + "</div>")


def _merge_card(source: Mapping, now: dt.datetime) -> str:
    m = source.get("last_merge")
    if not m:
        return '<div class="card last-merge"><h3>Last merge</h3><span class="muted">none recorded</span></div>'
    run = m.get("airflow") or {}
    return ('<div class="card last-merge"><h3>Last merge</h3>' + _dl([
        ("when", _when(m.get("at"), now)),
        ("duration", _seconds(m.get("duration_seconds"))),
        ("rows", _rows(m.get("rows"))),
        ("rows/s", esc(human_count(m.get("rows_per_second"))) if m.get("rows_per_second") is not None else None),
        ("engine", esc(m.get("engine")) if m.get("engine") else None),
        ("checkpoint", f'<span class="mono">{esc(m.get("checkpoint"))}</span>'),
        ("Airflow run", esc(f"{run.get('dag_id')} / {run.get('run_id')} ({run.get('state')})") if run else None),
    ]) + "</div>")


def _charts(source: Mapping) -> str:
    lag_points = [(_t(p.get("at")), p.get("bytes")) for p in source.get("lag_history") or []]
    merges = [_t(a.get("at")) for a in source.get("advances") or []]
    runs = [{"at": _t(d.get("created_at")), "rows": d.get("rows"), "merged": bool(d.get("merged_at")),
             "label": f"{d.get('kind')} {d.get('dump_id')}"}
            for d in reversed(source.get("dumps") or [])]
    lag_svg = lag_chart(lag_points, merges=[m for m in merges if m is not None],
                        label=f"Binlog lag of {source.get('conn_id')} over time")
    rows_svg = rows_chart(runs, label=f"Rows per run of {source.get('conn_id')}")
    ops = [(c, op) for op, c in OP_COLOURS.items()]
    return ('<div class="charts">'
            '<figure class="lag-figure"><figcaption>Lag: binlog bytes each dump had to read, and now'
            f'{legend([(MERGE_COLOUR, "checkpoint advanced")])}</figcaption>{lag_svg}</figure>'
            '<figure class="rows-figure"><figcaption>Rows per run (pale: staged, not merged yet)'
            f"{legend(ops)}</figcaption>{rows_svg}</figure>"
            "</div>")


def _tables(source: Mapping, now: dt.datetime) -> str:
    tables = source.get("tables") or []
    if not tables:
        return ""
    body = "".join(
        f'<tr><td class="mono">{esc(t["table"])}</td>'
        + "".join(f'<td class="num">{_int_text(t.get(op))}</td>' for op in OPS)
        + f'<td class="num">{_int_text(t.get("total"))}</td>'
        f'<td>{esc(_ago(t.get("last_change"), now))}</td>'
        f'<td class="mono iceberg">{esc(t.get("iceberg_table") or "")}</td>'
        f'<td class="mono iceberg">{esc(t.get("snapshot_id") if t.get("snapshot_id") is not None else "")}</td></tr>'
        for t in tables)
    n = len(source.get("dumps") or [])
    iceberg = any(t.get("iceberg_table") or t.get("snapshot_id") is not None for t in tables)
    return (f'<table class="tables{"" if iceberg else " no-iceberg"}"><caption class="small muted" '
            f'style="text-align:left">Tables: rows changed in the last {n} dump(s)'
            f'{"" if iceberg else "; Iceberg snapshot ids show once merge task runs are recorded"}'
            "</caption><thead><tr><th>table</th>"
            + "".join(f'<th class="num">{esc(op)}</th>' for op in OPS)
            + '<th class="num">total</th><th>last change</th><th class="iceberg">Iceberg table</th>'
            f'<th class="iceberg">snapshot id</th></tr></thead><tbody>{body}</tbody></table>')


def _percent(value: Any) -> str:
    return "" if value is None else f"{value:.0f} %"


def _snapshots(source: Mapping, now: dt.datetime) -> str:
    """A running snapshot's rows read against each table's estimated rows."""
    out = ""
    for snap in source.get("snapshots") or []:
        body = "".join(
            f'<tr><td class="mono">{esc(t["table"])}</td><td class="num">{_int_text(t.get("rows_read"))}</td>'
            f'<td class="num">{_int_text(t.get("estimated_rows"))}</td>'
            f'<td class="num">{esc(_percent(t.get("percent")))}</td></tr>'
            for t in snap.get("tables") or [])
        out += (f'<table class="snapshot-progress"><caption class="small muted" style="text-align:left">'
                f'Snapshot running: {esc(snap.get("dag_id"))} / {esc(snap.get("task_id"))} '
                f'({esc(snap.get("method") or "")}), started {esc(_ago(snap.get("start_date"), now))}, '
                f'progress of {esc(_ago(snap.get("updated_at"), now))}</caption>'
                '<thead><tr><th>table</th><th class="num">rows read</th><th class="num">estimated rows</th>'
                f'<th class="num">done</th></tr></thead><tbody>{body}</tbody></table>')
    return out


def render_source(source: Mapping, now: dt.datetime) -> str:
    state = source.get("state") or "unknown"
    conn_id, key = source.get("conn_id"), source.get("checkpoint_key")
    # one connection may serve several sources (checkpoint keys): each has its own section
    ident = conn_id if key in (None, conn_id) else f"{conn_id}--{key}"
    title = esc(conn_id) + ("" if ident == conn_id else f' <span class="checkpoint-key">{esc(key)}</span>')
    # the tasks' "Binlog CDC" link lands at #checkpoint-<checkpoint key> (operators/links.py)
    return (f'<section class="source state-{esc(state)}" id="source-{esc(ident)}" '
            f'data-conn-id="{esc(conn_id)}" data-checkpoint-key="{esc(key)}" data-state="{esc(state)}">'
            f'<a id="checkpoint-{esc(quote(str(key or conn_id), safe=""))}"></a>'
            f'<h2><span class="conn-id">{title}</span>'
            f'<span class="badge state-{esc(state)}">{esc(STATE_LABELS.get(state, state))}</span></h2>'
            + _problems(source)
            + '<div class="grid">' + _server_card(source) + _checkpoint_card(source, now) + _lag_card(source)
            + _retention_card(source) + _dump_card(source, now) + _merge_card(source, now) + "</div>"
            + _snapshots(source, now) + _charts(source) + _tables(source, now)
            + verified_card(source) + "</section>")  # the last verification (verified.py)


def render_page(status: Mapping, *, refresh_seconds: int = 60, json_href: str = "status.json") -> str:
    """The whole page for ``status`` (as returned by :func:`.status.gather`)."""
    now = _t(status.get("generated_at")) or dt.datetime.now(dt.timezone.utc)
    sources = status.get("sources") or []
    red = sum(1 for s in sources if s.get("state") in RED_STATES)
    summary = f"{len(sources)} source(s)" + (f", {red} need attention" if red else "")
    warnings = "".join(f'<div class="page-warning">{esc(w)}</div>' for w in status.get("warnings") or [])
    if sources:
        body = "".join(render_source(s, now) for s in sources)
    else:
        body = ('<div class="source state-unknown"><h2>No source</h2><p>Add an Airflow connection of type '
                '<span class="mono">mysql_binlog</span>, or list sources in the environment variable '
                '<span class="mono">[binlog] ui_sources</span> or the Variable '
                '<span class="mono">binlog_ui_sources</span>.</p></div>')
    refresh = f'<meta http-equiv="refresh" content="{int(refresh_seconds)}">' if refresh_seconds > 0 else ""
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"{refresh}<title>Binlog CDC</title><style>{_CSS}</style></head><body>"
            f'<header><h1>Binlog CDC</h1><span class="summary">{esc(summary)}</span>'
            '<span class="muted small">'
            f'checked {esc(now.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"))} UTC'
            f"{f' · refreshes every {int(refresh_seconds)} s' if refresh_seconds > 0 else ''}</span>"
            f'<a class="small" href="{esc(json_href)}">JSON</a></header>'
            f"{warnings}{body}</body></html>")


__all__ = ["STATE_LABELS", "render_page", "render_source"]
