"""Prometheus in: the fleet read from an existing Prometheus through its HTTP query API (instant
PromQL queries over httpx), into one HostState per host, so the fleet screen is the same screen.

One query per metric, across every host, all at once, whatever the fleet's size:

    {__name__="DCGM_FI_DEV_FB_USED", MATCH}   … and the other three DCGM fields
    {__name__="sglang:gen_throughput", MATCH} … and the other three SGLang gauges

(Measured against Prometheus 2 on loopback, 500 hosts x 8 GPUs: one `__name__=~"A|B|C|D"`
selector over the four DCGM fields took 460-680 ms to answer; each exact-name selector 30-80 ms,
and the eight run side by side.) Each answer is decoded once, straight into structs.

Series are grouped by host: the first of the labels `Hostname` (dcgm-exporter's), `hostname`,
`host`, `node`, else `instance` without its port. A series that stops (Prometheus writes a
staleness marker when a target stops answering or stops exporting it) is marked stale on its
row, keeping its last values; a GPU whose series stop while its neighbours go on is lost. NaN
and ±Inf values, values out of any plausible range (1e308 MiB), series with no host or no `gpu`
label, an unreachable Prometheus, a query that times out, an answer that trickles in (one
deadline for the whole poll, not per read) and an answer past `MAX_ANSWER_BYTES` are each said
on the row they concern, never a crash.
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

import httpx
import msgspec

from console.config import HostProfile
from console.core.state import ConnectionChanged, HostInfo, HostState, ReadingChanged
from console.domain.analysis.server_status import HttpFacts, ServerStatus
from console.domain.fleet.hosts import Fleet
from console.domain.fleet.rows import host_label, ssh_target
from console.host.backoff import Backoff
from console.host.transport.base import ConnectionState
from console.model import GpuDevice, GpuStatus, Reading
from console.sanitize import clean_line
from console.units import seconds

HOST_LABELS = ("Hostname", "hostname", "host", "node")
DCGM = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE")
SGLANG = ("sglang:gen_throughput", "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage")
NO_HOST = "?no-host-label"
# No DCGM field or SGLang gauge is anywhere near this (1e12 MiB is an exabyte); past it a value is
# said as out of range, so that sums and int() of it stay finite (1e308 + 1e308 is inf).
MAX_ABS_VALUE = 1e12
# 500 hosts x 8 GPUs answer ~0.9 MB per metric; 64 MiB is a fleet 35 times that.
MAX_ANSWER_BYTES = 64 << 20
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


def metric_selector(name: str, match: str | None) -> str:
    """One metric by its exact name: Prometheus answers this far faster than a name regex."""
    return "{" + f'__name__="{name}"' + (f",{match}" if match else "") + "}"


# The GPU's identity (UUID, model) comes with this field; the other DCGM fields are asked for
# with only the labels that place them (host and gpu): 500 hosts x 8 GPUs answer 415 KB a field
# instead of 880 KB, and that is what we decode. Several series for one host's GPU (two
# exporters) read as their maximum.
DCGM_IDENTITY = "DCGM_FI_DEV_FB_USED"
PLACE_LABELS = (*HOST_LABELS, "instance", "gpu")


def metric_query(name: str, match: str | None) -> str:
    if name in DCGM and name != DCGM_IDENTITY:
        return f"max by ({','.join(PLACE_LABELS)}) ({metric_selector(name, match)})"
    return metric_selector(name, match)


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
    return clean_line(value) if value else value


def host_of(labels: _Labels) -> str | None:
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
    """The sample's value; None for NaN, ±Inf and values out of range (said by the caller)."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) and -MAX_ABS_VALUE <= number <= MAX_ABS_VALUE else None


