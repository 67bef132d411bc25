#!/usr/bin/python3
"""Independent float64 numpy reference of the DeepSeek-V4-Flash forward pass (main model and MTP).

Written from the model spec (../shared/specs/model-spec.md beside the repo, §2.1, §3, §4, §6.1, §6.3, §9), not from
the engine. Everything is float64 except the rounding and storage-simulation steps the spec lists:
RMSNorm outputs, mHC collapse/expand and the attention probabilities rounded once to bf16; the FP8
simulation of the non-RoPE KV channels (64-element blocks, power-of-two scales); Hadamard + FP4 for
the indexer keys and queries; bf16(h) before each expert's W2. Needs only python3 and numpy.

    deepseek_v4_ref.py --model DIR --tokens 0,17,42 --out logits.npy [--mtp-out mtp.npy]
                       [--prefill N | --chunks 5,3,...] [numerics switches, see --help]

Row i of the logits is the distribution after token i. Row i of the MTP logits (i = 0..n-2)
predicts token i+2 from the main model's final stream state at i and token i+1 (MTP position i).

The state of a sequence (window rings, compressor partial groups, compressed caches, indexer keys,
the MTP layer's ring) lives in SequenceState, so one prefill, token-by-token decode and a prefill
split at any points all run the same per-token arithmetic and agree bitwise (see README "V4").
"""
import argparse
import dataclasses
import json
import os
import struct
import sys
import time

import numpy as np


# ---------------------------------------------------------------- number formats (§3)

def round_to_grid(v, mantissa_bits, min_exponent):
    """Round to nearest, ties to even, onto a binary float grid with `mantissa_bits` stored mantissa bits
    and smallest normal exponent `min_exponent` (subnormals below it); no upper clamp."""
    v = np.asarray(v, dtype=np.float64)
    mag = np.abs(v)
    _, ex = np.frexp(mag)  # mag = m * 2^ex with m in [0.5, 1), so floor(log2 mag) = ex - 1
    spacing = np.ldexp(1.0, np.maximum(ex - 1, min_exponent) - mantissa_bits)
    return np.copysign(np.round(mag / spacing) * spacing, v)  # np.round: half to even; mag/spacing exact


def bf16(v):
    return round_to_grid(v, 7, -126)


def fp8_e4m3(v):
    """E4M3FN value nearest to v after saturating at ±448 (what a satfinite cast does)."""
    return round_to_grid(np.clip(v, -448.0, 448.0), 3, -6)


def fp4_e2m1(v):
    """E2M1 value nearest to v after saturating at ±6 (grid 0, .5, 1, 1.5, 2, 3, 4, 6)."""
    return round_to_grid(np.clip(v, -6.0, 6.0), 1, 0)


def pow2_ceil(x):
    """2^ceil(log2 x) for x > 0, exactly (from the binary exponent, no log rounding)."""
    m, ex = np.frexp(x)
    return np.ldexp(1.0, np.where(m == 0.5, ex - 1, ex))


def e4m3_table():
    """The 256 FP8 E4M3FN values: bias 7, no infinities, S.1111.111 = NaN, subnormals at e = 0."""
    code = np.arange(256)
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    mag = np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -6, (1 + mantissa / 8.0) * 2.0 ** (exponent - 7.0))
    mag = np.where((exponent == 0xF) & (mantissa == 0x7), np.nan, mag)
    return np.where(code & 0x80, -mag, mag)


E4M3 = e4m3_table()
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def e8m0(codes):
    codes = np.asarray(codes).astype(np.int64)
    if np.any(codes == 255):
        raise ValueError("E8M0 scale byte 255 (NaN)")
    return np.ldexp(1.0, codes - 127)


