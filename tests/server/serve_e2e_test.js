// Black-box tests of `deepinfer serve` driven by the real client libraries (openai 6.x,
// @anthropic-ai/sdk) over loopback, on a tiny make-model checkpoint (random weights: the text is
// gibberish, but greedy decoding is deterministic, which is what these tests lean on).
//
// usage: node serve_e2e_test.js DEEPINFER WORKDIR CASE
//   CASE make_model | chat | other_apis | errors | auth | disconnect
// Each case starts its own server on an ephemeral port (--port 0; the port is read from the
// "listening on" line) and stops it with SIGTERM, which must exit 0.
'use strict';
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const assert = require('node:assert/strict');
const OpenAI = require('openai').default;
const Anthropic = require('@anthropic-ai/sdk').default;

const [deepinfer, workdir, caseName] = process.argv.slice(2);
const modelDir = path.join(workdir, 'tiny_v3');
const KEY = 'sk-test-e2e-key-0123456789';

function startServer(extraArgs = []) {
  return new Promise((resolve, reject) => {
    const proc = spawn(deepinfer, ['serve', '--model', modelDir, '--host', '127.0.0.1', '--port', '0',
                                   '--threads', '1', '--max-model-len', '1024', ...extraArgs],
                       { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error('server did not start in 60 s: ' + err)), 60000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, port: Number(m[1]), stderr: () => err });
      }
    });
    proc.stderr.on('data', (d) => { err += d; });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}: ${err}`)); });
  });
}

function stopServer(server) {
  return new Promise((resolve) => {
    server.proc.removeAllListeners('exit');
    server.proc.on('exit', (code, signal) => resolve({ code, signal }));
    server.proc.kill('SIGTERM');
  });
}

function client(port, apiKey = KEY) {
  return new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
}

// A prompt of a few hundred tokens: longer than one 64-token KV block, so a repeat can hit the
// prefix cache.
const LONG_PROMPT = Array.from({ length: 40 }, (_, i) => `Sentence number ${i} talks about caching.`).join(' ');

function checkUsage(usage) {
  assert.ok(usage.prompt_tokens > 0, 'prompt_tokens > 0');
  assert.equal(usage.prompt_cache_hit_tokens + usage.prompt_cache_miss_tokens, usage.prompt_tokens,
               'cache hit + miss == prompt tokens');
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
}

async function caseMakeModel() {
  fs.rmSync(modelDir, { recursive: true, force: true });
  execFileSync(deepinfer, ['make-model', '--preset', 'tiny', '--dtype', 'bf16', '--seed', '0', '--out', modelDir],
               { stdio: 'inherit' });
}

async function caseChat() {
  const server = await startServer();
  try {
    const oa = client(server.port);
    const params = { model: 'tiny', messages: [{ role: 'user', content: 'Hello, who are you?' }],
                     max_tokens: 12, temperature: 0 };
    const body = await oa.chat.completions.create(params);
    assert.equal(body.object, 'chat.completion');
    assert.equal(body.choices.length, 1);
    const message = body.choices[0].message;
    assert.equal(message.role, 'assistant');
    assert.equal(typeof message.content, 'string');
    assert.ok(['length', 'stop'].includes(body.choices[0].finish_reason));
    checkUsage(body.usage);
    assert.ok(body.usage.completion_tokens >= 1 && body.usage.completion_tokens <= 12);

    // Greedy decoding: the stream's chunks reassemble to the non-stream body.
    const stream = await oa.chat.completions.create({ ...params, stream: true });
    let content = '';
    let finish = null;
    let usage = null;
    let nChunks = 0;
    for await (const chunk of stream) {
      ++nChunks;
      assert.equal(chunk.object, 'chat.completion.chunk');
      const choice = chunk.choices[0];
      if (choice.delta.content) content += choice.delta.content;
      if (choice.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.ok(nChunks >= 2, 'role chunk + final chunk at least');
    assert.equal(content, message.content, 'stream reassembles to the non-stream content');
    assert.equal(finish, body.choices[0].finish_reason);
    assert.ok(usage, 'usage on the last chunk');
    checkUsage(usage);
    assert.equal(usage.prompt_tokens, body.usage.prompt_tokens);
    assert.equal(usage.completion_tokens, body.usage.completion_tokens);

    // A stop sequence taken from the greedy output cuts the content right before its first match.
    const chars = Array.from(message.content);
    assert.ok(chars.length >= 6, `greedy output long enough for the stop test: ${JSON.stringify(message.content)}`);
    {
      const stop = chars.slice(3, 5).join('');
      const expected = message.content.slice(0, message.content.indexOf(stop));
      const stopped = await oa.chat.completions.create({ ...params, stop: [stop] });
      assert.equal(stopped.choices[0].message.content, expected, `content up to stop ${JSON.stringify(stop)}`);
      assert.equal(stopped.choices[0].finish_reason, 'stop');
      checkUsage(stopped.usage);
      const sstream = await oa.chat.completions.create({ ...params, stop: [stop], stream: true });
      let scontent = '';
      let sfinish = null;
      for await (const chunk of sstream) {
        scontent += chunk.choices[0].delta.content ?? '';
        sfinish = chunk.choices[0].finish_reason ?? sfinish;
      }
      assert.equal(scontent, expected);
      assert.equal(sfinish, 'stop');
    }

    // Prefix cache: the second identical long request reuses the first one's prompt blocks.
    const longParams = { model: 'tiny', messages: [{ role: 'user', content: LONG_PROMPT }], max_tokens: 4,
                         temperature: 0 };
    const first = await oa.chat.completions.create(longParams);
    checkUsage(first.usage);
    assert.ok(first.usage.prompt_tokens > 128, `long prompt has ${first.usage.prompt_tokens} tokens`);
    const second = await oa.chat.completions.create(longParams);
    checkUsage(second.usage);
    assert.equal(second.usage.prompt_tokens, first.usage.prompt_tokens);
    assert.ok(second.usage.prompt_cache_hit_tokens > 0, 'second identical request hits the prefix cache');
    assert.ok(second.usage.prompt_cache_hit_tokens > first.usage.prompt_cache_hit_tokens);
    assert.equal(second.usage.prompt_tokens_details.cached_tokens, second.usage.prompt_cache_hit_tokens);
    assert.equal(second.choices[0].message.content, first.choices[0].message.content, 'cache hits change nothing');

    // Logprobs: one entry per generated token, each <= 0, top alternatives sorted.
    const lp = await oa.chat.completions.create({ ...params, logprobs: true, top_logprobs: 3 });
    const entries = lp.choices[0].logprobs.content;
    assert.equal(entries.length, lp.usage.completion_tokens);
    for (const e of entries) {
      assert.ok(e.logprob <= 0);
      assert.equal(e.top_logprobs.length, 3);
      assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
      assert.ok(e.top_logprobs[0].logprob >= e.logprob - 1e-6, 'greedy picks the most likely token');
    }
    assert.equal(lp.choices[0].message.content, message.content);

    // Metrics see the requests.
    const metrics = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
    const hits = metrics.match(/^deepinfer:prefix_cache_hits_total (\S+)$/m);
    assert.ok(hits && Number(hits[1]) > 0, 'prefix cache hits exported');
  } finally {
    const { code } = await stopServer(server);
    assert.equal(code, 0, 'SIGTERM: clean exit');
  }
}

// Completions, Anthropic Messages (under /anthropic, as DeepSeek serves it) and Responses: each
// API's stream reassembles to its own non-stream body, and the chat-shaped APIs agree with Chat
// Completions on the same conversation (same prompt rendering, greedy decoding).
async function caseOtherApis() {
  const server = await startServer();
  try {
    const oa = client(server.port);
    const messages = [{ role: 'user', content: 'Tell me a story.' }];
    const chat = await oa.chat.completions.create({ model: 'tiny', messages, max_tokens: 10, temperature: 0 });
    const chatText = chat.choices[0].message.content;

    // Completions on the raw prompt.
    const cparams = { model: 'tiny', prompt: 'Once upon a time', max_tokens: 10, temperature: 0 };
    const comp = await oa.completions.create(cparams);
    assert.equal(comp.object, 'text_completion');
    checkUsage(comp.usage);
    let ctext = '';
    let cfinish = null;
    for await (const chunk of await oa.completions.create({ ...cparams, stream: true })) {
      ctext += chunk.choices[0]?.text ?? '';
      cfinish = chunk.choices[0]?.finish_reason ?? cfinish;
    }
    assert.equal(ctext, comp.choices[0].text);
    assert.equal(cfinish, comp.choices[0].finish_reason);
    const echoed = await oa.completions.create({ ...cparams, echo: true });
    assert.equal(echoed.choices[0].text, 'Once upon a time' + comp.choices[0].text);

    // Anthropic Messages through the Anthropic SDK.
    const an = new Anthropic({ baseURL: `http://127.0.0.1:${server.port}/anthropic`, apiKey: KEY, maxRetries: 0 });
    const aparams = { model: 'tiny', max_tokens: 10, messages, temperature: 0 };
    const msg = await an.messages.create(aparams);
    assert.equal(msg.type, 'message');
    assert.equal(msg.role, 'assistant');
    const msgText = msg.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
    assert.equal(msgText, chatText, 'Messages and Chat Completions agree');
    assert.equal(msg.usage.output_tokens, chat.usage.completion_tokens);
    assert.equal(msg.usage.input_tokens + msg.usage.cache_read_input_tokens, chat.usage.prompt_tokens);
    const final = await an.messages.stream(aparams).finalMessage();
    assert.equal(final.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), msgText);
    assert.equal(final.stop_reason, msg.stop_reason);
    assert.equal(final.usage.output_tokens, msg.usage.output_tokens);
    await assert.rejects(an.messages.create({ ...aparams, max_tokens: undefined }),
                         (e) => e instanceof Anthropic.BadRequestError && e.error?.type === 'error');

    // Responses.
    const rparams = { model: 'tiny', input: messages, max_output_tokens: 10, temperature: 0 };
    const resp = await oa.responses.create(rparams);
    assert.equal(resp.object, 'response');
    assert.equal(resp.output_text, chatText, 'Responses and Chat Completions agree');
    assert.equal(resp.usage.output_tokens, chat.usage.completion_tokens);
    let rtext = '';
    let completed = null;
    for await (const ev of await oa.responses.create({ ...rparams, stream: true })) {
      if (ev.type === 'response.output_text.delta') rtext += ev.delta;
      if (ev.type === 'response.completed' || ev.type === 'response.incomplete') completed = ev.response;
    }
    assert.equal(rtext, resp.output_text);
    assert.ok(completed, 'a final response event');
    assert.equal(completed.status, resp.status);
  } finally {
    const { code } = await stopServer(server);
    assert.equal(code, 0);
  }
}

