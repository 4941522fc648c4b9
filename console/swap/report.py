"""The swap report, from a recording: what changed and why, the fit predicted against what the server
logged, the download and its verification, the boot timeline, time to ready and downtime, GPU memory
before and after, the benchmark before and after, and who did (and approved) what, when.

The recording is replayed into a HostState (the same reducer the console uses), so the report says
what the screen said. Every string is passed through `redact_text` once more on the way out.
"""

from __future__ import annotations

import html
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.core.state import HostState, ReadingChanged
from console.redact import redact_text
from console.swap.model import SwapStepChanged

SECTIONS = ("Host", "Old → new", "Swap plan", "Diff", "Fit", "Download", "Boot timeline", "Time to ready and downtime",
            "GPU memory", "Benchmark", "Audit log")
BENCH_COLUMNS = (("output_throughput", "output tok/s", "{:.1f}"), ("request_throughput", "req/s", "{:.2f}"),
                 ("median_ttft_ms", "median TTFT ms", "{:.1f}"), ("p99_ttft_ms", "p99 TTFT ms", "{:.1f}"),
                 ("median_itl_ms", "median ITL ms", "{:.2f}"), ("accept_length", "accept len", "{:.2f}"))


class ReportError(ValueError):
    """No swap in this recording, or nothing to report (one line)."""


def _ts(at: float | None) -> str | None:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else None


def _gpu_rows(status: Any) -> list[dict[str, Any]]:
    if status is None:
        return []
    return [{"gpu": g.index, "used_mib": g.memory_used_mib, "total_mib": g.memory_total_mib,
             "processes": [f"{p.pid} {p.name}" for p in g.processes]} for g in status.gpus]


def _model_name(side: Any) -> str | None:
    if side is None or side.command is None:
        return None
    for flag in ("--served-model-name", "--model-path"):
        v = side.command.value(flag)
        if isinstance(v, str) and v:
            return v
    return None


