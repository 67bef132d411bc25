#!/usr/bin/python3
"""Ablation of V4's bf16 rounding points against the float64 reference (docs/numerics.md, "V4 ablation").

For one checkpoint and one prompt, runs tests/reference/deepseek_v4_ref.py in-process with no bf16 point
(the baseline, "fp32"), with all of them, with each point alone and with all but each point, and prints,
for each, max |dlogit|, the largest per-row KL(baseline || run) and the top-1 agreement, over all rows and
over the rows >= --long (rows of a causal model are the logits of every prefix, so one prompt of n ids
covers the 1-, 24- and 96-token prompts and teacher-forced decode alike).

    v4_ablation.py --model DIR [--n-ids 96] [--engine eng.npy ...] [--extra-numerics key=value,...]

--engine: also score `deepinfer logits` outputs (.npy, same ids) against the baseline.
"""
import argparse
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deepseek_v4_ref as ref  # noqa: E402


def prompt_ids(n_ids, seed=7, vocab=129280):
    """BOS + random ids (the ids compare_v4_logits.py uses)."""
    rng = random.Random(seed)
    return [0] + [rng.randrange(vocab) for _ in range(n_ids - 1)]


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def scores(base, run):
    """(max |d|, max per-row KL(base || run), top-1 agreement) over the rows given."""
    lp, lq = log_softmax(base), log_softmax(run)
    kl = np.sum(np.exp(lp) * (lp - lq), axis=1)
    top1 = float(np.mean(base.argmax(axis=1) == run.argmax(axis=1)))
    return float(np.abs(base - run).max()), float(kl.max()), top1


def row_text(name, base, run, long_from):
    a = scores(base, run)
    b = scores(base[long_from:], run[long_from:])
    return (f"| {name} | {a[0]:.3g} | {a[1]:.2g} | {a[2]:.3f} | {b[0]:.3g} | {b[1]:.2g} | {b[2]:.3f} |")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--n-ids", type=int, default=96)
    ap.add_argument("--long", type=int, default=48, help="first row of the 'long' columns")
    ap.add_argument("--engine", nargs="*", default=[], help="deepinfer logits .npy files to score too")
    ap.add_argument("--points", help="comma-separated subset of the points to ablate (default all)")
    ap.add_argument("--kv-sim", choices=["fp8", "none"], default="fp8")
    ap.add_argument("--shared-expert-clamp", choices=["on", "off"], default="on")
    args = ap.parse_args(argv)
    ids = prompt_ids(args.n_ids)
    common = dict(kv_sim=args.kv_sim, shared_expert_clamp=args.shared_expert_clamp == "on")

    def run(points):
        model = ref.DeepseekV4Reference(args.model, ref.V4Numerics(bf16_points=tuple(points), **common))
        return model.run(ids, [len(ids)])[0]

    base = run(())
    print(f"{args.model}: {len(ids)} ids; columns: all rows, then rows >= {args.long}")
    print("| run | max\\|d\\| | max KL | top-1 | max\\|d\\| (long) | max KL (long) | top-1 (long) |")
    print("|---|---|---|---|---|---|---|")
    print(row_text("all points", base, run(ref.BF16_POINTS), args.long), flush=True)
    points = args.points.split(",") if args.points else ref.BF16_POINTS
    for p in points:
        print(row_text(f"only {p}", base, run((p,)), args.long), flush=True)
    for p in points:
        print(row_text(f"all but {p}", base, run(tuple(q for q in ref.BF16_POINTS if q != p)), args.long),
              flush=True)
    for path in args.engine:
        print(row_text(f"engine {os.path.basename(path)}", base, np.load(path).astype(np.float64), args.long))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
