"""The service diff: the seeds' two units, SGLang's argparse semantics, lints, drift, secrets."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.domain.analysis.service_diff import HostFacts, lint
from console.domain.analysis.service_report import build_report, report_json, side_from_text
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.downloader import qwen122b_config
from console.demo.hostsim.scenario import NEW_UNIT, OLD_UNIT, start_scenario
from console.model import Reading
from console.ui.panes.service import format_service
from console.host.parsers import ParseError
from console.host.parsers.sglang_argv import NotSglang, normalize
from console.host.parsers.sglang_flags import builtin_table, table_from_help
from console.host.parsers.systemd import parse_unit, split_systemd_words
from console.host.sources.service import ServiceWatcher
from console.host.transport.ssh import SshTransport
from tests.kit.hosts import sim_options

UNITS = Path(__file__).parent.parent.parent / "console" / "demo" / "hostsim" / "units"


def seeds_unit(name: str) -> str:
    return (UNITS / name).read_text().replace("{ROOT}", "")


def seeds_report(**facts: object):  # type: ignore[no-untyped-def]
    old = side_from_text(OLD_UNIT, seeds_unit(OLD_UNIT))
    new = side_from_text(NEW_UNIT, seeds_unit(NEW_UNIT))
    base: dict[str, object] = dict(model_config=qwen122b_config(), forbidden_prefixes=("/data",), gpu_count=4,
                                   paths_exist={"/shared/models/Qwen3.5-122B-A10B": True})
    base.update(facts)
    return build_report(old, new, HostFacts(**base))  # type: ignore[arg-type]


def changes_by_flag(report) -> dict[str, object]:  # type: ignore[no-untyped-def]
    return {c.flag: c for c in report.changes}


def test_fp4_only_flags_are_removed_with_the_quantization_and_say_why() -> None:
    c = changes_by_flag(seeds_report())
    assert c["--quantization"].change == "removed"
    assert c["--quantization"].reason == "native BF16 checkpoint: no quantization_config"
    assert c["--moe-runner-backend"].change == "removed"
    assert "FP4 MoE runner for modelopt_fp4" in c["--moe-runner-backend"].reason
    assert c["--fp4-gemm-backend"].change == "removed"
    assert "goes with the quantization" in c["--fp4-gemm-backend"].reason
    assert {c[f].category for f in ("--moe-runner-backend", "--fp4-gemm-backend")} == {"kernel backends"}


def test_mtp_flags_are_added_together_and_tp_alias_is_no_change() -> None:
    report = seeds_report()
    c = changes_by_flag(report)
    spec = {f for f, x in c.items() if x.category == "speculative decoding"}
    assert spec == {"--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk",
                    "--speculative-num-draft-tokens"}
    assert all(c[f].change == "added" for f in spec)
    assert c["--speculative-algorithm"].reason == (
        "speculative decoding added together: NEXTN, 3 steps, 1 topk, 4 draft tokens; "
        "the checkpoint has 1 MTP layer")
    # `--tp 4` in the new unit is `--tp-size 4` in the old: no change.
    assert "--tp-size" not in c
    assert set(c) == {"--model-path", "--served-model-name", "--quantization", "--moe-runner-backend",
                      "--fp4-gemm-backend", *spec}


def test_the_seeds_lints_on_the_new_unit() -> None:
    messages = [(x.severity, x.message) for x in seeds_report().lints]
    assert not [m for m in messages if m[0] in ("error", "warning")]
    assert ("info", "the model has 1 MTP layer: NEXTN is valid") in messages
    assert ("info", "no --dtype: SGLang's auto picks bfloat16 from the checkpoint") in messages
    assert ("info", "/shared/models/Qwen3.5-122B-A10B exists and is outside /data") in messages


@pytest.mark.parametrize("edit, severity, text", [
    (("/shared/models/Qwen3.5-122B-A10B", "/data/models/Qwen3.5-122B-A10B"), "error", "which this host's profile forbids"),
    (("--tp 4", "--tp 3"), "error", "TP 3 does not divide the 32 attention heads"),
    (("--tp 4", "--tp 8"), "error", "needs 8 GPUs, the host has 4"),
    (("--enable-metrics", "--enable-metrics --fp4-gemm-backend flashinfer_cudnn"), "warning",
     "--fp4-gemm-backend only applies to NVFP4"),
    (("--enable-metrics", "--enable-metrics --quantization modelopt_fp4"), "error",
     "--quantization modelopt_fp4 on a checkpoint without quantization_config (bfloat16)"),
    (("--enable-metrics", "--enable-metrics --cuda-graph-max-bs 64"), "error",
     "ambiguous: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
    (("--enable-metrics", "--enable-metrics --quant fp8"), "error", "ambiguous: --quant could match"),
    (("--enable-metrics", "--enable-metrics --no-such-flag 3"), "error", "unknown flag for SGLang 0.5.23"),
    (("--enable-metrics", "--enable-metrics --disable-cuda-graph"), "warning", "--disable-cuda-graph is deprecated"),
    (("--enable-metrics", "--enable-metrics --api-key sk-verysecret"), "warning", "a secret on the command line"),
])
def test_blind_spots_are_caught(edit: tuple[str, str], severity: str, text: str) -> None:
    new_text = seeds_unit(NEW_UNIT).replace(*edit)
    new = side_from_text(NEW_UNIT, new_text)
    facts = HostFacts(model_config=qwen122b_config(), forbidden_prefixes=("/data",), gpu_count=4)
    lints = lint(new.command, facts)  # type: ignore[arg-type]
    assert any(x.severity == severity and text in x.message for x in lints), lints


def test_nextn_without_mtp_layers_or_draft_model_is_an_error() -> None:
    config = qwen122b_config()
    del config["text_config"]["mtp_num_hidden_layers"]  # type: ignore[attr-defined]
    new = side_from_text(NEW_UNIT, seeds_unit(NEW_UNIT))
    lints = lint(new.command, HostFacts(model_config=config))  # type: ignore[arg-type]
    assert any(x.severity == "error" and "NEXTN needs MTP layers or a draft model" in x.message for x in lints)


def test_missing_model_path_on_the_host() -> None:
    report = seeds_report(paths_exist={"/shared/models/Qwen3.5-122B-A10B": False})
    assert any(x.severity == "error" and "does not exist on the host" in x.message for x in report.lints)


def test_secrets_never_leave_redaction() -> None:
    new_text = seeds_unit(NEW_UNIT).replace("--enable-metrics", "--enable-metrics --api-key sk-verysecret")
    old = side_from_text(OLD_UNIT, seeds_unit(OLD_UNIT))
    report = build_report(old, side_from_text(NEW_UNIT, new_text), HostFacts())
    blob = json.dumps(report_json(report)) + "\n".join(report.raw_diff)
    blob += format_service(Reading("service", report, 0.0), 120).plain
    blob += format_service(Reading("service", report, 0.0), 120, raw=True).plain
    assert "sk-verysecret" not in blob and "hf_sImUlAtEd" not in blob
    assert "‹redacted›" in blob


def test_env_changes_are_diffed_and_redacted() -> None:
    old = side_from_text("a", "[Service]\nEnvironment=HF_TOKEN=hf_one \"X=1\"\nExecStart=sglang serve --tp 2\n")
    new = side_from_text("b", "[Service]\nEnvironment=HF_TOKEN=hf_two X=2 OPENAI_API_KEY=k\nExecStart=sglang serve --tp 2\n")
    env = {e.name: e for e in build_report(old, new, HostFacts()).env_changes}
    assert (env["HF_TOKEN"].change, env["HF_TOKEN"].old, env["HF_TOKEN"].new) == ("changed", "‹redacted›", "‹redacted›")
    assert (env["X"].old, env["X"].new) == ("1", "2")
    assert env["OPENAI_API_KEY"].change == "added" and env["OPENAI_API_KEY"].new == "‹redacted›"


@pytest.mark.parametrize("line, argv", [
    ('/usr/bin/python -m sglang.launch_server --model-path "/m/with space" --port=30000',
     ["/usr/bin/python", "-m", "sglang.launch_server", "--model-path", "/m/with space", "--port=30000"]),
    ("sglang serve --served-model-name 'a b' --x \\\"q\\\"", ["sglang", "serve", "--served-model-name", "a b", "--x", '"q"']),
    ("/bin/echo $HOME %i ${VAR}", ["/bin/echo", "$HOME", "%i", "${VAR}"]),
])
def test_systemd_quoting(line: str, argv: list[str]) -> None:
    assert split_systemd_words(line) == argv


def test_unit_parsing_continuations_prefixes_dropins_and_env_files() -> None:
    text = ("# /etc/systemd/system/x.service\n[Unit]\nDescription=X\n[Service]\n"
            "Environment=\"A=1\" B=2\nEnvironmentFile=-/etc/x.env\n"
            "ExecStart=-/usr/bin/python3 -m sglang.launch_server \\\n  --tp-size 2 \\\n  --port 1\n"
            "# /etc/systemd/system/x.service.d/override.conf\n[Service]\nExecStart=\n"
            "ExecStart=@/usr/bin/python3 py -m sglang.launch_server --tp-size 4\nEnvironment=B=3\n")
    unit = parse_unit(text, "x.service")
    assert unit.sources == ("/etc/systemd/system/x.service", "/etc/systemd/system/x.service.d/override.conf")
    assert unit.main_command is not None and len(unit.exec_start) == 1
    assert unit.main_command.prefixes == "@"
    assert unit.main_command.argv == ("/usr/bin/python3", "-m", "sglang.launch_server", "--tp-size", "4")
    assert dict(unit.environment) == {"A": "1", "B": "3"}
    assert unit.environment_files == (("/etc/x.env", True),)


@pytest.mark.parametrize("text, error", [
    ("just some text\n", "not a unit file"),
    ("[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path \"/unterminated\n", "unbalanced"),
    ("[Service]\nType=simple\n", "no ExecStart"),
    ("[Service]\nExecStart=/bin/sleep 10\n", "no `python -m sglang.launch_server`"),
    ("\x00\x01\x02binary", "binary content"),
])
def test_bad_units_are_clear_errors_not_crashes(text: str, error: str) -> None:
    side = side_from_text("bad.service", text)
    report = build_report(side_from_text(OLD_UNIT, seeds_unit(OLD_UNIT)), side, HostFacts())
    assert any(error in e for e in report.errors + tuple(x.message for x in report.lints)), (report.errors, report.lints)
    format_service(Reading("service", report, 0.0), 56)


def test_argparse_semantics_match_sglangs_own_parser() -> None:
    """The fake `sglang.launch_server` builds SGLang 0.5.23's real argparse table: our verdicts agree with it."""
    import argparse

    from console.demo.hostsim.fake_sglang.launch_server import build_parser

    parser = build_parser()
    parser.exit_on_error = False
    for argv in (["--tp", "4"], ["--speculative-algo", "NEXTN"], ["--mem-fraction", "0.8"], ["--quant", "fp8"],
                 ["--cuda-graph-max-bs", "8"], ["--pp", "2"], ["--speculative-draft", "x"], ["--tp-size=2"]):
        try:
            parser.parse_args(argv)
            theirs = "ok"
        except (argparse.ArgumentError, SystemExit):
            theirs = "error"
        ours = normalize(["sglang", "serve", *argv])
        mine = "error" if any(p.severity == "error" for p in ours.problems) else "ok"
        assert mine == theirs, argv