@dataclass
class ReportBuilder:
    """Fed every event of a session in order (a recording, or a live state's events)."""

    host: str
    label: str
    state: HostState = field(init=False)
    gpu_before: Any = None
    gpu_after: Any = None
    started_at_s: float | None = None
    ended_at_s: float | None = None

    def __post_init__(self) -> None:
        self.state = HostState(self.host, label=self.label)

    def feed(self, t: float, event: Any) -> None:
        self.started_at_s = t if self.started_at_s is None else self.started_at_s
        self.ended_at_s = t
        if isinstance(event, SwapStepChanged) and event.step.key == "stop_old" and event.step.state == "running" \
                and self.gpu_before is None:
            self.gpu_before = self.state.data("gpu")
        self.state.apply(event)
        if isinstance(event, ReadingChanged) and event.source == "gpu" and event.reading.error is None:
            start = self.state.swap.steps.get("start_new")
            if self.gpu_before is not None and start is not None and start.state in ("done", "failed"):
                self.gpu_after = self.state.data("gpu")
            rollback = self.state.swap.steps.get("rollback")
            if rollback is not None and rollback.state in ("done", "failed"):
                self.gpu_after = self.state.data("gpu")

    def build(self) -> dict[str, Any]:
        s = self.state
        swap = s.swap
        if swap.setup is None and all(step.state == "pending" for step in swap.steps.values()):
            raise ReportError("no swap in this recording (no swap step ever ran)")
        report = s.data("service")
        setup = swap.setup
        out: dict[str, Any] = {
            "host": {"host": s.host, "label": s.label, "from": _ts(self.started_at_s), "to": _ts(self.ended_at_s)},
            "old_new": {
                "old_unit": setup.old_unit if setup else None, "new_unit": setup.new_unit if setup else None,
                "old_model": _model_name(report.old if report else None),
                "new_model": _model_name(report.new if report else None),
                "repo_id": setup.repo_id if setup else None, "model_dir": setup.model_dir if setup else None,
            },
            "steps": [{"key": st.key, "title": st.title, "state": st.state, "started": _ts(st.started_at_s),
                       "duration_s": st.duration_s, "detail": st.detail, "who": st.who}
                      for st in swap.ordered_steps()],
            "gate": [{"check": c.name, "ok": c.ok, "reason": c.reason, "overridden_by": c.overridden_by}
                     for c in swap.gate],
        }
        out["diff"] = {
            "changes": [{"flag": c.flag, "change": c.change, "old": c.old, "new": c.new, "category": c.category,
                         "reason": c.reason} for c in (report.changes if report else ())],
            "env_changes": [{"name": e.name, "change": e.change, "old": e.old, "new": e.new}
                            for e in (report.env_changes if report else ())],
            "lints": [{"severity": lint.severity, "flag": lint.flag, "message": lint.message}
                      for lint in (report.lints if report else ())],
        }
        out["fit"] = self._fit()
        out["download"] = self._download()
        log = s.data("log")
        out["boot"] = [{"phase": b.phase, "at": b.at, "seconds": b.seconds, "detail": b.detail}
                       for b in (log.boot if log else ())]
        start = swap.steps.get("start_new")
        d = swap.downtime
        # From the `systemctl start` itself (not the step, which may have waited for an approval).
        started = [e.at_s - (e.duration_s or 0.0) for e in swap.audit
                   if e.action == "start_new" and " start -- " in e.command and e.exit_status == 0]
        ready_at = d.ended_at_s if d is not None and d.ended_at_s is not None else (
            start.ended_at_s if start is not None and start.state == "done" else None)
        time_to_ready = (ready_at - started[-1]) if started and ready_at is not None and start is not None \
            and start.state == "done" else None
        out["timing"] = {
            "time_to_ready_s": time_to_ready,
            "start_new_state": start.state if start else None,
            "downtime_s": swap.downtime_s(self.ended_at_s or 0.0) if d else None,
            "downtime_from": _ts(d.started_at_s) if d else None, "downtime_from_source": d.start_source if d else None,
            "downtime_to": _ts(d.ended_at_s) if d else None,
            "downtime_to_source": (d.end_source or "not ready yet (still running at the end of the recording)")
            if d else None,
        }
        out["gpu"] = {"before": _gpu_rows(self.gpu_before), "after": _gpu_rows(self.gpu_after or s.data("gpu"))}
        out["bench"] = self._bench(out["old_new"])
        out["audit"] = [{"who": e.who, "at": _ts(e.at_s), "action": e.action, "command": e.command,
                         "exit_status": e.exit_status, "output_tail": e.output_tail, "note": e.note}
                        for e in swap.audit]
        out["approvals"] = [{"action": a.action, "requested_by": a.requested_by, "requested_at": _ts(a.requested_at_s),
                             "status": a.status, "decided_by": a.decided_by, "decided_at": _ts(a.decided_at_s)}
                            for a in swap.approvals.values()]
        return _redact(out)

    def _fit(self) -> dict[str, Any]:
        from console.analysis.fit import calibration
        from console.swap.preflight import fit_result

        result, why = fit_result(self.state)
        if result is None:
            return {"predicted": None, "why_not": why, "rows": []}
        rows = calibration(result, self.state.data("log"))
        return {"predicted": {"fits": result.fits, "kv_tokens": result.max_total_tokens,
                              "max_running_requests": result.max_running_requests,
                              "weights_gib_per_gpu": round(result.weights_gib, 2),
                              "binding": result.binding_constraint},
                "rows": [{"what": w, "predicted": p, "logged": a} for w, p, a in rows]}

    def _download(self) -> dict[str, Any]:
        d = self.state.data("download")
        v = self.state.verify
        return {
            "model_dir": d.model_dir if d else None, "complete": d.complete if d else None,
            "shards": f"{d.shards_done}/{d.shards_total}" if d else None,
            "bytes_done": d.bytes_done if d else None, "bytes_total": d.bytes_total if d else None,
            "problems": list(d.problems) if d else [],
            "verification": None if v is None else {"files": v.total_files, "matched": v.matched,
                                                    "mismatched": list(v.mismatched), "finished": v.finished,
                                                    "error": v.error},
        }

    def _bench(self, old_new: dict[str, Any]) -> dict[str, Any]:
        runs = list(self.state.bench.history)
        started = self.state.swap.steps.get("benchmark")
        after = [r for r in runs if started and started.started_at_s and float(r.get("timestamp", 0) or 0)
                 >= started.started_at_s - 1]
        new_model = after[-1].get("model") if after else None
        before = [r for r in runs if r not in after and r.get("model") != new_model]

        def row(r: dict[str, Any]) -> dict[str, Any]:
            return {"model": r.get("model"), "concurrency": r.get("max_concurrency") or r.get("concurrency_level")
                    or r.get("concurrency"), **{k: r.get(k) for k, _, _ in BENCH_COLUMNS}}

        return {"before": row(before[-1]) if before else None, "after": [row(r) for r in after],
                "note": None if before else "no earlier run of the old model on this host in the recording"}


