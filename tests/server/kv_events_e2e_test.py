#!/usr/bin/env python3
"""KV events and the admin cache routes through a real `deepinfer serve` (docs/kvcache.md).

usage: kv_events_e2e_test.py DEEPINFER WORKDIR

A real ZeroMQ SUB socket (python3-zmq) subscribes to `--kv-events-endpoint`; payloads are decoded by an
independent msgpack implementation (python3-msgpack) and checked against vLLM's schema. Prompts are token
ids (/v1/completions), so the expected blocks are known exactly. The pool is small, so the workload
evicts: replaying stored - removed must equal what GET /v1/cache/stats reports, evictions included.
Then DELETE /v1/cache by salt, by key prefix and "all" (AllBlocksCleared), and the admin key rules.
Last, the replay socket (`--kv-events-replay-endpoint`, vLLM's protocol) through a real ZeroMQ DEALER:
every batch from 0 on, byte-identical to what the SUB socket received, then the end marker; a late
subscriber rebuilt from the replay holds exactly the live blocks.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import msgpack
import zmq

DEEPINFER, WORKDIR = sys.argv[1], sys.argv[2]
MODEL = os.path.join(WORKDIR, "tiny_v3")
CLIENT_KEY, ADMIN_KEY = "client-key", "admin-key"
BLOCK = 64
STORED_KEYS = {"type", "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
               "lora_name"}


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def start_server():
    proc = subprocess.Popen(
        [DEEPINFER, "serve", "--model", MODEL, "--host", "127.0.0.1", "--port", "0", "--threads", "1",
         "--max-model-len", "512", "--kv-cache-mib", "1", "--api-key", CLIENT_KEY, "--admin-api-key",
         ADMIN_KEY, "--kv-events-endpoint", "tcp://127.0.0.1:0", "--kv-pin-max-blocks", "3",
         "--kv-events-replay-endpoint", "tcp://127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            fail("server exited: " + proc.stderr.read())
        if "listening on http://127.0.0.1:" in line:
            return proc, int(line.split("127.0.0.1:")[1].split()[0])
    proc.kill()
    fail("server did not start")


def call(port, method, path, body=None, key=CLIENT_KEY):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    req.add_header("content-type", "application/json")
    if key:
        req.add_header("authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def prompt(i):
    # 3 full blocks + 10 tokens, different for every i (ids stay inside the V3 tokenizer's vocabulary).
    return [1000 + (i * 997 + k * 31) % 120000 for k in range(3 * BLOCK + 10)]


def complete(port, i, extra=None):
    status, body = call(port, "POST", "/v1/completions",
                        {"model": "tiny", "prompt": prompt(i), "max_tokens": 2, "temperature": 0, **(extra or {})})
    check(status == 200, f"completion {i}: {status} {body}")
    return body["usage"]


class Subscriber:
    def __init__(self, endpoint=None):
        """endpoint None: no socket (state rebuilt from replayed payloads only)."""
        if endpoint is not None:
            self.ctx = zmq.Context()
            self.sock = self.ctx.socket(zmq.SUB)
            self.sock.setsockopt(zmq.SUBSCRIBE, b"")
            self.sock.connect(endpoint)
        self.next_seq = 0
        self.live = {}  # hash -> token ids of the block
        self.n_removed = 0
        self.events = []
        self.payloads = {}  # seq -> the payload bytes as received

    def drain(self, quiet_s=0.7):
        """Receives until nothing arrives for quiet_s."""
        while self.sock.poll(int(quiet_s * 1000)):
            frames = self.sock.recv_multipart()
            check(len(frames) == 3, f"three frames, got {len(frames)}")
            topic, seq_bytes, payload = frames
            check(topic == b"", f"topic {topic!r}")
            seq = int.from_bytes(seq_bytes, "big")
            check(len(seq_bytes) == 8 and seq == self.next_seq, f"sequence {seq}, expected {self.next_seq}")
            self.next_seq += 1
            self.payloads[seq] = payload
            self.apply_payload(payload)

    def apply_payload(self, payload):
        batch = msgpack.unpackb(payload, raw=False)
        check(isinstance(batch, list) and len(batch) == 2, f"EventBatch [ts, events]: {batch!r}"[:200])
        ts, events = batch
        check(isinstance(ts, float) and abs(ts - time.time()) < 120, f"ts {ts}")
        for ev in events:
            self.apply(ev)

    def apply(self, ev):
        self.events.append(ev)
        kind = ev["type"]
        if kind == "BlockStored":
            check(set(ev) - {"extra_keys"} == STORED_KEYS, f"BlockStored fields {sorted(ev)}")
            if "extra_keys" in ev:  # a salted run from position 0: the salt's tag on its first block
                extra = ev["extra_keys"]
                check(ev["parent_block_hash"] is None and len(extra) == len(ev["block_hashes"]), str(ev)[:200])
                check(len(extra[0]) == 1 and extra[0][0].startswith("salt_tag:") and len(extra[0][0]) == 25
                      and all(c in "0123456789abcdef" for c in extra[0][0][9:]), f"salt tag {extra[0]}")
                check(all(e is None for e in extra[1:]), f"extra keys past block 0: {extra}")
            check(ev["block_size"] == BLOCK and ev["medium"] == "CPU" and ev["lora_id"] is None, str(ev)[:200])
            hashes, tokens = ev["block_hashes"], ev["token_ids"]
            check(len(tokens) == BLOCK * len(hashes), "token_ids hold block_size tokens per block")
            check(ev["parent_block_hash"] is None or ev["parent_block_hash"] in self.live,
                  "a stored run's parent is a block the subscriber knows")
            for k, h in enumerate(hashes):
                check(isinstance(h, int) and h not in self.live, f"new hash {h}")
                self.live[h] = tokens[k * BLOCK:(k + 1) * BLOCK]
        elif kind == "BlockRemoved":
            check(set(ev) == {"type", "block_hashes", "medium"}, f"BlockRemoved fields {sorted(ev)}")
            for h in ev["block_hashes"]:
                check(h in self.live, f"removed hash {h} was stored")
                del self.live[h]
                self.n_removed += 1
        elif kind == "AllBlocksCleared":
            check(set(ev) == {"type"}, str(ev))
            self.live.clear()
        else:
            fail(f"unknown event {ev}")

    def hashes_of(self, i):
        """The live hashes holding prompt i's full blocks, in order (None where a block is not live)."""
        blocks = [prompt(i)[k * BLOCK:(k + 1) * BLOCK] for k in range(3)]
        by_tokens = {tuple(t): h for h, t in self.live.items()}
        return [by_tokens.get(tuple(b)) for b in blocks]


