// Black-box tests of `deepinfer serve` driven by the real client libraries (openai 6.x,
// @anthropic-ai/sdk) over loopback, on a tiny make-model checkpoint (random weights: the text is
// gibberish, but greedy decoding is deterministic, which is what these tests lean on).
//
// usage: node serve_e2e_test.js DEEPINFER WORKDIR CASE
//   CASE make_model | chat | other_apis | errors | auth | disconnect | overload | limits | tokenize |
//        metrics | choices
// Each case starts its own server on an ephemeral port (--port 0; the port is read from the
// "listening on" line) and stops it with SIGTERM, which must exit 0.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const assert = require('node:assert/strict');
const OpenAI = require('openai').default;
const Anthropic = require('@anthropic-ai/sdk').default;
const serverProcess = require('../../bench/serve/server_process.js');

const [deepinfer, workdir, caseName] = process.argv.slice(2);
const modelDir = path.join(workdir, 'tiny_v3');
const KEY = 'sk-test-e2e-key-0123456789';

// `deepinfer serve` on an ephemeral loopback port (bench/serve/server_process.js), stopped with
// SIGTERM, which must exit 0.
function startServer(extraArgs = []) {
  return serverProcess.startServer(deepinfer, modelDir, ['--threads', '1', '--max-model-len', '1024', ...extraArgs],
                                   60000);
}
const { stopServer } = serverProcess;

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

