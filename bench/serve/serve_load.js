#!/usr/bin/env node
// serve_load: a load generator for `deepinfer serve`. N concurrent clients (keep-alive connections,
// raw node:http so the first SSE content event can be timed) send M requests in total, a seeded mix
// of the four generation APIs (mostly streaming chat), some sharing a long prompt prefix (prefix-cache
// hits), some streams dropped by the client (right after the response head, while the request is
// queued or prefilling, or after the first content event). It reports throughput, TTFT/E2E
// percentiles, errors by kind, the server's RSS over the run and the engine's gauges from /metrics
// once the server is idle again. Exit status 0 only if no request failed (and, when it started the
// server, the server exited 0 on SIGTERM).
//
//   node bench/serve/serve_load.js --deepinfer build/release/apps/deepinfer/deepinfer --model DIR \
//        [--server-arg=--threads --server-arg=2 ...] [--clients 256] [--requests 10000] [--json out.json]
//   node bench/serve/serve_load.js --url http://127.0.0.1:8000 --pid PID ...   (a server already running)
//
// The run has two phases with the same clients: --warmup requests, a wait until the server is idle,
// then the rest. RSS is sampled idle after each phase (the "flat memory" comparison: the warm-up has
// allocated every long-lived buffer, so what grows after it grows per request) and every --rss-every
// completed requests in between. Throughput = what completed requests received (their usage's
// completion tokens) ÷ the wall time of both phases, including the drain between them.
//
// Other options (defaults in DEFAULTS below): --warmup N, --max-tokens N, --prompt-words N,
// --shared-prefix-frac F, --abort-frac F (mid-stream hang-ups), --headers-abort-frac F (hang-ups
// before the first token), --abort-max-tokens N (max_tokens of the requests that get dropped),
// --mix chat_stream:0.6,chat:0.1,... (kinds in load_requests.js), --seed S, --rss-every N,
// --timeout-s S (per request).
'use strict';
const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');
const { DEFAULT_MIX, parseMix, makeRng, planRequest, runRequest } = require('./load_requests.js');
const { startServer, stopServer, readProcStatus, scrapeWhenIdle, finishedRequests } = require('./server_process.js');

const DEFAULTS = {
  clients: 256, requests: 10000, warmup: 1000, maxTokens: 16, promptWords: 24, sharedPrefixFrac: 0.3,
  abortFrac: 0.02, headersAbortFrac: 0.01, abortMaxTokens: 512, mix: DEFAULT_MIX, seed: 1, rssEvery: 500,
  timeoutS: 300,
};

// Engine gauges and counters worth reporting (a subset of /metrics).
const METRIC_KEYS = [
  'deepinfer:num_requests_running', 'deepinfer:num_requests_waiting', 'deepinfer:kv_cache_usage_perc',
  'deepinfer:prefix_cache_queries_total', 'deepinfer:prefix_cache_hits_total', 'deepinfer:prompt_tokens_total',
  'deepinfer:generation_tokens_total',
];

function pickMetrics(m) {
  const out = {};
  for (const k of METRIC_KEYS) out[k] = m[k];
  for (const [k, v] of Object.entries(m)) if (k.startsWith('deepinfer:request_success_total')) out[k] = v;
  return out;
}

function percentiles(values) {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  const at = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
  const r = (x) => Math.round(x * 10) / 10;
  return { n: s.length, p50: r(at(50)), p90: r(at(90)), p99: r(at(99)), max: r(s[s.length - 1]) };
}

