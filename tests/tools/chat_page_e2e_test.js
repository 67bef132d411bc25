// The chat page at / (web/chat.html) in headless Chromium (Debian's, driven by playwright-core)
// against a real `deepinfer serve` with an API key on a tiny random-weights checkpoint: the page
// asks for the key after the 401, a message streams text into the assistant bubble, and Stop aborts
// the fetch mid-stream, which the server sees as a disconnect and cancels (its /metrics counts one
// request finished as "cancelled" and none running). Keeps a screenshot in WORKDIR/chat_page.png.
// Case reasoning_tools: on a tiny V4 checkpoint with scripted output (serve --testing-scripted-output,
// docs/server.md; random weights never write reasoning or tool calls), the page shows the reasoning
// in a collapsible block folded once the answer starts, the content, and both tool calls with their
// arguments (screenshot WORKDIR/chat_page_tools.png).
//
// usage: node chat_page_e2e_test.js DEEPINFER WORKDIR stream_stop
//        node chat_page_e2e_test.js DEEPINFER WORKDIR reasoning_tools V4_MODEL_DIR
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const assert = require('node:assert/strict');
const { chromium } = require('playwright-core');
const serverProcess = require('../../bench/serve/server_process.js');

const [deepinfer, workdir, caseName, v4ModelDir] = process.argv.slice(2);
const modelDir = path.join(workdir, 'tiny_v3');
const KEY = 'sk-chat-page-test-0123456789';
// Without the background-networking flags Chromium's own connections are refused on a closed network.
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                       '--disable-background-networking', '--disable-component-update', '--disable-sync'];

