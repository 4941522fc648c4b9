"""A small mutation run over the modules that decide truth and safety (issues 27 and 38).

Each mutation is one deliberate one-line bug (an exact text replaced once) in a copy of the tree:
parsers of host output, download truth, the journal decoder, redaction, the swap gate and its
name checks, the freshness limits, the downtime clock, the fit, the size caps, the share roles and
host-key checking. For each, the behaviour tests that should notice it run against the mutated
copy. The verdict is read from pytest's own report (junitxml), never from its exit status:

    killed     a named test failed with an assertion (AssertionError, pytest's `Failed`, a
               `pytest.raises` that did not raise) or with the mutation's expected error, and the
               same test failed the same way once more (every kill is run twice)
    SURVIVED   every selected test passed
    error      a collection or set-up error, or a test failing with another exception: not a kill
    timeout    the run took longer than --timeout: not a kill
    flaky      the first run failed, the confirming run did not: not a kill
    not run    every selected test was skipped (sshd missing, say): neither a kill nor a survivor

The unmutated copy runs every selection first (twice at most): a selection that fails there says
nothing and stops the run. A mutation whose text is not in its file exactly once stops the run
before anything runs, naming every such id (keep them current in the change that moves the code).
The JSON records, per mutation, the failing test(s) and each one's message.

    nice .venv/bin/python benchmarks/mutation.py --json /tmp/mutation.json   # all of them
    .venv/bin/python benchmarks/mutation.py --only gate                      # ids starting "gate"
    .venv/bin/python benchmarks/mutation.py --list

The tests per mutation are the behaviour files (or tests in them) of the module, chosen narrowly so
the run stays minutes on a shared 2-core machine; none is written against a mutation. A mutation
that survives is a test to write, not a tolerance.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSERTION_TYPES = ("AssertionError", "Failed")  # `Failed`: pytest.fail, and pytest.raises' DID NOT RAISE


@dataclass(frozen=True, slots=True)
class Mutation:
    id: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    what: str
    expect: tuple[str, ...] = ()  # exception names that also count as the test noticing (besides assertions)


@dataclass(frozen=True, slots=True)
class Outcome:
    status: str  # passed, failed (assertions only), error, timeout, no tests
    seconds: float
    failures: tuple[tuple[str, str, str], ...] = ()  # (test id, exception type, message)
    errors: tuple[tuple[str, str, str], ...] = ()
    note: str = ""


M = Mutation
LOG, LOGP = "tests/host/test_log.py", "tests/host/test_log_prefixes.py"
JOURNAL = (f"{LOG}::test_a_journal_line_sent_as_a_byte_array_is_shown_as_its_text",
           f"{LOG}::test_invalid_utf8_in_a_journal_byte_array_is_shown_as_replacement_characters",
           f"{LOG}::test_a_journal_byte_array_reaches_the_log_pane_as_clean_text")
SMI = ("tests/host/test_gpu.py::test_mig_mode_na_fields_are_none",
       "tests/host/test_gpu.py::test_nvidia_smi_na_fields_are_unknown_and_infinite_readings_are_no_readings")
UNITS = ("tests/domain/test_service_diff.py::test_unit_parsing_continuations_prefixes_dropins_and_env_files",)
TRUTH = "tests/host/test_download_truth.py"
GATE = "tests/swap/test_swap_gate.py"
PATHS = "tests/domain/test_paths_rule.py"
FRESH = ("tests/core/test_one_truth.py::test_a_sources_reading_reads_live_to_its_limit_and_stale_just_after",
         "tests/core/test_one_truth.py::test_each_pane_turns_yellow_at_its_sources_shipped_limit",
         "tests/core/test_one_truth.py::test_the_header_says_the_host_summary_is_stale_only_past_15_seconds")
DOWNTIME = ("tests/swap/test_swap_lived.py::"
            "test_the_downtime_runs_from_the_last_served_request_to_the_new_servers_ready_on_the_hosts_stamps",
            "tests/swap/test_swap_lived.py::"
            "test_a_batch_line_alone_dates_the_start_and_a_log_that_served_nothing_starts_at_the_stop")
NAMES = ("tests/hostile/test_hostile_actions.py::"
         "test_a_hostile_unit_or_container_name_is_refused_on_every_path_before_any_command",)
SHAPES = ("tests/domain/test_redact.py::test_a_bare_token_of_each_real_shape_is_redacted_whole",)
QUOTES = (f"{LOGP}::test_an_error_line_quoting_a_batch_line_is_an_error_and_not_a_decode_line",
          f"{LOGP}::test_a_line_that_only_quotes_a_message_is_not_taken_for_it",
          f"{LOGP}::test_a_prefix_of_240_characters_is_one_and_of_241_is_a_message")
FIT = ("tests/domain/test_fit.py::test_an_fp8_kv_cache_halves_each_tokens_bytes_and_the_fit_shows_about_twice_the_tokens",)
OVERRIDE = ("tests/share/test_share.py::test_an_observers_gate_override_is_refused_and_changes_nothing",
            "tests/share/test_share.py::test_every_request_that_changes_the_host_is_the_drivers_alone")
OBSERVER_BENCH = ("tests/share/test_share.py::test_an_observers_benchmark_is_refused_by_the_core",)
CHECK_OLD = "ca.check_container(ctl.old_unit)"
CHECK_NEW = "ca.check_container(ctl.new_unit)"

MUTATIONS: tuple[Mutation, ...] = (
    # -- parsers -------------------------------------------------------------------------------
    M("log-percent", "console/host/parsers/sglang_log.py", "return float(value[:-1]) / 100", "return float(value[:-1])",
      (f"{LOG}::test_the_log_pane_shows_a_2_76_percent_cache_hit_rate_as_2_76_percent_not_276",),
      "batch-line percentages not divided by 100"),
    M("log-ready", "console/host/parsers/sglang_log.py", 'return "ready", {}', 'return "http up", {}',
      ("tests/host/test_warmup_status.py::test_a_503_six_seconds_after_the_ready_line_is_the_warm_up_not_degraded",
       f"{LOG}::test_honest_status"), '"fired up" no longer marks the server ready'),
    M("log-oom", "console/host/parsers/sglang_log.py",
      'return LogEvent("error", line, ts, ranks, "error", fields={"kind": "oom"})',
      'return LogEvent("warning", line, ts, ranks, "warning", fields={"kind": "oom"})',
      (f"{LOG}::test_boot_figures_from_real_lines", f"{LOG}::test_the_tracker_is_bounded"),
      "an out-of-memory line is a warning, not an error"),
    M("log-quote-double", "console/host/parsers/sglang_log.py", "or '\"' in prefix or", "or",
      QUOTES, "an ERROR line quoting a batch line in double quotes is read as a decode line"),
    M("log-quote-single", "console/host/parsers/sglang_log.py", """or "'" in prefix:""", ":",
      QUOTES, "an ERROR line quoting a batch line in single quotes is read as a decode line"),
    M("log-quote-field-end", "console/host/parsers/sglang_log.py", """if prefix[-1] not in " \\t|:]-" or""", "if",
      QUOTES, "a prefix that does not end a field (got=Decode batch…) is taken for one"),
    M("log-prefix-cap", "console/host/parsers/sglang_log.py", "PREFIX_MAX = 240", "PREFIX_MAX = 300",
      QUOTES, "a 241..300-character prefix is taken for SGLang's (the cap at its shipped value)"),
    M("smi-na", "console/host/parsers/nvidia_smi.py", 'value in ("", "N/A")', 'value in ("",)',
      SMI, "nvidia-smi's N/A read as a value"),
    M("smi-finite", "console/host/parsers/nvidia_smi.py", "return number if math.isfinite(number) else None",
      "return number", SMI, "inf/nan readings accepted"),
    M("unit-at-prefix", "console/host/parsers/systemd.py", "argv = [argv[0], *argv[2:]]", "argv = argv",
      UNITS, "ExecStart=@ keeps argv[0] as an argument"),
    M("unit-reset", "console/host/parsers/systemd.py", "exec_start.clear()  # an empty assignment",
      "pass  # an empty assignment",
      UNITS, "an empty ExecStart= in a drop-in no longer resets the list"),
    M("df-match", "console/host/parsers/host.py", "if len(disks) == len(paths):", "if len(disks) <= len(paths):",
      ("tests/host/test_parsers_host.py",), "df lines matched to paths when some path is missing",
      ("ValueError",)),  # the parser's own zip(strict=True) refuses the mismatch: the test sees it
    M("header-size", "console/host/parsers/hf_listing.py", "8 + int(n) + int(end) if", "int(n) + int(end) if",
      (TRUTH,), "a safetensors file's size from its header forgets the 8-byte length"),
    M("inspect-cap", "console/host/parsers/docker.py", "MAX_INSPECT_BYTES = 8 * 1024 * 1024",
      "MAX_INSPECT_BYTES = 16 * 1024 * 1024",
      ("tests/host/test_docker.py::test_a_docker_inspect_of_8_mib_is_read_and_a_larger_one_is_refused_as_not_docker_output",),
      "docker inspect output over 8 MiB is parsed (the cap at its shipped value)"),
    # -- download truth ------------------------------------------------------------------------
    M("download-header-le", "console/domain/analysis/download.py", "if want is None or f.size_bytes == want:",
      "if want is None or f.size_bytes <= want:", (TRUTH,),
      "a truncated shard with no index and no listing passes its header check"),
    M("download-header-ge", "console/domain/analysis/download.py", "if want is None or f.size_bytes == want:",
      "if want is None or f.size_bytes >= want:", (TRUTH,),
      "a shard longer than its header says passes its header check"),
    M("download-complete", "console/domain/analysis/download.py",
      "complete = files_done == len(counted) and not problems and", "complete = files_done == len(counted) and",
      (TRUTH,), "complete despite wrong sizes"),
    # -- the journal and the host's lines ------------------------------------------------------
    M("journal-bytes", "console/host/sources/log.py",
      'return bytes(b for b in message if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")',
      "return None", JOURNAL, "journald's byte-array MESSAGE dropped"),
    M("stream-line-cap", "console/host/transport/streams.py", "MAX_LINE_BYTES = 64 << 10", "MAX_LINE_BYTES = 128 << 10",
      ("tests/host/test_stream_yields.py",), "a host line over 64 KiB is kept whole (the cap at its shipped value)"),
    # -- redaction -----------------------------------------------------------------------------
    M("redact-gate", "console/redact.py", "if not maybe_secret(text):", "if maybe_secret(text):",
      ("tests/domain/test_redact.py",), "the cheap pre-check inverted: secrets pass"),
    M("redact-hf", "console/redact.py", "hf_(?!transfer\\b)[A-Za-z0-9]{6,}", "hf_(?!transfer\\b)[A-Za-z0-9]{60,}",
      ("tests/domain/test_redact.py",), "bare hf_ tokens no longer found"),
    M("redact-sk-alphabet", "console/redact.py", "sk-[A-Za-z0-9_-]{6,}", "sk-[A-Za-z0-9]{6,}",
      SHAPES, "an OpenAI project key (sk-proj-…_…) is cut at its first dash or underscore"),
    M("redact-pat-alphabet", "console/redact.py", "github_pat_[A-Za-z0-9_]{6,}", "github_pat_[A-Za-z0-9]{6,}",
      SHAPES, "a GitHub fine-grained token is cut at its underscore, the rest shown"),
    M("redact-slack-alphabet", "console/redact.py", "xox[abposr]-[A-Za-z0-9-]{6,}", "xox[abposr]-[A-Za-z0-9]{6,}",
      SHAPES, "a Slack token is cut at its first dash"),
    M("redact-aws-length", "console/redact.py", "AKIA[0-9A-Z]{12,}", "AKIA[0-9A-Z]{20,}",
      SHAPES, "an AWS access key id (AKIA + 16) is no longer found"),
    M("redact-argv", "console/redact.py", "            secret_next = True", "            secret_next = False",
      ("tests/domain/test_redact.py",), "--api-key VALUE (two words) keeps VALUE"),
    M("redact-json-key", "console/redact.py",
      'secret = isinstance(k, str) and _SECRET_KEY.fullmatch(k) and not k.endswith(("tokens", "_len"))',
      "secret = False", ("tests/hostile/test_secrets_everywhere.py::test_secrets_in_server_info_are_redacted_as_decoded",),
      "/server_info's secret keys not replaced"),
    # -- freshness: every source's limit at its shipped value -----------------------------------
    *(M(f"stale-{source}", "console/core/freshness.py", f'"{source}": {limit}', f'"{source}": {limit * 2}', FRESH,
        f"the {source} reading stays live twice as long as its shipped {limit:g} s")
      for source, limit in (("gpu", 5.0), ("host", 15.0), ("download", 25.0), ("server", 30.0), ("service", 60.0))),
    # -- the downtime clock ----------------------------------------------------------------------
    M("downtime-start-get", "console/core/derive/swap_observer.py", 'event.kind == "access" and "POST" in event.text and',
      'event.kind == "access" and', DOWNTIME, "a GET after the last served request starts the downtime"),
    M("downtime-start-path", "console/core/derive/swap_observer.py", "and any(p in event.text for p in SERVED_PATHS))",
      ")", DOWNTIME, "a POST to a path that serves nobody (/flush_cache) starts the downtime"),
    M("downtime-start-stamp", "console/core/derive/swap_observer.py", "return at if before_s - at < 3600 else None",
      "return before_s if before_s - at < 3600 else None", DOWNTIME,
      "the downtime starts at the stop, not at the log's stamp of the last served request"),
    M("downtime-end-stamp", "console/core/derive/swap_observer.py",
      'self._downtime(out, replace(d, ended_at_s=at, end_source=f"{new_unit} ready"))',
      'self._downtime(out, replace(d, ended_at_s=time.time(), end_source=f"{new_unit} ready"))', DOWNTIME,
      "the downtime ends on the console's clock, not the reading's host stamp"),
    # -- the gate ------------------------------------------------------------------------------
    M("paths-real", "console/domain/paths.py", "        candidates.add(lexical(real))", "        pass",
      (PATHS,), "a symlink outside a forbidden prefix pointing into it passes"),
    M("paths-lexical", "console/domain/paths.py", "candidates = {lexical(path)}",
      "candidates = set() if real else {lexical(path)}",
      (PATHS,), "a path under a forbidden prefix that is a symlink out of it passes"),
    M("paths-under", "console/domain/paths.py", 'candidate == root or candidate.startswith(root + "/")',
      "candidate == root", (PATHS,), "a path under a forbidden prefix passes"),
    M("gate-unknown", "console/domain/swap/preflight.py", "return [c for c in checks if not c.passes]",
      "return [c for c in checks if c.ok is False]", (GATE,), "an unknown check no longer blocks the stop"),
    M("gate-disk", "console/domain/swap/preflight.py", "if d.fits_on_disk is False:", "if d.fits_on_disk is None:",
      (GATE,), "a download that does not fit on disk passes"),
    M("gate-download", "console/domain/swap/preflight.py",
      'return GateCheck("download", False, f"{shards}; {problems[0]}")',
      'return GateCheck("download", True, f"{shards}; {problems[0]}")', (GATE,),
      "a download with wrong sizes passes"),
    M("fit-kv-dtype", "console/domain/analysis/fit.py",
      'kv_dtype_bytes = DTYPE_BYTES.get(inp.kv_cache_dtype if inp.kv_cache_dtype != "auto" else ckpt_dtype, 2)',
      "kv_dtype_bytes = DTYPE_BYTES.get(ckpt_dtype, 2)", FIT, "the fit ignores --kv-cache-dtype"),
    M("fit-kv-flag", "console/domain/analysis/fit.py", 'kv_cache_dtype=text("--kv-cache-dtype") or "auto"',
      'kv_cache_dtype="auto"', FIT, "the unit's --kv-cache-dtype never reaches the fit"),
    # -- name checks on every swap path ----------------------------------------------------------
    M("names-unit-beside", "console/domain/swap/fastpath.py",
      '            unit = act.check_unit(self.ctl.new_unit)\n            return [act.Action("beside"',
      '            unit = self.ctl.new_unit\n            return [act.Action("beside"', NAMES,
      "the beside path starts an unchecked unit name"),
    M("names-unit-switch", "console/domain/swap/fastpath.py",
      "old = self.ctl.old_unit if cfp.active(self.ctl) else act.check_unit(self.ctl.old_unit)",
      "old = self.ctl.old_unit", NAMES, "switch_traffic stops an unchecked unit name"),
    M("names-unit-rollback-in-place", "console/domain/swap/fastpath.py",
      "            unit = act.check_unit(self.ctl.old_unit)\n            backup = self._backup()",
      "            unit = self.ctl.old_unit\n            backup = self._backup()", NAMES,
      "the in-place rollback restarts an unchecked unit name"),
    M("names-unit-rollback-beside", "console/domain/swap/fastpath.py",
      '            unit = act.check_unit(self.ctl.new_unit)\n            return [act.Action("rollback"',
      '            unit = self.ctl.new_unit\n            return [act.Action("rollback"', NAMES,
      "the beside rollback stops an unchecked unit name"),
    M("names-container-rollback-in-place", "console/domain/swap/container_fastpath.py",
      f'    old = {CHECK_OLD}\n    return act.Action("rollback"',
      '    old = ctl.old_unit\n    return act.Action("rollback"', NAMES,
      "the in-place rollback restarts an unchecked container name"),
    M("names-container-beside", "console/domain/swap/container_fastpath.py",
      f"    new = {CHECK_NEW}\n    why = beside_misfit", "    new = ctl.new_unit\n    why = beside_misfit",
      NAMES, "the beside path starts an unchecked container name"),
    M("names-container-switch", "console/domain/swap/container_fastpath.py",
      f'    old = {CHECK_OLD}\n    return act.RemoteCommand(act.bounded(["docker", "stop"',
      '    old = ctl.old_unit\n    return act.RemoteCommand(act.bounded(["docker", "stop"', NAMES,
      "switch_traffic stops an unchecked container name"),
    M("names-container-rollback-beside", "console/domain/swap/container_fastpath.py",
      f'    new = {CHECK_NEW}\n    return act.Action("rollback", f"Roll back: stop',
      '    new = ctl.new_unit\n    return act.Action("rollback", f"Roll back: stop', NAMES,
      "the beside rollback stops an unchecked container name"),
    # -- roles ---------------------------------------------------------------------------------
    M("role-override", "console/share/protocol.py", '"swap_preview", "swap_confirm", "swap_override"}',
      '"swap_preview", "swap_confirm"}', OVERRIDE, "an observer may override a gate check"),
    M("role-bench", "console/share/protocol.py", 'DRIVER_ONLY = frozenset({"verify", "swap", "pick", "bench", ',
      'DRIVER_ONLY = frozenset({"verify", "swap", "pick", ', OBSERVER_BENCH, "an observer may start a benchmark"),
    M("role-check", "console/share/server.py", "if kind in p.DRIVER_ONLY and peer.role != p.ROLE_DRIVER:",
      "if kind in p.DRIVER_ONLY and peer.role not in (p.ROLE_DRIVER, p.ROLE_OBSERVER):",
      OBSERVER_BENCH, "the core stops checking roles"),
    M("client-line-cap", "console/share/protocol.py", "MAX_CLIENT_LINE = 4096", "MAX_CLIENT_LINE = 8192",
      ("tests/share/test_share.py::test_a_client_line_of_4096_bytes_is_read_and_one_byte_more_is_refused_with_the_limit",),
      "a client line over 4096 bytes is read (the cap at its shipped value)"),
    # -- host keys -----------------------------------------------------------------------------
    M("hostkey-changed", "console/host/transport/ssh.py", "        if trusted:\n            raise HostKeyChanged(",
      "        if False:\n            raise HostKeyChanged(", ("tests/host/test_host_keys.py",),
      "a changed host key is treated as unknown (and recorded with --accept-new-host-key)"),
    M("hostkey-revoked", "console/host/transport/ssh.py",
      'if any(k.export_public_key("openssh").split()[:2] == presented for k in revoked):', "if False:",
      ("tests/host/test_host_keys.py",), "a @revoked key is accepted"),
    M("hostkey-port", "console/host/transport/ssh.py", "exact_port = port if port and port != 22 else None",
      "exact_port = None", ("tests/host/test_host_keys.py",), "port 22's entries trusted for any port"),
)


def copy_tree(dest: Path) -> None:
    """The working tree as git sees it (tracked and untracked, not ignored): no venv, no caches."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


