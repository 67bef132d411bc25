#!/usr/bin/env python3
"""Prefill/decode disaggregation with real processes on loopback (docs/pd.md).

usage: pd_e2e_test.py DEEPINFER WORKDIR CASE
CASE: equal | wrong_secret | wrong_model | kill_prefill | lease_expiry | cancel | conditional | kill_decode |
      two_prefill | prefill_affinity | api_key | disk_tiers | prefill_busy | prefill_queue | v4

A prefill server (serve --role prefill), a decode server (serve --role decode) and `deepinfer route
--prefill P --decode D` against one plain `serve` on the same tiny V3 checkpoint (the server_tiny_model
fixture): the same tokens for greedy and seeded sampling, stream and not. The KV really moves (the
decode server counts imports and restored tokens, the prefill server the bytes it put). Failures: another
secret is refused with a log line naming the authentication failure; a prefill server that is frozen
and then killed, or one that outlives the decode server's lease, makes the decode server prefill the
request itself; a client that hangs up during the transfer leaves nothing behind. V4 (case v4, the
server_tiny_v4_model fixture): the compressed and indexer pages move, the window ring and compressor
state are rebuilt on the decode server by SWA bounded replay, as on any prefix-cache hit; so the decode
server's answer is compared with a plain server's answer to the same request on a prefix-cache hit. After every case the KV
usage, the leases and the landed blocks of every server are back to 0. Every wait is bounded.
"""
import atexit
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

