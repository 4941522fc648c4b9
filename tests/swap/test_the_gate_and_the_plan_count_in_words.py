"""The demo's plan and its report read '1 run(s); last: 775 output tok/s', '10 change(s), no error in
the lints', '2 path(s), none under /data', 'the checkpoint has 1 MTP layer(s)': a count the console
knows, said as if it did not. Each reads as the operator says it (1 run, 10 changes, 1 file differs)."""

from __future__ import annotations

from types import SimpleNamespace

from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import build_report, side_from_text
from console.domain.swap import preflight
from console.host.sources.download import VerifyProgress

OLD = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m/old --tp-size 4\n"
NEW = ("[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m/new --tp-size 4 "
       "--speculative-algorithm NEXTN\n")


class _State:
    """Only what the gate reads: `data(name)`, `verify` and the swap's install fact."""

    def __init__(self, **data: object) -> None:
        self._data = data
        self.verify = None
        self.swap = SimpleNamespace(install_diff=lambda: None, install_change_unknown=lambda: None)
        self.info = None

    def data(self, name: str) -> object:
        return self._data.get(name)


def _service(old: str, new: str, config: dict[str, object] | None = None) -> object:
    return build_report(side_from_text("old.service", old), side_from_text("new.service", new),
                        HostFacts(model_config=config))


def test_one_change_and_one_path_read_singular() -> None:
    state = _State(service=_service(OLD.replace("--tp-size 4", "--tp-size 4 --speculative-algorithm NEXTN"), NEW))
    assert preflight.check_diff(state).reason == "1 change, no error in the lints"
    assert preflight.check_paths(state, ("/data",), None).reason == "1 path, none under /data"


def test_several_read_plural() -> None:
    state = _State(service=_service(OLD, NEW))
    assert preflight.check_diff(state).reason == "2 changes, no error in the lints"
    assert preflight.check_paths(state, ("/data",), "/m/new").reason == "2 paths, none under /data"


def test_one_file_that_differs_reads_differs() -> None:
    state = _State()
    state.verify = VerifyProgress(2, 10, 2, 10, 1, ("b: sha256 differs",), finished=True)
    assert preflight.check_sha(state, True).reason.startswith("1 file differs from ")


def test_one_mtp_layer_is_one_layer() -> None:
    report = _service(OLD, NEW, {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
                                 "text_config": {"mtp_num_hidden_layers": 1}})
    words = " ".join([c.reason or "" for c in report.changes] + [lint.message for lint in report.lints])
    assert "1 MTP layer" in words and "layer(s)" not in words, words
