"""The swap report's downtime section (issue 24): the path taken and why the faster ones were not,
predicted against measured downtime per phase, paused requests, what was pre-warmed. Called by
console/domain/swap/report.py (two hooks: `section` in the build, `tables` in the rendering)."""

from __future__ import annotations

from typing import Any

from console.core.derive.swap_observer import log_time
from console.domain.swap import prediction as pred

PHASES = (("gap", "last request → stop"), ("stop", "stop and drain"), ("start", "start → launch line"),
          ("init", "launch → weights"), ("weights", "weights"),
          ("kv", "KV / state allocation"), ("graphs", "CUDA graphs"), ("ready", "HTTP up, warmup → ready"),
          ("failed", "drained → the new server failed"), ("rollback", "rollback: the old server back to ready"),
          ("pause", "in-place pause"), ("downtime", "downtime"))


def _restart_measured(state: Any) -> dict[str, float]:
    """The swap's boot in the log (launched after the stop began, before any rollback), phase by
    phase, the stop step's own duration and the start (the drain seen → the server's first log
    line). A new server that failed and was rolled back never booted to ready: its start until it
    failed, then the rollback until the old server was ready again (never the rollback's boot as
    the swap's)."""
    out: dict[str, float] = {}
    swap = state.swap
    stop, start, rollback = swap.steps.get("stop_old"), swap.steps.get("start_new"), swap.steps.get("rollback")
    d = swap.downtime
    if stop is not None and stop.duration_s is not None and stop.state == "done":
        out["stop"] = stop.duration_s
        if d is not None and d.started_at_s is not None and stop.started_at_s is not None \
                and stop.started_at_s - d.started_at_s >= 0.05 \
                and not d.start_source.startswith(("in place", "beside")):
            # the downtime began at the old server's last served request: the phases add up to it
            out["gap"] = stop.started_at_s - d.started_at_s
    after = stop.started_at_s if stop is not None and stop.state == "done" else None
    until = rollback.started_at_s if rollback is not None and rollback.state != "pending" else None
    boots = [b for b in pred.boots_from_events(list(state.log_lines))
             if b.launch_at_s is None or ((after is None or b.launch_at_s >= after - 1)
                                          and (until is None or b.launch_at_s < until))]
    if swap.failed_start_rolled_back():
        began = stop.ended_at_s if stop is not None and stop.ended_at_s is not None else start.started_at_s
        out["failed"] = start.ended_at_s - min(began, start.started_at_s)
        out["rollback"] = d.ended_at_s - start.ended_at_s
        return out
    if boots:
        b = boots[-1]
        out.update({"init": b.init_s, "weights": b.weights_s, "kv": b.kv_s, "graphs": b.graphs_s, "ready": b.ready_s})
        # the start: from the drain seen (the console starts the new unit then) to the server's
        # first line, so that the phases add up to the downtime; else systemd's "Started" line
        launch = b.launch_at_s if b.launch_at_s is not None else log_time(b.at)
        if "stop" in out and stop is not None and stop.ended_at_s is not None and launch is not None \
                and launch >= stop.ended_at_s:
            out["start"] = launch - stop.ended_at_s
        elif b.start_s is not None:
            out["start"] = b.start_s
    return out


