"""The stop step said 'freed GPU 0 91,204 MiB (91,204 → 0 MiB), GPU 1 91,208 MiB (91,208 → 0 MiB), …'
beside 'GPU memory drained (0 MiB in use on 4 GPUs)': every figure twice. A GPU that holds nothing
now says what it freed once; one that still holds memory says what is left."""

from __future__ import annotations

from console.core.derive.swap_view import freed_lines


def test_a_drained_gpu_says_its_figure_once_and_a_partial_one_what_is_left() -> None:
    memory = {"freed": [{"gpu": 0, "mib": 91_204, "from": 91_204, "to": 0},
                        {"gpu": 1, "mib": 90_698, "from": 91_210, "to": 512}]}
    assert freed_lines(memory) == ["GPU 0 91,204 MiB", "GPU 1 90,698 MiB (512 MiB left)"]
    assert all(line.count("91,2") <= 1 for line in freed_lines(memory))
