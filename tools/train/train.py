"""Step 4: train the demo model; resumable (CKPT_DIR/checkpoint.pt), exports as it goes.

Loss: next-token cross-entropy on the trained positions (assistant replies, prose) plus
MTP_WEIGHT times the MTP module's loss on the token after next. MoE balance: V3's
auxiliary-loss-free bias, e_score_correction_bias += BIAS_RATE * sign(mean load - expert load)
after every step (no auxiliary loss). Fixed seed; bf16 autocast on CPUs with AVX512-BF16.

usage: train.py --data DIR --tokenizer TOKDIR --run RUNDIR [--steps N] [--export-every N] [--init-from CKPT]

--init-from starts a new phase from another run's checkpoint: its weights, balancing biases and AdamW
moments, with this run's own step count, learning-rate schedule, data and packer (a curriculum). Given
an exported model directory instead (config.json + model.safetensors, e.g. models/demo), it takes the
weights and balancing biases only, with fresh AdamW moments.
"""
import argparse
import json
import math
import os
import time

import torch
import torch.nn.functional as F

from export import export_model, load_hf_model
from model import DemoConfig, DemoModel, rope_tables
from packing import Packer

MTP_WEIGHT = 0.3
BIAS_RATE = 1e-3


def cpu_has_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512_bf16" in f.read()
    except OSError:
        return False


