#!/usr/bin/env python3
"""`mpirun -np 2 deepinfer serve --expert-parallel` behind `deepinfer route` answers like one process.

Usage: ep_serve_test.py DEEPINFER MPIRUN WORKDIR. One rank per HTTP front (--port + rank), each with
its own engine; the ranks step in lockstep, an idle rank serving the others' experts. Concurrent
greedy completions through the router (round robin over both ranks) and to each rank directly must
give the texts a single-process server gives; so must a deployment with live EPLB moving experts
between the ranks while it serves, and one drafting with MTP. A rank stopped first keeps serving its experts until the other
stops, and then all exit 0. Every server is stopped at the end.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

DEEPINFER, MPIRUN, WORK = sys.argv[1:4]
PROMPTS = ["Hello there", "Bonjour le monde", "Third prompt is longer than the others", "4", "Un, deux, trois"]
WAIT_S = 60


def free_ports(n):
    """n consecutive free loopback ports (checked by binding; tolerable race)."""
    for base in range(20000 + os.getpid() % 20000, 65000 - n, 7):
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    sys.exit("FAIL: no free ports")


def wait_ready(port, proc):
    deadline = time.time() + WAIT_S
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"FAIL: server exited early (rc {proc.returncode}):\n{proc.stderr.read()}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return
        except Exception:
            time.sleep(0.1)
    sys.exit(f"FAIL: nothing answered on port {port} within {WAIT_S} s")


def complete_all(ports):
    out = [None] * len(PROMPTS)

    def one(i):
        body = json.dumps({"model": "m", "prompt": PROMPTS[i], "max_tokens": 8, "temperature": 0}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{ports[i % len(ports)]}/v1/completions", body,
                                     {"content-type": "application/json"})
        out[i] = json.loads(urllib.request.urlopen(req, timeout=WAIT_S).read())["choices"][0]["text"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if any(o is None for o in out):
        sys.exit(f"FAIL: a request failed: {out}")
    return out


def parse_metrics(text):
    """Prometheus text -> {"name{labels}": value}."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def start_ep(procs, model, base, *extra):
    """mpirun -np 2 serve --expert-parallel on ports base and base + 1 (added to procs), once both answer."""
    proc = subprocess.Popen([MPIRUN, "--oversubscribe", "-np", "2", DEEPINFER, "serve", "--expert-parallel",
                             "--model", model, "--port", str(base), "--threads", "1", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    procs.append(proc)
    wait_ready(base, proc)
    wait_ready(base + 1, proc)
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    model = os.path.join(WORK, "model")
    subprocess.run([DEEPINFER, "make-model", "--preset", "tiny", "--seed", "0", "--out", model], check=True,
                   capture_output=True, timeout=WAIT_S)
    procs = []
    try:
        port = free_ports(1)
        single = subprocess.Popen([DEEPINFER, "serve", "--model", model, "--port", str(port), "--threads", "1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(single)
        wait_ready(port, single)
        want = complete_all([port])
        stop(single)

        base = free_ports(3)
        ep = start_ep(procs, model, base)
        got = complete_all([base, base + 1])
        if got != want:
            sys.exit(f"FAIL: ranks directly: {got}\nsingle process: {want}")
        # One more request to rank 0 alone: rank 1 has nothing and must serve it with idle steps.
        body = json.dumps({"model": "m", "prompt": PROMPTS[0], "max_tokens": 4, "temperature": 0}).encode()
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{base}/v1/completions", body,
                                                      {"content-type": "application/json"}), timeout=WAIT_S).read()
        # Per-rank metrics: every routed row computed once, by a rank holding its expert; bytes moved.
        metrics = [parse_metrics(urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=10).read().decode())
                   for p in (base, base + 1)]
        sent = sum(m.get("deepinfer:ep_rows_sent_total", 0) for m in metrics)
        computed = sum(v for m in metrics for k, v in m.items() if k.startswith("deepinfer:ep_expert_rows_total{"))
        if sent == 0 or sent != computed:
            sys.exit(f"FAIL metrics: {sent} routed rows sent, {computed} computed: {metrics}")
        if any(m.get('deepinfer:ep_alltoall_bytes_total{direction="sent"}', 0) <= 0 for m in metrics):
            sys.exit(f"FAIL metrics: no all-to-all bytes: {metrics}")
        if metrics[1].get("deepinfer:ep_idle_steps_total", 0) < 4:
            sys.exit(f"FAIL metrics: rank 1 ran no idle steps for rank 0's request: {metrics[1]}")
        router = subprocess.Popen([DEEPINFER, "route", "--model", model, "--port", str(base + 2), "--policy",
                                   "round_robin", "--worker", f"http://127.0.0.1:{base}", "--worker",
                                   f"http://127.0.0.1:{base + 1}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(router)
        wait_ready(base + 2, router)
        got = complete_all([base + 2])
        if got != want:
            sys.exit(f"FAIL: through the router: {got}\nsingle process: {want}")

        # Live EPLB: every 2 steps the ranks may re-place the experts and move weights mid-request.
        stop(router)
        stop(ep)
        base_live = free_ports(2)
        live = start_ep(procs, model, base_live, "--ep-redundant-experts", "2", "--ep-rebalance-interval", "2",
                        "--ep-rebalance-min-gain", "0")
        got = complete_all([base_live, base_live + 1])
        if got != want:
            sys.exit(f"FAIL: live EPLB: {got}\nsingle process: {want}")
        metrics = [parse_metrics(urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=10).read().decode())
                   for p in (base_live, base_live + 1)]
        sent = sum(m.get("deepinfer:ep_rows_sent_total", 0) for m in metrics)
        computed = sum(v for m in metrics for k, v in m.items() if k.startswith("deepinfer:ep_expert_rows_total{"))
        rebalances = {m.get("deepinfer:ep_eplb_rebalances_total", 0) for m in metrics}
        received = sum(m.get("deepinfer:ep_eplb_experts_received_total", 0) for m in metrics)
        if sent == 0 or sent != computed or len(rebalances) != 1 or min(rebalances) < 1 or received < 1:
            sys.exit(f"FAIL live EPLB metrics: {sent} rows sent, {computed} computed, rebalances {rebalances}, "
                     f"{received} experts received: {metrics}")
        stop(live)

        # Speculative decoding (MTP drafts) under EP: MTP forwards meet in their own ticks, ranks
        # without drafts running idle MTP steps. Greedy output is unchanged, and drafts were verified.
        base_spec = free_ports(2)
        spec = start_ep(procs, model, base_spec, "--speculative-config",
                        json.dumps({"method": "mtp", "num_speculative_tokens": 2}))
        # Each rank its own requests one after the other (the engine drafts for a lone request),
        # both ranks at once: one rank's MTP forwards meet the other's main and idle ones.
        got = [None] * len(PROMPTS)

        def one_rank(rank):
            for i in range(rank, len(PROMPTS), 2):
                body = json.dumps({"model": "m", "prompt": PROMPTS[i], "max_tokens": 8, "temperature": 0}).encode()
                req = urllib.request.Request(f"http://127.0.0.1:{base_spec + rank}/v1/completions", body,
                                             {"content-type": "application/json"})
                got[i] = json.loads(urllib.request.urlopen(req, timeout=WAIT_S).read())["choices"][0]["text"]

        threads = [threading.Thread(target=one_rank, args=(r,)) for r in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if got != want:
            sys.exit(f"FAIL: MTP drafts under EP: {got}\nsingle process: {want}")
        metrics = [parse_metrics(urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=10).read().decode())
                   for p in (base_spec, base_spec + 1)]
        drafts = [m.get("vllm:spec_decode_num_draft_tokens_total", 0) for m in metrics]
        if min(drafts) <= 0:
            sys.exit(f"FAIL: MTP drafts under EP: draft tokens per rank {drafts}")
        stop(spec)

        # Shutdown is collective: a rank told to stop first closes its front but keeps serving its
        # experts until the other stops too; then both exit 0 (and so does mpirun).
        base_stop = free_ports(2)
        ep2 = start_ep(procs, model, base_stop)
        with open(f"/proc/{ep2.pid}/task/{ep2.pid}/children") as f:
            ranks = [int(p) for p in f.read().split()]
        if len(ranks) != 2:
            sys.exit(f"FAIL: mpirun has {len(ranks)} children, not 2 ranks")
        os.kill(ranks[0], signal.SIGTERM)
        deadline = time.time() + WAIT_S
        answering = []
        while time.time() < deadline and len(answering) != 1:
            answering = []
            for p in (base_stop, base_stop + 1):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{p}/health", timeout=1)
                    answering.append(p)
                except Exception:
                    pass
            time.sleep(0.1)
        if len(answering) != 1:
            sys.exit(f"FAIL: after SIGTERM to one rank, fronts answering: {answering}")
        got = complete_all(answering)
        if got != want:
            sys.exit(f"FAIL: the rank left running: {got}\nsingle process: {want}")
        os.kill(ranks[1], signal.SIGTERM)
        try:
            rc = ep2.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            sys.exit("FAIL: the ranks did not stop after both got SIGTERM")
        if rc != 0:
            sys.exit(f"FAIL: mpirun exited {rc} after both ranks got SIGTERM:\n{ep2.stderr.read()}")
    finally:
        for p in reversed(procs):
            stop(p)
    print("ep_serve: 2 ranks, directly, behind deepinfer route and with live EPLB, answer like one process")


if __name__ == "__main__":
    main()
