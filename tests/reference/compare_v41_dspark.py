#!/usr/bin/python3
"""Compares `deepinfer logits --dspark-out` on a DeepSeek-V4.1 checkpoint with deepseek_v41_ref.py --dspark-out.

Both run the target over the ids, then one DSpark draft block (docs/dspark.md) with the anchor = the last id at
position n - 1 and the context = the positions before it, and write float32 [B, V + 2]: row j = z_j (V columns),
c_j (the confidence), y_j (the greedy chain's token). Each id list (--n-ids, default 48 = a full window of context
and 9 = a context shorter than the window) runs the engine with --prefill 0, 1 and min(21, n/2), and requires
the three blocks to be bitwise equal (the context features do not depend on the chunking).

no-bf16: `--numerics no-bf16` against the reference's --no-bf16 --sim-input f32 (f32 rounding noise only):
  the chain y_j equal on every row; z at the tight bound of compare_v4_logits.check_tight (max |d| <=
  1.5e-5 max |ref| + 2e-6, argmax equal); max |c_j engine - c_j reference| <= 1e-5.
switches: no-bf16 with kv_fp8_sim=off,shared_expert_clamp=off,q_head_norm=on against the same reference
  switches, at the no-bf16 bounds (the options reach the stages: their context and block KV, experts, queries).
production: the default numerics against the reference's defaults with --sim-input f32: a bf16 rounding flip
  moves z and c by more than f32 noise, so z at the loose bound of compare_v4_logits.check (median row max |d| <=
  0.1, max |d| <= 0.3 max |ref|, decisive argmax equal), |c_j engine - c_j reference| <= 0.02, and the chains
  equal, or differing first at a row whose reference top-2 gap is under twice its max |d| (a bf16 flip; the
  rows after it hang on another previous token and are left out).
The main logits of the same runs are checked as well (compare_v41_logits.py's bounds).

A mutation of the reference (e.g. --ref-arg=--dspark-causal) must make the comparison fail.

    compare_v41_dspark.py --deepinfer BIN --model DIR --work DIR [--n-ids 48,9] [--mode all|no-bf16|switches|production]
"""
import argparse
import os
import random
import subprocess
import sys

import numpy as np

from compare_v4_logits import check, check_tight

HERE = os.path.dirname(os.path.abspath(__file__))

# mode -> (deepinfer --numerics, reference switches, tight bound, confidence bound)
MODES = {
    "no-bf16": ("no-bf16", ["--no-bf16", "--sim-input", "f32"], True, 1e-5),
    "switches": ("no-bf16,kv_fp8_sim=off,shared_expert_clamp=off,q_head_norm=on",
                 ["--no-bf16", "--sim-input", "f32", "--kv-sim", "none", "--shared-expert-clamp", "off",
                  "--q-head-norm", "on"], True, 1e-5),
    "production": ("production", ["--sim-input", "f32"], False, 0.02),
}


def check_block(name, eng, ref, tight, conf_bound, stats):
    """eng, ref: [B, V + 2]. Returns ok; prints one line for z (the checker's) and one for the chain and c;
    adds the run's figures to `stats` (z max |d|, c max |d|, chain equal)."""
    vocab = ref.shape[1] - 2
    if eng.shape != ref.shape:
        print(f"{name}: shape {eng.shape} != reference {ref.shape} -> FAIL")
        return False
    y_eng, y_ref = eng[:, vocab + 1].astype(np.int64), ref[:, vocab + 1].astype(np.int64)
    differ = np.nonzero(y_eng != y_ref)[0]
    first = int(differ[0]) if len(differ) else len(ref)  # the chains agree on rows [0, first)
    rows, chain_ok = len(ref), first == len(ref)
    if not tight and not chain_ok:
        # a flip at an undecisive row is bf16 noise; the rows after it hang on another previous token
        z = ref[first, :vocab]
        top2 = np.sort(z)[-2:]
        chain_ok = bool(top2[1] - top2[0] <= 2 * np.abs(eng[first, :vocab].astype(np.float64) - z).max())
        rows = first + 1
    ok = (check_tight if tight else check)(f"{name} z", eng[:rows, :vocab], ref[:rows, :vocab])
    dc = float(np.abs(eng[:rows, vocab].astype(np.float64) - ref[:rows, vocab]).max())
    conf_ok = dc <= conf_bound
    dz = float(np.abs(eng[:rows, :vocab].astype(np.float64) - ref[:rows, :vocab]).max())
    stats["z"] = max(stats.get("z", 0.0), dz)
    stats["c"] = max(stats.get("c", 0.0), dc)
    stats["runs"] = stats.get("runs", 0) + 1
    stats["chains"] = stats.get("chains", 0) + int(first == len(ref))
    stats["flips"] = stats.get("flips", 0) + int(chain_ok and first < len(ref))
    print(f"{name}: chain engine {y_eng.tolist()} reference {y_ref.tolist()} -> {'equal' if chain_ok else 'DIFFER'}"
          f"{'' if rows == len(ref) else f' up to row {first}, an undecisive flip (rows after it left out)'}; "
          f"confidence max |d| {dc:.3g} (bound {conf_bound:g}, reference {np.round(ref[:, vocab], 4).tolist()})"
          f" -> {'ok' if chain_ok and conf_ok else 'FAIL'}")
    return ok and chain_ok and conf_ok


