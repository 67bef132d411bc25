#!/usr/bin/python3
"""Independent float64 numpy reference of the DeepSeek-V3 forward pass (main model and MTP).

Written from docs/numerics.md and the model spec (§8), not from the engine: its own safetensors
reader, its own FP8 decoding table, plain (non-absorbed) MLA, YaRN RoPE, sigmoid group-limited
routing. Needs only python3 and numpy.

    deepseek_v3_ref.py --model DIR --ids 0,17,42 --out logits.npy [--mtp-out mtp.npy]

Row i of the logits is the distribution after token i. Row i of the MTP logits (i = 0..n-2)
predicts token i+2 from the main model's final (normed) hidden state at i and token i+1.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np


# ---------------------------------------------------------------- number formats

def e4m3_table():
    """The 256 FP8 E4M3FN values: bias 7, no infinities, S.1111.111 = NaN, subnormals at e = 0."""
    table = np.zeros(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exponent = (code >> 3) & 0xF
        mantissa = code & 0x7
        if exponent == 0xF and mantissa == 0x7:
            table[code] = np.nan
        elif exponent == 0:
            table[code] = sign * (mantissa / 8.0) * 2.0 ** (1 - 7)
        else:
            table[code] = sign * (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7)
    return table


E4M3 = e4m3_table()


def bf16_to_f64(raw_u16):
    return (raw_u16.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


# ---------------------------------------------------------------- checkpoint reading

class SafetensorsDir:
    """Tensors of a HF checkpoint dir (model.safetensors or a sharded index), decoded to float64."""

    DTYPES = {"F32": (np.float32, 4), "F64": (np.float64, 8), "BF16": (np.uint16, 2),
              "F16": (np.float16, 2), "F8_E4M3": (np.uint8, 1)}

    def __init__(self, model_dir):
        self.dir = model_dir
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
                if name == "__metadata__":
                    continue
                begin, end = info["data_offsets"]
                self.entries[name] = (path, 8 + header_len + begin, end - begin,
                                      info["dtype"], tuple(info["shape"]))

    def has(self, name):
        return name in self.entries

    def raw(self, name, rows=None):
        """The stored array (BF16 as uint16, FP8 as uint8 codes); `rows` selects leading rows."""
        path, start, nbytes, dtype, shape = self.entries[name]
        np_dtype, size = self.DTYPES[dtype]
        arr = np.memmap(path, dtype=np_dtype, mode="r", offset=start, shape=shape)
        return dtype, np.array(arr if rows is None else arr[rows])

    def f64(self, name, rows=None):
        dtype, arr = self.raw(name, rows)
        if dtype == "BF16":
            return bf16_to_f64(arr)
        if dtype == "F8_E4M3":
            raise ValueError(f"{name}: FP8 tensor read without its scale; use linear()")
        return arr.astype(np.float64)

    def linear(self, prefix):
        """W [out, in] of `<prefix>.weight`; FP8 weights are multiplied by their 128x128 scales."""
        name = prefix + ".weight"
        dtype, arr = self.raw(name)
        if dtype != "F8_E4M3":
            return self.f64(name)
        scale = self.f64(prefix + ".weight_scale_inv")  # [ceil(out/128), ceil(in/128)], multiplied
        rows, cols = arr.shape
        expected = (-(-rows // 128), -(-cols // 128))
        if scale.shape != expected:
            raise ValueError(f"{name}: scale shape {scale.shape}, expected {expected} (128x128 blocks)")
        full = np.repeat(np.repeat(scale, 128, axis=0), 128, axis=1)[:rows, :cols]
        return E4M3[arr] * full


# ---------------------------------------------------------------- building blocks

def rms_norm(x, weight, eps):
    return weight * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def yarn_enabled(cfg):
    rs = cfg.get("rope_scaling")
    return bool(rs) and rs.get("type", rs.get("rope_type")) == "yarn"


def rope_inv_freq(cfg):
    """f_i for the rope part (numerics.md: YaRN whenever rope_scaling.type == yarn), float64."""
    dim = cfg["qk_rope_head_dim"]
    theta = cfg["rope_theta"]
    i = np.arange(dim // 2, dtype=np.float64)
    freq = 1.0 / theta ** (2.0 * i / dim)
    if not yarn_enabled(cfg):
        return freq
    rs = cfg["rope_scaling"]
    if rs.get("mscale", 1) != rs.get("mscale_all_dim", 0):
        # HF then also scales cos/sin by yarn_mscale(mscale)/yarn_mscale(mscale_all_dim);
        # numerics.md does not pin that case down and no DeepSeek config uses it.
        raise NotImplementedError("reference: rope_scaling.mscale != mscale_all_dim")
    factor = rs["factor"]
    original = rs["original_max_position_embeddings"]

    def correction_dim(n_rotations):
        return dim * math.log(original / (n_rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(rs["beta_fast"])), 0)
    high = min(math.ceil(correction_dim(rs["beta_slow"])), dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((i - low) / (high - low), 0.0, 1.0)
    return freq * (1.0 - ramp) + (freq / factor) * ramp


def apply_rope(x, positions, inv_freq):
    """Interleaved RoPE: pairs (x[2i], x[2i+1]) rotated by pos*f_i. x: [T, ..., d_rope]."""
    angle = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # [T, d/2]
    shape = (x.shape[0],) + (1,) * (x.ndim - 2) + (inv_freq.shape[0],)
    cos = np.cos(angle).reshape(shape)
    sin = np.sin(angle).reshape(shape)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def softmax_scale(cfg):
    scale = (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]) ** -0.5
    rs = cfg.get("rope_scaling")
    if yarn_enabled(cfg) and rs.get("mscale_all_dim", 0) > 0:
        m = 0.1 * rs["mscale_all_dim"] * math.log(rs["factor"]) + 1.0
        scale *= m * m
    return scale


def is_moe_layer(cfg, layer):
    return (cfg.get("n_routed_experts") or 0) > 0 and layer >= cfg.get("first_k_dense_replace", 0) \
        and layer % cfg.get("moe_layer_freq", 1) == 0


# ---------------------------------------------------------------- the model

class DeepseekV3Reference:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = json.load(f)
        self.w = SafetensorsDir(model_dir)
        self.eps = self.cfg["rms_norm_eps"]
        self.inv_freq = rope_inv_freq(self.cfg)
        self.scale = softmax_scale(self.cfg)

    def norm(self, x, name):
        return rms_norm(x, self.w.f64(name), self.eps)

    def attention(self, p, x, positions):
        """Plain MLA with a causal mask over this call's tokens. x: [T, hidden]."""
        cfg, w = self.cfg, self.w
        n_tokens = x.shape[0]
        n_heads = cfg["num_attention_heads"]
        d_nope, d_rope, d_v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        kv_rank = cfg["kv_lora_rank"]
        if cfg.get("q_lora_rank"):
            c_q = self.norm(x @ w.linear(p + "q_a_proj").T, p + "q_a_layernorm.weight")
            q = c_q @ w.linear(p + "q_b_proj").T
        else:
            q = x @ w.linear(p + "q_proj").T
        q = q.reshape(n_tokens, n_heads, d_nope + d_rope)  # q: [T, H, nope+rope]
        q_nope, q_pe = q[..., :d_nope], apply_rope(q[..., d_nope:], positions, self.inv_freq)

        kv_a = x @ w.linear(p + "kv_a_proj_with_mqa").T  # [T, kv_rank + rope]
        c_kv = self.norm(kv_a[:, :kv_rank], p + "kv_a_layernorm.weight")
        k_pe = apply_rope(kv_a[:, kv_rank:], positions, self.inv_freq)  # [T, rope], all heads
        kv = (c_kv @ w.linear(p + "kv_b_proj").T).reshape(n_tokens, n_heads, d_nope + d_v)
        k_nope, v = kv[..., :d_nope], kv[..., d_nope:]

        # scores: [H, T_q, T_k]
        scores = np.einsum("qhd,khd->hqk", q_nope, k_nope) + np.einsum("qhd,kd->hqk", q_pe, k_pe)
        scores *= self.scale
        causal = positions[None, :] <= positions[:, None]  # key position <= query position
        scores = np.where(causal[None], scores, -np.inf)
        probs = softmax(scores, axis=-1)
        out = np.einsum("hqk,khd->qhd", probs, v).reshape(n_tokens, n_heads * d_v)
        return out @ w.linear(p + "o_proj").T

    def mlp(self, p, x):
        gate = x @ self.w.linear(p + "gate_proj").T
        up = x @ self.w.linear(p + "up_proj").T
        return (silu(gate) * up) @ self.w.linear(p + "down_proj").T

    def route(self, p, x):
        """V3 routing: sigmoid scores, biased group-limited top-k. Returns (experts, weights) [T, k]."""
        cfg = self.cfg
        n_experts, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
        n_group, topk_group = cfg.get("n_group", 1), cfg.get("topk_group", 1)
        assert cfg.get("scoring_func", "sigmoid") == "sigmoid", "reference implements V3 routing"
        scores = sigmoid(x @ self.w.linear(p + "gate").T)  # [T, E]
        biased = scores + self.w.f64(p + "gate.e_score_correction_bias")[None, :]
        experts = np.zeros((x.shape[0], k), dtype=np.int64)
        weights = np.zeros((x.shape[0], k))
        per_group = n_experts // n_group
        for t in range(x.shape[0]):
            groups = biased[t].reshape(n_group, per_group)
            group_score = np.sort(groups, axis=1)[:, ::-1][:, :2].sum(axis=1)
            kept_groups = np.argsort(-group_score, kind="stable")[:topk_group]
            allowed = np.full(n_experts, -np.inf)
            for g in kept_groups:
                allowed[g * per_group:(g + 1) * per_group] = biased[t, g * per_group:(g + 1) * per_group]
            chosen = np.argsort(-allowed, kind="stable")[:k]  # ties: lower index first
            wt = scores[t, chosen]
            if cfg.get("norm_topk_prob", True):
                wt = wt / wt.sum()
            experts[t], weights[t] = chosen, wt * cfg.get("routed_scaling_factor", 1.0)
        return experts, weights

    def moe(self, p, x):
        experts, weights = self.route(p, x)
        out = np.zeros_like(x)
        for e in np.unique(experts):
            rows, slot = np.nonzero(experts == e)
            out[rows] += weights[rows, slot][:, None] * self.mlp(f"{p}experts.{e}.", x[rows])
        if self.cfg.get("n_shared_experts", 0) > 0:
            out += self.mlp(p + "shared_experts.", x)
        return out

    def decoder_layer(self, layer, x, positions):
        p = f"model.layers.{layer}."
        x = x + self.attention(p + "self_attn.", self.norm(x, p + "input_layernorm.weight"), positions)
        h = self.norm(x, p + "post_attention_layernorm.weight")
        ffn = self.moe(p + "mlp.", h) if is_moe_layer(self.cfg, layer) else self.mlp(p + "mlp.", h)
        return x + ffn

    def head(self, h, name):
        """h @ W^T for a [vocab, hidden] head, in row chunks to bound memory."""
        vocab = self.w.entries[name][4][0]
        out = np.empty((h.shape[0], vocab))
        chunk = 16384
        for r in range(0, vocab, chunk):
            out[:, r:r + chunk] = h @ self.w.f64(name, slice(r, r + chunk)).T
        return out

    def forward(self, ids):
        """Main-model logits [T, vocab] and the final normed hidden states [T, hidden]."""
        ids = np.asarray(ids, dtype=np.int64)
        positions = np.arange(len(ids))
        x = self.embed("model.embed_tokens.weight", ids)
        for layer in range(self.cfg["num_hidden_layers"]):
            x = self.decoder_layer(layer, x, positions)
        h = self.norm(x, "model.norm.weight")
        return self.head(h, "lm_head.weight"), h

    def embed(self, name, ids):
        return np.stack([self.w.f64(name, slice(int(i), int(i) + 1))[0] for i in ids])

    def mtp_forward(self, ids, h_final):
        """MTP logits [T-1, vocab]: row i from h_final[i] and token ids[i+1], positions 0..T-2."""
        layer = self.cfg["num_hidden_layers"]
        p = f"model.layers.{layer}."
        ids = np.asarray(ids, dtype=np.int64)
        e = self.norm(self.embed(p + "embed_tokens.weight", ids[1:]), p + "enorm.weight")
        h = self.norm(h_final[:-1], p + "hnorm.weight")
        z = np.concatenate([e, h], axis=1) @ self.w.linear(p + "eh_proj").T
        z = self.decoder_layer(layer, z, np.arange(len(ids) - 1))
        z = self.norm(z, p + "shared_head.norm.weight")
        return self.head(z, p + "shared_head.head.weight")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True)
    ap.add_argument("--mtp-out")
    args = ap.parse_args(argv)
    ids = [int(t) for t in args.ids.split(",")]
    ref = DeepseekV3Reference(args.model)
    logits, h = ref.forward(ids)
    np.save(args.out, logits)
    if args.mtp_out:
        np.save(args.mtp_out, ref.mtp_forward(ids, h))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
