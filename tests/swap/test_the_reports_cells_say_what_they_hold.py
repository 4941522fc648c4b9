"""Two cells of the swap report that said less than the truth: the GPU memory table's "freed" of a
GPU that holds more after the swap (beside: the new server's GPUs) read "0" under the note "freed:
before minus after" (before minus after was −85,975); the audit's output column was the last 160
characters cut inside a word ("vice  Running as unit: …")."""

from __future__ import annotations

from console.domain.swap.report import _gpu_table, _tail


def _rows(g: dict) -> dict[str, list[str]]:
    _, header, rows, _ = _gpu_table(g)
    return {row[0]: dict(zip(header, row, strict=True)) for row in rows}


def test_a_gpu_that_holds_more_after_the_swap_freed_nothing_and_says_how_much_it_took() -> None:
    g = {"recorded": True, "before": [{"gpu": 0, "used_mib": 91_204, "total_mib": 97_887},
                                      {"gpu": 4, "used_mib": 0, "total_mib": 97_887}],
         "after": [{"gpu": 0, "used_mib": 0, "total_mib": 97_887}, {"gpu": 4, "used_mib": 85_975, "total_mib": 97_887}],
         "freed": [{"gpu": 0, "mib": 91_204, "from": 91_204, "to": 0}], "freed_by": "the swap"}
    rows = _rows(g)
    assert rows["0"]["freed (MiB)"] == "91,204"
    assert rows["4"]["freed (MiB)"] == "none (+85,975 in use)"


def test_a_gpu_unchanged_freed_zero_and_an_unknown_one_is_unknown() -> None:
    g = {"recorded": True, "before": [{"gpu": 1, "used_mib": 500}, {"gpu": 2, "used_mib": None}],
         "after": [{"gpu": 1, "used_mib": 500}, {"gpu": 2, "used_mib": 10}], "freed": []}
    rows = _rows(g)
    assert rows["1"]["freed (MiB)"] == "0" and rows["2"]["freed (MiB)"] == "–"


def test_the_audits_output_begins_at_a_word_and_says_it_was_cut() -> None:
    out = ("Running as unit: gpuconsole-download-x.service; invocation ID: " + "a" * 20 + "\n") * 4
    cut = _tail(out, 160)
    assert len(cut) <= 160 and cut.startswith("…") and cut.endswith("a" * 20)
    assert cut[1:].split(" ")[0] in ("Running", "as", "unit:", "gpuconsole-download-x.service;", "invocation", "ID:",
                                     "a" * 20), cut
    assert _tail("ok\n", 160) == "ok" and _tail("", 160) == ""
