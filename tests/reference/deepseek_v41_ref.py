#!/usr/bin/python3
"""Independent float64 numpy reference of the DeepSeek-V4.1-Flash forward pass (text, main model).

Written from the model spec (../shared/specs/model-spec.md beside the repo, §2.2, §3, §5, §6.2, §6.3, §9), not
from the engine. It shares with deepseek_v4_ref.py only what §3 says the two models share: the number formats,
the checkpoint reader, RoPE and the Sinkhorn split of the mHC mixes. Everything is float64 except the rounding
and storage-simulation steps of §3: RMSNorm outputs, mHC collapse/expand and the attention probabilities rounded
once to bf16; the window KV through FP8 (32-blocks over all channels, power-of-two scales); the compressed KV
through FP4 (16-blocks, E4M3 scales); index keys and queries through FP4 (32-blocks, power-of-two scales).

    deepseek_v41_ref.py --model DIR --tokens 0,17,42 --out logits.npy [--prefill N | --chunks 5,3,...]
                        [--no-bf16] [--kv-sim fp8|none] [--shared-expert-clamp on|off] [--q-head-norm on|off]
                        [--sim-input f64|f32] [--engram-ngram-order spec|reversed]
                        [--decoder-replay KEEP [--prompt-len P]] [--replay-hit H --replay-tokens W]
                        [--dspark-out FILE.npy [--dspark-causal] [--dspark-dump FILE.npz]]

Engram (§5.7) is its own: the compressed token map from the checkpoint's tokenizer.json (byte-level vocabulary
decoded here, Python's unicodedata for NFKC/NFD/Mn, str.lower, str.strip), the hash constants from NumPy's
default_rng and a trial-division prime walk, the n-grams from the sequence's whole token list, the tables
dequantised per row, the gates in float64. `--engram-ngram-order` (a mutation switch for the tests) hashes
the history in the wrong order.

Decoder-side SWA bounded replay (deepinfer-features.md §6.1, DeepInfer's DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=
compact, `--decoder-replay KEEP`): the decoder is every layer from the last KV source on (the release's 20..39: their
compressed KV is that source's projection of the encoder output, §5.11). In the prompt (its first P tokens,
`--prompt-len`, default the first chunk), only the positions from P − KEEP on go through the decoder; every prompt
row still feeds the first decoder layer's compressor, so the decoder's compressed KV and index keys are those of the
full run. Decoder window attention then sees no row before the cut. Output rows: only the positions that reached
the head (the prompt's last KEEP, then every decoded one).

Encoder-side SWA bounded replay on a prefix-cache hit (`--replay-hit H --replay-tokens W`, §6.1, as
deepseek_v4_ref.py): a cold run of tokens[:H] leaves its compressed KV and index keys; a new sequence starts at
s = H − W with empty window rings and compressor groups and those caches' entries below H / ratio (groups completing
below H keep the cached entry). It has no token history before s: Engram's n-gram slots reaching before s are the
pad's (the engine's slot keeps no history across a replay; its W is window + max_ngram_size − 1 so those rows leave
the rings before H). `--out` holds the rows from s (or from the decoder-replay cut, if later).

DSpark (§5.9, docs/dspark.md, `--dspark-out FILE.npy`): after the main model has run over every id (positions
0..n-1), the context features c_t of every position (the stream means entering the dspark_target_layer_ids layers,
after an Engram module there, concatenated, mtp.0.main_proj, RMSNorm with mtp.0.main_norm at the final_norm point),
then one draft block: anchor = the last id at position p = n - 1, context = the last sliding_window positions before
p. Each stage mtp.s (s = 0..num_nextn_predict_layers-1) turns the context's c_t into its own window KV (wkv, kv_norm,
RoPE at t, FP8 simulation; no attn_norm); the rows [anchor, noise × (B-1)] at p..p+B-1 (hc streams = their
embedding) run through the stages as V4.1 blocks (delayed pre continuing across the stages; window attention over
the context entries and then the block's own KV, bidirectional, with the sink; MoE with dspark_n_routed_experts /
dspark_num_experts_per_tok); the final collapse (the last stage's FFN pre), RMSNorm mtp.{S-1}.norm, the shared head;
then the sequential greedy Markov chain (z_j = U_j + markov_head.head·markov_head.embed[prev_j], prev_0 = anchor,
y_j = argmax z_j) and the confidence c_j = σ(w·[h_j ; markov_head.embed[prev_j]] + b), in float64 with no
rounding point. FILE.npy is float32 [B, V + 2], row j = z_j (V columns), c_j, y_j. `--dspark-causal` (a mutation
for the tests) masks the block causally; `--dspark-dump FILE.npz` keeps the block's intermediate values.

Not covered (as in the engine today): vision (§5.10). Index keys are published every step (§9), so a prefill and
token-by-token decode agree.
"""
import argparse
import dataclasses
import json
import os
import re
import sys
import time
import unicodedata

import numpy as np

from deepseek_v4_ref import (BF16_POINTS, E4M3, Checkpoint, bf16, blockwise, chunk_sizes, e8m0, fp4_e2m1,
                             fp8_e4m3, parse_points, rope, rope_freqs, sim_fp4, sim_fp8, sinkhorn_split)