def test_flags_read_from_help_match_the_builtin_table() -> None:
    from console.demo.hostsim.fake_sglang.launch_server import build_parser

    table = table_from_help(build_parser().format_help(), "0.5.23")
    assert table.lookup("--tp").spec and table.lookup("--tp").spec.flag == "--tp-size"  # type: ignore[union-attr]
    assert table.lookup("--quant").error and "ambiguous" in table.lookup("--quant").error  # type: ignore[operator]
    assert len(table.specs) >= len(builtin_table().specs) - 5


def test_not_sglang() -> None:
    with pytest.raises(NotSglang):
        normalize(["/bin/sleep", "10"])
    with pytest.raises(ParseError):
        parse_unit("no sections here", "x")


async def test_drift_when_the_unit_changed_but_was_not_restarted(sim: HostSimulator) -> None:
    await start_scenario(sim)
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        watcher = ServiceWatcher(transport, OLD_UNIT, None)
        first = await watcher.poll()
        for _ in range(40):  # the simulator starts the unit's process within a few hundred ms
            if first.new.running is not None:
                break
            await asyncio.sleep(0.1)
            first = await watcher.poll()
        assert first.new.active_state == "active" and first.new.main_pid and first.new.running is not None
        assert first.drift == ()
        unit = sim.path(f"/etc/systemd/system/{OLD_UNIT}")
        unit.write_text(unit.read_text().replace("--mem-fraction-static 0.85", "--mem-fraction-static 0.88"))
        report = await watcher.poll()
        assert report.drift_of == OLD_UNIT
        assert [(c.flag, c.old, c.new) for c in report.drift] == [("--mem-fraction-static", "0.85", "0.88")]
        assert "unit changed, not restarted" in format_service(Reading("service", report, 0.0), 100).plain
    finally:
        await transport.close()


