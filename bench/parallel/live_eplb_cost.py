#!/usr/bin/env python3
"""What a live EPLB rebalance costs (docs/expert-parallel.md, Live EPLB): bytes moved and seconds.

Usage: live_eplb_cost.py DEEPINFER MODEL [--tokens N] [--interval N]. Runs `mpirun -np 2 generate
--expert-parallel --ep-redundant-experts 2 --ep-rebalance-interval N` twice: with --ep-rebalance-min-gain
0 (every check moves experts: the cost per byte) and with the default 0.05 (what a run pays). Prints per
rank the weight bytes received, the time packing / in MPI / installing, and the end-to-end move rate
against a plain one-core copy measured in the same run (numpy copy of 512 MiB: the memory's copy rate).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism=os.environ.get("OMPI_MCA_btl_vader_single_copy_mechanism", "none"))


def copy_gbs():
    src = np.ones(512 << 20, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in first
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = max(best, 2 * src.nbytes / (time.perf_counter() - t0) / 1e9)  # read + write
    return best


def run(deepinfer, model, tokens, interval, min_gain):
    out = tempfile.mkdtemp(prefix="live_eplb_")
    cmd = ["mpirun", "--oversubscribe", "--output-filename", out, "-np", "2", deepinfer, "generate",
           "--expert-parallel", "--model", model, "--prompt", "The quick brown fox jumps over the lazy dog",
           "--rank-prompt", "1=Hello there, how are you today", "--max-tokens", str(tokens), "--threads", "1",
           "--ep-stats", "--ep-redundant-experts", "2", "--ep-rebalance-interval", str(interval)]
    if min_gain is not None:
        cmd += ["--ep-rebalance-min-gain", str(min_gain)]
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, text=True, env=ENV, check=True, timeout=1800)
    wall = time.perf_counter() - t0
    ranks = []
    for r in range(2):
        with open(os.path.join(out, "1", f"rank.{r}", "stderr")) as f:
            err = f.read()
        rate = re.search(r"decode: ([\d.]+) tok/s", err)
        stats = json.loads(next(l for l in err.splitlines() if l.startswith("ep_stats ")).split(" ", 1)[1])
        ranks.append({"decode_tok_s": float(rate[1]), **stats["rebalance"]})
    return wall, ranks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("deepinfer")
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--interval", type=int, default=8)
    a = ap.parse_args()
    copy = copy_gbs()
    print(f"one-core copy (numpy, 512 MiB, read + write): {copy:.1f} GB/s")
    for label, gain in (("min gain 0 (moves at every check)", 0), ("default min gain 0.05", None)):
        wall, ranks = run(a.deepinfer, a.model, a.tokens, a.interval, gain)
        print(f"{label}: wall {wall:.1f} s")
        for r, s in enumerate(ranks):
            gb = s["bytes_received"] / 1e9
            rate = gb / s["seconds"] if s["seconds"] > 0 and gb > 0 else 0.0
            print(f"  rank {r}: {s['checks']} checks, {s['rebalances']} rebalances, {s['experts_received']} expert "
                  f"copies x layers in, {gb:.2f} GB in {s['seconds']:.2f} s (pack {s['pack_seconds']:.2f}, MPI "
                  f"{s['transfer_seconds']:.2f}, install {s['install_seconds']:.2f}) = {rate:.2f} GB/s, "
                  f"{rate / copy:.0%} of the copy rate (2x bytes counted there); decode {s['decode_tok_s']:.1f} tok/s "
                  f"(forwards only)")


if __name__ == "__main__":
    main()