# ---- Engram constants (§5.7), from the spec's words
def byte_level_alphabet():
    """GPT-2's bytes -> printable characters map (the byte-level BPE vocabulary's spelling)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def engram_token_map(model_dir, vocab):
    """token id -> compressed id: decode, NFKC -> NFD -> drop Mn -> lower -> [ \\t\\r\\n]+ -> " " -> strip."""
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    to_byte = byte_level_alphabet()
    raw = {}  # id -> (spelling, bytes)
    for spelling, i in tj["model"]["vocab"].items():
        if all(ch in to_byte for ch in spelling):
            raw[i] = (spelling, bytes(to_byte[ch] for ch in spelling))
        else:  # a special token's text stored in the vocabulary as is
            raw[i] = (spelling, spelling.encode("utf-8"))
    for a in tj.get("added_tokens", []):
        raw[a["id"]] = (a["content"], a["content"].encode("utf-8"))
    keys, out = {}, np.zeros(vocab, dtype=np.int64)
    for i in range(vocab):
        if i not in raw:
            key = ""  # an id past the vocabulary decodes to ""
        else:
            spelling, b = raw[i]
            try:
                text = b.decode("utf-8")
            except UnicodeDecodeError:
                key = spelling  # undecodable bytes: the raw token string
            else:
                t = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text))
                t = "".join(ch for ch in t if unicodedata.category(ch) != "Mn").lower()
                key = re.sub(r"[ \t\r\n]+", " ", t).strip()
                if not key:
                    key = " " if text and text.isspace() else text
        out[i] = keys.setdefault(key, len(keys))
    return out, len(keys)


def wrap64(v):
    """A Python int as NumPy's wrapping int64."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def is_prime(n):
    return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