def replay(endpoint, start):
    """vLLM's replay request through a DEALER: [(seq, payload)] from `start` on, up to the end marker."""
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(endpoint)
    dealer.send_multipart([b"", start.to_bytes(8, "big")])
    out = []
    while True:
        check(dealer.poll(10000), "a replay answer within 10 s")
        frames = dealer.recv_multipart()
        check(len(frames) == 3 and frames[0] == b"" and len(frames[1]) == 8, f"replay frames {frames!r}"[:200])
        if frames[2] == b"":
            check(frames[1] == b"\xff" * 8, "end marker -1")
            break
        out.append((int.from_bytes(frames[1], "big"), frames[2]))
    dealer.close()
    ctx.term()
    return out


def checks_the_replay(stats, sub):
    endpoint = stats["kv_events"]["replay_endpoint"]
    check(endpoint.startswith("tcp://127.0.0.1:") and endpoint != stats["kv_events"]["endpoint"], endpoint)
    everything = replay(endpoint, 0)
    check([seq for seq, _ in everything] == list(range(sub.next_seq)), "replay from 0: every batch, in order")
    check(all(sub.payloads[seq] == payload for seq, payload in everything), "replayed bytes = published bytes")
    late = Subscriber()
    for _, payload in everything:
        late.apply_payload(payload)
    check(late.live == sub.live, "a subscriber rebuilt from the replay holds the live blocks")
    tail = replay(endpoint, sub.next_seq - 2)
    check([seq for seq, _ in tail] == [sub.next_seq - 2, sub.next_seq - 1], f"replay of the last two: {tail}"[:200])
    check(replay(endpoint, sub.next_seq + 5) == [], "nothing past the end")
    return len(everything)