def _shown(text: str) -> str:
    """A value as the server sent it, short (it goes into the row's notes)."""
    return text if len(text) <= 24 else text[:21] + "..."


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
    value_of = _value
    # The raw label, cleaned once per distinct value: the key is always `host_of`'s (a label with a
    # line break was a host of its own, apart from its server's series, and the fleet screen
    # crashed: issue 34, item 9); 18,000 series of 500 hosts clean 500 strings.
    keys: dict[str, str | None] = {}
    for sample in dcgm or ():
        labels = sample.metric
        name = labels.name
        raw = labels.Hostname or labels.hostname or labels.host or labels.node
        host = keys.get(raw, "") if raw else None
        if host == "":
            host = keys[raw] = host_label(raw)  # type: ignore[index]
        if host is None:  # no label, or one that cleans to nothing: the instance
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
        elif labels.UUID is not None and slot["uuid"] is None:
            # The identity field's labels, arrived after a field asked for without them.
            slot["uuid"], slot["model"] = _clean(labels.UUID), _clean(labels.modelName)
        text = sample.value[1]
        value = value_of(text)
        if value is None:
            entry.problems.append(f"GPU {gpu} {name} is {_shown(text)}")
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
            entry.problems.append(f"{name} is {_shown(sample.value[1])}")
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
    async def _query(self, promql: str, name: str | None = None) -> list[_Sample]:
        """One instant query, read in full within the poll's one deadline and `MAX_ANSWER_BYTES`;
        `name`: the metric's name, for an aggregation's answer (which has none)."""
        try:
            async with self._client.stream("GET", "/api/v1/query", params={
                    "query": promql, "timeout": f"{self.timeout_s:g}s"}) as response:
                if response.status_code not in (200, 400, 422, 503):
                    raise PromQueryError(f"HTTP {response.status_code} from {self.base_url}")
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
                    raise PromQueryError(_too_large())
                body = bytearray()
                async for chunk in response.aiter_bytes():  # decoded: the cap is on what we hold
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        raise PromQueryError(_too_large())
        except httpx.TimeoutException:
            raise PromQueryError(f"no answer within {seconds(self.timeout_s)}") from None
        except httpx.HTTPError as exc:
            raise PromQueryError(f"unreachable: {type(exc).__name__}: {str(exc)[:120] or 'no detail'}") from None
        samples = decode_answer(bytes(body))
        if name is not None:
            for sample in samples:
                sample.metric.name = name
        return samples

    async def _family(self, names: tuple[str, ...]) -> list[_Sample]:
        """The family's metrics, one query each, side by side; any one failing fails the family
        (half a GPU's fields would read as the others gone)."""
        answers = await asyncio.gather(*(self._query(metric_query(n, self.match), n) for n in names),
                                       return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        return [sample for answer in answers for sample in answer]  # type: ignore[union-attr]

    async def _within_deadline(self, names: tuple[str, ...]) -> list[_Sample]:
        # httpx's timeout is per read: a server sending a byte every 2 s would never trip it.
        try:
            return await asyncio.wait_for(self._family(names), self.timeout_s)
        except asyncio.TimeoutError:
            raise PromQueryError(f"no answer within {seconds(self.timeout_s)} (for the whole answer)") from None

    async def poll_once(self) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout_s + 1,
                                             headers={"Accept-Encoding": "identity"},
                                             limits=httpx.Limits(max_connections=len(DCGM) + len(SGLANG)))
        started = time.perf_counter()
        now = self.clock()
        results = await asyncio.gather(self._within_deadline(DCGM), self._within_deadline(SGLANG),
                                       return_exceptions=True)
        self.query_times_s.append(time.perf_counter() - started)
        del self.query_times_s[:-200]
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not isinstance(error, PromQueryError):
                raise error
        dcgm = None if isinstance(results[0], BaseException) else results[0]
        sglang = None if isinstance(results[1], BaseException) else results[1]
        self.last_error = "; ".join(dict.fromkeys(str(e) for e in errors)) or None
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

        profile = None
        if self.config is not None:
            profile = next((p for p in self.config.profiles.values() if key in (p.name, p.host)), None)
        note = None
        if profile is None:
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


def _too_large() -> str:
    return f"answer larger than {MAX_ANSWER_BYTES >> 20} MiB: refused (narrow it with --match)"


def _message(result: Any) -> str | None:
    return str(result) if isinstance(result, BaseException) else None
