"""The GPU source: three paths, chosen automatically, named in every GpuStatus.

1. `nvml`: the NVML sampler (`nvml_sampler.py`) started once with the host's python3 over an SSH
   stream, one JSON line per sample; locally, pynvml in-process on a worker thread.
2. `nvidia-smi-stream`: one long-running `nvidia-smi --query-gpu=... -lms N`, plus
   `--query-compute-apps` every few seconds through the persistent shell for the processes.
3. `nvidia-smi`: one-shot queries each interval, the last resort.

A path that cannot work on this host (no pynvml, no driver, no nvidia-smi) is skipped with its
reason; a path that breaks because the connection dropped is retried after a backoff.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from console.host.backoff import Backoff
from console.host.parsers import ParseError, split_sections
from console.host.parsers.docker import container_id_from_cgroup
from console.host.parsers.nvidia_smi import (
    attach_processes,
    parse_compute_apps,
    parse_gpu_csv,
    parse_gpu_line,
    query_apps_command,
    query_gpu_command,
)
from console.host.parsers.nvml import gpus_from_sample, merge_sample, parse_sampler_line
from console.host.sources import nvml_sampler
from console.host.sources.base import describe_error
from console.host.transport.base import LineStream, Transport, quote
from console.model import GpuDevice, GpuStatus, Reading
from console.sanitize import clean_line
from console.units import seconds

SAMPLER_SOURCE = (Path(__file__).parent / "nvml_sampler.py").read_text()
PATHS = ("nvml", "nvidia-smi-stream", "nvidia-smi")


class PathUnavailable(Exception):
    """This path cannot work on this host (not a passing failure)."""


class PathHung(PathUnavailable):
    """The path's tool stopped answering (a wedged driver)."""


STALL_S = 15.0
# nvidia-smi's process list (the stream's paths ask for it apart) is asked again whenever a GPU's
# memory moved since it was last asked (a process that starts, grows or leaves moves it), and at
# least this often on GPUs whose memory is still: every 5 s cost the host an nvidia-smi run (20-40
# ms of its CPU on an H200 host) and the console a round-trip, on a host where nothing moves.
APPS_STILL_EVERY_S = 30.0
MAX_PROBLEMS = 20  # a stream silent this long is hung (a wedged driver): give up on that path


async def _lines(stream: LineStream, stall_s: float) -> AsyncIterator[bytes]:
    """The stream's lines; a stream silent for `stall_s` is hung: the next path takes over."""
    it = stream.__aiter__()
    while True:
        try:
            raw = await asyncio.wait_for(it.__anext__(), stall_s)
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            raise PathHung(f"no sample within {seconds(stall_s)}: hung (driver or tool not answering)") from None
        yield raw


def _clean_gpu(gpu: GpuDevice) -> GpuDevice:
    """A GPU's strings without terminal escapes: a process name is chosen by whoever starts a
    CUDA process on the host (`ESC ] 52` in it wrote the operator's clipboard; issue 21, item 1)."""
    procs = tuple(replace(p, name=clean_line(p.name)) if p.name != clean_line(p.name) else p
                  for p in gpu.processes)
    name, uuid = clean_line(gpu.name), clean_line(gpu.uuid) if gpu.uuid else gpu.uuid
    error = clean_line(gpu.error) if gpu.error else gpu.error
    if procs == gpu.processes and (name, uuid, error) == (gpu.name, gpu.uuid, gpu.error):
        return gpu
    return replace(gpu, name=name, uuid=uuid, error=error, processes=procs)