def refuses_a_bad_endpoint():
    r = subprocess.run([DEEPINFER, "serve", "--model", MODEL, "--port", "0", "--kv-events-endpoint", "tcp://nowhere"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "--kv-events-endpoint tcp://nowhere" in r.stderr, f"bad endpoint: {r.returncode} {r.stderr}")
    r = subprocess.run([DEEPINFER, "serve", "--model", MODEL, "--port", "0", "--kv-events-replay-endpoint",
                        "tcp://127.0.0.1:0"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "--kv-events-replay-endpoint" in r.stderr and "--kv-events-endpoint" in r.stderr,
          f"replay without events: {r.returncode} {r.stderr}")


def main():
    refuses_a_bad_endpoint()
    proc, port = start_server()
    try:
        status, stats = call(port, "GET", "/v1/cache/stats", key=ADMIN_KEY)
        check(status == 200, f"stats: {status} {stats}")
        pool = stats["pool"]
        print("pool:", json.dumps(pool))
        check(pool["pin_quota_blocks"] == 3 and pool["blocks_cached"] == 0, "stats before any request")
        sub = Subscriber(stats["kv_events"]["endpoint"])
        time.sleep(1.0)  # the subscription reaches the PUB socket (ZeroMQ's slow joiner)

        # The admin key rules: client key 403, none or a wrong key 401; the admin key is not a client key.
        check(call(port, "GET", "/v1/cache/stats")[0] == 403, "client key on stats: 403")
        check(call(port, "GET", "/v1/cache/stats", key=None)[0] == 401, "no key on stats: 401")
        check(call(port, "DELETE", "/v1/cache", {"all": True})[0] == 403, "client key on delete: 403")
        check(call(port, "DELETE", "/v1/cache", {"all": True}, key="nope")[0] == 401, "wrong key: 401")
        check(call(port, "POST", "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 1},
                   key=ADMIN_KEY)[0] == 401, "the admin key is not a client key")
        for bad, field in [({}, "body"), ({"salt": 3}, "salt"), ({"all": True, "salt": "a"}, "all"),
                           ({"key": "x"}, "key"), ({"key_prefix": ""}, "key_prefix")]:
            s, body = call(port, "DELETE", "/v1/cache", bad, key=ADMIN_KEY)
            check(s == 400 and body["error"]["param"] == field, f"DELETE {bad}: {s} {body}")

        # A workload larger than the pool: every prompt's 3 full blocks are stored, old ones evicted.
        n_prompts = pool["blocks_total"] // 3 + 4
        for i in range(n_prompts):
            complete(port, i)
        sub.drain()
        status, stats = call(port, "GET", "/v1/cache/stats", key=ADMIN_KEY)
        pool = stats["pool"]
        print(f"{n_prompts} prompts: {len(sub.events)} events, live {len(sub.live)}, removed {sub.n_removed};",
              "pool:", json.dumps(pool))
        check(pool["evictions"] > 0 and sub.n_removed == pool["evictions"], "every eviction was published")
        check(len(sub.live) == pool["blocks_cached"], "replayed events = the pool's cached blocks")
        check(all(h is not None for h in sub.hashes_of(n_prompts - 1)), "the newest prompt's blocks are live")
        check(all(h is None for h in sub.hashes_of(0)), "the oldest prompt's blocks were evicted")
        stored_runs = [ev for ev in sub.events if ev["type"] == "BlockStored"]
        check(any(ev["parent_block_hash"] is None and ev["token_ids"] == prompt(n_prompts - 1)[:3 * BLOCK]
                  for ev in stored_runs), "one BlockStored with the prompt's 3 blocks, from position 0")
        check(stats["kv_events"]["batches_dropped"] == 0 and stats["kv_events"]["batches_published"] == sub.next_seq,
              "the subscriber saw every batch")

        # DELETE by salt: only that tenant's blocks go (one BlockRemoved of exactly them).
        complete(port, 500, {"cache": {"salt": "tenant-x"}})
        complete(port, 501)
        sub.drain()
        salted, plain = sub.hashes_of(500), sub.hashes_of(501)
        check(None not in salted and None not in plain, "both stored")
        runs = {tuple(ev["token_ids"][:BLOCK]): ev for ev in sub.events if ev["type"] == "BlockStored"}
        tag = runs[tuple(prompt(500)[:BLOCK])].get("extra_keys")
        check(tag is not None and tag[0][0].startswith("salt_tag:"), "the salted run carries its salt's tag")
        tenant_x_salt_tag = tag[0][0]
        check("extra_keys" not in runs[tuple(prompt(501)[:BLOCK])], "an unsalted run carries none")
        check("tenant-x" not in repr(sub.events), "the salt itself is never published")
        n_events = len(sub.events)
        s, body = call(port, "DELETE", "/v1/cache", {"salt": "tenant-x"}, key=ADMIN_KEY)
        check(s == 200 and body["blocks_removed"] == 3 and body["blocks_in_use"] == 0, f"delete salt: {body}")
        sub.drain()
        removed = [h for ev in sub.events[n_events:] if ev["type"] == "BlockRemoved" for h in ev["block_hashes"]]
        check(sorted(removed) == sorted(salted), f"exactly the salted blocks were removed: {removed} {salted}")
        check(None not in sub.hashes_of(501), "the unsalted prompt stays")
        usage = complete(port, 500, {"cache": {"salt": "tenant-x"}})
        check(usage["prompt_tokens_details"]["cached_tokens"] == 0, f"deleted prefix misses: {usage}")
        sub.drain()
        rerun = [ev for ev in sub.events if ev["type"] == "BlockStored" and ev["token_ids"][:BLOCK] == prompt(500)[:BLOCK]]
        check(rerun[-1]["extra_keys"][0][0] == tenant_x_salt_tag, "the same salt, the same tag")
        again = complete(port, 501)
        check(again["prompt_tokens_details"]["cached_tokens"] == 3 * BLOCK, f"kept prefix hits: {again}")

        # DELETE by key prefix (OpenAI prompt_cache_key), and a pin lease that the deletion ends first.
        complete(port, 600, {"prompt_cache_key": "team-9/agent", "cache": {"pin": True}})
        complete(port, 601, {"prompt_cache_key": "team-1/agent"})
        status, stats = call(port, "GET", "/v1/cache/stats", key=ADMIN_KEY)
        check(stats["pool"]["pinned_blocks"] == 3 and stats["pool"]["pin_leases"] == 1, json.dumps(stats["pool"]))
        complete(port, 602, {"cache": {"pin": True}})  # past the 3-block quota: served, not pinned
        status, stats = call(port, "GET", "/v1/cache/stats", key=ADMIN_KEY)
        check(stats["pool"]["pins_refused"] == 1, json.dumps(stats["pool"]))
        s, body = call(port, "DELETE", "/v1/cache", {"key_prefix": "team-9/"}, key=ADMIN_KEY)
        check(s == 200 and body["blocks_removed"] == 3 and body["pin_leases_released"] == 1, f"key prefix: {body}")
        sub.drain()
        check(all(h is None for h in sub.hashes_of(600)) and None not in sub.hashes_of(601), "only team-9 went")

        # The replay socket, while blocks are live.
        check(sub.live, "blocks are live before the replay check")
        status, stats = call(port, "GET", "/v1/cache/stats", key=ADMIN_KEY)
        n_replayed = checks_the_replay(stats, sub)
        # The replay thread counts a request after answering it: the counters settle within a bounded wait.
        deadline = time.time() + 5
        while True:
            status, stats = call(port, "GET", "/v1/cache/stats", key=ADMIN_KEY)
            settled = (stats["kv_events"]["replay_requests"] == 3
                       and stats["kv_events"]["batches_replayed"] == n_replayed + 2)
            if settled or time.time() > deadline:
                break
            time.sleep(0.05)
        check(settled, f"replay counters: {stats['kv_events']}")

        # DELETE all: nothing in use, so one AllBlocksCleared.
        s, body = call(port, "DELETE", "/v1/cache", {"all": True}, key=ADMIN_KEY)
        check(s == 200 and body["blocks_removed"] > 0 and body["blocks_in_use"] == 0, f"all: {body}")
        sub.drain()
        check(sub.events[-1]["type"] == "AllBlocksCleared" and not sub.live, f"cleared: {sub.events[-1]}")
        status, stats = call(port, "GET", "/v1/cache/stats", key=ADMIN_KEY)
        check(stats["pool"]["blocks_cached"] == 0, json.dumps(stats["pool"]))
        print(f"kv_events e2e: ok ({sub.next_seq} batches, {len(sub.events)} events)")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("server did not stop")
    check(rc == 0, f"server exit {rc}: {proc.stderr.read()[-2000:]}")


if __name__ == "__main__":
    main()
