"""Top-1 accuracy of the MTP layer on its first-level rows and on chained rows (train.mtp_chain_rows: the
layer's own output in place of the main model's hidden state, as the engine drafts a second token), with
the trainer's forward on packed rows of a tokenized corpus. docs/demo-model.md, phase 8.

usage: mtp_chain_accuracy.py --data DIR [--rows 16] [--seed 999] MODEL_DIR ...
"""
import argparse

import torch

from export import load_hf_model
from packing import Packer
from train import main_hidden, mtp_chain_rows, mtp_first_level


def accuracies(model, ids, pos, doc, trained):
    with torch.no_grad():
        h, mask, cos, sin = main_hidden(model, ids, pos, doc)
        m = model.mtp[0]
        e, inputs, z = mtp_first_level(model, m, ids, h, cos, sin, mask)
        z2 = mtp_chain_rows(m, inputs, z, e, cos, sin, mask)
        same1 = doc[:, 1:] == doc[:, :-1]
        same2 = same1[:, 1:] & same1[:, :-1]
        same3 = same2[:, 1:] & same1[:, :-2]
        first = model.lm_head(m.head_norm(z[:, :-1])).argmax(-1) == ids[:, 2:]
        chained = model.lm_head(m.head_norm(z2[:, :-1])).argmax(-1) == ids[:, 3:]
        return (first[(trained[:, 2:] > 0) & same2].float().mean().item(),
                chained[(trained[:, 3:] > 0) & same3].float().mean().item())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a tokenized corpus (tokenize_corpus.py output)")
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=192)
    ap.add_argument("--seed", type=int, default=999)
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    for path in args.models:
        model = load_hf_model(path).eval()
        batch = Packer(args.data, args.seq_len, args.seed, pad_id=model.cfg.eos_token_id).batch(args.rows)
        first, chained = accuracies(model, *batch)
        print(f"{path}: MTP top-1 first-level rows {first:.3f}, chained rows {chained:.3f}")


if __name__ == "__main__":
    main()
