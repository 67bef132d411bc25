// Black-box tests of `deepinfer route` in front of real `deepinfer serve` workers on loopback, on the
// tiny make-model checkpoint (random weights; greedy decoding is deterministic, which "answers
// through the router equal direct answers" leans on).
//
// usage: node route_e2e_test.js DEEPINFER WORKDIR CASE
//   CASE equal       every API, streaming and not, through the router == direct; /tokenize ids equal
//                    the worker's; client and worker API keys; /v1/models, /ready, /metrics
//        cache_hits  multi-tenant workload (8 ~2k-token system prompts, 4 requests each, shuffled) on
//                    3 workers: cache_aware's hit-token ratio (usage cached tokens) is clearly above
//                    round_robin's; hit ratios and mean TTFT printed for both
//        kill_worker a worker killed mid-run: no non-streaming request fails, its open streams end
//                    with an error event, it rejoins after a restart on the same port
//        reload      --workers-file re-read on SIGHUP (a worker joins, one is drained, none left: 503);
//                    the router's own overload answers 429 + Retry-After
//        kv_events   the router's prefix index fed by a worker's KV events (--worker-events): its
//                    estimated hits equal the worker's cached tokens, an eviction on the worker takes
//                    them away, a worker without events falls back to routing history
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const assert = require('node:assert/strict');
const serverProcess = require('../../bench/serve/server_process.js');
const { post, postStream, runWorkload, spawnListening: spawnDeepinfer } = require('../../bench/serve/route_workload.js');
const spawnListening = (args) => spawnDeepinfer(deepinfer, args);

const [deepinfer, workdir, caseName] = process.argv.slice(2);
const modelDir = path.join(workdir, 'tiny_v3');
const CLIENT_KEY = 'sk-router-client-0123456789';
const WORKER_KEY = 'sk-router-worker-0123456789';

function startWorker(extraArgs = []) {
  return serverProcess.startServer(deepinfer, modelDir, ['--threads', '1', '--max-model-len', '4096', ...extraArgs],
                                   60000);
}

// A worker on a given port (a restart where it was).
function startWorkerOnPort(port) {
  return spawnListening(['serve', '--model', modelDir, '--host', '127.0.0.1', '--port', String(port), '--threads', '1',
                         '--max-model-len', '4096']);
}

function startRouter(workers, extraArgs = []) {
  return spawnListening(['route', '--host', '127.0.0.1', '--port', '0', '--model', modelDir, '--health-period-ms', '200',
                         ...workers.flatMap((w) => ['--worker', w.base]), ...extraArgs]);
}

async function stopAll(servers) {
  for (const s of servers) {
    if (!s || s.proc.exitCode !== null || s.proc.signalCode !== null) continue;
    const r = await serverProcess.stopServer(s);
    assert.equal(r.code, 0, `process ${s.pid} exits 0 on SIGTERM (got ${r.code ?? r.signal})`);
  }
}

