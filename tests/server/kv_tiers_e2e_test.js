// `deepinfer serve --kv-disk-dir` with real processes (docs/kvcache.md, Tiers), on the tiny V3
// checkpoint of serve_e2e_test.js (fixture server_tiny_model). Greedy decoding is deterministic, so
// a restored prefix must give exactly the cold server's text.
//
// usage: node kv_tiers_e2e_test.js DEEPINFER WORKDIR CASE
//   CASE restart  a second server on the same folder hits what the first wrote: same text as cold,
//                 the restored tokens reported as cached
//        corrupt  a flipped byte in every entry: every entry is a miss, the text is still the cold one
//        kill9    SIGKILL during heavy writes, then a restart on the folder: every answer is the cold one
//        redis_shared  two servers (no disk tier) share one redis-server the test starts: B hits what A wrote
//        redis_killed  redis-server killed mid-run: every request still succeeds with the cold text
'use strict';
const { spawn } = require('node:child_process');
const net = require('node:net');
const fs = require('node:fs');
const path = require('node:path');
const assert = require('node:assert/strict');
const OpenAI = require('openai').default;
const serverProcess = require('../../bench/serve/server_process.js');

const [deepinfer, workdir, caseName] = process.argv.slice(2);
const modelDir = path.join(workdir, 'tiny_v3');
const diskDir = path.join(workdir, `kv_tiers_${caseName}`);

function startServer(extraArgs = []) {
  return serverProcess.startServer(deepinfer, modelDir, ['--threads', '1', '--max-model-len', '1024', ...extraArgs],
                                   60000);
}
const withTiers = () => ['--kv-disk-dir', diskDir, '--kv-disk-gib', '1'];

async function stop(server) {
  const { code, signal } = await serverProcess.stopServer(server);
  assert.equal(code, 0, `server exit ${code ?? signal}: ${server.stderr()}`);
}

// Several 64-token blocks of prompt, distinct per `i`.
function prompt(i) {
  return Array.from({ length: 30 }, (_, k) => `Topic ${i} sentence ${k} is about storage tiers.`).join(' ');
}

async function ask(port, i) {
  const oa = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });
  const body = await oa.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: prompt(i) }],
                                                  max_tokens: 12, temperature: 0 });
  return { text: body.choices[0].message.content, hit: body.usage.prompt_cache_hit_tokens,
           prompt: body.usage.prompt_tokens };
}

function entryFiles() {
  const out = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.kv')) out.push(p);
    }
  };
  walk(diskDir);
  return out;
}

async function coldAnswers(ids) {
  const cold = await startServer();
  try {
    const answers = [];
    for (const i of ids) answers.push(await ask(cold.port, i));
    return answers;
  } finally {
    await stop(cold);
  }
}

async function caseRestart() {
  const [cold] = await coldAnswers([0]);
  const a = await startServer(withTiers());
  const first = await ask(a.port, 0);
  await stop(a);
  assert.equal(first.text, cold.text);
  assert.equal(first.hit, 0);
  assert.ok(entryFiles().length >= 2, 'the first server wrote entries');

  const b = await startServer(withTiers());
  try {
    const again = await ask(b.port, 0);
    assert.equal(again.text, cold.text, 'a restored prefix gives the cold text');
    assert.ok(again.hit >= 128 && again.hit < again.prompt, `restored tokens reported as cached: ${again.hit}`);
    const metrics = await (await fetch(`http://127.0.0.1:${b.port}/metrics`)).text();
    const value = (re) => Number((metrics.match(re) || [null, 'NaN'])[1]);
    assert.ok(value(/^deepinfer:kv_tier_hits_total\{tier="disk"\} (\S+)$/m) >= 2, 'per-tier hits in /metrics');
    assert.equal(value(/^deepinfer:kv_tier_restored_tokens_total (\S+)$/m), again.hit);
    assert.ok(value(/^deepinfer:kv_tier_entries\{tier="disk"\} (\S+)$/m) >= 2);
    // The read latency histogram: one observation per hit, buckets cumulative up to +Inf.
    const hits = value(/^deepinfer:kv_tier_hits_total\{tier="disk"\} (\S+)$/m);
    assert.equal(value(/^deepinfer:kv_tier_read_latency_seconds_count\{tier="disk"\} (\S+)$/m), hits);
    assert.equal(value(/^deepinfer:kv_tier_read_latency_seconds_bucket\{tier="disk",le="\+Inf"\} (\S+)$/m), hits);
    assert.ok(value(/^deepinfer:kv_tier_read_latency_seconds_sum\{tier="disk"\} (\S+)$/m) > 0);
  } finally {
    await stop(b);
  }
  assert.match(b.stderr(), /kv tiers: 1 restores/);
}