def compare(args, mode, ids, stats):
    numerics, ref_switches, tight, conf_bound = MODES[mode]
    id_text = ",".join(str(i) for i in ids)
    tag = f"{mode}_{len(ids)}"
    ref_out, ref_logits = os.path.join(args.work, f"ref_{tag}_dspark.npy"), os.path.join(args.work, f"ref_{tag}.npy")
    subprocess.run([sys.executable, os.path.join(HERE, "deepseek_v41_ref.py"), "--model", args.model, "--tokens",
                    id_text, "--out", ref_logits, "--dspark-out", ref_out] + ref_switches + args.ref_arg, check=True)
    ref, ref_l = np.load(ref_out).astype(np.float64), np.load(ref_logits)
    ok, runs = True, []
    for prefill in sorted({0, 1, min(21, len(ids) // 2)}):  # one prefill, token by token, prefill then decode
        out, logits = os.path.join(args.work, f"eng_{tag}_{prefill}_dspark.npy"), \
            os.path.join(args.work, f"eng_{tag}_{prefill}.npy")
        subprocess.run([args.deepinfer, "logits", "--model", args.model, "--ids", id_text, "--prefill", str(prefill),
                        "--numerics", numerics, "--out", logits, "--dspark-out", out] + args.engine_arg, check=True)
        eng = np.load(out)
        name = f"{mode} n {len(ids)} prefill {prefill}"
        ok &= (check_tight if tight else check)(f"{name} logits", np.load(logits), ref_l)
        ok &= check_block(f"{name} dspark", eng, ref, tight, conf_bound, stats)
        runs.append(eng)
    same = all(np.array_equal(eng, runs[0]) for eng in runs[1:])
    print(f"{mode} n {len(ids)} dspark chunking bitwise equal: {same}")
    stats["same"] = stats.get("same", True) and same
    return ok and same


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deepinfer", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--n-ids", default="48,9", help="comma-separated id-list lengths (each >= 2)")
    ap.add_argument("--mode", choices=["all"] + list(MODES), default="all")
    ap.add_argument("--ref-arg", action="append", default=[],
                    help="an extra reference switch (a mutation, e.g. --ref-arg=--dspark-causal)")
    ap.add_argument("--engine-arg", action="append", default=[],
                    help="an extra deepinfer logits switch (e.g. --engine-arg=--threads=1)")
    args = ap.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    ok = True
    summary = []
    for mode in (list(MODES) if args.mode == "all" else [args.mode]):
        stats, mode_ok = {}, True
        for n in (int(v) for v in args.n_ids.split(",")):
            rng = random.Random(7)
            ids = [0] + [rng.randrange(129280) for _ in range(n - 1)]
            mode_ok &= compare(args, mode, ids, stats)
        summary.append(f"{mode}: dspark z max |d| {stats['z']:.3g}, confidence max |d| {stats['c']:.3g} (bound "
                       f"{MODES[mode][3]:g}), chains equal in {stats['chains']}/{stats['runs']} runs (undecisive flips "
                       f"{stats['flips']}), chunking "
                       f"bitwise equal {stats['same']} -> {'ok' if mode_ok else 'FAIL'}")
        ok &= mode_ok
    for line in summary:
        print(line)
    print(f"compare_v41_dspark: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
