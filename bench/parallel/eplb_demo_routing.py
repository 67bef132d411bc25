#!/usr/bin/env python3
"""Expert load on the demo model's real routing over 2 ranks (docs/expert-parallel.md, EPLB).

Usage: eplb_demo_routing.py DEEPINFER MODEL_DIR. Rank 0 and rank 1 each prefill one text; the rows
each rank's experts computed give the rank loads and their max/mean. Placements: contiguous, then EPLB
with 2 redundant copies from the load counted on two other texts (out of sample), then from the
test texts' own load (in sample, the best case). Deterministic (greedy routing, fixed texts).
"""
import json
import os
import subprocess
import sys
import tempfile

D = sys.argv[1]
M = sys.argv[2]
OUT = tempfile.mkdtemp(prefix="eplb_demo_")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
def ids(text):
    return subprocess.run([D, "tokenize", "--model", M, "--text", text], capture_output=True, text=True, check=True).stdout.strip()
train = ["What is 17 plus 25? Let me add the numbers step by step.", "Please return a JSON object with the fields name and age for Alice, 31."]
test = ["Compute 123 times 4 and explain how you got the answer.", "The package provides a command line tool to convert images between formats."]
def run(texts, extra):
    a, b = ids(texts[0]), ids(texts[1])
    p = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", D, "logits", "--expert-parallel", "--model", M, "--ids", a,
                        "--rank-ids", f"1={b}", "--prefill", "0", "--threads", "1", "--out", os.path.join(OUT, "o.{rank}.npy"), "--ep-stats", *extra],
                       capture_output=True, text=True, env=env, check=True)
    st = sorted((json.loads(l.split(" ", 1)[1]) for l in p.stdout.splitlines() if l.startswith("ep_stats")), key=lambda s: s["rank"])
    load = [sum(s["expert_rows"][e] for s in st) for e in range(len(st[0]["expert_rows"]))]
    ranks = [sum(s["expert_rows"]) for s in st]
    return load, ranks, max(ranks) / (sum(ranks) / len(ranks)), [s["local_experts"] for s in st]
train_load, r, imb, _ = run(train, [])
print("train load", train_load, "rank rows", r, "max/mean %.3f" % imb)
load, r, imb, _ = run(test, [])
print("test contiguous: load", load, "rank rows", r, "max/mean %.3f" % imb)
_, r, imb, held = run(test, ["--ep-redundant-experts", "2", "--ep-expert-load", ",".join(map(str, train_load))])
print("test EPLB(train load, R=2): rank rows", r, "max/mean %.3f" % imb, "held", held)
_, r, imb, held = run(test, ["--ep-redundant-experts", "2", "--ep-expert-load", ",".join(map(str, load))])
print("test EPLB(test load, R=2, in-sample): rank rows", r, "max/mean %.3f" % imb, "held", held)

# Live EPLB (--ep-rebalance-interval): each rank feeds a long text one token per step (logits
# --prefill 1: ~200 forward steps), the ranks re-place every MoE layer's experts from the load they
# measure. Without copies the start is contiguous; with --ep-redundant-experts and no load, EPLB's
# placement of a uniform load. "last window" is live EPLB's own figure at its last check: the
# window's load (Σ over layers of the busiest rank / Σ of the mean) with the placements in use then.
LONG = [
    "The package provides a command line tool to convert images between formats. It reads the input file, "
    "detects its format from the first bytes, decodes it into memory, and writes it again in the format the "
    "user asked for. Options choose the quality of lossy formats, the size of the output, and whether the "
    "colour profile is kept. When the input cannot be read, the tool prints the name of the file and the "
    "reason, and returns a non-zero status so that scripts can stop. The manual page lists every option with "
    "an example, and the documentation explains how to build the tool from source on any system.",
    "What is 17 plus 25? Let me add the numbers step by step. Seven plus five is twelve, so I write two and "
    "carry one. One plus two plus the carried one is four. The answer is 42. Now compute 123 times 4: three "
    "times four is twelve, write two and carry one; two times four is eight, plus one is nine; one times four "
    "is four. The answer is 492. Please return a JSON object with the fields name and age for Alice, 31, and "
    "then another one for Bob, who is 45 years old, and a third one for Carol, aged 27.",
]
LIVE = ["--ep-rebalance-interval", "16", "--ep-rebalance-window", "4", "--ep-rebalance-min-gain", "0.05"]


def feed(texts, extra):
    a, b = ids(texts[0]), ids(texts[1])
    p = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", D, "logits", "--expert-parallel", "--model", M, "--ids", a,
                        "--rank-ids", f"1={b}", "--prefill", "1", "--threads", "1", "--out", os.path.join(OUT, "l.{rank}.npy"),
                        "--ep-stats", *extra], capture_output=True, text=True, env=env, check=True)
    st = sorted((json.loads(l.split(" ", 1)[1]) for l in p.stdout.splitlines() if l.startswith("ep_stats")), key=lambda s: s["rank"])
    ranks = [sum(s["expert_rows"]) for s in st]
    return ranks, max(ranks) / (sum(ranks) / len(ranks)), st, (len(a.split(",")), len(b.split(",")))


RUNS = (("contiguous", []),
        ("EPLB at start from the train load, R=2",
         ["--ep-redundant-experts", "2", "--ep-expert-load", ",".join(map(str, train_load))]),
        ("live EPLB, R=0, from contiguous (" + " ".join(LIVE) + ")", LIVE),
        ("live EPLB, R=2, from EPLB of a uniform load", LIVE + ["--ep-redundant-experts", "2"]))
for name, extra in RUNS:
    r, imb, st, n_ids = feed(LONG, extra)
    line = f"feed {n_ids[0]} / {n_ids[1]} tokens one per step, {name}: rank rows {r} max/mean over the run {imb:.3f}"
    if "rebalance" in st[0]:
        lv = st[0]["rebalance"]
        line += (f"; checks {lv['checks']}, rebalances {lv['rebalances']} ({lv['layers_rebalanced']} layer placements), "
                 f"expert copies x layers received {[s['rebalance']['experts_received'] for s in st]}, "
                 f"bytes {[s['rebalance']['bytes_received'] for s in st]}, last window {lv['imbalance_before']:.3f} "
                 f"(EPLB's placements for it: {lv['imbalance_after']:.3f})")
    print(line)
