"""The server source: the unit's state through the shell, /server_info, /metrics and /health
through the SSH port forward every few seconds, and /health_generate only when the cheap signals
do not settle it (issue 22): until this process first answers it (the boot and warm-up), and
after that only when /health fails, or requests run with no decode line in the log for a while;
then at most every 25 s (its own timeout is 20 s: more often would stack probes).

What the console costs the server (README): per poll (5 s) three small HTTP GETs (/server_info,
/metrics, /health) and one `systemctl show`; a real generation (/health_generate, one token)
only while the server boots or when /health or the log say something is wrong."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import httpx

from console.domain.analysis.log_state import LogTracker
from console.domain.analysis.server_status import HttpFacts, ServerStatus, combine, parse_prometheus, ready_line_at
from console.host.parsers.systemd import unit_is_failing
from console.redact import redact_json
from console.sanitize import clean_json
from console.host.sources.base import PolledSource, describe_error
from console.host.transport.base import Transport, quote

METRICS = ("sglang:gen_throughput", "sglang:spec_accept_length", "sglang:num_running_reqs",
           "sglang:num_queue_reqs", "sglang:token_usage", "sglang:generation_tokens_total")
HEALTH_EVERY_S = 25.0
DECODE_QUIET_S = 60.0  # requests running and no decode line this long: ask /health_generate


class ServerWatcher:
    def __init__(self, transport: Transport, unit: str | None, port: int, log: LogTracker | None,
                 container: str | None = None) -> None:
        self.transport = transport
        self.unit = unit
        # A container has no unit: its process is `docker inspect`'s State.Pid. A new container behind
        # the port is a new process, whose health is not the old one's (the driven Docker demo called
        # the new server ready on the old container's answers, and its benchmark got 503 "starting").
        self.container = container
        self.port = port
        self.moved_from_port: int | None = None  # issue 24: the beside path moved the server (move_to)
        self.log = log
        self._health_task: asyncio.Task[None] | None = None
        self._health: tuple[bool | None, float | None, str | None] = (None, None, None)
        self._ever_ok = False  # /health_generate answered for this process
        self._failing_since: float | None = None
        self.generate_probes = 0  # real generations asked of the server (tests, the README's cost)
        self.metrics_enabled: bool | None = None
        self._pid: int | None = None
        self._client: httpx.AsyncClient | None = None
        self._client_base: str | None = None

    def _http(self, base: str) -> httpx.AsyncClient:
        """One client per forwarded address, kept between polls (a new one costs a connection)."""
        if self._client is None or self._client_base != base:
            if self._client is not None:
                asyncio.ensure_future(self._client.aclose())
            self._client, self._client_base = httpx.AsyncClient(base_url=base, timeout=3.0), base
        return self._client

    async def _unit_state(self) -> tuple[str | None, int | None]:
        if not self.unit and self.container:
            r = await self.transport.run("docker inspect --type container -f '{{.State.Pid}}' -- "
                                         f"{quote(self.container)}", timeout=10)
            pid = r.text.strip()
            return None, (int(pid) if pid.isdigit() and int(pid) > 0 else None)
        if not self.unit:
            return None, None
        r = await self.transport.run("systemctl show --no-pager -p ActiveState,SubState,MainPID,NRestarts,Result,"
                                     f"ExecMainStatus -- {quote(self.unit)}", timeout=10)
        props = dict(line.split("=", 1) for line in r.text.splitlines() if "=" in line)
        # A crash-looping unit is never `failed` (activating / auto-restart, NRestarts growing):
        # console/host/parsers/systemd.py's one rule names it.
        self.unit_failing = unit_is_failing(props, getattr(self, "_last_show", None))
        self._last_show = props
        pid = props.get("MainPID", "0")
        return props.get("ActiveState"), (int(pid) if pid.isdigit() and int(pid) > 0 else None)

    async def _probe_health(self, base: str) -> None:
        try:
            async with httpx.AsyncClient(base_url=base, timeout=22.0) as client:
                r = await client.get("/health_generate")
            ok = r.status_code == 200
            self._health = (ok, time.time(), None if ok else f"HTTP {r.status_code}")
        except httpx.HTTPError as exc:
            self._health = (False, time.time(), None if isinstance(exc, httpx.TimeoutException)
                            else describe_error(exc))
        ok = self._health[0]
        self._ever_ok = self._ever_ok or bool(ok)
        if ok:
            self._failing_since = None
        elif self._failing_since is None:
            self._failing_since = self._health[1]

    def _generate_needed(self, cheap_ok: bool | None, metrics: dict[str, float]) -> bool:
        """Whether a real generation is worth asking for: not while /health and the log agree."""
        if not self._ever_ok or self._health[0] is False or cheap_ok is False:
            return True
        running = metrics.get("sglang:num_running_reqs") or 0
        summary = self.log.summary() if self.log else None
        last_line = summary.last_line_at_s if summary else None
        return bool(running) and (last_line is None or time.time() - last_line > DECODE_QUIET_S)

    async def snapshot_once(self) -> ServerStatus:
        """One status for `snapshot --json`, waiting (bounded) for the /health_generate probe."""
        return await _settle(self)

    async def poll(self) -> ServerStatus:
        unit_state, pid = await self._unit_state()
        if pid != self._pid:
            # Another process (a restart): what the old one answered says nothing about this one.
            self._pid, self._health, self.metrics_enabled = pid, (None, None, None), None
            self._ever_ok, self._failing_since = False, None
        cheap_ok: bool | None = None
        info = info_error = None
        metrics: dict[str, float] = {}
        try:
            base = await self.transport.http_base_url(self.port)
            client = self._http(base)
            r = await client.get("/server_info")
            if r.status_code == 404:
                r = await client.get("/get_server_info")
            if r.status_code == 200:
                data = redact_json(clean_json(r.json()))  # escapes and secrets out before anything sees it
                info = data if isinstance(data, dict) else None
            else:
                info_error = f"/server_info: HTTP {r.status_code}"
            if info is not None and self.metrics_enabled is not False:
                m = await client.get("/metrics")
                self.metrics_enabled = m.status_code == 200
                if m.status_code == 200:
                    metrics = parse_prometheus(m.text, METRICS)
            if info is not None and self._ever_ok:
                h = await client.get("/health")  # no generation: cheap enough for every poll
                cheap_ok = h.status_code == 200
            if info is not None and (self._health_task is None or self._health_task.done()) and \
                    self._generate_needed(cheap_ok, metrics):
                ok_before, last, _ = self._health
                # 25 s after an answer or a timeout; a quick refusal (503 while warming up) sooner, and
                # at once when the ready line came after it (that refusal was the boot's).
                every = HEALTH_EVERY_S if ok_before is not False or self._health[2] is None else 5.0
                ready_at = ready_line_at(self.log.summary() if self.log else None)
                if ok_before is False and last is not None and ready_at is not None and last < ready_at:
                    every = 0.0
                if last is None or time.time() - last >= every:
                    self.generate_probes += 1
                    self._health_task = asyncio.ensure_future(self._probe_health(base))
        except (httpx.HTTPError, ValueError) as exc:
            info_error = describe_error(exc)
        except Exception as exc:  # noqa: BLE001 - no forward (connection down): a state, not a crash
            info_error = describe_error(exc)
        ok, at, err = self._health
        via = "/health_generate"
        if ok and cheap_ok and at is not None and time.time() - at > HEALTH_EVERY_S:
            via, at = "/health and the log agree", time.time()  # no generation asked: the cheap signals stood in
        facts = HttpFacts(info, info_error, metrics, ok, at, err, self._ever_ok, self._failing_since, via)
        status = combine(self.unit, unit_state, pid, self.log.summary() if self.log else None, facts, time.time(),
                         unit_failing=getattr(self, "unit_failing", None))
        return replace(status, port=self.port, moved_from_port=self.moved_from_port)

    def move_to(self, port: int) -> None:
        """The server now answers on another port (issue 24: traffic moved to the beside server):
        every later poll asks there; what this process's /health_generate said is not the new one's."""
        if int(port) == self.port:
            return
        self.moved_from_port, self.port = self.port, int(port)
        self._health, self._ever_ok, self._failing_since, self._pid = (None, None, None), False, None, None


async def _settle(watcher: ServerWatcher, rounds: int = 3) -> ServerStatus:
    """Poll until a /health_generate answer is in (a server that came up between two polls gets
    its probe too), at most `rounds` probes."""
    status = await watcher.poll()
    for _ in range(rounds):
        if watcher._health_task is None:
            if status.http.health_ok is not None or status.http.server_info is None:
                return status
        else:
            await asyncio.wait({watcher._health_task}, timeout=22)
        status = await watcher.poll()
        if status.http.health_ok is not None:
            return status
    return status


QUIET_EVERY_S = 15.0  # nothing answers, no unit up, the log still: polled less
BOOTING_EVERY_S = 2.0  # booting (the log's boot lines, a unit activating): polled more
LOG_QUIET_S = 30.0  # a log with no line this long is still


def poll_every_s(status: ServerStatus, last_line_at_s: float | None, now_s: float, interval_s: float) -> float:
    """The server poll's cadence, following what changes: a host where nothing answers, no unit
    runs and the log is still is asked every 15 s (its log moving again wakes the poll at once); a
    booting server every 2 s (its ready moment is what the operator waits for); else `interval_s`."""
    answering = status.http.server_info is not None
    log_still = last_line_at_s is None or now_s - last_line_at_s > LOG_QUIET_S
    if status.status == "starting" or (not answering and not log_still and status.phase not in (None, "ready")):
        return min(BOOTING_EVERY_S, interval_s)  # a boot under way (by the unit, or by its log alone)
    unit_up = status.unit_state in ("active", "activating", "reloading", "deactivating")
    if not answering and not unit_up and status.main_pid is None and log_still:
        return max(QUIET_EVERY_S, interval_s)
    return interval_s


QUIET_AFTER_S = 60.0  # quiet this long before the poll slows: a unit just stopped (a swap) is watched closely


def server_source(watcher: ServerWatcher, interval_s: float = 5.0,
                  quiet_after_s: float = QUIET_AFTER_S) -> PolledSource[ServerStatus]:
    """The server polled at the cadence `poll_every_s` chooses, said in its readings' `detail`
    ("polled every 15s", when not the usual), and woken when the log moves again while slowed. The
    quiet cadence starts once the host has been quiet for `quiet_after_s`."""

    moved_at: list[float | None] = [None]  # the log's last live lines (a backlog is not the log moving)
    quiet_since: list[float | None] = [None]
    answered = [False]  # a server answered on this port since the console started

    async def poll() -> ServerStatus:
        status = await watcher.poll()
        now = time.time()
        answered[0] = answered[0] or status.http.server_info is not None
        every = poll_every_s(status, moved_at[0], now, interval_s)
        if every > interval_s:
            quiet_since[0] = quiet_since[0] if quiet_since[0] is not None else now
            # Only what could have just stopped is watched closely: a unit or a container (a swap),
            # or a server seen answering. A host with neither, where nothing ever answered, is
            # slowed from its first poll (issue 36: 6 polls in the quiet host's first 30 s, each a
            # forward channel and an HTTP client's connect; its log moving still wakes it at once).
            watched = bool(getattr(watcher, "unit", None) or getattr(watcher, "container", None)) or answered[0]
            if watched and now - quiet_since[0] < quiet_after_s:
                every = interval_s
        else:
            quiet_since[0] = None
        source.interval_s = every
        source.detail = f"polled every {every:g}s" if every != interval_s else None  # said on screen
        return status

    def log_moved() -> None:
        moved_at[0] = time.time()
        if source.interval_s > interval_s:
            source.wake()

    source: PolledSource[ServerStatus] = PolledSource("server", poll, interval_s, max_backoff_s=15.0)
    if watcher.log is not None:
        watcher.log.on_lines.append(log_moved)
    return source
