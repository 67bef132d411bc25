#!/usr/bin/env python3
"""P/D vs colocated under prefill interference (issue 15's benchmark, CPU-sized): TTFT and TPOT p50/p99.

usage: pd_vs_colocated.py DEEPINFER MODEL_DIR [--long-prompt 900] [--short-prompt 32] [--long-output 48]
                          [--short-output 2] [--seconds 20] [--threads 1]

Two deployments of the same checkpoint, run one after the other with the same workload:
  colocated: one `serve` (--threads 2T by default: the same cores as P + D);
  P/D:       `serve --role prefill` + `serve --role decode` (T threads each) behind `route --prefill --decode`.
Workload, concurrently for --seconds: one client loops long-prompt/short-output requests (the prefill
load), one client loops short-prompt/long-output streaming requests (the decode traffic whose TPOT we
measure). TTFT and TPOT (mean gap between streamed tokens after the first) are reported for the decode
traffic, p50/p99. P/D gives the decode server's cores to decoding only, so TPOT p99 should drop when the
machine has cores for both servers; on a 2-core shared machine the two deployments compete for the same
cores and the figure says little (the report prints the core count).
"""
import argparse
import json
import os
import random
import signal
import subprocess
import threading
import time
import urllib.request

from pd_processes import start  # bench/pd/, beside this script


def stream_completion(base, tokens, max_tokens):
    body = json.dumps({"model": "m", "prompt": tokens, "max_tokens": max_tokens, "stream": True,
                       "temperature": 0}).encode()
    req = urllib.request.Request(base + "/v1/completions", data=body, headers={"content-type": "application/json"})
    t0 = time.time()
    stamps = []
    with urllib.request.urlopen(req, timeout=300) as res:
        for raw in res:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                ev = json.loads(line[6:])
                if ev.get("choices") and ev["choices"][0].get("text"):
                    stamps.append(time.time())
    if not stamps:
        return None
    ttft = stamps[0] - t0
    tpot = (stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1 else None
    return ttft, tpot


def pct(values, q):
    v = sorted(x for x in values if x is not None)
    return v[min(len(v) - 1, int(q * len(v)))] * 1000 if v else float("nan")


def run_workload(base, a):
    rng = random.Random(0)
    stop = time.time() + a.seconds
    decode_stats = []

    def prefill_load():
        i = 0
        while time.time() < stop:
            i += 1
            stream_completion(base, [1000 + (i * 7919 + k * 13) % 100000 for k in range(a.long_prompt)],
                              a.short_output)

    def decode_traffic():
        while time.time() < stop:
            toks = [rng.randrange(1000, 100000) for _ in range(a.short_prompt)]
            r = stream_completion(base, toks, a.long_output)
            if r:
                decode_stats.append(r)

    threads = [threading.Thread(target=prefill_load), threading.Thread(target=decode_traffic)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ttft = [s[0] for s in decode_stats]
    tpot = [s[1] for s in decode_stats]
    return len(decode_stats), pct(ttft, 0.5), pct(ttft, 0.99), pct(tpot, 0.5), pct(tpot, 0.99)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("deepinfer")
    ap.add_argument("model")
    ap.add_argument("--long-prompt", type=int, default=900)
    ap.add_argument("--short-prompt", type=int, default=32)
    ap.add_argument("--long-output", type=int, default=48)
    ap.add_argument("--short-output", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--threads", type=int, default=1, help="threads of each P/D server")
    ap.add_argument("--colocated-threads", type=int, default=0,
                    help="threads of the colocated server (0 = 2 x --threads: the same cores as P + D)")
    a = ap.parse_args()
    colocated_threads = a.colocated_threads or 2 * a.threads
    serve = [a.deepinfer, "serve", "--model", a.model, "--port", "0", "--threads", str(a.threads),
             "--max-model-len", "2048", "--kv-cache-mib", "64", "--no-chat-page"]
    secret = os.path.join("/tmp", f"pd_bench_{os.getpid()}.secret")
    with open(secret, "wb") as f:
        f.write(os.urandom(32))
    results = {}
    procs = []
    try:
        colocated = list(serve)
        colocated[colocated.index("--threads") + 1] = str(colocated_threads)
        p, url = start(colocated, "colocated")
        procs.append(p)
        results["colocated"] = run_workload(url, a)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
        pp, purl = start(serve + ["--role", "prefill", "--kv-transfer-secret-file", secret,
                                  "--kv-decode-peer", "127.0.0.1"], "prefill")
        dp, durl = start(serve + ["--role", "decode", "--kv-transfer-secret-file", secret,
                                  "--kv-prefill-peer", purl], "decode")
        rp, rurl = start([a.deepinfer, "route", "--port", "0", "--policy", "round_robin", "--prefill", purl,
                          "--decode", durl], "router")
        procs += [pp, dp, rp]
        time.sleep(1.0)
        results["P/D"] = run_workload(rurl, a)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)
        os.unlink(secret)
    print(f"cores: {os.cpu_count()}; colocated --threads {colocated_threads}, P and D --threads {a.threads} each; "
          f"long prompt {a.long_prompt} -> {a.short_output} tokens (prefill load) next to "
          f"short prompt {a.short_prompt} -> {a.long_output} tokens (measured), {a.seconds:.0f} s each")
    print(f"{'deployment':<10} {'n':>4} {'TTFT p50 ms':>12} {'TTFT p99 ms':>12} {'TPOT p50 ms':>12} {'TPOT p99 ms':>12}")
    for k, (n, t50, t99, p50, p99) in results.items():
        print(f"{k:<10} {n:>4} {t50:>12.1f} {t99:>12.1f} {p50:>12.2f} {p99:>12.2f}")
    c, d = results["colocated"], results["P/D"]
    print(f"TPOT p99 ratio P/D / colocated: {d[4] / c[4]:.2f}")


if __name__ == "__main__":
    main()
