// Cache control in the APIs (docs/kvcache.md, Cache control in the APIs) through real `deepinfer
// serve` processes and the real openai and @anthropic-ai/sdk clients, on the tiny V3 checkpoint of
// serve_e2e_test.js (fixture server_tiny_model).
//
// usage: node cache_api_e2e_test.js DEEPINFER WORKDIR CASE
//   CASE fields  Anthropic cache_control: the cache split is already right in message_start, and
//                input + cache_creation + cache_read = the prompt; our cache.salt isolates tenants;
//                bad values are 400s naming the field, in each API's error shape
//        tiers   with --kv-disk-dir: prompt_cache_retention in-memory is never written; cache.ttl_s,
//                Anthropic's 1h and cache.class (--kv-ttl) set the entries' expiry; DELETE /v1/cache by
//                salt removes that tenant's entries from the SSD tier, "all" every entry
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const assert = require('node:assert/strict');
const OpenAI = require('openai').default;
const Anthropic = require('@anthropic-ai/sdk').default;
const serverProcess = require('../../bench/serve/server_process.js');

const [deepinfer, workdir, caseName] = process.argv.slice(2);
const modelDir = path.join(workdir, 'tiny_v3');
const KEY = 'client-key';
const ADMIN_KEY = 'admin-key';

function startServer(extraArgs = []) {
  return serverProcess.startServer(deepinfer, modelDir,
                                   ['--threads', '1', '--max-model-len', '1024', '--api-key', KEY, ...extraArgs], 60000);
}

async function stop(server) {
  const { code, signal } = await serverProcess.stopServer(server);
  assert.equal(code, 0, `server exit ${code ?? signal}: ${server.stderr()}`);
}

// Several 64-token blocks of text, distinct per `i`.
function longText(i) {
  return Array.from({ length: 30 }, (_, k) => `Tenant ${i} sentence ${k} is about prompt caches.`).join(' ');
}

function openai(port) {
  return new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60000 });
}

async function askOpenAi(port, i, extra = {}) {
  const body = await openai(port).chat.completions.create(
      { model: 'tiny', messages: [{ role: 'user', content: longText(i) }], max_tokens: 4, temperature: 0, ...extra });
  return body.usage;
}

// A streamed Anthropic request with a cache_control breakpoint on the system prompt: message_start's
// usage and the final usage.
async function askAnthropicStream(port, i) {
  const an = new Anthropic({ baseURL: `http://127.0.0.1:${port}/anthropic`, apiKey: KEY, maxRetries: 0 });
  const stream = await an.messages.create({
    model: 'tiny', max_tokens: 4, temperature: 0, stream: true,
    system: [{ type: 'text', text: longText(i), cache_control: { type: 'ephemeral', ttl: '1h' } }],
    messages: [{ role: 'user', content: 'Summarise.' }] });
  let start = null;
  let final = null;
  for await (const ev of stream) {
    if (ev.type === 'message_start') start = ev.message.usage;
    if (ev.type === 'message_delta') final = ev.usage;
  }
  assert.ok(start && final, 'message_start and message_delta arrived');
  return { start, final };
}