def _redact(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v) for v in value]
    return value


def report_from_recording(path: Path) -> dict[str, Any]:
    from console.core.recording import read_recording

    rec = read_recording(path)
    header = rec.header
    builder = ReportBuilder(str(header.get("host") or "?"), str(header.get("label") or header.get("host") or "?"))
    for t, event in rec.entries:
        builder.feed(t, event)
    out = builder.build()
    out["host"]["recording"] = str(path)
    if header.get("demo"):
        out["host"]["note"] = ("the simulated demo host: its story runs time-compressed, so durations are "
                               "shorter than on a real host")
    if rec.damage:
        out["host"]["recording_damage"] = rec.damage
    return out


# -- rendering ---------------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, (list, tuple)):
        return " ".join(str(x) for x in v)
    return str(v)


def _dur(s: float | None) -> str:
    if s is None:
        return "–"
    m, sec = divmod(int(round(s)), 60)
    return f"{m}m{sec:02d}s" if m else f"{s:.1f}s"


def _tables(r: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]], list[str]]]:
    """(section, header, rows, notes) for every section, shared by Markdown and HTML."""
    on = r["old_new"]
    t = r["timing"]
    sections: list[tuple[str, list[str], list[list[str]], list[str]]] = []
    host = r["host"]
    sections.append(("Host", ["host", "label", "from", "to"],
                     [[_fmt(host["host"]), _fmt(host["label"]), _fmt(host["from"]), _fmt(host["to"])]],
                     [n for n in (host.get("note"), host.get("recording_damage")) if n]))
    sections.append(("Old → new", ["", "old", "new"], [
        ["unit", _fmt(on["old_unit"]), _fmt(on["new_unit"])],
        ["model", _fmt(on["old_model"]), _fmt(on["new_model"])],
        ["repo / directory", "", f"{_fmt(on['repo_id'])} → {_fmt(on['model_dir'])}"]], []))
    sections.append(("Swap plan", ["step", "state", "started", "took", "by", "detail"],
                     [[s["title"], s["state"], _fmt(s["started"]), _dur(s["duration_s"]), _fmt(s["who"]),
                       s["detail"]] for s in r["steps"]],
                     [f"gate: {g['check']} {'ok' if g['ok'] else 'FAILED' if g['ok'] is False else 'unknown'}"
                      f" — {g['reason']}" + (f" (overridden by {g['overridden_by']})" if g["overridden_by"] else "")
                      for g in r["gate"]]))
    diff = r["diff"]
    sections.append(("Diff", ["flag", "change", "old", "new", "why"],
                     [[c["flag"], c["change"], _fmt(c["old"]), _fmt(c["new"]), _fmt(c["reason"])]
                      for c in diff["changes"]],
                     [f"{lint['severity']}: {lint['flag'] + ' ' if lint['flag'] else ''}{lint['message']}"
                      for lint in diff["lints"]]
                     + [f"environment {e['change']}: {e['name']}" for e in diff["env_changes"]]))
    fit = r["fit"]
    p = fit["predicted"]
    sections.append(("Fit", ["", "predicted", "the server logged"],
                     [[x["what"], x["predicted"], x["logged"]] for x in fit["rows"]],
                     [f"fits: {p['fits']}; binding: {p['binding']}" if p else f"no prediction: {fit['why_not']}"]))
    d = r["download"]
    v = d["verification"]
    sections.append(("Download", ["model dir", "complete", "shards", "GB"],
                     [[_fmt(d["model_dir"]), _fmt(d["complete"]), _fmt(d["shards"]),
                       f"{(d['bytes_done'] or 0) / 1e9:.1f} of {(d['bytes_total'] or 0) / 1e9:.1f}"]],
                     [("sha256: not verified" if v is None else
                       f"sha256: {v['matched']}/{v['files']} match" + (f", differ: {', '.join(v['mismatched'])}"
                                                                      if v["mismatched"] else ""))]
                     + d["problems"]))
    sections.append(("Boot timeline", ["phase", "log time", "s since launch", "detail"],
                     [[b["phase"], _fmt(b["at"]), _fmt(b["seconds"]), b["detail"]] for b in r["boot"]], []))
    sections.append(("Time to ready and downtime", ["", "value", "from", "to"], [
        ["time to ready", _dur(t["time_to_ready_s"]), "systemctl start", _fmt(t["start_new_state"])],
        ["downtime", _dur(t["downtime_s"]), f"{_fmt(t['downtime_from'])} ({_fmt(t['downtime_from_source'])})",
         f"{_fmt(t['downtime_to'])} ({_fmt(t['downtime_to_source'])})"]], []))
    g = r["gpu"]
    before = {row["gpu"]: row for row in g["before"]}
    after = {row["gpu"]: row for row in g["after"]}
    sections.append(("GPU memory", ["GPU", "before (MiB)", "after (MiB)", "total (MiB)"],
                     [[str(i), _fmt((before.get(i) or {}).get("used_mib")), _fmt((after.get(i) or {}).get("used_mib")),
                       _fmt((after.get(i) or before.get(i) or {}).get("total_mib"))]
                      for i in sorted(set(before) | set(after))], []))
    b = r["bench"]
    rows = ([["before", _fmt(b["before"]["model"]), _fmt(b["before"]["concurrency"])]
             + [_num(b["before"].get(k), f) for k, _, f in BENCH_COLUMNS]] if b["before"] else [])
    rows += [["after", _fmt(x["model"]), _fmt(x["concurrency"])] + [_num(x.get(k), f) for k, _, f in BENCH_COLUMNS]
             for x in b["after"]]
    sections.append(("Benchmark", ["", "model", "concurrency", *[c for _, c, _ in BENCH_COLUMNS]], rows,
                     [b["note"]] if b["note"] else []))
    sections.append(("Audit log", ["when", "who", "action", "command", "exit", "output"],
                     [[_fmt(a["at"]), a["who"], a["action"], a["command"], _fmt(a["exit_status"]),
                       (a["output_tail"] or a["note"] or "")[-160:]] for a in r["audit"]],
                     [f"approval: {a['action']} asked by {a['requested_by']} at {a['requested_at']}: {a['status']}"
                      + (f" by {a['decided_by']} at {a['decided_at']}" if a["decided_by"] else "")
                      for a in r["approvals"]]))
    return sections


