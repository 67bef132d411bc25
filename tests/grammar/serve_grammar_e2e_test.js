// Structured output through `deepinfer serve` with the real openai SDK, on the tiny random-weight V3
// checkpoint (tests/server's fixture): every output sampled under a constraint is checked by engines
// independent of ours — python3-jsonschema and Python's re (validate_outputs.py), JSON.parse, JS RegExp.
//
// usage: node serve_grammar_e2e_test.js DEEPINFER WORKDIR [SERVE_FLAG ...]
// (server_e2e_grammar_jump_forward passes --jump-forward: the same checks, forced tokens appended
// without sampling, and /metrics must count some.)
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const assert = require('node:assert/strict');
const OpenAI = require('openai').default;
const serverProcess = require('../../bench/serve/server_process.js');

const [deepinfer, workdir, ...extraServeFlags] = process.argv.slice(2);
const modelDir = path.join(workdir, 'tiny_v3');
const N_SEEDS = 40;

// Every feature at once, each part bounded so that a random model finishes within max_tokens.
const MIXED_SCHEMA = {
  type: 'object',
  properties: {
    id: { type: 'string', format: 'uuid' },
    name: { type: 'string', minLength: 1, maxLength: 8 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    day: { type: 'string', format: 'date' },
    ip: { type: 'string', format: 'ipv4' },
    role: { enum: ['admin', 'user', null] },
    tags: { type: 'array', items: { type: 'string', maxLength: 4 }, minItems: 1, maxItems: 3 },
    point: { type: 'array', prefixItems: [{ type: 'integer', minimum: -50, maximum: 50 }, { type: 'boolean' }],
             items: false, minItems: 2 },
    code: { type: 'string', pattern: '^[A-Z]{3}-\\d{2}$' },
    score: { anyOf: [{ type: 'integer', minimum: 1, maximum: 5 }, { type: 'null' }] },
    tree: { $ref: '#/$defs/node' },
    kind: { const: 'v1' },
    extra: { allOf: [{ type: 'object', properties: { a: { type: 'boolean' } } },
                     { properties: { b: { type: 'null' } }, required: ['b'] }] },
  },
  required: ['id', 'name', 'age', 'role', 'tags', 'point', 'code', 'tree', 'kind'],
  additionalProperties: false,
  $defs: {
    node: { type: 'object', properties: { v: { type: 'integer', minimum: -9, maximum: 9 },
                                          kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 1 } },
            required: ['v'], additionalProperties: false },
  },
};

function client(port) {
  return new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-unused', maxRetries: 0, timeout: 120000 });
}

