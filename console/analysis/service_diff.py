"""The SGLang-aware diff of two services, the reasons behind each change, and the lints that
catch the seeds' blind spots. Pure: everything the host knows arrives in `HostFacts`."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from console.parsers.sglang_argv import SglangCommand
from console.parsers.sglang_flags import FlagTable, builtin_table

CATEGORIES = {
    "model": "model identity", "dtype_quantization": "dtype/quantization",
    "kernel_backend": "kernel backends", "cuda_graph_compile": "kernel backends", "overlap": "kernel backends",
    "parallelism": "parallelism", "communication": "parallelism", "disaggregation": "parallelism",
    "moe_expert": "parallelism", "memory_scheduling": "memory", "mamba_hybrid": "memory",
    "prefix_cache_hicache": "memory", "offload": "memory", "speculative": "speculative decoding",
    "serving_features": "API features", "multimodal": "API features", "lora": "API features",
    "observability_logging": "observability",
}
CATEGORY_ORDER = ("model identity", "dtype/quantization", "kernel backends", "parallelism", "memory",
                  "speculative decoding", "API features", "observability", "other")
SECRET_NAME = re.compile(r"(TOKEN|API_KEY|APIKEY|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE_KEY)", re.I)
SECRET_FLAG = re.compile(r"(api-key|token|secret|password)$", re.I)  # --api-key, --hf-token; not --max-total-tokens
REDACTED = "‹redacted›"
FP4_METHODS = {"modelopt_fp4", "nvfp4_online", "petit_nvfp4", "mxfp4", "quark_mxfp4", "w4afp8"}
FP4_MOE_RUNNERS = {"flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl", "flashinfer_mxfp4"}
PATH_FLAGS = ("--model-path", "--tokenizer-path", "--download-dir", "--speculative-draft-model-path")
DEPRECATION_HINTS = {
    "--disable-cuda-graph": "--cuda-graph-backend-decode disabled / --cuda-graph-backend-prefill disabled",
    "--enable-dp-attention": "--attn-dp-size N",
    "--grpc-mode": "--smg-grpc-mode",
    "--enable-flashinfer-allreduce-fusion": "--flashinfer-allreduce-fusion-backend auto",
    "--disable-fast-image-processor": "--image-processor-backend pil",
    "--cuda-graph-max-bs": "--cuda-graph-max-bs-decode (and --cuda-graph-max-bs-prefill)",
    "--cuda-graph-bs": "--cuda-graph-bs-decode / --cuda-graph-bs-prefill",
    "--mamba-scheduler-strategy": "--mamba-radix-cache-strategy",
}


@dataclass(frozen=True, slots=True)
class FlagChange:
    flag: str
    change: str  # "added", "removed" or "changed"
    old: Any
    new: Any
    category: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class EnvChange:
    name: str
    change: str
    old: str | None
    new: str | None


@dataclass(frozen=True, slots=True)
class Lint:
    severity: str  # "error", "warning" or "info"
    flag: str | None
    message: str


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What the host told us, for the lints. Unknown is None: a lint that needs it is skipped."""

    model_config: dict[str, Any] | None = None
    paths_exist: dict[str, bool] = field(default_factory=dict)
    forbidden_prefixes: tuple[str, ...] = ()
    gpu_count: int | None = None
    real_paths: dict[str, str] = field(default_factory=dict)  # `realpath -m` on the host (issue 21, item 14)


def redact_value(flag: str, value: Any) -> Any:
    if SECRET_FLAG.search(flag) and value not in (None, True, False):
        return REDACTED
    return value


def redact_env(name: str, value: str | None) -> str | None:
    if value is None or not SECRET_NAME.search(name):
        return value
    return REDACTED