async def test_the_seeds_diff_over_ssh_with_the_hosts_own_flags(sim: HostSimulator) -> None:
    await start_scenario(sim)
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        watcher = ServiceWatcher(transport, NEW_UNIT, OLD_UNIT, forbidden_prefixes=(sim.host_path("/data"),))
        report = await watcher.poll()
    finally:
        await transport.close()
    assert report.units_on_host == (NEW_UNIT, OLD_UNIT)
    assert report.flags_source == "checked against the host's SGLang 0.5.23"
    assert {c.flag for c in report.changes} >= {"--quantization", "--speculative-algorithm"}
    assert not [x for x in report.lints if x.severity == "error"]
    assert any("NEXTN is valid" in x.message for x in report.lints), "config.json read from the host"


def test_cli_diff_of_local_files_json(tmp_path: Path) -> None:
    old, new = tmp_path / "old.service", tmp_path / "new.cmd"
    old.write_text(seeds_unit(OLD_UNIT))
    new.write_text("# a plain command line\npython3 -m sglang.launch_server --model-path /m \\\n  --tp 4 --api-key sk-x\n")
    out = subprocess.run([sys.executable, "-m", "console", "diff", str(old), str(new), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"old", "new", "changes", "env_changes", "lints", "errors"}
    assert all(set(c) == {"flag", "change", "old", "new", "category", "reason"} for c in data["changes"])
    assert {"flag": "--api-key", "change": "added", "old": None, "new": "‹redacted›",
            "category": "API features", "reason": None} in data["changes"]
    assert "sk-x" not in out.stdout


def test_cli_diff_missing_file_without_host_is_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "console", "diff", "/nonexistent/a", "/nonexistent/b"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_a_forbidden_model_path_is_not_also_said_to_be_outside() -> None:
    new = side_from_text("new.txt", "python3 -m sglang.launch_server --model-path /data/m --tp 4")
    lints = lint(new.command, HostFacts(paths_exist={"/data/m": True}, forbidden_prefixes=("/data",)))  # type: ignore[arg-type]
    messages = [x.message for x in lints if x.flag == "--model-path"]
    assert messages == ["/data/m is under /data, which this host's profile forbids"]
    ok = side_from_text("new.txt", "python3 -m sglang.launch_server --model-path /shared/m --tp 4")
    fine = lint(ok.command, HostFacts(paths_exist={"/shared/m": True}, forbidden_prefixes=("/data",)))  # type: ignore[arg-type]
    assert [x.message for x in fine if x.flag == "--model-path"] == ["/shared/m exists and is outside /data"]


def test_diff_of_a_file_that_is_no_command_line_does_not_contradict_itself(tmp_path: Path) -> None:
    one = tmp_path / "one.txt"
    one.write_text("hello world\n")
    out = subprocess.run([sys.executable, "-m", "console", "diff", str(one), str(one)], capture_output=True,
                         text=True, timeout=60, env={**__import__("os").environ, "COLUMNS": "80"})
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    summary = next(x for x in lines if "error" in x and "·" in x)
    assert "0 changes" not in summary and "0 errors" not in summary and "1 error " in summary + " "
    crosses = [x for x in lines if x.startswith(" ✗")]
    assert len(crosses) == 1  # the same error of the same file, once
    at = lines.index(crosses[0])
    assert all(x.startswith("   ") for x in lines[at + 1:] if x.strip()), "continuations stay under the message"


def test_counts_are_singular_and_sources_not_doubly_parenthesized() -> None:
    old = side_from_text("a.txt", "python3 -m sglang.launch_server --model-path /m/x --tp 4")
    new = side_from_text("b.txt", "python3 -m sglang.launch_server --model-path /m/y --tp 8")
    source = "host SGLang version unknown (no answer in 15 s): built-in table of 0.5.23"
    report = build_report(old, new, HostFacts(), flags_source=source)
    text = format_service(Reading("service", report, 0.0), width=60).plain
    assert "· 1 note" in text and "1 notes" not in text
    assert "))" not in text and source in " ".join(x.strip() for x in text.splitlines())
    for line in text.splitlines():
        assert len(line) <= 60, line


def test_the_diffs_words_name_the_demos_paths_as_its_host_names_them() -> None:
    """The demo's simulated host keeps its files under a sandbox (HostFacts.host_root): a dropped
    EnvironmentFile=, its reason, the lints and the interpreter run for SGLang's flags are named as
    the host names them (the diff pane said "-/tmp/gpusim-b97634r1/etc/sglang/qwen397b.env")."""
    root = "/tmp/gpusim-b97634r1"
    exec_start = f"ExecStart={root}/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path {root}/m/x\n"
    old = side_from_text("old.service", f"[Service]\nEnvironmentFile=-{root}/etc/sglang/old.env\n{exec_start}")
    new = side_from_text("new.service", f"[Service]\n{exec_start}")
    facts = HostFacts(paths_exist={f"{root}/m/x": True}, forbidden_prefixes=(f"{root}/data",), host_root=root)
    report = build_report(old, new, facts, flags_binary=f"{root}/opt/sglang/.venv/bin/python")
    (dropped,) = [u for u in report.unit_changes if u.directive == "EnvironmentFile"]
    assert dropped.old == "-/etc/sglang/old.env" and root not in (dropped.reason or ""), dropped
    assert report.flags_binary == "/opt/sglang/.venv/bin/python"
    assert "/m/x exists and is outside /data" in [x.message for x in report.lints]
    assert report.new.command.value("--model-path") == f"{root}/m/x"  # the unit itself, as it is on the host
