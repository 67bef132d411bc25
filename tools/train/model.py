"""A small DeepSeek-V3 in PyTorch, written from model-spec §8 (not from the engine).

MLA attention, sigmoid-routed MoE with a shared expert and the auxiliary-loss-free bias, and one
MTP module. Shapes and names follow the Hugging Face checkpoint so export is a rename-free copy.
Numerics chosen to match what the engine computes (docs/numerics.md): RMSNorm weights used as
stored, interleaved RoPE on the last qk_rope channels, no YaRN (rope_scaling null), MTP fed the
main model's hidden state after the final norm, embedding first in the eh_proj input.
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class DemoConfig:
    vocab_size: int = 8192
    hidden_size: int = 256
    num_hidden_layers: int = 4
    first_k_dense_replace: int = 1
    intermediate_size: int = 512
    num_attention_heads: int = 4
    q_lora_rank: int = 128
    kv_lora_rank: int = 64
    qk_nope_head_dim: int = 32
    qk_rope_head_dim: int = 16
    v_head_dim: int = 32
    n_routed_experts: int = 8
    n_shared_experts: int = 1
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 128
    n_group: int = 4
    topk_group: int = 2
    routed_scaling_factor: float = 1.0
    num_nextn_predict_layers: int = 1
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    bos_token_id: int = 0
    eos_token_id: int = 1

    @property
    def qk_head_dim(self):
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rope_tables(cfg, positions):
    """cos/sin [..., rope/2] for integer positions (any shape)."""
    d = cfg.qk_rope_head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = positions.to(torch.float32)[..., None] * inv_freq.to(torch.float32)
    return torch.cos(ang), torch.sin(ang)


def apply_rope(x, cos, sin):
    """Interleaved pairs (x[2i], x[2i+1]) rotated by angle i. x [B, T, ..., d]; cos [B, T, d/2]."""
    xf = x.float()
    x0, x1 = xf[..., 0::2], xf[..., 1::2]
    while cos.dim() < x0.dim():
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    r0 = x0 * cos - x1 * sin
    r1 = x0 * sin + x1 * cos
    return torch.stack((r0, r1), dim=-1).flatten(-2).to(x.dtype)


class MLA(nn.Module):
    """Multi-head latent attention in its plain (non-absorbed) form."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        h, nh = cfg.hidden_size, cfg.num_attention_heads
        self.q_a_proj = nn.Linear(h, cfg.q_lora_rank, bias=False)
        self.q_a_layernorm = RMSNorm(cfg.q_lora_rank, cfg.rms_norm_eps)
        self.q_b_proj = nn.Linear(cfg.q_lora_rank, nh * cfg.qk_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(h, cfg.kv_lora_rank + cfg.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(cfg.kv_lora_rank, cfg.rms_norm_eps)
        self.kv_b_proj = nn.Linear(cfg.kv_lora_rank, nh * (cfg.qk_nope_head_dim + cfg.v_head_dim), bias=False)
        self.o_proj = nn.Linear(nh * cfg.v_head_dim, h, bias=False)

    def forward(self, x, cos, sin, mask):
        c = self.cfg
        B, T, _ = x.shape
        nh = c.num_attention_heads
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))).view(B, T, nh, c.qk_head_dim)
        q_nope, q_pe = q.split([c.qk_nope_head_dim, c.qk_rope_head_dim], dim=-1)
        kv = self.kv_a_proj_with_mqa(x)
        c_kv, k_pe = kv.split([c.kv_lora_rank, c.qk_rope_head_dim], dim=-1)
        kvb = self.kv_b_proj(self.kv_a_layernorm(c_kv)).view(B, T, nh, c.qk_nope_head_dim + c.v_head_dim)
        k_nope, v = kvb.split([c.qk_nope_head_dim, c.v_head_dim], dim=-1)
        q_pe = apply_rope(q_pe, cos, sin)
        k_pe = apply_rope(k_pe, cos, sin).unsqueeze(2).expand(B, T, nh, c.qk_rope_head_dim)
        q = torch.cat([q_nope, q_pe], dim=-1).transpose(1, 2)  # [B, nh, T, d]
        k = torch.cat([k_nope, k_pe], dim=-1).transpose(1, 2)
        v = v.transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)).float() * (1.0 / math.sqrt(c.qk_head_dim))
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(v.dtype)
        o = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, nh * c.v_head_dim)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, hidden, width):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, width, bias=False)
        self.up_proj = nn.Linear(hidden, width, bias=False)
        self.down_proj = nn.Linear(width, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Gate(nn.Module):
    """Sigmoid scores; group-limited top-k on scores + bias; weights from the unbiased scores."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.weight = nn.Parameter(torch.empty(cfg.n_routed_experts, cfg.hidden_size))
        # Auxiliary-loss-free balancing bias: not trained by gradients, nudged by the trainer.
        self.register_buffer("e_score_correction_bias", torch.zeros(cfg.n_routed_experts))

    def forward(self, x):
        c = self.cfg
        scores = torch.sigmoid(F.linear(x.float(), self.weight.float()))  # [N, E]
        biased = scores + self.e_score_correction_bias
        if c.n_group > 1:
            g = biased.view(-1, c.n_group, c.n_routed_experts // c.n_group)
            group_score = g.topk(2, dim=-1).values.sum(-1)  # [N, n_group]
            keep = group_score.topk(c.topk_group, dim=-1).indices
            gmask = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, keep, True)
            emask = gmask.repeat_interleave(c.n_routed_experts // c.n_group, dim=1)
            biased = biased.masked_fill(~emask, float("-inf"))
        idx = biased.topk(c.num_experts_per_tok, dim=-1).indices
        w = scores.gather(1, idx)
        w = w / w.sum(-1, keepdim=True)
        return idx, w * c.routed_scaling_factor


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.gate = Gate(cfg)
        self.experts = nn.ModuleList([MLP(cfg.hidden_size, cfg.moe_intermediate_size)
                                      for _ in range(cfg.n_routed_experts)])
        self.shared_experts = MLP(cfg.hidden_size, cfg.moe_intermediate_size * cfg.n_shared_experts)
        self.last_load = None  # tokens per expert in the last forward (for bias balancing)

    def forward(self, x):
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        idx, w = self.gate(flat)
        out = self.shared_experts(flat)
        routed = torch.zeros_like(out)
        self.last_load = torch.bincount(idx.flatten(), minlength=self.cfg.n_routed_experts).detach()
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(idx == e)
            if rows.numel() == 0:
                continue
            y = expert(flat[rows]) * w[rows, slot, None].to(out.dtype)
            routed = routed.index_add(0, rows, y.to(routed.dtype))
        return (out + routed).view(shape)


class DecoderLayer(nn.Module):
    def __init__(self, cfg, moe):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = MLA(cfg)
        self.mlp = MoE(cfg) if moe else MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class MTP(nn.Module):
    """Predicts token t+2 from the main hidden state at t and the embedding of token t+1.
    Shares the embedding and output head with the main model (exported as copies)."""

    def __init__(self, cfg):
        super().__init__()
        self.enorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.hnorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.block = DecoderLayer(cfg, moe=True)
        self.head_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class DemoModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(cfg, moe=i >= cfg.first_k_dense_replace)
                                     for i in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.mtp = nn.ModuleList([MTP(cfg) for _ in range(cfg.num_nextn_predict_layers)])
        self.reset_parameters()

    def reset_parameters(self):
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 1:
                continue  # norms stay 1
            resid = name.endswith("o_proj.weight") or name.endswith("down_proj.weight")
            nn.init.normal_(p, 0.0, std / math.sqrt(2 * (self.cfg.num_hidden_layers + 1)) if resid else std)

    def moe_layers(self):
        out = [l.mlp for l in self.layers if isinstance(l.mlp, MoE)]
        return out + [m.block.mlp for m in self.mtp]

    def forward(self, ids, positions, doc_ids):
        """ids/positions/doc_ids [B, T]. Attention stays inside a document (packed rows).
        Returns main logits [B, T, V] and MTP logits [B, T-1, V] (row t predicts token t+2)."""
        T = ids.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        mask = causal[None] & (doc_ids[:, :, None] == doc_ids[:, None, :])
        cos, sin = rope_tables(self.cfg, positions)
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        h = self.norm(x)
        logits = self.lm_head(h)
        mtp_logits = []
        for m in self.mtp:
            # Row t: hidden of token t, embedding of token t+1, positions of t (as the engine does).
            e = m.enorm(self.embed_tokens(ids[:, 1:]))
            z = m.eh_proj(torch.cat([e, m.hnorm(h[:, :-1])], dim=-1))
            z = m.block(z, cos[:, :-1], sin[:, :-1], mask[:, :-1, :-1])
            mtp_logits.append(self.lm_head(m.head_norm(z)))
        return logits, mtp_logits