def redacted_argv(cmd: SglangCommand, table: FlagTable | None = None) -> list[str]:
    """The command line with secret values replaced, for panes, JSON and screenshots."""
    table = table or builtin_table()
    out: list[str] = list(cmd.launcher)
    hide_next = False
    for word in cmd.argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        option, eq, _ = word.partition("=")
        if word.startswith("--"):
            spec = table.lookup(option).spec
            name = spec.flag if spec else option
            if SECRET_FLAG.search(name):
                if eq:
                    out.append(f"{option}={REDACTED}")
                else:
                    out.append(word)
                    hide_next = True
                continue
        out.append(word)
    return out


def category_of(flag: str, table: FlagTable) -> str:
    spec = table.specs.get(flag)
    return CATEGORIES.get(spec.category, "other") if spec else "other"


def _text_config(config: dict[str, Any] | None) -> dict[str, Any]:
    if not config:
        return {}
    tc = config.get("text_config")
    return {**config, **tc} if isinstance(tc, dict) else config


def checkpoint_dtype(config: dict[str, Any] | None) -> str | None:
    tc = _text_config(config)
    value = tc.get("dtype") or tc.get("torch_dtype")
    return str(value) if value else None


def checkpoint_quant(config: dict[str, Any] | None) -> str | None:
    for c in (config or {}, _text_config(config)):
        q = c.get("quantization_config")
        if isinstance(q, dict):
            return str(q.get("quant_method") or q.get("quant_algo") or "quantized")
    return None


def mtp_layers(config: dict[str, Any] | None) -> int | None:
    tc = _text_config(config)
    for key in ("mtp_num_hidden_layers", "num_nextn_predict_layers"):
        if isinstance(tc.get(key), int):
            return int(tc[key])
    return None if not tc else 0


def _show(value: Any) -> str:
    if value is True:
        return "on"
    if isinstance(value, tuple):
        return " ".join(value)
    return str(value)


def diff_commands(old: SglangCommand, new: SglangCommand, *, new_config: dict[str, Any] | None = None,
                  table: FlagTable | None = None) -> list[FlagChange]:
    table = table or builtin_table()
    changes: list[FlagChange] = []
    for flag in sorted(set(old.flags) | set(new.flags)):
        a, b = old.flags.get(flag), new.flags.get(flag)
        va = redact_value(flag, a.value if a else None)
        vb = redact_value(flag, b.value if b else None)
        if a and b:
            if a.value == b.value:
                continue
            kind = "changed"
        else:
            kind = "added" if b else "removed"
        changes.append(FlagChange(flag, kind, va, vb, category_of(flag, table)))
    return _with_reasons(changes, old, new, new_config, table)