def _num(v: Any, fmt: str) -> str:
    return fmt.format(v) if isinstance(v, (int, float)) else "–"


def render_json(r: dict[str, Any]) -> str:
    return json.dumps(r, indent=2, default=str)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#!|~])|^([-+])")


def _md_cell(text: str) -> str:
    """Host data as Markdown text, never Markdown or HTML: `<script>`, `[x](javascript:…)`,
    images and headings passed through before (issue 21, item 8). Redacted here, cell by cell:
    a pass over the whole document read table pipes after `password:` as the value."""
    text = redact_text(str(text)).replace("\r", " ").replace("\n", " ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(lambda m: "\\" + (m.group(1) or m.group(2)), text)


def _h(text: Any) -> str:
    """Host data as HTML text: redacted, then escaped (never the other way round)."""
    return html.escape(redact_text(str(text)))


def render_markdown(r: dict[str, Any]) -> str:
    on = r["old_new"]
    lines = [f"# Swap report: {_md_cell(str(r['host']['label']))}", "",
             f"{_md_cell(_fmt(on['old_model']))} → {_md_cell(_fmt(on['new_model']))}", ""]
    for title, header, rows, notes in _tables(r):
        lines += [f"## {title}", ""]
        if rows:
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "---|" * len(header))
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            lines.append("")
        elif not notes:
            lines += ["(nothing recorded)", ""]
        lines += [f"- {_md_cell(n)}" for n in notes]
        if notes:
            lines.append("")
    return "\n".join(lines)