def blockwise(x, block, fn):
    """Apply fn to x viewed as [..., ceil(n/block), block] along the last dim; a partial last block is
    padded with zeros (which change neither its amax nor its other values) and the padding dropped."""
    n = x.shape[-1]
    pad = -n % block
    xp = np.concatenate([x, np.zeros(x.shape[:-1] + (pad,))], axis=-1) if pad else x
    y = fn(xp.reshape(x.shape[:-1] + ((n + pad) // block, block))).reshape(xp.shape)
    return y[..., :n] if pad else y


def sim_fp8(x, block, amax_floor=1e-4):
    """Quantize-dequantize through E4M3 with one power-of-two scale per block (ue8m0 act_quant)."""
    def one(b):
        amax = np.maximum(np.max(np.abs(b), axis=-1, keepdims=True), amax_floor)
        s = pow2_ceil(amax / 448.0)
        return fp8_e4m3(b / s) * s
    return blockwise(x, block, one)


def sim_fp4(x, block=32):
    """Quantize-dequantize through E2M1 with one power-of-two scale per block (amax floor 6·2^-126)."""
    def one(b):
        amax = np.maximum(np.max(np.abs(b), axis=-1, keepdims=True), 6.0 * 2.0 ** -126)
        s = pow2_ceil(amax / 6.0)
        return fp4_e2m1(b / s) * s
    return blockwise(x, block, one)


def hadamard(x):
    """x·H_n·n^-½ along the last axis, H_n the Sylvester ([[H, H], [H, -H]]) Hadamard matrix."""
    n = x.shape[-1]
    if n & (n - 1):
        raise ValueError(f"Hadamard size {n} is not a power of two")
    y = np.array(x, dtype=np.float64)
    h = 1
    while h < n:
        y = y.reshape(x.shape[:-1] + (n // (2 * h), 2, h))
        a, b = y[..., 0, :], y[..., 1, :]
        y = np.stack([a + b, a - b], axis=-2)
        h *= 2
    return y.reshape(x.shape) * n ** -0.5


# ---------------------------------------------------------------- checkpoint reading (§6.1, §6.3)

class Checkpoint:
    """Tensors of a V4 checkpoint dir (model.safetensors or a sharded index) with DeepSeek names."""

    DTYPES = {"F32": np.float32, "F64": np.float64, "BF16": np.uint16, "F16": np.float16,
              "F8_E4M3": np.uint8, "F8_E8M0": np.uint8, "I8": np.int8, "U8": np.uint8,
              "I32": np.int32, "I64": np.int64}

    def __init__(self, model_dir, fp8_block=(128, 128)):
        self.fp8_block = tuple(fp8_block)
        index_path = os.path.join(model_dir, "model.safetensors.index.json")
        if os.path.exists(index_path):
            with open(index_path) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = ["model.safetensors"]
        self.entries = {}  # name -> (path, data_start, dtype, shape)
        for file in files:
            path = os.path.join(model_dir, file)
            with open(path, "rb") as f:
                (header_len,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(header_len))
            for name, info in header.items():
                if name != "__metadata__":
                    self.entries[name] = (path, 8 + header_len + info["data_offsets"][0], info["dtype"],
                                          tuple(info["shape"]))
        self.cache = {}

    def has(self, name):
        return name in self.entries

    def dtype(self, name):
        return self.entries[name][2]

    def raw(self, name):
        path, start, dtype, shape = self.entries[name]
        if dtype not in self.DTYPES:
            raise ValueError(f"{name}: unsupported dtype {dtype}")
        return np.memmap(path, dtype=self.DTYPES[dtype], mode="r", offset=start, shape=shape)

    def f64(self, name, rows=None):
        """A plain tensor as float64 (BF16 widened exactly), cached; `rows` selects leading rows (uncached)."""
        if rows is None and name in self.cache:
            return self.cache[name]
        dtype = self.dtype(name)
        arr = self.raw(name)
        arr = np.array(arr if rows is None else arr[rows])
        if dtype in ("F8_E4M3", "F8_E8M0", "I8", "U8"):
            raise ValueError(f"{name}: {dtype} tensor read without its scale; use weight()")
        if dtype == "BF16":
            out = (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:
            out = arr.astype(np.float64)
        if rows is None:
            self.cache[name] = out
        return out

    def weight(self, prefix):
        """W [out, in] of `<prefix>.weight`, dequantised exactly (§6.3), cached."""
        name = prefix + ".weight"
        if name in self.cache:
            return self.cache[name]
        dtype = self.dtype(name)
        if dtype == "F8_E4M3":
            q = E4M3[np.array(self.raw(name))]
            scale = self.scale(prefix)
            br, bc = self.fp8_block
            rows, cols = q.shape
            expected = (-(-rows // br), -(-cols // bc))
            if scale.shape != expected:
                raise ValueError(f"{name}: scale {scale.shape}, expected {expected} ({br}x{bc} blocks)")
            w = q * np.repeat(np.repeat(scale, br, axis=0), bc, axis=1)[:rows, :cols]
        elif dtype in ("I8", "U8"):  # packed FP4: element 2k in the low nibble of byte k
            packed = np.array(self.raw(name)).view(np.uint8)
            rows, half = packed.shape
            codes = np.empty((rows, 2 * half), dtype=np.uint8)
            codes[:, 0::2], codes[:, 1::2] = packed & 0xF, packed >> 4
            scale = self.scale(prefix)
            if scale.shape != (rows, 2 * half // 32):
                raise ValueError(f"{name}: FP4 scale {scale.shape}, expected {(rows, 2 * half // 32)}")
            w = E2M1[codes] * np.repeat(scale, 32, axis=1)
        else:
            w = self.f64(name)
        if np.any(np.isnan(w)):
            raise ValueError(f"{name}: NaN after dequantisation")
        self.cache[name] = w
        return w

    def scale(self, prefix):
        name = prefix + ".scale"
        if self.dtype(name) in ("F8_E8M0", "U8"):
            return e8m0(self.raw(name))
        return self.f64(name)  # an F32 scale (e.g. a -Base checkpoint), multiplied as well

    def is_quantized(self, prefix):
        return self.dtype(prefix + ".weight") in ("F8_E4M3", "I8", "U8")


# ---------------------------------------------------------------- configuration (§2.1)

def _pick(cfg, *keys, default=None):
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    if default is None:
        raise KeyError(f"config.json lacks {' / '.join(keys)}")
    return default


@dataclasses.dataclass
class V4Config:
    """config.json (HF keys, or the reference's ModelArgs spellings) reduced to what the math needs."""
    vocab: int
    dim: int
    n_layers: int
    n_heads: int
    head_dim: int
    rope_dim: int
    q_lora_rank: int
    o_groups: int
    o_lora_rank: int
    n_experts: int
    n_shared: int
    topk: int
    score_func: str
    route_scale: float
    norm_topk: bool
    n_hash_layers: int
    swiglu_limit: float
    window: int
    eps: float
    rope_theta: float
    compress_rope_theta: float
    yarn: tuple  # (factor, original_len, beta_fast, beta_slow) or None
    index_heads: int
    index_dim: int
    index_topk: int
    hc_mult: int
    hc_iters: int
    hc_eps: float
    n_mtp: int
    compress_ratios: list
    fp8_block: tuple

    @staticmethod
    def load(model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        rs = c.get("rope_scaling") or {}
        orig = rs.get("original_max_position_embeddings", c.get("original_seq_len", 0)) or 0
        yarn = None
        if orig > 0 and rs.get("type", rs.get("rope_type", "yarn")) == "yarn":
            yarn = (float(rs.get("factor", c.get("rope_factor"))), float(orig),
                    float(rs.get("beta_fast", c.get("beta_fast", 32))),
                    float(rs.get("beta_slow", c.get("beta_slow", 1))))
        n_layers = _pick(c, "num_hidden_layers", "n_layers")
        n_mtp = _pick(c, "num_nextn_predict_layers", "n_mtp_layers", default=0)
        ratios = list(_pick(c, "compress_ratios"))
        if len(ratios) < n_layers + n_mtp:
            raise ValueError(f"compress_ratios has {len(ratios)} entries, need {n_layers}+{n_mtp} (layers + MTP)")
        qc = c.get("quantization_config") or {}
        return V4Config(
            vocab=_pick(c, "vocab_size"), dim=_pick(c, "hidden_size", "dim"), n_layers=n_layers,
            n_heads=_pick(c, "num_attention_heads", "n_heads"), head_dim=_pick(c, "head_dim"),
            rope_dim=_pick(c, "qk_rope_head_dim", "rope_head_dim"), q_lora_rank=_pick(c, "q_lora_rank"),
            o_groups=_pick(c, "o_groups"), o_lora_rank=_pick(c, "o_lora_rank"),
            n_experts=_pick(c, "n_routed_experts"), n_shared=_pick(c, "n_shared_experts", default=1),
            topk=_pick(c, "num_experts_per_tok", "n_activated_experts"),
            score_func=_pick(c, "scoring_func", "score_func", default="sqrtsoftplus"),
            route_scale=float(_pick(c, "routed_scaling_factor", "route_scale", default=1.0)),
            norm_topk=bool(c.get("norm_topk_prob", True)),
            n_hash_layers=_pick(c, "num_hash_layers", "n_hash_layers", default=0),
            swiglu_limit=float(_pick(c, "swiglu_limit", default=0.0)),
            window=_pick(c, "sliding_window", "window_size"), eps=float(_pick(c, "rms_norm_eps", "norm_eps")),
            rope_theta=float(_pick(c, "rope_theta")), compress_rope_theta=float(_pick(c, "compress_rope_theta")),
            yarn=yarn, index_heads=_pick(c, "index_n_heads"), index_dim=_pick(c, "index_head_dim"),
            index_topk=_pick(c, "index_topk"), hc_mult=_pick(c, "hc_mult"),
            hc_iters=_pick(c, "hc_sinkhorn_iters"), hc_eps=float(_pick(c, "hc_eps")), n_mtp=n_mtp,
            compress_ratios=ratios, fp8_block=tuple(qc.get("weight_block_size", (128, 128))))


# The bf16 rounding points (README "V4", "Numerics"), each switchable on its own (--bf16-points) for
# the ablation of docs/numerics.md. Norm points are named after the norm weight's module.
BF16_POINTS = ("sub_norm", "q_norm", "kv_norm", "comp_norm", "final_norm", "mtp_norm", "mhc_collapse",
               "mhc_expand", "head_collapse", "attn_probs", "expert_h", "index_w", "mtp_h0")
NORM_POINTS = {"attn_norm": "sub_norm", "ffn_norm": "sub_norm", "q_norm": "q_norm", "kv_norm": "kv_norm",
               "compressor": "comp_norm", "norm": "final_norm", "enorm": "mtp_norm", "hnorm": "mtp_norm"}


@dataclasses.dataclass
class V4Numerics:
    """Switches for the points the spec leaves open or lists as variants (defaults in README "V4").

    kv_sim: "fp8" = FP8 simulation of the non-RoPE window/compressed KV channels (later upstream kernel,
        §3); "none" = the 2026-04-24 kernel.py, whose simulation casts to bf16 only (§9a).
    shared_expert_clamp: the shared expert uses swiglu_limit too (later model.py, §4.8) or not (April, §9b).
    act_quant: run FP8/FP4-weight GEMMs like the official fp8_gemm (FP8 activations per 128 along K,
        ue8m0 scales, bf16 output) instead of exact dequantised weights in float64 (§3 allows either).
    bf16: apply the bf16 rounding points (off = pure float64, for isolating rounding effects).
    index_score: "f64" = indexer scores in float64; "bf16" = round q·k, w·relu and the head sum to bf16
        as the reference's bf16 einsum does (creates exact ties, broken toward the lower entry index).
    f32_noise: round every linear's output to float32, a stand-in for an f32 engine's rounding noise, to
        size engine-vs-reference tolerances (not a model variant).
    """
    kv_sim: str = "fp8"
    shared_expert_clamp: bool = True
    act_quant: bool = False
    bf16: bool = True
    index_score: str = "f64"
    f32_noise: bool = False
    bf16_points: tuple = BF16_POINTS  # the points `bf16` enables (all by default)

    def __post_init__(self):
        if self.kv_sim not in ("fp8", "none") or self.index_score not in ("f64", "bf16"):
            raise ValueError(f"bad numerics {self}")
        unknown = set(self.bf16_points) - set(BF16_POINTS)
        if unknown:
            raise ValueError(f"unknown bf16 points {sorted(unknown)}; known: {', '.join(BF16_POINTS)}")

    def rounds(self, point):
        return self.bf16 and point in self.bf16_points


# ---------------------------------------------------------------- RoPE (§3)

def rope_freqs(rope_dim, theta, yarn):
    """f_i, i = 0..rope_dim/2-1, with the YaRN frequency ramp when `yarn` is given (no mscale)."""
    i = np.arange(rope_dim // 2, dtype=np.float64)
    freq = theta ** (-2.0 * i / rope_dim)
    if yarn is None:
        return freq
    factor, original, beta_fast, beta_slow = yarn

    def correction_dim(n_rot):
        return rope_dim * np.log(original / (n_rot * 2 * np.pi)) / (2 * np.log(theta))

    low = max(int(np.floor(correction_dim(beta_fast))), 0)
    high = min(int(np.ceil(correction_dim(beta_slow))), rope_dim - 1)
    ramp = np.clip((i - low) / (high - low if high != low else 0.001), 0.0, 1.0)
    return (1.0 - ramp) * freq + ramp * freq / factor


def rope(x, positions, freqs, inverse=False):
    """Interleaved RoPE on the last axis: pairs (x[2i], x[2i+1]) times e^{±i·p·f_i}.
    x: [T, ..., rope_dim], positions: [T]."""
    angle = np.asarray(positions, dtype=np.float64)[:, None] * freqs[None, :]  # [T, rope_dim/2]
    angle = angle.reshape((x.shape[0],) + (1,) * (x.ndim - 2) + (freqs.shape[0],))
    cos, sin = np.cos(angle), np.sin(angle) * (-1.0 if inverse else 1.0)
    re, im = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = re * cos - im * sin
    out[..., 1::2] = re * sin + im * cos
    return out


# ---------------------------------------------------------------- mHC (§4.2)

def sinkhorn_split(mixes, scale, base, hc, iters, eps):
    """mixes: [T, (2+hc)·hc] -> pre [T, hc], post [T, hc], comb [T, hc, hc] (row i = input stream i)."""
    pre = 1.0 / (1.0 + np.exp(-(mixes[:, :hc] * scale[0] + base[:hc]))) + eps
    post = 2.0 / (1.0 + np.exp(-(mixes[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])))
    comb = (mixes[:, 2 * hc:] * scale[2] + base[2 * hc:]).reshape(-1, hc, hc)
    comb = np.exp(comb - comb.max(axis=2, keepdims=True))
    comb = comb / comb.sum(axis=2, keepdims=True) + eps
    comb = comb / (comb.sum(axis=1, keepdims=True) + eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(axis=2, keepdims=True) + eps)
        comb = comb / (comb.sum(axis=1, keepdims=True) + eps)
    return pre, post, comb


# ---------------------------------------------------------------- per-sequence state (§4.11)

class CompressorState:
    """The unfinished group(s) of one compressor (spec: kv_state / score_state, [coff·ratio, coff·d_c]).
    With overlap (ratio 4) rows [0, ratio) hold the previous complete group, rows [ratio, 2·ratio) the
    current one; scores start at -inf so a missing previous group drops out of the softmax."""

    def __init__(self, ratio, width, overlap):
        self.ratio, self.overlap = ratio, overlap
        rows = 2 * ratio if overlap else ratio
        self.kv = np.zeros((rows, width))
        self.score = np.full((rows, width), -np.inf)
        self.n_pending = 0  # tokens of the current group seen so far


class LayerState:
    def __init__(self, cfg, ratio):
        d = cfg.head_dim
        self.ring_kv = np.zeros((cfg.window, d))  # slot p mod window holds position p's KV
        self.ring_pos = np.full(cfg.window, -1, dtype=np.int64)
        self.ratio = ratio
        self.csa = ratio == 4  # overlapping compressor + indexer (the official rule: overlap iff ratio == 4)
        if ratio:
            coff = 2 if self.csa else 1
            self.comp = CompressorState(ratio, coff * d, self.csa)
            self.comp_kv = np.zeros((0, d))  # entry j pools positions j·ratio .. j·ratio+ratio-1
        if self.csa:
            self.idx_comp = CompressorState(ratio, 2 * cfg.index_dim, True)
            self.idx_keys = np.zeros((0, cfg.index_dim))


class SequenceState:
    def __init__(self, cfg):
        self.n_tokens = 0
        self.layers = [LayerState(cfg, cfg.compress_ratios[i]) for i in range(cfg.n_layers)]
        self.mtp_layers = [LayerState(cfg, cfg.compress_ratios[cfg.n_layers + k]) for k in range(cfg.n_mtp)]
        self.last_streams = None  # main final stream state of the newest token, [hc, d], for MTP
        self.with_mtp = True  # False: no MTP rows (a replayed sequence; the MTP state is not replayed)
        self.dump = None  # name -> list of per-chunk stream states [T, hc, d], when requested


# ---------------------------------------------------------------- the model

class DeepseekV4Reference:
    def __init__(self, model_dir, numerics=None):
        self.cfg = V4Config.load(model_dir)
        self.num = numerics or V4Numerics()
        self.w = Checkpoint(model_dir, self.cfg.fp8_block)
        cfg = self.cfg
        if cfg.head_dim <= cfg.rope_dim or (cfg.head_dim - cfg.rope_dim) % 64:
            raise ValueError("head_dim - rope_dim must be a positive multiple of 64 (FP8 KV blocks)")
        self.freqs_swa = rope_freqs(cfg.rope_dim, cfg.rope_theta, None)
        self.freqs_comp = rope_freqs(cfg.rope_dim, cfg.compress_rope_theta, cfg.yarn)

    # ---- primitives
    def round(self, x, point):
        """bf16 at rounding point `point` (BF16_POINTS) when the numerics enable it."""
        return bf16(x) if self.num.rounds(point) else x

    def linear(self, x, prefix, weight=None):
        """x [T, in] -> [T, out], one row at a time with a fixed summation order so a row's result never
        depends on which other rows share the call (prefill == decode bit for bit)."""
        w = self.w.weight(prefix) if weight is None else weight
        quant = weight is None and self.num.act_quant and self.w.is_quantized(prefix)
        out = np.empty((x.shape[0], w.shape[0]))
        for t in range(x.shape[0]):
            row = sim_fp8(x[t], 128) if quant else x[t]
            out[t] = np.sum(w * row[None, :], axis=1)
        if self.num.f32_noise:
            out = out.astype(np.float32).astype(np.float64)
        return bf16(out) if quant else out

    def norm(self, x, name):
        """RMSNorm in float64, rounded once to bf16 (§3)."""
        w = self.w.f64(name)
        parts = name.split(".")
        point = NORM_POINTS["compressor" if parts[-3:-2] == ["compressor"] else parts[-2]]
        return self.round(w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.cfg.eps)), point)

    def kv_store_sim(self, kv):
        """Window/compressed main KV: FP8 (64-blocks) on the non-RoPE channels, RoPE channels untouched."""
        if self.num.kv_sim == "none":
            return kv
        nope = self.cfg.head_dim - self.cfg.rope_dim
        out = kv.copy()
        out[..., :nope] = sim_fp8(kv[..., :nope], 64)
        return out

    # ---- mHC
    def hc_pre(self, streams, p):
        """streams: [T, hc, d] -> collapsed x [T, d] (bf16), post [T, hc], comb [T, hc, hc]."""
        cfg = self.cfg
        n = streams.shape[0]
        v = streams.reshape(n, -1)
        rho = 1.0 / np.sqrt(np.mean(v * v, axis=1, keepdims=True) + cfg.eps)
        mixes = self.linear(v, None, self.w.f64(p + "fn")) * rho
        pre, post, comb = sinkhorn_split(mixes, self.w.f64(p + "scale"), self.w.f64(p + "base"), cfg.hc_mult,
                                         cfg.hc_iters, cfg.hc_eps)
        return self.round(np.sum(pre[:, :, None] * streams, axis=1), "mhc_collapse"), post, comb

    def hc_post(self, f, streams, post, comb):
        """X'_j = post_j·f + Σ_i comb[i, j]·X_i, rounded to bf16. f: [T, d], streams: [T, hc, d]."""
        mixed = np.sum(comb[:, :, :, None] * streams[:, :, None, :], axis=1)  # [T, hc(out j), d]
        return self.round(post[:, :, None] * f[:, None, :] + mixed, "mhc_expand")

    def hc_head(self, streams, p):
        """Hyper-head collapse (§4.9); the result is rounded like every other collapse (§4.2 step 4)."""
        cfg = self.cfg
        n = streams.shape[0]
        v = streams.reshape(n, -1)
        rho = 1.0 / np.sqrt(np.mean(v * v, axis=1, keepdims=True) + cfg.eps)
        mixes = self.linear(v, None, self.w.f64(p + "hc_head_fn")) * rho
        pre = 1.0 / (1.0 + np.exp(-(mixes * self.w.f64(p + "hc_head_scale")[0] + self.w.f64(p + "hc_head_base"))))
        pre = pre + cfg.hc_eps
        return self.round(np.sum(pre[:, :, None] * streams, axis=1), "head_collapse")

    # ---- compressor (§4.4)
    def compress(self, p, x, positions, cs, d_c, freqs, index_keys):
        """Feeds tokens x [T, d] at `positions` into compressor state `cs`; returns the entries their groups
        complete, [n_new, d_c], after RMSNorm_c, RoPE at j·ratio and the storage simulation."""
        ratio = cs.ratio
        a = self.linear(x, p + "wkv")  # [T, coff·d_c]
        z = self.linear(x, p + "wgate") + self.w.f64(p + "ape")[positions % ratio]
        entries, entry_pos = [], []
        for t, pos in enumerate(positions):
            row = (ratio if cs.overlap else 0) + pos % ratio
            cs.kv[row], cs.score[row] = a[t], z[t]
            cs.n_pending += 1
            if pos % ratio != ratio - 1:
                continue
            if cs.overlap:  # previous group's first-half channels, current group's second half, one softmax
                kv = np.concatenate([cs.kv[:ratio, :d_c], cs.kv[ratio:, d_c:]], axis=0)
                sc = np.concatenate([cs.score[:ratio, :d_c], cs.score[ratio:, d_c:]], axis=0)
            else:
                kv, sc = cs.kv, cs.score
            e = np.exp(sc - sc.max(axis=0, keepdims=True))  # [coff·ratio, d_c], softmax over tokens
            entries.append(np.sum(e / e.sum(axis=0, keepdims=True) * kv, axis=0))
            entry_pos.append(pos + 1 - ratio)
            if cs.overlap:
                cs.kv[:ratio], cs.score[:ratio] = cs.kv[ratio:], cs.score[ratio:]
            cs.kv[ratio if cs.overlap else 0:] = 0.0
            cs.score[ratio if cs.overlap else 0:] = -np.inf
            cs.n_pending = 0
        if not entries:
            return np.zeros((0, d_c))
        kv = self.norm(np.stack(entries), p + "norm.weight")
        rd = self.cfg.rope_dim
        kv[:, -rd:] = rope(kv[:, -rd:], np.array(entry_pos), freqs)
        if index_keys:
            return sim_fp4(hadamard(kv), 32)
        return self.kv_store_sim(kv)

    # ---- indexer (§4.5)
    def index_queries(self, p, x, qr, positions, freqs):
        """q^I [T, Hi, Di] (RoPE, Hadamard, FP4) and head weights [T, Hi]."""
        cfg = self.cfg
        q = self.linear(qr, p + "wq_b").reshape(len(positions), cfg.index_heads, cfg.index_dim)
        q[..., -cfg.rope_dim:] = rope(q[..., -cfg.rope_dim:], positions, freqs)
        q = sim_fp4(hadamard(q), 32)
        w = self.round(self.linear(x, p + "weights_proj"), "index_w") * (cfg.index_dim ** -0.5 * cfg.index_heads ** -0.5)
        return q, w

    def index_select(self, q, w, keys, n_visible):
        """Entries (ascending) of the top min(index_topk, n_visible) scores over visible keys[:n_visible]."""
        k = min(self.cfg.index_topk, n_visible)
        if k == n_visible:
            return np.arange(n_visible)
        dots = np.sum(q[None, :, :] * keys[:n_visible, None, :], axis=2)  # [n_visible, Hi]
        if self.num.index_score == "bf16":
            score = bf16(np.sum(bf16(bf16(np.maximum(dots, 0.0)) * w[None, :]), axis=1))
        else:
            score = np.sum(np.maximum(dots, 0.0) * w[None, :], axis=1)
        order = np.lexsort((np.arange(n_visible), -score))  # highest score first, ties: lower entry first
        return np.sort(order[:k])

    # ---- attention (§4.3, §4.6, §4.7)
    def sparse_attention(self, q, keys, sink):
        """q [H, D], keys [n, D] (K = V), sink [H] -> o [H, D]; probabilities rounded to bf16."""
        s = np.sum(q[:, None, :] * keys[None, :, :], axis=2) * self.cfg.head_dim ** -0.5  # [H, n]
        m = s.max(axis=1, keepdims=True)
        e = np.exp(s - m)
        denom = e.sum(axis=1) + np.exp(sink - m[:, 0])
        return np.sum(self.round(e, "attn_probs")[:, :, None] * keys[None, :, :], axis=1) / denom[:, None]

    def attention(self, p, x, positions, st):
        cfg = self.cfg
        n, rd, win = len(positions), cfg.rope_dim, cfg.window
        freqs = self.freqs_comp if st.ratio else self.freqs_swa
        qr = self.norm(self.linear(x, p + "wq_a"), p + "q_norm.weight")  # [T, q_lora]
        q = self.linear(qr, p + "wq_b").reshape(n, cfg.n_heads, cfg.head_dim)  # [T, H, D]
        q = q / np.sqrt(np.mean(q * q, axis=-1, keepdims=True) + cfg.eps)
        q[..., -rd:] = rope(q[..., -rd:], positions, freqs)
        kv = self.norm(self.linear(x, p + "wkv"), p + "kv_norm.weight")  # [T, D]
        kv[:, -rd:] = rope(kv[:, -rd:], positions, freqs)
        kv = self.kv_store_sim(kv)

        def append_new(entries, new):
            # Groups completing below the entries already held (a replay of a cached prefix) keep the
            # cached entry: the first group this chunk completes is entry positions[0] // ratio.
            skip = min(len(new), max(0, len(entries) - int(positions[0]) // st.ratio))
            return np.concatenate([entries, new[skip:]])

        if st.ratio:
            new = self.compress(p + "compressor.", x, positions, st.comp, cfg.head_dim, freqs, False)
            st.comp_kv = append_new(st.comp_kv, new)
        if st.csa:
            new = self.compress(p + "indexer.compressor.", x, positions, st.idx_comp, cfg.index_dim, freqs, True)
            st.idx_keys = append_new(st.idx_keys, new)
            iq, iw = self.index_queries(p + "indexer.", x, qr, positions, freqs)

        # Window keys: the ring (positions before this call) followed by this call's tokens.
        live = st.ring_pos >= 0
        order = np.argsort(st.ring_pos[live])
        ext_pos = np.concatenate([st.ring_pos[live][order], positions])
        ext_kv = np.concatenate([st.ring_kv[live][order], kv])
        sink = self.w.f64(p + "attn_sink")
        o = np.empty((n, cfg.n_heads, cfg.head_dim))
        for t, pos in enumerate(positions):
            keys = ext_kv[(ext_pos > pos - win) & (ext_pos <= pos)]
            if st.ratio:
                n_visible = (pos + 1) // st.ratio  # entries whose whole group is <= pos
                chosen = self.index_select(iq[t], iw[t], st.idx_keys, n_visible) if st.csa else np.arange(n_visible)
                keys = np.concatenate([keys, st.comp_kv[chosen]])
            o[t] = self.sparse_attention(q[t], keys, sink)
        for t, pos in enumerate(positions):
            st.ring_kv[pos % win], st.ring_pos[pos % win] = kv[t], pos
        o[..., -rd:] = rope(o[..., -rd:], positions, freqs, inverse=True)

        g = cfg.o_groups
        o = o.reshape(n, g, cfg.n_heads * cfg.head_dim // g)  # [T, G, H/G·D]
        wo_a = self.w.weight(p + "wo_a")  # [G·o_lora, H/G·D]; converted to bf16 at load (exact)
        z = np.concatenate([self.linear(o[:, k], None, wo_a[k * cfg.o_lora_rank:(k + 1) * cfg.o_lora_rank])
                            for k in range(g)], axis=1)  # [T, G·o_lora]
        return self.linear(z, p + "wo_b")

    # ---- MoE (§4.8)
    def expert(self, p, x, weight, clamp):
        g, u = self.linear(x, p + "w1"), self.linear(x, p + "w3")
        limit = self.cfg.swiglu_limit
        if clamp and limit > 0:
            u, g = np.clip(u, -limit, limit), np.minimum(g, limit)
        h = g / (1.0 + np.exp(-g)) * u
        if weight is not None:
            h = h * weight[:, None]
        return self.linear(self.round(h, "expert_h"), p + "w2")

    def moe(self, p, x, tokens, hash_layer):
        cfg = self.cfg
        logits = self.linear(x, p + "gate")
        if cfg.score_func == "sqrtsoftplus":
            scores = np.sqrt(np.logaddexp(0.0, logits))
        elif cfg.score_func == "sigmoid":
            scores = 1.0 / (1.0 + np.exp(-logits))
        else:
            scores = np.exp(logits - logits.max(1, keepdims=True))
            scores /= scores.sum(1, keepdims=True)
        if hash_layer:
            experts = np.asarray(self.w.raw(p + "gate.tid2eid")[np.asarray(tokens)]).astype(np.int64)
        else:
            biased = scores + self.w.f64(p + "gate.bias")[None, :]
            experts = np.stack([np.lexsort((np.arange(cfg.n_experts), -b))[:cfg.topk] for b in biased])
        weights = np.take_along_axis(scores, experts, axis=1)
        if cfg.norm_topk and cfg.score_func != "softmax":
            weights = weights / weights.sum(axis=1, keepdims=True)
        weights = weights * cfg.route_scale
        y = np.zeros_like(x)
        for e in np.unique(experts):  # ascending expert id, as the reference accumulates
            rows, slot = np.nonzero(experts == e)
            y[rows] += self.expert(f"{p}experts.{e}.", x[rows], weights[rows, slot], True)
        if cfg.n_shared:
            y += self.expert(p + "shared_experts.", x, None, self.num.shared_expert_clamp)
        return y

    # ---- blocks and the model
    def block(self, p, streams, positions, tokens, st, hash_layer):
        x, post, comb = self.hc_pre(streams, p + "hc_attn_")
        f = self.attention(p + "attn.", self.norm(x, p + "attn_norm.weight"), positions, st)
        streams = self.hc_post(f, streams, post, comb)
        x, post, comb = self.hc_pre(streams, p + "hc_ffn_")
        f = self.moe(p + "ffn.", self.norm(x, p + "ffn_norm.weight"), tokens, hash_layer)
        return self.hc_post(f, streams, post, comb)

    def embed(self, tokens):
        return np.stack([self.w.f64("embed.weight", slice(int(t), int(t) + 1))[0] for t in tokens])

    def forward_chunk(self, state, tokens):
        """Runs the next len(tokens) tokens of a sequence. Returns (h, h_mtp): the final normed hidden rows
        [T, d] feeding `head` for these positions, and the MTP ones [M, d] for the MTP rows this chunk
        completes (row i needs token i+1, so a chunk finishes the previous chunk's last row)."""
        cfg = self.cfg
        tokens = np.asarray(tokens, dtype=np.int64)
        positions = state.n_tokens + np.arange(len(tokens))
        streams = np.repeat(self.embed(tokens)[:, None, :], cfg.hc_mult, axis=1)  # [T, hc, d]
        for i in range(cfg.n_layers):
            streams = self.block(f"layers.{i}.", streams, positions, tokens, state.layers[i], i < cfg.n_hash_layers)
            if state.dump is not None:
                state.dump.setdefault(f"layer{i}", []).append(streams)
        h = self.norm(self.hc_head(streams, ""), "norm.weight")

        h_mtp = np.zeros((0, cfg.dim))
        if cfg.n_mtp and state.with_mtp:
            if state.n_tokens:  # the previous chunk's last row gets its next token now
                mtp_streams, mtp_tokens = np.concatenate([state.last_streams[None], streams[:-1]]), tokens
            else:
                mtp_streams, mtp_tokens = streams[:-1], tokens[1:]
            if len(mtp_tokens):
                h_mtp = self.mtp(mtp_streams, mtp_tokens, positions[0] - (1 if state.n_tokens else 0), state)
            state.last_streams = streams[-1]
        state.n_tokens += len(tokens)
        return h, h_mtp

    def mtp(self, streams, next_tokens, first_pos, state):
        """MTP rows at positions first_pos.. from the main streams at those positions and the next tokens."""
        cfg = self.cfg
        p = "mtp.0."
        n = len(next_tokens)
        e = self.norm(self.embed(next_tokens), p + "enorm.weight")  # [M, d]
        hx = self.norm(streams, p + "hnorm.weight").reshape(n * cfg.hc_mult, cfg.dim)  # per stream
        # The stream state is bf16 everywhere (embedding, every hc_post); H0 is rounded the same way.
        h0 = self.round(self.linear(e, p + "e_proj")[:, None, :]
                        + self.linear(hx, p + "h_proj").reshape(n, cfg.hc_mult, cfg.dim), "mtp_h0")
        positions = first_pos + np.arange(n)
        out = self.block(p, h0, positions, next_tokens, state.mtp_layers[0], False)
        if state.dump is not None:
            state.dump.setdefault("mtp0", []).append(out)
        return self.norm(self.hc_head(out, p), p + "norm.weight")

    def head(self, h):
        """logits = head·h for h [T, d], in vocab chunks to bound memory."""
        vocab = self.w.entries["head.weight"][3][0]
        out = np.empty((h.shape[0], vocab))
        for r in range(0, vocab, 16384):
            out[:, r:r + 16384] = h @ self.w.f64("head.weight", slice(r, r + 16384)).T
        return out

    def run(self, tokens, chunks, dump=False):
        """Runs `tokens` as consecutive chunks of the given sizes; returns (logits, mtp_logits, state).
        With `dump`, state.dump maps layerN / mtp0 to the stream state after that block, [n, hc, d]."""
        if sum(chunks) != len(tokens) or min(chunks) < 1:
            raise ValueError(f"chunks {chunks} do not split {len(tokens)} tokens")
        state = SequenceState(self.cfg)
        state.dump = {} if dump else None
        hs, hms = [], []
        start = 0
        for size in chunks:
            h, hm = self.forward_chunk(state, tokens[start:start + size])
            hs.append(h)
            hms.append(hm)
            start += size
        if dump:
            state.dump = {k: np.concatenate(v) for k, v in state.dump.items()}
        return self.head(np.concatenate(hs)), self.head(np.concatenate(hms)), state


    def run_replay(self, tokens, hit, replay_tokens, chunks):
        """SWA bounded replay (deepinfer-features.md §6.1, on a prefix-cache hit): a cold run of tokens[:hit]
        leaves its compressed entries and indexer keys cached; a new sequence starts at s = hit - replay_tokens
        with empty window rings and compressor groups (window attention cut at s) and the cached entries below
        hit // ratio, which its replayed rows read but never recompute. Returns the logits of rows [s, n) run
        as `chunks` (sizes summing to n - s)."""
        start = hit - replay_tokens
        if not (0 <= start < hit <= len(tokens)) or sum(chunks) != len(tokens) - start:
            raise ValueError(f"replay of hit {hit} by {replay_tokens} tokens does not fit {len(tokens)} tokens")
        cold = SequenceState(self.cfg)
        cold.with_mtp = False
        self.forward_chunk(cold, tokens[:hit])
        state = SequenceState(self.cfg)
        state.with_mtp = False
        state.n_tokens = start
        for st, cached in zip(state.layers, cold.layers):
            if st.ratio:
                st.comp_kv = cached.comp_kv[:hit // st.ratio].copy()
            if st.csa:
                st.idx_keys = cached.idx_keys[:hit // st.ratio].copy()
        hs = []
        at = start
        for size in chunks:
            h, _ = self.forward_chunk(state, tokens[at:at + size])
            hs.append(h)
            at += size
        return self.head(np.concatenate(hs))


def chunk_sizes(n_tokens, prefill=None, chunks=None):
    """--prefill N: N tokens then one per step; --chunks a,b,..: those sizes, the rest as one last chunk."""
    if prefill and chunks:
        raise ValueError("give --prefill or --chunks, not both")
    if prefill:
        first = min(prefill, n_tokens)
        return [first] + [1] * (n_tokens - first)
    if chunks:
        sizes = [c for c in chunks if c > 0]
        if sum(sizes) > n_tokens:
            raise ValueError(f"--chunks {chunks} cover more than {n_tokens} tokens")
        return sizes + ([n_tokens - sum(sizes)] if sum(sizes) < n_tokens else [])
    return [n_tokens]


def parse_points(text):
    """--bf16-points: "a,b" = only those; "-a,b" = all but those; None = all."""
    if text is None:
        return BF16_POINTS
    names = [t for t in text.lstrip("-").split(",") if t]
    return tuple(p for p in BF16_POINTS if p not in names) if text.startswith("-") else tuple(names)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", "--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True)
    ap.add_argument("--mtp-out")
    ap.add_argument("--prefill", type=int, help="prefill N tokens, then decode one token per step")
    ap.add_argument("--chunks", help="comma-separated chunk sizes; tokens left over form one last chunk")
    ap.add_argument("--kv-sim", choices=["fp8", "none"], default="fp8")
    ap.add_argument("--shared-expert-clamp", choices=["on", "off"], default="on")
    ap.add_argument("--act-quant", action="store_true", help="FP8 activations in FP8/FP4 GEMMs, bf16 out")
    ap.add_argument("--no-bf16", action="store_true", help="skip the bf16 rounding points")
    ap.add_argument("--index-score", choices=["f64", "bf16"], default="f64")
    ap.add_argument("--bf16-points", help="comma-separated bf16 rounding points to apply (default all: "
                    + ",".join(BF16_POINTS) + "); a leading '-' applies all but those listed")
    ap.add_argument("--f32-noise", action="store_true", help="round linear outputs to f32 (tolerance sizing)")
    ap.add_argument("--dump-layers", help=".npz of the stream state after every block (layerN, mtp0): [n, hc, d]")
    ap.add_argument("--replay-hit", type=int, help="SWA bounded replay of a cached prefix of this many tokens: "
                    "--out holds rows [hit - replay_tokens, n), --prefill/--chunks split those rows, no MTP rows")
    ap.add_argument("--replay-tokens", type=int, help="replay length (the engine's swa_replay_tokens)")
    args = ap.parse_args(argv)
    tokens = [int(t) for t in args.tokens.split(",")]
    numerics = V4Numerics(kv_sim=args.kv_sim, shared_expert_clamp=args.shared_expert_clamp == "on",
                          act_quant=args.act_quant, bf16=not args.no_bf16, index_score=args.index_score,
                          f32_noise=args.f32_noise, bf16_points=parse_points(args.bf16_points))
    ref = DeepseekV4Reference(args.model, numerics)
    chunks = [int(c) for c in args.chunks.split(",")] if args.chunks else None
    if args.replay_hit:
        if not args.replay_tokens:
            raise ValueError("--replay-hit needs --replay-tokens")
        start = args.replay_hit - args.replay_tokens
        logits = ref.run_replay(tokens, args.replay_hit, args.replay_tokens,
                                chunk_sizes(len(tokens) - start, args.prefill, chunks))
        np.save(args.out, logits)
        if args.mtp_out:
            np.save(args.mtp_out, np.zeros((0, logits.shape[1])))
        return 0
    sizes = chunk_sizes(len(tokens), args.prefill, chunks)
    t0 = time.perf_counter()
    logits, mtp_logits, state = ref.run(tokens, sizes, dump=bool(args.dump_layers))
    print(f"deepseek_v4_ref: {len(tokens)} tokens in {len(sizes)} chunks, {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    np.save(args.out, logits)
    if args.mtp_out:
        np.save(args.mtp_out, mtp_logits)
    if args.dump_layers:
        np.savez(args.dump_layers, **state.dump)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