function metric(text, name, labels = '') {
  const escaped = (name + labels).replace(/[{}"[\]().+*?^$|\\]/g, '\\$&');
  const m = text.match(new RegExp(`^${escaped} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : 0;
}

// Starts the server and a fresh headless Chromium, runs body(page, server), closes both.
async function withBrowser(model, serverArgs, body) {
  const server = await serverProcess.startServer(deepinfer, model, ['--threads', '1', ...serverArgs], 60000);
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'deepinfer-chromium-'));
  let context = null;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS, timeout: 60000 });
    const page = context.pages()[0] || await context.newPage();
    const consoleErrors = [];
    page.on('console', (m) => { if (m.type() === 'error' && !/401/.test(m.text())) consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    await page.goto(server.base + '/', { timeout: 30000 });
    await body(page, server);
    assert.deepEqual(consoleErrors, []);
  } finally {
    if (context) await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
    const { code } = await serverProcess.stopServer(server);
    assert.equal(code, 0);
  }
}

async function caseStreamStop() {
  await withBrowser(modelDir, ['--max-model-len', '8192', '--api-key', KEY], async (page, server) => {
    assert.equal(await page.title(), 'deepinfer chat');

    // /v1/models answered 401: the page asks for the key, then shows the model.
    await page.waitForSelector('#keydialog[open]', { timeout: 10000 });
    await page.fill('#apikey', KEY);
    await page.click('#keyform button[value=ok]');
    await page.waitForFunction(() => document.getElementById('model').textContent === 'tiny_v3', null,
                               { timeout: 10000 });

    // A short answer streams in and finishes with its stats line.
    await page.click('#toggle-settings');
    await page.fill('#max-tokens', '24');
    await page.fill('#temperature', '0');
    await page.fill('#input', 'Hello there');
    await page.click('#send');
    await page.waitForSelector('.msg.assistant .stats', { timeout: 30000 });
    const first = await page.textContent('.msg.assistant .content');
    assert.ok(first.length > 0, 'streamed text shown');
    assert.match(await page.textContent('.msg.assistant .stats'), /finish: (length|stop) · \d+ tokens/);

    // A long answer: stop it once text is flowing; the server cancels the request.
    await page.fill('#max-tokens', '8000');
    await page.fill('#input', 'Tell me a very long story');
    await page.click('#send');
    await page.waitForFunction(() => {
      const c = document.querySelectorAll('.msg.assistant .content');
      return c.length === 2 && c[1].textContent.length > 20;
    }, null, { timeout: 30000, polling: 20 });
    assert.equal(await page.isEnabled('#stop'), true, 'still streaming when stopped');
    await page.click('#stop');
    await page.waitForFunction(() => document.getElementById('status').textContent === 'stopped', null,
                               { timeout: 10000 });
    const m = await serverProcess.scrapeWhenIdle(server.base, 2, 30000);
    const text = Object.entries(m).map(([k, v]) => `${k} ${v}`).join('\n');
    assert.equal(m['deepinfer:num_requests_running'], 0, 'nothing left running');
    assert.equal(metric(text, 'deepinfer:request_success_total', '{finished_reason="cancelled"}'), 1,
                 `the stopped request was cancelled:\n${text}`);
    const stoppedText = await page.$$eval('.msg.assistant .content', (c) => c[1].textContent);
    assert.ok(stoppedText.length > 20);
    await page.screenshot({ path: path.join(workdir, 'chat_page.png'), fullPage: true });
  });
}

// V4's DSML tool-call format (as in tests/server/serve_tools_e2e_test.js).
const D = '｜DSML｜';
function dsmlCalls(calls) {
  const invokes = calls.map(({ name, params }) => {
    const ps = params.map(([k, v]) => {
      const isString = typeof v === 'string';
      return `<${D}parameter name="${k}" string="${isString}">${isString ? v : JSON.stringify(v)}</${D}parameter>`;
    });
    return `<${D}invoke name="${name}">\n${ps.join('\n')}\n</${D}invoke>`;
  });
  return `\n\n<${D}tool_calls>\n${invokes.join('\n')}\n</${D}tool_calls>`;
}

async function caseReasoningTools() {
  const question = 'What is the weather in Paris and Tokyo?';
  const reasoning = 'Two cities, so two calls of the weather tool.';
  const content = 'Let me check both cities.';
  const calls = [{ name: 'get_weather', params: [['city', 'Paris'], ['days', 3]] },
                 { name: 'get_weather', params: [['city', 'Tokyo']] }];
  const scriptFile = path.join(workdir, 'chat_page_scripts.json');
  fs.writeFileSync(scriptFile, JSON.stringify(
      [`<｜User｜>${question}<｜Assistant｜><think>${reasoning}</think>${content}${dsmlCalls(calls)}`]));
  const tools = [{ name: 'get_weather', description: 'Weather for a city',
                   parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } },
                                 required: ['city'] } }];
  const serverArgs = ['--max-model-len', '2048', '--testing-scripted-output', scriptFile];
  await withBrowser(v4ModelDir, serverArgs, async (page) => {
    await page.waitForFunction(() => document.getElementById('model').textContent !== '', null, { timeout: 10000 });
    await page.click('#toggle-settings');
    await page.fill('#max-tokens', '300');
    await page.fill('#tools', JSON.stringify(tools));
    await page.fill('#input', question);
    await page.click('#send');
    await page.waitForSelector('.msg.assistant .stats', { timeout: 30000 });
    assert.equal(await page.textContent('.msg.assistant details summary'), 'Reasoning');
    assert.equal(await page.textContent('.msg.assistant .reasoning'), reasoning);
    assert.equal(await page.$eval('.msg.assistant details', (d) => d.open), false, 'reasoning folded');
    assert.equal((await page.textContent('.msg.assistant .content')).trim(), content);
    const shown = await page.$$eval('.msg.assistant .tool', (ts) => ts.map((t) => ({
      title: t.firstChild.textContent, args: JSON.parse(t.querySelector('pre').textContent) })));
    assert.deepEqual(shown, [{ title: 'tool call: get_weather', args: { city: 'Paris', days: 3 } },
                             { title: 'tool call: get_weather', args: { city: 'Tokyo' } }]);
    assert.match(await page.textContent('.msg.assistant .stats'), /finish: tool_calls/);
    // A follow-up after the calls is accepted (the calls are kept out of the history sent).
    await page.fill('#max-tokens', '8');
    await page.fill('#input', 'Thanks');
    await page.click('#send');
    await page.waitForFunction(() => document.querySelectorAll('.msg.assistant .stats').length === 2, null,
                               { timeout: 30000 });
    assert.equal(await page.$$eval('.msg.error', (e) => e.length), 0, 'no error on the follow-up');
    // Open the reasoning for the screenshot.
    await page.click('.msg.assistant details summary');
    await page.screenshot({ path: path.join(workdir, 'chat_page_tools.png'), fullPage: true });
  });
}

const cases = { stream_stop: caseStreamStop, reasoning_tools: caseReasoningTools };
if (!cases[caseName]) {
  console.error(`unknown case ${caseName}`);
  process.exit(2);
}
cases[caseName]().then(() => console.log(`chat_page_e2e ${caseName}: ok`), (e) => {
  console.error(e);
  process.exit(1);
});