class GpuSource:
    name = "gpu"

    def __init__(self, transport: Transport, *, local: bool, interval_s: float = 1.0,
                 history: int = 60, apps_every_s: float = 5.0) -> None:
        self.transport = transport
        self.local = local
        self.interval_s = interval_s
        self.apps_every_s = apps_every_s
        self.unavailable: dict[str, str] = {}
        self.reading: Reading[GpuStatus] = Reading(self.name)
        self.sample_cost_us: deque[float] = deque(maxlen=100)
        self.backoff = Backoff(initial_s=interval_s)
        self._stall_s = max(STALL_S, 5 * interval_s)
        self.oneshot_timeout_s = 15.0
        # pid -> container name (None: not in a container), read once per new pid (issue 26)
        self._containers: dict[int, str | None] = {}
        # A pid whose container could not be named (docker ps did not list it yet, the lookup
        # failed) is looked up again after this many seconds, not shown by its id for good.
        self.container_retry_s = 10.0
        self._container_retry_at: dict[int, float] = {}
        self.apps_asked = 0  # nvidia-smi process lists asked (tests read it)
        self._container_task: asyncio.Task[None] | None = None

    # -- assembling readings -------------------------------------------------------------
    def _status(self, path: str, gpus: tuple[GpuDevice, ...], problems: tuple[str, ...],
                driver: str | None) -> Reading[GpuStatus]:
        # History is kept per GPU by the host's state (console.core.state.GpuTracker), not here.
        skipped = tuple(f"{p}: {why}" for p, why in self.unavailable.items())
        gpus = self._with_containers(tuple(_clean_gpu(g) for g in gpus))
        problems = tuple(clean_line(p) for p in problems)
        status = GpuStatus(source=path, gpus=gpus, problems=skipped + problems,
                           driver=clean_line(driver) if driver else driver,
                           sampled_at_s=time.time())
        self.reading = Reading(self.name, status, time.time())
        return self.reading

    def _with_containers(self, gpus: tuple[GpuDevice, ...]) -> tuple[GpuDevice, ...]:
        """Name the container of each GPU process (from /proc/PID/cgroup and `docker ps`), as far
        as it is known; unknown pids are looked up in the background, once."""
        pids = {p.pid for g in gpus for p in g.processes}
        now = time.monotonic()
        new = sorted(pid for pid in pids if pid > 0 and (
            pid not in self._containers or self._container_retry_at.get(pid, now + 1) <= now))
        if new and (self._container_task is None or self._container_task.done()):
            try:
                self._container_task = asyncio.get_running_loop().create_task(self._lookup_containers(new))
            except RuntimeError:  # no loop (a test assembling readings by hand)
                pass
        if not any(self._containers.get(pid) for pid in pids):
            return gpus
        return tuple(replace(g, processes=tuple(replace(p, container=self._containers.get(p.pid)) for p in g.processes))
                     for g in gpus)

    async def _lookup_containers(self, pids: list[int]) -> None:
        script = ("for p in " + " ".join(str(int(p)) for p in pids) + "; do echo \"@@pid$p\"; "
                  "cat \"/proc/$p/cgroup\" 2>/dev/null; done; echo @@names; "
                  "command -v docker >/dev/null 2>&1 && "
                  "docker ps --no-trunc --format '{{.ID}} {{.Names}}' 2>/dev/null; true")
        try:
            result = await self.transport.run(script, timeout=10)
        except Exception:  # noqa: BLE001 - which container holds a process is a nice-to-have
            for pid in pids:
                self._containers.setdefault(pid, None)
                self._container_retry_at[pid] = time.monotonic() + self.container_retry_s
            return
        sections = split_sections(result.text)
        names = dict(line.split(" ", 1) for line in sections.get("names", "").splitlines() if " " in line)
        for pid in pids:
            cid = container_id_from_cgroup(sections.get(f"pid{pid}", ""))
            self._containers[pid] = names.get(cid, cid[:12]) if cid else None
            if cid and cid not in names:  # a container docker ps did not list (yet): its id for now
                self._container_retry_at[pid] = time.monotonic() + self.container_retry_s
            else:
                self._container_retry_at.pop(pid, None)
        while len(self._container_retry_at) > 4096:
            self._container_retry_at.pop(next(iter(self._container_retry_at)))
        while len(self._containers) > 4096:
            self._containers.pop(next(iter(self._containers)))

    def _error(self, message: str) -> Reading[GpuStatus]:
        self.reading = replace(self.reading, error=message, error_at_s=time.time())
        return self.reading

    # -- the loop ------------------------------------------------------------------------
    async def readings(self) -> AsyncIterator[Reading[GpuStatus]]:
        while True:
            path = next((p for p in PATHS if p not in self.unavailable), None)
            if path is None:
                reasons = "; ".join(f"{p}: {why}" for p, why in self.unavailable.items())
                yield self._error(f"no way to read the GPUs: {reasons}")
                await self.backoff.sleep(self.backoff.cap_s)
                self.unavailable.clear()
                continue
            got_data = False
            try:
                async for reading in self._run_path(path):
                    got_data = True
                    self.backoff.reset()
                    yield reading
            except PathUnavailable as exc:
                self.unavailable[path] = str(exc)
                if isinstance(exc, PathHung):  # say so now: the next path may take a while too
                    yield self._error(f"{path}: {exc}")
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a source never raises
                yield self._error(f"{path}: {describe_error(exc)}")
            else:
                if not got_data:
                    yield self._error(f"{path}: stream ended without data")
            await self.backoff.failed()

    def _run_path(self, path: str) -> AsyncIterator[Reading[GpuStatus]]:
        if path == "nvml":
            return self._nvml_local() if self.local else self._nvml_remote()
        if path == "nvidia-smi-stream":
            return self._smi_stream()
        return self._smi_oneshot()

    async def first_reading(self, timeout: float = 15.0) -> Reading[GpuStatus]:
        """One poll for `snapshot --json`: the first reading of the path the app would use."""
        async def first() -> Reading[GpuStatus]:
            async for reading in self.readings():
                if reading.data is not None or reading.error:
                    return reading
            return self.reading

        try:
            return await asyncio.wait_for(first(), timeout)
        except asyncio.TimeoutError:
            return self._error(f"no GPU sample within {seconds(timeout)}")

    # -- path 1: NVML --------------------------------------------------------------------
    async def _nvml_local(self) -> AsyncIterator[Reading[GpuStatus]]:
        try:
            pynvml, handles, driver = await asyncio.to_thread(nvml_sampler.open_nvml)
        except ImportError as exc:
            raise PathUnavailable(f"pynvml is not importable: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - NVMLError_* when there is no driver
            raise PathUnavailable(f"NVML did not start: {exc}") from None
        sampler = nvml_sampler.Sampler(pynvml, handles)
        while True:
            started = time.perf_counter()
            record = await asyncio.to_thread(sampler.sample)
            self.sample_cost_us.append((time.perf_counter() - started) * 1e6)
            gpus, problems = gpus_from_sample(record)
            yield self._status("nvml", gpus, problems, driver)
            await asyncio.sleep(max(0.0, self.interval_s - (time.perf_counter() - started)))

    async def _nvml_remote(self) -> AsyncIterator[Reading[GpuStatus]]:
        script = f"exec python3 -u -c {quote(SAMPLER_SOURCE)} {self.interval_s:g}"
        stream = await self.transport.stream(script)
        driver: str | None = None
        known: dict[int, dict[str, Any]] = {}  # each GPU as last sent (the sampler sends changes)
        try:
            async for raw in _lines(stream, self._stall_s):
                try:
                    record = parse_sampler_line(raw.decode("utf-8", "replace"))
                except ParseError:
                    continue  # a stray line (a warning from python3) is not a sample
                if "fatal" in record:
                    raise PathUnavailable(str(record["fatal"]))
                if "driver" in record and "gpus" not in record:
                    driver = str(record["driver"])
                    continue
                if isinstance(record.get("cost_us"), (int, float)):
                    self.sample_cost_us.append(float(record["cost_us"]))
                gpus, problems = gpus_from_sample(merge_sample(known, record))
                yield self._status("nvml", gpus, problems, driver)
            if driver is None:
                reason = stream.stderr_tail.splitlines()[-1:] or [f"exit {stream.exit_status}"]
                if stream.exit_status == 127 or "not found" in reason[0]:
                    raise PathUnavailable(f"python3 not found on the host: {reason[0]}")
                if stream.exit_status is not None:
                    raise PathUnavailable(f"sampler exited: {reason[0]}")
        finally:
            await stream.close()

    # -- path 2: nvidia-smi -lms -----------------------------------------------------------
    async def _smi_stream(self) -> AsyncIterator[Reading[GpuStatus]]:
        interval_ms = max(100, int(self.interval_s * 1000))
        stream = await self.transport.stream("exec " + query_gpu_command(interval_ms))
        apps: dict[str, Any] = {"by_uuid": {}, "problems": (), "at": None, "memory": None}
        batch: list[GpuDevice] = []
        problems: list[str] = []
        got_any = False
        last_row = time.monotonic()
        try:
            async for raw in _lines(stream, self._stall_s):
                line = raw.decode("utf-8", "replace").strip()
                if not line:
                    continue
                gpu = parse_gpu_line(line)
                if gpu is None:
                    if "not found" in line or "NVIDIA-SMI has failed" in line:
                        raise PathUnavailable(line[:200])
                    problems = [*problems[-(MAX_PROBLEMS - 1):], line[:200]]  # a flood stays bounded
                    if time.monotonic() - last_row > self._stall_s:
                        raise PathHung(f"no GPU rows in {seconds(self._stall_s)} of output: {line[:120]}")
                    continue
                last_row = time.monotonic()
                if batch and gpu.index <= batch[-1].index:
                    got_any = True
                    yield await self._emit_smi("nvidia-smi-stream", tuple(batch), problems, apps)
                    batch, problems = [], []
                batch.append(gpu)
            if batch:
                got_any = True
                yield await self._emit_smi("nvidia-smi-stream", tuple(batch), problems, apps)
            if not got_any:
                tail = stream.stderr_tail or (problems[-1] if problems else "")
                if stream.exit_status not in (None, 0) or "not found" in tail:
                    raise PathUnavailable(tail.splitlines()[-1] if tail else f"exit {stream.exit_status}")
        finally:
            await stream.close()

    async def _emit_smi(self, path: str, gpus: tuple[GpuDevice, ...], problems: list[str],
                        apps: dict[str, Any]) -> Reading[GpuStatus]:
        memory = tuple((g.index, g.memory_used_mib) for g in gpus)
        since = None if apps["at"] is None else time.monotonic() - apps["at"]
        if since is None or since >= APPS_STILL_EVERY_S or (memory != apps["memory"] and since >= self.apps_every_s):
            apps["at"], apps["memory"] = time.monotonic(), memory
            self.apps_asked += 1
            try:
                result = await self.transport.run(query_apps_command(), timeout=10)
                apps["by_uuid"], apps["problems"] = parse_compute_apps(result.text)
            except Exception as exc:  # noqa: BLE001 - processes are a nice-to-have; memory is not
                apps["problems"] = (f"processes: {describe_error(exc)}",)
        return self._status(path, attach_processes(gpus, apps["by_uuid"]),
                            tuple(problems) + tuple(apps["problems"]), None)

    # -- path 3: one-shot ----------------------------------------------------------------
    async def _smi_oneshot(self) -> AsyncIterator[Reading[GpuStatus]]:
        script = f"{query_gpu_command()}; echo @@apps; {query_apps_command()} 2>/dev/null"
        while True:
            started = time.monotonic()
            result = await self.transport.run(script, timeout=self.oneshot_timeout_s)
            sections = split_sections("@@gpus\n" + result.text)
            parsed = parse_gpu_csv(sections.get("gpus", ""))
            if not parsed.gpus:
                detail = (result.error_text or sections.get("gpus", "")).strip().splitlines()
                message = detail[-1] if detail else f"exit {result.exit_status}"
                if result.exit_status == 127 or "not found" in message:
                    raise PathUnavailable(f"nvidia-smi not found: {message}")
                yield self._error(f"nvidia-smi: {message}")
            else:
                by_uuid, app_problems = parse_compute_apps(sections.get("apps", ""))
                yield self._status("nvidia-smi", attach_processes(parsed.gpus, by_uuid),
                                   parsed.problems + app_problems, None)
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))
