#!/usr/bin/env python3
"""mpirun -np 2|3|4 deepinfer logits|generate --expert-parallel == single process, bit for bit.

Usage: ep_logits_test.py DEEPINFER MPIRUN WORKDIR v3|v4. Every rank runs its own sequence
(--rank-ids), some of different lengths, so each rank's MoE batches mix rows of other ranks' requests:
its logits must still equal running its sequence alone in one process. The per-rank stats must
account for every routed row exactly once (rows sent == rows computed, each by its expert's owner).
Live EPLB (--ep-rebalance-interval) moves experts between ranks mid-run without changing a bit.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

DEEPINFER, MPIRUN, WORK, ARCH = sys.argv[1:5]
TIMEOUT_S = 120
A = "5,17,42,99,3,250,7,1000,12,64,33,2"
B = "8,8,301,4,77,19,500,6,1,90,11,23"
C = "40,2,9,600,13"


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\nrc={p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p.stdout


def run_bytes(cmd):
    p = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT_S)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\nrc={p.returncode}\nstderr:\n{p.stderr.decode(errors='replace')}")
    return p.stdout


def logits(model, ids, prefill, out, *extra):
    run([DEEPINFER, "logits", "--model", model, "--ids", ids, "--prefill", str(prefill), "--threads", "1",
         "--out", out, *extra])


def mpirun(n_ranks, model, prefill, rank_ids, out, *extra):
    cmd = [MPIRUN, "--oversubscribe", "-np", str(n_ranks), DEEPINFER, "logits", "--expert-parallel", "--model", model,
           "--ids", A, "--prefill", str(prefill), "--threads", "1", "--out", out, "--ep-stats", *extra]
    for rank, ids in rank_ids.items():
        cmd += ["--rank-ids", f"{rank}={ids}"]
    stats = [json.loads(line.split(" ", 1)[1]) for line in run(cmd).splitlines() if line.startswith("ep_stats ")]
    return sorted(stats, key=lambda s: s["rank"])


def same_bits(got_path, want_path, what):
    got, want = np.load(got_path), np.load(want_path)
    if got.shape != want.shape or got.tobytes() != want.tobytes():
        diff = np.abs(got.astype(np.float64) - want) if got.shape == want.shape else None
        sys.exit(f"FAIL {what}: {got_path} differs from {want_path}"
                 + (f" (max |diff| {diff.max():.3g} at {np.unravel_index(diff.argmax(), diff.shape)})"
                    if diff is not None else f" (shape {got.shape} vs {want.shape})"))


def check_stats(stats, n_ranks, n_experts, what, copies=None, live=False):
    if len(stats) != n_ranks:
        sys.exit(f"FAIL {what}: {len(stats)} ep_stats lines for {n_ranks} ranks")
    owned = sorted(e for s in stats for e in s["local_experts"])
    if sorted(set(owned)) != list(range(n_experts)) or (copies is None and len(owned) != n_experts):
        sys.exit(f"FAIL {what}: experts held across ranks {owned}")
    for s in stats:  # (live EPLB moves experts: rows of experts held before are counted too)
        for e, rows in enumerate(s["expert_rows"]):
            if rows and e not in s["local_experts"] and not live:
                sys.exit(f"FAIL {what}: rank {s['rank']} computed expert {e} it does not own")
    sent = sum(s["rows_sent"] for s in stats)
    computed = sum(sum(s["expert_rows"]) for s in stats)
    if sent != computed or sent == 0:
        sys.exit(f"FAIL {what}: {sent} routed rows sent but {computed} computed")


def generate_2_ranks(model, prompts, out_dir, *extra):
    """mpirun -np 2 generate, rank R on prompts[R]; [(stdout bytes, stderr text)] per rank."""
    run([MPIRUN, "--oversubscribe", "--output-filename", out_dir, "-np", "2", DEEPINFER, "generate",
         "--expert-parallel", "--model", model, "--prompt", prompts[0], "--rank-prompt", f"1={prompts[1]}",
         "--max-tokens", "8", "--threads", "1", "--ep-stats", *extra])
    outputs = []
    for rank in range(2):
        rank_dir = os.path.join(out_dir, "1", f"rank.{rank}")
        with open(os.path.join(rank_dir, "stdout"), "rb") as out, open(os.path.join(rank_dir, "stderr")) as err:
            outputs.append((out.read(), err.read()))
    return outputs


def ep_stats_lines(text):
    return [json.loads(l.split(" ", 1)[1]) for l in text.splitlines() if l.startswith("ep_stats ")]


def live_eplb(interval):
    return ["--ep-redundant-experts", "2", "--ep-rebalance-interval", str(interval), "--ep-rebalance-window", "2",
            "--ep-rebalance-min-gain", "0"]


def check_live_eplb(stats, n_experts, what):
    """Every rank took the same decisions, some placement was applied, weights really moved."""
    check_stats(stats, len(stats), n_experts, what, copies=2, live=True)
    live = [s["rebalance"] for s in stats]
    for key in ("checks", "rebalances", "imbalance_before", "imbalance_after"):
        if len({l[key] for l in live}) != 1:
            sys.exit(f"FAIL {what}: ranks disagree on {key}: {live}")
    if live[0]["rebalances"] < 1 or live[0]["checks"] < live[0]["rebalances"]:
        sys.exit(f"FAIL {what}: no placement applied: {live}")
    if sum(l["experts_received"] for l in live) < 1 or any(
            (l["experts_received"] > 0) != (l["bytes_received"] > 0) for l in live):
        sys.exit(f"FAIL {what}: no expert weights moved: {live}")
    # Every layer is placed on its own: some rank holds other experts in one MoE layer than in another.
    if not any(len({tuple(v) for v in s["layer_local_experts"].values()}) > 1 for s in stats):
        sys.exit(f"FAIL {what}: every layer has the same placement: {[s['layer_local_experts'] for s in stats]}")


def main():
    work = os.path.join(WORK, ARCH)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(work, "model")
    arch = {"v3": "deepseek_v3", "v4": "deepseek_v4"}[ARCH]
    run([DEEPINFER, "make-model", "--arch", arch, "--preset", "tiny", "--seed", "0", "--out", model])
    n_experts = json.load(open(os.path.join(model, "config.json")))["n_routed_experts"]
    mtp = ["--mtp-out"] if ARCH == "v3" else []
    ref = {}
    for name, ids in (("A", A), ("B", B), ("C", C)):
        for prefill in (0, 5):
            if name == "C" and prefill == 5:
                continue
            path = os.path.join(work, f"ref_{name}_p{prefill}.npy")
            extra = mtp + [path.replace(".npy", ".mtp.npy")] if mtp else []
            logits(model, ids, prefill, path, *extra)
            ref[name, prefill] = path

    # 2 ranks, a prefill of 5 then one token per step (decode batches of one row per rank).
    out = os.path.join(work, "np2.{rank}.npy")
    extra = ["--mtp-out", os.path.join(work, "np2.{rank}.mtp.npy")] if mtp else []
    stats = mpirun(2, model, 5, {1: B}, out, *extra)
    check_stats(stats, 2, n_experts, "np 2")
    for rank, name in ((0, "A"), (1, "B")):
        same_bits(out.format(rank=rank), ref[name, 5], f"np 2 rank {rank}")
        if mtp:
            same_bits(os.path.join(work, f"np2.{rank}.mtp.npy"), ref[name, 5].replace(".npy", ".mtp.npy"),
                      f"np 2 rank {rank} MTP")

    # EPLB with 2 redundant copies, balancing the load just measured: the hottest expert gets a copy
    # on each rank, rows are spread over the copies, the logits do not move.
    load = [sum(s["expert_rows"][e] for s in stats) for e in range(n_experts)]
    hot = max(range(n_experts), key=lambda e: load[e])
    out = os.path.join(work, "eplb.{rank}.npy")
    stats = mpirun(2, model, 5, {1: B}, out, "--ep-redundant-experts", "2", "--ep-expert-load",
                   ",".join(str(v) for v in load))
    check_stats(stats, 2, n_experts, "np 2 EPLB", copies=2)
    if not all(hot in s["local_experts"] for s in stats):
        sys.exit(f"FAIL np 2 EPLB: hot expert {hot} (load {load}) not copied to both ranks: "
                 f"{[s['local_experts'] for s in stats]}")
    for rank, name in ((0, "A"), (1, "B")):
        same_bits(out.format(rank=rank), ref[name, 5], f"np 2 EPLB rank {rank}")

    # Live EPLB: every 2 steps the ranks sum the measured load and, when EPLB's placement for it
    # is any better (min gain 0), move expert weights between them mid-sequence. Still bitwise.
    out = os.path.join(work, "live.{rank}.npy")
    stats = mpirun(2, model, 5, {1: B}, out, *live_eplb(interval=2))
    check_live_eplb(stats, n_experts, "np 2 live EPLB")
    for rank, name in ((0, "A"), (1, "B")):
        same_bits(out.format(rank=rank), ref[name, 5], f"np 2 live EPLB rank {rank}")

    # 4 ranks, one prefill each of different lengths (rank 3 repeats rank 0's sequence).
    out = os.path.join(work, "np4.{rank}.npy")
    stats = mpirun(4, model, 0, {1: C, 2: B}, out)
    check_stats(stats, 4, n_experts, "np 4")
    for rank, name in ((0, "A"), (1, "C"), (2, "B"), (3, "A")):
        same_bits(out.format(rank=rank), ref[name, 0], f"np 4 rank {rank}")

    # Ranks with fewer forwards run idle steps (no rows of their own, still serving their experts):
    # rank 1 has 5 ids (1 step at --prefill 5), rank 0 has 12 (8 steps), rank 2 has 12.
    out = os.path.join(work, "idle.{rank}.npy")
    stats = mpirun(3, model, 5, {1: C, 2: B}, out)
    check_stats(stats, 3, n_experts, "np 3 idle")
    if stats[0]["exchanges"] != stats[1]["exchanges"]:
        sys.exit(f"FAIL np 3 idle: ranks met {stats[0]['exchanges']} vs {stats[1]['exchanges']} times")
    ref_c5 = os.path.join(work, "ref_C_p5.npy")
    logits(model, C, 5, ref_c5)
    for rank, path in ((0, ref["A", 5]), (1, ref_c5), (2, ref["B", 5])):
        same_bits(out.format(rank=rank), path, f"np 3 idle rank {rank}")

    if mtp:  # MTP forwards have no idle step yet: different MTP step counts are refused.
        p = subprocess.run([MPIRUN, "--oversubscribe", "-np", "2", DEEPINFER, "logits", "--expert-parallel", "--model",
                            model, "--ids", A, "--prefill", "5", "--rank-ids", f"1={C}", "--threads", "1", "--out",
                            os.path.join(work, "bad.npy"), "--mtp-out", os.path.join(work, "bad.mtp.npy")],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        if p.returncode == 0 or "MTP forward steps but rank" not in p.stderr + p.stdout:
            sys.exit(f"FAIL: mismatched MTP step counts not refused (rc {p.returncode}):\n{p.stderr}")
    # generate: each rank its own prompt, greedy; every rank's text equals generating it alone.
    prompts = ["Hello there", "Bonjour le monde, comment"]
    want = []
    for prompt in prompts:
        p = subprocess.run([DEEPINFER, "generate", "--model", model, "--prompt", prompt, "--max-tokens", "8",
                            "--threads", "1"], capture_output=True, timeout=TIMEOUT_S)
        if p.returncode != 0:
            sys.exit(f"FAIL generate: {p.stderr.decode(errors='replace')}")
        want.append(p.stdout)
    cfg = json.load(open(os.path.join(model, "config.json")))
    moe_layers = cfg["num_hidden_layers"] - cfg.get("first_k_dense_replace", 0)
    rows_total, bytes_total = 0, 0
    for rank, (got, err) in enumerate(generate_2_ranks(model, prompts, os.path.join(work, "generate"))):
        if got != want[rank]:
            sys.exit(f"FAIL generate rank {rank}: {got!r} vs single-process {want[rank]!r}")
        # --ep-stats: the rows this rank's tokens sent are (prompt + decode steps) * top_k * MoE layers.
        rate = re.search(r"prompt tokens: (\d+), generated tokens: (\d+)", err)
        stats = ep_stats_lines(err)
        if not rate or len(stats) != 1 or stats[0]["rank"] != rank:
            sys.exit(f"FAIL generate --ep-stats rank {rank}: no rate line or not one ep_stats line:\n{err}")
        forwarded = int(rate[1]) + int(rate[2]) - 1
        want_rows = forwarded * cfg["num_experts_per_tok"] * moe_layers
        if stats[0]["rows_sent"] != want_rows:
            sys.exit(f"FAIL generate --ep-stats rank {rank}: rows_sent {stats[0]['rows_sent']} != {want_rows}")
        rows_total += stats[0]["rows_sent"]
        bytes_total += stats[0]["bytes_sent"]
    if bytes_total != rows_total * (8 + 8 * cfg["hidden_size"]):
        sys.exit(f"FAIL generate --ep-stats: {bytes_total} bytes sent for {rows_total} rows, not 8 + 8*hidden each")

    # generate with live EPLB every step: the same text, experts moved between tokens.
    stats = []
    outputs = generate_2_ranks(model, prompts, os.path.join(work, "generate_live"), *live_eplb(interval=1))
    for rank, (got, err) in enumerate(outputs):
        if got != want[rank]:
            sys.exit(f"FAIL generate live EPLB rank {rank}: {got!r} vs single-process {want[rank]!r}")
        stats += ep_stats_lines(err)
    check_live_eplb(stats, n_experts, "generate live EPLB")

    if ARCH == "v3":  # generate with MTP drafts (the V3 engine drafts): the engine steps through EpStepRunner.
        # (The engine path renders special tokens as the server does, so the reference is the same
        # command in one process.)
        spec = ["--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": 2})]
        want_spec = [run_bytes([DEEPINFER, "generate", "--model", model, "--prompt", p, "--max-tokens", "8",
                                "--threads", "1", *spec]) for p in prompts]
        for rank, (got, err) in enumerate(generate_2_ranks(model, prompts, os.path.join(work, "generate_mtp"), *spec)):
            if got != want_spec[rank] or "draft tokens" not in err:
                sys.exit(f"FAIL generate MTP drafts rank {rank}: {got!r} vs single-process {want_spec[rank]!r}:\n{err}")
    print(f"ep_logits {ARCH}: logits at np 2, 3 and 4 and generate at np 2 (also with live EPLB, V3 with MTP drafts) bitwise "
          "equal to single-process")


if __name__ == "__main__":
    main()
