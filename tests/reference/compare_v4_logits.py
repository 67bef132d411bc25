#!/usr/bin/python3
"""Compares `deepinfer logits` on a DeepSeek-V4 checkpoint with tests/reference/deepseek_v4_ref.py.

The engine runs with its production numerics (bf16 rounding points on), so an f32-level difference
can flip a bf16 rounding and propagate (tests/reference/README.md "V4", "expect bf16 rounding
flips"); the tight, no-bf16 comparison lives in src/model/v4_model_test.cpp. Checked per run
(one prefill, token by token, prefill 21 then decode), for the logits and the MTP logits:

  median over rows of max |engine - reference| <= 0.1
  max |engine - reference| <= 0.3 * max |reference|
  argmax agrees on every row whose reference top-2 gap exceeds twice that row's max |d|
  and the three engine runs are bitwise equal (chunk invariance).

    compare_v4_logits.py --deepinfer BIN --model DIR --work DIR [--n-ids 70]
"""
import argparse
import os
import random
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def check(name, eng, ref):
    d = np.abs(eng.astype(np.float64) - ref)
    row_max = d.max(axis=1)
    median, worst, max_ref = float(np.median(row_max)), float(d.max()), float(np.abs(ref).max())
    top2 = np.sort(ref, axis=1)[:, -2:]
    decisive = (top2[:, 1] - top2[:, 0]) > 2 * row_max
    mismatch = int(np.sum(decisive & (eng.argmax(axis=1) != ref.argmax(axis=1))))
    ok = median <= 0.1 and worst <= 0.3 * max_ref and mismatch == 0
    print(f"{name}: max |d| {worst:.3g} (max |ref| {max_ref:.3g}), median row {median:.3g}, "
          f"decisive argmax mismatches {mismatch} -> {'ok' if ok else 'FAIL'}")
    return ok


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deepinfer", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--n-ids", type=int, default=70)
    args = ap.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    rng = random.Random(7)
    ids = [0] + [rng.randrange(129280) for _ in range(args.n_ids - 1)]
    id_text = ",".join(str(i) for i in ids)
    ref_out, ref_mtp = os.path.join(args.work, "ref.npy"), os.path.join(args.work, "ref_mtp.npy")
    subprocess.run([sys.executable, os.path.join(HERE, "deepseek_v4_ref.py"), "--model", args.model, "--tokens",
                    id_text, "--out", ref_out, "--mtp-out", ref_mtp], check=True)
    ref, ref_m = np.load(ref_out), np.load(ref_mtp)
    ok = True
    runs = []
    for prefill in (0, 1, 21):
        out = os.path.join(args.work, f"eng_{prefill}.npy")
        mtp = os.path.join(args.work, f"eng_{prefill}_mtp.npy")
        subprocess.run([args.deepinfer, "logits", "--model", args.model, "--ids", id_text, "--prefill", str(prefill),
                        "--out", out, "--mtp-out", mtp], check=True)
        eng, eng_m = np.load(out), np.load(mtp)
        ok &= check(f"prefill {prefill} logits", eng, ref)
        ok &= check(f"prefill {prefill} mtp", eng_m, ref_m)
        runs.append((eng, eng_m))
    for eng, eng_m in runs[1:]:
        same = np.array_equal(eng, runs[0][0]) and np.array_equal(eng_m, runs[0][1])
        print(f"chunking bitwise equal: {same}")
        ok &= same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
