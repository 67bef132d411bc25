#!/usr/bin/env python3
"""What P/D adds to one request (issue 15, item 1): latency through router + prefill + decode server
against the same request on a plain server, and the put rate of the transfers, in the same run.

usage: pd_latency.py DEEPINFER MODEL_DIR [--prompts 200,960] [--requests 10] [--transport TLS]
                     [--threads 1] [--prefill-args "--max-step-tokens 128 --kv-stream-puts false"]
                     [--decode-args "--kv-shared-memory false"] [--kv-cache-mib 64] [--warmup 0]

A plain `serve`, and `serve --role prefill` + `serve --role decode` behind `route --prefill --decode`
(all on loopback, --threads T each). For each prompt length: --requests sequential non-streaming
requests, each a prompt of its own (every P/D request moves its KV: nothing is cached on the decode
server), max_tokens 2, greedy, to both; the plain server gets the same prompts first (a warm-up
request each side is not counted). Reported per length: median latency plain / P/D, the difference
(what P/D adds: the router hop, the call to P, the handshake, the puts, the landing + restore on D)
and the ratio; and, from the servers' own counters over the whole run, P's put rate (bytes put /
put + flush seconds) against this machine's memory copy rate measured at the end of the same run, and D's
mean import time (lease start to kv_written). --transport is passed as
--kv-transport (UCX_TLS syntax; empty: UCX's choice). Any binary: run it with the binary before a
change and after it for a before/after pair (the report prints the binary). --prefill-args go to the
prefill server only (e.g. a smaller prefill chunk, so its puts can overlap the rest of its prefill, and
--kv-stream-puts false for the baseline without that overlap); --decode-args to the decode server only
(e.g. --kv-shared-memory false: every page over UCX instead of memcpy into its shared pool). The report
says how many of the bytes went through the shared segment. --warmup N: N requests of the longest prompt
first, not counted (neither in the latencies nor in the rates, which come from the servers' counters
after them): with a small --kv-cache-mib every pool page is then written once before the measured
requests, so first-touch page faults (a fresh page is allocated and zeroed when first written, by P's
memcpy into a shared pool or by D's UCX receive) are left out — the steady state of a long-running
decode server, whose pool pages are all in use.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import time
import urllib.request

from pd_processes import metrics, start  # bench/pd/, beside this script


def completion(base, tokens):
    body = json.dumps({"model": "m", "prompt": tokens, "max_tokens": 2, "temperature": 0}).encode()
    req = urllib.request.Request(base + "/v1/completions", data=body, headers={"content-type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as res:
        text = json.loads(res.read().decode())["choices"][0]["text"]
    return time.perf_counter() - t0, text


def copy_gbps(mib=64, repeats=5):
    """This machine's memory copy rate now (a buffer copy, memcpy underneath, one thread): the yardstick
    for the put rate."""
    src = bytearray(os.urandom(1 << 20)) * mib
    dst = bytearray(len(src))
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst[:] = src
        rates.append(len(src) / (time.perf_counter() - t0) / 1e9)
    return statistics.median(rates)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("deepinfer")
    ap.add_argument("model")
    ap.add_argument("--prompts", default="200,960")
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--transport", default="")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prefill-args", default="")
    ap.add_argument("--decode-args", default="")
    ap.add_argument("--kv-cache-mib", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=0)
    a = ap.parse_args()
    secret = "/tmp/pd_latency.secret"
    with open(secret, "wb") as f:
        f.write(os.urandom(32))
    common = ["serve", "--model", a.model, "--host", "127.0.0.1", "--port", "0", "--threads", str(a.threads),
              "--max-model-len", "1024", "--kv-cache-mib", str(a.kv_cache_mib), "--no-chat-page"]
    transport = ["--kv-transport", a.transport] if a.transport else []
    procs = []
    try:
        plain_p, plain = start([a.deepinfer, *common], "plain")
        procs.append(plain_p)
        pp, p_url = start([a.deepinfer, *common, "--role", "prefill", "--kv-transfer-secret-file", secret,
                           "--kv-decode-peer", "127.0.0.1", *transport, *shlex.split(a.prefill_args)], "prefill")
        procs.append(pp)
        dp, d_url = start([a.deepinfer, *common, "--role", "decode", "--kv-transfer-secret-file", secret,
                           "--kv-prefill-peer", p_url, *transport, *shlex.split(a.decode_args)], "decode")
        procs.append(dp)
        rp, r_url = start([a.deepinfer, "route", "--host", "127.0.0.1", "--port", "0", "--policy", "round_robin", "--decode", d_url,
                           "--prefill", p_url], "router")
        procs.append(rp)
        time.sleep(1.0)
        print(f"binary {a.deepinfer}; transport {a.transport or 'UCX default'}; prefill args '{a.prefill_args}'; "
              f"decode args '{a.decode_args}'; "
              f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
        k = 0
        lengths = [int(x) for x in a.prompts.split(",")]
        for _ in range(a.warmup):
            k += 1
            tokens = [1000 + (k * 997 + j * 31) % 120000 for j in range(max(lengths))]
            completion(r_url, tokens)
        pm0, dm0 = metrics(p_url), metrics(d_url)
        for n in lengths:
            plain_s, pd_s = [], []
            for i in range(a.requests + 1):
                k += 1
                tokens = [1000 + (k * 997 + j * 31) % 120000 for j in range(n)]
                ts, want = completion(plain, tokens)
                tp, got = completion(r_url, tokens)
                if got != want:
                    raise SystemExit(f"P/D answer differs for prompt {k}")
                if i > 0:
                    plain_s.append(ts)
                    pd_s.append(tp)
            mp, md = statistics.median(plain_s), statistics.median(pd_s)
            print(f"{n:5d}-token prompt, max_tokens 2, {a.requests} requests: plain {mp * 1e3:7.1f} ms, "
                  f"P/D {md * 1e3:7.1f} ms (median); P/D adds {(md - mp) * 1e3:6.1f} ms = {md / mp:.2f} x plain")
        pm1, dm1 = metrics(p_url), metrics(d_url)
        pm = {key: v - pm0.get(key, 0) for key, v in pm1.items()}  # the measured requests only
        dm = {key: v - dm0.get(key, 0) for key, v in dm1.items()}
        put_bytes, put_s = pm["deepinfer:pd_transfer_bytes_total"], pm["deepinfer:pd_transfer_seconds_total"]
        imports = dm["deepinfer:pd_imports_total"]
        transfers = max(pm["deepinfer:pd_prefill_transfers_total"], 1)
        print(f"per transfer (all lengths): P prefill (queue + compute + outbox) "
              f"{pm['deepinfer:pd_prefill_seconds_total'] / transfers * 1e3:.1f} ms, P puts + flush after it "
              f"{put_s / transfers * 1e3:.2f} ms ({pm.get('deepinfer:pd_puts_total', 0) / transfers:.1f} puts; "
              f"{pm.get('deepinfer:pd_blocks_put_early_total', 0) / transfers:.1f} blocks taken from the outbox during "
              f"the prefill; {pm.get('deepinfer:pd_blocks_written_by_layer_total', 0) / transfers:.1f} blocks copied "
              f"layer by layer as P's forwards ran), "
              f"D import (lease start to kv_written) "
              f"{dm['deepinfer:pd_import_seconds_total'] / max(imports, 1) * 1e3:.1f} ms")
        shared = pm.get("deepinfer:pd_shared_bytes_total", 0)
        print(f"prefill side: {put_bytes / 1e6:.1f} MB written ({shared / max(put_bytes, 1) * 100:.0f}% by memcpy into "
              f"the decode server's shared pool, the rest by UCX puts), {put_s * 1e3:.1f} ms of writes + flush after "
              f"the prefills = {put_bytes / max(put_s, 1e-9) / 1e9:.3f} GB/s; decode side: {int(imports)} imports, mean import "
              f"{dm['deepinfer:pd_import_seconds_total'] / max(imports, 1) * 1e3:.1f} ms, fallbacks "
              f"{int(dm['deepinfer:pd_fallbacks_total'])}")
        copy = copy_gbps()
        rate = put_bytes / max(put_s, 1e-9) / 1e9
        print(f"memory copy on this machine now: {copy:.2f} GB/s (1 thread, 64 MiB, median of 5); "
              f"write rate / copy = {rate / copy:.3f}" + (" (the put time counts only the tail after each prefill "
                                                          "with --kv-stream-puts)" if pm.get(
                                                              'deepinfer:pd_blocks_put_early_total', 0) else ""))
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