async function getText(url, key) {
  const res = await fetch(url, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  return { status: res.status, text: await res.text() };
}

const CHAT = (content) => ({ model: 'tiny_v3', messages: [{ role: 'system', content: 'You are terse.' },
                                                          { role: 'user', content }],
                             max_tokens: 12, temperature: 0 });

async function caseEqual() {
  const workers = [await startWorker(['--api-key', WORKER_KEY]), await startWorker(['--api-key', WORKER_KEY])];
  const router = await startRouter(workers, ['--api-key', CLIENT_KEY, '--worker-api-key', WORKER_KEY]);
  try {
    // Keys: the client's at the router, the router's own at the workers (never the client's).
    assert.equal((await post(router.base, '/v1/chat/completions', CHAT('hi'))).status, 401);
    assert.equal((await post(workers[0].base, '/v1/chat/completions', CHAT('hi'), CLIENT_KEY)).status, 401);
    assert.equal((await post(router.base, '/v1/chat/completions', CHAT('hi'), CLIENT_KEY)).status, 200);

    // The router renders and tokenizes exactly as the workers do.
    const conversations = [
      CHAT('What is a prefix cache?'),
      { model: 'tiny_v3', messages: [{ role: 'user', content: 'one' }, { role: 'assistant', content: 'two' },
                                     { role: 'user', content: 'three <｜User｜> four' }] },
      { messages: [{ role: 'system', content: 'Rules.' },
                   { role: 'user', content: [{ type: 'text', text: 'part one' }, { type: 'text', text: ' part two' }] }] },
    ];
    for (const body of conversations) {
      const mine = await post(router.base, '/tokenize', body, CLIENT_KEY);
      const theirs = await post(workers[0].base, '/tokenize', body, WORKER_KEY);
      assert.equal(theirs.status, 200, JSON.stringify(theirs.json));
      assert.equal(mine.status, 200, JSON.stringify(mine.json));
      assert.deepEqual(mine.json.tokens, theirs.json.tokens, 'router ids == worker /tokenize ids');
    }
    const n = (await post(router.base, '/tokenize', CHAT('count me'), CLIENT_KEY)).json.count;
    const viaRouter = await post(router.base, '/v1/chat/completions', CHAT('count me'), CLIENT_KEY);
    assert.equal(viaRouter.json.usage.prompt_tokens, n, 'the worker saw the prompt the router tokenized');

    // Every API, streaming and not: the same answer through the router as from a worker directly.
    const apis = [
      ['/v1/chat/completions', CHAT('Tell me about routers.'), (j) => j.choices[0].message.content,
       (evs) => evs.filter((e) => e !== '[DONE]').map((e) => e.choices[0]?.delta?.content ?? '').join('')],
      ['/v1/completions', { model: 'tiny_v3', prompt: 'Once upon a time', max_tokens: 12, temperature: 0 },
       (j) => j.choices[0].text, (evs) => evs.filter((e) => e !== '[DONE]').map((e) => e.choices[0]?.text ?? '').join('')],
      ['/v1/messages', { model: 'tiny_v3', max_tokens: 12, temperature: 0, messages: [{ role: 'user', content: 'Hello' }] },
       (j) => j.content.map((c) => c.text ?? '').join(''),
       (evs) => evs.filter((e) => e.type === 'content_block_delta').map((e) => e.delta.text ?? '').join('')],
      ['/v1/responses', { model: 'tiny_v3', max_output_tokens: 12, temperature: 0, input: 'Hello there' },
       (j) => j.output.flatMap((o) => o.content ?? []).map((c) => c.text ?? '').join(''),
       (evs) => evs.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('')],
    ];
    for (const [route, body, whole, streamed] of apis) {
      const direct = await post(workers[1].base, route, body, WORKER_KEY);
      const routed = await post(router.base, route, body, CLIENT_KEY);
      assert.equal(direct.status, 200, `${route} direct: ${JSON.stringify(direct.json)}`);
      assert.equal(routed.status, 200, `${route} routed: ${JSON.stringify(routed.json)}`);
      assert.ok(whole(direct.json).length > 0, `${route} answers something`);
      assert.equal(whole(routed.json), whole(direct.json), `${route}: routed == direct`);
      const s = await postStream(router.base, route, body, CLIENT_KEY);
      assert.equal(s.status, 200);
      assert.equal(streamed(s.events), whole(direct.json), `${route} stream: routed == direct`);
      console.log(`${route}: routed == direct (${JSON.stringify(whole(direct.json))})`);
    }
    // The Anthropic alias and the model list pass through too.
    const alias = await post(router.base, '/anthropic/v1/messages', apis[2][1], CLIENT_KEY);
    assert.equal(alias.status, 200);
    const models = JSON.parse((await getText(`${router.base}/v1/models`, CLIENT_KEY)).text);
    const direct = JSON.parse((await getText(`${workers[0].base}/v1/models`, WORKER_KEY)).text);
    assert.deepEqual(models.data.map((m) => m.id), direct.data.map((m) => m.id));
    // A bad body gets the worker's 400 with the field named.
    const bad = await post(router.base, '/v1/chat/completions', { model: 'x', messages: 'nope' }, CLIENT_KEY);
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, 'messages');

    assert.equal((await getText(`${router.base}/ready`)).status, 200);
    const metrics = serverProcess.parseMetrics((await getText(`${router.base}/metrics`)).text);
    const routedTotal = Object.entries(metrics).filter(([k]) => k.startsWith('deepinfer_router:requests_total'))
      .reduce((a, [, v]) => a + v, 0);
    assert.ok(routedTotal >= 12, `router counted its requests (${routedTotal})`);

    // Graceful shutdown: SIGTERM while a stream is open; the stream still finishes, the router exits 0.
    const res = await fetch(`${router.base}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
      body: JSON.stringify({ ...CHAT('drain me'), max_tokens: 64, stream: true }) });
    assert.equal(res.status, 200);
    router.proc.removeAllListeners('exit');  // the start-up listener rejects on exit
    const exitedNow = new Promise((resolve) => router.proc.on('exit', (code, signal) => resolve({ code, signal })));
    router.proc.kill('SIGTERM');
    const rest = await res.text();
    assert.ok(rest.trimEnd().endsWith('data: [DONE]'), `the open stream finished during the drain: ${rest.slice(-200)}`);
    const ended = await exitedNow;
    assert.equal(ended.code, 0, 'the router exits 0 after draining');
    console.log('drain: an open stream finished after SIGTERM, the router exited 0');
  } finally {
    await stopAll([router, ...workers]);
  }
}

async function caseCacheHits() {
  const workers = [await startWorker(), await startWorker(), await startWorker()];
  const results = {};
  try {
    for (const policy of ['round_robin', 'cache_aware']) {
      const router = await startRouter(workers, ['--policy', policy]);
      try {
        results[policy] = await runWorkload(router.base, policy, 8, 4, policy === 'cache_aware' ? 11 : 22);
      } finally {
        await stopAll([router]);
      }
      const r = results[policy];
      console.log(`${policy}: hit-token ratio ${r.hitRatio.toFixed(3)} (${r.cached}/${r.prompt} prompt tokens), ` +
                  `mean TTFT ${r.meanTtft.toFixed(1)} ms`);
    }
  } finally {
    await stopAll(workers);
  }
  // 4 requests per tenant: cache_aware can hit on 3 of 4 (0.75 of the system prompt tokens); round_robin
  // over 3 workers spreads a tenant's requests and hits far less often (expected ~0.4).
  assert.ok(results.cache_aware.hitRatio > 0.6, `cache_aware hit ratio ${results.cache_aware.hitRatio}`);
  assert.ok(results.cache_aware.hitRatio > results.round_robin.hitRatio + 0.15,
            `cache_aware ${results.cache_aware.hitRatio} clearly above round_robin ${results.round_robin.hitRatio}`);
  console.log(`mean TTFT ratio round_robin / cache_aware: ${(results.round_robin.meanTtft / results.cache_aware.meanTtft).toFixed(2)}`);
}

async function metricFor(routerBase, name, worker) {
  const m = serverProcess.parseMetrics((await getText(`${routerBase}/metrics`)).text);
  return m[`${name}{worker="${worker.base}"}`] ?? 0;
}

async function caseKillWorker() {
  const workers = [await startWorker(), await startWorker()];
  const router = await startRouter(workers, ['--policy', 'round_robin']);
  let restarted = null;
  try {
    const victim = workers[0];
    const streams = [];
    // Half OpenAI chat, half Anthropic messages: each API's error event shape is checked.
    for (let i = 0; i < 8; ++i) {
      const anthropic = i % 4 >= 2;  // round robin alternates workers: both APIs land on both
      const body = anthropic
        ? { model: 'tiny_v3', max_tokens: 3000, temperature: 0, messages: [{ role: 'user', content: `stream ${i}` }] }
        : { ...CHAT(`stream ${i}`), max_tokens: 3000 };
      streams.push(postStream(router.base, anthropic ? '/v1/messages' : '/v1/chat/completions', body)
        .then((s) => ({ ...s, anthropic })));
    }
    const plain = [];
    let killed = false;
    const runPlain = async (i) => {
      const r = await post(router.base, '/v1/chat/completions', { ...CHAT(`plain ${i}`), max_tokens: 48 });
      return r;
    };
    // Non-streaming traffic in waves; the worker dies during the second wave.
    for (let wave = 0; wave < 4; ++wave) {
      const batch = Array.from({ length: 6 }, (_, i) => runPlain(wave * 6 + i));
      if (wave === 1) {
        await new Promise((r) => setTimeout(r, 50));
        victim.proc.kill('SIGKILL');
        killed = true;
      }
      plain.push(...(await Promise.all(batch)));
    }
    assert.ok(killed);
    for (const r of plain) assert.equal(r.status, 200, `non-streaming request failed: ${JSON.stringify(r.json)}`);
    const done = await Promise.all(streams);
    let errored = 0;
    let erroredAnthropic = 0;
    for (const s of done) {
      assert.equal(s.status, 200);
      const last = s.events[s.events.length - 1];
      if (s.anthropic ? last?.type === 'message_stop' : last === '[DONE]') continue;
      assert.ok(last && last.error, `a stream that did not finish ends with an error event: ${s.text.slice(-300)}`);
      if (s.anthropic) {
        ++erroredAnthropic;
        assert.equal(last.type, 'error');
        assert.ok(/\nevent: error\ndata: /.test(`\n${s.text}`), 'Anthropic: an `event: error` frame');
      } else {
        assert.equal(last.error.code, 'upstream_failed');
      }
      ++errored;
    }
    assert.ok(errored - erroredAnthropic >= 1 && erroredAnthropic >= 1,
              `the streams of both APIs on the killed worker ended with an error event (${errored}, ${erroredAnthropic} Anthropic)`);
    console.log(`kill: ${plain.length} non-streaming requests all 200; ${errored} of ${done.length} streams (${erroredAnthropic} Anthropic) ended with an error event`);

    // Restart on the same port: the router sees it healthy again and routes to it.
    restarted = await startWorkerOnPort(victim.port);
    const deadline = Date.now() + 20000;
    while ((await metricFor(router.base, 'deepinfer_router:worker_healthy', victim)) !== 1) {
      assert.ok(Date.now() < deadline, 'the restarted worker rejoins within 20 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const before = await metricFor(router.base, 'deepinfer_router:requests_total', victim);
    for (let i = 0; i < 4; ++i) assert.equal((await post(router.base, '/v1/chat/completions', CHAT(`after ${i}`))).status, 200);
    const after = await metricFor(router.base, 'deepinfer_router:requests_total', victim);
    assert.ok(after >= before + 2, `the rejoined worker takes requests again (${before} -> ${after})`);
    console.log('kill: the restarted worker rejoined and serves again');
  } finally {
    await stopAll([router, workers[1], restarted]);
  }
}

async function routedCounts(routerBase, workers) {
  const out = [];
  for (const w of workers) out.push(await metricFor(routerBase, 'deepinfer_router:requests_total', w));
  return out;
}

async function waitMetric(routerBase, name, worker, value) {
  const deadline = Date.now() + 20000;
  while ((await metricFor(routerBase, name, worker)) !== value) {
    assert.ok(Date.now() < deadline, `${name}{${worker.base}} reaches ${value} within 20 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function caseReload() {
  const workers = [await startWorker(), await startWorker()];
  const file = path.join(workdir, `workers_${process.pid}.txt`);
  fs.writeFileSync(file, `# only the first\n${workers[0].base}\n`);
  const router = await spawnListening(['route', '--host', '127.0.0.1', '--port', '0', '--model', modelDir,
                                       '--health-period-ms', '200', '--policy', 'round_robin', '--workers-file', file,
                                       '--max-open-requests', '2']);
  try {
    const send = async (n) => {
      for (let i = 0; i < n; ++i) assert.equal((await post(router.base, '/v1/chat/completions', CHAT(`r${i}`))).status, 200);
    };
    await send(4);
    assert.deepEqual(await routedCounts(router.base, workers), [4, 0], 'only the configured worker is used');

    fs.writeFileSync(file, `${workers[0].base}\n${workers[1].base}\n`);
    router.proc.kill('SIGHUP');
    await waitMetric(router.base, 'deepinfer_router:worker_healthy', workers[1], 1);
    await send(4);
    const [a, b] = await routedCounts(router.base, workers);
    assert.ok(b >= 2 && a >= 5, `the added worker takes requests (${a}, ${b})`);

    fs.writeFileSync(file, `${workers[1].base}\n`);
    router.proc.kill('SIGHUP');
    await waitMetric(router.base, 'deepinfer_router:worker_healthy', workers[0], 0);
    await send(4);
    const [a2, b2] = await routedCounts(router.base, workers);
    assert.equal(a2, a, 'the removed worker is drained: no new requests');
    assert.equal(b2, b + 4);

    // The router's own overload: two long streams open, the third request gets 429 + Retry-After.
    const controllers = [new AbortController(), new AbortController()];
    const open = controllers.map((c, i) => fetch(`${router.base}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, signal: c.signal,
      body: JSON.stringify({ ...CHAT(`long ${i}`), max_tokens: 3000, stream: true }),
    }));
    const heads = await Promise.all(open);
    for (const h of heads) assert.equal(h.status, 200);
    const refused = await fetch(`${router.base}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(CHAT('third')) });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal((await refused.json()).error.code, 'router_overloaded');
    for (const c of controllers) c.abort();
    for (const h of heads) await h.text().catch(() => {});
    // The clients hung up: the router closed its worker connections, so the worker cancelled both.
    const cancelledOn = async (w) => {
      const m = (await getText(`${w.base}/metrics`)).text.match(
        /^deepinfer:request_success_total\{finished_reason="cancelled"\} (\S+)$/m);
      return m ? Number(m[1]) : 0;
    };
    const cancelDeadline = Date.now() + 20000;
    while ((await cancelledOn(workers[1])) < 2) {
      assert.ok(Date.now() < cancelDeadline, 'the worker cancels the requests of clients that hung up');
      await new Promise((r) => setTimeout(r, 100));
    }

    // No worker left: /ready and requests answer 503 + Retry-After.
    fs.writeFileSync(file, '# drained\n');
    router.proc.kill('SIGHUP');
    await waitMetric(router.base, 'deepinfer_router:worker_healthy', workers[1], 0);
    assert.equal((await getText(`${router.base}/ready`)).status, 503);
    const none = await fetch(`${router.base}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(CHAT('nobody')) });
    assert.equal(none.status, 503);
    assert.equal(none.headers.get('retry-after'), '1');
    assert.equal((await none.json()).error.code, 'no_worker_available');
    console.log('reload: join, drain and empty list followed on SIGHUP; overload 429 and no-worker 503 answered');
  } finally {
    await stopAll([router, ...workers]);
    fs.rmSync(file, { force: true });
  }
}

// A free loopback TCP port for a worker's ZeroMQ PUB socket (the router must be told it up front).
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = require('node:net').createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

async function routerMetrics(routerBase) {
  return serverProcess.parseMetrics((await getText(`${routerBase}/metrics`)).text);
}

async function caseKvEvents() {
  // Worker A: a 28-block pool (1 MiB, 64-token blocks) publishing KV events; worker B: no events.
  const eventsPort = await freePort();
  const small = ['--threads', '1', '--max-model-len', '1024', '--kv-cache-mib', '1'];
  const a = await spawnListening(['serve', '--model', modelDir, '--host', '127.0.0.1', '--port', '0', ...small,
                                  '--kv-events-endpoint', `tcp://127.0.0.1:${eventsPort}`]);
  const b = await spawnListening(['serve', '--model', modelDir, '--host', '127.0.0.1', '--port', '0', ...small]);
  // Router 1 in front of A alone (so every routed request is A's), router 2 in front of B alone.
  const startRouterFor = (w, extra) => spawnListening(['route', '--host', '127.0.0.1', '--port', '0', '--model', modelDir,
                                                       '--health-period-ms', '200', '--worker', w.base, ...extra]);
  const router = await startRouterFor(a, ['--worker-events', `${a.base}=tcp://127.0.0.1:${eventsPort}`]);
  const routerB = await startRouterFor(b, []);
  const ma = (name, extra = '') => `${name}{worker="${a.base}"${extra}}`;
  let seed = 1;
  const prompt = (tag, nWords) => {  // distinct text, ~2 tokens a word
    const words = [`Tenant ${tag}:`];
    for (let i = 0; i < nWords; ++i) words.push(`w${(seed = (seed * 1103515245 + 12345) % 2147483648) % 997}`);
    return words.join(' ');
  };
  const chat = (system) => ({ model: 'tiny_v3', max_tokens: 2, temperature: 0,
                              messages: [{ role: 'system', content: system }, { role: 'user', content: 'go' }] });
  // One request through the router; returns the worker's cached tokens and the router's estimate for it.
  const routed = async (body, worker) => {
    const before = (await routerMetrics(router.base))[`deepinfer_router:estimated_hit_tokens_total{worker="${worker.base}"}`] ?? 0;
    const r = await post(router.base, '/v1/chat/completions', body);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const after = (await routerMetrics(router.base))[`deepinfer_router:estimated_hit_tokens_total{worker="${worker.base}"}`] ?? 0;
    return { cached: r.json.usage.prompt_tokens_details?.cached_tokens ?? 0, estimated: after - before,
             promptTokens: r.json.usage.prompt_tokens };
  };
  const waitFor = async (what, cond) => {
    const deadline = Date.now() + 20000;
    for (;;) {
      const m = await routerMetrics(router.base);
      if (cond(m)) return m;
      assert.ok(Date.now() < deadline, `${what} within 20 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  try {
    // ZeroMQ connects asynchronously: send short distinct prompts to A until the router has applied a batch.
    const deadline = Date.now() + 20000;
    for (let i = 0; ((await routerMetrics(router.base))[ma('deepinfer_router:kv_event_batches_total')] ?? 0) === 0; ++i) {
      assert.ok(Date.now() < deadline, 'the router receives worker A\'s events within 20 s');
      assert.equal((await post(a.base, '/v1/chat/completions', chat(prompt(`probe${i}`, 100)))).status, 200);
      await new Promise((r) => setTimeout(r, 100));
    }
    // A prompt of ~9 blocks (~2 tokens a word) sent to A directly: the router never routed it, so only
    // events can tell.
    const p1 = chat(prompt('one', 300));
    const blocks0 = (await routerMetrics(router.base))[ma('deepinfer_router:index_blocks')] ?? 0;
    const direct = await post(a.base, '/v1/chat/completions', p1);
    assert.equal(direct.status, 200, JSON.stringify(direct.json));
    const stored = await waitFor('P1\'s blocks indexed',
                                 (m) => (m[ma('deepinfer_router:index_blocks')] ?? 0) >= blocks0 + 9);
    const hit = await routed(p1, a);
    console.log(`P1 (${hit.promptTokens} tokens, sent to A directly): router estimate ${hit.estimated}, ` +
                `worker cached ${hit.cached}, A's index ${stored[ma('deepinfer_router:index_blocks')]} blocks`);
    assert.ok(hit.cached >= 448, `the worker hit P1 (${hit.cached})`);
    assert.ok(hit.estimated >= hit.cached && hit.estimated - hit.cached < 64,
              `the estimate from events (${hit.estimated}) is the worker's hit (${hit.cached}) to within a block`);

    // The same prompt under a cache salt: the worker shares nothing across salts, and neither does the
    // router (the salt's tag in the events' extra_keys, the request's cache.salt hashed the same way).
    const salted = { ...p1, cache: { salt: 'tenant-q' } };
    const storedMetric = ma('deepinfer_router:kv_event_blocks_total', ',change="stored"');
    const stored1 = (await routerMetrics(router.base))[storedMetric] ?? 0;
    const first = await routed(salted, a);
    console.log(`P1 salted, first: router estimate ${first.estimated}, worker cached ${first.cached}`);
    assert.equal(first.cached, 0, 'the worker has nothing under the new salt');
    assert.equal(first.estimated, 0, 'nor does the router expect anything');
    // (the pool is small: count stored blocks, not the index size, which evictions keep down)
    await waitFor('salted P1\'s blocks stored', (m) => (m[storedMetric] ?? 0) >= stored1 + 9);
    const again = await routed(salted, a);
    console.log(`P1 salted, again: router estimate ${again.estimated}, worker cached ${again.cached}`);
    assert.ok(again.cached >= 448 && again.estimated >= again.cached && again.estimated - again.cached < 64,
              `under its salt the estimate (${again.estimated}) is the worker's hit (${again.cached})`);

    // Flood A's pool with other prompts (direct, no routing history involved): P1's blocks are evicted.
    const removedBefore = (await routerMetrics(router.base))[ma('deepinfer_router:kv_event_blocks_total', ',change="removed"')] ?? 0;
    for (let i = 0; i < 3; ++i) assert.equal((await post(a.base, '/v1/chat/completions', chat(prompt(`flood${i}`, 350)))).status, 200);
    await waitFor('removals applied', (m) => (m[ma('deepinfer_router:kv_event_blocks_total', ',change="removed"')] ?? 0) > removedBefore);
    const evicted = await routed(p1, a);
    console.log(`P1 after the flood: router estimate ${evicted.estimated}, worker cached ${evicted.cached}`);
    assert.ok(evicted.estimated < hit.estimated, `the eviction lowered the estimate (${evicted.estimated} < ${hit.estimated})`);
    assert.ok(evicted.estimated >= evicted.cached && evicted.estimated - evicted.cached < 64,
              `after eviction the estimate (${evicted.estimated}) is still the worker's hit (${evicted.cached})`);

    // Worker B has no event stream: its index comes from routing history, at once after a decision.
    const mb = (name) => `${name}{worker="${b.base}"}`;
    const r = await post(routerB.base, '/v1/chat/completions', chat(prompt('bee', 150)));
    assert.equal(r.status, 200);
    const m = await routerMetrics(routerB.base);
    assert.equal(m[mb('deepinfer_router:index_blocks')], Math.floor(r.json.usage.prompt_tokens / 64),
                 'routing history indexed the prompt\'s blocks for B');
    assert.equal(m[mb('deepinfer_router:kv_event_batches_total')], undefined, 'B has no event stream');
  } finally {
    await stopAll([router, routerB, a, b]);
  }
}

const cases = { equal: caseEqual, cache_hits: caseCacheHits, kill_worker: caseKillWorker, reload: caseReload,
                kv_events: caseKvEvents };
if (!cases[caseName]) {
  console.error(`unknown case ${caseName}`);
  process.exit(2);
}
cases[caseName]().then(() => { console.log(`route_e2e ${caseName}: ok`); }, (e) => {
  console.error(e);
  process.exit(1);
});