// `n` > 1 (Chat Completions and Completions): choice i samples with seed + i and equals a single
// request with that seed (the siblings fork from choice 0's cached prompt blocks, and a cache hit
// changes nothing on V3); the prompt is counted once, completions summed; the stream interleaves
// the choices by index, closes each with its own finish_reason and ends with one usage chunk.
async function caseChoices() {
  const server = await startServer();
  try {
    const oa = client(server.port);
    const metricsText = async () => (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
    const hitsNow = async () => metricValue(parsePrometheus(await metricsText()), 'deepinfer:prefix_cache_hits_total');
    const params = { model: 'tiny', messages: [{ role: 'user', content: LONG_PROMPT }], max_tokens: 10,
                     temperature: 1, seed: 40 };
    const hitsBefore = await hitsNow();
    const three = await oa.chat.completions.create({ ...params, n: 3 });
    const hitsAfter = await hitsNow();
    assert.equal(three.choices.length, 3);
    assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
    const singles = [];
    for (let i = 0; i < 3; ++i) singles.push(await oa.chat.completions.create({ ...params, seed: 40 + i }));
    for (let i = 0; i < 3; ++i) {
      assert.equal(three.choices[i].message.content, singles[i].choices[0].message.content, `choice ${i} = seed ${40 + i}`);
      assert.equal(three.choices[i].finish_reason, singles[i].choices[0].finish_reason);
    }
    assert.notEqual(three.choices[0].message.content, three.choices[1].message.content, 'choices differ at T=1');
    assert.equal(three.usage.prompt_tokens, singles[0].usage.prompt_tokens, 'the prompt counts once');
    assert.equal(three.usage.completion_tokens, singles.reduce((a, r) => a + r.usage.completion_tokens, 0));
    checkUsage(three.usage);
    // The two siblings hit choice 0's full prompt blocks (64 tokens each).
    const fullBlocks = Math.floor(singles[0].usage.prompt_tokens / 64) * 64;
    assert.ok(fullBlocks >= 128, `prompt of ${singles[0].usage.prompt_tokens} tokens`);
    assert.ok(hitsAfter - hitsBefore >= 2 * fullBlocks, `siblings share the prompt: ${hitsAfter - hitsBefore} hit tokens`);

    // Streaming: per-index reassembly equals the bodies; one finish per choice; a final usage chunk.
    const stream = await oa.chat.completions.create({ ...params, n: 3, stream: true });
    const texts = ['', '', ''];
    const finishes = [[], [], []];
    let usage = null;
    let last = null;
    for await (const chunk of stream) {
      last = chunk;
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        texts[c.index] += c.delta.content ?? '';
        if (c.finish_reason) finishes[c.index].push(c.finish_reason);
      }
    }
    assert.deepEqual(last.choices, [], 'the last chunk carries only usage');
    for (let i = 0; i < 3; ++i) {
      assert.equal(texts[i], three.choices[i].message.content, `stream choice ${i}`);
      assert.deepEqual(finishes[i], [three.choices[i].finish_reason]);
    }
    assert.equal(usage.completion_tokens, three.usage.completion_tokens);
    assert.equal(usage.prompt_tokens, three.usage.prompt_tokens);

    // Completions with n = 2 and a stop string: each choice cut on its own.
    const comp = await oa.completions.create({ model: 'tiny', prompt: LONG_PROMPT, max_tokens: 8, temperature: 1,
                                               seed: 7, n: 2 });
    assert.deepEqual(comp.choices.map((c) => c.index), [0, 1]);
    for (let i = 0; i < 2; ++i) {
      const one = await oa.completions.create({ model: 'tiny', prompt: LONG_PROMPT, max_tokens: 8, temperature: 1,
                                                seed: 7 + i });
      assert.equal(comp.choices[i].text, one.choices[0].text, `completion choice ${i}`);
    }
    // Limits: n beyond --max-choices (default 8) is a 400 naming n.
    await assert.rejects(oa.chat.completions.create({ ...params, n: 9 }), (e) => e.status === 400 && e.param === 'n');
    // Nothing left running (every sibling finished or was cancelled).
    const samples = parsePrometheus(await metricsText());
    assert.equal(metricValue(samples, 'deepinfer:num_requests_running'), 0);
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

// ---- overload: the bounded admission queue answers 429 + Retry-After ----

// One raw HTTP request; the whole body is read (a stream to its end).
async function rawPost(port, route, body, headers = {}) {
  const res = await fetch(`http://127.0.0.1:${port}${route}`,
                          { method: 'POST', body: JSON.stringify(body),
                            headers: { 'content-type': 'application/json', ...headers } });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

function checkOverloadBody(r, style, retryAfter) {
  assert.equal(r.status, 429);
  assert.equal(r.headers.get('retry-after'), String(retryAfter), 'Retry-After on 429');
  assert.ok(r.headers.get('content-type').startsWith('application/json'), 'a plain error, not a stream');
  const body = JSON.parse(r.text);
  if (style === 'openai') {
    assert.deepEqual(Object.keys(body), ['error']);
    assert.equal(body.error.type, 'rate_limit_error');
    assert.equal(body.error.code, 'engine_overloaded');
    assert.equal(body.error.param, null);
    assert.match(body.error.message, /max_waiting 1/);
  } else {
    assert.equal(body.type, 'error');
    assert.equal(body.error.type, 'overloaded_error', 'Anthropic names server overload overloaded_error');
    assert.equal(typeof body.error.message, 'string');
  }
}

// Text of a finished SSE stream: every data line parsed, [DONE] excluded.
function sseData(text) {
  return text.split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
             .map((l) => JSON.parse(l.slice(6)));
}

async function caseOverload() {
  const retryAfter = 2;
  const server = await startServer(['--max-running', '1', '--max-waiting', '1', '--retry-after-s', String(retryAfter)]);
  try {
    const port = server.port;
    const oa = client(port);
    const an = new Anthropic({ baseURL: `http://127.0.0.1:${port}/anthropic`, apiKey: KEY, maxRetries: 0 });
    // Long enough generations that one running + one waiting request hold the queue while the
    // rest arrive (they are all sent in the same tick).
    const messages = [{ role: 'user', content: 'Write a long story.' }];
    const chat = { model: 'tiny', messages, max_tokens: 200, temperature: 0 };
    const kinds = [];
    const calls = [];
    for (let i = 0; i < 3; ++i) {
      kinds.push('raw-chat');
      calls.push(rawPost(port, '/v1/chat/completions', chat));
      kinds.push('raw-chat-stream');
      calls.push(rawPost(port, '/v1/chat/completions', { ...chat, stream: true }));
    }
    kinds.push('raw-messages', 'raw-messages-stream');
    calls.push(rawPost(port, '/anthropic/v1/messages', { model: 'tiny', max_tokens: 200, messages }));
    calls.push(rawPost(port, '/anthropic/v1/messages', { model: 'tiny', max_tokens: 200, messages, stream: true }));
    kinds.push('sdk-chat', 'sdk-chat-stream', 'sdk-messages', 'sdk-messages-stream');
    calls.push(oa.chat.completions.create(chat));
    calls.push((async () => {
      let n = 0;
      for await (const chunk of await oa.chat.completions.create({ ...chat, stream: true })) n += chunk.choices.length;
      return { streamed: n };
    })());
    calls.push(an.messages.create({ model: 'tiny', max_tokens: 200, messages }));
    calls.push(an.messages.stream({ model: 'tiny', max_tokens: 200, messages }).finalMessage());
    assert.equal(calls.length, 12);
    const results = await Promise.allSettled(calls);

    let n429 = 0;
    let nOk = 0;
    results.forEach((r, i) => {
      const kind = kinds[i];
      if (kind.startsWith('raw-')) {
        assert.equal(r.status, 'fulfilled', `${kind}: raw requests do not throw`);
        const res = r.value;
        if (res.status === 429) {
          ++n429;
          checkOverloadBody(res, kind.includes('messages') ? 'anthropic' : 'openai', retryAfter);
          return;
        }
        assert.equal(res.status, 200, `${kind}: 200 or 429, got ${res.status}: ${res.text}`);
        ++nOk;
        if (kind.endsWith('-stream')) {
          const events = sseData(res.text);
          assert.ok(events.length >= 2, `${kind}: a whole stream`);
          assert.ok(!events.some((e) => e.error || e.type === 'error'), `${kind}: no error inside the stream`);
        } else {
          const body = JSON.parse(res.text);
          assert.ok(body.usage, `${kind}: a whole body`);
        }
        return;
      }
      if (r.status === 'rejected') {
        const e = r.reason;
        const sdk = kind.includes('messages') ? Anthropic : OpenAI;
        assert.ok(e instanceof sdk.RateLimitError, `${kind}: only 429 may fail, got ${e}`);
        assert.equal(e.status, 429);
        assert.equal(e.headers.get('retry-after'), String(retryAfter));
        if (kind.includes('messages')) {
          assert.equal(e.error.type, 'error');
          assert.equal(e.error.error.type, 'overloaded_error');
        } else {
          assert.equal(e.code, 'engine_overloaded');
          assert.equal(e.type, 'rate_limit_error');
        }
        ++n429;
        return;
      }
      ++nOk;
      if (kind === 'sdk-chat') checkUsage(r.value.usage);
      if (kind === 'sdk-chat-stream') assert.ok(r.value.streamed >= 2);
      if (kind.startsWith('sdk-messages')) assert.equal(r.value.type, 'message');
    });
    assert.equal(n429 + nOk, 12);
    assert.ok(n429 >= 1, 'a full queue refuses some requests');
    assert.ok(nOk >= 1, 'the admitted requests complete');
    console.log(`overload: ${nOk} completed, ${n429} got 429`);

    // The refusals were counted per route and status, and nothing is left queued.
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const refused = [...metrics.matchAll(/^deepinfer:http_requests_total\{[^}]*status="429"[^}]*\} (\S+)$/gm)]
                        .reduce((sum, m) => sum + Number(m[1]), 0);
    assert.equal(refused, n429);
    assert.match(metrics, /^deepinfer:num_requests_waiting 0$/m);

    // The server keeps serving.
    for (let i = 0; i < 2; ++i) checkUsage((await oa.chat.completions.create({ ...chat, max_tokens: 4 })).usage);
  } finally {
    const { code } = await stopServer(server);
    assert.equal(code, 0);
  }

  // 503 + Retry-After: past the connection cap a new connection is answered and closed.
  const capped = await startServer(['--max-connections', '1', '--retry-after-s', String(retryAfter)]);
  try {
    const holder = net.connect(capped.port, '127.0.0.1');
    await new Promise((resolve, reject) => { holder.once('connect', resolve); holder.once('error', reject); });
    // The server counts the connection once it accepted it; a request on it proves that.
    holder.write('GET /health HTTP/1.1\r\nHost: t\r\n\r\n');
    await new Promise((resolve) => holder.once('data', resolve));
    const res = await fetch(`http://127.0.0.1:${capped.port}/health`);
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), String(retryAfter));
    const body = await res.json();
    assert.equal(body.error.code, 'too_many_connections');
    assert.equal(body.error.type, 'service_unavailable_error');
    holder.destroy();
    let status = 503;
    for (let i = 0; i < 50 && status === 503; ++i) {
      await new Promise((r) => setTimeout(r, 50));
      status = (await fetch(`http://127.0.0.1:${capped.port}/health`, { headers: { connection: 'close' } })).status;
    }
    assert.equal(status, 200, 'a freed connection slot serves again');
  } finally {
    const { code } = await stopServer(capped);
    assert.equal(code, 0);
  }
}

