// One request of the serving load test: what to send (the request mix, the prompts) and how to check
// what comes back. Every response is validated as strictly as a client library would parse it: HTTP
// 200, SSE framing, each API's event order, a terminal event ([DONE] / message_stop /
// response.completed) and usage. Anything else is an error with a kind, never silently counted as a
// success.
'use strict';
const http = require('node:http');

// The APIs a request may use; `stream` false = one JSON body.
const KINDS = {
  chat_stream: { path: '/v1/chat/completions', api: 'chat', stream: true },
  chat: { path: '/v1/chat/completions', api: 'chat', stream: false },
  completions_stream: { path: '/v1/completions', api: 'completions', stream: true },
  completions: { path: '/v1/completions', api: 'completions', stream: false },
  messages_stream: { path: '/anthropic/v1/messages', api: 'messages', stream: true },
  messages: { path: '/anthropic/v1/messages', api: 'messages', stream: false },
  responses_stream: { path: '/v1/responses', api: 'responses', stream: true },
};

// Default mix: mostly streaming chat (what chat UIs and agents send), some of every other API.
const DEFAULT_MIX = {
  chat_stream: 0.6, chat: 0.08, completions_stream: 0.1, completions: 0.04, messages_stream: 0.1,
  messages: 0.03, responses_stream: 0.05,
};

function parseMix(text) {
  const mix = {};
  for (const part of text.split(',')) {
    const [name, weight] = part.split(':');
    if (!KINDS[name] || !(Number(weight) >= 0)) throw new Error(`bad --mix entry ${part}`);
    mix[name] = Number(weight);
  }
  return mix;
}

// mulberry32: a small seeded PRNG, so a run's request sequence is reproducible.
function makeRng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ('time person year way day thing man world life hand part child eye woman place work week case ' +
               'point government company number group problem fact river stone cache block token stream model ' +
               'server queue engine memory thread socket kernel matrix vector layer expert router window prefix')
                  .split(' ');

function words(rng, n) {
  return Array.from({ length: n }, () => WORDS[Math.floor(rng() * WORDS.length)]).join(' ');
}

// A long fixed preamble (a few hundred tokens: several 64-token KV blocks) that a fraction of the
// prompts start with, so the prefix cache gets hits under load.
const SHARED_PREFIX = Array.from({ length: 30 }, (_, i) => `Rule ${i}: answer briefly and cite source ${i}.`)
                          .join(' ');

// Plans request `index`: its kind, body, and whether the client hangs up on a stream: `abort` is
// 'on_headers' (as soon as the 200 head arrives, i.e. right after the server submitted the request,
// while it is queued or prefilling), 'mid_stream' (after the first content event) or null. A request
// that will be dropped asks for many tokens, so it is surely still running when the client leaves.
function planRequest(index, opts, rng) {
  const names = Object.keys(opts.mix);
  const total = names.reduce((s, n) => s + opts.mix[n], 0);
  let pick = rng() * total;
  let kind = names[names.length - 1];
  for (const n of names) {
    pick -= opts.mix[n];
    if (pick < 0) {
      kind = n;
      break;
    }
  }
  const k = KINDS[kind];
  const r = rng();
  const abort = !k.stream ? null
              : r < opts.abortFrac ? 'mid_stream'
              : r < opts.abortFrac + opts.headersAbortFrac ? 'on_headers'
              : null;
  const shared = rng() < opts.sharedPrefixFrac;
  const text = (shared ? SHARED_PREFIX + ' ' : '') + `Request ${index}: ` + words(rng, opts.promptWords);
  const maxTokens = abort ? opts.abortMaxTokens : opts.maxTokens;
  const sampling = rng() < 0.5 ? { temperature: 0 } : { temperature: 1, top_p: 0.9 };
  let body;
  if (k.api === 'chat') {
    body = { model: 'tiny', messages: [{ role: 'user', content: text }], max_tokens: maxTokens, ...sampling };
    if (k.stream) body.stream_options = { include_usage: true };
  } else if (k.api === 'completions') {
    body = { model: 'tiny', prompt: text, max_tokens: maxTokens, ...sampling };
    if (k.stream) body.stream_options = { include_usage: true };
  } else if (k.api === 'messages') {
    body = { model: 'tiny', messages: [{ role: 'user', content: text }], max_tokens: maxTokens, ...sampling };
  } else {
    body = { model: 'tiny', input: text, max_output_tokens: maxTokens, ...sampling };
  }
  if (k.stream) body.stream = true;
  return { index, kind, api: k.api, path: k.path, stream: k.stream, abort, shared, maxTokens, body };
}

class CheckError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function check(cond, kind, message) {
  if (!cond) throw new CheckError(kind, message);
}