async function caseErrors() {
  const server = await startServer();
  try {
    const base = `http://127.0.0.1:${server.port}`;
    const bad = await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: '{"messages": [',
                                                             headers: { 'content-type': 'application/json' } });
    assert.equal(bad.status, 400);
    const badBody = await bad.json();
    assert.equal(badBody.error.type, 'invalid_request_error');
    assert.equal(typeof badBody.error.message, 'string');
    assert.ok('param' in badBody.error && 'code' in badBody.error);

    // Anthropic routes answer in Anthropic's error shape.
    const abad = await fetch(`${base}/anthropic/v1/messages`, { method: 'POST', body: '{"messages": [' });
    assert.equal(abad.status, 400);
    const abadBody = await abad.json();
    assert.equal(abadBody.type, 'error');
    assert.equal(abadBody.error.type, 'invalid_request_error');

    const unknown = await fetch(`${base}/v1/does-not-exist`, { method: 'POST', body: '{}' });
    assert.equal(unknown.status, 404);
    assert.equal((await unknown.json()).error.code, 'not_found');

    // The SDK sees a typed 400 with the field path.
    const oa = client(server.port);
    await assert.rejects(
        oa.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], temperature: 7 }),
        (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature');
    await assert.rejects(oa.chat.completions.create({ model: 'tiny', messages: [] }),
                         (e) => e instanceof OpenAI.BadRequestError);
    // Prompt + max_tokens over the context: 400 from the engine, not a crash.
    await assert.rejects(
        oa.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: LONG_PROMPT.repeat(4) }],
                                     max_tokens: 8 }),
        (e) => e instanceof OpenAI.BadRequestError);

    // The server keeps serving after the errors.
    const ok = await oa.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }],
                                                 max_tokens: 3, temperature: 0 });
    checkUsage(ok.usage);
    assert.equal((await fetch(`${base}/health`)).status, 200);
  } finally {
    const { code } = await stopServer(server);
    assert.equal(code, 0);
  }
}

