"""The gate's flags check for a container reads the SGLang its image names (issue 35 item 7): the
Docker demo's image v0.5.23 is the built-in table's version, so its flags are checked against the
host's SGLang and the gate passes without an override; another version stays "not checked"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from console.domain.analysis.container_diff import build_container_report
from console.domain.analysis.service_diff import HostFacts
from console.host.parsers.docker import parse_compose
from console.host.parsers.sglang_flags import builtin_table
from console.domain.swap.preflight import check_flags

DATA = Path(__file__).parent.parent / "data" / "docker"


class _State:
    def __init__(self, report: Any) -> None:
        self.report = report

    def data(self, source: str) -> Any:
        return self.report if source == "service" else None

    def reading(self, source: str) -> Any:
        return None


def _gate(image: str) -> Any:
    compose = (DATA / "compose.yaml").read_text()
    old, new = parse_compose(compose, "qwen397b"), parse_compose(compose, "qwen122b")
    report = build_container_report(old, replace(new, image=image), HostFacts(gpu_count=4))
    return check_flags(_State(report))


def test_an_image_of_the_tables_sglang_passes_the_flags_check() -> None:
    version = builtin_table().version
    check = _gate(f"lmsysorg/sglang:v{version}-cu129")
    assert check.passes is True, check
    assert f"SGLang {version}" in check.reason


def test_an_image_of_another_or_no_version_is_not_called_checked() -> None:
    for image in ("lmsysorg/sglang:v0.4.1-cu124", "lmsysorg/sglang:latest"):
        check = _gate(image)
        assert check.ok is None and not check.passes and "not checked" in check.reason, (image, check)