// Runs the load against a server at `base` (its pid, when known, for RSS). Returns
// { summary, results }: results holds every request's outcome (for tests), summary is what gets
// printed and written as JSON.
async function runLoad(base, pid, userOpts = {}) {
  const opts = { ...DEFAULTS, ...userOpts };
  const rng = makeRng(opts.seed);
  const plans = Array.from({ length: opts.requests }, (_, i) => planRequest(i, opts, rng));
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.clients });
  const rss = [];
  const sampleRss = (completed, phase) => {
    if (pid) rss.push({ completed, phase, ...readProcStatus(pid) });
  };
  const metricsBefore = await scrapeWhenIdle(base);
  // Every planned request reaches the engine (a dropped stream was submitted before its head came);
  // if some failed before that, the idle waits below end at their timeout.
  const finishedBefore = finishedRequests(metricsBefore);
  sampleRss(0, 'idle_start');

  const results = [];
  let completed = 0;
  const runPhase = async (from, to) => {
    let next = from;
    const worker = async () => {
      while (next < to) {
        const plan = plans[next++];
        results.push(await runRequest(agent, base, plan, opts.timeoutS * 1000));
        ++completed;
        if (opts.rssEvery > 0 && completed % opts.rssEvery === 0) sampleRss(completed, 'load');
        if (opts.onProgress) opts.onProgress(completed, opts.requests);
      }
    };
    await Promise.all(Array.from({ length: Math.min(opts.clients, to - from) }, worker));
  };

  const t0 = process.hrtime.bigint();
  const warmup = Math.min(opts.warmup, opts.requests);
  await runPhase(0, warmup);
  let metricsWarm = null;
  if (warmup > 0 && warmup < opts.requests) {
    metricsWarm = await scrapeWhenIdle(base, finishedBefore + warmup);
    sampleRss(completed, 'idle_after_warmup');
  }
  await runPhase(warmup, opts.requests);
  const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
  agent.destroy();
  const metricsAfter = await scrapeWhenIdle(base, finishedBefore + opts.requests);
  sampleRss(completed, 'idle_end');

  const ok = results.filter((r) => r.ok);
  const aborted = results.filter((r) => r.aborted);
  const failed = results.filter((r) => !r.ok && !r.aborted);
  const errorsByKind = {};
  for (const r of failed) errorsByKind[r.error_kind] = (errorsByKind[r.error_kind] ?? 0) + 1;
  const byKind = {};
  for (const r of results) byKind[r.plan.kind] = (byKind[r.plan.kind] ?? 0) + 1;
  const sum = (f) => ok.reduce((s, r) => s + f(r), 0);
  const completionTokens = sum((r) => r.usage.completion);
  const idleWarm = rss.find((s) => s.phase === 'idle_after_warmup');
  const idleEnd = rss.find((s) => s.phase === 'idle_end');
  const summary = {
    config: { ...opts, onProgress: undefined, base, host_cpus: os.cpus().length, loadavg: os.loadavg() },
    wall_s: Math.round(wallS * 100) / 100,
    requests: { planned: opts.requests, ok: ok.length, aborted: aborted.length,
                aborted_on_headers: aborted.filter((r) => r.plan.abort === 'on_headers').length,
                errors: failed.length, by_kind: byKind },
    errors_by_kind: errorsByKind,
    error_examples: failed.slice(0, 5).map((r) => ({ kind: r.error_kind, api: r.plan.kind, error: r.error })),
    throughput: {
      requests_per_s: Math.round((ok.length / wallS) * 10) / 10,
      output_tokens_per_s: Math.round(completionTokens / wallS),
    },
    tokens: { prompt: sum((r) => r.usage.prompt), cached: sum((r) => r.usage.cached), completion: completionTokens },
    ttft_ms: percentiles(results.filter((r) => r.ttft_ms !== null).map((r) => r.ttft_ms)),
    e2e_ms: percentiles(ok.map((r) => r.e2e_ms)),
    rss: {
      samples: rss,
      after_warmup_mib: idleWarm ? idleWarm.rss_kb / 1024 : null,
      end_mib: idleEnd ? idleEnd.rss_kb / 1024 : null,
      growth_after_warmup_mib: idleWarm && idleEnd ? (idleEnd.rss_kb - idleWarm.rss_kb) / 1024 : null,
      growth_bytes_per_request: idleWarm && idleEnd
                                    ? ((idleEnd.rss_kb - idleWarm.rss_kb) * 1024) / (opts.requests - warmup)
                                    : null,
    },
    metrics_before: pickMetrics(metricsBefore),
    metrics_after_warmup: metricsWarm ? pickMetrics(metricsWarm) : null,
    metrics_after: pickMetrics(metricsAfter),
  };
  return { summary, results };
}

