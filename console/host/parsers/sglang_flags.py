"""SGLang's server flags: the built-in table (SGLang 0.5.23's own argparse parser, dumped) or a
table read from the host's `python -m sglang.launch_server --help`.

Option lookup follows argparse with `allow_abbrev=True`, as SGLang's parser does: an exact option
string wins; otherwise a prefix that matches exactly one option string is accepted (`--tp` is
`--tp-size`, `--speculative-algo` is `--speculative-algorithm`), and a prefix that matches
several is an error (`--quant`), as SGLang itself would fail on it.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from dataclasses import dataclass
from functools import lru_cache

from console.locations import DATA_DIR

DATA = DATA_DIR


@dataclass(frozen=True, slots=True)
class FlagSpec:
    flag: str  # the canonical long name, e.g. --tp-size
    aliases: tuple[str, ...]
    dest: str
    category: str
    type: str
    default: object
    choices: tuple[str, ...] | None
    takes_value: bool
    nargs: str | None  # "+", "*", "?" or None (exactly one value when takes_value)
    negatable: bool  # BooleanOptionalAction: --x / --no-x
    deprecated: bool
    quantization_specific: str | None
    speculative_specific: bool
    help: str


@dataclass(frozen=True, slots=True)
class Lookup:
    spec: FlagSpec | None
    negated: bool = False
    error: str | None = None  # "unknown" or "ambiguous: ..."


class FlagTable:
    def __init__(self, specs: list[FlagSpec], version: str, removed: dict[str, list[str]] | None = None) -> None:
        self.version = version
        self.specs = {s.flag: s for s in specs}
        self.options: dict[str, tuple[FlagSpec, bool]] = {}
        for s in specs:
            for opt in (s.flag, *s.aliases):
                self.options[opt] = (s, False)
            if s.negatable:
                self.options["--no-" + s.flag[2:]] = (s, True)
        self.removed = removed or {}
        self._sorted = sorted(self.options)

    def lookup(self, option: str) -> Lookup:
        if option in self.options:
            spec, neg = self.options[option]
            return Lookup(spec, neg)
        # The options that start with `option` sit together in the sorted list: bisect, not a scan
        # (a command line of 100,000 abbreviated flags took 30 s).
        start = bisect.bisect_left(self._sorted, option)
        matches = list(itertools.takewhile(lambda o: o.startswith(option), self._sorted[start:start + 64]))
        if len(matches) == 1:
            spec, neg = self.options[matches[0]]
            return Lookup(spec, neg)
        if len(matches) > 1:
            return Lookup(None, error=f"ambiguous: {option} could match {', '.join(matches[:6])}"
                                      + (" …" if len(matches) > 6 else ""))
        return Lookup(None, error="unknown")

    def removed_in(self, option: str) -> str | None:
        """The older version that still had this flag, if it is gone now."""
        for version, flags in sorted(self.removed.items()):
            if option in flags:
                return version
        return None


def _spec(d: dict[str, object]) -> FlagSpec:
    typ = str(d.get("type") or "")
    m = re.search(r"nargs=([+*?])", typ)
    choices = d.get("choices")
    return FlagSpec(
        flag=str(d["flag"]), aliases=tuple(d.get("aliases") or ()),  # type: ignore[arg-type]
        dest=str(d.get("dest") or ""), category=str(d.get("category") or "other"), type=typ,
        default=d.get("default"), choices=tuple(str(c) for c in choices) if isinstance(choices, list) else None,
        takes_value=bool(d.get("takes_value")), nargs=m.group(1) if m else None,
        negatable="--no-" in typ or d.get("action") == "BooleanOptionalAction",
        deprecated=bool(d.get("deprecated")),
        quantization_specific=str(d["quantization_specific"]) if d.get("quantization_specific") else None,
        speculative_specific=bool(d.get("speculative_specific")), help=str(d.get("help") or ""),
    )


@lru_cache(maxsize=1)
def builtin_table() -> FlagTable:
    data = json.loads((DATA / "sglang_flags_0.5.23.json").read_text())
    return FlagTable([_spec(d) for d in data["flags"]], data["version"], data.get("removed_since"))


_HELP_OPTION = re.compile(r"^\s{2}(--?[A-Za-z][\w-]*(?:[ =][^\s,]+)?(?:,\s*--?[A-Za-z][\w-]*(?:[ =][^\s,]+)?)*)")


def table_from_help(help_text: str, version: str) -> FlagTable:
    """Option strings from argparse `--help` output; categories and details come from the built-in
    table where the flag is known there."""
    known = builtin_table()
    specs: dict[str, FlagSpec] = {}
    for line in help_text.splitlines():
        m = _HELP_OPTION.match(line)
        if not m:
            continue
        parts = [p.strip() for p in m.group(1).split(",")]
        opts = [p.split()[0].split("=")[0] for p in parts if p.startswith("--")]
        if not opts:
            continue
        takes_value = any(len(p.split()) > 1 or "=" in p for p in parts)
        negatable = any(o.startswith("--no-") for o in opts)
        positive = [o for o in opts if not (negatable and o.startswith("--no-"))]
        # `--no-foo` alone is a flag of that name, not the negation of one (IndexError before; #21 item 12)
        opts, negatable = (positive, negatable) if positive else (opts, False)
        canonical = opts[-1] if len(opts) > 1 and opts[-1] in known.specs else opts[0]
        base = known.specs.get(canonical) or next((known.specs[o] for o in opts if o in known.specs), None)
        if base is not None:
            spec = FlagSpec(canonical, tuple(o for o in opts if o != canonical), base.dest, base.category,
                            base.type, base.default, base.choices, takes_value, base.nargs, negatable,
                            base.deprecated or "deprecated" in line.lower(), base.quantization_specific,
                            base.speculative_specific, base.help)
        else:
            spec = FlagSpec(canonical, tuple(o for o in opts if o != canonical), canonical[2:].replace("-", "_"),
                            "other", "str" if takes_value else "bool_flag", None, None, takes_value, None,
                            negatable, "deprecated" in line.lower(), None, False, "")
        specs[canonical] = spec
    return FlagTable(list(specs.values()), version, known.removed)