DEEPINFER, WORKDIR, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
MODEL = os.path.join(WORKDIR, "tiny_v3")
BLOCK = 64
MODEL_OVERRIDE = None  # cases v4 and v41: their tiny checkpoint


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Proc:
    """A deepinfer process whose stderr is collected (for log checks) and stdout parsed for the port."""

    def __init__(self, args, name):
        self.name = name
        self.proc = subprocess.Popen([DEEPINFER] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr_lines = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                time.sleep(0.2)
                fail(f"{name} exited: " + "".join(self.stderr_lines[-20:]))
            if "listening on http://127.0.0.1:" in line:
                self.port = int(line.split("127.0.0.1:")[1].split()[0])
                break
        if self.port is None:
            self.proc.kill()
            fail(f"{name} did not start")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def log(self):
        return "".join(self.stderr_lines)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                fail(f"{self.name} did not stop within 30 s")


def serve(name, *extra, model=None):
    return Proc(["serve", "--model", model or MODEL_OVERRIDE or MODEL, "--host", "127.0.0.1", "--port", "0", "--threads", "1",
                 "--max-model-len", "1024", "--kv-cache-mib", "8", "--no-chat-page", *extra], name)


def secret(name, seed):
    # One file per test process (ctest runs cases side by side in one WORKDIR), written whole before
    # a server can read it, and removed at exit.
    path = os.path.join(WORKDIR, f"pd_{CASE}_{os.getpid()}_{name}.secret")
    with open(path + ".tmp", "wb") as f:
        f.write(bytes((seed * 31 + i * 7) % 256 for i in range(32)))
    os.replace(path + ".tmp", path)
    atexit.register(lambda: os.path.exists(path) and os.remove(path))
    return path


def post(base, path, body, timeout=60):
    req = urllib.request.Request(base + path, method="POST", data=json.dumps(body).encode())
    req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metrics(proc):
    with urllib.request.urlopen(proc.url() + "/metrics", timeout=10) as res:
        text = res.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def prompt(i, n):
    return [1000 + (i * 997 + k * 31) % 120000 for k in range(n)]


def completion(base, i, n, sampling, stream=False, max_tokens=12):
    body = {"model": "tiny", "prompt": prompt(i, n), "max_tokens": max_tokens, "stream": stream, **sampling}
    status, text = post(base, "/v1/completions", body)
    check(status == 200, f"completion {i} ({n} tokens) via {base}: {status} {text[:300]}")
    if not stream:
        j = json.loads(text)
        return j["choices"][0]["text"], j["usage"]
    parts = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            ev = json.loads(line[6:])
            if ev.get("choices"):
                parts.append(ev["choices"][0].get("text", ""))
    return "".join(parts), None


def wait_for(cond, what, timeout=30, detail=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    fail(f"timed out waiting for {what}" + (f": {detail()}" if detail else ""))


def expect_nothing_held(*procs):
    """KV usage, leases and landed blocks back to 0 on every server (bounded wait)."""
    for p in procs:
        def idle():
            m = metrics(p)
            return (m.get("deepinfer:kv_cache_usage_perc", 0) == 0 and m.get("deepinfer:pd_leased_blocks", 0) == 0
                    and m.get("deepinfer:pd_lent_blocks", 0) == 0 and m.get("deepinfer:num_requests_running", 0) == 0
                    and m.get('deepinfer:kv_tier_entries{tier="pd-outbox"}', 0) == 0
                    and m.get("deepinfer:pd_prefill_transfers_running", 0) == 0)
        wait_for(idle, f"{p.name} to hold no KV",
                 detail=lambda: {k: v for k, v in metrics(p).items() if "pd_" in k or "usage" in k or "running" in k})


class Cluster:
    def __init__(self, p_secret, d_secret, d_extra=(), route_extra=(), p_model=None, p_extra=(), n_prefill=1):
        self.ps = [serve(f"prefill{k}" if k else "prefill", "--role", "prefill", "--kv-transfer-secret-file", p_secret,
                         "--kv-decode-peer", "127.0.0.1", *p_extra, model=p_model) for k in range(n_prefill)]
        self.p = self.ps[0]
        peers = [a for p in self.ps for a in ("--kv-prefill-peer", p.url())]
        self.d = serve("decode", "--role", "decode", "--kv-transfer-secret-file", d_secret, *peers, *d_extra)
        self.r = Proc(["route", "--host", "127.0.0.1", "--port", "0", "--policy", "round_robin", "--decode",
                       self.d.url(), *[a for p in self.ps for a in ("--prefill", p.url())],
                       "--health-period-ms", "200", *route_extra], "router")
        wait_for(lambda: ready(self.r), "the router to see the decode server")
        # Until its health poll has seen a prefill server answer, the router lists it last: wait for
        # every one, so the first requests are spread as in steady state.
        healthy = [f'deepinfer_router:prefill_healthy{{prefill="{p.url()}"}}' for p in self.ps]
        wait_for(lambda: all(metrics(self.r).get(h, 0) == 1 for h in healthy),
                 "the router's health poll to see every prefill server",
                 detail=lambda: {h: metrics(self.r).get(h) for h in healthy})

    def stop(self):
        for x in (self.r, self.d, *self.ps):
            x.stop()


def ready(proc):
    try:
        with urllib.request.urlopen(proc.url() + "/ready", timeout=5) as res:
            return res.status == 200
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return False


GREEDY = {"temperature": 0}
SEEDED = {"temperature": 0.9, "top_p": 0.95, "seed": 1234}


def case_equal():
    s = serve("single")
    c = Cluster(secret("a", 1), secret("a", 1))
    try:
        n_transfers = k = 0
        for n in [200, 130, 64, 65, 300]:
            for sampling in (GREEDY, SEEDED):
                for stream in (False, True):
                    k += 1  # a prompt of its own: every request moves its KV (none is cached on D yet)
                    want, _ = completion(s.url(), k, n, sampling, stream)
                    got, usage = completion(c.r.url(), k, n, sampling, stream)
                    check(got == want, f"prompt {k} ({n} tokens) {sampling} stream={stream}: P/D {got!r} != {want!r}")
                    n_transfers += 1 if (n - 1) // BLOCK > 0 else 0
        # A request straight to the decode server naming a prefill server it was not given: prefilled
        # there (the same answer), no connection made, counted and logged.
        body = {"model": "tiny", "prompt": prompt(1, 200), "max_tokens": 12, **GREEDY}
        req = urllib.request.Request(c.d.url() + "/v1/completions", method="POST", data=json.dumps(body).encode())
        req.add_header("content-type", "application/json")
        req.add_header("X-DeepInfer-Prefill-Peer", "http://127.0.0.1:9")
        with urllib.request.urlopen(req, timeout=60) as res:
            direct = json.loads(res.read().decode())["choices"][0]["text"]
        want1, _ = completion(s.url(), 1, 200, GREEDY)
        check(direct == want1, "a request naming an unknown prefill server is answered by the decode server")
        check(metrics(c.d)["deepinfer:pd_unknown_peers_total"] == 1, "the unknown peer was not counted")
        check("is not one of --kv-prefill-peer" in c.d.log(), "the unknown peer was not logged")
        # And the prefill server connects only to the decode hosts it was given.
        status, text = post(c.p.url(), "/v1/pd/prefill",
                            {"request_id": 7, "tokens": [1, 2, 3], "decode_host": "192.0.2.1", "decode_port": 9})
        check(status == 400 and "--kv-decode-peer" in text, f"a foreign decode_host: {status} {text[:200]}")
        check(metrics(c.p)["deepinfer:pd_refused_decode_hosts_total"] == 1, "the foreign decode_host was not counted")
        dm, pm = metrics(c.d), metrics(c.p)
        check(dm["deepinfer:pd_imports_total"] == n_transfers,
              f"decode imported {dm['deepinfer:pd_imports_total']} requests, expected {n_transfers}")
        check(dm["deepinfer:pd_fallbacks_total"] == 0, "a transfer fell back")
        # The pages went straight into the decode server's pool: no transit tier there.
        check(not any('tier="pd-landing"' in k for k in dm), "the decode server has a landing tier")
        # TTFT split on P: its engine queue is timed per transfer, within the prefill time.
        check(pm["deepinfer:pd_prefill_queue_seconds_count"] == pm["deepinfer:pd_prefill_transfers_total"] > 0
              and pm["deepinfer:pd_prefill_queue_seconds_sum"] <= pm["deepinfer:pd_prefill_seconds_sum"],
              "the prefill server's queue time is not observed per transfer within its prefill time")
        check(pm["deepinfer:pd_transfer_bytes_total"] == dm["deepinfer:pd_received_bytes_total"] > 0,
              "the prefill server's bytes put and the decode server's bytes received differ")
        # Same host, same user: every page was copied into the decode server's shared pool, none put
        # over UCX (case ucx_puts runs the UCX path).
        check(dm["deepinfer:pd_shared_pool_bytes"] > 0, "the decode server's pool is not in a shared segment")
        check(pm["deepinfer:pd_blocks_written_by_layer_total"] > 0, "no block was copied layer by layer")
        check(pm["deepinfer:pd_shared_bytes_total"] == pm["deepinfer:pd_transfer_bytes_total"]
              and pm["deepinfer:pd_puts_total"] == 0,
              f"{pm['deepinfer:pd_shared_bytes_total']} of {pm['deepinfer:pd_transfer_bytes_total']} bytes went "
              f"through the shared segment, {pm['deepinfer:pd_puts_total']} UCX puts")
        n_blocks = sum((n - 1) // BLOCK for n in [200, 130, 64, 65, 300]) * 4
        block_bytes = dm["deepinfer:pd_received_bytes_total"] / n_blocks
        check(block_bytes == int(block_bytes), f"received bytes are not {n_blocks} whole blocks")
        # Each request hit its landed blocks in the pool (adopted as its prompt's cached blocks).
        check(dm["deepinfer:prefix_cache_hits_total"] >= n_blocks * BLOCK,
              f"{dm['deepinfer:prefix_cache_hits_total']} prompt tokens hit in the decode server's pool, "
              f"expected the {n_blocks * BLOCK} that landed")
        print(f"equal: {n_transfers} transfers, {n_blocks} blocks of {int(block_bytes)} bytes, "
              f"{int(dm['deepinfer:prefix_cache_hits_total'])} prompt tokens hit in the decode server's pool; "
              f"put {pm['deepinfer:pd_transfer_bytes_total'] / max(pm['deepinfer:pd_transfer_seconds_total'], 1e-9) / 1e9:.3f} GB/s")
        # The decode server's own cache counts: a longer prompt with a cached 3-block prefix moves only
        # its 2 new blocks.
        want, _ = completion(s.url(), 100, 200, GREEDY)
        check(completion(c.r.url(), 100, 200, GREEDY)[0] == want, "prefix prompt differs")
        before = metrics(c.d)
        want, _ = completion(s.url(), 100, 330, GREEDY)
        got, usage = completion(c.r.url(), 100, 330, GREEDY)
        check(got == want, "extended prompt differs")
        after = metrics(c.d)
        moved = after["deepinfer:pd_received_bytes_total"] - before["deepinfer:pd_received_bytes_total"]
        local = after["deepinfer:pd_local_blocks_total"] - before["deepinfer:pd_local_blocks_total"]
        check(local == 3 and moved == 2 * block_bytes, f"extended prompt: {local} blocks local, {moved} bytes moved")
        check(usage["prompt_tokens_details"]["cached_tokens"] == 5 * BLOCK, f"extended prompt usage {usage}")
        # 16 requests at once, 8 in flight: every transfer lands where it belongs.
        jobs = [(1000 + k, 150 + 17 * k, SEEDED if k % 2 else GREEDY) for k in range(16)]
        want = [completion(s.url(), i, n, sp)[0] for i, n, sp in jobs]
        imports_before = metrics(c.d)["deepinfer:pd_imports_total"]
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            got = list(ex.map(lambda j: completion(c.r.url(), *j)[0], jobs))
        check(got == want, f"concurrent P/D answers differ at {[k for k in range(16) if got[k] != want[k]]}")
        check(metrics(c.d)["deepinfer:pd_imports_total"] - imports_before == 16, "not every concurrent request imported")
        # A client request straight to the prefill server is served, and leaves nothing in its outbox
        # (only transfers' blocks are kept there): expect_nothing_held checks the outbox is empty.
        want, _ = completion(s.url(), 2000, 300, GREEDY)
        check(completion(c.p.url(), 2000, 300, GREEDY)[0] == want, "the prefill server's own answer differs")
        expect_nothing_held(c.p, c.d, s)
    finally:
        c.stop()
        s.stop()


def case_wrong_secret():
    c = Cluster(secret("b", 2), secret("c", 3))
    s = serve("single")
    try:
        want, _ = completion(s.url(), 1, 200, GREEDY)
        got, _ = completion(c.r.url(), 1, 200, GREEDY)
        check(got == want, "the refused request was not prefilled on the decode server correctly")
        wait_for(lambda: "refused prefill server" in c.d.log(), "the decode server's refusal line")
        line = [l for l in c.d.log().splitlines() if "refused prefill server" in l][0]
        check("authentic" in line.lower() or "hmac" in line.lower(), f"the refusal does not name the cause: {line}")
        print("wrong_secret: decode logged:", line.strip())
        dm = metrics(c.d)
        check(dm["deepinfer:pd_refusals_total"] == 1 and dm["deepinfer:pd_imports_total"] == 0, "refusal not counted")
        expect_nothing_held(c.p, c.d)
    finally:
        c.stop()
        s.stop()


def case_wrong_model():
    """A prefill server with another checkpoint (same shapes, other weights): refused by fingerprint."""
    other = os.path.join(WORKDIR, "tiny_v3_seed1")
    if not os.path.exists(os.path.join(other, "config.json")):
        subprocess.run([DEEPINFER, "make-model", "--preset", "tiny", "--dtype", "bf16", "--seed", "1", "--out", other],
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
    c = Cluster(secret("a", 1), secret("a", 1), p_model=other)
    s = serve("single")
    try:
        want, _ = completion(s.url(), 1, 200, GREEDY)
        got, _ = completion(c.r.url(), 1, 200, GREEDY)
        check(got == want, "the refused request was not prefilled on the decode server correctly")
        wait_for(lambda: "refused prefill server" in c.d.log(), "the decode server's refusal line")
        line = [l for l in c.d.log().splitlines() if "refused prefill server" in l][0]
        check("another model" in line, f"the refusal does not name the model: {line}")
        print("wrong_model: decode logged:", line.strip())
        check(metrics(c.d)["deepinfer:pd_refusals_total"] == 1, "refusal not counted")
        expect_nothing_held(c.p, c.d)
    finally:
        c.stop()
        s.stop()


def case_kill_prefill():
    """The prefill server freezes with a transfer pending, then dies: the decode server prefills."""
    c = Cluster(secret("a", 1), secret("a", 1))
    s = serve("single")
    try:
        want, _ = completion(s.url(), 2, 250, SEEDED)
        c.p.proc.send_signal(signal.SIGSTOP)
        threading.Timer(1.0, c.p.proc.kill).start()
        t0 = time.time()
        got, _ = completion(c.r.url(), 2, 250, SEEDED)
        check(got == want, "after the prefill server died the answer differs")
        check(time.time() - t0 < 20, "the decode server took too long to give up on a dead prefill server")
        dm = metrics(c.d)
        check(dm["deepinfer:pd_fallbacks_total"] == 1, "the failed transfer was not counted as a fallback")
        print(f"kill_prefill: answered in {time.time() - t0:.2f} s after the prefill server died")
        expect_nothing_held(c.d)
    finally:
        c.stop()
        s.stop()


def case_lease_expiry():
    """A prefill server slower than the lease: the decode server prefills; the late one frees its work."""
    c = Cluster(secret("a", 1), secret("a", 1), d_extra=("--kv-lease-timeout-ms", "1500"))
    s = serve("single")
    try:
        want, _ = completion(s.url(), 3, 200, GREEDY)
        c.p.proc.send_signal(signal.SIGSTOP)
        t0 = time.time()
        got, _ = completion(c.r.url(), 3, 200, GREEDY)
        elapsed = time.time() - t0
        c.p.proc.send_signal(signal.SIGCONT)
        check(got == want, "after the lease ran out the answer differs")
        check(1.4 < elapsed < 15, f"answered after {elapsed:.2f} s, expected just past the 1.5 s lease")
        dm = metrics(c.d)
        check(dm["deepinfer:pd_fallbacks_total"] == 1, "the expired lease was not counted as a fallback")
        wait_for(lambda: "lease of 1500 ms ran out" in c.d.log(), "the lease expiry line",
                 detail=lambda: c.d.log()[-2000:])
        # The prefill server, thawed, finds the decode side gone: it fails the transfer and holds nothing.
        wait_for(lambda: metrics(c.p)["deepinfer:pd_prefill_failures_total"] >= 1, "the late prefill to fail",
                 detail=lambda: c.p.log()[-2000:])
        print(f"lease_expiry: answered in {elapsed:.2f} s")
        expect_nothing_held(c.p, c.d)
        got2, _ = completion(c.r.url(), 4, 200, GREEDY)  # and the pair still works
        check(metrics(c.d)["deepinfer:pd_imports_total"] == 1, "the next request was not disaggregated")
        expect_nothing_held(c.p, c.d)
    finally:
        c.stop()
        s.stop()


def case_cancel():
    """The client hangs up while the decode server waits for the KV: nothing is left on either side."""
    c = Cluster(secret("a", 1), secret("a", 1))
    try:
        c.p.proc.send_signal(signal.SIGSTOP)
        host, port = "127.0.0.1", c.r.port
        body = json.dumps({"model": "tiny", "prompt": prompt(5, 260), "max_tokens": 50, "stream": True}).encode()
        sock = socket.create_connection((host, port), timeout=10)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                     + f"content-length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(1.0)
        sock.close()
        wait_for(lambda: "client went away" in c.d.log(), "the decode server to drop the transfer")
        c.p.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: metrics(c.p)["deepinfer:pd_prefill_failures_total"] >= 1, "the prefill side to give up")
        expect_nothing_held(c.p, c.d)
        print("cancel: both sides let go")
    finally:
        c.stop()


def shared_pool_maps(proc):
    """The lines of proc's memory map that map a decode server's shared KV pool (a memfd)."""
    with open(f"/proc/{proc.proc.pid}/maps") as f:
        return [line for line in f if "memfd:deepinfer-kv-pool" in line]


def case_kill_decode():
    """The decode server dies while the prefill server waits for its grant: P gives up well before the
    lease it was told (30 s) and holds nothing — nor its map of the dead server's shared pool (which
    would keep that memory alive)."""
    c = Cluster(secret("a", 1), secret("a", 1))
    try:
        completion(c.r.url(), 6, 260, GREEDY)  # one transfer: P maps D's shared pool
        check(metrics(c.p)["deepinfer:pd_shared_bytes_total"] > 0 and shared_pool_maps(c.p),
              "the prefill server did not map the decode server's shared pool")
        c.p.proc.send_signal(signal.SIGSTOP)  # so D is waiting in its transfer when P starts
        result = {}
        def client():
            try:
                result["status"] = post(c.r.url(), "/v1/completions",
                                        {"model": "tiny", "prompt": prompt(7, 260), "max_tokens": 4}, timeout=60)[0]
            except Exception as e:  # the router may close the connection: any end is fine, a hang is not
                result["status"] = repr(e)
        t = threading.Thread(target=client)
        t.start()
        time.sleep(0.7)
        c.d.proc.send_signal(signal.SIGSTOP)
        c.p.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: metrics(c.p)["deepinfer:pd_prefill_transfers_running"] >= 1, "P to start the transfer")
        time.sleep(0.5)
        t0 = time.time()
        c.d.proc.kill()
        wait_for(lambda: metrics(c.p)["deepinfer:pd_prefill_failures_total"] >= 1, "P to notice the dead decode server",
                 timeout=15, detail=lambda: c.p.log()[-2000:])
        print(f"kill_decode: the prefill server gave up {time.time() - t0:.2f} s after the decode server died")
        t.join(timeout=70)
        check(not t.is_alive(), "the client hung")
        wait_for(lambda: metrics(c.p)["deepinfer:pd_prefill_transfers_running"] == 0, "P's transfer to end")
        expect_nothing_held(c.p)
        wait_for(lambda: not shared_pool_maps(c.p), "P to unmap the dead decode server's pool",
                 detail=lambda: shared_pool_maps(c.p))
    finally:
        c.stop()


def case_ucx_puts():
    """The UCX path: a decode server started with --kv-shared-memory false offers no segment, and a prefill
    server with --kv-shared-memory false does not use one offered; either way every page is put over UCX
    and the answers are the plain server's."""
    s = serve("single")
    try:
        for d_extra, p_extra in ((("--kv-shared-memory", "false"), ()), ((), ("--kv-shared-memory", "false"))):
            c = Cluster(secret("a", 1), secret("a", 1), d_extra=d_extra, p_extra=p_extra)
            try:
                for i, n in enumerate([200, 300]):
                    for sampling in (GREEDY, SEEDED):
                        want, _ = completion(s.url(), 40 + 2 * i + (sampling is SEEDED), n, sampling)
                        got, _ = completion(c.r.url(), 40 + 2 * i + (sampling is SEEDED), n, sampling)
                        check(got == want, f"{d_extra or p_extra}: prompt of {n} tokens: P/D {got!r} != {want!r}")
                pm, dm = metrics(c.p), metrics(c.d)
                check(dm["deepinfer:pd_imports_total"] == 4, f"{d_extra or p_extra}: {dm['deepinfer:pd_imports_total']} imports")
                check(pm["deepinfer:pd_shared_bytes_total"] == 0 and pm["deepinfer:pd_puts_total"] > 0,
                      f"{d_extra or p_extra}: {pm['deepinfer:pd_shared_bytes_total']} bytes shared, "
                      f"{pm['deepinfer:pd_puts_total']} puts")
                # Streaming (the default): the pages were staged layer by layer as P's forwards ran and
                # put from there (P's prompts are new: it computed every granted block).
                sent = 2 * sum((n - 1) // BLOCK for n in [200, 300])
                check(pm["deepinfer:pd_blocks_written_by_layer_total"] == sent,
                      f"{d_extra or p_extra}: {pm['deepinfer:pd_blocks_written_by_layer_total']} of {sent} blocks "
                      f"put layer by layer")
                check((dm["deepinfer:pd_shared_pool_bytes"] > 0) == (not d_extra),
                      f"{d_extra or p_extra}: shared pool bytes {dm['deepinfer:pd_shared_pool_bytes']}")
                check(not shared_pool_maps(c.p), "the prefill server mapped a pool it was not to use")
                expect_nothing_held(c.p, c.d)
            finally:
                c.stop()
    finally:
        s.stop()


def case_conditional():
    """--pd-min-prompt-tokens: short prompts prefill on the decode server, long ones on the prefill server."""
    s = serve("single")
    c = Cluster(secret("a", 1), secret("a", 1), route_extra=("--pd-min-prompt-tokens", "150", "--model", MODEL))
    try:
        for i, n in enumerate([100, 200]):
            want, _ = completion(s.url(), i, n, GREEDY)
            got, _ = completion(c.r.url(), i, n, GREEDY)
            check(got == want, f"prompt of {n} tokens differs")
        dm = metrics(c.d)
        check(dm["deepinfer:pd_imports_total"] == 1, f"{dm['deepinfer:pd_imports_total']} imports, expected 1 (200 only)")
        check(metrics(c.r).get('deepinfer_router:pd_decode_prefills_total{reason="short_prompt"}', 0) == 1,
              "the short prompt was not counted by the router")
        expect_nothing_held(c.p, c.d)
    finally:
        c.stop()
        s.stop()


def case_prefill_busy():
    """route --pd-max-prefill-open 1: while the prefill server has an open P/D request (frozen here, so it stays
    open), the next request goes to the decode server without a prefill peer and is prefilled there; once the
    prefill server is thawed the first request is imported as usual."""
    s = serve("single")
    c = Cluster(secret("a", 1), secret("a", 1), route_extra=("--pd-max-prefill-open", "1"))
    try:
        want1, _ = completion(s.url(), 90, 300, GREEDY)
        want2, _ = completion(s.url(), 91, 300, GREEDY)
        open_gauge = f'deepinfer_router:prefill_open_requests{{prefill="{c.p.url()}"}}'
        c.p.proc.send_signal(signal.SIGSTOP)
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as ex:
                first = ex.submit(completion, c.r.url(), 90, 300, GREEDY)
                wait_for(lambda: metrics(c.r).get(open_gauge, 0) == 1, "the router to count the open P/D request")
                t0 = time.time()
                got2, _ = completion(c.r.url(), 91, 300, GREEDY)
                elapsed = time.time() - t0
                check(got2 == want2, "the request prefilled on the decode server differs")
                rm, dm = metrics(c.r), metrics(c.d)
                check(rm.get('deepinfer_router:pd_decode_prefills_total{reason="prefill_busy"}', 0) == 1,
                      f"the busy prefill pool was not counted: { {k: v for k, v in rm.items() if 'pd_' in k} }")
                check(dm["deepinfer:pd_imports_total"] == 0 and dm["deepinfer:pd_fallbacks_total"] == 0,
                      "the second request went through a prefill server")
                c.p.proc.send_signal(signal.SIGCONT)
                got1, _ = first.result(timeout=60)
        finally:
            c.p.proc.send_signal(signal.SIGCONT)
        check(got1 == want1, "the request through the thawed prefill server differs")
        check(metrics(c.d)["deepinfer:pd_imports_total"] == 1, "the first request was not imported")
        wait_for(lambda: metrics(c.r).get(open_gauge, 0) == 0, "the router's open P/D count to return to 0")
        print(f"prefill_busy: with the prefill server busy the next request was prefilled on D in {elapsed:.2f} s")
        expect_nothing_held(c.p, c.d)
    finally:
        c.stop()
        s.stop()


def expect_pd_equals_uncached(model_dir, lengths, label):
    """P/D answers equal a plain server's answer computed without any cache: the prefill server
    prefills the transfer blocks' tokens and sends its sequence state (window rings, compressor
    partial groups) with the blocks, so the decode server continues exactly where P stopped instead of
    rebuilding the window by SWA bounded replay — which is what a plain server's prefix-cache hit does,
    and which changes the answer on these models for most lengths (counted, for reference)."""
    global MODEL_OVERRIDE
    MODEL_OVERRIDE = model_dir
    c = Cluster(secret("a", 1), secret("a", 1))
    try:
        n_cached_equal = n = 0
        for j, length in enumerate(lengths):
            for q, sampling in enumerate((GREEDY, SEEDED)):
                i = 2 * j + q  # a prompt of its own: nothing is cached on the decode server yet
                s = serve("single")
                uncached, _ = completion(s.url(), i, length, sampling)
                cached, usage = completion(s.url(), i, length, sampling)
                s.stop()
                got, d_usage = completion(c.r.url(), i, length, sampling)
                check(d_usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens_details"]["cached_tokens"],
                      f"decode server restored {d_usage} tokens, the plain server hit {usage}")
                check(got == uncached,
                      f"{label} prompt {i} ({length} tokens) {sampling}: P/D {got!r} != uncached {uncached!r}")
                n += 1
                n_cached_equal += got == cached
        dm, pm = metrics(c.d), metrics(c.p)
        check(dm["deepinfer:pd_imports_total"] == n, f"{dm['deepinfer:pd_imports_total']} imports, expected {n}")
        # The blocks and the state pages (landing region) all went through the shared segment.
        check(pm["deepinfer:pd_shared_bytes_total"] == pm["deepinfer:pd_transfer_bytes_total"] > 0,
              f"{pm['deepinfer:pd_shared_bytes_total']} of {pm['deepinfer:pd_transfer_bytes_total']} bytes shared")
        print(f"{label}: {n} P/D answers equal the plain server's uncached answers (the window state moved with "
              f"the blocks); {n_cached_equal} of them also equal its prefix-cache-hit answer (SWA bounded replay)")
        expect_nothing_held(c.p, c.d)
    finally:
        c.stop()


def case_v4():
    """Tiny V4 (the server_tiny_v4_model fixture): P/D equals a plain server computing the prompt cold."""
    model = os.path.join(WORKDIR, "tiny_v4")
    check(os.path.exists(os.path.join(model, "config.json")), "tiny_v4 missing (server_tiny_v4_model)")
    expect_pd_equals_uncached(model, [200, 300, 520], "v4")


def case_v41():
    """Tiny V4.1 (Engram, CSA2 layer roles; made here): the same, its Engram history moving too."""
    model = os.path.join(WORKDIR, "tiny_v41_pd")
    if not os.path.exists(os.path.join(model, "config.json")):
        subprocess.run([DEEPINFER, "make-model", "--arch", "deepseek_v41", "--preset", "tiny", "--seed", "0",
                        "--out", model], check=True, stdout=subprocess.DEVNULL, timeout=300)
    expect_pd_equals_uncached(model, [200, 330], "v41")


def case_two_prefill():
    """Two prefill servers: the router spreads the transfers over both (least loaded, then round robin);
    one is killed: a request that names it first is still imported, from the other one (the decode server
    tries the next prefill server in the list); once the router's health poll has seen it down, the
    router lists it last, so no transfer is retried any more."""
    s = serve("single")
    c = Cluster(secret("a", 1), secret("a", 1), n_prefill=2)
    try:
        for k in range(4):
            want, _ = completion(s.url(), 40 + k, 200, GREEDY)
            check(completion(c.r.url(), 40 + k, 200, GREEDY)[0] == want, f"prompt {k} differs")
        # Spread over both. Not exactly [2, 2]: among equally open servers the router ranks by queued
        # prompt tokens, and a health poll that caught one mid-prefill reports tokens it has finished
        # since (until the next poll), which may send the next request to the other one.
        sent = [metrics(p)["deepinfer:pd_prefill_transfers_total"] for p in c.ps]
        check(sum(sent) == 4 and min(sent) >= 1, f"transfers per prefill server {sent}, expected both used")
        c.ps[0].proc.kill()
        c.ps[0].proc.wait(timeout=10)
        port = c.ps[0].url().rsplit(":", 1)[1]

        def dead_seen():
            return any(k.startswith("deepinfer_router:prefill_healthy") and port in k and v == 0
                       for k, v in metrics(c.r).items())
        wait_for(dead_seen, "the router's health poll to mark the killed prefill server down")
        # The router lists the dead one last: no transfer tries it (the decode server has not met it yet).
        for k in range(4, 9):
            want, _ = completion(s.url(), 40 + k, 200, SEEDED)
            check(completion(c.r.url(), 40 + k, 200, SEEDED)[0] == want, f"prompt {k} after the kill differs")
        check(metrics(c.d)["deepinfer:pd_retries_total"] == 0,
              "the router listed the dead prefill server first after its health poll")
        # Straight to the decode server with the dead one first, as a router that has not polled yet would:
        # the decode server tries the next one.
        body = {"model": "tiny", "prompt": prompt(49, 200), "max_tokens": 12, **GREEDY}
        req = urllib.request.Request(c.d.url() + "/v1/completions", method="POST", data=json.dumps(body).encode())
        req.add_header("content-type", "application/json")
        req.add_header("X-DeepInfer-Prefill-Peer", f"{c.ps[0].url()}, {c.ps[1].url()}")
        with urllib.request.urlopen(req, timeout=60) as res:
            direct = json.loads(res.read().decode())["choices"][0]["text"]
        check(direct == completion(s.url(), 49, 200, GREEDY)[0], "the retried request differs")
        dm = metrics(c.d)
        check(dm["deepinfer:pd_retries_total"] == 1, "the transfer was not retried on the live prefill server")
        check("trying " + c.ps[1].url() in c.d.log(), "the retry was not logged")
        check(dm["deepinfer:pd_imports_total"] == 10, f"{dm['deepinfer:pd_imports_total']} imports, expected 10")
        check(dm["deepinfer:pd_fallbacks_total"] == 0, "a request was prefilled on the decode server")
        # Every transfer after the kill (5 through the router, the direct one's retry) went to the live one.
        check(metrics(c.ps[1])["deepinfer:pd_prefill_transfers_total"] == sent[1] + 6,
              "the live prefill server did not take over")
        print("two_prefill: 10 imports; after the router's poll none tried the dead prefill server, a direct "
              "request naming it first was retried on the live one")
        expect_nothing_held(c.ps[1], c.d, s)
    finally:
        c.stop()
        s.stop()


def case_prefill_queue():
    """route --pd-max-prefill-queue-tokens 250 (with --model, so the router counts prompt tokens): a 300-token
    prompt sent to a prefill server that is frozen (so it neither runs it nor reports) fills that server's
    queue as the router sees it, and the next request is prefilled on the decode server; once the prefill
    server is thawed and has finished, its own report (deepinfer:num_prefill_tokens_pending 0) replaces the
    router's count and requests go through it again."""
    s = serve("single")
    c = Cluster(secret("a", 1), secret("a", 1),
                route_extra=("--model", MODEL, "--pd-max-prefill-queue-tokens", "250"))
    try:
        want = {i: completion(s.url(), i, 300, GREEDY)[0] for i in (120, 121, 122)}
        queue_gauge = f'deepinfer_router:prefill_queue_tokens{{prefill="{c.p.url()}"}}'
        wait_for(lambda: metrics(c.r).get(queue_gauge, -1) == 0, "the router to read the prefill server's queue")
        check(metrics(c.p).get("deepinfer:num_prefill_tokens_pending", -1) == 0,
              "the prefill server does not export deepinfer:num_prefill_tokens_pending")
        c.p.proc.send_signal(signal.SIGSTOP)
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as ex:
                first = ex.submit(completion, c.r.url(), 120, 300, GREEDY)
                wait_for(lambda: metrics(c.r).get(queue_gauge, 0) == 300,
                         "the router to count the 300 prompt tokens it sent", detail=lambda: metrics(c.r).get(queue_gauge))
                got2, _ = completion(c.r.url(), 121, 300, GREEDY)
                check(got2 == want[121], "the request prefilled on the decode server differs")
                rm, dm = metrics(c.r), metrics(c.d)
                check(rm.get('deepinfer_router:pd_decode_prefills_total{reason="prefill_busy"}', 0) == 1,
                      f"the full prefill queue was not counted: { {k: v for k, v in rm.items() if 'pd_' in k} }")
                check(dm["deepinfer:pd_imports_total"] == 0, "the second request went through the prefill server")
                c.p.proc.send_signal(signal.SIGCONT)
                got1, _ = first.result(timeout=60)
        finally:
            c.p.proc.send_signal(signal.SIGCONT)
        check(got1 == want[120], "the request through the thawed prefill server differs")
        wait_for(lambda: metrics(c.r).get(queue_gauge, -1) == 0,
                 "the prefill server's report to replace the router's count", detail=lambda: metrics(c.r).get(queue_gauge))
        got3, _ = completion(c.r.url(), 122, 300, GREEDY)
        check(got3 == want[122], "the third request differs")
        check(metrics(c.d)["deepinfer:pd_imports_total"] == 2, "the third request did not go through the prefill server")
        print("prefill_queue: a full queue sent one request to the decode server; the report reopened the prefill server")
        expect_nothing_held(c.p, c.d)
    finally:
        c.stop()
        s.stop()


def case_prefill_affinity():
    """A router that tokenizes (--model): prompts with the same first block go to the same prefill server
    (its prefix cache holds that block) while the servers are equally loaded."""
    s = serve("single")
    c = Cluster(secret("a", 1), secret("a", 1), n_prefill=2,
                route_extra=("--model", MODEL, "--pd-min-prompt-tokens", "1"))
    try:
        head = prompt(70, BLOCK)
        for k in range(4):
            tokens = head + prompt(71 + k, 136)
            body = {"model": "tiny", "prompt": tokens, "max_tokens": 12, **GREEDY}
            status, want = post(s.url(), "/v1/completions", body)
            status2, got = post(c.r.url(), "/v1/completions", body)
            check(status == status2 == 200, f"affinity prompt {k}: {status} {status2}")
            check(json.loads(got)["choices"][0]["text"] == json.loads(want)["choices"][0]["text"],
                  f"affinity prompt {k} differs")
            time.sleep(0.3)  # the router's count of the pick ends with its relay, just after the response
        sent = sorted(metrics(p)["deepinfer:pd_prefill_transfers_total"] for p in c.ps)
        check(sent == [0, 4], f"transfers per prefill server {sent}: the shared first block did not pick one server")
        print(f"prefill_affinity: 4 prompts with one first block all prefilled on one server {sent}")
        expect_nothing_held(*c.ps, c.d, s)
    finally:
        c.stop()
        s.stop()


def case_api_key():
    """A prefill server with --api-key: a decode server with --kv-prefill-api-key imports; one without the key
    is refused (HTTP 401, logged) and prefills itself."""
    s = serve("single")
    c = Cluster(secret("a", 1), secret("a", 1), p_extra=("--api-key", "pd-key-1"),
                d_extra=("--kv-prefill-api-key", "pd-key-1"))
    try:
        want, _ = completion(s.url(), 60, 200, GREEDY)
        check(completion(c.r.url(), 60, 200, GREEDY)[0] == want, "keyed P/D answer differs")
        check(metrics(c.d)["deepinfer:pd_imports_total"] == 1, "the keyed decode server did not import")
        status, text = post(c.p.url(), "/v1/pd/prefill",
                            {"request_id": 7, "tokens": [1, 2, 3], "decode_host": "127.0.0.1", "decode_port": 9})
        check(status == 401, f"an unkeyed /v1/pd/prefill: {status} {text[:200]}")
        d2 = serve("decode2", "--role", "decode", "--kv-transfer-secret-file", secret("a", 1),
                   "--kv-prefill-peer", c.p.url())
        try:
            body = {"model": "tiny", "prompt": prompt(61, 200), "max_tokens": 12, **GREEDY}
            req = urllib.request.Request(d2.url() + "/v1/completions", method="POST", data=json.dumps(body).encode())
            req.add_header("content-type", "application/json")
            req.add_header("X-DeepInfer-Prefill-Peer", c.p.url())
            with urllib.request.urlopen(req, timeout=60) as res:
                got = json.loads(res.read().decode())["choices"][0]["text"]
            check(got == completion(s.url(), 61, 200, GREEDY)[0], "the unkeyed decode server's answer differs")
            dm = metrics(d2)
            check(dm["deepinfer:pd_fallbacks_total"] == 1 and dm["deepinfer:pd_imports_total"] == 0,
                  "the unkeyed decode server did not prefill itself")
            check("HTTP 401" in d2.log(), "the refused key was not logged")
            expect_nothing_held(d2)
        finally:
            d2.stop()
        expect_nothing_held(c.p, c.d)
        print("api_key: keyed import, unkeyed refused (401) and prefilled on D")
    finally:
        c.stop()
        s.stop()


def case_disk_tiers():
    """P and D with --kv-disk-dir: both write their prompt blocks to their SSD tier; a second decode server on
    D's folder restores what D wrote from there instead of asking P, and a prompt whose first blocks are on
    its SSD and the rest on P gets only the rest moved (the restore reads both tiers)."""
    s = serve("single")
    p_dir = os.path.join(WORKDIR, f"pd_disk_{os.getpid()}_p")
    d_dir = os.path.join(WORKDIR, f"pd_disk_{os.getpid()}_d")
    for d in (p_dir, d_dir):
        shutil.rmtree(d, ignore_errors=True)
        atexit.register(shutil.rmtree, d, True)
    key = secret("a", 1)
    c = Cluster(key, key, p_extra=("--kv-disk-dir", p_dir, "--kv-disk-gib", "1"),
                d_extra=("--kv-disk-dir", d_dir, "--kv-disk-gib", "1"))
    disk_entries = 'deepinfer:kv_tier_entries{tier="disk"}'
    try:
        want, _ = completion(s.url(), 70, 330, GREEDY)
        check(completion(c.r.url(), 70, 330, GREEDY)[0] == want, "P/D answer with disk tiers differs")
        dm = metrics(c.d)
        check(dm["deepinfer:pd_imports_total"] == 1, f"not imported: {dm['deepinfer:pd_imports_total']}")
        block_bytes = dm["deepinfer:pd_received_bytes_total"] / 5
        wait_for(lambda: metrics(c.d).get(disk_entries, 0) >= 5, "the decode server to write its blocks to its SSD")
        wait_for(lambda: metrics(c.p).get(disk_entries, 0) >= 5, "the prefill server to write its blocks to its SSD")
        d2 = serve("decode2", "--role", "decode", "--kv-transfer-secret-file", key, "--kv-prefill-peer", c.p.url(),
                   "--kv-disk-dir", d_dir, "--kv-disk-gib", "1")
        try:
            def direct(server, i, n):
                body = {"model": "tiny", "prompt": prompt(i, n), "max_tokens": 12, **GREEDY}
                req = urllib.request.Request(server.url() + "/v1/completions", method="POST", data=json.dumps(body).encode())
                req.add_header("content-type", "application/json")
                req.add_header("X-DeepInfer-Prefill-Peer", c.p.url())
                with urllib.request.urlopen(req, timeout=60) as res:
                    return json.loads(res.read().decode())["choices"][0]["text"]
            # 460 tokens: transfer blocks 0-6; 0-4 are on the shared SSD folder, 5-6 come from P.
            want, _ = completion(s.url(), 70, 460, GREEDY)
            check(direct(d2, 70, 460) == want, "a prompt split over the SSD and the prefill server differs")
            m = metrics(d2)
            check(m["deepinfer:pd_local_tier_blocks_total"] == 5 and m["deepinfer:pd_imports_total"] == 1,
                  f"split prompt: {m['deepinfer:pd_local_tier_blocks_total']} blocks from the SSD, "
                  f"{m['deepinfer:pd_imports_total']} imports")
            check(m["deepinfer:pd_received_bytes_total"] == 2 * block_bytes,
                  f"split prompt moved {m['deepinfer:pd_received_bytes_total']} bytes, not 2 blocks")
            # 5 blocks restored from the SSD, then the whole prefix hit in the pool (the 2 from P adopted).
            check(m["deepinfer:kv_tier_restored_tokens_total"] == 5 * BLOCK,
                  f"restored {m['deepinfer:kv_tier_restored_tokens_total']} tokens, not the SSD's 5 blocks")
            check(m["deepinfer:prefix_cache_hits_total"] >= 7 * BLOCK,
                  f"{m['deepinfer:prefix_cache_hits_total']} tokens hit in the pool, not 7 blocks (SSD + P's)")
            # A prompt whose blocks are all on the SSD: nothing is asked of P.
            want, _ = completion(s.url(), 70, 331, GREEDY)
            fresh = serve("decode3", "--role", "decode", "--kv-transfer-secret-file", key, "--kv-prefill-peer",
                          c.p.url(), "--kv-disk-dir", d_dir, "--kv-disk-gib", "1")
            try:
                check(direct(fresh, 70, 331) == want, "a prompt restored from the SSD differs")
                m = metrics(fresh)
                check(m["deepinfer:pd_imports_total"] == 0 and m["deepinfer:pd_fallbacks_total"] == 0
                      and m["deepinfer:pd_local_tier_blocks_total"] == 5
                      and m["deepinfer:kv_tier_restored_tokens_total"] == 5 * BLOCK,
                      f"all-SSD prompt: { {k: v for k, v in m.items() if 'pd_' in k or 'restored' in k} }")
                expect_nothing_held(fresh)
            finally:
                fresh.stop()
            expect_nothing_held(d2)
        finally:
            d2.stop()
        expect_nothing_held(c.p, c.d)
        print(f"disk_tiers: D and P wrote {int(metrics(c.d)[disk_entries])} / {int(metrics(c.p)[disk_entries])} "
              "entries; a second D restored 5 blocks from the SSD and took 2 from P; a third took none from P")
    finally:
        c.stop()
        s.stop()


def case_stream_puts():
    """A prefill server computing in small chunks puts each block as soon as its chunk is done: some blocks
    reach the decode server while the prefill still runs, and the answer is the plain server's; with
    --kv-stream-puts false none does (the control)."""
    s = serve("single")
    try:
        for stream in ("true", "false"):
            c = Cluster(secret("a", 1), secret("a", 1), p_extra=("--max-step-tokens", "32", "--kv-stream-puts", stream),
                        d_extra=("--kv-transfer-slots", "3"))
            check(metrics(c.d)["deepinfer:pd_transfer_slots"] == 3, "the decode server did not make its 3 slots at start")
            try:
                for i in range(2):
                    want, _ = completion(s.url(), 80 + i, 900, GREEDY)
                    check(completion(c.r.url(), 80 + i, 900, GREEDY)[0] == want,
                          f"stream_puts={stream}: the P/D answer differs")
                pm = metrics(c.p)
                early, blocks = pm["deepinfer:pd_blocks_put_early_total"], 2 * ((900 - 1) // BLOCK)
                check(metrics(c.d)["deepinfer:pd_imports_total"] == 2, f"stream_puts={stream}: not imported")
                by_layer = pm["deepinfer:pd_blocks_written_by_layer_total"]
                if stream == "true":
                    check(0 < early <= blocks, f"{early} of {blocks} blocks put during the prefill, expected some")
                    # Same host: every block P computed was copied into D's pool layer by layer during
                    # the forward that computed it (none cached on P: each prompt is new).
                    check(by_layer == blocks, f"{by_layer} of {blocks} blocks copied layer by layer")
                else:
                    check(early == 0 and by_layer == 0,
                          f"{early} blocks put during the prefill, {by_layer} by layer, with --kv-stream-puts false")
                print(f"stream_puts={stream}: {int(early)} of {blocks} blocks put while the prefill ran, "
                      f"{int(by_layer)} copied layer by layer")
                expect_nothing_held(c.p, c.d)
            finally:
                c.stop()
    finally:
        s.stop()


CASES = {"v4": case_v4, "v41": case_v41, "equal": case_equal, "wrong_secret": case_wrong_secret, "wrong_model": case_wrong_model, "kill_prefill": case_kill_prefill,
         "lease_expiry": case_lease_expiry, "cancel": case_cancel, "kill_decode": case_kill_decode, "conditional": case_conditional,
         "two_prefill": case_two_prefill, "api_key": case_api_key, "prefill_affinity": case_prefill_affinity,
         "disk_tiers": case_disk_tiers, "prefill_busy": case_prefill_busy,
         "prefill_queue": case_prefill_queue, "stream_puts": case_stream_puts, "ucx_puts": case_ucx_puts}

if __name__ == "__main__":
    if not os.path.exists(os.path.join(MODEL, "config.json")):
        fail(f"{MODEL} missing: run the server_e2e_make_model fixture first")
    CASES[CASE]()
    print(f"PASS {CASE}")
