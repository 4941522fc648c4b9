"""Gate semantics (issue 20 item 7): a refusal is a refusal, "not checked" is grey and never a green
✓, offline the download check passes on the kept listing and the shards' headers; and one
verification state that the plan, the gate and the report all read."""

from __future__ import annotations

from console.domain.analysis.download import DownloadProgress
from console.core.state import HostState, ReadingChanged, VerifyChanged
from console.model import Reading
from console.ui.panes.swap import format_plan
from console.host.sources.download import VerifyProgress
from console.domain.swap import preflight
from console.core.derive.swap_view import GateChanged, GateCheck, SwapSetup, SwapStep, SwapStepChanged
from console.domain.swap.report import ReportBuilder
from tests.kit.swap import as_recorded


def _download(**changes: object) -> DownloadProgress:
    fields: dict[str, object] = dict(
        model_dir="/shared/models/m", repo_id="Qwen/Qwen3.5-122B-A10B", expected_source="listing",
        bytes_done=250_000_000_000, bytes_total=250_000_000_000, shards_done=39, shards_total=39, files_done=50,
        files_total=50, partial_files=(), rate_bytes_per_s=None, eta_s=None, stalled_since=None,
        disk_free_bytes=600_000_000_000, fits_on_disk=True, complete=True, problems=(), sampled_at_s=100.0)
    fields.update(changes)
    return DownloadProgress(**fields)  # type: ignore[arg-type]


def _state() -> HostState:
    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", "Qwen/Qwen3.5-122B-A10B", "/shared/models/m"))
    return state


def test_offline_the_download_check_passes_on_the_kept_listing_and_the_shards_headers() -> None:
    for source in ("listing", "index"):
        state = _state()
        offline = _download(expected_source=source, problems=("Hub: cannot reach huggingface.co: no route",))
        state.apply(ReadingChanged("h", "download", Reading("download", offline, 100.0)))
        check = preflight.check_download(state)
        assert check.ok is True and check.passes, (source, check)
        assert "39/39 shards" in check.reason
    # A real fault of the files still blocks, Hub or not.
    state = _state()
    bad = _download(problems=("wrong size: model-00001-of-00039.safetensors: 10 bytes on disk",), complete=False)
    state.apply(ReadingChanged("h", "download", Reading("download", bad, 100.0)))
    assert preflight.check_download(state).ok is False


def test_a_check_nobody_asked_for_is_grey_not_checked_never_a_green_tick() -> None:
    state = _state()
    check = preflight.check_sha(state, wanted=False)
    assert check.ok is None and check.verdict == "not checked" and check.passes  # it does not block
    state.apply(GateChanged("h", (check, GateCheck("paths", True, "1 path(s), none under /data")), 1.0))
    plan = format_plan(state.swap, 10.0)
    gate = plan.plain.split("preflight gate")[1].splitlines()
    line = next(ln for ln in gate if "sha256" in ln)
    assert "✓" not in line and line.lstrip().startswith("–"), line
    style = {s.style for s in plan.spans if plan.plain[s.start:s.end].strip().startswith("–")}
    assert "dim" in style and "green" not in style
    assert next(ln for ln in gate if "paths" in ln).lstrip().startswith("✓")
    # Undecided where it is required: a question mark, and it blocks.
    undecided = GateCheck("flags", None, "not checked against the host's SGLang")
    assert undecided.verdict == "unknown" and not undecided.passes


def test_a_refusal_is_drawn_as_a_refusal_without_rollback_advice() -> None:
    state = _state()
    state.apply(SwapStepChanged("h", SwapStep("stop_old", "Stop the old service, drain GPU memory", "refused", 5.0,
                                              5.0, "the preflight gate refuses: diff: --quantization; nothing ran, "
                                                   "old.service still serves")))
    text = format_plan(state.swap, 10.0).plain
    assert "rolls back" not in text and "refused" in text and "still serves" in text
    assert "✗" not in next(ln for ln in text.splitlines() if "Stop the old service" in ln)


