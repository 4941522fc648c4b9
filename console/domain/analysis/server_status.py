"""One honest status for the SGLang server: starting (which phase), ready, degraded or dead, with
the reason. Combines the unit's state, the log, /server_info, /metrics and /health_generate."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from console.domain.analysis.log_state import LogSummary, logged_since

PHASE_WORDS = {"launch": "launching", "weights loading": "loading weights", "weights loaded": "weights loaded",
               "mamba cache": "allocating caches", "kv cache": "allocating KV cache",
               "cuda graphs": "capturing CUDA graphs", "cuda graphs done": "CUDA graphs captured",
               "capacity": "sizing the pools", "http up": "warming up", "ready": "ready"}


DECODE_FRESH_S = 15.0  # a decode line this recent gives the status line its figures
WARMUP_GRACE_S = 180.0  # after the ready line, this long without a first /health_generate answer is the warm-up

CAUSE_RANK = {"oom": 6, "exception": 5, "watchdog": 4, "nan": 3, "health": 2, "crash": 1}


@dataclass(frozen=True, slots=True)
class HttpFacts:
    server_info: dict[str, Any] | None = None
    server_info_error: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    health_ok: bool | None = None  # /health_generate, probed at most every 25 s
    health_at_s: float | None = None
    health_error: str | None = None
    # For this process: has /health_generate ever answered? (None: not known.) Since when has it
    # failed? After the ready line, failures before a first answer are the warm-up (issue 20).
    health_ever_ok: bool | None = None
    health_failing_since_s: float | None = None
    health_via: str = "/health_generate"  # or the cheaper signals that stood in for it (issue 22)


@dataclass(frozen=True, slots=True)
class ServerStatus:
    status: str  # "starting", "ready", "degraded", "dead" or "unknown"
    reason: str
    unit: str | None
    unit_state: str | None
    main_pid: int | None
    phase: str | None
    http: HttpFacts
    gen_throughput: float | None = None
    accept_length: float | None = None
    running_reqs: float | None = None
    # The queue, by the same rule as the running count (the newest decode line, else the gauge): the
    # status line and the fleet row read these figures, never their own (issue 20).
    queue_reqs: float | None = None
    port: int | None = None  # where it was asked (the host's loopback port)
    moved_from_port: int | None = None  # issue 24: the beside path moved the traffic here from this port
    # Why the unit is failing in systemd's words ("activating (auto-restart), restart 3"), else None
    # (console/host/parsers/systemd.py: unit_is_failing).
    unit_failing: str | None = None


def combine(unit: str | None, unit_state: str | None, main_pid: int | None, log: LogSummary | None,
            http: HttpFacts, now_s: float, *, unit_failing: str | None = None) -> ServerStatus:
    """The server's status from its unit, its log and its HTTP answers. A port that answers while
    the unit followed is inactive or failed is another process's server (the old unit's, before a
    swap): it is never credited to that unit (`unit` None, the reason says whose it is not)."""
    st = _combine(unit, unit_state, main_pid, log, http, now_s, unit_failing=unit_failing)
    if unit is not None and unit_state in ("failed", "inactive", "deactivating") and http.server_info:
        return replace(st, unit=None, unit_state=None, main_pid=None,
                       reason=f"{st.reason} (not {unit}, which is {unit_state}: another process answers on "
                              "the port)")
    return st


# The words `combine` adds to a reason whose server is not the followed unit's: a narrow view reads
# them back to say the whose first (the log pane's 56 columns cut "(not sglang-qwen…" mid-name).
NOT_THE_UNITS = re.compile(r"^(?P<head>.*) \(not (?P<unit>\S+), which is (?P<state>[\w-]+): another process "
                           r"answers on the port\)$")


def _combine(unit: str | None, unit_state: str | None, main_pid: int | None, log: LogSummary | None,
             http: HttpFacts, now_s: float, *, unit_failing: str | None = None) -> ServerStatus:
    phase = log.phase if log else None
    fatal = None
    if log is not None and log.errors:
        booted = next((b for b in log.boot if b.phase in ("launch", "weights loading")), None)
        recent = [e for e in log.errors if e.kind in CAUSE_RANK and logged_since(e, booted)]
        # Name the cause, not the consequence: an OOM in a traceback beats the sigquit that followed it.
        fatal = max(reversed(recent), key=lambda e: CAUSE_RANK[e.kind]) if recent else None
    metrics = http.metrics
    info = http.server_info or {}
    states = info.get("internal_states") or [{}]
    first = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    gen = metrics.get("sglang:gen_throughput", first.get("last_gen_throughput"))
    accept = metrics.get("sglang:spec_accept_length", first.get("avg_spec_accept_length"))
    running = metrics.get("sglang:num_running_reqs")
    queue = metrics.get("sglang:num_queue_reqs")
    newest = log.series[-1] if log is not None and log.series else None
    if newest is not None and now_s - newest.t_s <= DECODE_FRESH_S:
        # The newest decode line is the server's own word of a moment ago: it beats a gauge
        # scraped some seconds earlier (and the status line agrees with the log beside it).
        gen = newest.gen_tokens_per_s if newest.gen_tokens_per_s is not None else gen
        running = float(newest.running) if newest.running is not None else running
        queue = float(newest.queue) if newest.queue is not None else queue
        accept = newest.accept_len if newest.accept_len is not None else accept
    elif log and log.last_decode:
        gen = gen if gen is not None else log.last_decode.gen_tokens_per_s
        accept = accept if accept else log.last_decode.accept_len

    def status(s: str, reason: str) -> ServerStatus:
        return ServerStatus(s, reason, unit, unit_state, main_pid, phase, http, gen, accept or None, running,
                            queue_reqs=queue, unit_failing=unit_failing)

    if unit_failing and not http.server_info:  # crash-looping: dead now, whatever systemd does next
        return status("dead", f"unit {unit_failing}" + (f": {fatal.message[:120]}" if fatal else ""))
    if unit_state in ("failed", "inactive", "deactivating") and not http.server_info:
        why = f"unit {unit_state}"
        if fatal:
            why += f": {fatal.message[:120]}"
        return status("dead", why)
    if fatal and (http.health_ok is not True):
        return status("dead" if unit_state != "active" else "degraded", f"{fatal.kind}: {fatal.message[:120]}")
    if http.server_info is None:
        if unit_state == "active" or unit_state == "activating":
            if phase == "ready":  # past the ready line: never an earlier boot phase
                return status("starting", "warm-up: the ready line is in, HTTP not answering yet")
            return status("starting", PHASE_WORDS.get(phase or "", phase or "process up, no HTTP yet"))
        return status("unknown", http.server_info_error or "no answer from the server")
    ready_at = ready_line_at(log)
    if http.health_ok is False and phase == "ready" and ready_at is not None and http.health_at_s is not None \
            and http.health_at_s < ready_at:
        # SGLang writes its ready line once its warm-up request has been served (its status is up
        # then, research/sglang_logs_metrics.md): a refusal answered before the line is the boot's, not
        # the warm-up after it (the plan's clock ended at the line while this said "warm-up", 503).
        # Ready is said only once a generation answered: the source asks again at once.
        return status("starting", f"ready line in: /health_generate asked again (its last answer, "
                                  f"{http.health_error or 'failed'}, came before the line)")
    if http.health_ok is False:
        if phase not in ("ready", None):
            return status("starting", PHASE_WORDS.get(phase or "", "warming up"))
        failing_for = None if http.health_failing_since_s is None else now_s - http.health_failing_since_s
        if phase == "ready" and http.health_ever_ok is False and (failing_for is None or failing_for < WARMUP_GRACE_S):
            # The ready line, then a 503 while SGLang warms up: a boot step, not a fault.
            return status("starting", f"warm-up: the ready line is in, /health_generate not answering yet "
                                      f"({http.health_error or 'no token within 20 s'})")
        return status("degraded", f"/health_generate failed: {http.health_error or 'no token within 20 s'}")
    if http.health_ok is None and phase != "ready" and info.get("status") != "ready":
        return status("starting", PHASE_WORDS.get(phase or "", "warming up"))
    if http.health_ok:
        return status("ready", "serving: /health_generate answered" if http.health_via == "/health_generate"
                      else f"serving: {http.health_via}")
    return status("ready", "serving")


def ready_line_at(log: LogSummary | None) -> float | None:
    """When this boot's ready line was written (the host's time of it), None: not in the log. A line
    stamped in whole seconds (SGLang's default) may have been written up to a second later."""
    step = next((b for b in reversed(log.boot) if b.phase == "ready"), None) if log is not None else None
    at = step.at_s if step is not None else None
    if at is None:
        return None
    return at + 1.0 if float(at).is_integer() else at


def parse_prometheus(text: str, wanted: tuple[str, ...]) -> dict[str, float]:
    """The first sample of each wanted metric (labels ignored), from Prometheus text."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in wanted and name not in out:
            try:
                value = float(line.rsplit(" ", 1)[-1])
            except ValueError:
                continue
            if math.isfinite(value):  # NaN or +Inf is no reading: the metric stays unknown, not "nan tok/s"
                out[name] = value
    return out
