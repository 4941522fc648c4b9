"""Counting output tokens when the server does not say how many each chunk carried.

SGLang sends `usage` on every chunk when asked (`continuous_usage_stats`), and that count is used
as is. Other OpenAI-compatible servers send it only at the end, or never. Then, as
sglang.bench_serving does, the streamed text is tokenized: with the model's tokenizer when one
is at hand (a `tokenizer.json`, read with the `tokenizers` package), else the total comes from
the final usage or from `finish_reason: "length"` (exactly `max_tokens` were generated) and is
spread over the chunks by their share of the text. Each run says which way it counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class Counter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class TokenizerError(ValueError):
    """The tokenizer could not be loaded; the message says why, in one line."""


class HfTokenizer:
    """A Hugging Face fast tokenizer from its `tokenizer.json` (a file, or a model directory)."""

    def __init__(self, path: str) -> None:
        p = Path(path)
        file = p / "tokenizer.json" if p.is_dir() else p
        if not file.is_file():
            raise TokenizerError(f"{path}: no tokenizer.json there")
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise TokenizerError("counting with a tokenizer needs the 'tokenizers' package "
                                 "(pip install 'gpuconsole[bench]')") from None
        try:
            self._tok: Any = Tokenizer.from_file(str(file))
        except Exception as exc:  # noqa: BLE001 - the library raises bare Exceptions
            raise TokenizerError(f"{file}: not a tokenizer ({str(exc)[:120]})") from None
        self.name = f"tokenizer {p.name if p.is_dir() else p.parent.name}"

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)


def load_counter(path: str | None) -> Counter | None:
    return HfTokenizer(path) if path else None
