"""What to send: random prompts of given lengths (seeded), or a ShareGPT-format JSON file."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

# Common English words: one word is close to one token for BPE tokenizers, and the server's
# `usage` reports the true count anyway.
WORDS = tuple((  # noqa: SIM905 - a readable word list
    "the of and to in is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so what no out up "
    "into them can more some time could my than first two may then do any like other how its our "
    "over only new these also people after most made between many those way such where before well "
    "back through years much work because down should each just state still system long").split())


@dataclass(frozen=True, slots=True)
class Prompt:
    text: str
    prompt_len: int  # the declared length (the server's usage replaces it when sent)
    output_len: int


def random_prompts(n: int, input_len: int, output_len: int, *, seed: int = 42, range_ratio: float = 1.0
                   ) -> list[Prompt]:
    """Lengths uniform in [len·ratio, len] as sglang.bench_serving's `compute_random_lens` (ratio 1: fixed)."""
    rng = random.Random(seed)

    def length(full: int) -> int:
        return rng.randint(max(int(full * range_ratio), 1), full) if range_ratio < 1 else full

    prompts = []
    for _ in range(n):
        il, ol = length(input_len), length(output_len)
        prompts.append(Prompt(" ".join(rng.choices(WORDS, k=il)), il, ol))
    return prompts


class WorkloadError(ValueError):
    """The dataset file is missing or not ShareGPT-shaped; the message says which."""


def sharegpt_prompts(path: str, n: int, *, output_len: int | None = None, seed: int = 42) -> list[Prompt]:
    """First human turn as the prompt; the reply's length (in words) as the output length."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorkloadError(f"{path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{path}: not JSON ({exc.msg} at char {exc.pos})") from None
    except (ValueError, RecursionError) as exc:  # not UTF-8, a 5,000-digit number, nesting too deep
        raise WorkloadError(f"{path}: not a usable JSON file ({type(exc).__name__})") from None
    if not isinstance(data, list):
        raise WorkloadError(f"{path}: expected a list of conversations")
    prompts = []
    for item in data:
        conv = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(conv, list) or len(conv) < 2 or not all(isinstance(c, dict) for c in conv[:2]):
            continue
        ask, answer = conv[0].get("value", ""), conv[1].get("value", "")
        if not isinstance(ask, str) or not isinstance(answer, str) or not ask or not answer:
            continue
        prompts.append(Prompt(ask, len(ask.split()), output_len or max(4, len(answer.split()))))
    if not prompts:
        raise WorkloadError(f"{path}: no conversations with a question and an answer")
    random.Random(seed).shuffle(prompts)
    return prompts[:n]
