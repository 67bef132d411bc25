// End-to-end tests of the client tools against a real `deepinfer serve` on a tiny random-weights
// checkpoint (make-model) on an ephemeral loopback port: `bench serve` + `bench plot`, `eval`.
// Random weights answer gibberish, so eval's accuracy is ~0 here; its scoring is unit-tested on
// scripted answers (apps/deepinfer/eval/eval_test.cpp). This checks the figures hang together.
//
// usage: node tools_e2e_test.js DEEPINFER WORKDIR TASKS_DIR CASE     CASE: make_model | bench | eval
'use strict';
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const assert = require('node:assert/strict');
const serverProcess = require('../../bench/serve/server_process.js');

const [deepinfer, workdir, tasksDir, caseName] = process.argv.slice(2);
const modelDir = path.join(workdir, 'tiny_v3');

function startServer(extraArgs = []) {
  return serverProcess.startServer(deepinfer, modelDir, ['--threads', '1', '--max-model-len', '1024', ...extraArgs],
                                   60000);
}

// Runs deepinfer with args; returns stdout (throws with stderr on a non-zero exit).
function run(args) {
  const r = spawnSync(deepinfer, args, { encoding: 'utf8', timeout: 120000 });
  if (r.status !== 0) throw new Error(`deepinfer ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

function httpStatus(url) {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode);
    }).on('error', reject);
  });
}

// Width and height from a PNG's IHDR chunk, after checking the signature.
function pngSize(file) {
  const b = fs.readFileSync(file);
  assert.ok(b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), `${file}: PNG magic`);
  assert.equal(b.subarray(12, 16).toString('latin1'), 'IHDR', `${file}: IHDR first`);
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20), bytes: b.length };
}

function checkBenchResult(r, numPrompts, maxTokens) {
  assert.equal(r.completed, numPrompts, `all requests completed: ${JSON.stringify(r.errors)}`);
  assert.equal(r.failed, 0);
  assert.equal(r.token_counts_from_usage, true);
  assert.equal(r.ttfts.length, numPrompts);
  assert.equal(r.output_lens.reduce((a, b) => a + b, 0), r.total_output_tokens);
  assert.equal(r.input_lens.reduce((a, b) => a + b, 0), r.total_input_tokens);
  for (const n of r.output_lens) assert.ok(n >= 1 && n <= maxTokens, `output length ${n} in [1, ${maxTokens}]`);
  const near = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));
  assert.ok(near(r.output_throughput, r.total_output_tokens / r.duration), 'output throughput = tokens / duration');
  assert.ok(near(r.request_throughput, r.completed / r.duration), 'request throughput = completed / duration');
  assert.ok(near(r.total_token_throughput, (r.total_input_tokens + r.total_output_tokens) / r.duration));
  for (const m of ['ttft', 'tpot', 'itl', 'e2el']) {
    const [med, p90, p99] = [r[`median_${m}_ms`], r[`p90_${m}_ms`], r[`p99_${m}_ms`]];
    assert.ok(med > 0 && med <= p90 && p90 <= p99, `${m} percentiles ordered: ${med} ${p90} ${p99}`);
  }
  const maxE2e = Math.max(...r.e2els);
  assert.ok(r.duration >= maxE2e, 'the run lasts at least its longest request');
  assert.ok(r.p99_ttft_ms <= r.p99_e2el_ms + 1e-9, 'first token before the end');
  const meanTtft = r.ttfts.reduce((a, b) => a + b, 0) / r.ttfts.length * 1000;
  assert.ok(Math.abs(meanTtft - r.mean_ttft_ms) < 1e-6, 'mean TTFT matches the per-request list');
}

async function caseMakeModel() {
  fs.rmSync(modelDir, { recursive: true, force: true });
  execFileSync(deepinfer, ['make-model', '--preset', 'tiny', '--dtype', 'bf16', '--seed', '0', '--out', modelDir],
               { stdio: 'inherit' });
}

async function caseBench() {
  const server = await startServer();
  const files = [];
  let outputTokens = 0;
  try {
    for (const [c, dataset] of [[1, 'random'], [4, 'shared-prefix']]) {
      const file = path.join(workdir, `bench_c${c}.json`);
      run(['bench', 'serve', '--base-url', server.base, '--dataset', dataset, '--num-prompts', '12',
           '--random-input-len', '24', '--random-output-len', '8', '--shared-prefix-len', '80', '--max-concurrency',
           String(c), '--request-rate', c === 1 ? 'inf' : '50', '--seed', '3', '--goodput', 'ttft:60000',
           '--result-file', file]);
      const r = JSON.parse(fs.readFileSync(file, 'utf8'));
      checkBenchResult(r, 12, 8);
      assert.equal(r.max_concurrency, c);
      assert.equal(r.dataset, dataset);
      assert.equal(r.model_id, 'tiny_v3');
      assert.ok(r.request_goodput > 0 && r.request_goodput <= r.request_throughput + 1e-9);
      files.push(file);
      outputTokens += r.total_output_tokens;
    }
    // The server counted the same requests and tokens: 12 + 12 plus 2 probes of 1 to 4 tokens each.
    const m = await serverProcess.scrapeWhenIdle(server.base, 26);
    assert.equal(serverProcess.finishedRequests(m), 26);
    const probeTokens = m['deepinfer:generation_tokens_total'] - outputTokens;
    assert.ok(probeTokens >= 2 && probeTokens <= 8, `server generated ${probeTokens} tokens beyond the figures`);
  } finally {
    const { code } = await serverProcess.stopServer(server);
    assert.equal(code, 0);
  }
  // Usage errors exit 2; a server that is gone is a runtime error (exit 1) naming the connection.
  let r = spawnSync(deepinfer, ['bench', 'serve', '--base-url', server.base, '--request-rate', 'fast'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--request-rate must be a number > 0 or inf/);
  r = spawnSync(deepinfer, ['bench', 'serve', '--base-url', server.base, '--model', 'm', '--num-prompts', '1'],
                { encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /test request failed: connect 127\.0\.0\.1:\d+/);
  const outDir = path.join(workdir, 'plots');
  fs.rmSync(outDir, { recursive: true, force: true });
  run(['bench', 'plot', ...files, '--out', outDir]);
  for (const name of ['decode_pareto.png', 'prefill_pareto.png']) {
    const size = pngSize(path.join(outDir, name));
    assert.equal(size.width, 800);
    assert.equal(size.height, 550);
    assert.ok(size.bytes > 10000, 'a chart, not an empty image');
  }
}

async function caseEval() {
  const server = await startServer(['--no-chat-page']);
  try {
    assert.equal((await httpStatus(server.base + '/')), 404, '--no-chat-page: no page at /');
    for (const task of ['arithmetic', 'unit_conversion', 'json_format']) {
      const log = path.join(workdir, `eval_${task}.jsonl`);
      const result = path.join(workdir, `eval_${task}.json`);
      const out = run(['eval', '--base-url', server.base, '--task', path.join(tasksDir, `${task}.jsonl`), '--limit',
                       '6', '--n', '2', '--k', '1', '2', '--temperature', '0.8', '--seed', '1', '--max-tokens', '8',
                       '--concurrency', '3', '--log-file', log, '--result-file', result]);
      assert.match(out, /accuracy \d\.\d{4} \(95% CI/);
      const s = JSON.parse(fs.readFileSync(result, 'utf8'));
      assert.equal(s.items, 6);
      assert.equal(s.samples, 12);
      assert.equal(s.failed_requests, 0);
      assert.ok(s.accuracy >= 0 && s.accuracy <= 1);
      assert.ok(s.accuracy_ci95[0] <= s.accuracy && s.accuracy <= s.accuracy_ci95[1]);
      assert.ok(s.pass_at_k['pass@2'] >= s.pass_at_k['pass@1']);
      const lines = fs.readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      assert.equal(lines.length, 12);
      assert.equal(lines.filter((l) => l.correct).length, s.correct_samples);
      for (const l of lines) {
        assert.equal(l.error, null);
        assert.ok(l.completion_tokens >= 1 && l.completion_tokens <= 8);
        assert.equal(typeof l.content, 'string');
      }
      assert.equal(s.completion_tokens, lines.reduce((a, l) => a + l.completion_tokens, 0));
    }
    // A bad task file is a usage error naming the file.
    const bad = path.join(workdir, 'bad_task.jsonl');
    fs.writeFileSync(bad, '{"question": "x"}\n');
    const r = spawnSync(deepinfer, ['eval', '--base-url', server.base, '--task', bad], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /bad_task\.jsonl:1: field 'answer'/);
  } finally {
    const { code } = await serverProcess.stopServer(server);
    assert.equal(code, 0);
  }
}

const cases = { make_model: caseMakeModel, bench: caseBench, eval: caseEval };
if (!cases[caseName]) {
  console.error(`unknown case ${caseName}`);
  process.exit(2);
}
cases[caseName]().then(() => console.log(`tools_e2e ${caseName}: ok`), (e) => {
  console.error(e);
  process.exit(1);
});
