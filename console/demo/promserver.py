"""A real Prometheus server on 127.0.0.1 for tests and benchmarks (Debian's `prometheus` package):
a temporary config scraping the given targets, a temporary TSDB, stopped with the test."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from console.demo.sshd import free_port
from console.units import seconds


def find_prometheus() -> str | None:
    for candidate in (shutil.which("prometheus"), "/usr/bin/prometheus"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


class PrometheusError(RuntimeError):
    pass


@dataclass(frozen=True)
class ScrapeTarget:
    job: str
    address: str  # 127.0.0.1:PORT
    labels: dict[str, str] = field(default_factory=dict)
    path: str = "/metrics"


def _duration(seconds: float) -> str:
    """Prometheus durations take whole units: 800ms, not 0.8s."""
    return f"{int(round(seconds * 1000))}ms"


def prometheus_config(targets: list[ScrapeTarget], interval_s: float) -> str:
    """prometheus.yml as JSON (YAML is a superset of JSON: no YAML library needed)."""
    jobs: dict[tuple[str, str], list[dict[str, object]]] = {}
    for t in targets:
        jobs.setdefault((t.job, t.path), []).append({"targets": [t.address], "labels": t.labels})
    return json.dumps({
        "global": {"scrape_interval": _duration(interval_s), "scrape_timeout": _duration(max(0.5, interval_s * 0.8)),
                   "evaluation_interval": _duration(interval_s)},
        "scrape_configs": [{"job_name": job, "metrics_path": path, "static_configs": groups}
                           for (job, path), groups in jobs.items()],
    }, indent=1)


@dataclass
class PrometheusServer:
    port: int
    directory: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, promql: str) -> list[dict[str, object]]:
        data = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{data}", timeout=5) as response:
            answer = json.loads(response.read())
        return list(answer["data"]["result"])

    def wait_for_series(self, promql: str, count: int = 1, timeout_s: float = 30.0) -> list[dict[str, object]]:
        deadline = time.monotonic() + timeout_s
        result: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            try:
                result = self.query(promql)
            except (urllib.error.URLError, OSError, KeyError, ValueError):
                result = []
            if len(result) >= count:
                return result
            time.sleep(0.25)
        raise PrometheusError(f"{promql}: {len(result)} series after {seconds(timeout_s)}, expected {count}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_prometheus(directory: Path, targets: list[ScrapeTarget], *, interval_s: float = 1.0,
                     port: int | None = None) -> PrometheusServer:
    binary = find_prometheus()
    if binary is None:
        raise PrometheusError("prometheus is not installed (apt-get install prometheus)")
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "prometheus.yml"
    config.write_text(prometheus_config(targets, interval_s))
    port = port or free_port()
    log = (directory / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={directory / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h",
         "--web.enable-lifecycle", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = PrometheusServer(port, directory, process)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PrometheusError(f"prometheus exited ({process.returncode}): "
                                  f"{(directory / 'prometheus.log').read_text()[-400:]}")
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=1) as response:
                if response.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    server.stop()
    raise PrometheusError("prometheus did not become ready within 30 s")
