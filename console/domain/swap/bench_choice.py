"""Which benchmark runs a swap compares: the one like-workload rule, read from the swap state by the
report (console/domain/swap/report.py) and by the benchmark step's words (console/domain/swap/steps.py),
so the plan and the report can never name different runs.

Before = the old model's runs before the swap began, after = the new model's runs after its ready, by
the swap's own times (a run of the new model is never "before"; in place the model's name is the
same, so time decides). The headline compares the newest after run that has an earlier run of the old
model with its workload, and that run. A run stopped part way (x) or that finished nothing is never a
result, nor one with failed requests (it is named in the note, never compared).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.domain.analysis.bench_view import is_result


@dataclass(frozen=True, slots=True)
class BenchChoice:
    before: dict[str, Any] | None  # the old model's run shown as "before" (the like one when there is one)
    after: tuple[dict[str, Any], ...]  # the new model's runs after its ready
    compared: tuple[dict[str, Any], dict[str, Any]] | None  # (before, after) of one workload, or None
    partial: tuple[dict[str, Any], ...]  # runs with failed requests: left out
    note: str | None  # why nothing is compared, and what was left out


def complete(r: dict[str, Any]) -> bool:
    """Every request of the run finished (a record without the counts is taken as it is)."""
    done, asked = r.get("completed"), r.get("num_prompts")
    return not (isinstance(done, int) and isinstance(asked, int) and done < asked)


def workload(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r.get("max_concurrency") or r.get("concurrency"), r.get("random_input_len"), r.get("random_output_len"),
            r.get("dataset_name"))


def _fmt(v: Any) -> str:
    return "–" if v is None else str(v)


def workload_text(r: dict[str, Any]) -> str:
    c, i, o, _ = workload(r)
    return f"c={_fmt(c)} · {_fmt(i)}/{_fmt(o)}"


def _ready_at(swap: Any) -> float | None:
    if swap.time_to_ready() is None:
        return None
    key = {"in-place": "in_place", "beside": "beside"}.get(swap.path() or "", "start_new")
    step = swap.steps.get(key)
    d = swap.downtime
    return (d.ended_at_s if key != "beside" and d is not None and d.ended_at_s is not None
            else step.ended_at_s if step is not None else None)


def choose(state: Any) -> BenchChoice:
    """The runs the swap compares, from the state's bench history and the swap's own times."""
    stopped = tuple(r for r in state.bench.history if is_result(r) and r.get("stopped"))
    results = [r for r in state.bench.history if is_result(r) and not r.get("stopped")]
    partial = tuple(r for r in results if not complete(r))
    runs = [r for r in results if complete(r)]
    swap = state.swap
    stop_at = swap.began_at_s()  # the host began to change: every run before it is the old model's
    ready_at = _ready_at(swap)

    def stamp(r: dict[str, Any]) -> float:
        return float(r.get("timestamp", 0) or 0)

    if ready_at is not None:
        after = [r for r in runs if stamp(r) >= ready_at]
    else:
        bench = swap.steps.get("benchmark")
        after = [r for r in runs if bench and bench.started_at_s and stamp(r) >= bench.started_at_s - 1]
    new_model = after[-1].get("model") if after else None
    # Before the swap began (by its time; the model's name alone cannot tell: in place it is
    # the same); with no known beginning, a run of another model than the new one's.
    before_all = [r for r in runs if r not in after and (
        stamp(r) < stop_at if stop_at is not None else new_model is None or r.get("model") != new_model)]
    pair = next(((b, a) for a in reversed(after) for b in reversed(before_all) if workload(b) == workload(a)), None)
    before = pair[0] if pair else (before_all[-1] if before_all else None)
    note = None
    if before is None:
        note = "no earlier run of the old model on this host in the recording"
    elif after and pair is None:
        note = "not comparable: the old model's last run had another workload (" \
               f"{workload_text(before)} against {workload_text(after[-1])})"
    if partial:
        note = "; ".join(x for x in (note, "left out, not every request finished: " + _runs(partial)) if x)
    if stopped:  # a run stopped part way is never a result, and never left out without a word
        note = "; ".join(x for x in (note, "left out, stopped part way: " + _runs(stopped)) if x)
    return BenchChoice(before, tuple(after), pair, partial, note)


def _runs(runs: tuple[dict[str, Any], ...], most: int = 3) -> str:
    """Runs left out, each with how far it got ("3 of 8 finished, 5 failed": the failed count only
    where the record has one; a record without it is not said to have failed)."""
    def one(r: dict[str, Any]) -> str:
        failed = r.get("failed")
        got = f"{r.get('completed')} of {r.get('num_prompts')} finished" + (
            f", {failed} failed" if isinstance(failed, int) and not isinstance(failed, bool) else "")
        return f"{r.get('model')} {workload_text(r)} ({got})"
    said = ", ".join(one(r) for r in runs[-most:])
    return said + (f" (and {len(runs) - most} earlier)" if len(runs) > most else "")


def compared_words(state: Any) -> str:
    """What the benchmark step says of the old model's run: the one the report compares with."""
    c = choose(state)
    old = c.compared[0] if c.compared else None
    if old is not None:
        tput = old.get("output_throughput")
        did = f"did {tput:.0f} tok/s" if isinstance(tput, (int, float)) else "ran"
        return f"the old model ({old.get('model')}) {did} on the same workload ({workload_text(old)})"
    if c.before is not None and c.note:
        return c.note
    return "no earlier run of the old model on this host to compare with"


__all__ = ["BenchChoice", "choose", "compared_words", "complete", "workload", "workload_text"]
