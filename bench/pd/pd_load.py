#!/usr/bin/env python3
"""A prefill pool under load (issue 15): one decode server behind the router with 1, then N prefill servers,
the same closed-loop workload against each; throughput, TTFT p50/p99 and how the router spread the transfers.

usage: pd_load.py DEEPINFER MODEL_DIR [--prefill-counts 1,2] [--clients 4] [--seconds 20] [--prompt 900]
                  [--output 8] [--threads 1] [--prefill-args "..."] [--route-args "..."]

For each prefill count: `serve --role prefill` x N and one `serve --role decode` (--threads T each) behind
`route --policy least_load --prefill ... --decode ...` (the least loaded prefill server first; --route-args for
e.g. --pd-max-prefill-open);
--clients closed-loop clients each send streaming requests of a prompt of its own (--prompt tokens, every
request moves its KV) and --output tokens, for --seconds. Reported per deployment: requests completed and
per second, TTFT p50/p99 (client side), the transfers each prefill server did (from its /metrics), and the
decode server's imports, fallbacks (prefilled on D) and retries. On a machine with fewer cores than servers
x threads the servers share cores and more prefill servers cannot add compute: the report prints the core
count; the spread and the fallbacks are the part that means something there.
"""
import argparse
import json
import os
import shlex
import signal
import threading
import time
import urllib.request

from pd_processes import metrics, start  # bench/pd/, beside this script


def stream_ttft(base, tokens, max_tokens):
    body = json.dumps({"model": "m", "prompt": tokens, "max_tokens": max_tokens, "stream": True,
                       "temperature": 0}).encode()
    req = urllib.request.Request(base + "/v1/completions", data=body, headers={"content-type": "application/json"})
    t0 = time.time()
    first = None
    with urllib.request.urlopen(req, timeout=300) as res:
        for raw in res:
            line = raw.decode().strip()
            if first is None and line.startswith("data: ") and line != "data: [DONE]":
                ev = json.loads(line[6:])
                if ev.get("choices") and ev["choices"][0].get("text"):
                    first = time.time() - t0
    return first


def pct(values, q):
    v = sorted(x for x in values if x is not None)
    return v[min(len(v) - 1, int(q * len(v)))] * 1000 if v else float("nan")


def run_load(r_url, a, seed):
    stop = time.time() + a.seconds
    ttfts, lock = [], threading.Lock()

    def client(c):
        k = 0
        while time.time() < stop:
            k += 1
            tokens = [1000 + (seed * 7919 + c * 104729 + k * 997 + j * 31) % 120000 for j in range(a.prompt)]
            t = stream_ttft(r_url, tokens, a.output)
            with lock:
                ttfts.append(t)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ttfts, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("deepinfer")
    ap.add_argument("model")
    ap.add_argument("--prefill-counts", default="1,2")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--prompt", type=int, default=900)
    ap.add_argument("--output", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prefill-args", default="")
    ap.add_argument("--route-args", default="")
    a = ap.parse_args()
    serve = [a.deepinfer, "serve", "--model", a.model, "--host", "127.0.0.1", "--port", "0", "--threads",
             str(a.threads), "--max-model-len", "2048", "--kv-cache-mib", "256", "--no-chat-page"]
    secret = os.path.join("/tmp", f"pd_load_{os.getpid()}.secret")
    with open(secret, "wb") as f:
        f.write(os.urandom(32))
    print(f"cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}; {a.clients} clients x "
          f"({a.prompt}-token prompt -> {a.output} tokens, streaming), {a.seconds:.0f} s per deployment; "
          f"--threads {a.threads} per server; prefill args '{a.prefill_args}', route args '{a.route_args}'")
    print(f"{'prefill servers':>15} {'requests':>9} {'req/s':>7} {'TTFT p50 ms':>12} {'TTFT p99 ms':>12} "
          f"{'transfers per P':>20} {'imports':>8} {'fallbacks':>10} {'retries':>8}")
    try:
        for seed, n in enumerate(int(x) for x in a.prefill_counts.split(",")):
            procs = []
            try:
                ps = []
                for i in range(n):
                    p, url = start(serve + ["--role", "prefill", "--kv-transfer-secret-file", secret,
                                            "--kv-decode-peer", "127.0.0.1", *shlex.split(a.prefill_args)],
                                   f"prefill{i}")
                    procs.append(p)
                    ps.append(url)
                dp, d_url = start(serve + ["--role", "decode", "--kv-transfer-secret-file", secret,
                                           *[x for u in ps for x in ("--kv-prefill-peer", u)]], "decode")
                procs.append(dp)
                rp, r_url = start([a.deepinfer, "route", "--host", "127.0.0.1", "--port", "0", "--policy",
                                   "least_load", "--decode", d_url,
                                   *[x for u in ps for x in ("--prefill", u)], "--health-period-ms", "200",
                                   *shlex.split(a.route_args)], "router")
                procs.append(rp)
                time.sleep(1.5)  # the router's health poll sees every prefill server
                ttfts, wall = run_load(r_url, a, seed)
                per_p = [int(metrics(u)["deepinfer:pd_prefill_transfers_total"]) for u in ps]
                dm = metrics(d_url)
                print(f"{n:>15} {len(ttfts):>9} {len(ttfts) / wall:>7.2f} {pct(ttfts, 0.5):>12.1f} "
                      f"{pct(ttfts, 0.99):>12.1f} {str(per_p):>20} {int(dm['deepinfer:pd_imports_total']):>8} "
                      f"{int(dm['deepinfer:pd_fallbacks_total']):>10} {int(dm['deepinfer:pd_retries_total']):>8}",
                      flush=True)
            finally:
                for p in reversed(procs):
                    if p.poll() is None:
                        p.send_signal(signal.SIGTERM)
                for p in procs:
                    try:
                        p.wait(timeout=30)
                    except Exception:  # noqa: BLE001 - a stuck server is killed
                        p.kill()
    finally:
        os.unlink(secret)


if __name__ == "__main__":
    main()