_CRASH = re.compile(r"^\S.*:\d+: (\w[\w.]*)$")


def exception_type(element: ET.Element) -> str:
    """The exception a junitxml <failure>/<error> ended in: pytest's last `path:line: Type` line."""
    for line in reversed((element.text or "").splitlines()):
        m = _CRASH.match(line.strip())
        if m:
            return m.group(1).rsplit(".", 1)[-1]
    message = element.get("message") or ""
    head = message.split(":", 1)[0].strip()
    return head.rsplit(".", 1)[-1] if re.fullmatch(r"[\w.]+", head) else "?"


def read_junit(path: Path) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]], int]:
    """(failures, errors, tests run) from pytest's junitxml; each as (test id, exception type, message)."""
    root = ET.parse(path).getroot()
    failures, errors, count = [], [], 0
    for case in root.iter("testcase"):
        if case.find("skipped") is not None:
            continue  # a skipped test ran nothing: it neither kills nor lets survive
        count += 1
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        for tag, into in (("failure", failures), ("error", errors)):
            for element in case.findall(tag):
                message = (element.get("message") or "").strip().splitlines()
                into.append((name, exception_type(element), (message[0] if message else "")[:300]))
    return failures, errors, count


def run_tests(tree: Path, tests: tuple[str, ...], timeout_s: float, expect: tuple[str, ...] = ()) -> Outcome:
    """One pytest run of `tests` in the copy; the verdict from its junitxml, not its exit status."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryDirectory(prefix="gc-junit-") as junit_dir:
        junit = Path(junit_dir) / "report.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider", "--no-header",
               "-rfE", f"--junitxml={junit}", *tests]
        started = time.monotonic()
        # Its own process group: on a timeout the simulators and daemons a test started go with it.
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Outcome("timeout", time.monotonic() - started, note=f"over {timeout_s:.0f} s")
        out = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
        seconds = time.monotonic() - started
        if not junit.exists():
            tail = (out.stdout.strip().splitlines() or out.stderr.strip().splitlines() or [""])[-1]
            return Outcome("error", seconds, note=f"no report (exit {out.returncode}): {tail[:200]}")
        failures, errors, count = read_junit(junit)
    if out.returncode == 5 or count == 0:
        return Outcome("not run", seconds, note="no test ran (every selected test skipped or none collected)")
    noticed = tuple(f for f in failures if f[1] in ASSERTION_TYPES + expect)
    other = tuple(f for f in failures if f not in noticed)
    if errors or other:  # a collection or set-up error, or a crash with another exception: not a kill
        return Outcome("error", seconds, noticed, tuple(errors) + other)
    if noticed:
        return Outcome("failed", seconds, noticed)
    if out.returncode != 0:
        tail = (out.stdout.strip().splitlines() or [""])[-1]
        return Outcome("error", seconds, note=f"exit {out.returncode} with no failing test: {tail[:200]}")
    return Outcome("passed", seconds)


@dataclass
class Result:
    mutation: Mutation
    verdict: str
    seconds: float
    failures: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    note: str = ""

    def as_json(self) -> dict[str, object]:
        m = self.mutation
        return {"id": m.id, "path": m.path, "what": m.what, "tests": list(m.tests), "result": self.verdict,
                "failing_tests": self.failures, "errors": self.errors, "note": self.note,
                "seconds": round(self.seconds, 1)}


def _named(rows: tuple[tuple[str, str, str], ...]) -> list[dict[str, str]]:
    return [{"test": t, "exception": e, "message": msg} for t, e, msg in rows]


def judge(tree: Path, m: Mutation, timeout_s: float) -> Result:
    """The mutation applied, its tests run; a kill is run once more and must fail the same test."""
    target = tree / m.path
    original = target.read_text()
    target.write_text(original.replace(m.old, m.new, 1))
    try:
        first = run_tests(tree, m.tests, timeout_s, m.expect)
        if first.status != "failed":
            verdict = {"passed": "SURVIVED"}.get(first.status, first.status)
            return Result(m, verdict, first.seconds, _named(first.failures), _named(first.errors), first.note)
        again = run_tests(tree, m.tests, timeout_s, m.expect)
    finally:
        target.write_text(original)
    seconds = first.seconds + again.seconds
    same = again.status == "failed" and {f[0] for f in first.failures} & {f[0] for f in again.failures}
    if not same:
        return Result(m, "flaky", seconds, _named(first.failures), _named(again.errors),
                      f"the confirming run: {again.status} {again.note}".strip())
    return Result(m, "killed", seconds, _named(first.failures))


def stale(tree: Path, chosen: list[Mutation]) -> list[str]:
    out = []
    for m in chosen:
        count = (tree / m.path).read_text().count(m.old) if (tree / m.path).exists() else 0
        if count != 1:
            out.append(f"{m.id}: the text to mutate occurs {count} times in {m.path}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="run the mutations whose id starts with this")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per test run (default 300)")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = ap.parse_args()
    chosen = [m for m in MUTATIONS if m.id.startswith(args.only)]
    if len({m.id for m in MUTATIONS}) != len(MUTATIONS):
        print("two mutations share an id", file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:
            print(f"{m.id:34} {m.path:36} {m.what}")
        return 0
    if not chosen:
        print(f"no mutation id starts with {args.only!r}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gc-mutants-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        probe = subprocess.run([sys.executable, "-c", "import console; print(console.__file__)"], cwd=tree,
                               env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(tree)):
            print(f"the copy's console is not the one imported: {probe.stdout.strip()}", file=sys.stderr)
            return 2
        problems = stale(tree, chosen)
        if problems:
            print("stale mutation texts (update them with the code they mutate):", file=sys.stderr)
            for line in problems:
                print(f"  {line}", file=sys.stderr)
            return 2
        for tests in sorted({m.tests for m in chosen}):
            base = run_tests(tree, tests, args.timeout)
            if base.status == "not run":
                print(f"baseline {' '.join(tests)}: not run ({base.note}); its mutations are reported not run",
                      file=sys.stderr)
                continue
            if base.status != "passed":  # once more: on a loaded machine a test can be flaky; twice is a stop
                print(f"baseline {' '.join(tests)}: {base.status} {base.failures or base.errors or base.note}; "
                      "again", file=sys.stderr)
                base = run_tests(tree, tests, args.timeout)
            if base.status != "passed":
                print(f"baseline {' '.join(tests)}: {base.status} {base.failures or base.errors or base.note}",
                      file=sys.stderr)
                return 2
        results = []
        for m in chosen:
            r = judge(tree, m, args.timeout)
            results.append(r)
            who = r.failures[0]["test"].split("::")[-1] if r.failures else r.note
            print(f"{m.id:34} {r.verdict:9} {r.seconds:6.1f}s  {m.what}  [{who[:90]}]", flush=True)
    killed = sum(1 for r in results if r.verdict == "killed")
    print(f"\nkilled {killed} of {len(results)} mutations ({100 * killed / len(results):.0f} %), each by a named "
          "test failing its assertion twice")
    for r in results:
        if r.verdict != "killed":
            print(f"  {r.verdict}: {r.mutation.id} ({r.mutation.path}): {r.mutation.what} {r.note}".rstrip())
    if args.json:
        Path(args.json).write_text(json.dumps({"killed": killed, "total": len(results),
                                               "mutations": [r.as_json() for r in results]}, indent=1) + "\n")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
