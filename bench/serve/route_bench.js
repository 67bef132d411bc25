// Benchmark of `deepinfer route` (docs/router.md, docs/benchmarks.md) on loopback, tiny model:
//   1. added latency: the same cheap request (GET /v1/models; non-streaming chat, max_tokens 1) sent
//      directly to a worker, through a router that keeps connections alive and through one that does
//      not (--max-idle-connections 0), in turn, one at a time; p50/p99 of each and of the per-triple
//      differences;
//   2. decision time: the router's own deepinfer_router:decision_seconds (render + tokenize + hash + pick);
//   3. hit-token ratio and mean TTFT per policy on the multi-tenant workload (fresh prompts per policy),
//      cache_aware twice: fed by routing history and by the workers' KV events (--worker-events).
//
// usage: node bench/serve/route_bench.js DEEPINFER MODEL_DIR [N_LATENCY=300] [TENANTS=8] [PER_TENANT=4]
'use strict';
const serverProcess = require('./server_process.js');
const { spawnListening, post, runWorkload } = require('./route_workload.js');

const [deepinfer, modelDir, nArg, tenantsArg, perArg] = process.argv.slice(2);
const N = Number(nArg ?? 300);
const TENANTS = Number(tenantsArg ?? 8);
const PER_TENANT = Number(perArg ?? 4);

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function timed(base) {
  const t0 = performance.now();
  const r = await post(base, '/v1/chat/completions',
                       { model: 'm', messages: [{ role: 'user', content: 'ping' }], max_tokens: 1, temperature: 0 });
  if (r.status !== 200) throw new Error(`status ${r.status}`);
  return performance.now() - t0;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = require('node:net').createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

async function main() {
  const workerArgs = ['--threads', '1', '--max-model-len', '4096'];
  const eventPorts = [await freePort(), await freePort(), await freePort()];
  const workers = [];
  const routers = [];
  // A bench killed half-way (Ctrl-C, a closed pipe) must not leave its servers behind.
  process.on('exit', () => { for (const p of [...workers, ...routers]) p.proc.kill('SIGKILL'); });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGPIPE']) process.on(sig, () => process.exit(1));
  process.stdout.on('error', () => process.exit(1));
  for (let i = 0; i < 3; ++i) {
    workers.push(await serverProcess.startServer(
        deepinfer, modelDir, [...workerArgs, '--kv-events-endpoint', `tcp://127.0.0.1:${eventPorts[i]}`], 60000));
  }
  const router = async (policy, workerList = workers, extra = []) => {
    const r = await spawnListening(deepinfer, [
      'route', '--host', '127.0.0.1', '--port', '0', '--model', modelDir, '--policy', policy,
      ...workerList.flatMap((w) => ['--worker', w.base]), ...extra]);
    routers.push(r);
    return r;
  };
  try {
    // 1 + 2: one worker behind the routers, so direct and routed hit the same engine.
    const r = await router('cache_aware', [workers[0]]);
    const r0 = await router('cache_aware', [workers[0]], ['--max-idle-connections', '0']);
    const models = async (base) => {
      const t0 = performance.now();
      const res = await fetch(`${base}/v1/models`);
      await res.text();
      return performance.now() - t0;
    };
    const fmt = (x) => x.toFixed(3);
    const pct = (a) => { a.sort((x, y) => x - y); return `p50 ${fmt(quantile(a, 0.5))} p99 ${fmt(quantile(a, 0.99))}`; };
    // Triples (direct, kept-alive router, no-reuse router) one after the other; the added latency is the
    // distribution of the per-triple difference (the medians alone drift with the machine's other load).
    const measure = async (label, fn) => {
      for (let i = 0; i < 20; ++i) { await fn(workers[0].base); await fn(r.base); await fn(r0.base); }  // warm-up
      const direct = [], routed = [], routed0 = [], added = [], added0 = [];
      for (let i = 0; i < N; ++i) {
        const d = await fn(workers[0].base);
        const t = await fn(r.base);
        const t0 = await fn(r0.base);
        direct.push(d);
        routed.push(t);
        routed0.push(t0);
        added.push(t - d);
        added0.push(t0 - d);
      }
      console.log(`${label} (ms, n=${N}): direct ${pct(direct)}; routed, kept-alive ${pct(routed)}; ` +
                  `routed, no reuse ${pct(routed0)}`);
      console.log(`  added by the router (per triple): kept-alive ${pct(added)}; no reuse ${pct(added0)}`);
    };
    await measure('GET /v1/models (relay only)', models);
    await measure('chat max_tokens 1 (render + tokenize + pick + relay)', timed);
    const m = serverProcess.parseMetrics(await (await fetch(`${r.base}/metrics`)).text());
    await serverProcess.stopServer(r);
    await serverProcess.stopServer(r0);
    const dsum = m['deepinfer_router:decision_seconds_sum'];
    const dcount = m['deepinfer_router:decision_seconds_count'];
    console.log(`decision time: mean ${(1e6 * dsum / dcount).toFixed(1)} us over ${dcount} decisions; ` +
                `connections reused ${m['deepinfer_router:worker_connections_total{event="reused"}']}, ` +
                `opened ${m['deepinfer_router:worker_connections_total{event="opened"}']}`);

    // 3: the policies on the multi-tenant workload, 3 workers.
    let seed = 100;
    const events = workers.flatMap((w, i) => ['--worker-events', `${w.base}=tcp://127.0.0.1:${eventPorts[i]}`]);
    for (const variant of ['round_robin', 'random', 'least_load', 'cache_aware', 'cache_aware+events']) {
      const policy = variant.split('+')[0];
      const rr = await router(policy, workers, variant.endsWith('+events') ? events : []);
      if (variant.endsWith('+events')) await new Promise((res) => setTimeout(res, 500));  // SUB sockets connect
      const res = await runWorkload(rr.base, policy, TENANTS, PER_TENANT, ++seed);
      const pm = serverProcess.parseMetrics(await (await fetch(`${rr.base}/metrics`)).text());
      await serverProcess.stopServer(rr);
      const decisionUs = 1e6 * pm['deepinfer_router:decision_seconds_sum'] / pm['deepinfer_router:decision_seconds_count'];
      const estimated = Object.entries(pm).filter(([k]) => k.startsWith('deepinfer_router:estimated_hit_tokens_total'))
          .reduce((acc, [, v]) => acc + v, 0);
      // Only cache_aware renders prompts (the others route without the index): its estimate vs the real hits.
      const estimate = policy === 'cache_aware' ? `, router's estimate ${(estimated / res.prompt).toFixed(3)}` : '';
      console.log(`${variant}: hit-token ratio ${res.hitRatio.toFixed(3)}${estimate}, ` +
                  `mean TTFT ${res.meanTtft.toFixed(1)} ms, ` +
                  `mean decision ${decisionUs.toFixed(0)} us ` +
                  `(${TENANTS} tenants x ${PER_TENANT} requests, ~2k-token system prompts, 3 workers)`);
    }
  } finally {
    for (const w of workers) await serverProcess.stopServer(w);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
