#!/usr/bin/python3
"""Self-test of deepseek_v4_ref.py on a tiny random V4 checkpoint that this script writes itself.

The checkpoint uses the real V4 names, dtypes and layouts (§6.1): FP8 E4M3 linears with E8M0 128x128
scales, packed FP4 experts (low nibble first, E8M0 per 32 along K), BF16 norms/embedding/head, F32
mHC and compressor tensors, I64 tid2eid for the hash layers, two shards behind an index. Layers:
SWA, CSA (ratio 4, hash-routed), HCA (ratio 16), CSA, then one MTP layer (SWA); window 16.

Checks (exit status 0 = all pass):
  formats    E4M3/E2M1/bf16 grids round-trip, ties go to even, saturation, block simulations
  hadamard   orthogonal, equals the explicit Sylvester matrix, an involution
  rope       YaRN ramp bounds, interleaved pairs as complex products, inverse rotation
  sinkhorn   mHC comb rows and columns sum to ~1, entries positive
  checkpoint the reader dequantises FP8 / FP4 tensors to exactly what the writer quantised
  compressor pooled entries equal a brute-force softmax pooling, fed in irregular pieces
  chunking   one prefill == token by token == split prefills (logits, MTP logits, final state)
  state      window rings wrapped and hold the last `window` positions, compressed entries and
             partial groups have the expected counts, every query's key count follows the
             visibility rules, the indexer really selected
  causality  changing later tokens leaves earlier rows unchanged
  switches   every numerics switch changes the output (none is dead)
  noise      f32-sized noise on every linear: tiny effect without the bf16 points (info: with them)
  cli        the command line (--chunks, --mtp-out, --dump-layers) matches the in-process run

    v4_selftest.py [--work DIR] [--n-tokens 83] [--keep]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deepseek_v4_ref as v4  # noqa: E402  (same directory)

TINY = {
    "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "vocab_size": 512,
    "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 1,
    "head_dim": 128, "qk_rope_head_dim": 64, "q_lora_rank": 128, "o_groups": 2, "o_lora_rank": 64,
    "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
    "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "norm_topk_prob": True,
    "routed_scaling_factor": 1.5, "num_hash_layers": 2, "swiglu_limit": 10.0, "sliding_window": 16,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
    "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                     "beta_fast": 32, "beta_slow": 1},
    "max_position_embeddings": 1048576, "index_n_heads": 4, "index_head_dim": 128, "index_topk": 4,
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "num_nextn_predict_layers": 1,
    "compress_ratios": [0, 4, 16, 4, 0], "tie_word_embeddings": False, "bos_token_id": 0,
    "eos_token_id": 1, "torch_dtype": "bfloat16", "expert_dtype": "fp4",
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
}

FAILURES = []


def check(name, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    if not ok:
        FAILURES.append(name)


# ---------------------------------------------------------------- encoders (the writer's side)

def bf16_bits(x):
    """Round to bf16 (ties to even, via the reference's grid rounding) and return the stored uint16."""
    return (v4.bf16(x).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def e4m3_codes(q):
    """Codes of values already on the E4M3 grid (|q| <= 448)."""
    positive = v4.E4M3[:127]  # codes 0x00..0x7E in increasing order
    mag = np.searchsorted(positive, np.abs(q))
    if not np.array_equal(positive[mag], np.abs(q)):
        raise AssertionError("value off the E4M3 grid")
    return (mag | np.where(np.signbit(q), 0x80, 0)).astype(np.uint8)


def e2m1_codes(q):
    mags = v4.E2M1[:8]
    mag = np.searchsorted(mags, np.abs(q))
    if not np.array_equal(mags[mag], np.abs(q)):
        raise AssertionError("value off the E2M1 grid")
    return (mag | np.where(np.signbit(q), 8, 0)).astype(np.uint8)


def quant_fp8(w, block=128):
    """W -> (E4M3 codes, E8M0 scale bytes [ceil(out/128), ceil(in/128)], dequantised W)."""
    rows, cols = w.shape
    br, bc = -(-rows // block), -(-cols // block)
    scale_exp = np.zeros((br, bc), dtype=np.int64)
    deq = np.empty_like(w)
    codes = np.empty(w.shape, dtype=np.uint8)
    for i in range(br):
        for j in range(bc):
            blk = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
            e = int(np.ceil(np.log2(max(np.abs(blk).max(), 1e-30) / 448.0)))
            q = v4.fp8_e4m3(blk / 2.0 ** e)
            codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = e4m3_codes(q)
            deq[i * block:(i + 1) * block, j * block:(j + 1) * block] = q * 2.0 ** e
            scale_exp[i, j] = e
    return codes, (scale_exp + 127).astype(np.uint8), deq


def quant_fp4(w):
    """W [out, in] -> (packed int8 [out, in/2], E8M0 bytes [out, in/32], dequantised W)."""
    rows, cols = w.shape
    g = w.reshape(rows, cols // 32, 32)
    e = np.ceil(np.log2(np.maximum(np.abs(g).max(axis=2), 1e-30) / 6.0)).astype(np.int64)  # [out, in/32]
    q = v4.fp4_e2m1(g / np.ldexp(1.0, e)[:, :, None])
    deq = (q * np.ldexp(1.0, e)[:, :, None]).reshape(rows, cols)
    codes = e2m1_codes(q.reshape(rows, cols))
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).view(np.int8)
    return packed, (e + 127).astype(np.uint8), deq


# ---------------------------------------------------------------- the tiny checkpoint

class Writer:
    def __init__(self):
        self.tensors = {}  # name -> (dtype string, array)
        self.expected = {}  # weight prefix -> dequantised float64 W (what the reader must return)

    def bf16(self, name, x):
        self.tensors[name] = ("BF16", bf16_bits(x))

    def f32(self, name, x):
        self.tensors[name] = ("F32", np.asarray(x, dtype=np.float32))

    def fp8(self, prefix, w):
        codes, scale, deq = quant_fp8(w)
        self.tensors[prefix + ".weight"] = ("F8_E4M3", codes)
        self.tensors[prefix + ".scale"] = ("F8_E8M0", scale)
        self.expected[prefix] = deq

    def fp4(self, prefix, w):
        packed, scale, deq = quant_fp4(w)
        self.tensors[prefix + ".weight"] = ("I8", packed)
        self.tensors[prefix + ".scale"] = ("F8_E8M0", scale)
        self.expected[prefix] = deq

    def save(self, out_dir, n_shards=2):
        os.makedirs(out_dir, exist_ok=True)
        names = sorted(self.tensors)
        weight_map = {}
        for shard in range(n_shards):
            file = f"model-{shard + 1:05d}-of-{n_shards:05d}.safetensors"
            header, blobs, offset = {}, [], 0
            for name in names[shard::n_shards]:
                dtype, arr = self.tensors[name]
                data = np.ascontiguousarray(arr).tobytes()
                header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
                blobs.append(data)
                offset += len(data)
                weight_map[name] = file
            head = json.dumps(header).encode()
            head += b" " * (-len(head) % 8)
            with open(os.path.join(out_dir, file), "wb") as f:
                f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
        with open(os.path.join(out_dir, "config.json"), "w") as f:
            json.dump(TINY, f, indent=1)


def make_block(wr, rng, p, cfg, ratio, hash_layer, expert_scale):
    d, hd, rd = cfg["hidden_size"], cfg["head_dim"], cfg["qk_rope_head_dim"]
    heads, qr, g, olr = cfg["num_attention_heads"], cfg["q_lora_rank"], cfg["o_groups"], cfg["o_lora_rank"]
    hc, inter, n_exp = cfg["hc_mult"], cfg["moe_intermediate_size"], cfg["n_routed_experts"]
    mix = (2 + hc) * hc

    def lin(out_dim, in_dim, gain=1.0):
        return rng.standard_normal((out_dim, in_dim)) * gain / np.sqrt(in_dim)

    for sub in ("attn", "ffn"):
        wr.bf16(f"{p}{sub}_norm.weight", 1.0 + 0.1 * rng.standard_normal(d))
        wr.f32(f"{p}hc_{sub}_fn", rng.standard_normal((mix, hc * d)) * 2.0 / np.sqrt(hc * d))
        wr.f32(f"{p}hc_{sub}_base", 0.5 * rng.standard_normal(mix))
        wr.f32(f"{p}hc_{sub}_scale", 1.0 + 0.2 * rng.standard_normal(3))
    a = p + "attn."
    wr.fp8(a + "wq_a", lin(qr, d))
    wr.bf16(a + "q_norm.weight", 1.0 + 0.1 * rng.standard_normal(qr))
    wr.fp8(a + "wq_b", lin(heads * hd, qr))
    wr.fp8(a + "wkv", lin(hd, d))
    wr.bf16(a + "kv_norm.weight", 1.0 + 0.1 * rng.standard_normal(hd))
    wr.fp8(a + "wo_a", lin(g * olr, heads * hd // g))
    wr.fp8(a + "wo_b", lin(d, g * olr))
    wr.f32(a + "attn_sink", rng.standard_normal(heads))
    if ratio:
        coff = 2 if ratio == 4 else 1
        wr.bf16(a + "compressor.wkv.weight", lin(coff * hd, d))
        wr.bf16(a + "compressor.wgate.weight", lin(coff * hd, d, 2.0))
        wr.f32(a + "compressor.ape", 0.5 * rng.standard_normal((ratio, coff * hd)))
        wr.bf16(a + "compressor.norm.weight", 1.0 + 0.1 * rng.standard_normal(hd))
    if ratio == 4:
        ih, idim = cfg["index_n_heads"], cfg["index_head_dim"]
        wr.fp8(a + "indexer.wq_b", lin(ih * idim, qr))
        wr.bf16(a + "indexer.weights_proj.weight", lin(ih, d, 4.0))
        wr.bf16(a + "indexer.compressor.wkv.weight", lin(2 * idim, d))
        wr.bf16(a + "indexer.compressor.wgate.weight", lin(2 * idim, d, 2.0))
        wr.f32(a + "indexer.compressor.ape", 0.5 * rng.standard_normal((ratio, 2 * idim)))
        wr.bf16(a + "indexer.compressor.norm.weight", 1.0 + 0.1 * rng.standard_normal(idim))
    f = p + "ffn."
    wr.bf16(f + "gate.weight", lin(n_exp, d, 2.0))
    if hash_layer:
        tid2eid = np.argsort(rng.random((cfg["vocab_size"], n_exp)), axis=1)[:, :cfg["num_experts_per_tok"]]
        wr.tensors[f + "gate.tid2eid"] = ("I64", tid2eid.astype(np.int64))
    else:
        wr.f32(f + "gate.bias", 0.3 * rng.standard_normal(n_exp))
    for e in range(n_exp):
        wr.fp4(f"{f}experts.{e}.w1", lin(inter, d, expert_scale))
        wr.fp4(f"{f}experts.{e}.w3", lin(inter, d, expert_scale))
        wr.fp4(f"{f}experts.{e}.w2", lin(d, inter))
    # Large enough that |W1·x|, |W3·x| pass swiglu_limit sometimes: the clamp switch must matter.
    wr.fp8(f + "shared_experts.w1", lin(inter, d, expert_scale))
    wr.fp8(f + "shared_experts.w3", lin(inter, d, expert_scale))
    wr.fp8(f + "shared_experts.w2", lin(d, inter))


def make_checkpoint(out_dir, seed=0):
    cfg = TINY
    rng = np.random.default_rng(seed)
    wr = Writer()
    d, hc, vocab = cfg["hidden_size"], cfg["hc_mult"], cfg["vocab_size"]
    wr.bf16("embed.weight", rng.standard_normal((vocab, d)))
    wr.bf16("head.weight", rng.standard_normal((vocab, d)) / np.sqrt(d))
    wr.bf16("norm.weight", 1.0 + 0.1 * rng.standard_normal(d))
    for prefix in ("", "mtp.0."):
        wr.f32(prefix + "hc_head_fn", rng.standard_normal((hc, hc * d)) * 2.0 / np.sqrt(hc * d))
        wr.f32(prefix + "hc_head_base", 0.5 * rng.standard_normal(hc))
        wr.f32(prefix + "hc_head_scale", 1.0 + 0.2 * rng.standard_normal(1))
    n_layers = cfg["num_hidden_layers"]
    for i in range(n_layers):
        make_block(wr, rng, f"layers.{i}.", cfg, cfg["compress_ratios"][i], i < cfg["num_hash_layers"], 4.0)
    make_block(wr, rng, "mtp.0.", cfg, cfg["compress_ratios"][n_layers], False, 4.0)
    wr.fp8("mtp.0.e_proj", rng.standard_normal((d, d)) / np.sqrt(d))
    wr.fp8("mtp.0.h_proj", rng.standard_normal((d, d)) / np.sqrt(d))
    for name in ("enorm", "hnorm", "norm"):
        wr.bf16(f"mtp.0.{name}.weight", 1.0 + 0.1 * rng.standard_normal(d))
    wr.save(out_dir)
    return wr


# ---------------------------------------------------------------- checks

def check_formats():
    finite = v4.E4M3[~np.isnan(v4.E4M3)]
    check("formats e4m3 table", len(finite) == 254 and v4.E4M3[0x7E] == 448 and v4.E4M3[0x01] == 2.0 ** -9
          and v4.E4M3[0x08] == 2.0 ** -6 and v4.E4M3[0x38] == 1.0 and v4.E4M3[0xB8] == -1.0
          and np.isnan(v4.E4M3[0x7F]) and np.isnan(v4.E4M3[0xFF]), "254 finite codes, known values")
    ok = all(np.array_equal(v4.fp8_e4m3(finite * 2.0 ** 0), finite) for _ in [0])
    grid = np.unique(np.abs(finite))
    mid = (grid[:-1] + grid[1:]) / 2
    lo_code = np.searchsorted(v4.E4M3[:127], grid[:-1])
    want = np.where(lo_code % 2 == 0, grid[:-1], grid[1:])  # tie -> even code
    ok_tie = np.array_equal(v4.fp8_e4m3(mid), want) and np.array_equal(v4.fp8_e4m3(-mid), -want)
    ok_sat = v4.fp8_e4m3(np.array([460.0, 1e9, -1e9]))[0] == 448 and v4.fp8_e4m3(np.array([-1e9]))[0] == -448
    check("formats e4m3 rounding", ok and ok_tie and ok_sat,
          f"grid round-trips, {len(mid)} midpoints go to the even code, saturates at ±448")
    f4 = v4.E2M1
    mid4 = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    check("formats e2m1 rounding", np.array_equal(v4.fp4_e2m1(f4), f4)
          and np.array_equal(v4.fp4_e2m1(mid4), [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0])
          and v4.fp4_e2m1(np.array([7.0]))[0] == 6.0 and v4.fp4_e2m1(np.array([-100.0]))[0] == -6.0,
          "16 codes round-trip, midpoints to even, saturates at ±6")
    rng = np.random.default_rng(5)
    x = rng.standard_normal(1000) * 10.0 ** rng.uniform(-5, 5, 1000)
    xb = v4.bf16(x)
    bits = (xb.astype(np.float32).view(np.uint32))
    ok_b = (np.all(bits & 0xFFFF == 0) and np.array_equal(v4.bf16(xb), xb)
            and np.all(np.abs(xb - x) <= np.abs(x) * 2.0 ** -8))
    tie = v4.bf16(np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8]))
    check("formats bf16 rounding", ok_b and tie[0] == 1.0 and tie[1] == 1.0 + 2.0 ** -6,
          "1000 values: on the bf16 grid, idempotent, |err| <= 2^-8·|x|, ties to even")
    p = v4.pow2_ceil(np.array([1.0, 0.75, 3.0, 2.0 ** -130, 2.0 * (1 + 2.0 ** -52)]))
    check("formats pow2_ceil", np.array_equal(p, [1.0, 1.0, 4.0, 2.0 ** -130, 4.0]), f"{p.tolist()}")
    # Block simulations: a block that already lies on the grid of its own scale comes back unchanged.
    codes = rng.choice(finite, (8, 64))
    codes[:, 0] = 448.0
    scales = np.ldexp(1.0, rng.integers(-20, 10, (8, 1)))
    blocks = codes * scales
    q4 = rng.choice(f4, (8, 32))
    q4[:, 3] = -6.0
    b4 = q4 * scales
    check("formats block round-trips", np.array_equal(v4.sim_fp8(blocks, 64), blocks)
          and np.array_equal(v4.sim_fp4(b4, 32), b4) and np.array_equal(v4.sim_fp8(v4.sim_fp8(x[:960], 64), 64),
                                                                        v4.sim_fp8(x[:960], 64)),
          "FP8(64) and FP4(32) blocks on their grid unchanged; FP8 sim idempotent")
    y = rng.standard_normal((50, 64)) * 3
    s = v4.sim_fp8(y, 64)
    scale = v4.pow2_ceil(np.abs(y).max(axis=1, keepdims=True) / 448)
    rel = np.max(np.abs(s - y) / np.maximum(np.abs(y), scale * 2.0 ** -6))
    check("formats fp8 sim error", rel <= 2.0 ** -4 + 1e-12, f"max relative error {rel:.4f} <= 2^-4")


def check_hadamard():
    n = 128
    h = v4.hadamard(np.eye(n))
    sylvester = np.array([[1.0]])
    while sylvester.shape[0] < n:
        sylvester = np.kron(np.array([[1.0, 1.0], [1.0, -1.0]]), sylvester)
    x = np.random.default_rng(1).standard_normal((3, 5, n))
    err_orth = np.abs(h @ h.T - np.eye(n)).max()
    err_mat = np.abs(h - sylvester / np.sqrt(n)).max()
    err_inv = np.abs(v4.hadamard(v4.hadamard(x)) - x).max()
    check("hadamard", err_orth < 1e-14 and err_mat < 1e-15 and err_inv < 1e-14,
          f"|HH^T-I| {err_orth:.1e}, |H-Sylvester/sqrt(n)| {err_mat:.1e}, |H(Hx)-x| {err_inv:.1e}")


def check_rope():
    """YaRN ramp bounds of §3 (θ = 160000: low 15, high 25), interleaved pairs as complex numbers, inverse."""
    f = v4.rope_freqs(64, 160000.0, (16.0, 65536.0, 32.0, 1.0))
    plain = 160000.0 ** (-np.arange(32) / 32.0)
    ratio = f / plain
    ramp_ok = np.allclose(ratio[:16], 1.0, rtol=0, atol=1e-15) and np.allclose(ratio[25:], 1 / 16, rtol=0, atol=1e-15) \
        and abs(ratio[16] - (0.9 + 0.1 / 16)) < 1e-15
    x = np.random.default_rng(4).standard_normal((6, 3, 64))
    pos = np.arange(6) * 11
    got = v4.rope(x, pos, f)
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * pos[:, None, None] * f)
    err = max(np.abs(got[..., 0::2] - z.real).max(), np.abs(got[..., 1::2] - z.imag).max())
    err_inv = np.abs(v4.rope(got, pos, f, inverse=True) - x).max()
    swa = v4.rope_freqs(64, 10000.0, None)
    check("rope", ramp_ok and err < 1e-14 and err_inv < 1e-14 and np.allclose(swa, 10000.0 ** (-np.arange(32) / 32)),
          f"YaRN ramp 1 up to i=15, 1/16 from i=25; vs complex product {err:.1e}; inverse {err_inv:.1e}")


def check_sinkhorn():
    """20 iterations end with a column normalisation, so columns sum to 1 - O(eps); rows converge only as
    far as 20 iterations get them (spread-out logits leave a few 1e-2), and approach 1 with more."""
    rng = np.random.default_rng(2)
    base, ones = 0.5 * rng.standard_normal(24), np.ones(3)
    mild = rng.standard_normal((500, 24)) * 0.5
    wide = rng.standard_normal((500, 24)) * 3.0
    pre, post, comb = v4.sinkhorn_split(mild, ones, base, 4, 20, 1e-6)
    _, _, comb_wide = v4.sinkhorn_split(wide, ones, base, 4, 20, 1e-6)
    _, _, comb_long = v4.sinkhorn_split(wide, ones, base, 4, 2000, 1e-6)
    rows, cols = np.abs(comb.sum(axis=2) - 1).max(), np.abs(comb.sum(axis=1) - 1).max()
    rows_wide, cols_wide = np.abs(comb_wide.sum(axis=2) - 1).max(), np.abs(comb_wide.sum(axis=1) - 1).max()
    rows_long = np.abs(comb_long.sum(axis=2) - 1).max()
    check("sinkhorn", rows < 1e-4 and cols < 2e-6 and cols_wide < 1e-4 and rows_wide < 0.1 and rows_long < 1e-4
          and comb.min() > 0 and pre.min() > 0 and 0 < post.min() and post.max() < 2,
          f"logits std 0.5: max |row sum-1| {rows:.1e}, |col sum-1| {cols:.1e}; std 3: rows {rows_wide:.1e}, "
          f"cols {cols_wide:.1e}, rows after 2000 iterations {rows_long:.1e}")


def check_checkpoint(ref, wr):
    worst, n = 0.0, 0
    for prefix, want in wr.expected.items():
        got = ref.w.weight(prefix)
        worst = max(worst, float(np.abs(got - want).max()))
        n += 1
    prefix = "layers.0.ffn.experts.0.w1"
    low_nibbles = np.array(ref.w.raw(prefix + ".weight")).view(np.uint8)[:, 0] & 0xF
    nibble_ok = np.array_equal(ref.w.weight(prefix)[:, 0] / ref.w.scale(prefix)[:, 0], v4.E2M1[low_nibbles])
    check("checkpoint dequant", worst == 0.0 and nibble_ok and n > 100,
          f"{n} FP8/FP4 tensors read back exactly as written (max |d| {worst}); element 0 = low nibble")


def check_compressor(ref):
    """The pooling of §4.4 against a brute-force per-channel softmax, with tokens fed in pieces."""
    rng = np.random.default_rng(3)
    d, dc = ref.cfg.dim, 128
    for ratio, overlap in ((4, True), (16, False)):
        coff = 2 if overlap else 1
        p = f"selftest{ratio}."
        ref.w.cache[p + "wkv.weight"] = rng.standard_normal((coff * dc, d)) / 16
        ref.w.cache[p + "wgate.weight"] = rng.standard_normal((coff * dc, d)) / 4
        ref.w.cache[p + "ape"] = rng.standard_normal((ratio, coff * dc))
        ref.w.cache[p + "norm.weight"] = np.ones(dc)
        n = 5 * ratio + 3
        x = rng.standard_normal((n, d))
        a = x @ ref.w.cache[p + "wkv.weight"].T
        z = x @ ref.w.cache[p + "wgate.weight"].T + ref.w.cache[p + "ape"][np.arange(n) % ratio]
        want = []
        for j in range(n // ratio):
            pooled = np.empty(dc)
            for c in range(dc):
                sc = [z[t, c + dc * overlap] for t in range(j * ratio, (j + 1) * ratio)]
                va = [a[t, c + dc * overlap] for t in range(j * ratio, (j + 1) * ratio)]
                if overlap and j > 0:
                    sc += [z[t, c] for t in range((j - 1) * ratio, j * ratio)]
                    va += [a[t, c] for t in range((j - 1) * ratio, j * ratio)]
                wgt = np.exp(np.array(sc) - max(sc))
                pooled[c] = np.dot(wgt / wgt.sum(), va)
            want.append(pooled)
        want = ref.norm(np.array(want), p + "norm.weight")
        want[:, -64:] = v4.rope(want[:, -64:], np.arange(len(want)) * ratio, ref.freqs_comp)
        want = ref.kv_store_sim(want)
        cs = v4.CompressorState(ratio, coff * dc, overlap)
        got, start = [], 0
        for size in (3, 1, ratio + 2, 2 * ratio - 1, n):
            piece = slice(start, min(start + size, n))
            got.append(ref.compress(p, x[piece], np.arange(n)[piece], cs, dc, ref.freqs_comp, False))
            start = piece.stop
        got = np.concatenate(got)
        err = np.abs(got - want).max() / np.abs(want).max() if len(got) == len(want) else np.inf
        check(f"compressor ratio {ratio}", len(got) == n // ratio and err < 1e-6 and cs.n_pending == n % ratio,
              f"{len(got)} entries from {n} tokens in 5 pieces, rel err vs brute force {err:.1e} "
              f"(bf16/FP8 rounding of the stored entry), {cs.n_pending} pending")


def compare(name, a, b, tol_rel=1e-12):
    scale = max(float(np.abs(a).max()), 1e-300)
    diff = float(np.abs(a - b).max()) if a.shape == b.shape else np.inf
    check(name, diff <= tol_rel * scale, f"max|d| {diff:.2e} (rel {diff / scale:.1e}), "
          f"{'bitwise equal' if np.array_equal(a, b) else 'not bitwise equal'}")


def state_arrays(state):
    out = {}
    for tag, layers in (("L", state.layers), ("M", state.mtp_layers)):
        for i, ls in enumerate(layers):
            out[f"{tag}{i}.ring"] = ls.ring_kv
            out[f"{tag}{i}.ring_pos"] = ls.ring_pos
            if ls.ratio:
                out[f"{tag}{i}.comp"] = ls.comp_kv
                out[f"{tag}{i}.comp_state"] = np.nan_to_num(ls.comp.kv) + np.nan_to_num(ls.comp.score, neginf=-7.0)
            if ls.csa:
                out[f"{tag}{i}.idx_keys"] = ls.idx_keys
    return out


def check_chunking(ref, tokens):
    n = len(tokens)
    runs = {"one prefill": [n], "token by token": [1] * n,
            "split 5,3,17,1,9,..": v4.chunk_sizes(n, chunks=[5, 3, 17, 1, 9]),
            "prefill 21 then decode": v4.chunk_sizes(n, prefill=21),
            "split 16,16,..": v4.chunk_sizes(n, chunks=[16] * (n // 16))}
    results = {}
    for tag, sizes in runs.items():
        t0 = time.perf_counter()
        results[tag] = ref.run(tokens, sizes)
        print(f"     ({tag}: {len(sizes)} chunks, {time.perf_counter() - t0:.1f} s)")
    base_logits, base_mtp, base_state = results["one prefill"]
    check("chunking shapes", base_logits.shape == (n, ref.cfg.vocab) and base_mtp.shape == (n - 1, ref.cfg.vocab)
          and np.all(np.isfinite(base_logits)) and np.all(np.isfinite(base_mtp)),
          f"logits {base_logits.shape}, MTP {base_mtp.shape}, finite, max|logit| {np.abs(base_logits).max():.2f}")
    ref_state = state_arrays(base_state)
    for tag, (logits, mtp, state) in results.items():
        if tag == "one prefill":
            continue
        compare(f"chunking {tag}: logits", base_logits, logits)
        compare(f"chunking {tag}: MTP logits", base_mtp, mtp)
        other = state_arrays(state)
        same = all(np.array_equal(ref_state[k], other[k]) for k in ref_state) and ref_state.keys() == other.keys()
        check(f"chunking {tag}: final state", same, f"{len(ref_state)} state arrays bitwise equal to the prefill's")
    return results


def check_state(ref, results, n):
    cfg = ref.cfg
    _, _, state = results["token by token"]
    win = cfg.window
    ok_ring, ok_comp, detail = True, True, []
    kv_by_pos = {}
    for i, ls in enumerate(state.layers + state.mtp_layers):
        last = n if i < cfg.n_layers else n - 1  # the MTP layer has one row fewer
        want_pos = np.full(win, -1)
        for pos in range(max(0, last - win), last):
            want_pos[pos % win] = pos
        ok_ring &= np.array_equal(ls.ring_pos, want_pos)
        kv_by_pos[i] = ls
        if ls.ratio:
            ok_comp &= len(ls.comp_kv) == last // ls.ratio and ls.comp.n_pending == last % ls.ratio
            detail.append(f"layer {i} ratio {ls.ratio}: {len(ls.comp_kv)} entries, {ls.comp.n_pending} pending")
        if ls.csa:
            ok_comp &= len(ls.idx_keys) == last // ls.ratio and ls.idx_comp.n_pending == last % ls.ratio
            # indexer keys: Hadamard then FP4 — every 32-block is on the E2M1 grid of a power-of-two scale
            blocks = ls.idx_keys.reshape(-1, 32)
            s = v4.pow2_ceil(np.maximum(np.abs(blocks).max(1, keepdims=True), 6 * 2.0 ** -126) / 6)
            ok_comp &= np.array_equal(v4.fp4_e2m1(blocks / s), blocks / s)
        nope = cfg.head_dim - cfg.rope_dim
        blocks = ls.ring_kv[:, :nope].reshape(-1, 64)
        s = v4.pow2_ceil(np.maximum(np.abs(blocks).max(1, keepdims=True), 1e-4) / 448)
        ok_ring &= np.array_equal(v4.fp8_e4m3(blocks / s), blocks / s)
    check("state window rings", ok_ring and n > 2 * win,
          f"{n} tokens > 2x window {win}: every ring holds positions {n - win}..{n - 1} (MTP: one fewer) at "
          f"slot p mod {win}; non-RoPE channels on the FP8 grid")
    check("state compressed caches", ok_comp, "; ".join(detail) + "; indexer keys on the FP4 grid")


def check_indexer_selects(ref, tokens):
    calls = {"topk": 0, "all": 0}
    original = ref.index_select

    def counting(q, w, keys, n_visible):
        calls["topk" if n_visible > ref.cfg.index_topk else "all"] += 1
        return original(q, w, keys, n_visible)
    ref.index_select = counting
    try:
        base, _, _ = ref.run(tokens, [len(tokens)])
        ref.cfg.index_topk = 10 ** 6  # every visible entry: must change the result if selection mattered
        wide, _, _ = ref.run(tokens, [len(tokens)])
    finally:
        ref.cfg.index_topk = TINY["index_topk"]
        ref.index_select = original
    diff = float(np.abs(base - wide).max())
    check("state indexer selects", calls["topk"] > 0 and diff > 1e-6,
          f"{calls['topk']} queries chose top-{TINY['index_topk']} of more visible entries; keeping all entries "
          f"instead moves the logits by {diff:.2e}")


def check_key_counts(ref, tokens):
    """Each query attends to exactly min(p+1, window) window keys plus its visible compressed entries:
    (p+1)//ratio of them in HCA layers, min(index_topk, (p+1)//4) in CSA layers (spec §4.3, §4.5, §4.6)."""
    seen = []
    original = ref.sparse_attention

    def counting(q, keys, sink):
        seen.append(len(keys))
        return original(q, keys, sink)
    ref.sparse_attention = counting
    try:
        ref.run(tokens, v4.chunk_sizes(len(tokens), chunks=[7, 30, 1]))
    finally:
        ref.sparse_attention = original
    cfg, n = ref.cfg, len(tokens)
    # Calls go chunk by chunk, layer by layer, token by token; the MTP layer follows the main layers.
    expect = []
    start = 0
    for size in v4.chunk_sizes(n, chunks=[7, 30, 1]):
        for layer in range(cfg.n_layers):
            ratio = cfg.compress_ratios[layer]
            for p in range(start, start + size):
                extra = 0 if not ratio else (p + 1) // ratio
                if ratio == 4:
                    extra = min(cfg.index_topk, extra)
                expect.append(min(p + 1, cfg.window) + extra)
        mtp_rows = range(start - 1 if start else 0, start + size - 1)
        expect += [min(p + 1, cfg.window) for p in mtp_rows]
        start += size
    check("state key counts", seen == expect, f"{len(seen)} attention calls; window + compressed key counts "
          f"as the visibility rules say (first mismatch at call "
          f"{next((i for i, (a, b) in enumerate(zip(seen, expect)) if a != b), None)})")


def check_causality(ref, tokens, base_logits):
    k = 37
    changed = list(tokens[:k]) + [(t * 7 + 3) % ref.cfg.vocab for t in tokens[k:]]
    logits, _, _ = ref.run(changed, [len(changed)])
    check("causality", np.array_equal(logits[:k], base_logits[:k]) and not np.array_equal(logits[k:], base_logits[k:]),
          f"rows 0..{k - 1} bitwise unchanged after changing tokens {k}..; later rows differ")


def check_switches(model_dir, tokens, base_logits):
    variants = {"kv_sim=none": v4.V4Numerics(kv_sim="none"),
                "shared_expert_clamp=False": v4.V4Numerics(shared_expert_clamp=False),
                "act_quant=True": v4.V4Numerics(act_quant=True), "bf16=False": v4.V4Numerics(bf16=False),
                "index_score=bf16": v4.V4Numerics(index_score="bf16")}
    for tag, num in variants.items():
        ref = v4.DeepseekV4Reference(model_dir, num)
        logits, mtp, _ = ref.run(tokens, [len(tokens)])
        diff = float(np.abs(logits - base_logits).max())
        line = f"max|d logits| vs defaults {diff:.2e}"
        ok = np.all(np.isfinite(logits))
        if tag != "index_score=bf16":  # bf16 index scores may or may not flip a selection on this model
            ok &= diff > 0
        if tag in ("act_quant=True", "index_score=bf16"):  # non-default paths keep chunk invariance too
            split, split_mtp, _ = ref.run(tokens, v4.chunk_sizes(len(tokens), chunks=[7, 1, 13]))
            ok &= np.array_equal(split, logits) and np.array_equal(split_mtp, mtp)
            line += "; split prefill bitwise equal"
        check(f"switch {tag}", ok, line)


def check_noise_floor(model_dir, tokens):
    """How far an f32 engine may land from the reference: `f32_noise` rounds every linear output to f32.
    Without the bf16 rounding points the model is smooth (differences ~1e-7 of the logits); with them an
    f32-sized perturbation flips bf16 roundings and the logits move by up to ~1e-2 (README "V4")."""
    for tag, kw in (("no bf16 points, kv_sim none", dict(bf16=False, kv_sim="none")),
                    ("no bf16 points", dict(bf16=False)), ("defaults", dict())):
        a, am, _ = v4.DeepseekV4Reference(model_dir, v4.V4Numerics(**kw)).run(tokens, [len(tokens)])
        b, bm, _ = v4.DeepseekV4Reference(model_dir, v4.V4Numerics(f32_noise=True, **kw)).run(tokens, [len(tokens)])
        row = np.abs(a - b).max(axis=1)
        rel = row.max() / np.abs(a).max()
        line = (f"max|d| {row.max():.2e} (rel {rel:.1e}), median row {np.median(row):.1e}, "
                f"MTP {np.abs(am - bm).max():.2e}, "
                f"argmax differs on {int((a.argmax(1) != b.argmax(1)).sum())}/{len(a)} rows")
        if kw.get("bf16", True):
            print(f"info noise floor {tag}: {line}")
        else:
            check(f"noise floor {tag}", rel < 1e-5, line + " (smooth without bf16 points: < 1e-5 rel)")


def check_cli(model_dir, tokens, work, want_logits, want_mtp):
    out, mtp_out = os.path.join(work, "cli_logits.npy"), os.path.join(work, "cli_mtp.npy")
    dump = os.path.join(work, "cli_layers.npz")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "deepseek_v4_ref.py")
    proc = subprocess.run([sys.executable, script, "--model", model_dir, "--tokens", ",".join(map(str, tokens)),
                           "--chunks", "9,2", "--out", out, "--mtp-out", mtp_out, "--dump-layers", dump],
                          capture_output=True, text=True)
    ok = (proc.returncode == 0 and np.array_equal(np.load(out), want_logits)
          and np.array_equal(np.load(mtp_out), want_mtp))
    if ok:
        layers = np.load(dump)
        n, shape = len(tokens), (TINY["hc_mult"], TINY["hidden_size"])
        ok = sorted(layers.files) == ["layer0", "layer1", "layer2", "layer3", "mtp0"] and all(
            layers[k].shape == ((n - 1) if k == "mtp0" else n,) + shape for k in layers.files)
    check("cli", ok, f"--chunks 9,2 via the command line equals the in-process prefill, --dump-layers has every "
          f"block ({proc.stderr.strip() or proc.returncode})")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", help="directory for the tiny checkpoint (default: a temporary one)")
    ap.add_argument("--n-tokens", type=int, default=83)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args(argv)
    work = args.work or tempfile.mkdtemp(prefix="v4_selftest_")
    t_start = time.perf_counter()
    try:
        model_dir = os.path.join(work, "tiny_v4")
        wr = make_checkpoint(model_dir)
        check_formats()
        check_hadamard()
        check_rope()
        check_sinkhorn()
        ref = v4.DeepseekV4Reference(model_dir)
        check_checkpoint(ref, wr)
        check_compressor(v4.DeepseekV4Reference(model_dir))
        rng = np.random.default_rng(1234)
        tokens = [0] + [int(t) for t in rng.integers(2, TINY["vocab_size"], args.n_tokens - 1)]
        results = check_chunking(ref, tokens)
        check_state(ref, results, len(tokens))
        check_indexer_selects(ref, tokens)
        check_key_counts(ref, tokens)
        base_logits, base_mtp, _ = results["one prefill"]
        check_causality(ref, tokens, base_logits)
        check_switches(model_dir, tokens, base_logits)
        check_noise_floor(model_dir, tokens)
        check_cli(model_dir, tokens[:20], work, *ref.run(tokens[:20], [20])[:2])
    finally:
        if not args.work and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{'PASS' if not FAILURES else 'FAIL ' + ', '.join(FAILURES)} ({time.perf_counter() - t_start:.1f} s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