def test_verifying_in_the_download_pane_is_what_the_plan_the_gate_and_the_report_say() -> None:
    """`v` in the Download pane verifies 40/40: the plan's Verify step is done, the gate's sha256 check
    passes (asked for by the profile or not), the report says 40/40 and not "pending"."""
    from console.core.derive.swap_observer import SwapObserver

    builder = ReportBuilder("h", "h")
    state = builder.state
    events = [SwapSetup("h", "old.service", "new.service", None, "/shared/models/m", verify_sha=True),
              VerifyChanged("h", VerifyProgress(40, 10_000, current="a.safetensors")),
              VerifyChanged("h", VerifyProgress(40, 10_000, done_files=12, done_bytes=3000, matched=12)),
              VerifyChanged("h", VerifyProgress(40, 10_000, done_files=40, done_bytes=10_000, matched=40,
                                                finished=True))]
    for i, e in enumerate(as_recorded(events)):  # the recording holds the live observer's steps
        builder.feed(100.0 + i, e)
        if isinstance(e, SwapStepChanged) and e.step.state == "running":
            assert state.swap.steps["verify"].state == "running"
            assert preflight.check_sha(state, wanted=True).ok is False  # running: not yet
    step = state.swap.steps["verify"]
    assert step.state == "done" and "40/40" in step.detail and step.observed
    for wanted in (True, False):
        check = preflight.check_sha(state, wanted=wanted)
        assert check.ok is True and "40/40" in check.reason
    r = builder.build()
    verify = next(s for s in r["steps"] if s["key"] == "verify")
    assert verify["state"] == "done" and r["download"]["verification"]["matched"] == 40
    # A mismatch found by `v` blocks even when the profile does not ask for sha256.
    bad = HostState("h")
    bad.apply(VerifyChanged("h", VerifyProgress(40, 1, done_files=40, matched=39, mismatched=("x: sha256 differs",),
                                                finished=True)))
    assert preflight.check_sha(bad, wanted=False).ok is False
    assert SwapObserver(bad).see(bad.swap) == []  # not an event: nothing derived


# -- the gate as a pure function over the host's state --------------------------------------------
class _GateState:
    """Only what the gate reads: `data(name)` and `verify`."""

    def __init__(self, **data: object) -> None:
        self._data = data
        self.verify = None

    def data(self, name: str) -> object:
        return self._data.get(name)


def _gate_download(**changes: object) -> object:
    from types import SimpleNamespace

    values: dict[str, object] = dict(shards_done=2, shards_total=2, problems=(), partial_files=(), complete=True,
                                     bytes_done=10, bytes_total=10, disk_free_bytes=500e9, fits_on_disk=True,
                                     expected_source="the Hub's file list")
    values.update(changes)
    return SimpleNamespace(**values)


def test_the_gate_refuses_a_download_with_wrong_sizes_or_partial_files_and_says_why() -> None:
    assert preflight.check_download(_GateState(download=_gate_download())).ok is True
    wrong = preflight.check_download(_GateState(download=_gate_download(problems=("wrong size: a is truncated",))))
    assert (wrong.ok, wrong.reason) == (False, "2/2 shards; wrong size: a is truncated")
    partial = preflight.check_download(_GateState(download=_gate_download(partial_files=("x",))))
    assert (partial.ok, partial.reason) == (False, "2/2 shards, 1 file still partial")
    assert preflight.check_download(_GateState(download=_gate_download(complete=None))).ok is None
    assert preflight.check_download(_GateState()).ok is None


def test_the_gate_refuses_a_download_that_does_not_fit_on_the_disk() -> None:
    assert preflight.check_disk(_GateState(download=_gate_download())).ok is True
    assert preflight.check_disk(_GateState(download=_gate_download(fits_on_disk=False, disk_free_bytes=3e9))).ok is False
    assert preflight.check_disk(_GateState(download=_gate_download(fits_on_disk=None))).ok is True  # free space known
    assert preflight.check_disk(_GateState(download=_gate_download(disk_free_bytes=None))).ok is None


def test_an_undecided_check_holds_the_stop_until_someone_overrides_it() -> None:
    checks = (GateCheck("download", True, "ok"), GateCheck("fit", None, "no GPU data yet"),
              GateCheck("paths", False, "under /data"))
    assert [c.name for c in preflight.failing(checks)] == ["fit", "paths"]
    overridden = (checks[0], GateCheck("fit", None, "no GPU data yet", overridden_by="ana"), checks[2])
    assert [c.name for c in preflight.failing(overridden)] == ["paths"]
