"""Will this model fit on these GPUs, and how much KV cache is left — SGLang 0.5.23's own sizing
(`memory_hook.py`, `kv_cache_configurator.py`, `pool_configurator.py`), per GPU rank. Formulas and
worked numbers: research/qwen35_fit.md. Pure: inputs in, a FitResult out, assumptions listed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GIB = 1 << 30
MIB = 1 << 20
DTYPE_BYTES = {"bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2, "float32": 4, "float": 4,
               "fp8_e4m3": 1, "fp8_e5m2": 1, "mxfp8": 1, "auto": 2, "nvfp4": 0.5, "fp4_mx_block16": 0.5}
CONTEXT_OVERHEAD_GIB = 0.6  # CUDA context + NCCL before weights load (what "avail mem" at start lacks)
SPEC_ALGOS = ("NEXTN", "EAGLE", "EAGLE3", "MTP", "STANDALONE")


@dataclass(frozen=True, slots=True)
class FitInputs:
    config: dict[str, Any]
    weight_bytes_total: int | None
    gpu_count: int
    gpu_mem_gib: float
    tp: int = 1
    pp: int = 1
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    mem_fraction_static: float | None = None
    context_len: int | None = None
    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None
    speculative_algorithm: str | None = None
    speculative_num_draft_tokens: int | None = None
    mamba_ssm_dtype: str | None = None
    disable_radix_cache: bool = False
    model: str = "model"


@dataclass(frozen=True, slots=True)
class FitResult:
    model: str
    architecture: str
    params_total: int | None
    weight_bytes_total: int | None
    weights_gib: float
    reserved_gib: float
    mem_fraction_static: float
    mem_fraction_auto: bool
    kv_cache_gib: float
    mamba_state_gib: float
    spec_state_gib: float
    free_gib: float
    kv_bytes_per_token: int
    mamba_bytes_per_request: int
    mamba_slots: int | None
    max_total_tokens: int
    max_running_requests: int
    fits: bool | None  # None: cannot tell (the weights' size is unknown)
    binding_constraint: str
    assumptions: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return "cannot tell" if self.fits is None else "fits" if self.fits else "does not fit"

    @property
    def capacity_known(self) -> bool:
        """False when the weights' size is unknown: they were counted as 0, so the KV cache, the
        tokens and the requests are upper bounds of nothing, and are said as unknown."""
        return self.weight_bytes_total is not None

    def to_json(self) -> dict[str, Any]:
        """`gpuconsole fit --json` (a public interface: keep the keys stable; unknown is null)."""
        if not self.capacity_known:
            out = self._json()
            out["per_gpu"].update(weights_gib=None, kv_cache_gib=None, free_gib=None)
            out.update(max_total_tokens=None, max_running_requests=None, mamba_slots=None)
            return out
        return self._json()

    def _json(self) -> dict[str, Any]:
        return {
            "model": self.model, "architecture": self.architecture, "params_total": self.params_total,
            "weight_bytes_total": self.weight_bytes_total,
            "per_gpu": {"weights_gib": round(self.weights_gib, 2), "reserved_gib": round(self.reserved_gib, 2),
                        "kv_cache_gib": round(self.kv_cache_gib, 2), "mamba_state_gib": round(self.mamba_state_gib, 2),
                        "spec_state_gib": round(self.spec_state_gib, 2), "free_gib": round(self.free_gib, 2)},
            "mem_fraction_static": self.mem_fraction_static, "mem_fraction_auto": self.mem_fraction_auto,
            "kv_bytes_per_token": self.kv_bytes_per_token, "mamba_bytes_per_request": self.mamba_bytes_per_request,
            "mamba_slots": self.mamba_slots, "max_total_tokens": self.max_total_tokens,
            "max_running_requests": self.max_running_requests, "fits": self.fits, "verdict": self.verdict,
            "binding_constraint": self.binding_constraint, "assumptions": list(self.assumptions),
            "warnings": list(self.warnings),
        }


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    tc = config.get("text_config")
    return {**config, **tc} if isinstance(tc, dict) else dict(config)


def _int(tc: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = tc.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def layer_types(tc: dict[str, Any]) -> list[str]:
    n = _int(tc, "num_hidden_layers", "n_layer", "num_layers") or 0
    types = tc.get("layer_types")
    if isinstance(types, list) and len(types) == n and all(isinstance(t, str) for t in types):
        return list(types)
    interval = _int(tc, "full_attention_interval")
    if interval and any(k in tc for k in ("linear_num_value_heads", "linear_key_head_dim")):
        return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]
    return ["full_attention"] * n


def auto_mem_fraction(gpu_mem_gib: float, tp: int, pp: int, chunked_prefill: int, decode_max_bs: int) -> float:
    """`memory_hook.handle_gpu_memory_settings` when --mem-fraction-static is not given."""
    gpu_mib = gpu_mem_gib * 1024
    reserved = 512 + max(chunked_prefill, 2048) * 1.5 + tp * pp / 8 * 1024 + decode_max_bs * 2
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3)


def gpu_defaults(gpu_mem_gib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode CUDA-graph max batch) by GPU memory, as SGLang picks them."""
    mib = gpu_mem_gib * 1024
    if mib < 20 * 1024:
        return 2048, 8
    if mib < 35 * 1024:
        return 4096, 48 if tp < 4 else 160
    if mib < 60 * 1024:
        return 4096, 32 if tp < 4 else 160
    if mib < 160 * 1024:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def plan_fit(inp: FitInputs) -> FitResult:
    tc = text_config(inp.config)
    assumptions: list[str] = []
    warnings: list[str] = []
    arch = ", ".join(inp.config.get("architectures") or []) or str(inp.config.get("model_type") or "unknown")
    tp, pp = max(1, inp.tp), max(1, inp.pp)
    hidden = _int(tc, "hidden_size", "n_embd", "d_model")
    heads = _int(tc, "num_attention_heads", "n_head")
    kv_heads = _int(tc, "num_key_value_heads") or heads
    head_dim = _int(tc, "head_dim") or (hidden // heads if hidden and heads else None)
    types = layer_types(tc)
    n_full = types.count("full_attention") or len(types)
    n_gdn = types.count("linear_attention")
    known_hybrid = n_gdn > 0
    if not types or not heads or not head_dim:
        warnings.append("config.json lacks layers/heads/head_dim: KV size is a generic estimate")
        n_full = n_full or 32
        kv_heads, head_dim = kv_heads or 8, head_dim or 128
        assumptions.append(f"generic dense model: {n_full} layers, {kv_heads} KV heads × {head_dim}")
    if not any(a in arch for a in ("Qwen3_5", "Qwen3Next", "Qwen2", "Qwen3", "Llama", "Mistral", "Deepseek")):
        assumptions.append(f"architecture {arch} is not one SGLang's sizing was checked against here: "
                           "KV estimated from the attention fields (a generic dense/MoE estimate)")
    ckpt_dtype = str(tc.get("dtype") or tc.get("torch_dtype") or "bfloat16")
    wbytes = DTYPE_BYTES.get(ckpt_dtype if inp.dtype == "auto" else inp.dtype, 2)
    quant = tc.get("quantization_config") or inp.config.get("quantization_config")

    # 1. Weights per GPU: sharded 1/TP (experts, attention, vocab-parallel embeddings); the K/V
    # projections are replicated when there are fewer KV heads than TP ranks.
    total = inp.weight_bytes_total
    params = None
    if total is None:
        warnings.append("weight bytes unknown (no index.json total_size): weights estimated as 0")
        total_b = 0
    else:
        total_b = total
        if quant:
            assumptions.append("quantized checkpoint: bytes from total_size; parameter count not derivable")
        else:
            params = int(total_b / wbytes)
    kv_proj = n_full * (hidden or 0) * kv_heads * head_dim * 2 * wbytes
    replicated_extra = kv_proj / kv_heads - kv_proj / tp if kv_heads and tp > kv_heads else 0
    weights = (total_b / (tp * pp) + replicated_extra) / GIB

    # 2. What SGLang holds back (activations, CUDA graphs, NCCL): --mem-fraction-static.
    chunked, decode_bs = gpu_defaults(inp.gpu_mem_gib, tp)
    chunked = inp.chunked_prefill_size or chunked
    spec = bool(inp.speculative_algorithm and inp.speculative_algorithm.upper() in SPEC_ALGOS)
    max_running_given = inp.max_running_requests
    if spec and max_running_given is None:
        decode_bs = min(decode_bs, 48)
    frac_auto = inp.mem_fraction_static is None
    frac = (auto_mem_fraction(inp.gpu_mem_gib, tp, pp, chunked, decode_bs) if frac_auto
            else float(inp.mem_fraction_static or 0))
    if frac_auto:
        assumptions.append(f"--mem-fraction-static unset: SGLang's automatic value {frac:.3f} "
                           f"(chunked prefill {chunked}, decode graphs up to bs {decode_bs})")
    pre_load = inp.gpu_mem_gib - CONTEXT_OVERHEAD_GIB
    assumptions.append(f"{CONTEXT_OVERHEAD_GIB} GiB per GPU for the CUDA context and NCCL before weights load")
    reserved = pre_load * (1 - frac)
    rest = pre_load * frac - weights  # what the KV and mamba pools may use (GiB)

    # 3. GDN (mamba) state per request, per rank; plus the speculative verification buffers.
    d = inp.speculative_num_draft_tokens or (4 if spec else 0)
    mamba_per_req = 0
    if known_hybrid:
        kdim = _int(tc, "linear_key_head_dim") or 128
        vdim = _int(tc, "linear_value_head_dim") or 128
        kh = _int(tc, "linear_num_key_heads") or 16
        vh = _int(tc, "linear_num_value_heads") or 32
        kernel = _int(tc, "linear_conv_kernel_dim") or 4
        ssm_dtype = inp.mamba_ssm_dtype or str(tc.get("mamba_ssm_dtype") or "float32")
        conv_dim = vdim * vh + 2 * kdim * kh
        conv_bytes = conv_dim // tp * (kernel - 1) * 2
        ssm_bytes = vh // tp * vdim * kdim * DTYPE_BYTES.get(ssm_dtype, 4)
        mamba_per_req = int((conv_bytes + ssm_bytes) * n_gdn)
    slots_per_req = 1 if inp.disable_radix_cache else 3
    mamba_slots = None
    mamba_gib = spec_gib = 0.0
    if known_hybrid and rest > 0:
        budget = rest * GIB * 0.9 / 1.9  # --mamba-full-memory-ratio 0.9 (the fallback)
        if spec:
            n = int((budget - mamba_per_req * (1 + d)) // (mamba_per_req * (1 + d / slots_per_req)))
        else:
            n = int((budget - mamba_per_req) // mamba_per_req)
        mamba_slots = max(0, n)
        mamba_gib = (mamba_slots + 1) * mamba_per_req / GIB
        if spec:
            # sized for the requests that can run: the GDN cap, when below the default's 48 or the
            # operator's own (SGLang's capped_reqs in _handle_max_mamba_cache), not 48 regardless
            capped = min(max_running_given or 48, mamba_slots // slots_per_req)
            spec_gib = mamba_per_req * (capped + 1) * d / GIB
        rest -= mamba_gib + spec_gib
        assumptions.append("mamba pool: --mamba-full-memory-ratio 0.9 (47 % of what is left goes to GDN state), "
                           f"{slots_per_req} state slots per request")

    # 4. KV bytes per token per rank: full-attention layers only; MTP draft KV added.
    kv_dtype_bytes = DTYPE_BYTES.get(inp.kv_cache_dtype if inp.kv_cache_dtype != "auto" else ckpt_dtype, 2)
    cell = max(1, kv_heads // tp) * head_dim * 2 * n_full * kv_dtype_bytes
    if spec:
        draft_layers = _int(tc, "mtp_num_hidden_layers", "num_nextn_predict_layers") or 1
        cell += int(cell * draft_layers / max(1, n_full))
    cell = int(cell)
    kv_gib = max(0.0, rest)
    page = 64 if known_hybrid else 1
    tokens = int(kv_gib * GIB // cell) // page * page if cell else 0

    # 5. Running requests: SGLang's default, the user's, the mamba cap.
    context = inp.context_len or _int(tc, "max_position_embeddings") or 32768
    if spec and max_running_given is None:
        running, binding = 48, "speculative decoding's default of 48 running requests"
    elif max_running_given is not None:
        running, binding = min(max_running_given, max(1, tokens // 2)), "--max-running-requests"
    else:
        running = min(max(int(tokens / context * 512), 2048), 4096, max(1, tokens // 2))
        binding = "KV cache tokens"
    if mamba_slots is not None and mamba_slots // slots_per_req < running:
        # what the cap is below, said: the fit screen showed 42 running requests bound by GDN slots and
        # never that speculative decoding would otherwise allow its default of 48
        below = {"--max-running-requests": f"below --max-running-requests {max_running_given}",
                 "KV cache tokens": f"below the {running:,} the KV cache allows"}.get(
            binding, "below speculative decoding's default of 48" if spec and max_running_given is None else "")
        running, binding = mamba_slots // slots_per_req, (
            f"GDN state slots ({mamba_slots} slots / {slots_per_req} per request)" + (f", {below}" if below else ""))
    fits = weights < pre_load * frac and tokens > 0 and (mamba_slots is None or mamba_slots > 0)
    if not fits:
        if weights >= pre_load * frac:
            binding = (f"weights: {weights:.1f} GiB per GPU exceed the {pre_load * frac:.1f} GiB that "
                       f"--mem-fraction-static {frac:.3f} allows")
        elif mamba_slots == 0:
            binding = "no room for the GDN state cache"
        else:
            binding = "no room left for the KV cache"
    if tokens and context > tokens:
        warnings.append(f"one full-length request ({context:,} tokens) needs more than the {tokens:,}-token KV pool")
    verdict: bool | None = fits
    if total is None and fits:  # weights estimated as 0: the pools above are upper bounds, not a verdict
        verdict = None
        binding = "weights unknown (no index.json total_size, no safetensors sizes): cannot tell"
    if inp.tp * inp.pp > inp.gpu_count:
        verdict = False
        binding = f"TP×PP {inp.tp * inp.pp} needs more GPUs than the {inp.gpu_count} available"
    if heads and heads % tp:
        warnings.append(f"TP {tp} does not divide {heads} attention heads: SGLang will refuse")
    free = pre_load * frac - weights - mamba_gib - spec_gib - (tokens * cell / GIB if cell else 0)
    return FitResult(
        inp.model, arch, params, total, weights, reserved, frac, frac_auto, tokens * cell / GIB if cell else 0.0,
        mamba_gib, spec_gib, max(0.0, free), cell, mamba_per_req, mamba_slots, tokens, running, verdict, binding,
        tuple(assumptions), tuple(warnings),
        {"pre_load_gib": pre_load, "gpu_mem_gib": inp.gpu_mem_gib, "allowed_gib": pre_load * frac,
         "context_len": context, "full_layers": n_full, "gdn_layers": n_gdn,
         "kv_heads_per_gpu": max(1, kv_heads // tp), "draft_tokens": d},
    )


def calibration(result: FitResult, log: Any) -> list[tuple[str, str, str]]:
    """Predicted against what the server logged (Load weight end, KV/Mamba Cache, capacity)."""
    rows: list[tuple[str, str, str]] = []
    if log is None:
        return rows
    weights = (log.weights or {}).get("weights_gib")
    if weights is not None:
        rows.append(("weights / GPU", f"{result.weights_gib:.2f} GiB", f"{weights:.2f} GiB"))
    kv = log.kv_cache or {}
    if kv.get("tokens") is not None:
        rows.append(("KV tokens", f"{result.max_total_tokens:,}", f"{kv['tokens']:,}"))
    mamba = log.mamba_cache or {}
    if mamba.get("max_mamba_cache_size") is not None and result.mamba_slots is not None:
        rows.append(("GDN state slots", f"{result.mamba_slots:,}", f"{mamba['max_mamba_cache_size']:,}"))
    cap = log.capacity or {}
    if cap.get("max_running_requests") is not None:
        rows.append(("max running requests", f"{result.max_running_requests}", f"{cap['max_running_requests']}"))
    return rows


def inputs_from_command(cmd: Any, config: dict[str, Any], weight_bytes: int | None, gpu_count: int,
                        gpu_mem_gib: float, model: str = "model") -> FitInputs:
    """FitInputs from a normalized SGLang command line (the new unit's flags)."""
    def text(flag: str) -> str | None:
        v = cmd.value(flag) if cmd is not None else None
        return str(v) if isinstance(v, str) and v else None

    def num(flag: str, kind: type = int) -> Any:
        v = cmd.value(flag) if cmd is not None else None
        try:
            return kind(v) if isinstance(v, str) else None
        except ValueError:
            return None

    return FitInputs(
        config, weight_bytes, gpu_count, gpu_mem_gib, tp=num("--tp-size") or 1, pp=num("--pp-size") or 1,
        dtype=text("--dtype") or "auto", kv_cache_dtype=text("--kv-cache-dtype") or "auto",
        mem_fraction_static=num("--mem-fraction-static", float), context_len=num("--context-length"),
        max_running_requests=num("--max-running-requests"), chunked_prefill_size=num("--chunked-prefill-size"),
        speculative_algorithm=text("--speculative-algorithm"),
        speculative_num_draft_tokens=num("--speculative-num-draft-tokens"),
        mamba_ssm_dtype=text("--mamba-ssm-dtype"),
        disable_radix_cache=bool(cmd.value("--disable-radix-cache")) if cmd else False, model=model,
    )