function formatSummary(s) {
  const mb = (x) => (x === null ? 'n/a' : `${x.toFixed(1)} MiB`);
  const pct = (p) => (p ? `p50 ${p.p50}  p90 ${p.p90}  p99 ${p.p99}  max ${p.max} ms  (n=${p.n})` : 'n/a');
  const m = s.metrics_after;
  const lines = [
    `serve_load: ${s.requests.planned} requests, ${s.config.clients} clients, max_tokens ${s.config.maxTokens}, ` +
        `host ${s.config.host_cpus} CPUs, load avg at end ${s.config.loadavg.map((x) => x.toFixed(2)).join(' ')}`,
    `  ok ${s.requests.ok}  hung up ${s.requests.aborted} (${s.requests.aborted_on_headers} before the first ` +
        `token)  errors ${s.requests.errors} ` +
        JSON.stringify(s.errors_by_kind),
    `  wall ${s.wall_s} s: ${s.throughput.requests_per_s} req/s, ${s.throughput.output_tokens_per_s} output tok/s ` +
        `(prompt ${s.tokens.prompt} tok, of which prefix-cached ${s.tokens.cached})`,
    `  TTFT ${pct(s.ttft_ms)}`,
    `  E2E  ${pct(s.e2e_ms)}`,
    `  RSS after warm-up ${mb(s.rss.after_warmup_mib)}, at end ${mb(s.rss.end_mib)}, growth ` +
        `${mb(s.rss.growth_after_warmup_mib)}` +
        (s.rss.growth_bytes_per_request === null ? '' : ` (${Math.round(s.rss.growth_bytes_per_request)} B/request)`),
    `  idle server after the run: running ${m['deepinfer:num_requests_running']}, waiting ` +
        `${m['deepinfer:num_requests_waiting']}, kv_cache_usage_perc ${m['deepinfer:kv_cache_usage_perc']}`,
  ];
  for (const e of s.error_examples) lines.push(`  error example: ${e.kind} (${e.api}): ${e.error}`);
  return lines.join('\n');
}

class UsageError extends Error {}

function parseArgs(argv) {
  const opts = { serverArgs: [] };
  const numeric = { '--clients': 'clients', '--requests': 'requests', '--warmup': 'warmup',
                    '--max-tokens': 'maxTokens', '--prompt-words': 'promptWords',
                    '--shared-prefix-frac': 'sharedPrefixFrac', '--abort-frac': 'abortFrac',
                    '--headers-abort-frac': 'headersAbortFrac',
                    '--abort-max-tokens': 'abortMaxTokens', '--seed': 'seed', '--rss-every': 'rssEvery',
                    '--timeout-s': 'timeoutS', '--pid': 'pid' };
  const strings = { '--url': 'url', '--deepinfer': 'deepinfer', '--model': 'model', '--json': 'json' };
  for (let i = 0; i < argv.length; ++i) {
    let [flag, value] = argv[i].split(/=(.*)/s);
    const takeValue = () => (value !== undefined ? value : argv[++i]);
    if (flag in numeric) {
      const v = Number(takeValue());
      if (!Number.isFinite(v) || v < 0) throw new UsageError(`${flag} needs a number >= 0`);
      opts[numeric[flag]] = v;
    } else if (flag in strings) {
      opts[strings[flag]] = takeValue();
    } else if (flag === '--mix') {
      try {
        opts.mix = parseMix(takeValue());
      } catch (e) {
        throw new UsageError(e.message);
      }
    } else if (flag === '--server-arg') {
      opts.serverArgs.push(takeValue());
    } else if (flag === '--help' || flag === '-h') {
      // The usage is the header comment of this file.
      const lines = fs.readFileSync(__filename, 'utf8').split('\n').slice(1);
      const header = lines.slice(0, lines.findIndex((l) => !l.startsWith('//')));
      console.log(header.map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
      process.exit(0);
    } else {
      throw new UsageError(`unknown argument ${argv[i]}; see the header of ${__filename}`);
    }
  }
  if (!opts.url && !(opts.deepinfer && opts.model)) throw new UsageError('need --url, or --deepinfer and --model');
  if (opts.clients < 1) throw new UsageError('--clients must be >= 1');
  return opts;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  let server = null;
  let base = opts.url;
  let pid = opts.pid;
  if (!base) {
    server = await startServer(opts.deepinfer, opts.model, opts.serverArgs);
    base = server.base;
    pid = server.pid;
  }
  let last = 0;
  opts.onProgress = (done, total) => {
    if (done - last >= Math.max(1, Math.floor(total / 10))) {
      last = done;
      process.stderr.write(`  ${done}/${total}\n`);
    }
  };
  const { summary } = await runLoad(base, pid, opts);
  if (server) summary.server_exit = await stopServer(server);
  console.log(formatSummary(summary));
  if (server) console.log(`  server exit on SIGTERM: ${JSON.stringify(summary.server_exit)}`);
  if (opts.json) fs.writeFileSync(opts.json, JSON.stringify(summary, null, 2) + '\n');
  const clean = summary.requests.errors === 0 && (!server || summary.server_exit.code === 0);
  process.exitCode = clean ? 0 : 1;
}

if (require.main === module) {
  main().catch((e) => {
    console.error(e instanceof UsageError ? `serve_load: ${e.message}` : e);
    process.exit(2);
  });
}

module.exports = { runLoad, formatSummary, DEFAULTS };