async function rawPost(port, route, body) {
  const res = await fetch(`http://127.0.0.1:${port}${route}`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, 'x-api-key': KEY },
    body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

async function caseFields() {
  const server = await startServer();
  try {
    const { port } = server;
    // Anthropic: the first request writes the prefix, the second reads it; message_start already knows.
    const first = await askAnthropicStream(port, 1);
    const second = await askAnthropicStream(port, 1);
    console.log('anthropic usage, first:', JSON.stringify(first.start), 'second:', JSON.stringify(second.start));
    const total = (u) => u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
    assert.equal(first.start.cache_read_input_tokens, 0);
    assert.ok(first.start.cache_creation_input_tokens >= 128, `first writes blocks: ${JSON.stringify(first.start)}`);
    assert.ok(second.start.cache_read_input_tokens >= 128, `message_start reports the hit: ${JSON.stringify(second.start)}`);
    assert.equal(second.start.cache_read_input_tokens, second.final.cache_read_input_tokens);
    assert.equal(second.start.cache_creation_input_tokens, second.final.cache_creation_input_tokens);
    assert.equal(total(first.start), total(second.start), 'input + creation + read = the same prompt');
    assert.equal(second.start.cache_read_input_tokens, first.start.cache_creation_input_tokens,
                 'what the first wrote, the second read');

    // Non-stream: the same split in the message body.
    const an = new Anthropic({ baseURL: `http://127.0.0.1:${port}/anthropic`, apiKey: KEY, maxRetries: 0 });
    const body = await an.messages.create({
      model: 'tiny', max_tokens: 4, temperature: 0,
      system: [{ type: 'text', text: longText(1), cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: 'Summarise.' }] });
    assert.equal(body.usage.cache_read_input_tokens, second.start.cache_read_input_tokens);
    assert.equal(body.usage.cache_creation_input_tokens, 0);
    assert.equal(total(body.usage), total(first.start));
    // Without cache directives Anthropic reports no creation: everything not read is input.
    const plain = await an.messages.create({ model: 'tiny', max_tokens: 4, temperature: 0,
                                             messages: [{ role: 'user', content: longText(9) }] });
    assert.equal(plain.usage.cache_creation_input_tokens, 0);
    assert.equal(plain.usage.cache_read_input_tokens, 0);

    // Our salt: tenant B never hits tenant A's prefix; A hits its own; no salt is its own scope.
    const a1 = await askOpenAi(port, 2, { cache: { salt: 'tenant-a', class: 'agent' } });
    const b1 = await askOpenAi(port, 2, { cache: { salt: 'tenant-b' } });
    const a2 = await askOpenAi(port, 2, { cache: { salt: 'tenant-a' } });
    const none = await askOpenAi(port, 2);
    assert.equal(a1.prompt_cache_hit_tokens, 0);
    assert.equal(b1.prompt_cache_hit_tokens, 0, 'another salt never shares KV');
    assert.ok(a2.prompt_cache_hit_tokens >= 128, `the same salt hits: ${a2.prompt_cache_hit_tokens}`);
    assert.equal(a2.prompt_tokens_details.cached_tokens, a2.prompt_cache_hit_tokens, 'OpenAI cached_tokens');
    assert.equal(a2.prompt_cache_miss_tokens, a2.prompt_tokens - a2.prompt_cache_hit_tokens);
    assert.equal(none.prompt_cache_hit_tokens, 0, 'no salt is a scope of its own');
    // OpenAI's own fields are accepted.
    const keyed = await askOpenAi(port, 3, { prompt_cache_key: 'team-7', prompt_cache_retention: '24h' });
    assert.equal(keyed.prompt_cache_hit_tokens, 0);

    // Bad values: 400 naming the field, OpenAI's shape (param) and Anthropic's (message).
    const hi = [{ role: 'user', content: 'hi' }];
    const openaiCases = [
      [{ prompt_cache_retention: 'forever' }, 'prompt_cache_retention'],
      [{ prompt_cache_key: '' }, 'prompt_cache_key'],
      [{ cache: { ttl_s: 0 } }, 'cache.ttl_s'],
      [{ cache: { salt: 7 } }, 'cache.salt'],
      [{ cache: { pinned: true } }, 'cache.pinned'],
    ];
    for (const [extra, param] of openaiCases) {
      const r = await rawPost(port, '/v1/chat/completions', { model: 'tiny', max_tokens: 2, messages: hi, ...extra });
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.equal(r.body.error.param, param, JSON.stringify(r.body));
      assert.equal(r.body.error.type, 'invalid_request_error');
    }
    const r = await rawPost(port, '/v1/completions', { model: 'tiny', max_tokens: 2, prompt: 'x', cache: 'agent' });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.param, 'cache');
    const anthropicCases = [
      [{ system: [{ type: 'text', text: 's', cache_control: { type: 'persistent' } }] }, 'system[0].cache_control.type'],
      [{ messages: [{ role: 'user', content: [{ type: 'text', text: 'q', cache_control: { type: 'ephemeral', ttl: '2h' } }] }] },
       'messages[0].content[0].cache_control.ttl'],
      [{ tools: [{ name: 't', input_schema: { type: 'object' }, cache_control: {} }] }, 'tools[0].cache_control.type'],
    ];
    for (const [extra, field] of anthropicCases) {
      const a = await rawPost(port, '/anthropic/v1/messages', { model: 'tiny', max_tokens: 2, messages: hi, ...extra });
      assert.equal(a.status, 400, JSON.stringify(a.body));
      assert.equal(a.body.type, 'error');
      assert.equal(a.body.error.type, 'invalid_request_error');
      assert.ok(a.body.error.message.startsWith(field + ':'), `${field}: ${a.body.error.message}`);
    }
  } finally {
    await stop(server);
  }
}