def lr_at(step, total, peak, warmup_steps=200):
    """Linear warm-up over min(warmup_steps, total/10) steps, then cosine from peak to peak/10 at `total`."""
    warmup = min(warmup_steps, max(1, total // 10))
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def masked_ce(logits_fn, hidden, targets, mask):
    """Cross-entropy over the rows where mask is set; the head runs on those rows only."""
    sel = mask.reshape(-1).nonzero().squeeze(1)
    if sel.numel() == 0:
        return hidden.sum() * 0.0, 0
    h = hidden.reshape(-1, hidden.shape[-1])[sel]
    return F.cross_entropy(logits_fn(h).float(), targets.reshape(-1)[sel]), sel.numel()


def losses(model, ids, pos, doc, trained, mtp_chain=False, main_frozen=False):
    """Main and MTP losses. The model's forward is reused with the head applied to selected rows.
    mtp_chain: the MTP loss also counts chained rows (mtp_chain_rows), as the engine drafts a second token.
    main_frozen: the main model runs without gradients (train.py --train-only mtp)."""
    with torch.set_grad_enabled(torch.is_grad_enabled() and not main_frozen):
        h, mask, cos, sin = main_hidden(model, ids, pos, doc)
        same1 = doc[:, 1:] == doc[:, :-1]
        main, n_main = masked_ce(model.lm_head, h[:, :-1], ids[:, 1:], (trained[:, 1:] > 0) & same1)
    mtp_total = torch.zeros(())
    for m in model.mtp:
        e, inputs, z = mtp_first_level(model, m, ids, h, cos, sin, mask)
        same2 = same1[:, 1:] & same1[:, :-1]
        mtp_loss, _ = masked_ce(lambda v: model.lm_head(m.head_norm(v)), z[:, :-1], ids[:, 2:],
                                (trained[:, 2:] > 0) & same2)
        mtp_total = mtp_total + mtp_loss
        if mtp_chain:
            z2 = mtp_chain_rows(m, inputs, z, e, cos, sin, mask)
            same3 = same2[:, 1:] & same1[:, :-2]  # rows p-1 .. p+2 in one document
            chain_loss, _ = masked_ce(lambda v: model.lm_head(m.head_norm(v)), z2[:, :-1], ids[:, 3:],
                                      (trained[:, 3:] > 0) & same3)
            mtp_total = mtp_total + chain_loss
    return main, mtp_total, n_main


def main_hidden(model, ids, pos, doc):
    """The main model's final-norm hidden states [B, T, H], with the attention mask (causal, inside each
    packed document) and RoPE tables the MTP layer reuses."""
    T = ids.shape[1]
    mask = torch.ones(T, T, dtype=torch.bool).tril()[None] & (doc[:, :, None] == doc[:, None, :])
    cos, sin = rope_tables(model.cfg, pos)
    x = model.embed_tokens(ids)
    for layer in model.layers:
        x = layer(x, cos, sin, mask)
    return model.norm(x), mask, cos, sin


def mtp_first_level(model, m, ids, h, cos, sin, mask):
    """MTP layer m's rows t = 0..T-2 (main hidden state of t, embedding of token t+1; row t predicts
    token t+2): the token embeddings after enorm, the rows' inputs and the block's outputs."""
    e = m.enorm(model.embed_tokens(ids[:, 1:]))
    inputs = torch.cat([e, m.hnorm(h[:, :-1])], dim=-1)
    return e, inputs, m.block(m.eh_proj(inputs), cos[:, :-1], sin[:, :-1], mask[:, :-1, :-1])


def mtp_chain_rows(m, inputs, z, e, cos, sin, mask):
    """The MTP layer's second draft, as the engine chains it (docs/speculative.md; MtpInput::post_norm):
    the chained row at position p takes the layer's own output of row p - 1 after its head norm, instead
    of the main model's hidden state, with the token p + 1, and attends to the layer's rows before p
    (computed from the main model's hidden states, as the engine's MTP cache holds them) and to itself.
    inputs/z: the first-level rows 0..T-2 (inputs and block outputs); e: their token embeddings.
    Returns the chained rows' block outputs for p = 1..T-2 ([B, T-2, H]; row p predicts token p + 2).
    The first-level rows enter as detached context: the chained loss trains the layer, not the rows it
    reads."""
    n1 = inputs.shape[1]  # T - 1
    chained = torch.cat([e[:, 1:], m.hnorm(m.head_norm(z[:, :-1].detach()))], dim=-1)  # p = 1..T-2
    x = torch.cat([m.eh_proj(inputs.detach()), m.eh_proj(chained)], dim=1)
    c = torch.cat([cos[:, :-1], cos[:, 1:-1]], dim=1)
    s = torch.cat([sin[:, :-1], sin[:, 1:-1]], dim=1)
    first = mask[:, :-1, :-1]
    B, n2 = mask.shape[0], n1 - 1
    before = mask[:, 1:-1, :-1] & torch.ones(n2, n1, dtype=torch.bool).tril()[None]  # keys j < p
    own = torch.eye(n2, dtype=torch.bool)[None].expand(B, n2, n2)
    full = torch.cat([torch.cat([first, torch.zeros(B, n1, n2, dtype=torch.bool)], dim=2),
                      torch.cat([before, own], dim=2)], dim=1)
    return m.block(x, c, s, full)[:, n1:]


def update_balance_bias(model, mtp_only=False):
    for moe in (model.moe_layers() if not mtp_only else [m.block.mlp for m in model.mtp]):
        load = moe.last_load.float()
        moe.gate.e_score_correction_bias += BIAS_RATE * torch.sign(load.mean() - load)


VOCAB_ROWS = ("embed_tokens.weight", "lm_head.weight")


def param_groups(model, vocab_lr_scale=1.0):
    """AdamW groups: matrices with weight decay, vectors without; with vocab_lr_scale != 1 the embedding and
    output head (one row per token, each moved only when its token occurs) in a third group whose learning
    rate is the schedule's times vocab_lr_scale. The default keeps the two groups of earlier phases'
    checkpoints (their optimizer state loads into it)."""
    separate = vocab_lr_scale != 1.0
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for n, p in named if p.dim() > 1 and not (separate and n in VOCAB_ROWS)],
               "weight_decay": 0.1},
              {"params": [p for n, p in named if p.dim() <= 1], "weight_decay": 0.0}]
    if separate:
        groups.append({"params": [p for n, p in named if n in VOCAB_ROWS], "weight_decay": 0.1,
                       "lr_scale": vocab_lr_scale})
    return groups