// OpenAI-style usage: consistent sums, completion tokens within max_tokens.
function checkOpenAiUsage(usage, maxTokens) {
  check(usage && typeof usage === 'object', 'no_usage', 'usage missing');
  check(usage.prompt_tokens > 0, 'bad_usage', `prompt_tokens ${usage.prompt_tokens}`);
  check(usage.completion_tokens >= 1 && usage.completion_tokens <= maxTokens, 'bad_usage',
        `completion_tokens ${usage.completion_tokens} not in [1, ${maxTokens}]`);
  check(usage.total_tokens === usage.prompt_tokens + usage.completion_tokens, 'bad_usage', 'total_tokens');
  check(usage.prompt_cache_hit_tokens + usage.prompt_cache_miss_tokens === usage.prompt_tokens, 'bad_usage',
        'cache hit + miss != prompt tokens');
  return { prompt: usage.prompt_tokens, completion: usage.completion_tokens, cached: usage.prompt_cache_hit_tokens };
}

// Incremental checkers of one stream; feed(event, data) returns the content text it carried (or '').
class ChatStreamCheck {
  constructor(plan) {
    this.plan = plan;
    this.done = false;
    this.finish = null;
    this.usage = null;
  }
  feed(event, data) {
    check(!this.done, 'malformed_stream', 'data after [DONE]');
    if (data === '[DONE]') {
      this.done = true;
      return '';
    }
    const chunk = JSON.parse(data);
    check(!chunk.error, 'stream_error', `error event: ${data}`);
    const object = this.plan.api === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    check(chunk.object === object, 'malformed_stream', `object ${chunk.object}`);
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) return '';
    if (choice.finish_reason) this.finish = choice.finish_reason;
    return (this.plan.api === 'chat' ? choice.delta.content : choice.text) ?? '';
  }
  end() {
    check(this.done, 'no_done', 'stream ended without [DONE]');
    check(this.finish === 'length' || this.finish === 'stop', 'malformed_stream', `finish_reason ${this.finish}`);
    return checkOpenAiUsage(this.usage, this.plan.maxTokens);
  }
}

class MessagesStreamCheck {
  constructor(plan) {
    this.plan = plan;
    this.n = 0;
    this.done = false;
    this.start = null;
    this.delta = null;
  }
  feed(event, data) {
    check(!this.done, 'malformed_stream', 'event after message_stop');
    const ev = JSON.parse(data);
    check(ev.type === event, 'malformed_stream', `event ${event} carries type ${ev.type}`);
    check(event !== 'error', 'stream_error', `error event: ${data}`);
    check(this.n++ > 0 || event === 'message_start', 'malformed_stream', `first event ${event}`);
    if (event === 'message_start') this.start = ev.message;
    if (event === 'message_delta') this.delta = ev;
    if (event === 'message_stop') this.done = true;
    if (event === 'content_block_delta' && ev.delta.type === 'text_delta') return ev.delta.text;
    return '';
  }
  end() {
    check(this.done, 'no_done', 'stream ended without message_stop');
    check(this.delta && this.delta.usage, 'no_usage', 'no message_delta with usage');
    check(['end_turn', 'max_tokens', 'stop_sequence'].includes(this.delta.delta.stop_reason), 'malformed_stream',
          `stop_reason ${this.delta.delta.stop_reason}`);
    const u = this.delta.usage;
    check(u.output_tokens >= 1 && u.output_tokens <= this.plan.maxTokens, 'bad_usage',
          `output_tokens ${u.output_tokens}`);
    const prompt = this.start.usage.input_tokens + this.start.usage.cache_read_input_tokens;
    check(prompt > 0, 'bad_usage', 'no input tokens');
    return { prompt, completion: u.output_tokens, cached: this.start.usage.cache_read_input_tokens };
  }
}

class ResponsesStreamCheck {
  constructor(plan) {
    this.plan = plan;
    this.done = null;
    this.seq = 0;
  }
  feed(event, data) {
    check(!this.done, 'malformed_stream', 'event after the final response event');
    const ev = JSON.parse(data);
    check(ev.type === event, 'malformed_stream', `event ${event} carries type ${ev.type}`);
    check(event !== 'error' && event !== 'response.failed', 'stream_error', `error event: ${data}`);
    check(ev.sequence_number === this.seq++, 'malformed_stream', `sequence_number ${ev.sequence_number}`);
    if (event === 'response.completed' || event === 'response.incomplete') this.done = ev.response;
    if (event === 'response.output_text.delta') return ev.delta;
    return '';
  }
  end() {
    check(this.done, 'no_done', 'stream ended without response.completed / incomplete');
    const u = this.done.usage;
    check(u && u.output_tokens >= 1 && u.output_tokens <= this.plan.maxTokens, 'no_usage', 'usage');
    check(u.total_tokens === u.input_tokens + u.output_tokens, 'bad_usage', 'total_tokens');
    return { prompt: u.input_tokens, completion: u.output_tokens, cached: u.input_tokens_details.cached_tokens };
  }
}

function streamChecker(plan) {
  if (plan.api === 'messages') return new MessagesStreamCheck(plan);
  if (plan.api === 'responses') return new ResponsesStreamCheck(plan);
  return new ChatStreamCheck(plan);
}

