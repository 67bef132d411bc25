// Strict tool calls through `deepinfer serve` with the real openai SDK, on the tiny random-weight V4
// checkpoint of tests/server (fixture server_tiny_v4_model; no scripted output: the model samples).
// A forced tool choice opens the DSML block in the prompt, so the grammar constrains every generated
// token; the arguments of every call, sampled at temperature 1 over many seeds, are validated against
// the tool's schema by python3-jsonschema (validate_outputs.py). Errors: a schema keyword we do not
// support, strict tools next to response_format, a V4-only feature on the right param.
//
// usage: node serve_strict_tools_e2e_test.js DEEPINFER WORKDIR
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const assert = require('node:assert/strict');
const OpenAI = require('openai').default;
const serverProcess = require('../../bench/serve/server_process.js');

const [deepinfer, workdir] = process.argv.slice(2);
const modelDir = path.join(workdir, 'tiny_v4');
const N_SEEDS = 16;

// Bounded everywhere so that a random model finishes within max_tokens (a plain {"type":"string"} is
// written raw and unbounded: the grammar unit tests cover it).
const WEATHER = {
  type: 'object',
  properties: {
    city: { type: 'string', minLength: 1, maxLength: 10 },
    days: { type: 'integer', minimum: 1, maximum: 7 },
    units: { enum: ['metric', 'imperial'] },
    when: { type: 'string', format: 'date' },
    flags: { type: 'array', items: { type: 'boolean' }, maxItems: 2 },
  },
  required: ['city', 'days'],
  additionalProperties: false,
};
const PING = { type: 'object', properties: { n: { type: 'integer', minimum: 0, maximum: 99 } }, required: ['n'],
               additionalProperties: false };
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: WEATHER, strict: true } },
  { type: 'function', function: { name: 'ping', parameters: PING, strict: true } },
];
const SCHEMAS = { get_weather: WEATHER, ping: PING };
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

async function post(port, body) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`,
                        { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: r.status, body: await r.json() };
}

(async () => {
  const server = await serverProcess.startServer(deepinfer, modelDir, ['--threads', '2', '--max-model-len', '2048'], 60000);
  const records = [];
  try {
    const oa = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'unused', maxRetries: 0,
                            timeout: 120000 });
    const runs = await Promise.all(Array.from({ length: N_SEEDS }, (_, seed) => oa.chat.completions.create({
      model: 'tiny', messages, tools: TOOLS, temperature: 1, seed, max_tokens: 800,
      thinking: { type: 'disabled' },  // a forced tool choice needs non-thinking mode
      tool_choice: seed % 2 === 0 ? 'required' : { type: 'function', function: { name: 'get_weather' } },
    })));
    let n_calls = 0;
    for (const [seed, r] of runs.entries()) {
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', `seed ${seed}: ${JSON.stringify(choice.message)}`);
      assert.ok(choice.message.tool_calls.length >= 1);
      for (const call of choice.message.tool_calls) {
        const schema = SCHEMAS[call.function.name];
        assert.ok(schema, `seed ${seed}: unknown tool ${call.function.name}`);
        records.push({ kind: 'json_schema', constraint: schema, output: call.function.arguments });
        ++n_calls;
      }
    }
    // Anthropic Messages: tools with strict: true, forced with tool_choice any / tool; the tool_use blocks'
    // inputs are validated the same way.
    const anthropicTools = TOOLS.map((t) => ({ name: t.function.name, input_schema: t.function.parameters, strict: true }));
    for (let i = 0; i < 4; ++i) {
      const r = await fetch(`http://127.0.0.1:${server.port}/v1/messages`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', max_tokens: 800, temperature: 1, messages, tools: anthropicTools,
                               thinking: { type: 'disabled' },
                               tool_choice: i % 2 === 0 ? { type: 'any' } : { type: 'tool', name: 'ping' } }) });
      const body = await r.json();
      assert.equal(r.status, 200, JSON.stringify(body));
      assert.equal(body.stop_reason, 'tool_use', JSON.stringify(body));
      const uses = body.content.filter((b) => b.type === 'tool_use');
      assert.ok(uses.length >= 1, JSON.stringify(body));
      for (const use of uses) {
        assert.ok(SCHEMAS[use.name], `unknown tool ${use.name}`);
        records.push({ kind: 'json_schema', constraint: SCHEMAS[use.name], output: JSON.stringify(use.input) });
        ++n_calls;
      }
    }
    {
      const r = await fetch(`http://127.0.0.1:${server.port}/v1/messages`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', max_tokens: 8, messages, tool_choice: { type: 'any' },
                               thinking: { type: 'disabled' },
                               tools: [{ name: 'f', strict: true, input_schema: { type: 'object',
                                         properties: { x: { type: 'array', uniqueItems: true } } } }] }) });
      const body = await r.json();
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(body.error.type, 'invalid_request_error');
      assert.match(body.error.message, /uniqueItems/);
    }
    // Errors name the field.
    const unsupported = await post(server.port, {
      model: 'tiny', messages, tool_choice: 'required', thinking: { type: 'disabled' },
      tools: [{ type: 'function', function: { name: 'f', strict: true,
                                              parameters: { type: 'object', properties: { x: { type: 'array', uniqueItems: true } } } } }],
    });
    assert.equal(unsupported.status, 400, JSON.stringify(unsupported.body));
    assert.equal(unsupported.body.error.param, 'tools[0].function.parameters');
    assert.match(unsupported.body.error.message, /uniqueItems/);
    const both = await post(server.port, {
      model: 'tiny', messages: [{ role: 'user', content: 'Answer in json.' }], tools: TOOLS,
      response_format: { type: 'json_object' },
    });
    assert.equal(both.status, 400, JSON.stringify(both.body));
    assert.equal(both.body.error.param, 'tools[0].function.strict');
    // Auto choice: the grammar waits for the model's first DSML marker; a random model writes none,
    // so the reply is free text that ends normally.
    const auto = await oa.chat.completions.create({ model: 'tiny', messages, tools: TOOLS, temperature: 1, seed: 3,
                                                    max_tokens: 40 });
    assert.ok(['stop', 'length', 'tool_calls'].includes(auto.choices[0].finish_reason));
    console.log(`strict tool calls: ${N_SEEDS} replies, ${n_calls} calls`);
  } finally {
    const { code } = await serverProcess.stopServer(server);
    assert.equal(code, 0, 'SIGTERM: clean exit');
  }
  const file = path.join(workdir, 'strict_tool_outputs.jsonl');
  fs.writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
  execFileSync('python3', [path.join(__dirname, 'validate_outputs.py'), file], { stdio: 'inherit' });
  console.log('strict tools e2e: ok');
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