def save_checkpoint(path, model, opt, step, packer, args, log):
    tmp = path + ".tmp"
    torch.save({"config": model.cfg.to_dict(), "model": model.state_dict(), "optimizer": opt.state_dict(),
                "step": step, "packer": packer.state(), "rng": torch.get_rng_state(), "args": vars(args),
                "log": log}, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--run", required=True, help="directory for checkpoint.pt, log.jsonl and export/")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save-every", type=int, default=25)
    ap.add_argument("--export-every", type=int, default=100)
    ap.add_argument("--init-from", default="",
                    help="checkpoint.pt of an earlier phase (weights + optimizer) or an exported model directory")
    ap.add_argument("--warmup", type=int, default=200, help="warm-up steps (at most steps/10)")
    ap.add_argument("--schedule-steps", type=int, default=0,
                    help="length of the warm-up + cosine schedule when it differs from --steps (stop early on it)")
    ap.add_argument("--vocab-lr-scale", type=float, default=1.0,
                    help="learning-rate factor for the embedding and output head (phase 7: rows of rare tokens move "
                         "only when their token occurs)")
    ap.add_argument("--mtp-chain", action="store_true",
                    help="also train the MTP layer on its own output, as the engine chains it for a second draft")
    ap.add_argument("--train-only", choices=["all", "mtp"], default="all",
                    help="mtp: train the MTP layer alone (the main model, embedding and head frozen)")
    ap.add_argument("--config", default="", help="JSON overrides of DemoConfig fields (tests use a tiny one)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(os.path.join(args.tokenizer, "tokenizer.json"), encoding="utf-8") as f:
        vocab = max(t["id"] for t in json.load(f)["added_tokens"]) + 1
    cfg = DemoConfig(vocab_size=vocab, **(json.loads(args.config) if args.config else {}))
    model = DemoModel(cfg)
    mtp_only = args.train_only == "mtp"
    if mtp_only:  # the main model, its embedding and head stay as they are (bit for bit in the export)
        for n, p in model.named_parameters():
            p.requires_grad_(n.startswith("mtp."))
    opt = torch.optim.AdamW(param_groups(model, args.vocab_lr_scale), lr=args.lr, betas=(0.9, 0.95))
    packer = Packer(args.data, args.seq_len, args.seed, pad_id=cfg.eos_token_id)
    os.makedirs(args.run, exist_ok=True)
    ckpt_path = os.path.join(args.run, "checkpoint.pt")
    step, log = 0, []
    if os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path, map_location="cpu")
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        packer.load_state(ckpt["packer"])
        torch.set_rng_state(ckpt["rng"])
        step, log = ckpt["step"], ckpt.get("log", [])
        print(f"resumed at step {step}", flush=True)
    elif args.init_from and os.path.isdir(args.init_from):
        hf = load_hf_model(args.init_from)  # an exported model (e.g. models/demo): weights only, fresh AdamW
        if hf.cfg.to_dict() != cfg.to_dict():
            raise SystemExit(f"{args.init_from}: config differs from this run's ({hf.cfg.to_dict()} vs {cfg.to_dict()})")
        model.load_state_dict(hf.state_dict())
        print(f"phase starts from the exported weights in {args.init_from} (fresh optimizer)", flush=True)
    elif args.init_from:
        ckpt = torch.load(args.init_from, map_location="cpu")
        if ckpt["config"] != cfg.to_dict():
            raise SystemExit(f"{args.init_from}: config differs from this run's ({ckpt['config']} vs {cfg.to_dict()})")
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        print(f"phase starts from {args.init_from} (its step {ckpt['step']})", flush=True)
    bf16 = cpu_has_bf16()
    print(f"params {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M, bf16 autocast {bf16}, "
          f"{packer.n_docs()} documents", flush=True)
    log_file = open(os.path.join(args.run, "log.jsonl"), "a")
    t_last = time.time()
    while step < args.steps:
        ids, pos, doc, trained = packer.batch(args.batch)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.schedule_steps or args.steps, args.lr, args.warmup) * g.get("lr_scale", 1.0)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            main_loss, mtp_loss, n_tok = losses(model, ids, pos, doc, trained, args.mtp_chain, mtp_only)
            loss = main_loss + MTP_WEIGHT * mtp_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            update_balance_bias(model, mtp_only)
        step += 1
        now = time.time()
        rec = {"step": step, "loss": round(main_loss.item(), 4), "mtp_loss": round(mtp_loss.item(), 4),
               "lr": round(opt.param_groups[0]["lr"], 6), "trained_tokens": n_tok, "s": round(now - t_last, 2),
               "epoch": packer.epoch, "utc": time.strftime("%H:%M:%S", time.gmtime(now))}
        t_last = now
        log_file.write(json.dumps(rec) + "\n")
        log_file.flush()
        if step % 10 == 0 or step == 1:
            print(json.dumps(rec), flush=True)
        if step % args.save_every == 0 or step == args.steps:
            save_checkpoint(ckpt_path, model, opt, step, packer, args, log[-1000:])
        if step % args.export_every == 0 or step == args.steps:
            export_model(model, args.tokenizer, os.path.join(args.run, "export"))
            print(f"exported step {step} to {os.path.join(args.run, 'export')}", flush=True)


if __name__ == "__main__":
    main()
