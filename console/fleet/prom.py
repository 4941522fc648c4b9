"""Prometheus in: the fleet read from an existing Prometheus through its HTTP query API (instant
PromQL queries over httpx), into one HostState per host, so the fleet screen is the same screen.

Two queries a cycle, whatever the fleet's size:

    {__name__=~"DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_FB_FREE|DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_POWER_USAGE", MATCH}
    {__name__=~"sglang:gen_throughput|sglang:num_running_reqs|sglang:num_queue_reqs|sglang:token_usage", MATCH}

Series are grouped by host: the first of the labels `Hostname` (dcgm-exporter's), `hostname`,
`host`, `node`, else `instance` without its port. A series that stops (Prometheus writes a
staleness marker when a target stops answering or stops exporting it) is marked stale on its
row, keeping its last values; a GPU whose series stop while its neighbours go on is lost. NaN
and ±Inf values, series with no host or no `gpu` label, an unreachable Prometheus and a query
that times out are each said on the row they concern, never a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from console.core.state import ConnectionChanged, HostInfo, HostState, ReadingChanged
from console.model import GpuDevice, GpuStatus, Reading
from console.transport.base import ConnectionState

HOST_LABELS = ("Hostname", "hostname", "host", "node")
DCGM = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE")
SGLANG = ("sglang:gen_throughput", "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage")
NO_HOST = "?no-host-label"
VIA = "via Prometheus"

_MATCHER = re.compile(r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*')


class PromQueryError(Exception):
    """A query that did not give a result: the message is one line (unreachable, timeout, …)."""


def check_url(url: str) -> str:
    if not re.match(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", url):
        raise PromQueryError(f"--prometheus {url!r}: expected http(s)://HOST[:PORT][/PATH]")
    return url.rstrip("/")


def check_match(text: str) -> str:
    """`job="gpu",dc=~"a|b"`: label matchers only (they go inside the selector's braces)."""
    rest = text.strip()
    if not rest:
        raise PromQueryError("--match: empty; expected label matchers such as job=\"gpu\"")
    parts: list[str] = []
    pos = 0
    while pos < len(rest):
        m = _MATCHER.match(rest, pos)
        if m is None:
            raise PromQueryError(f"--match {text!r}: not a list of label matchers like job=\"gpu\",dc=~\"a|b\"")
        parts.append(m.group(0).strip())
        pos = m.end()
        if pos < len(rest):
            if rest[pos] != ",":
                raise PromQueryError(f"--match {text!r}: matchers must be separated by commas")
            pos += 1
    return ",".join(parts)


def selector(names: tuple[str, ...], match: str | None) -> str:
    inner = f'__name__=~"{"|".join(re.escape(n) for n in names)}"'
    return "{" + inner + (f",{match}" if match else "") + "}"


# -- decoding ----------------------------------------------------------------------------------
class _Labels(msgspec.Struct):
    """The labels gpuconsole reads; any other label is skipped while decoding (a struct, not a
    dict: a 500-host answer of 18,000 series decodes three times faster)."""

    name: str = msgspec.field(name="__name__", default="?")
    gpu: str | None = None
    UUID: str | None = None  # noqa: N815 - dcgm-exporter's own label names
    modelName: str | None = None  # noqa: N815
    Hostname: str | None = None  # noqa: N815
    hostname: str | None = None
    host: str | None = None
    node: str | None = None
    instance: str | None = None
    model_name: str | None = None


class _Sample(msgspec.Struct):
    metric: _Labels
    value: tuple[float, str]


class _Data(msgspec.Struct):
    resultType: str  # noqa: N815 - Prometheus's own key
    result: list[_Sample]


class _Answer(msgspec.Struct):
    status: str
    data: _Data | None = None
    errorType: str | None = None  # noqa: N815
    error: str | None = None


_decoder = msgspec.json.Decoder(_Answer)


def decode_answer(body: bytes) -> list[_Sample]:
    try:
        answer = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise PromQueryError(f"not a Prometheus API answer: {str(exc)[:120]}") from None
    if answer.status != "success" or answer.data is None:
        raise PromQueryError(f"{answer.errorType or 'error'}: {(answer.error or 'no data')[:160]}")
    if answer.data.resultType != "vector":
        raise PromQueryError(f"expected a vector, got {answer.data.resultType}")
    return answer.data.result


def _clean(value: str | None) -> str | None:
    """A label value without terminal escapes (issue 21, item 1: labels are the exporters' text)."""
    from console.sanitize import clean_line

    return clean_line(value) if value else value


def host_of(labels: _Labels) -> str | None:
    from console.fleet.rows import host_label

    host = host_label(labels.Hostname or labels.hostname or labels.host or labels.node)  # issue 21, item 4
    if host:
        return host
    instance = labels.instance
    if instance:
        if instance.startswith("["):  # [::1]:9400
            return host_label(instance[1:].split("]", 1)[0])
        return host_label(instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance)
    return None


def _value(text: str) -> float | None:
    """The sample's value; None for NaN and ±Inf (said as a problem by the caller)."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


# -- grouping ----------------------------------------------------------------------------------
@dataclass
class HostSamples:
    """What one cycle's answers say about one host."""

    gpus: dict[str, dict[str, Any]] = field(default_factory=dict)  # gpu index -> metric -> value
    server: dict[str, float | None] = field(default_factory=dict)
    model: str | None = None
    problems: list[str] = field(default_factory=list)


def group_samples(dcgm: list[_Sample] | None, sglang: list[_Sample] | None) -> dict[str, HostSamples]:
    hosts: dict[str, HostSamples] = {}
    unlabelled = 0
    for sample in dcgm or ():
        labels = sample.metric
        name = labels.name
        host = host_of(labels)
        if host is None:
            unlabelled += 1
            continue
        entry = hosts.get(host)
        if entry is None:
            entry = hosts[host] = HostSamples()
        gpu = labels.gpu
        if gpu is None:
            entry.problems.append(f"{name} series without a gpu label")
            continue
        slot = entry.gpus.get(gpu)
        if slot is None:
            slot = entry.gpus[gpu] = {"uuid": _clean(labels.UUID), "model": _clean(labels.modelName)}
        value = _value(sample.value[1])
        if value is None:
            entry.problems.append(f"GPU {gpu} {name} is {sample.value[1]}")
        slot[name] = value
    for sample in sglang or ():
        labels = sample.metric
        name = labels.name
        host = host_of(labels)
        if host is None:
            unlabelled += 1
            continue
        entry = hosts.setdefault(host, HostSamples())
        value = _value(sample.value[1])
        if value is None:
            entry.problems.append(f"{name} is {sample.value[1]}")
        # Several ranks (tp_rank) export the same gauge: the first finite one stands for the server.
        if entry.server.get(name) is None:
            entry.server[name] = value
        entry.model = entry.model or _clean(labels.model_name)
    if unlabelled:
        hosts.setdefault(NO_HOST, HostSamples()).problems.append(
            f"{unlabelled} series without a host label ({', '.join(HOST_LABELS)} or instance)")
    return hosts


def gpu_status(samples: HostSamples, now: float) -> GpuStatus:
    gpus = []
    for index_text, values in sorted(samples.gpus.items(), key=lambda kv: (len(kv[0]), kv[0])):
        used, free = values.get("DCGM_FI_DEV_FB_USED"), values.get("DCGM_FI_DEV_FB_FREE")
        util, power = values.get("DCGM_FI_DEV_GPU_UTIL"), values.get("DCGM_FI_DEV_POWER_USAGE")
        try:
            index = int(index_text)
        except ValueError:
            index = -1
        gpus.append(GpuDevice(
            index=index, name=values.get("model") or "GPU", uuid=values.get("uuid"),
            memory_used_mib=int(used) if used is not None else None,
            memory_total_mib=int(used + free) if used is not None and free is not None else None,
            utilization_pct=int(round(util)) if util is not None else None,
            temperature_c=None, power_w=power, power_limit_w=None))
    # The problems (NaN values, missing labels) are the row's PromNotes, not repeated here.
    return GpuStatus("prometheus", tuple(gpus), (), None, now)


def server_status(samples: HostSamples) -> Any:
    from console.analysis.server_status import HttpFacts, ServerStatus

    metrics = {k: v for k, v in samples.server.items() if v is not None}
    info = {"served_model_name": samples.model} if samples.model else None
    return ServerStatus("up", "exporting sglang: metrics (Prometheus cannot tell its health)", None, None, None,
                        None, HttpFacts(info, None, metrics), samples.server.get("sglang:gen_throughput"),
                        None, samples.server.get("sglang:num_running_reqs"))


@dataclass(frozen=True, slots=True)
class PromNotes:
    """The Prometheus source's own notes on a host (NaN values, unlabelled series)."""

    problems: tuple[str, ...]


# -- the source --------------------------------------------------------------------------------
class PrometheusFleet:
    """Polls Prometheus every `interval_s` and keeps one HostState per host it has seen."""

    def __init__(self, url: str, *, match: str | None = None, interval_s: float = 5.0, timeout_s: float = 4.0,
                 config: Any = None, accept_new_host_key: bool = False, ssh_to_labels: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.base_url = check_url(url)
        self.match = check_match(match) if match else None
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.config = config
        self.accept_new_host_key = accept_new_host_key
        # A label is whatever an exporter says: SSH to it only with a profile of that name or the
        # operator's --ssh-to-labels (issue 21, item 4).
        self.ssh_to_labels = ssh_to_labels
        self.clock = clock
        self.states: dict[str, HostState] = {}
        self.on_new_hosts: Callable[[list[HostState]], None] | None = None
        self.cycles = 0
        self.cycle_times_s: list[float] = []  # the whole cycle: Prometheus's answer and ours
        self.query_times_s: list[float] = []  # waiting for Prometheus (its query, the transfer)
        self.last_error: str | None = None
        self._seen: dict[str, dict[str, bool]] = {}  # host -> {"gpu": bool, "server": bool} last cycle
        self._ssh: dict[str, Any] = {}
        self._client: Any = None

    # -- one cycle ---------------------------------------------------------------------------
    async def _query(self, promql: str) -> list[_Sample]:
        import httpx

        try:
            response = await self._client.get("/api/v1/query", params={
                "query": promql, "timeout": f"{self.timeout_s:g}s"})
        except httpx.TimeoutException:
            raise PromQueryError(f"no answer within {self.timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            raise PromQueryError(f"unreachable: {type(exc).__name__}: {str(exc)[:120] or 'no detail'}") from None
        if response.status_code not in (200, 400, 422, 503):
            raise PromQueryError(f"HTTP {response.status_code} from {self.base_url}")
        return decode_answer(response.content)

    async def poll_once(self) -> None:
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout_s + 1)
        started = time.perf_counter()
        now = self.clock()
        results = await asyncio.gather(self._query(selector(DCGM, self.match)),
                                       self._query(selector(SGLANG, self.match)), return_exceptions=True)
        self.query_times_s.append(time.perf_counter() - started)
        del self.query_times_s[:-200]
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not isinstance(error, PromQueryError):
                raise error
        dcgm = None if isinstance(results[0], BaseException) else results[0]
        sglang = None if isinstance(results[1], BaseException) else results[1]
        self.last_error = "; ".join(str(e) for e in errors) or None
        self.apply(group_samples(dcgm, sglang), now, dcgm_error=_message(results[0]), sglang_error=_message(results[1]))
        self.cycles += 1
        self.cycle_times_s.append(time.perf_counter() - started)
        del self.cycle_times_s[:-200]

    def _state(self, host: str, new: list[HostState]) -> HostState:
        state = self.states.get(host)
        if state is None:
            state = self.states[host] = HostState(host, label=host, clock=self.clock)
            state.apply(HostInfo(host, f"{host} (Prometheus)", missing=(
                ("download", "Prometheus has no download data: Enter opens SSH to the host"),
                ("service", "Prometheus has no unit files: Enter opens SSH to the host"),
                ("log", "Prometheus has no log: Enter opens SSH to the host")), read_only=True))
            new.append(state)
        return state

    def apply(self, grouped: dict[str, HostSamples], now: float, *, dcgm_error: str | None = None,
              sglang_error: str | None = None) -> None:
        """One cycle's answers into the states (also what a test or the benchmark calls)."""
        new: list[HostState] = []
        failed = dcgm_error is not None and sglang_error is not None
        for host, samples in grouped.items():
            state = self._state(host, new)
            seen = self._seen.setdefault(host, {})
            self._connection(state, None, now)
            if samples.gpus:
                state.apply(ReadingChanged(host, "gpu", Reading("gpu", gpu_status(samples, now), now)))
                seen["gpu"] = True
            if samples.server:
                state.apply(ReadingChanged(host, "server", Reading("server", server_status(samples), now)))
                seen["server"] = True
            notes = PromNotes(tuple(p for p in samples.problems))
            if notes.problems or state.data("prometheus") is not None:
                state.apply(ReadingChanged(host, "prometheus", Reading("prometheus", notes, now)))
        # What was there last cycle and is not now: stale (the last values stay, marked).
        for host, state in self.states.items():
            samples = grouped.get(host)
            for source, error in (("gpu", dcgm_error), ("server", sglang_error)):
                present = samples is not None and (bool(samples.gpus) if source == "gpu" else bool(samples.server))
                if present:
                    continue
                reading = state.reading(source)
                if reading is None or reading.data is None:
                    continue
                why = f"Prometheus query failed: {error}" if error else \
                    ("DCGM" if source == "gpu" else "sglang:") + " series stopped"
                if reading.error != why:
                    state.apply(ReadingChanged(host, source, Reading(source, reading.data, reading.ok_at_s, why, now)))
            if failed:
                self._connection(state, f"{dcgm_error}", now)
        if new and self.on_new_hosts is not None:
            self.on_new_hosts(new)

    def _connection(self, state: HostState, error: str | None, now: float) -> None:
        current = state.connection
        if error is None:
            if current is None or current.status != "connected":
                state.apply(ConnectionChanged(state.host, ConnectionState(state.host, "connected", now, VIA)))
        elif current is None or current.status == "connected" or current.detail != f"Prometheus: {error}":
            since = current.since_s if current is not None and current.status == "reconnecting" else now
            state.apply(ConnectionChanged(state.host, ConnectionState(state.host, "reconnecting", since,
                                                                      f"Prometheus: {error}")))

    async def run(self) -> None:
        """Poll until cancelled; a failing Prometheus is retried with backoff, said on every row."""
        from console.backoff import Backoff

        backoff = Backoff(initial_s=self.interval_s, cap_s=max(60.0, self.interval_s))
        try:
            while True:
                await self.poll_once()
                if self.last_error and not self.states:
                    self._no_hosts_yet(self.last_error)
                if self.last_error:
                    await backoff.failed()
                else:
                    backoff.reset()
                    await asyncio.sleep(self.interval_s)
        finally:
            await self.close_client()

    def _no_hosts_yet(self, error: str) -> None:
        """Prometheus never answered: one row says so (the screen must not just stay empty)."""
        host = f"?{self.base_url}"
        state = self._state(host, new := [])
        self._connection(state, error, self.clock())
        if new and self.on_new_hosts is not None:
            self.on_new_hosts(new)

    async def close_client(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None

    # -- drilling down over SSH ----------------------------------------------------------------
    def drill_down(self, key: str) -> tuple[HostState, Any, str | None] | None:
        """The host's SSH session (opened on first use): its panes give what Prometheus cannot
        (diff, log, download). The host is reached by the config profile of that name (or whose
        address it is), else by the name itself (~/.ssh/config applies)."""
        if key.startswith("?"):
            return (self.states[key], None, "this row is not a host: nothing to open over SSH") \
                if key in self.states else None
        if key in self._ssh:
            host = self._ssh[key]
            return host.state, host.runner, None
        from console.config import HostProfile
        from console.fleet.hosts import Fleet

        profile = None
        if self.config is not None:
            profile = next((p for p in self.config.profiles.values() if key in (p.name, p.host)), None)
        note = None
        if profile is None:
            from console.fleet.rows import ssh_target

            if not self.ssh_to_labels or ssh_target(key) is None:
                why = ("not a host name" if ssh_target(key) is None else
                       "a Prometheus label is not a host to SSH to without your say: add a profile of that "
                       "name to the config, or run with --ssh-to-labels")
                return (self.states[key], None, f"No profile named {key!r}: {why}") if key in self.states else None
            profile = HostProfile(name=key, host=key)
            note = (f"No profile named {key!r} in the config: trying ssh {key} (as ~/.ssh/config resolves it). "
                    "Add a profile of that name if the host is reached another way.")
        fleet = Fleet([profile], accept_new_host_key=self.accept_new_host_key)
        host = next(iter(fleet.hosts.values()))
        self._ssh[key] = host
        host.fleet = fleet
        asyncio.ensure_future(fleet.start())
        return host.state, host.runner, note

    async def close(self) -> None:
        await self.close_client()
        await asyncio.gather(*(h.fleet.close() for h in self._ssh.values()), return_exceptions=True)


def _message(result: Any) -> str | None:
    return str(result) if isinstance(result, BaseException) else None
