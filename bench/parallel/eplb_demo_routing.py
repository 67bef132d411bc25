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
