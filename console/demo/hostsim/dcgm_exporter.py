"""A simulated NVIDIA dcgm-exporter: `GET /metrics` on 127.0.0.1 in dcgm-exporter's own text
format (names, HELP strings, label set and order as recorded from the real exporter; see
tests/data/PROVENANCE.md), with the simulated host's GPUs from the story clock.

Only the fields gpuconsole reads are served (FB used/free, GPU util, power, temperature); a real
exporter serves more, which a reader must ignore anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from console.demo.hostsim import story

DRIVER = "580.95.05"

# (field, type, help) exactly as in dcgm-exporter's etc/default-counters.csv
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
)


def _value(field: str, gpu: story.SimGpu) -> str:
    if field == "DCGM_FI_DEV_GPU_TEMP":
        return str(gpu.temp_c)
    if field == "DCGM_FI_DEV_POWER_USAGE":
        return f"{gpu.power_w:.6f}"
    if field == "DCGM_FI_DEV_GPU_UTIL":
        return str(gpu.util_pct)
    if field == "DCGM_FI_DEV_FB_FREE":
        return str(story.GPU_TOTAL_MIB - gpu.used_mib)
    return str(gpu.used_mib)


def dcgm_metrics(gpus: Sequence[story.SimGpu], hostname: str) -> str:
    """The exporter's page for these GPUs: a HELP and TYPE line per field, then one sample per GPU
    with the labels gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION."""
    lines: list[str] = []
    for field, kind, text in FIELDS:
        lines.append(f"# HELP {field} {text}")
        lines.append(f"# TYPE {field} {kind}")
        for g in gpus:
            labels = (f'gpu="{g.index}",UUID="{g.uuid}",pci_bus_id="00000000:{g.index + 1:02X}:00.0",'
                      f'device="nvidia{g.index}",modelName="{story.GPU_NAME}",Hostname="{hostname}",'
                      f'DCGM_FI_DRIVER_VERSION="{DRIVER}"')
            lines.append(f"{field}{{{labels}}} {_value(field, g)}")
    return "\n".join(lines) + "\n"


class DcgmExporter:
    """`await exporter.start()` serves `page()` on 127.0.0.1:`port` (0: a free port)."""

    def __init__(self, page: Callable[[], str], port: int = 0) -> None:
        self.page = page
        self.port = port
        self.scrapes = 0
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @classmethod
    def for_simulator(cls, sim: Any) -> DcgmExporter:
        def page() -> str:
            gpus = story.gpu_states(sim.elapsed_s())
            lost = getattr(sim, "lost_gpus", ())
            return dcgm_metrics([g for g in gpus if g.index not in lost], sim.identity.hostname)

        return cls(page)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                request = await asyncio.wait_for(reader.readline(), 30)
                if not request:
                    return
                while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                    pass
                parts = request.split()
                if len(parts) >= 2 and parts[0] == b"GET" and parts[1].split(b"?")[0] == b"/metrics":
                    self.scrapes += 1
                    body, status = self.page().encode(), b"200 OK"
                else:
                    body, status = b"404 page not found\n", b"404 Not Found"
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"
                             b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, OSError):
            return
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):  # kept-alive scrapes end too: the exporter is gone
                writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
