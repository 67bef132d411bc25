#!/usr/bin/env python3
"""1 vs 2 ranks on this machine: decode with expert parallelism against one process (issue 17).

Usage: ep_scaling.py BIN_DIR MODEL_DIR [--tokens N] [--json OUT]

BIN_DIR is the build tree (build/release): it runs apps/deepinfer/deepinfer, bench/model/model_bench
and bench/engine/engine_bench. MODEL_DIR is a routed-expert checkpoint, e.g.
`deepinfer make-model --arch deepseek_v4 --preset bench --out /tmp/v4b`. Runs, each greedy with N
generated tokens per sequence:
  1 process, 1 sequence, 1 and 2 threads             (deepinfer generate)
  1 process, 2 sequences, 2 threads                  (engine_bench --concurrency 2: decode-only tok/s)
  2 ranks x 1 thread, 1 sequence each                (mpirun -np 2 deepinfer generate --expert-parallel)
and model_bench for the read peak and the batch-1 decode roofline fraction. Prints a table; --json
writes the figures bench/parallel/ep_projection.py takes (--measured).

The all-to-all figures come from each rank's `ep_stats` line: bytes sent over all ranks per token
forwarded against the theoretical top_k * n_moe_layers * (8 + 8 * hidden) (dispatch record
{int32 expert, f32 weight, f32 row} out, f32 row back), and the all-to-all seconds as a share of the
rank's forward time (this includes waiting for the slower rank, so it is an upper bound on transfer).
"""
import argparse
import json
import os
import re
import subprocess
import shutil
import sys
import tempfile

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
RATE = re.compile(r"prompt tokens: (\d+), generated tokens: (\d+), prefill: ([\d.]+) tok/s, decode: ([\d.]+) tok/s")
PROMPTS = ["Hello there, how are you today?", "Bonjour mon ami, comment vas-tu?"]


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=900, **kw)
    if p.returncode != 0:
        sys.exit(f"ep_scaling: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return p


def parse_rates(stderr):
    """One (prompt, generated, prefill tok/s, decode tok/s) per rate line, in output order."""
    return [(int(m[1]), int(m[2]), float(m[3]), float(m[4])) for m in RATE.finditer(stderr)]


def single(deepinfer, model, threads, tokens):
    p = run([deepinfer, "generate", "--model", model, "--prompt", PROMPTS[0], "--max-tokens", str(tokens),
             "--threads", str(threads)])
    (r,) = parse_rates(p.stderr)
    return {"threads": threads, "decode_tok_s": r[3], "prefill_tok_s": r[2]}


def engine_two_sequences(engine_bench, model, tokens):
    p = run([engine_bench, "--model", model, "--threads", "2", "--concurrency", "2", "--max-tokens", str(tokens),
             "--prompt-tokens", "8", "--runs", "1", "--sections", "concurrency"])
    row = [l.split() for l in p.stdout.splitlines() if l.strip().startswith("2 ")]
    if not row:
        sys.exit("ep_scaling: no concurrency-2 row in engine_bench output:\n" + p.stdout)
    return {"output_tok_s": float(row[0][1]), "decode_tok_s": float(row[0][-2])}


def two_ranks(deepinfer, model, tokens):
    out = tempfile.mkdtemp(prefix="ep_scaling_")
    run(["mpirun", "--oversubscribe", "-np", "2", "--output-filename", out, deepinfer, "generate", "--expert-parallel",
         "--model", model, "--prompt", PROMPTS[0], "--rank-prompt", "1=" + PROMPTS[1], "--max-tokens", str(tokens),
         "--threads", "1", "--ep-stats"])
    ranks = []
    for rank in (0, 1):
        with open(os.path.join(out, "1", f"rank.{rank}", "stderr")) as f:
            err = f.read()
        rates = parse_rates(err)
        stats = [json.loads(l.split(" ", 1)[1]) for l in err.splitlines() if l.startswith("ep_stats ")]
        if len(rates) != 1 or len(stats) != 1:
            sys.exit(f"ep_scaling: rank {rank}: expected one rate and one ep_stats line:\n" + err)
        (prompt, generated, prefill, decode), s = rates[0], stats[0]
        decode_steps = generated - 1
        forward_s = prompt / prefill + decode_steps / decode
        ranks.append({"rank": s["rank"], "decode_tok_s": decode, "tokens_forwarded": prompt + decode_steps,
                      "forward_s": forward_s, "alltoall_s": s["alltoall_seconds"], "exchanges": s["exchanges"],
                      "bytes_sent": s["bytes_sent"], "rows_sent": s["rows_sent"],
                      "expert_rows": sum(s["expert_rows"])})
    shutil.rmtree(out)
    return ranks


def model_peaks(model_bench, model):
    p = run([model_bench, "--model", model, "--threads", "2", "--quick", "--prefill-runs", "0"])
    peaks = re.search(r"read ([\d.]+) GB/s \(1 thr\) / ([\d.]+) GB/s \(2 thr\); fp32 FMA ([\d.]+) / ([\d.]+) GFLOP/s",
                      p.stdout)
    decode = re.search(r"decode, batch 1.*?\s(\d+)%", p.stdout)
    if not peaks or not decode:
        sys.exit("ep_scaling: could not read model_bench's peaks:\n" + p.stdout)
    return {"read_gbs_1": float(peaks[1]), "read_gbs_2": float(peaks[2]), "fp32_gflops_1": float(peaks[3]),
            "fp32_gflops_2": float(peaks[4]), "decode_roofline_fraction": int(decode[1]) / 100.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin_dir")
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=48, help="generated tokens per sequence")
    ap.add_argument("--json", help="write the measured figures here (input of ep_projection.py --measured)")
    a = ap.parse_args()
    deepinfer = os.path.join(a.bin_dir, "apps/deepinfer/deepinfer")
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    cfg = cfg.get("text_config", cfg)
    hidden, top_k = cfg["hidden_size"], cfg["num_experts_per_tok"]
    n_moe_layers = cfg["num_hidden_layers"] - cfg.get("first_k_dense_replace", 0)

    peaks = model_peaks(os.path.join(a.bin_dir, "bench/model/model_bench"), a.model)
    one = [single(deepinfer, a.model, t, a.tokens) for t in (1, 2)]
    eng = engine_two_sequences(os.path.join(a.bin_dir, "bench/engine/engine_bench"), a.model, a.tokens)
    ranks = two_ranks(deepinfer, a.model, a.tokens)

    tokens = sum(r["tokens_forwarded"] for r in ranks)
    bytes_per_token = sum(r["bytes_sent"] for r in ranks) / tokens
    theory = top_k * n_moe_layers * (8 + 8 * hidden)
    aggregate = sum(r["decode_tok_s"] for r in ranks)
    exchanges = ranks[0]["exchanges"]
    per_exchange_s = min(r["alltoall_s"] for r in ranks) / exchanges
    per_exchange_bytes = sum(r["bytes_sent"] for r in ranks) / len(ranks) / exchanges

    print(f"model {a.model}: hidden {hidden}, {n_moe_layers} MoE layers, top-{top_k} of {cfg['n_routed_experts']}")
    print(f"peaks (model_bench, this run): read {peaks['read_gbs_2']:.1f} GB/s on 2 threads; batch-1 decode at "
          f"{peaks['decode_roofline_fraction']:.0%} of its read roofline")
    print(f"{'run':44s} {'decode tok/s':>12s} {'per sequence':>12s}")
    for o in one:
        print(f"{'1 process, 1 sequence, %d thread(s)' % o['threads']:44s} {o['decode_tok_s']:12.1f} {o['decode_tok_s']:12.1f}")
    print(f"{'1 process, 2 sequences, 2 threads (engine)':44s} {eng['decode_tok_s']:12.1f} {eng['decode_tok_s'] / 2:12.1f}")
    print(f"{'2 ranks x 1 thread, 1 sequence each (EP)':44s} {aggregate:12.1f} {aggregate / 2:12.1f}")
    for r in ranks:
        print(f"  rank {r['rank']}: decode {r['decode_tok_s']:.1f} tok/s, expert rows computed {r['expert_rows']}, "
              f"all-to-all {r['alltoall_s']:.3f} s = {r['alltoall_s'] / r['forward_s']:.1%} of forward time")
    print(f"all-to-all bytes per token forwarded: {bytes_per_token:.0f} (theory top_k*layers*(8+8*hidden) = {theory}), "
          f"ratio {bytes_per_token / theory:.4f}")
    print(f"per exchange (dispatch + combine, faster rank): {per_exchange_s * 1e6:.0f} us for {per_exchange_bytes:.0f} bytes "
          f"sent per rank (shared memory, oversubscribed; includes waiting)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "peaks": peaks, "single": one, "engine_two_sequences": eng, "ranks": ranks,
                       "bytes_per_token": bytes_per_token, "theory_bytes_per_token": theory,
                       "alltoall_per_exchange_s": per_exchange_s, "alltoall_bytes_per_exchange": per_exchange_bytes},
                      f, indent=1)


if __name__ == "__main__":
    main()