async function caseCorrupt() {
  const [cold] = await coldAnswers([1]);
  const a = await startServer(withTiers());
  await ask(a.port, 1);
  await stop(a);
  const files = entryFiles();
  assert.ok(files.length >= 2);
  for (const f of files) {
    const bytes = fs.readFileSync(f);
    bytes[bytes.length >> 1] ^= 0x01;
    fs.writeFileSync(f, bytes);
  }
  const b = await startServer(withTiers());
  try {
    const again = await ask(b.port, 1);
    assert.equal(again.text, cold.text);
    assert.equal(again.hit, 0, 'a corrupt entry is a miss');
  } finally {
    await stop(b);
  }
  // The corrupt first entry was deleted and B wrote it anew: a third server restores it (and drops
  // the next corrupt one when it reads it), still with the cold text.
  const c = await startServer(withTiers());
  try {
    const third = await ask(c.port, 1);
    assert.equal(third.text, cold.text);
    assert.ok(third.hit >= 64, `the rewritten entry is restored: ${third.hit}`);
  } finally {
    await stop(c);
  }
}

async function caseKill9() {
  const ids = Array.from({ length: 32 }, (_, i) => 100 + i);
  const cold = await coldAnswers(ids);
  const a = await startServer([...withTiers(), '--max-running', '4']);
  // Heavy writes: every request writes its prompt and output blocks; SIGKILL as soon as a few have
  // answered, with the rest running and their blocks queued or being written.
  let nAnswered = 0;
  let killed;
  const killedAfterFour = new Promise((resolve) => { killed = resolve; });
  const inflight = ids.map((i) => ask(a.port, i).then(() => { if (++nAnswered === 4) killed(); }, () => null));
  await killedAfterFour;
  a.proc.kill('SIGKILL');
  await Promise.all(inflight);
  const b = await startServer(withTiers());
  try {
    let hits = 0;
    for (let k = 0; k < ids.length; ++k) {
      const again = await ask(b.port, ids[k]);
      assert.equal(again.text, cold[k].text, `prompt ${ids[k]} after kill -9`);
      if (again.hit > 0) ++hits;
    }
    console.log(`kill9: killed after ${nAnswered} answers; ${hits} of ${ids.length} prompts restored after the restart`);
  } finally {
    await stop(b);
  }
}

// A real redis-server on a free loopback port, no persistence; resolves once it answers PING.
async function startRedis() {
  const port = await new Promise((resolve) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => { const p = srv.address().port; srv.close(() => resolve(p)); });
  });
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
                     { stdio: 'ignore' });
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline) {
    const pong = await new Promise((resolve) => {
      const sock = net.connect(port, '127.0.0.1', () => sock.write('PING\r\n'));
      sock.on('data', (d) => { sock.destroy(); resolve(String(d).startsWith('+PONG')); });
      sock.on('error', () => resolve(false));
    });
    if (pong) return { proc, port, url: `redis://127.0.0.1:${port}` };
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  proc.kill('SIGKILL');
  throw new Error('redis-server did not start');
}

function redisArgs(url) {
  fs.mkdirSync(diskDir, { recursive: true });
  return ['--kv-redis', url, '--kv-secret-file', path.join(diskDir, 'shared_secret')];
}

async function caseRedisShared() {
  const [cold] = await coldAnswers([2]);
  const redis = await startRedis();
  try {
    const a = await startServer(redisArgs(redis.url));
    const first = await ask(a.port, 2);
    await stop(a);
    assert.equal(first.text, cold.text);
    assert.equal(first.hit, 0);
    const b = await startServer(redisArgs(redis.url));
    try {
      const again = await ask(b.port, 2);
      assert.equal(again.text, cold.text, 'B restores what A wrote');
      assert.ok(again.hit >= 128, `B reports the restored tokens as cached: ${again.hit}`);
    } finally {
      await stop(b);
    }
  } finally {
    redis.proc.kill('SIGKILL');
  }
}

async function caseRedisKilled() {
  const ids = [3, 4, 5, 6];
  const cold = await coldAnswers(ids);
  const redis = await startRedis();
  const a = await startServer(redisArgs(redis.url));
  try {
    assert.equal((await ask(a.port, ids[0])).text, cold[0].text);
    redis.proc.kill('SIGKILL');
    await new Promise((resolve) => redis.proc.on('exit', resolve));
    // Redis is gone: lookups, restores and writes fail fast and are skipped; requests never fail.
    for (let k = 0; k < ids.length; ++k) assert.equal((await ask(a.port, ids[k])).text, cold[k].text);
  } finally {
    await stop(a);
  }
}

const cases = { restart: caseRestart, corrupt: caseCorrupt, kill9: caseKill9, redis_shared: caseRedisShared,
                redis_killed: caseRedisKilled };
(async () => {
  fs.rmSync(diskDir, { recursive: true, force: true });
  try {
    await cases[caseName]();
    console.log(`kv_tiers_e2e ${caseName}: ok`);
  } finally {
    fs.rmSync(diskDir, { recursive: true, force: true });
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