def bench_chart_svg(r: dict[str, Any], width: int = 640, height: int = 220) -> str:
    """Output tokens/s before and after, one bar per run (inline SVG: no image files, no scripts)."""
    b = r["bench"]
    bars: list[tuple[str, float, str]] = []
    if b["before"] and isinstance(b["before"].get("output_throughput"), (int, float)):
        bars.append((f"before: {b['before']['model']} c={_fmt(b['before']['concurrency'])}",
                     float(b["before"]["output_throughput"]), "#8a8f98"))
    for x in b["after"]:
        if isinstance(x.get("output_throughput"), (int, float)):
            bars.append((f"after: {x['model']} c={_fmt(x['concurrency'])}", float(x["output_throughput"]), "#2f9e44"))
    if not bars:
        return ""
    top = max(v for _, v, _ in bars) or 1.0
    bar_h = max(14, min(32, (height - 40) // len(bars) - 8))
    h = 40 + len(bars) * (bar_h + 8)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img" '
             f'aria-label="output tokens per second, before and after">',
             '<text x="0" y="16" font-size="13" font-family="sans-serif">output tokens/s (higher is better)</text>']
    for i, (label, value, colour) in enumerate(bars):
        y = 28 + i * (bar_h + 8)
        w = int((width - 260) * value / top)
        parts.append(f'<text x="0" y="{y + bar_h * 0.7:.0f}" font-size="11" font-family="sans-serif">'
                     f'{html.escape(label[:36])}</text>')
        parts.append(f'<rect x="230" y="{y}" width="{max(w, 1)}" height="{bar_h}" fill="{colour}"/>')
        parts.append(f'<text x="{236 + w}" y="{y + bar_h * 0.7:.0f}" font-size="11" font-family="sans-serif">'
                     f'{value:.0f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(r: dict[str, Any]) -> str:
    on = r["old_new"]
    e = _h  # each piece redacted, then escaped: a pass over the document ate markup after `password:`
    body = [f"<h1>Swap report: {e(str(r['host']['label']))}</h1>",
            f"<p class=lead>{e(_fmt(on['old_model']))} → {e(_fmt(on['new_model']))}</p>"]
    for title, header, rows, notes in _tables(r):
        body.append(f'<section id="{e(title.lower().replace(" ", "-").replace("→", "to"))}"><h2>{e(title)}</h2>')
        if rows:
            body.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead><tbody>")
            for row in rows:
                cls = ""
                if title == "Swap plan":
                    cls = f' class="{e(row[1])}"'
                body.append(f"<tr{cls}>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>")
            body.append("</tbody></table>")
        elif not notes:
            body.append("<p class=empty>(nothing recorded)</p>")
        if notes:
            body.append("<ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
        if title == "Benchmark":
            chart = bench_chart_svg(r)
            if chart:
                body.append(f'<figure class="chart">{chart}</figure>')
        body.append("</section>")
    style = ("body{font:14px/1.4 sans-serif;margin:24px;color:#1d1f23}h1{font-size:22px}h2{font-size:16px;"
             "border-bottom:1px solid #ccd;padding-bottom:2px;margin-top:22px}table{border-collapse:collapse;"
             "width:100%}td,th{border:1px solid #dde;padding:3px 6px;text-align:left;vertical-align:top;"
             "font-size:12px}th{background:#f2f3f7}tr.failed td{background:#fde8e8}tr.done td:nth-child(2)"
             "{color:#2f7d32}.lead{font-size:16px}td{word-break:break-word}")
    doc = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>Swap report: "
           f"{e(str(r['host']['label']))}</title><style>{style}</style></head><body>{''.join(body)}</body></html>")
    return doc


def render(r: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return render_json(r)
    if fmt == "html":
        return render_html(r)
    return render_markdown(r)