// A non-stream body: the API's object and its usage.
function checkBody(plan, text) {
  const body = JSON.parse(text);
  if (plan.api === 'messages') {
    check(body.type === 'message' && Array.isArray(body.content), 'bad_body', 'not a message');
    const u = body.usage;
    check(u && u.output_tokens >= 1 && u.output_tokens <= plan.maxTokens, 'bad_usage', 'output_tokens');
    return { prompt: u.input_tokens + u.cache_read_input_tokens, completion: u.output_tokens,
             cached: u.cache_read_input_tokens };
  }
  const object = plan.api === 'chat' ? 'chat.completion' : 'text_completion';
  check(body.object === object && body.choices.length === 1, 'bad_body', `object ${body.object}`);
  return checkOpenAiUsage(body.usage, plan.maxTokens);
}

// SSE framing: events separated by a blank line, fields `event:` and `data:` (comments `:` allowed).
// Calls onEvent(event, data) per event; throws on an unknown field.
function makeSseSplitter(onEvent) {
  let buf = '';
  const splitter = (text) => {
    buf += text;
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let event = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        else check(line === '' || line.startsWith(':'), 'malformed_stream', `SSE line ${JSON.stringify(line)}`);
      }
      if (data.length > 0) onEvent(event, data.join('\n'));
    }
  };
  splitter.rest = () => buf;
  return splitter;
}

// Sends one planned request on `agent`. Resolves (never rejects) with
// { plan, ok, aborted, error_kind, error, status, ttft_ms, e2e_ms, n_content_events, usage }.
// ttft_ms: from sending the request to the first event that carries content text (streams only).
function runRequest(agent, base, plan, timeoutMs) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const ms = () => Number(process.hrtime.bigint() - t0) / 1e6;
    const result = { plan, ok: false, aborted: false, error_kind: null, error: null, status: 0, ttft_ms: null,
                     e2e_ms: null, n_content_events: 0, usage: null };
    let settled = false;
    const settle = (fields) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      Object.assign(result, fields, { e2e_ms: ms() });
      resolve(result);
    };
    const fail = (kind, message) => settle({ error_kind: kind, error: String(message).slice(0, 300) });
    const payload = JSON.stringify(plan.body);
    const req = http.request(`${base}${plan.path}`, {
      method: 'POST', agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
    });
    const timer = setTimeout(() => {
      fail('timeout', `no complete response in ${timeoutMs} ms`);
      req.destroy();
    }, timeoutMs);
    req.on('error', (e) => fail('connection', `${e.code ?? ''} ${e.message}`));
    req.on('response', (res) => {
      result.status = res.statusCode;
      res.setEncoding('utf8');
      if (res.statusCode !== 200) {
        let text = '';
        res.on('data', (d) => { text += d; });
        res.on('end', () => fail(`http_${res.statusCode}`, text));
        return;
      }
      if (!plan.stream) {
        let text = '';
        res.on('data', (d) => { text += d; });
        res.on('end', () => {
          try {
            settle({ ok: true, usage: checkBody(plan, text) });
          } catch (e) {
            fail(e.kind ?? 'bad_body', e.message);
          }
        });
        return;
      }
      const ctype = res.headers['content-type'] ?? '';
      if (!ctype.startsWith('text/event-stream')) return fail('malformed_stream', `content-type ${ctype}`);
      if (plan.abort === 'on_headers') {
        settle({ aborted: true });
        req.destroy();
        return;
      }
      const checker = streamChecker(plan);
      const split = makeSseSplitter((event, data) => {
        const content = checker.feed(event, data);
        if (!content) return;
        ++result.n_content_events;
        if (result.ttft_ms === null) result.ttft_ms = ms();
        if (plan.abort === 'mid_stream') {
          // Hang up mid-stream: the server must cancel the request and free its blocks.
          settle({ aborted: true });
          req.destroy();
        }
      });
      res.on('data', (d) => {
        if (settled) return;
        try {
          split(d);
        } catch (e) {
          fail(e.kind ?? 'malformed_stream', e.message);
          req.destroy();
        }
      });
      res.on('end', () => {
        if (settled) return;
        try {
          check(split.rest() === '', 'malformed_stream', 'stream ended inside an event');
          const usage = checker.end();
          // A request planned to abort that finished before its first content event is a failure
          // of the plan (it asked for many tokens), so it counts as an error, not a success.
          check(!plan.abort, 'abort_missed', 'the stream finished before the client could hang up');
          settle({ ok: true, usage });
        } catch (e) {
          fail(e.kind ?? 'malformed_stream', e.message);
        }
      });
      res.on('error', (e) => fail('connection', e.message));
    });
    req.end(payload);
  });
}

module.exports = { KINDS, DEFAULT_MIX, parseMix, makeRng, planRequest, runRequest, makeSseSplitter };