// ---- limits: each configured limit is a 400 naming the field (413 for the body) ----

async function tokenCount(port, messages) {
  const r = await rawPost(port, '/tokenize', { model: 'tiny', messages }, { authorization: `Bearer ${KEY}` });
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text).count;
}

async function caseLimits() {
  const maxModelLen = 1024;
  const server = await startServer(['--max-messages', '3', '--max-tools', '2', '--max-tool-schema-bytes', '200',
                                    '--max-stop-sequences', '2', '--max-stop-bytes', '8', '--max-tokens-cap', '100',
                                    '--max-body-bytes', '65536', '--default-max-tokens', '4096']);
  try {
    const port = server.port;
    const auth = { authorization: `Bearer ${KEY}` };
    const hi = [{ role: 'user', content: 'hi' }];
    const base = { model: 'tiny', messages: hi, max_tokens: 2, temperature: 0 };
    const schema = (n) => ({ type: 'object', properties: { q: { type: 'string', description: 'x'.repeat(n) } } });
    const fn = (name, n = 10) => ({ type: 'function', function: { name, parameters: schema(n) } });
    // [route, body, expected param (OpenAI) or message prefix (Anthropic)]
    const cases = [
      ['/v1/chat/completions', { ...base, messages: [...hi, { role: 'assistant', content: 'a' }, ...hi, ...hi] }, 'messages'],
      ['/v1/chat/completions', { ...base, tools: [fn('a'), fn('b'), fn('c')], tool_choice: 'none' }, 'tools'],
      ['/v1/chat/completions', { ...base, tools: [fn('a', 300)], tool_choice: 'none' }, 'tools[0].function.parameters'],
      ['/v1/responses', { model: 'tiny', input: 'hi', tools: [{ type: 'function', name: 'a', parameters: schema(300) }] },
       'tools[0].parameters'],
      ['/anthropic/v1/messages', { model: 'tiny', max_tokens: 2, messages: hi,
                                   tools: [{ name: 'a', input_schema: schema(300) }] }, 'tools[0].input_schema'],
      ['/v1/chat/completions', { ...base, stop: ['a', 'b', 'c'] }, 'stop'],
      ['/v1/chat/completions', { ...base, stop: ['ok', '123456789'] }, 'stop[1]'],
      ['/anthropic/v1/messages', { model: 'tiny', max_tokens: 2, messages: hi, stop_sequences: ['a', 'b', 'c'] },
       'stop_sequences'],
      ['/v1/chat/completions', { ...base, max_tokens: 101 }, 'max_tokens'],
      ['/v1/completions', { model: 'tiny', prompt: 'hi', max_tokens: 101 }, 'max_tokens'],
      ['/anthropic/v1/messages', { model: 'tiny', max_tokens: 101, messages: hi }, 'max_tokens'],
      ['/v1/responses', { model: 'tiny', input: 'hi', max_output_tokens: 101 }, 'max_output_tokens'],
      // Prompts over the context: the prompt's field is named.
      ['/v1/chat/completions', { ...base, messages: [{ role: 'user', content: LONG_PROMPT.repeat(4) }] }, 'messages'],
      ['/v1/completions', { model: 'tiny', prompt: LONG_PROMPT.repeat(4), max_tokens: 2 }, 'prompt'],
      ['/v1/responses', { model: 'tiny', input: LONG_PROMPT.repeat(4), max_output_tokens: 2 }, 'input'],
    ];
    for (const [route, body, field] of cases) {
      const r = await rawPost(port, route, body, auth);
      assert.equal(r.status, 400, `${route} ${field}: ${r.text}`);
      const err = JSON.parse(r.text);
      if (route.includes('messages')) {
        assert.equal(err.type, 'error');
        assert.equal(err.error.type, 'invalid_request_error');
        assert.ok(err.error.message.startsWith(`${field}: `), `${field}: ${err.error.message}`);
      } else {
        assert.equal(err.error.param, field, `${route}: ${r.text}`);
      }
    }
    // The SDK sees the same 400 with its param.
    await assert.rejects(client(port).chat.completions.create({ ...base, max_tokens: 101 }),
                         (e) => e instanceof OpenAI.BadRequestError && e.param === 'max_tokens');

    // A prompt that fits, with max_tokens (under the cap) that does not: max_tokens is named.
    // Sized with /tokenize: " filler" costs the same number of tokens each time it repeats.
    const filler = (k) => [{ role: 'user', content: LONG_PROMPT + ' filler'.repeat(k) }];
    const n0 = await tokenCount(port, filler(0));
    const perFiller = ((await tokenCount(port, filler(100))) - n0) / 100;
    const fill = filler(Math.floor((maxModelLen - 50 - n0) / perFiller));
    const nFill = await tokenCount(port, fill);
    assert.ok(nFill > maxModelLen - 100 && nFill < maxModelLen - 2, `filler prompt has ${nFill} tokens`);
    const tooMuch = await rawPost(port, '/v1/chat/completions', { ...base, messages: fill, max_tokens: 100 }, auth);
    assert.equal(tooMuch.status, 400);
    assert.equal(JSON.parse(tooMuch.text).error.param, 'max_tokens');
    // Without max_tokens the default (4096 here) shrinks to what the context leaves.
    const rest = await client(port).chat.completions.create({ model: 'tiny', messages: fill, temperature: 0 });
    checkUsage(rest.usage);
    assert.equal(rest.usage.prompt_tokens, nFill);
    if (rest.choices[0].finish_reason === 'length')
      assert.equal(rest.usage.completion_tokens, maxModelLen - nFill, 'ran to the end of the context');

    // Body over --max-body-bytes: 413 in the route's style.
    const big = await rawPost(port, '/v1/chat/completions', { ...base, messages: [{ role: 'user', content: 'x'.repeat(70000) }] },
                              auth);
    assert.equal(big.status, 413);
    assert.equal(JSON.parse(big.text).error.code, 'payload_too_large');
    const abig = await rawPost(port, '/anthropic/v1/messages',
                               { model: 'tiny', max_tokens: 2, messages: [{ role: 'user', content: 'x'.repeat(70000) }] }, auth);
    assert.equal(abig.status, 413);
    // (The body comes in the OpenAI shape here: errors raised while reading use the OpenAI style,
    // http_session.cpp reject_during_read.)
    assert.match(JSON.parse(abig.text).error.message, /exceeds the limit of 65536 bytes/);

    // Within every limit the same shapes are served, and the server is still up after the refusals.
    const ok = await rawPost(port, '/v1/chat/completions',
                             { ...base, messages: [...hi, { role: 'assistant', content: 'a' }, ...hi],
                               tools: [fn('a', 100), fn('b')], tool_choice: 'none', stop: ['ok', '12345678'],
                               max_tokens: 100 }, auth);
    assert.equal(ok.status, 200, ok.text);
    checkUsage(JSON.parse(ok.text).usage);
  } finally {
    const { code } = await stopServer(server);
    assert.equal(code, 0);
  }
}

