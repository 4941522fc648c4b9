"""One side of a prefill/decode pair swapped behind the router (issue 37): allowed only when both sides
keep the same weights and KV cache layout (a model change swaps both, and says so, naming the flag);
the commands of that side alone shown first; refused unconfirmed and under read-only; the other side
untouched; the router's own GET /workers read on its host during the swap, in the report."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from console.core.state import ReadingChanged
from console.demo.hostsim.deployment import DECODE_TUNED_UNIT
from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import build_report, side_from_text
from console.domain.deploy.router import parse_router
from console.domain.deploy.swap import DeploymentSwap, format_report, one_side_refusal
from console.model import Reading
from tests.kit.deploy import NOW, deployment, node_state, unit, simulated_deployment, until

PD = "--model-path /models/{model} --disaggregation-mode {mode} --disaggregation-transfer-backend mooncake --tp-size 8 {extra}"


def pd_states(decode_new: str, *, decode_extra: str = "", prefill_active: str = "active") -> dict:
    """prefill serving the r1 unit; decode's new unit (its target) with `decode_new`'s model."""
    def state(name: str, mode: str, new_model: str, extra: str, old_active: str) -> object:
        s = node_state(name)
        old = side_from_text("old.service", unit(PD.format(model="Qwen3.5-397B-A17B-r1", mode=mode, extra="")))
        new = side_from_text("new.service", unit(PD.format(model=new_model, mode=mode, extra=extra)))
        report = build_report(old, new, HostFacts())
        report = type(report)(**{**{f: getattr(report, f) for f in report.__dataclass_fields__},
                                 "old": type(old)(**{**{f: getattr(report.old, f) for f in report.old.__dataclass_fields__},
                                                     "active_state": old_active})})
        s.apply(ReadingChanged(name, "service", Reading("service", report, NOW)))
        return s

    return {"prefill0": state("gpu-a", "prefill", "Qwen3.5-397B-A17B-r1", "", prefill_active),
            "decode0": state("gpu-b", "decode", decode_new, decode_extra, "active"),
            "router": node_state("edge")}


def test_a_flag_only_change_on_decode_may_be_swapped_alone() -> None:
    states = pd_states("Qwen3.5-397B-A17B-r1", decode_extra="--max-running-requests 128")
    assert one_side_refusal(deployment("pd"), states, "decode") is None


def test_a_model_change_on_one_side_is_refused_naming_the_flag() -> None:
    why = one_side_refusal(deployment("pd"), pd_states("Qwen3.5-397B-A17B"), "decode")
    assert why == ("decode 0's unit has --model-path Qwen3.5-397B-A17B and prefill 0 serves Qwen3.5-397B-A17B-r1: "
                   "prefill and decode must run the same weights and KV cache layout, so this change swaps both "
                   "sides (S)")
    kv = one_side_refusal(deployment("pd"), pd_states("Qwen3.5-397B-A17B-r1", decode_extra="--kv-cache-dtype fp8_e4m3"),
                          "decode")
    assert kv is not None and kv.startswith("decode 0's unit has --kv-cache-dtype fp8_e4m3 and prefill 0 serves (absent)")


def test_one_side_is_refused_when_what_the_other_serves_is_not_known_or_for_multinode() -> None:
    assert "nothing to keep serving" in one_side_refusal(
        deployment("pd"), pd_states("Qwen3.5-397B-A17B-r1", prefill_active="inactive"), "decode")
    not_read = {"prefill0": node_state("gpu-a"), "decode0": node_state("gpu-b"), "router": node_state("edge")}
    assert "is not read yet" in one_side_refusal(deployment("pd"), not_read, "decode")
    assert one_side_refusal(deployment(), {}, "decode").startswith("one side is a prefill/decode deployment's")


def test_the_routers_workers_are_read_as_the_model_gateway_lists_them() -> None:
    body = {"workers": [{"url": "http://10.0.0.1:30000", "worker_type": "prefill", "is_healthy": True},
                        {"url": "http://10.0.0.2:30000", "worker_type": "decode", "is_healthy": False}],
            "total": 2, "stats": {"prefill_count": 1, "decode_count": 1, "regular_count": 0}}
    view = parse_router("workers " + json.dumps(body))
    assert view.describe() == "prefill http://10.0.0.1:30000 healthy · decode http://10.0.0.2:30000 UNHEALTHY"
    assert parse_router("health 503 worker x is not healthy").describe() == \
        "/health 503: worker x is not healthy (no /workers on this router)"
    assert parse_router("health None URLError: refused").describe() == "not answering: URLError: refused"
    assert parse_router("workers {not json").error == "/workers did not answer JSON"



@pytest.mark.timeout(300)
def test_the_decode_side_swapped_alone_behind_the_router_with_the_routers_view(tmp_path: Path) -> None:
    async def run() -> None:
        async with simulated_deployment(tmp_path, "pd", "pd", operator=False, decode_unit=DECODE_TUNED_UNIT) as (sim, watch):
            audit = tmp_path / "audit.jsonl"
            swap = DeploymentSwap(watch, who="ana", audit_file=audit, ready_timeout_s=120, drain_timeout_s=60)
            await until(lambda: watch.view().status.status == "ready", 90, "the r1 pair serving")
            await until(lambda: swap.side_refusal("decode") is None, 60, "both sides' units read")
            preview = swap.preview(side="decode")
            assert preview[0] == "# swap of pd's decode side alone: 1 node(s); prefill keeps running, untouched"
            assert preview[1] == "decode 0: timeout -k 5 120 systemctl stop -- sglang-decode-r1.service"
            assert f"decode 0: timeout -k 5 90 systemctl start -- {DECODE_TUNED_UNIT}" in preview
            assert not any("prefill 0:" in line for line in preview)
            assert (await swap.run(side="decode")).outcome.startswith("refused: not confirmed")
            done = await swap.run(confirmed=True, side="decode")
            report = format_report(done, watch.deployment)
            assert done.outcome == "ready", report
            assert report.startswith("# swap of the decode side of pd: ready")
            assert "## prefill 0" not in report and "## decode 0" in report
            router = report.split("## router")[1]
            # the router's own view: decode unhealthy while it was swapped, healthy again after
            assert "router: prefill http://127.0.0.1:" in router and "decode http://127.0.0.1:" in router
            assert "UNHEALTHY" in router, router
            last = [line for line in router.splitlines() if "router:" in line][-1]
            assert "UNHEALTHY" not in last, router
            actions = [json.loads(line) for line in audit.read_text().splitlines()]
            assert [(a["node"], a["action"]) for a in actions] == [
                ("decode 0", "stop sglang-decode-r1.service"), ("decode 0", f"start {DECODE_TUNED_UNIT}")]

    asyncio.run(run())


@pytest.mark.timeout(300)
def test_a_model_change_on_one_side_runs_nothing_in_the_demo(tmp_path: Path) -> None:
    async def run() -> None:
        async with simulated_deployment(tmp_path, "pd", "pd", operator=False) as (sim, watch):
            audit = tmp_path / "audit.jsonl"
            swap = DeploymentSwap(watch, who="ana", audit_file=audit)
            await until(lambda: watch.view().status.status == "ready", 90, "the r1 pair serving")
            await until(lambda: "--model-path" in (swap.side_refusal("decode") or ""), 60, "both sides' units read")
            refused = await swap.run(confirmed=True, side="decode")
            assert refused.outcome.startswith("refused: one side alone: decode 0's unit has --model-path "
                                              "Qwen3.5-397B-A17B and prefill 0 serves Qwen3.5-397B-A17B-r1"), \
                refused.outcome
            assert not audit.exists()

    asyncio.run(run())


def test_the_model_gateways_documented_workers_answer_is_read() -> None:
    data = json.loads((Path(__file__).parents[1] / "data" / "sglang_multinode_real.json").read_text())
    view = parse_router("workers " + json.dumps(data["router_workers"]["example"]))
    assert view.describe() == "regular http://0.0.0.0:31378 healthy"