def section(state: Any, downtime_s: float | None) -> dict[str, Any]:
    """`swap_path`, `downtime_s`, `predicted_downtime_s` (top-level keys) and `downtime_paths`."""
    events = state.swap.paths
    plan_ev = events.get("plan")
    plan = (plan_ev.data() if plan_ev else {}).get("plan") or None
    restart = (plan_ev.data() if plan_ev else {}).get("restart") or {}
    outcome = events["outcome"].data() if "outcome" in events else {}
    prewarm = events["prewarm"].data() if "prewarm" in events else None
    endpoint = events["endpoint"].data() if "endpoint" in events else None
    steps = state.swap.steps
    if plan is not None:
        path = plan.get("chosen")
    elif steps.get("stop_old") is not None and steps["stop_old"].state != "pending":
        path = "restart"
    else:
        path = None
    chosen = next((o for o in (plan or {}).get("options", []) if o.get("path") == path), {})
    predicted_total = chosen.get("predicted_downtime_s") if chosen else restart.get("predicted_downtime_s")
    predicted: dict[str, float] = {}
    measured: dict[str, float] = {}
    if path == "restart":
        predicted = dict(restart.get("phases_s") or {})
        measured = _restart_measured(state)
    elif path == "in-place":
        if chosen.get("predicted_downtime_s") is not None:
            predicted = {"pause": chosen["predicted_downtime_s"]}
        if outcome.get("pause_s") is not None:
            measured = {"pause": outcome["pause_s"]}
    elif path == "beside":
        predicted = {"downtime": 0.0}
        # the downtime clock the observer wrote (the router's replies before the old server's stop),
        # else the outcome it wrote from the host's order (an operator's: the old one stopped after
        # the new one served); never a figure assumed: neither is unknown, not 0
        seen = outcome.get("downtime_s")
        if downtime_s is None and isinstance(seen, (int, float)) and not isinstance(seen, bool):
            downtime_s = float(seen)
        if downtime_s is not None:
            measured = {"downtime": float(downtime_s)}
    rows = []
    for key, title in PHASES:
        if key in predicted or key in measured:
            p, m = predicted.get(key), measured.get(key)
            rows.append({"phase": key, "title": title, "predicted_s": _r(p), "measured_s": _r(m),
                         "error_pct": _r(100 * (m - p) / p) if p and m is not None else None})
    not_taken = [f"{o['path']}: {o['reason']}" for o in (plan or {}).get("options", [])
                 if o.get("path") != path and not o.get("possible")]
    return {
        "swap_path": path,
        "downtime_s": _r(downtime_s),  # beside: the clock the observer wrote; none yet is unknown, never 0
        "predicted_downtime_s": _r(predicted_total),
        "downtime_paths": {
            "chosen": path, "forced": bool((plan or {}).get("forced")), "why": chosen.get("reason"),
            "details": chosen.get("details") or [], "not_taken": not_taken, "phases": rows,
            "prediction_text": restart.get("text"), "assumptions": restart.get("assumptions") or [],
            "residency": (plan_ev.data() if plan_ev else {}).get("residency"),
            "paused_requests": outcome.get("num_paused_requests"), "reply": outcome.get("reply"),
            "pause_source": outcome.get("pause_source"), "prewarm": prewarm, "endpoint": endpoint,
        },
    }


def _r(v: Any) -> float | None:
    return round(float(v), 2) if isinstance(v, (int, float)) else None


def _s(v: Any) -> str:
    return "–" if v is None else f"{v:.1f} s"


def tables(r: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]], list[str]]]:
    """The "Path and downtime" section for Markdown and HTML (report.py's table shape)."""
    d = r.get("downtime_paths")
    if not d:
        return []
    rows = [[x["title"], _s(x["predicted_s"]), _s(x["measured_s"]),
             "–" if x["error_pct"] is None else f"{x['error_pct']:+.0f} %"] for x in d["phases"]]
    rows.append(["total downtime", _s(r.get("predicted_downtime_s")), _s(r.get("downtime_s")), ""])
    notes = [f"path: {d['chosen'] or 'unknown'}" + (" (asked for by the profile)" if d["forced"] else "")
             + (f" — {d['why']}" if d["why"] else "")]
    notes += [f"not possible: {x}" for x in d["not_taken"]]
    if d["prediction_text"] and d["chosen"] != "restart":  # the chosen restart's text is its "why" above
        notes.append("had it restarted instead: " + d["prediction_text"].removeprefix("restart: "))
    notes += [f"assumption: {a}" for a in d["assumptions"]]
    if d["paused_requests"] is not None:
        notes.append(f"paused requests during the update: {d['paused_requests']} ({d['pause_source']})")
    if d["reply"]:
        notes.append(f"the server's reply: {d['reply']}")
    ep = d.get("endpoint")
    if ep:
        notes.append(f"the server now answers on port {ep.get('to_port')} (was {ep.get('from_port')}): the console "
                     "polls the new port")
    pw = d.get("prewarm")
    notes.append(f"pre-warm: {pw.get('text')}" if pw else "pre-warm: not run")
    return [("Path and downtime", ["phase", "predicted", "measured", "error"], rows, notes)]


__all__ = ["section", "tables"]
