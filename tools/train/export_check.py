"""Check that the engine computes what the trainer computes: a small randomly initialised
DemoModel (random norms and router biases too, so a swapped or ignored tensor shows) is exported,
read back, and its float64 logits and MTP logits are compared with `deepinfer logits` on a few
token sequences (prefill and one-token decode steps). Exit 1 on a mismatch.

usage: export_check.py --deepinfer BIN --work DIR
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import torch

import safetensors_io
import tokenizer_files
from export import export_model
from model import DemoConfig, DemoModel

TINY = dict(hidden_size=64, num_hidden_layers=3, first_k_dense_replace=1, intermediate_size=96,
            num_attention_heads=4, q_lora_rank=32, kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8,
            v_head_dim=16, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
            moe_intermediate_size=32, n_group=4, topk_group=2, routed_scaling_factor=2.5)
TOLERANCE = 2e-3  # max |engine - reference| relative to the largest |logit|; bf16 weights, f32 engine


def random_model(vocab, seed):
    torch.manual_seed(seed)
    model = DemoModel(DemoConfig(vocab_size=vocab, **TINY))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.15)
        for moe in model.moe_layers():
            moe.gate.e_score_correction_bias.copy_(0.1 * torch.randn(model.cfg.n_routed_experts))
    return model


def load_exported(model, export_dir):
    """The exported (bf16-rounded) weights back into the model, in float64."""
    tensors = safetensors_io.load(os.path.join(export_dir, "model.safetensors"))
    cfg = model.cfg
    mtp_prefix = f"model.layers.{cfg.num_hidden_layers}."
    state = {}
    for name in model.state_dict():
        if name.startswith("mtp.0."):
            rest = name[len("mtp.0."):]
            rest = {"head_norm.weight": "shared_head.norm.weight"}.get(rest, rest)
            hf = mtp_prefix + rest[len("block."):] if rest.startswith("block.") else mtp_prefix + rest
        else:
            hf = "lm_head.weight" if name == "lm_head.weight" else "model." + name
        state[name] = tensors[hf].double()
    model.load_state_dict(state)
    # The MTP layer's own embedding and head copies must equal the main ones.
    for own, main in (("embed_tokens.weight", "model.embed_tokens.weight"), ("shared_head.head.weight", "lm_head.weight")):
        if not torch.equal(tensors[mtp_prefix + own], tensors[main]):
            raise SystemExit(f"{mtp_prefix + own} differs from {main}")
    return model.double()


def engine_logits(deepinfer, export_dir, ids, prefill, work):
    out, mtp = os.path.join(work, "logits.npy"), os.path.join(work, "mtp.npy")
    cmd = [deepinfer, "logits", "--model", export_dir, "--ids", ",".join(map(str, ids)),
           "--prefill", str(prefill), "--out", out, "--mtp-out", mtp, "--threads", "2"]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr}")
    return np.load(out), np.load(mtp)


def relative_error(a, b):
    return float(np.abs(a - b).max() / max(1e-9, np.abs(b).max()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deepinfer", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    tok_dir, export_dir = os.path.join(args.work, "tokenizer"), os.path.join(args.work, "export")
    tokenizer_files.write_tokenizer(tok_dir, [], repo_root=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    vocab = tokenizer_files.n_tokens([])
    model = random_model(vocab, args.seed)
    export_model(model, tok_dir, export_dir)
    ref = load_exported(model, export_dir).eval()
    rng = np.random.default_rng(args.seed)
    failures = 0
    for n, prefill in ((9, 9), (24, 5), (40, 40)):
        ids = [0] + rng.integers(3, vocab, n - 1).tolist()
        got, got_mtp = engine_logits(args.deepinfer, export_dir, ids, prefill, args.work)
        t = torch.tensor([ids])
        with torch.no_grad():
            logits, mtp = ref(t, torch.arange(n)[None], torch.zeros(1, n, dtype=torch.long))
        want, want_mtp = logits[0].numpy(), mtp[0][0].numpy()
        e, e_mtp = relative_error(got, want), relative_error(got_mtp, want_mtp)
        agree = float((got.argmax(-1) == want.argmax(-1)).mean())
        ok = e < TOLERANCE and e_mtp < TOLERANCE
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} n={n} prefill={prefill}: logits rel err {e:.2e}, MTP rel err {e_mtp:.2e}, "
              f"argmax agreement {agree:.2f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