async function post(port, route, body) {
  const r = await fetch(`http://127.0.0.1:${port}${route}`,
                        { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: r.status, body: await r.json() };
}

(async () => {
  const server = await serverProcess.startServer(deepinfer, modelDir,
                                                 ['--threads', '2', '--max-model-len', '1024', ...extraServeFlags], 60000);
  const records = [];
  try {
    const oa = client(server.port);
    const messages = [{ role: 'user', content: 'Reply in JSON please.' }];

    // json_schema (strict) under temperature 1, many seeds, concurrently.
    const strict = await Promise.all(Array.from({ length: N_SEEDS }, (_, seed) => oa.chat.completions.create({
      model: 'tiny', messages, temperature: 1, seed, max_tokens: 400,
      response_format: { type: 'json_schema', json_schema: { name: 'mixed', schema: MIXED_SCHEMA, strict: true } },
    })));
    for (const r of strict) {
      assert.equal(r.choices[0].finish_reason, 'stop', `ended by the grammar: ${r.choices[0].message.content}`);
      records.push({ kind: 'json_schema', constraint: MIXED_SCHEMA, output: r.choices[0].message.content });
    }
    // Greedy too.
    const greedy = await oa.chat.completions.create({
      model: 'tiny', messages, temperature: 0, max_tokens: 400,
      response_format: { type: 'json_schema', json_schema: { name: 'mixed', schema: MIXED_SCHEMA } } });
    records.push({ kind: 'json_schema', constraint: MIXED_SCHEMA, output: greedy.choices[0].message.content });

    // json_object: a real constraint now (any JSON object); small max_tokens, so finish may be length,
    // only complete outputs are checked. Streaming reassembles to a complete object too.
    const objSchema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
    for (let seed = 0; seed < 6; ++seed) {
      const r = await oa.chat.completions.create({ model: 'tiny', messages, temperature: 1, seed, max_tokens: 300,
                                                   response_format: { type: 'json_object' } });
      const text = r.choices[0].message.content;
      if (r.choices[0].finish_reason === 'stop') records.push({ kind: 'json_object', constraint: null, output: text });
      else assert.ok(text.startsWith('{'), `json_object output starts an object: ${text}`);
    }

    // vLLM: structured_outputs.regex / guided_regex / guided_choice / structured_outputs.json; SGLang: regex.
    const pattern = '(yes|no|maybe)-\\d{2,4}(\\.[a-z]{1,3})?';
    const jsRe = new RegExp(`^(?:${pattern})$`);
    for (const [field, value] of [['structured_outputs', { regex: pattern }], ['guided_regex', pattern], ['regex', pattern]]) {
      const r = await post(server.port, '/v1/chat/completions',
                           { model: 'tiny', messages, temperature: 1, seed: 3, max_tokens: 40, [field]: value });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const text = r.body.choices[0].message.content;
      assert.ok(jsRe.test(text), `${field}: '${text}'`);
      records.push({ kind: 'regex', constraint: pattern, output: text });
    }
    const choices = ['red', 'green', 'blue'];
    for (const field of ['guided_choice', 'structured_outputs']) {
      const body = field === 'guided_choice' ? choices : { choice: choices };
      const r = await post(server.port, '/v1/chat/completions',
                           { model: 'tiny', messages, temperature: 1, seed: 5, max_tokens: 10, [field]: body });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      records.push({ kind: 'choice', constraint: choices, output: r.body.choices[0].message.content });
    }
    {
      const r = await post(server.port, '/v1/chat/completions',
                           { model: 'tiny', messages, temperature: 1, seed: 9, max_tokens: 400,
                             structured_outputs: { json: MIXED_SCHEMA } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      records.push({ kind: 'json_schema', constraint: MIXED_SCHEMA, output: r.body.choices[0].message.content });
    }
    // GBNF (guided_grammar / SGLang ebnf): outputs parse as JSON arrays of small integers.
    const gbnf = 'root ::= "[" (num ("," num){0,3})? "]"\nnum ::= "-"? [1-9] [0-9]?\n';
    for (const field of ['guided_grammar', 'ebnf']) {
      const r = await post(server.port, '/v1/chat/completions',
                           { model: 'tiny', messages, temperature: 1, seed: 11, max_tokens: 60, [field]: gbnf });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const parsed = JSON.parse(r.body.choices[0].message.content);
      assert.ok(Array.isArray(parsed) && parsed.length <= 4 && parsed.every(Number.isInteger), r.body.choices[0].message.content);
    }
    // The Lark subset through the same field (no "::=": Lark).
    {
      const lark = 'start: "[" [NUM ("," NUM) ~ 0..3] "]"\nNUM: /-?[1-9][0-9]?/\n';
      const r = await post(server.port, '/v1/chat/completions',
                           { model: 'tiny', messages, temperature: 1, seed: 13, max_tokens: 60,
                             structured_outputs: { grammar: lark } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const parsed = JSON.parse(r.body.choices[0].message.content);
      assert.ok(Array.isArray(parsed) && parsed.length <= 4 && parsed.every(Number.isInteger), r.body.choices[0].message.content);
    }
    // Completions with SGLang's regex; Responses with text.format json_schema.
    {
      const r = await post(server.port, '/v1/completions',
                           { model: 'tiny', prompt: 'Answer:', temperature: 1, seed: 2, max_tokens: 40, regex: pattern });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      records.push({ kind: 'regex', constraint: pattern, output: r.body.choices[0].text });
      const resp = await oa.responses.create({
        model: 'tiny', input: 'Reply in JSON', temperature: 1, max_output_tokens: 400,
        text: { format: { type: 'json_schema', name: 'mixed', schema: MIXED_SCHEMA, strict: true } } });
      records.push({ kind: 'json_schema', constraint: MIXED_SCHEMA, output: resp.output_text });
    }

    // Anthropic Messages: output_config.format (GA) and the beta's output_format; the text block is the JSON.
    for (const field of ['output_config', 'output_format']) {
      const format = { type: 'json_schema', schema: MIXED_SCHEMA };
      for (let i = 0; i < 3; ++i) {
        const r = await post(server.port, '/v1/messages', {
          model: 'tiny', max_tokens: 400, temperature: 1, messages,
          ...(field === 'output_config' ? { output_config: { format } } : { output_format: format }) });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.stop_reason, 'end_turn', JSON.stringify(r.body));
        const text = r.body.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
        records.push({ kind: 'json_schema', constraint: MIXED_SCHEMA, output: text });
      }
    }
    {
      const r = await post(server.port, '/v1/messages', {
        model: 'tiny', max_tokens: 5, messages,
        output_config: { format: { type: 'json_schema', schema: { type: 'array', uniqueItems: true } } } });
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.equal(r.body.type, 'error');
      assert.equal(r.body.error.type, 'invalid_request_error');
      assert.ok(r.body.error.message.includes('uniqueItems'), r.body.error.message);
    }

    // Bad constraints: 400 with the field as param and the position or JSON path in the message.
    const bad = [
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object',
           properties: { a: { type: 'array', uniqueItems: true } } } } } },
       'response_format.json_schema.schema', '/properties/a/uniqueItems'],
      [{ guided_regex: 'a(b' }, 'guided_regex', 'offset 3'],
      [{ structured_outputs: { grammar: 'root ::= foo' } }, 'structured_outputs.grammar', "'foo'"],
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'integer', minimum: 3,
           maximum: 1 } } } }, 'response_format.json_schema.schema', 'empty'],
      [{ guided_regex: 'a', guided_choice: ['b'] }, 'guided_choice', 'only one'],
    ];
    for (const [extra, param, needle] of bad) {
      const r = await post(server.port, '/v1/chat/completions', { model: 'tiny', messages, max_tokens: 5, ...extra });
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.equal(r.body.error.type, 'invalid_request_error');
      assert.equal(r.body.error.param, param, JSON.stringify(r.body));
      assert.ok(r.body.error.message.includes(needle), `${needle} in ${r.body.error.message}`);
    }
    if (extraServeFlags.includes('--jump-forward')) {
      const m = await serverProcess.scrapeMetrics(`http://127.0.0.1:${server.port}`);
      const forced = m['deepinfer:jump_forward_tokens_total'] ?? 0;
      console.log(`jump-forward appended ${forced} forced tokens`);
      assert.ok(forced > 0, 'jump-forward appended forced tokens (the schemas have fixed keys)');
    }
  } finally {
    const { code } = await serverProcess.stopServer(server);
    assert.equal(code, 0);
  }
  const file = path.join(workdir, extraServeFlags.length ? 'grammar_outputs_flags.jsonl' : 'grammar_outputs.jsonl');
  fs.writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
  execFileSync('python3', [path.join(__dirname, 'validate_outputs.py'), file], { stdio: 'inherit' });
  console.log(`serve_grammar_e2e: ok (${records.length} outputs validated)`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