class EngramConsts:
    def __init__(self, c):
        self.layers = list(c["engram_layer_ids"])
        self.n = c["engram_max_ngram_size"]
        self.heads = c["engram_n_heads"]
        self.head_dim = c["engram_head_dim"]
        self.pad = c["engram_pad_token_id"]
        self.compressed_size = c["engram_compressed_vocab_size"]
        bound = ((2 ** 63 - 1) // self.compressed_size) // 2
        self.mult, self.primes, self.offsets = {}, {}, {}
        candidate = c["engram_vocab_size"]
        for li, layer in enumerate(self.layers):
            self.mult[layer] = [int(v) * 2 + 1 for v in np.random.default_rng(10007 * layer).integers(0, bound, self.n)]
            ps = []
            for _ in range((self.n - 1) * self.heads):
                while not is_prime(candidate):
                    candidate += 1
                ps.append(candidate)
                candidate += 1
            self.primes[layer] = ps
            self.offsets[layer] = [sum(ps[:k]) for k in range(len(ps))]
            if sum(ps) != c["engram_num_embeddings"][li]:
                raise ValueError(f"engram_num_embeddings[{li}] {c['engram_num_embeddings'][li]} != sum of primes {sum(ps)}")


def sim_fp4_e4m3(x, block=16):
    """§3 V4.1 compressed KV: FP4 per 16 elements with an E4M3 scale s = e4m3(max(amax, 6·2^-9) / 6)."""
    def one(b):
        amax = np.maximum(np.max(np.abs(b), axis=-1, keepdims=True), 6.0 * 2.0 ** -9)
        s = fp8_e4m3(amax / 6.0)
        return fp4_e2m1(b / s) * s
    return blockwise(x, block, one)


def latest(ids, layer):
    """The last id <= layer, or -1 (§5.3: a layer reads the most recent source)."""
    found = [i for i in ids if i <= layer]
    return found[-1] if found else -1


@dataclasses.dataclass
class DsparkConfig:
    """docs/dspark.md "Config and tensors"."""
    stages: int        # S = num_nextn_predict_layers (mtp.0 .. S-1)
    block: int         # B
    noise: int         # the noise token id
    targets: list      # T, the target layers whose entering streams feed c_t
    rank: int          # r, the Markov rank
    n_experts: int     # E_d
    topk: int          # k_d

    @staticmethod
    def load(c):
        if not c.get("dspark_target_layer_ids") or not c.get("num_nextn_predict_layers"):
            return None
        return DsparkConfig(stages=c["num_nextn_predict_layers"], block=c["dspark_block_size"],
                            noise=c["dspark_noise_token_id"], targets=list(c["dspark_target_layer_ids"]),
                            rank=c["dspark_markov_rank"],
                            n_experts=c.get("dspark_n_routed_experts") or c["n_routed_experts"],
                            topk=c.get("dspark_num_experts_per_tok") or c["num_experts_per_tok"])


@dataclasses.dataclass
class V41Config:
    vocab: int
    dim: int
    n_layers: int
    n_heads: int
    head_dim: int
    rope_dim: int
    n_experts: int
    n_shared: int
    topk: int
    route_scale: float
    swiglu_limit: float
    window: int
    eps: float
    rope_theta: float
    compress_rope_theta: float
    yarn: tuple
    index_heads: int
    index_dim: int
    index_topk: int
    hc_mult: int
    hc_iters: int
    hc_eps: float
    o_groups: int
    o_lora_rank: int
    ratios: list
    kv_sources: list
    index_sources: list
    candidate: int
    candidate_blocks: int
    candidate_block: int
    gate_temp: float
    fp8_block: tuple
    engram: object
    image_token: int
    dspark: object = None

    @staticmethod
    def load(model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            top = json.load(f)
        c = top["text_config"]  # §2.2: the DeepseekV41ForCausalLM wrapper
        rs = c.get("rope_scaling") or {}
        yarn = None
        if rs.get("type", rs.get("rope_type")) == "yarn":
            yarn = (float(rs["factor"]), float(rs["original_max_position_embeddings"]),
                    float(rs.get("beta_fast", 32)), float(rs.get("beta_slow", 1)))
        qc = top.get("quantization_config") or {}
        return V41Config(
            vocab=c["vocab_size"], dim=c["hidden_size"], n_layers=c["num_hidden_layers"],
            n_heads=c["num_attention_heads"], head_dim=c["head_dim"], rope_dim=c["qk_rope_head_dim"],
            n_experts=c["n_routed_experts"], n_shared=c.get("n_shared_experts", 1), topk=c["num_experts_per_tok"],
            route_scale=float(c["routed_scaling_factor"]), swiglu_limit=float(c.get("swiglu_limit", 0.0)),
            window=c["sliding_window"], eps=float(c["rms_norm_eps"]), rope_theta=float(c["rope_theta"]),
            compress_rope_theta=float(c["compress_rope_theta"]), yarn=yarn, index_heads=c["index_n_heads"],
            index_dim=c["index_head_dim"], index_topk=c["index_topk"], hc_mult=c["hc_mult"],
            hc_iters=c["hc_sinkhorn_iters"], hc_eps=float(c["hc_eps"]), o_groups=c["o_groups"],
            o_lora_rank=c["o_lora_rank"], ratios=list(c["compress_ratios"]),
            kv_sources=list(c.get("kv_source_layer_ids", [])), index_sources=list(c.get("index_source_layer_ids", [])),
            candidate=c.get("candidate_source_layer_id", -1) if c.get("candidate_source_layer_id") is not None else -1,
            candidate_blocks=c.get("candidate_topk_blocks", 0), candidate_block=c.get("candidate_block_size", 0),
            gate_temp=float(c.get("gate_temp", 1.0)), fp8_block=tuple(qc.get("weight_block_size", (128, 128))),
            engram=EngramConsts(c) if c.get("engram_layer_ids") else None, image_token=top.get("image_token_id", -1),
            dspark=DsparkConfig.load(c))


@dataclasses.dataclass
class V41Numerics:
    kv_sim: str = "fp8"            # FP8 simulation of the window KV; "none" skips it
    shared_expert_clamp: bool = True
    q_head_norm: bool = False      # §5.2 [?]: V4.1 has no per-head q normalisation
    bf16: bool = True
    bf16_points: tuple = BF16_POINTS
    sim_input: str = "f64"  # "f32": round the FP8/FP4 simulations' inputs to f32 first
    engram_ngram_order: str = "spec"  # "reversed": a mutation (slot s hashes the token n-1-s back)
    decoder_replay: int = 0  # KEEP > 0: decoder SWA bounded replay of the prompt's last KEEP tokens
    prompt_len: int = 0      # P, the prompt's length (decoder replay)
    dspark_causal: bool = False  # a mutation: a causal mask inside the draft block (docs/dspark.md: none)

    def rounds(self, point):
        return self.bf16 and point in self.bf16_points


class LayerState:
    def __init__(self, cfg, layer):
        self.ring_kv = np.zeros((cfg.window, cfg.head_dim))
        self.ring_pos = np.full(cfg.window, -1, dtype=np.int64)
        self.ratio = cfg.ratios[layer]
        self.owner = layer in cfg.kv_sources
        if self.owner:
            self.pend_kv = np.zeros((self.ratio, cfg.head_dim))   # the unfinished group's W_kv·x̂
            self.pend_gate = np.zeros((self.ratio, cfg.head_dim))  # and its gate scores
            self.comp_kv = np.zeros((0, cfg.head_dim))
            self.idx_keys = np.zeros((0, cfg.index_dim))


class SequenceState:
    def __init__(self, cfg):
        self.n_tokens = 0
        self.first = 0    # the first position with a token (a replay's start)
        self.tokens = []  # tokens of positions first, first + 1, ... (Engram's n-grams)
        self.layers = [LayerState(cfg, layer) for layer in range(cfg.n_layers)]
        self.dspark_feats = None  # {target layer: [mean over hc of the entering streams, per chunk]} when wanted


class DeepseekV41Reference:
    def __init__(self, model_dir, numerics=None):
        self.cfg = V41Config.load(model_dir)
        self.num = numerics or V41Numerics()
        self.w = Checkpoint(model_dir, self.cfg.fp8_block)
        cfg = self.cfg
        self.freqs_swa = rope_freqs(cfg.rope_dim, cfg.rope_theta, None)
        self.freqs_comp = rope_freqs(cfg.rope_dim, cfg.compress_rope_theta, cfg.yarn)
        if cfg.engram:
            self.cmap, n_comp = engram_token_map(model_dir, cfg.vocab)
            if n_comp != cfg.engram.compressed_size:
                raise ValueError(f"compressed token map has {n_comp} ids, config says {cfg.engram.compressed_size}")

    def sim_in(self, x):
        """A storage simulation's input, rounded to f32 first with --sim-input f32 (see README "V4.1")."""
        return x.astype(np.float32).astype(np.float64) if self.num.sim_input == "f32" else x

    def round(self, x, point):
        return bf16(x) if self.num.rounds(point) else x

    def linear(self, x, prefix, weight=None):
        """x [T, in] -> [T, out], row by row (a row's result never depends on the other rows)."""
        w = self.w.weight(prefix) if weight is None else weight
        out = np.empty((x.shape[0], w.shape[0]))
        for t in range(x.shape[0]):
            out[t] = np.sum(w * x[t][None, :], axis=1)
        return out

    def norm(self, x, name, point):
        w = self.w.f64(name)
        return self.round(w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.cfg.eps)), point)

    # ---- mHC with delayed pre (§5.1)
    def coefficients(self, streams, p):
        cfg = self.cfg
        v = streams.reshape(streams.shape[0], -1)
        rho = 1.0 / np.sqrt(np.mean(v * v, axis=1, keepdims=True) + cfg.eps)  # ε = rms_norm_eps (1e-20)
        mixes = self.linear(v, None, self.w.f64(p + "fn")) * rho
        return sinkhorn_split(mixes, self.w.f64(p + "scale"), self.w.f64(p + "base"), cfg.hc_mult, cfg.hc_iters,
                              cfg.hc_eps)

    def collapse(self, pre, streams, point="mhc_collapse"):
        return self.round(np.sum(pre[:, :, None] * streams, axis=1), point)

    def expand(self, f, streams, post, comb):
        mixed = np.sum(comb[:, :, :, None] * streams[:, :, None, :], axis=1)
        return self.round(post[:, :, None] * f[:, None, :] + mixed, "mhc_expand")

    # ---- CSA2 sources (§5.4, §5.5)
    def compress(self, p, x, positions, st, freqs):
        """Feeds x [T, d] into a KV source's compressor; returns (entries, keys) the completed groups give (a group
        whose entry is cached already, in a replay, gives nothing)."""
        cfg = self.cfg
        ratio = st.ratio
        a = self.linear(x, p + "compressor.wkv")
        z = self.linear(x, p + "compressor.wgate") if ratio > 1 else np.zeros_like(a)
        latents, entry_pos = [], []
        for t, pos in enumerate(positions):
            st.pend_kv[pos % ratio], st.pend_gate[pos % ratio] = a[t], z[t]
            if pos % ratio != ratio - 1 or (pos + 1) // ratio <= len(st.comp_kv):
                continue
            if ratio == 1:
                latents.append(st.pend_kv[0].copy())
            else:  # per channel, a softmax over the group's tokens' gate scores
                e = np.exp(st.pend_gate - st.pend_gate.max(axis=0, keepdims=True))
                latents.append(np.sum(e / e.sum(axis=0, keepdims=True) * st.pend_kv, axis=0))
            entry_pos.append(pos + 1 - ratio)
        if not latents:
            return np.zeros((0, cfg.head_dim)), np.zeros((0, cfg.index_dim))
        entry_pos = np.array(entry_pos)
        latent = self.norm(np.stack(latents), p + "compressor.norm.weight", "comp_norm")  # before RoPE
        rd = cfg.rope_dim
        keys = self.norm(self.linear(latent, p + "indexer.wk"), p + "indexer.k_norm.weight", "comp_norm")
        keys[:, -rd:] = rope(keys[:, -rd:], entry_pos, freqs)
        keys = sim_fp4(self.sim_in(keys), 32)
        kv = latent.copy()
        kv[:, -rd:] = rope(kv[:, -rd:], entry_pos, freqs)
        return sim_fp4_e4m3(self.sim_in(kv), 16), keys

    def index_topk(self, p, x, qr, positions, freqs, keys, ratio, role, step):
        """An index source's selection for each row (§5.5, §5.6); role: None, "candidate" or "pool"."""
        cfg = self.cfg
        n = len(positions)
        q = self.linear(qr, p + "indexer.wq_b").reshape(n, cfg.index_heads, cfg.index_dim)
        q[..., -cfg.rope_dim:] = rope(q[..., -cfg.rope_dim:], positions, freqs)
        q = sim_fp4(self.sim_in(q), 32)  # no Hadamard in V4.1
        w = self.round(self.linear(x, p + "indexer.weights_proj"), "index_w") * (
            cfg.index_dim ** -0.5 * cfg.index_heads ** -0.5)
        chosen = []
        if role == "candidate":
            step["pool"] = []
        for t, pos in enumerate(positions):
            n_vis = min((pos + 1) // ratio, len(keys))
            dots = np.sum(q[t][None, :, :] * keys[:n_vis, None, :], axis=2)  # [n_vis, Hi]
            score = np.sum(np.maximum(dots, 0.0) * w[t][None, :], axis=1)
            candidates = np.arange(n_vis)
            if role == "candidate":
                bsize = cfg.candidate_block
                n_blocks = -(-n_vis // bsize)
                block_score = np.array([score[b * bsize:(b + 1) * bsize].max() for b in range(n_blocks)])
                if n_blocks:
                    block_score[n_blocks - 1] = np.inf  # the newest visible entry's block
                order = np.lexsort((np.arange(n_blocks), -block_score))
                step["pool"].append(np.sort(order[:cfg.candidate_blocks]))
            elif role == "pool":
                blocks = step["pool"][t]
                candidates = np.array([j for b in blocks for j in range(b * cfg.candidate_block,
                                                                       min(n_vis, (b + 1) * cfg.candidate_block))],
                                      dtype=np.int64)
            k = min(cfg.index_topk, len(candidates))
            cs = score[candidates]
            order = np.lexsort((candidates, -cs))  # highest first, ties to the lower entry
            chosen.append(np.sort(candidates[order[:k]]))
        return chosen

    # ---- attention (§5.2)
    def queries(self, p, x, positions, freqs):
        """(q_r, q [T, heads, head_dim]) of attention `p` (§5.2): W_qb·RMSNorm_q(W_qa·x̂), then RoPE."""
        cfg = self.cfg
        rd = cfg.rope_dim
        qr = self.norm(self.linear(x, p + "wq_a"), p + "q_norm.weight", "q_norm")
        q = self.linear(qr, p + "wq_b").reshape(len(positions), cfg.n_heads, cfg.head_dim)
        if self.num.q_head_norm:
            q = q / np.sqrt(np.mean(q * q, axis=-1, keepdims=True) + cfg.eps)
        q[..., -rd:] = rope(q[..., -rd:], positions, freqs)
        return qr, q

    def window_kv(self, p, x, positions, freqs):
        """The window KV of attention `p` for rows x [T, d] at `positions`: RMSNorm(W_kv·x), RoPE, FP8 sim."""
        rd = self.cfg.rope_dim
        kv = self.norm(self.linear(x, p + "wkv"), p + "kv_norm.weight", "kv_norm")
        kv[:, -rd:] = rope(kv[:, -rd:], positions, freqs)
        if self.num.kv_sim == "fp8":
            kv = sim_fp8(self.sim_in(kv), 32)  # all 512 channels, 32-blocks
        return kv

    def attend(self, q, keys, sink):
        """One row's attention: q [heads, head_dim] over keys [K, head_dim] (values = keys), with the sink."""
        s = np.sum(q[:, None, :] * keys[None, :, :], axis=2) * self.cfg.head_dim ** -0.5
        m = s.max(axis=1, keepdims=True)
        e = np.exp(s - m)
        denom = e.sum(axis=1) + np.exp(sink - m[:, 0])
        return np.sum(self.round(e, "attn_probs")[:, :, None] * keys[None, :, :], axis=1) / denom[:, None]

    def attn_out(self, p, o, positions, freqs):
        """Inverse RoPE of o [T, heads, head_dim], then the grouped output projection (§5.2)."""
        cfg = self.cfg
        n, rd = len(positions), cfg.rope_dim
        o[..., -rd:] = rope(o[..., -rd:], positions, freqs, inverse=True)
        g = cfg.o_groups
        o = o.reshape(n, g, cfg.n_heads * cfg.head_dim // g)
        wo_a = self.w.weight(p + "wo_a")
        z = np.concatenate([self.linear(o[:, k], None, wo_a[k * cfg.o_lora_rank:(k + 1) * cfg.o_lora_rank])
                            for k in range(g)], axis=1)
        return self.linear(z, p + "wo_b")

    def attention(self, layer, x, positions, state, step, fed=False):
        cfg = self.cfg
        p = f"layers.{layer}.attn."
        st = state.layers[layer]
        n, win = len(positions), cfg.window
        freqs = self.freqs_comp if st.ratio else self.freqs_swa
        qr, q = self.queries(p, x, positions, freqs)
        kv = self.window_kv(p, x, positions, freqs)

        chosen = None
        if st.ratio:
            if st.owner and not fed:  # fed: decoder replay gave the compressor every prompt row already
                entries, keys = self.compress(p, x, positions, st, freqs)
                st.comp_kv = np.concatenate([st.comp_kv, entries])
                st.idx_keys = np.concatenate([st.idx_keys, keys])
            src = state.layers[latest(cfg.kv_sources, layer)]
            if layer in cfg.index_sources:
                role = None
                if layer == cfg.candidate:
                    role = "candidate"
                elif cfg.candidate >= 0 and layer > cfg.candidate and latest(cfg.kv_sources, layer) == cfg.candidate:
                    role = "pool"
                step["topk"] = self.index_topk(p, x, qr, positions, freqs, src.idx_keys, st.ratio, role, step)
            chosen = step["topk"]  # the latest index source's (itself, or reused)

        live = st.ring_pos >= 0
        order = np.argsort(st.ring_pos[live])
        ext_pos = np.concatenate([st.ring_pos[live][order], positions])
        ext_kv = np.concatenate([st.ring_kv[live][order], kv])
        sink = self.w.f64(p + "attn_sink")
        o = np.empty((n, cfg.n_heads, cfg.head_dim))
        for t, pos in enumerate(positions):
            keys = ext_kv[(ext_pos > pos - win) & (ext_pos <= pos)]
            if chosen is not None:
                keys = np.concatenate([keys, src.comp_kv[chosen[t]]])
            o[t] = self.attend(q[t], keys, sink)
        for t, pos in enumerate(positions):
            st.ring_kv[pos % win], st.ring_pos[pos % win] = kv[t], pos
        return self.attn_out(p, o, positions, freqs)

    # ---- MoE (§5.8)
    def expert(self, p, x, weight, clamp):
        g, u = self.linear(x, p + "w1"), self.linear(x, p + "w3")
        limit = self.cfg.swiglu_limit
        if clamp and limit > 0:
            u, g = np.clip(u, -limit, limit), np.minimum(g, limit)
        h = g / (1.0 + np.exp(-g)) * u
        if weight is not None:
            h = h * weight[:, None]
        return self.linear(self.round(h, "expert_h"), p + "w2")

    def moe(self, p, x, n_experts=None, topk=None):
        """The MoE at `p` with n_experts routed experts, top-k of them (default: the main layers' counts)."""
        cfg = self.cfg
        n_experts = cfg.n_experts if n_experts is None else n_experts
        topk = cfg.topk if topk is None else topk
        scores = np.sqrt(np.logaddexp(0.0, self.linear(x, p + "gate") / cfg.gate_temp))
        biased = scores + self.w.f64(p + "gate.bias")[None, :]  # text tokens: gate.bias (not bias_vl)
        experts = np.stack([np.lexsort((np.arange(n_experts), -b))[:topk] for b in biased])
        weights = np.take_along_axis(scores, experts, axis=1)
        weights = weights / (weights.sum(axis=1, keepdims=True) + 1e-20) * cfg.route_scale
        y = np.zeros_like(x)
        for e in np.unique(experts):
            rows, slot = np.nonzero(experts == e)
            y[rows] += self.expert(f"{p}experts.{e}.", x[rows], weights[rows, slot], True)
        if cfg.n_shared:
            y += self.expert(p + "shared_experts.", x, None, self.num.shared_expert_clamp)
        return y

    # ---- Engram (§5.7)
    def engram_slots(self, tokens, pos, first=0):
        """Compressed ids t_0..t_{n-1} of position pos (tokens[i] is position first + i): pad from the first slot
        before `first` (0, or a replay's start) or at an image token."""
        e, cfg = self.cfg.engram, self.cfg
        pad = int(self.cmap[e.pad])
        out, dead = [int(self.cmap[tokens[pos - first]])], False
        for s in range(1, e.n):
            back = s if self.num.engram_ngram_order == "spec" else e.n - s
            dead = dead or pos - back < first or tokens[pos - back - first] == cfg.image_token
            out.append(pad if dead else int(self.cmap[tokens[pos - back - first]]))
        return out

    def engram(self, layer, streams, positions, tokens, first=0):
        cfg, e = self.cfg, self.cfg.engram
        p = f"layers.{layer}.engram."
        table, tdtype = self.w.raw(p + "embed.weight"), self.w.dtype(p + "embed.weight")
        scale = e8m0(np.array(self.w.raw(p + "embed.scale"))) if tdtype == "F8_E4M3" else None
        wkv = self.w.weight(p + "wkv")
        qw, kw = self.w.f64(p + "q_weight"), self.w.f64(p + "k_weight")
        d, hc = cfg.dim, cfg.hc_mult
        out = streams.copy()
        for t, pos in enumerate(positions):
            if tokens[pos - first] == cfg.image_token:
                continue  # image-span token: gate 0
            ids = self.engram_slots(tokens, pos, first)
            prods = [wrap64(ids[s] * e.mult[layer][s]) for s in range(e.n)]
            rows, r = [], prods[0]
            for n in range(1, e.n):
                r = wrap64(r ^ prods[n])
                for h in range(e.heads):
                    k = (n - 1) * e.heads + h
                    rows.append(r % e.primes[layer][k] + e.offsets[layer][k])
            parts = []
            for row in rows:
                if scale is None:
                    parts.append(self.w.f64(p + "embed.weight", slice(row, row + 1))[0])
                else:
                    parts.append(E4M3[np.array(table[row])] * np.repeat(scale[row], 32))
            kv = wkv @ np.concatenate(parts)
            v = kv[hc * d:]
            for j in range(hc):
                x, key = streams[t, j], kv[j * d:(j + 1) * d]
                rx = np.sqrt(np.mean(x * x) + cfg.eps)
                rk = np.sqrt(np.mean(key * key) + cfg.eps)
                delta = np.sum(x * qw[j] * kw[j] * key) / rx / rk / np.sqrt(d)
                gate = 1.0 / (1.0 + np.exp(-np.sign(delta) * np.sqrt(max(abs(delta), 1e-6))))
                out[t, j] = x + gate * v
        return out

    def forward_chunk(self, state, tokens):
        cfg = self.cfg
        tokens = np.asarray(tokens, dtype=np.int64)
        positions = state.n_tokens + np.arange(len(tokens))
        state.tokens.extend(int(t) for t in tokens)
        emb = np.stack([self.w.f64("embed.weight", slice(int(t), int(t) + 1))[0] for t in tokens])
        streams = np.repeat(emb[:, None, :], cfg.hc_mult, axis=1)
        pre = np.zeros((len(tokens), cfg.hc_mult))
        pre[:, 0] = 1.0  # block 0's attention: the one-hot pre
        step = {}
        decoder = max(cfg.kv_sources) if cfg.kv_sources else -1  # the first decoder layer (§5.11)
        cut = max(0, self.num.prompt_len - self.num.decoder_replay) if self.num.decoder_replay > 0 else 0
        for layer in range(cfg.n_layers):
            p = f"layers.{layer}."
            fed = False
            if layer == decoder and np.any(positions < cut):
                # every row's attention input into the source's compressor; only rows >= cut go on
                src = state.layers[layer]
                x = self.norm(self.collapse(pre, streams), p + "attn_norm.weight", "sub_norm")
                entries, keys = self.compress(p + "attn.", x, positions, src, self.freqs_comp)
                src.comp_kv = np.concatenate([src.comp_kv, entries])
                src.idx_keys = np.concatenate([src.idx_keys, keys])
                keep = positions >= cut
                streams, pre, positions = streams[keep], pre[keep], positions[keep]
                fed = True
            if cfg.engram and layer in cfg.engram.layers:
                streams = self.engram(layer, streams, positions, state.tokens, state.first)
            if state.dspark_feats is not None and layer in state.dspark_feats:
                # docs/dspark.md "Context features": the streams entering block l, averaged over hc (Σ/hc)
                state.dspark_feats[layer].append(np.sum(streams, axis=1) / cfg.hc_mult)
            if len(positions) == 0:
                continue
            pre_attn, post, comb = self.coefficients(streams, p + "hc_attn_")
            x = self.norm(self.collapse(pre, streams), p + "attn_norm.weight", "sub_norm")
            streams = self.expand(self.attention(layer, x, positions, state, step, fed), streams, post, comb)
            pre_ffn, post, comb = self.coefficients(streams, p + "hc_ffn_")
            x = self.norm(self.collapse(pre_attn, streams), p + "ffn_norm.weight", "sub_norm")
            streams = self.expand(self.moe(p + "ffn.", x), streams, post, comb)
            pre = pre_ffn
        state.n_tokens += len(tokens)
        if len(positions) == 0:
            return np.zeros((0, cfg.dim))
        # the final collapse uses the last FFN's pre; no hc_head (§5.1)
        return self.norm(self.collapse(pre, streams, "head_collapse"), "norm.weight", "final_norm")

    def head(self, h):
        vocab = self.w.entries["head.weight"][3][0]
        out = np.empty((h.shape[0], vocab))
        for r in range(0, vocab, 16384):
            out[:, r:r + 16384] = h @ self.w.f64("head.weight", slice(r, r + 16384)).T
        return out

    # ---- DSpark (docs/dspark.md)
    def dspark_context(self, state):
        """c_t [n, d] for every position of `state` (docs/dspark.md "Context features"): the concatenated
        stream means of the target layers through mtp.0.main_proj, RMSNorm with mtp.0.main_norm."""
        ds = self.cfg.dspark
        f = np.concatenate([np.concatenate(state.dspark_feats[layer]) for layer in ds.targets], axis=1)
        return self.norm(self.linear(f, "mtp.0.main_proj"), "mtp.0.main_norm.weight", "final_norm")

    def draft_attention(self, p, x, positions, ctx_kv):
        """A stage's attention (docs/dspark.md "The draft block" 2): the B rows' window queries over the
        stage's context entries, then the rows' own window KV; every row sees every key (--dspark-causal: a
        row sees the context and the rows up to itself), plus the sink. Nothing is kept."""
        freqs = self.freqs_swa  # the stages are window-only (compress ratio 0)
        _, q = self.queries(p, x, positions, freqs)
        keys = np.concatenate([ctx_kv, self.window_kv(p, x, positions, freqs)])
        sink = self.w.f64(p + "attn_sink")
        o = np.empty((len(positions), self.cfg.n_heads, self.cfg.head_dim))
        for j in range(len(positions)):
            visible = keys[:len(ctx_kv) + j + 1] if self.num.dspark_causal else keys
            o[j] = self.attend(q[j], visible, sink)
        return self.attn_out(p, o, positions, freqs)

    def dspark_block(self, c, anchor, p, dump=None):
        """One draft block with anchor token `anchor` at position p over the context features c [>= p, d]
        (rows t < p are the context). Returns float32 [B, V + 2]: row j = z_j, c_j, y_j (the greedy chain)."""
        cfg, ds = self.cfg, self.cfg.dspark
        B, S, hc = ds.block, ds.stages, cfg.hc_mult
        ctx_pos = np.arange(max(0, p - cfg.window), p)  # the last W positions before the anchor, ascending
        positions = p + np.arange(B)
        tokens = [int(anchor)] + [ds.noise] * (B - 1)
        emb = np.stack([self.w.f64("embed.weight", slice(t, t + 1))[0] for t in tokens])
        streams = np.repeat(emb[:, None, :], hc, axis=1)
        pre = np.zeros((B, hc))
        pre[:, 0] = 1.0  # stage 0's attention: the one-hot pre
        for s in range(S):
            pf = f"mtp.{s}."
            ctx_kv = self.window_kv(pf + "attn.", c[ctx_pos], ctx_pos, self.freqs_swa)  # no attn_norm
            pre_attn, post, comb = self.coefficients(streams, pf + "hc_attn_")
            x = self.norm(self.collapse(pre, streams), pf + "attn_norm.weight", "sub_norm")
            a = self.draft_attention(pf + "attn.", x, positions, ctx_kv)
            streams = self.expand(a, streams, post, comb)
            pre_ffn, post, comb = self.coefficients(streams, pf + "hc_ffn_")
            x2 = self.norm(self.collapse(pre_attn, streams), pf + "ffn_norm.weight", "sub_norm")
            f = self.moe(pf + "ffn.", x2, ds.n_experts, ds.topk)
            streams = self.expand(f, streams, post, comb)
            pre = pre_ffn
            if dump is not None:
                dump.update({f"stage{s}_ctx_kv": ctx_kv, f"stage{s}_attn_in": x, f"stage{s}_attn_out": a,
                             f"stage{s}_ffn_in": x2, f"stage{s}_ffn_out": f, f"stage{s}_streams": streams})
        last = f"mtp.{S - 1}."
        h = self.norm(self.collapse(pre, streams, "head_collapse"), last + "norm.weight", "final_norm")
        u = self.head(h)
        m_embed = self.w.weight(last + "markov_head.embed")  # [V, r]
        m_head = self.w.weight(last + "markov_head.head")    # [V, r]
        w_conf = self.w.weight(last + "confidence_head.proj")[0]  # [d + r]
        b_conf = float(self.w.f64(last + "confidence_head.proj.bias")[0]) \
            if self.w.has(last + "confidence_head.proj.bias") else 0.0
        d, vocab = cfg.dim, u.shape[1]
        out = np.empty((B, vocab + 2))
        prev = int(anchor)
        for j in range(B):
            e_prev = m_embed[prev]
            z = u[j] + m_head @ e_prev
            y = int(np.argmax(z))
            logit = float(np.dot(w_conf[:d], h[j]) + np.dot(w_conf[d:], e_prev)) + b_conf
            out[j, :vocab], out[j, vocab], out[j, vocab + 1] = z, 1.0 / (1.0 + np.exp(-logit)), y
            prev = y
        if dump is not None:
            dump.update({"context": c, "h": h, "u": u})
        return out.astype(np.float32)

    def run_replay(self, tokens, hit, replay_tokens, chunks):
        """Encoder SWA bounded replay on a prefix hit of `hit` tokens (see the module doc): returns the logits of
        the rows from hit - replay_tokens run as `chunks` (sizes summing to n - hit + replay_tokens)."""
        start = hit - replay_tokens
        if not (0 <= start < hit <= len(tokens)) or sum(chunks) != len(tokens) - start:
            raise ValueError(f"replay of hit {hit} by {replay_tokens} tokens does not fit {len(tokens)} tokens")
        cold = SequenceState(self.cfg)
        self.forward_chunk(cold, tokens[:hit])
        state = SequenceState(self.cfg)
        state.n_tokens = state.first = start
        for st, cached in zip(state.layers, cold.layers):
            if st.owner:
                st.comp_kv = cached.comp_kv[:hit // st.ratio].copy()
                st.idx_keys = cached.idx_keys[:hit // st.ratio].copy()
        hs, at = [], start
        for size in chunks:
            hs.append(self.forward_chunk(state, tokens[at:at + size]))
            at += size
        return self.head(np.concatenate(hs))

    def run(self, tokens, chunks, dspark=False, dump=None):
        """The logits of `tokens` run as `chunks`; with `dspark`, (logits, the draft block of dspark_block with
        the anchor tokens[-1] at position n - 1 over the context features of every position)."""
        state = SequenceState(self.cfg)
        if dspark:
            if self.cfg.dspark is None:
                raise ValueError("--dspark-out: the checkpoint's config has no DSpark stages")
            if self.num.decoder_replay:
                raise ValueError("--dspark-out runs without --decoder-replay")
            state.dspark_feats = {layer: [] for layer in self.cfg.dspark.targets}
        hs, start = [], 0
        for size in chunks:
            hs.append(self.forward_chunk(state, tokens[start:start + size]))
            start += size
        logits = self.head(np.concatenate(hs))
        if not dspark:
            return logits
        c = self.dspark_context(state)
        if dump is not None:
            dump["features"] = np.concatenate([np.concatenate(state.dspark_feats[layer])
                                               for layer in self.cfg.dspark.targets], axis=1)
        return logits, self.dspark_block(c, tokens[-1], len(tokens) - 1, dump)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", "--ids", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prefill", type=int)
    ap.add_argument("--chunks")
    ap.add_argument("--kv-sim", choices=["fp8", "none"], default="fp8")
    ap.add_argument("--shared-expert-clamp", choices=["on", "off"], default="on")
    ap.add_argument("--q-head-norm", choices=["on", "off"], default="off")
    ap.add_argument("--no-bf16", action="store_true")
    ap.add_argument("--bf16-points")
    ap.add_argument("--sim-input", choices=["f64", "f32"], default="f64")
    ap.add_argument("--engram-ngram-order", choices=["spec", "reversed"], default="spec")
    ap.add_argument("--decoder-replay", type=int, default=0, metavar="KEEP",
                    help="decoder SWA bounded replay: the decoder runs on the prompt's last KEEP tokens")
    ap.add_argument("--prompt-len", type=int, help="the prompt's length P (default: the first chunk)")
    ap.add_argument("--replay-hit", type=int, help="encoder SWA bounded replay of a cached prefix of this many "
                    "tokens: --out holds the rows from hit - replay_tokens, --prefill/--chunks split those rows")
    ap.add_argument("--replay-tokens", type=int, help="replay length (the engine's swa_replay_tokens)")
    ap.add_argument("--dspark-out", metavar="FILE.npy",
                    help="also one DSpark draft block (docs/dspark.md): anchor = the last id at position n - 1, "
                    "context = the positions before it; float32 [B, V + 2], row j = z_j, c_j, y_j")
    ap.add_argument("--dspark-causal", action="store_true",
                    help="a mutation: a causal mask inside the draft block (the spec's block is bidirectional)")
    ap.add_argument("--dspark-dump", metavar="FILE.npz", help="the draft block's intermediate values (debugging)")
    args = ap.parse_args(argv)
    tokens = [int(t) for t in args.tokens.split(",")]
    num = V41Numerics(kv_sim=args.kv_sim, shared_expert_clamp=args.shared_expert_clamp == "on",
                      q_head_norm=args.q_head_norm == "on", bf16=not args.no_bf16,
                      bf16_points=parse_points(args.bf16_points), engram_ngram_order=args.engram_ngram_order,
                      sim_input=args.sim_input, dspark_causal=args.dspark_causal)
    start = 0
    if args.replay_hit:
        if not args.replay_tokens:
            raise ValueError("--replay-hit needs --replay-tokens")
        start = args.replay_hit - args.replay_tokens
    chunks = chunk_sizes(len(tokens) - start, args.prefill,
                         [int(c) for c in args.chunks.split(",")] if args.chunks else None)
    num.decoder_replay = args.decoder_replay
    num.prompt_len = args.prompt_len if args.prompt_len is not None else start + chunks[0]
    ref = DeepseekV41Reference(args.model, num)
    if args.replay_hit:
        if args.dspark_out:
            raise ValueError("--dspark-out runs without --replay-hit")
        np.save(args.out, ref.run_replay(tokens, args.replay_hit, args.replay_tokens, chunks))
        return 0
    t0 = time.perf_counter()
    if args.dspark_out:
        dump = {} if args.dspark_dump else None
        logits, block = ref.run(tokens, chunks, dspark=True, dump=dump)
        np.save(args.dspark_out, block)
        if dump is not None:
            np.savez(args.dspark_dump, **dump)
    else:
        logits = ref.run(tokens, chunks)
    print(f"deepseek_v41_ref: {len(tokens)} tokens in {len(chunks)} chunks, {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    np.save(args.out, logits)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