def _with_reasons(changes: list[FlagChange], old: SglangCommand, new: SglangCommand,
                  new_config: dict[str, Any] | None, table: FlagTable) -> list[FlagChange]:
    from dataclasses import replace

    old_quant = old.value("--quantization")
    new_quant = new.value("--quantization")
    quant_dropped = bool(old_quant) and not new_quant
    dtype = checkpoint_dtype(new_config)
    ckpt_quant = checkpoint_quant(new_config)
    spec_added = [c for c in changes if c.change == "added" and c.category == "speculative decoding"]
    out: list[FlagChange] = []
    for c in changes:
        spec = table.specs.get(c.flag)
        reason: str | None = None
        if c.flag == "--quantization" and c.change == "removed":
            if new_config is not None and ckpt_quant is None:
                native = (dtype or "unquantized").upper().replace("BFLOAT16", "BF16")
                reason = f"native {native} checkpoint: no quantization_config"
            elif ckpt_quant:
                reason = f"SGLang reads {ckpt_quant} from the checkpoint's quantization_config"
            else:
                reason = "quantization is detected from the checkpoint"
        elif c.flag == "--quantization" and c.change == "changed":
            reason = f"quantization {c.old} → {c.new}"
        elif c.change == "removed" and quant_dropped and spec and spec.quantization_specific:
            reason = f"{old_quant}-specific ({spec.quantization_specific}): goes with the quantization"
        elif c.change == "removed" and quant_dropped and c.flag == "--moe-runner-backend":
            fp4 = str(old_quant) in FP4_METHODS and str(c.old) in FP4_MOE_RUNNERS
            reason = (f"{c.old} was the FP4 MoE runner for {old_quant}" if fp4 else
                      f"MoE runner chosen for {old_quant}") + "; BF16 experts use the auto default"
        elif c.change == "removed" and quant_dropped and c.category == "kernel backends":
            reason = f"kernel backend chosen for {old_quant}; the auto default applies now"
        elif c.category == "speculative decoding" and c.change == "added" and len(spec_added) > 1:
            algo = new.value("--speculative-algorithm")
            parts = [f"{algo}" if algo else "speculative decoding"]
            for flag, label in (("--speculative-num-steps", "steps"), ("--speculative-eagle-topk", "topk"),
                                ("--speculative-num-draft-tokens", "draft tokens")):
                if new.value(flag) is not None:
                    parts.append(f"{new.value(flag)} {label}")
            mtp = mtp_layers(new_config)
            tail = f"; the checkpoint has {mtp} MTP layer(s)" if mtp else ""
            reason = f"speculative decoding added together: {', '.join(parts)}{tail}"
        elif c.flag == "--model-path" and c.change == "changed":
            before, after = (posixpath.basename(str(v).rstrip("/")) for v in (c.old, c.new))
            reason = f"new model: {before} → {after}"
        elif c.flag == "--served-model-name":
            reason = f"clients must now ask for model {c.new!r}" if c.new else "clients ask for the model path"
        elif c.flag in ("--tp-size", "--dp-size", "--ep-size", "--pp-size"):
            reason = f"{c.flag[2:4].upper()} {c.old or 1} → {c.new or 1}"
        elif c.flag == "--mem-fraction-static":
            reason = "memory SGLang may hold for weights + KV cache" + ("" if c.new else "; now auto-derived")
        out.append(replace(c, reason=reason))
    return out


def diff_env(old: dict[str, str], new: dict[str, str]) -> list[EnvChange]:
    out = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        kind = "changed" if a is not None and b is not None else "added" if b is not None else "removed"
        out.append(EnvChange(name, kind, redact_env(name, a), redact_env(name, b)))
    return out