async function caseAuth() {
  const keyFile = path.join(workdir, 'keys.txt');
  fs.writeFileSync(keyFile, `# test keys\n${KEY}\n`);
  const server = await startServer(['--api-key-file', keyFile]);
  try {
    const params = { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0 };
    await assert.rejects(client(server.port, 'sk-wrong').chat.completions.create(params),
                         (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const raw = await fetch(`http://127.0.0.1:${server.port}/v1/chat/completions`,
                            { method: 'POST', body: JSON.stringify(params) });
    assert.equal(raw.status, 401);
    const rawBody = await raw.text();
    assert.equal(JSON.parse(rawBody).error.type, 'authentication_error');
    assert.ok(!rawBody.includes(KEY), 'keys are never echoed');
    const ok = await client(server.port).chat.completions.create(params);
    checkUsage(ok.usage);
    // Health stays open without a key.
    assert.equal((await fetch(`http://127.0.0.1:${server.port}/health`)).status, 200);
  } finally {
    const { code } = await stopServer(server);
    assert.equal(code, 0);
  }
}

async function runningRequests(port) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const m = text.match(/^deepinfer:num_requests_running (\S+)$/m);
  assert.ok(m, 'num_requests_running exported');
  return Number(m[1]);
}

async function caseDisconnect() {
  const server = await startServer();
  try {
    const oa = client(server.port);
    // A long generation the client abandons after its first content chunk: the engine request is
    // cancelled (its slot frees), and the server keeps serving.
    const controller = new AbortController();
    const stream = await oa.chat.completions.create(
        { model: 'tiny', messages: [{ role: 'user', content: 'go on' }], max_tokens: 900, temperature: 0,
          stream: true },
        { signal: controller.signal });
    let seen = 0;
    try {
      for await (const chunk of stream) {
        if (chunk.choices[0].delta.content) ++seen;
        if (seen >= 2) controller.abort();
      }
    } catch (e) {
      assert.ok(e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError, `abort, got ${e}`);
    }
    assert.ok(seen >= 2);
    let running = 1;
    for (let i = 0; i < 100 && running !== 0; ++i) {
      await new Promise((r) => setTimeout(r, 100));
      running = await runningRequests(server.port);
    }
    assert.equal(running, 0, 'the abandoned request left the engine');
    // It ended by cancellation, not by running to max_tokens.
    const metrics = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
    const cancelled = metrics.match(/^deepinfer:request_success_total\{finished_reason="cancelled"\} (\S+)$/m);
    assert.ok(cancelled && Number(cancelled[1]) === 1, 'one request finished as cancelled');
    assert.ok(!/finished_reason="length"/.test(metrics), 'none ran to max_tokens');
    const ok = await oa.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }],
                                                 max_tokens: 2, temperature: 0 });
    checkUsage(ok.usage);
  } finally {
    const { code } = await stopServer(server);
    assert.equal(code, 0);
  }
}

const CASES = { make_model: caseMakeModel, chat: caseChat, other_apis: caseOtherApis, errors: caseErrors, auth: caseAuth,
                disconnect: caseDisconnect };

(async () => {
  const fn = CASES[caseName];
  if (!fn) throw new Error(`unknown case ${caseName}; cases: ${Object.keys(CASES).join(' ')}`);
  await fn();
  console.log(`serve_e2e ${caseName}: ok`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