// Expiries (unix s) of the SSD tier's entries: the i64 at byte 56 of each header (tier_entry_format.h).
function entryExpiries(dir) {
  const out = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.kv')) out.push(Number(fs.readFileSync(p).readBigInt64LE(56)));
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return out;
}

async function waitForEntries(dir, n) {
  for (let i = 0; i < 200 && entryExpiries(dir).length < n; ++i) await new Promise((r) => setTimeout(r, 50));
  return entryExpiries(dir);
}

// The directives reach the tiers: in-memory is never written, cache.ttl_s, Anthropic's 1h and
// cache.class (through --kv-ttl) set each entry's expiry.
async function caseTiers() {
  const dir = path.join(workdir, 'cache_api_tiers');
  fs.rmSync(dir, { recursive: true, force: true });
  const server = await startServer(['--kv-disk-dir', dir, '--kv-disk-gib', '1', '--kv-ttl', 'agent=2h,default=1d',
                                    '--admin-api-key', ADMIN_KEY]);
  try {
    const { port } = server;
    await askOpenAi(port, 20, { prompt_cache_retention: 'in-memory' });
    await askOpenAi(port, 21, { cache: { ttl_s: 120 } });
    let now = Date.now() / 1000;
    let e = await waitForEntries(dir, 2);
    assert.ok(e.length >= 2, 'the ttl_s request was written');
    await new Promise((r) => setTimeout(r, 500));  // the writer had time for the in-memory one too
    e = entryExpiries(dir);
    assert.ok(e.every((t) => t > now + 100 && t < now + 140), `every entry expires in 120 s (none in-memory): ${e}`);
    const n21 = e.length;

    await askAnthropicStream(port, 22);  // cache_control ttl 1h on the system prompt
    now = Date.now() / 1000;
    e = (await waitForEntries(dir, n21 + 2)).filter((t) => t > now + 3000);
    assert.ok(e.length >= 2 && e.every((t) => t < now + 3700), `Anthropic 1h entries: ${e}`);
    const n22 = n21 + e.length;

    await askOpenAi(port, 23, { cache: { class: 'agent' } });
    now = Date.now() / 1000;
    e = (await waitForEntries(dir, n22 + 2)).filter((t) => t > now + 7000);
    assert.ok(e.length >= 2 && e.every((t) => t < now + 7300), `class agent = 2h entries: ${e}`);

    // DELETE /v1/cache reaches the SSD tier: a salted tenant's entries go, the others stay; "all" empties it.
    const before = entryExpiries(dir).length;
    await askOpenAi(port, 24, { cache: { salt: 'tenant-x' } });
    const withX = (await waitForEntries(dir, before + 2)).length;
    assert.ok(withX >= before + 2, `tenant-x wrote entries: ${before} -> ${withX}`);
    const del = async (body) => {
      const r = await fetch(`http://127.0.0.1:${port}/v1/cache`, {
        method: 'DELETE', body: JSON.stringify(body),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_KEY}` } });
      const text = await r.text();
      assert.equal(r.status, 200, text);
      return JSON.parse(text);
    };
    const byX = await del({ salt: 'tenant-x' });
    assert.equal(byX.tier_entries_removed, withX - before, JSON.stringify(byX));
    assert.equal(entryExpiries(dir).length, before, 'only tenant-x entries were removed');
    const all = await del({ all: true });
    assert.equal(all.tier_entries_removed, before, JSON.stringify(all));
    assert.equal(entryExpiries(dir).length, 0, 'all: the folder holds no entry');
  } finally {
    await stop(server);
  }
}

const cases = { fields: caseFields, tiers: caseTiers };
if (!cases[caseName]) {
  console.error(`unknown case ${caseName}`);
  process.exit(2);
}
cases[caseName]().then(() => console.log(`cache_api ${caseName}: ok`), (e) => {
  console.error(e);
  process.exit(1);
});