def lint(new: SglangCommand, facts: HostFacts, table: FlagTable | None = None) -> list[Lint]:
    table = table or builtin_table()
    lints: list[Lint] = [Lint(p.severity, p.option, p.message) for p in new.problems]
    for p in new.problems:
        for old_flag, hint in DEPRECATION_HINTS.items():
            if p.option.startswith(old_flag) and p.severity in ("error", "warning"):
                lints.append(Lint("info", p.option, f"use {hint} instead"))
                break
    for flag in PATH_FLAGS:
        value = new.value(flag)
        if not isinstance(value, str) or not value.startswith("/"):
            continue
        from console.paths import forbidden_prefix

        # one rule with the gate's: normalised lexically and by the host's realpath (issue 21, item 14)
        prefix = forbidden_prefix(value, facts.forbidden_prefixes, facts.real_paths.get(value))
        forbidden = prefix is not None
        if prefix is not None:
            lints.append(Lint("error", flag, f"{value} is under {prefix}, which this host's profile forbids"))
        exists = facts.paths_exist.get(value)
        if exists is False:
            lints.append(Lint("error", flag, f"{value} does not exist on the host"))
        elif exists and flag == "--model-path" and facts.forbidden_prefixes and not forbidden:
            lints.append(Lint("info", flag, f"{value} exists and is outside {', '.join(facts.forbidden_prefixes)}"))
    cfg = facts.model_config
    algo = new.value("--speculative-algorithm")
    draft = new.value("--speculative-draft-model-path")
    if algo is None:
        stray = [f for f in new.flags if table.specs.get(f) and table.specs[f].category == "speculative"]
        if stray:
            lints.append(Lint("warning", stray[0], f"{', '.join(stray)} without --speculative-algorithm: ignored"))
    elif cfg is not None and str(algo).upper() in ("NEXTN", "EAGLE", "EAGLE3", "MTP"):
        mtp = mtp_layers(cfg)
        if not mtp and not draft:
            lints.append(Lint("error", "--speculative-algorithm",
                              f"{algo} needs MTP layers or a draft model: config.json has no "
                              "mtp_num_hidden_layers/num_nextn_predict_layers and no --speculative-draft-model-path"))
        elif mtp and str(algo).upper() == "NEXTN":
            lints.append(Lint("info", "--speculative-algorithm", f"the model has {mtp} MTP layer(s): NEXTN is valid"))
    quant = new.value("--quantization")
    ckpt_quant = checkpoint_quant(cfg)
    if cfg is not None:
        if quant and not ckpt_quant and str(quant) not in ("fp8", "nvfp4_online", "w8a8_int8", "w8a8_fp8",
                                                            "bitsandbytes", "unquant"):
            dt = checkpoint_dtype(cfg) or "unquantized"
            lints.append(Lint("error", "--quantization",
                              f"--quantization {quant} on a checkpoint without quantization_config ({dt})"))
        elif quant and ckpt_quant and str(quant).split("_")[0] not in ckpt_quant:
            lints.append(Lint("warning", "--quantization",
                              f"--quantization {quant} but the checkpoint says {ckpt_quant}"))
        if new.value("--dtype") in (None, "auto") and not quant:
            dt = checkpoint_dtype(cfg)
            if dt:
                lints.append(Lint("info", "--dtype", f"no --dtype: SGLang's auto picks {dt} from the checkpoint"))
    if not quant and not ckpt_quant:
        for flag in new.flags:
            spec = table.specs.get(flag)
            if spec and spec.quantization_specific and flag in ("--fp4-gemm-backend", "--fp8-gemm-backend",
                                                                "--quantization-param-path",
                                                                "--disable-flashinfer-cutlass-moe-fp4-allgather"):
                lints.append(Lint("warning", flag, f"{flag} only applies to {spec.quantization_specific}; "
                                                   "this service has no quantization"))
        runner = new.value("--moe-runner-backend")
        if runner in FP4_MOE_RUNNERS and cfg is not None:
            lints.append(Lint("warning", "--moe-runner-backend",
                              f"{runner} is an FP4/FP8 MoE runner; with a BF16 checkpoint leave it on auto"))
    tp_value = new.value("--tp-size")
    tp = int(tp_value) if isinstance(tp_value, str) and tp_value.isascii() and tp_value.isdigit() \
        and len(tp_value) < 7 else 1
    if tp < 1:
        lints.append(Lint("error", "--tp-size", f"--tp-size {tp_value}: must be at least 1"))
        tp = 1
    tc = _text_config(cfg)
    heads = tc.get("num_attention_heads")
    if isinstance(heads, int) and heads % tp:
        lints.append(Lint("error", "--tp-size", f"TP {tp} does not divide the {heads} attention heads"))
    kv = tc.get("num_key_value_heads")
    if isinstance(kv, int) and tp > kv and tp % kv == 0:
        lints.append(Lint("info", "--tp-size",
                          f"TP {tp} > {kv} KV heads: each KV head is replicated on {tp // kv} GPUs"))
    if facts.gpu_count is not None:
        pp = str(new.value("--pp-size") or 1)
        need = tp * (int(pp) if pp.isascii() and pp.isdigit() and len(pp) < 7 else 1)
        if need > facts.gpu_count:
            lints.append(Lint("error", "--tp-size", f"needs {need} GPUs, the host has {facts.gpu_count}"))
    if any(SECRET_FLAG.search(f) for f in new.flags):
        lints.append(Lint("warning", next(f for f in new.flags if SECRET_FLAG.search(f)),
                          "a secret on the command line is visible in `ps` and /proc to every user; "
                          "use an EnvironmentFile"))
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(lints, key=lambda x: order.get(x.severity, 3))


def drift(unit_cmd: SglangCommand, running_cmd: SglangCommand, table: FlagTable | None = None) -> list[FlagChange]:
    """Flags where the running process differs from the unit file: 'unit changed but not restarted'."""
    return diff_commands(running_cmd, unit_cmd, table=table)
