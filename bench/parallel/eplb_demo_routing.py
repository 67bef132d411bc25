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

# Live EPLB (--ep-rebalance-interval): each rank generates 64 greedy tokens of a chat answer; the
# ranks re-place the experts from the load they measure. Without copies the start is contiguous;
# with --ep-redundant-experts and no load, EPLB's placement of a uniform load.
LIVE = ["--ep-rebalance-interval", "8", "--ep-rebalance-window", "4", "--ep-rebalance-min-gain", "0.05"]


def generate(texts, extra):
    out_dir = os.path.join(OUT, "gen")
    subprocess.run(["mpirun", "--oversubscribe", "--output-filename", out_dir, "-np", "2", D, "generate",
                    "--expert-parallel", "--model", M, "--chat", "--prompt", texts[0], "--rank-prompt", f"1={texts[1]}",
                    "--max-tokens", "64", "--threads", "1", "--ep-stats", *extra],
                   capture_output=True, text=True, env=env, check=True)
    st = []
    for rank in range(2):
        with open(os.path.join(out_dir, "1", f"rank.{rank}", "stderr")) as f:
            st += [json.loads(l.split(" ", 1)[1]) for l in f.read().splitlines() if l.startswith("ep_stats ")]
    ranks = [sum(s["expert_rows"]) for s in st]
    return ranks, max(ranks) / (sum(ranks) / len(ranks)), st


RUNS = (("contiguous", []),
        ("EPLB at start from the train load, R=2",
         ["--ep-redundant-experts", "2", "--ep-expert-load", ",".join(map(str, train_load))]),
        ("live EPLB, R=0, from contiguous (" + " ".join(LIVE) + ")", LIVE),
        ("live EPLB, R=2, from EPLB of a uniform load", LIVE + ["--ep-redundant-experts", "2"]))
for name, extra in RUNS:
    r, imb, st = generate(test, extra)
    line = f"generate 64 tokens, {name}: rank rows {r} max/mean {imb:.3f} held {[s['local_experts'] for s in st]}"
    if "rebalance" in st[0]:
        lv = st[0]["rebalance"]
        line += (f"; checks {lv['checks']}, rebalances {lv['rebalances']}, experts received "
                 f"{[s['rebalance']['experts_received'] for s in st]}, bytes {[s['rebalance']['bytes_received'] for s in st]}, "
                 f"seconds {[round(s['rebalance']['seconds'], 4) for s in st]}, last window max/mean "
                 f"{lv['imbalance_before']:.3f} -> {lv['imbalance_after']:.3f}")
    print(line)
