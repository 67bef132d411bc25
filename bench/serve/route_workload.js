// Pieces shared by the router's e2e test (tests/server/route_e2e_test.js) and its benchmark
// (bench/serve/route_bench.js): spawning a listening deepinfer process, plain and streamed requests
// with their TTFT, and the multi-tenant workload (distinct ~2k-token system prompts, a few requests
// each, shuffled) whose cached-token ratio compares routing policies.
'use strict';
const { spawn } = require('node:child_process');
const assert = require('node:assert/strict');

// Spawns `deepinfer ARGS` and resolves once it prints "listening on http://127.0.0.1:PORT".
function spawnListening(deepinfer, args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(deepinfer, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`${args[0]} did not start: ${err}`)); }, 60000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, pid: proc.pid, port: Number(m[1]), base: `http://127.0.0.1:${m[1]}`, stderr: () => err });
      }
    });
    proc.stderr.on('data', (d) => { err = (err + d).slice(-20000); });
    proc.on('exit', (code, signal) => { clearTimeout(timer); reject(new Error(`${args[0]} exited (${code ?? signal}): ${err}`)); });
  });
}

async function post(base, route, body, key) {
  const headers = { 'content-type': 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(base + route, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json().catch(() => null) };
}

// A streamed request: the raw SSE text, the time to the first content byte, and the parsed data events.
async function postStream(base, route, body, key) {
  const headers = { 'content-type': 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const t0 = performance.now();
  const res = await fetch(base + route, { method: 'POST', headers, body: JSON.stringify({ ...body, stream: true }) });
  let text = '';
  let ttftMs = null;
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body) {
      text += decoder.decode(chunk, { stream: true });
      if (ttftMs === null && /"(content|text|delta)":"[^"]/.test(text)) ttftMs = performance.now() - t0;
    }
  } catch (e) {
    text += `\n[client read error: ${e.message}]`;
  }
  const events = text.split('\n\n').filter((e) => e.includes('data: ')).map((e) => {
    const data = e.split('\n').find((l) => l.startsWith('data: ')).slice(6);
    return data === '[DONE]' ? '[DONE]' : JSON.parse(data);
  });
  return { status: res.status, text, events, ttftMs };
}

// Deterministic shuffling and text.
function rng(seed) {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 2 ** 32; };
}
const WORDS = 'alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud maple'.split(' ');
function systemPrompt(tenant, nTokensApprox, rand) {
  const words = [`Tenant ${tenant} rules:`];
  for (let i = 0; i < nTokensApprox; ++i) words.push(WORDS[Math.floor(rand() * WORDS.length)]);
  return words.join(' ');
}

// `seed` picks the prompts: runs with distinct seeds share no prefix (no cache carried over).
async function runWorkload(routerBase, policyTag, nTenants, perTenant, seed) {
  const rand = rng(seed);
  const prompts = Array.from({ length: nTenants }, (_, t) => systemPrompt(`${policyTag}-${t}`, 2000, rand));
  const order = [];
  for (let t = 0; t < nTenants; ++t) for (let k = 0; k < perTenant; ++k) order.push([t, k]);
  for (let i = order.length - 1; i > 0; --i) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  let prompt = 0;
  let cached = 0;
  const ttfts = [];
  for (const [t, k] of order) {
    const body = { model: 'tiny_v3', max_tokens: 2, temperature: 0, stream_options: { include_usage: true },
                   messages: [{ role: 'system', content: prompts[t] }, { role: 'user', content: `question ${k}` }] };
    const s = await postStream(routerBase, '/v1/chat/completions', body);
    assert.equal(s.status, 200);
    const usage = s.events.filter((e) => e !== '[DONE]' && e.usage).map((e) => e.usage).pop();
    assert.ok(usage, 'the stream reports usage');
    prompt += usage.prompt_tokens;
    cached += usage.prompt_tokens_details?.cached_tokens ?? 0;
    if (s.ttftMs !== null) ttfts.push(s.ttftMs);
  }
  const meanTtft = ttfts.reduce((a, b) => a + b, 0) / ttfts.length;
  return { hitRatio: cached / prompt, meanTtft, prompt, cached };
}


module.exports = { spawnListening, post, postStream, runWorkload };