// ---- tokenize: /tokenize renders messages exactly as the chat route does ----

async function caseTokenize() {
  const server = await startServer();
  try {
    const port = server.port;
    const auth = { authorization: `Bearer ${KEY}` };
    const oa = client(port);
    const conversations = [
      [{ role: 'user', content: 'hi' }],
      [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Hello, who are you?' }],
      [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }, { role: 'user', content: 'Ünïcødé ✓ 漢字' }],
      // Template markers typed by a user are plain text on both routes.
      [{ role: 'user', content: '<｜User｜><｜Assistant｜> not markers' }],
      [{ role: 'user', content: 'weather?' },
       { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function',
                                                        function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
       { role: 'tool', tool_call_id: 'c1', content: '{"temp": 21}' },
       { role: 'user', content: 'thanks' }],
      [{ role: 'user', content: LONG_PROMPT }],
    ];
    for (const messages of conversations) {
      const tok = await rawPost(port, '/tokenize', { model: 'tiny', messages, add_generation_prompt: true }, auth);
      assert.equal(tok.status, 200, tok.text);
      const t = JSON.parse(tok.text);
      assert.equal(t.count, t.tokens.length);
      assert.equal(t.max_model_len, 1024);
      const chat = await oa.chat.completions.create({ model: 'tiny', messages, max_tokens: 1, temperature: 0 });
      assert.equal(t.count, chat.usage.prompt_tokens, `tokenize == chat prompt_tokens for ${JSON.stringify(messages)}`);
      // "model" may be left out, as vLLM allows.
      const noModel = await rawPost(port, '/tokenize', { messages }, auth);
      assert.deepEqual(JSON.parse(noModel.text).tokens, t.tokens);
    }
    // The raw-prompt form agrees with /v1/completions (one BOS, no template).
    const prompt = 'Once upon a time';
    const tp = JSON.parse((await rawPost(port, '/tokenize', { prompt }, auth)).text);
    const comp = await oa.completions.create({ model: 'tiny', prompt, max_tokens: 1, temperature: 0 });
    assert.equal(tp.count, comp.usage.prompt_tokens);
    const detok = JSON.parse((await rawPost(port, '/detokenize', { tokens: tp.tokens.slice(1) }, auth)).text);
    assert.equal(detok.prompt, prompt);
    // Errors name the field.
    const bad = await rawPost(port, '/tokenize', { messages: [{ role: 'user', content: 'x' }], add_generation_prompt: false },
                              auth);
    assert.equal(bad.status, 400);
    assert.equal(JSON.parse(bad.text).error.param, 'add_generation_prompt');
  } finally {
    const { code } = await stopServer(server);
    assert.equal(code, 0);
  }
}

// ---- metrics: /metrics agrees with the usage the responses reported ----

// Prometheus text -> [{name, labels, value}] (samples only; HELP/TYPE skipped).
function parsePrometheus(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/);
    assert.ok(m, `bad metrics line: ${line}`);
    const labels = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

function metricValue(samples, name, labels = {}) {
  const hits = samples.filter((s) => s.name === name &&
                                     Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return hits.reduce((sum, s) => sum + s.value, 0);
}

// Each series of a histogram (one per label set) has cumulative buckets and +Inf == its _count;
// returns {count, sum} over all series.
function checkHistogram(samples, name) {
  const series = new Map();
  for (const s of samples.filter((x) => x.name === `${name}_bucket`)) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(rest);
    if (!series.has(key)) series.set(key, { labels: rest, buckets: [] });
    series.get(key).buckets.push({ le: le === '+Inf' ? Infinity : Number(le), value: s.value });
  }
  assert.ok(series.size >= 1, `${name} exported`);
  for (const { labels, buckets } of series.values()) {
    buckets.sort((a, b) => a.le - b.le);
    assert.ok(buckets.length >= 2, `${name} has buckets`);
    for (let i = 1; i < buckets.length; ++i)
      assert.ok(buckets[i].value >= buckets[i - 1].value, `${name}: buckets cumulative at le=${buckets[i].le}`);
    assert.equal(buckets[buckets.length - 1].le, Infinity);
    assert.equal(buckets[buckets.length - 1].value, metricValue(samples, `${name}_count`, labels),
                 `${name}${JSON.stringify(labels)}: +Inf bucket == _count`);
  }
  return { count: metricValue(samples, `${name}_count`), sum: metricValue(samples, `${name}_sum`) };
}

async function caseMetrics() {
  const server = await startServer();
  try {
    const port = server.port;
    const oa = client(port);
    const an = new Anthropic({ baseURL: `http://127.0.0.1:${port}/anthropic`, apiKey: KEY, maxRetries: 0 });
    // Each finished request: {prompt, cached, completion, eos} from its own usage.
    const done = [];
    const fromOpenAi = (usage, finish) => done.push({ prompt: usage.prompt_tokens, cached: usage.prompt_cache_hit_tokens,
                                                      completion: usage.completion_tokens, eos: finish === 'stop' });
    const params = (content) => ({ model: 'tiny', messages: [{ role: 'user', content }], max_tokens: 8, temperature: 0 });
    for (const content of ['one', 'two', LONG_PROMPT, LONG_PROMPT]) {
      const b = await oa.chat.completions.create(params(content));
      fromOpenAi(b.usage, b.choices[0].finish_reason);
    }
    {
      let usage = null;
      let finish = null;
      for await (const c of await oa.chat.completions.create({ ...params('three'), stream: true })) {
        usage = c.usage ?? usage;
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      fromOpenAi(usage, finish);
    }
    const comp = await oa.completions.create({ model: 'tiny', prompt: 'Once upon', max_tokens: 8, temperature: 0 });
    fromOpenAi(comp.usage, comp.choices[0].finish_reason);
    const msg = await an.messages.create({ model: 'tiny', max_tokens: 8, messages: [{ role: 'user', content: 'four' }] });
    done.push({ prompt: msg.usage.input_tokens + msg.usage.cache_read_input_tokens,
                cached: msg.usage.cache_read_input_tokens, completion: msg.usage.output_tokens,
                eos: msg.stop_reason === 'end_turn' });
    const n = done.length;
    const sum = (f) => done.reduce((acc, d) => acc + f(d), 0);
    assert.ok(done[3].cached > 0, 'the repeated long prompt hit the prefix cache');

    // Engine totals are copied in at scrape time and published after each step: wait until they
    // have caught up with the last request.
    let samples = [];
    for (let i = 0; i < 50; ++i) {
      samples = parsePrometheus(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
      if (metricValue(samples, 'deepinfer:prompt_tokens_total') === sum((d) => d.prompt)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(metricValue(samples, 'deepinfer:prompt_tokens_total'), sum((d) => d.prompt));
    // Sampled tokens: every reported completion token, plus the end-of-sequence token of those
    // that stopped on it (it is sampled, never shown).
    assert.equal(metricValue(samples, 'deepinfer:generation_tokens_total'),
                 sum((d) => d.completion + (d.eos ? 1 : 0)));
    // One prefix-cache lookup per request (no preemption here): every prompt token queried, the
    // cached ones hit.
    assert.equal(metricValue(samples, 'deepinfer:prefix_cache_queries_total'), sum((d) => d.prompt));
    assert.equal(metricValue(samples, 'deepinfer:prefix_cache_hits_total'), sum((d) => d.cached));
    assert.equal(metricValue(samples, 'deepinfer:request_success_total'), n);
    assert.equal(metricValue(samples, 'deepinfer:request_success_total', { finished_reason: 'length' }),
                 done.filter((d) => !d.eos).length);
    assert.equal(metricValue(samples, 'deepinfer:num_requests_running'), 0);
    assert.equal(metricValue(samples, 'deepinfer:num_requests_waiting'), 0);

    for (const name of ['time_to_first_token_seconds', 'e2e_request_latency_seconds', 'request_queue_time_seconds']) {
      const h = checkHistogram(samples, `deepinfer:${name}`);
      assert.equal(h.count, n, `${name}: one observation per request`);
      assert.ok(h.sum >= 0);
      if (name !== 'request_queue_time_seconds') assert.ok(h.sum > 0, `${name}: _sum > 0`);
    }
    const e2e = checkHistogram(samples, 'deepinfer:e2e_request_latency_seconds');
    const ttft = checkHistogram(samples, 'deepinfer:time_to_first_token_seconds');
    assert.ok(e2e.sum >= ttft.sum, 'a request ends after its first token');
    // Inter-token latency: one observation per shown token after each request's first.
    const itl = checkHistogram(samples, 'deepinfer:inter_token_latency_seconds');
    assert.equal(itl.count, sum((d) => Math.max(d.completion - 1, 0)));
    assert.ok(itl.sum > 0);
    assert.ok(itl.sum <= e2e.sum);

    assert.equal(metricValue(samples, 'deepinfer:http_requests_total',
                             { route: '/v1/chat/completions', method: 'POST', status: '200' }), 5);
    // Both count finished exchanges (the scrape in progress is in neither).
    assert.equal(checkHistogram(samples, 'deepinfer:http_request_duration_seconds').count,
                 metricValue(samples, 'deepinfer:http_requests_total'));
  } finally {
    const { code } = await stopServer(server);
    assert.equal(code, 0);
  }
}

const CASES = { make_model: caseMakeModel, chat: caseChat, other_apis: caseOtherApis, errors: caseErrors, auth: caseAuth,
                disconnect: caseDisconnect, overload: caseOverload, limits: caseLimits,
                tokenize: caseTokenize, metrics: caseMetrics, choices: caseChoices };

(async () => {
  const fn = CASES[caseName];
  if (!fn) throw new Error(`unknown case ${caseName}; cases: ${Object.keys(CASES).join(' ')}`);
  await fn();
  console.log(`serve_e2e ${caseName}: ok`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
