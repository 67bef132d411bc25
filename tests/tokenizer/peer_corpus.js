// Deterministic corpus of varied strings for the tokenizer peer test. Everything is drawn from a
// seeded PRNG, so a given (seed, count) always yields the same strings; categories cover what a
// byte-level BPE with DeepSeek's Split regexes can get wrong (Unicode classes, whitespace rules,
// digit grouping, CJK ranges, added-token literals, very long words).
'use strict';

// mulberry32: small, fast, good enough for test data.
function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));  // inclusive
  const pick = (arr) => arr[Math.floor(next() * arr.length)];
  return { next, int, pick };
}

const cp = (n) => String.fromCodePoint(n);

const WORDS = (
  'the of and to in is was for that with as on by at from his her it an were are which this be or ' +
  'had not but have they one you all their has been there who would more when if will she can about ' +
  'into time some could them other than then its two only now over also new after first like many ' +
  'people through government between world university international development information system ' +
  'tokenizer inference attention transformer throughput latency quantization checkpoint gradient ' +
  'Hello World London Paris DeepSeek OpenAI Tuesday January McDonald naïve café résumé coöperate ' +
  "don't it's I'm we'll they've she'd you're O'Neil rock'n'roll e-mail state-of-the-art"
).split(' ');

const PUNCT = ['.', ',', ';', ':', '!', '?', '...', ' -', ' —', '–', '"', "'", '(', ')', '[', ']', '…', '?!', ',"'];

function prose(rng) {
  const n = rng.int(3, 40);
  let s = '';
  for (let i = 0; i < n; i++) {
    let w = rng.pick(WORDS);
    if (i === 0 || rng.next() < 0.08) w = w[0].toUpperCase() + w.slice(1);
    if (rng.next() < 0.03) w = w.toUpperCase();
    s += (i ? ' ' : '') + w;
    if (rng.next() < 0.15) s += rng.pick(PUNCT);
  }
  return s + rng.pick(['.', '!', '?', '', '\n', '.\n\n', '  ']);
}

const IDENTS = ['x', 'i', 'n_tokens', 'kvCache', 'MAX_LEN', 'self', 'foo_bar', 'data', 'tmp2', 'HTTPServer', '__init__', 'ptr'];
const CODE_TEMPLATES = [
  (r, a, b) => `#include <vector>\nint ${a}(const std::vector<int>& ${b}) {\n  return ${b}.size() * ${r.int(0, 999)};\n}\n`,
  (r, a, b) => `def ${a}(${b}, *args, **kwargs):\n    """Doc: ${b}."""\n    return [${b}[i] ** 2 for i in range(${r.int(0, 99)})]\n`,
  (r, a, b) => `const ${a} = async (${b}) => {\n\tawait fetch(\`/api/\${${b}}?q=${r.int(0, 9999)}\`);\n};`,
  (r, a, b) => `fn ${a}<'a>(${b}: &'a str) -> Result<u32, Box<dyn Error>> { Ok(${b}.len() as u32 >> ${r.int(1, 7)}) }`,
  (r, a, b) => `func ${a}(${b} []byte) (n int, err error) {\n\tif ${b} == nil { return 0, io.EOF }\n\treturn len(${b}), nil\n}`,
  (r, a, b) => `SELECT ${a}, COUNT(*) AS n FROM t_${b} WHERE id >= ${r.int(0, 1e6)} GROUP BY 1 ORDER BY n DESC;`,
  (r, a, b) => `<div class="${a}" data-x='${b}'>&lt;b&gt;${r.int(0, 99)}&nbsp;</div>\r\n`,
  (r, a, b) => `{"${a}": [${r.int(-99, 99)}, ${r.next().toFixed(6)}, null, true], "${b}": {"k": "v\\n"}}`,
  (r, a, b) => `for f in *.txt; do grep -n "${a}" "$f" | awk '{print $${r.int(1, 9)}}' >> ${b}.log; done`,
  (r, a, b) => `    if (${a} != ${b}) {{\n        ${a} += ${b}; // TODO(${r.int(1, 99)}): check overflow\n    }}\n`,
  (r, a) => `$ ./${a} --threads=${r.int(1, 64)} -v 2>&1 | tee out.log\n`,
  (r, a, b) => `@@ -${r.int(1, 500)},7 +${r.int(1, 500)},8 @@\n-    ${a}()\n+    ${b}(ctx)\n`,
];

function code(rng) {
  const t = rng.pick(CODE_TEMPLATES);
  let s = t(rng, rng.pick(IDENTS), rng.pick(IDENTS));
  if (rng.next() < 0.3) s = s.replace(/\n/g, '\r\n');
  if (rng.next() < 0.3) s = '    '.repeat(rng.int(1, 3)) + s;
  return s;
}

const CJK_COMMON = '的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴罗';
const HIRAGANA = [0x3041, 0x3096];
const KATAKANA = [0x30a1, 0x30fa];
const HANGUL = [0xac00, 0xd7a3];

function cjk(rng) {
  const kind = rng.int(0, 4);
  let s = '';
  const n = rng.int(1, 30);
  for (let i = 0; i < n; i++) {
    if (kind === 0) s += rng.pick(CJK_COMMON);
    else if (kind === 1) s += rng.next() < 0.5 ? cp(rng.int(...HIRAGANA)) : rng.next() < 0.5 ? cp(rng.int(...KATAKANA)) : rng.pick(CJK_COMMON);
    else if (kind === 2) s += cp(rng.int(...HANGUL)) + (rng.next() < 0.2 ? ' ' : '');
    else if (kind === 3) s += cp(rng.int(0x4e00, 0x9fff));  // includes U+9FA6..U+9FFF, outside the Split range
    else s += rng.pick(['、', '。', '「', '」', '・', 'ー', '〜', '（', '）', '！', '？', '：', '　', 'ｶﾀｶﾅ', '〇', '々', '𠀀', '𪚥', '中文', 'English']);
    if (rng.next() < 0.05) s += rng.pick(['，', '。', ' ', '\n', '123', 'abc']);
  }
  return s;
}

const EMOJI = ['😀', '😂', '🥲', '🤖', '🚀', '❤️', '✨', '🔥', '👍', '🎉', '🙏', '☕', '⚡', '🧑‍💻', '🏳️‍🌈', '🏴‍☠️', '❤️‍🔥', '👨‍👩‍👧‍👦', '👩🏽‍🔬', '1️⃣', '#️⃣', '©️', '™', '🫠', '🪿'];
const SKIN = [0x1f3fb, 0x1f3fc, 0x1f3fd, 0x1f3fe, 0x1f3ff];
const HANDS = [0x1f44b, 0x1f44d, 0x1f44f, 0x1f64c, 0x1f91d, 0x270c, 0x1f9d1];

function emoji(rng) {
  let s = '';
  const n = rng.int(1, 12);
  for (let i = 0; i < n; i++) {
    const k = rng.int(0, 4);
    if (k === 0) s += rng.pick(EMOJI);
    else if (k === 1) s += cp(rng.pick(HANDS)) + cp(rng.pick(SKIN));
    else if (k === 2) s += cp(0x1f1e6 + rng.int(0, 25)) + cp(0x1f1e6 + rng.int(0, 25));  // flag (maybe invalid pair)
    else if (k === 3) s += cp(rng.int(0x1f300, 0x1faff));
    else s += cp(rng.pick(HANDS)) + cp(rng.pick(SKIN)) + '\u200d' + rng.pick(['💻', '🔬', '🚀', '🎨', '⚕️']);
    if (rng.next() < 0.3) s += rng.pick([' ', 'ok', '!', '\n', '. ', '\ufe0f', '\u200d']);
  }
  return s;
}

function combining(rng) {
  const bases = ['e', 'a', 'o', 'n', 'A', 'Z', 'ı', 'α', 'и', ' ', '1', '.', 'ก'];
  let s = '';
  const n = rng.int(1, 20);
  for (let i = 0; i < n; i++) {
    s += rng.pick(bases);
    const marks = rng.int(0, 4);
    for (let j = 0; j < marks; j++) s += cp(rng.pick([rng.int(0x300, 0x36f), rng.int(0x1ab0, 0x1ace), rng.int(0x20d0, 0x20f0), 0x0e31, 0x0e47, 0x094d]));
    if (rng.next() < 0.2) s += ' ';
  }
  if (rng.next() < 0.3) s += ' Tiếng Việt có dấu, Ελληνικά, русский язык, ñandú, Æsir, Øre, ß';
  return s;
}

const SCRIPTS = [
  'مرحبا بالعالم، هذا نص عربي مع تشكيل: كَتَبَ الوَلَدُ الدَّرْسَ ١٢٣٤٥٦.',
  'שָׁלוֹם עוֹלָם! זה טקסט בעברית עם ניקוד ומספרים 2024.',
  'नमस्ते दुनिया। यह देवनागरी में लिखा गया वाक्य है: क्षत्रिय, ज्ञान, श्री ०१२३४५६७८९',
  'สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ ๑๒๓',
  'বাংলা ভাষা, தமிழ் மொழி, ქართული ენა, Հայերեն, ᐃᓄᒃᑎᑐᑦ, ᚠᛇᚻ᛫ᛒᛦᚦ, ܐܪܡܝܐ, ދިވެހި',
  'Привет, мир! Ёжик в тумане — 42 раза.',
  'Ελληνικά: Καλημέρα κόσμε! ΣΊΣΥΦΟΣ σίσυφος',
  'ኢትዮጵያ ፩፪፫, ລາວ, ខ្មែរ, မြန်မာ, ᠮᠣᠩᠭᠣᠯ, ꦗꦮ, 𐌰𐌱𐌲',
];

function script(rng) {
  let s = rng.pick(SCRIPTS);
  const a = rng.int(0, s.length - 1);
  const b = rng.int(a, s.length);
  s = rng.next() < 0.5 ? s : Array.from(s).slice(a, b).join('');
  if (rng.next() < 0.3) s += ' ' + rng.pick(SCRIPTS);
  return s;
}

function numbers(rng) {
  const k = rng.int(0, 9);
  const digits = (n) => Array.from({ length: n }, () => rng.int(0, 9)).join('');
  switch (k) {
    case 0: return digits(rng.int(1, 200));
    case 1: return `${rng.int(0, 999)},${digits(3)},${digits(3)}.${digits(rng.int(1, 6))}`;
    case 2: return `${rng.int(1, 999)} ${digits(3)} ${digits(3)} €`;
    case 3: return `${digits(rng.int(1, 4))}'${digits(3)}.${digits(2)} CHF; 3.14159e-${rng.int(1, 30)}; -0x${rng.int(0, 1e9).toString(16)}`;
    case 4: return `v${rng.int(0, 9)}.${rng.int(0, 99)}.${rng.int(0, 999)} (build ${digits(8)}) ${rng.int(1, 12)}/${rng.int(1, 28)}/20${digits(2)} ${rng.int(0, 23)}:${digits(2)}`;
    case 5: return '１２３４５ ٠١٢٣٤٥٦٧٨٩ ۰۱۲ ०१२ ๑๒๓ ² ³ ½ ¾ Ⅻ ⅷ ① ⑩ 〇 𝟘𝟙𝟚 ' + digits(rng.int(1, 10));
    case 6: return `+1 (${digits(3)}) ${digits(3)}-${digits(4)}, IBAN DE${digits(20)}`;
    case 7: return `${digits(rng.int(1, 7))}${rng.pick(['abc', ' ', '_', '.', 'x', '%', '年', 'k', '😀'])}${digits(rng.int(1, 7))}`;
    case 8: return `1e${rng.int(0, 308)} ${rng.next()} ${-rng.int(0, 1e6)} ${rng.int(0, 1e15)}`;
    default: return Array.from({ length: rng.int(2, 30) }, () => digits(rng.int(1, 5))).join(rng.pick([',', '.', ' ', '', '-', '\n']));
  }
}

const SPACES = [' ', '  ', '   ', '\t', '\n', '\r\n', '\r', '\n\n', '\u00a0', '\u2003', '\u3000', '\u0085', '\u2028', '\u2029', '\u200b', '\ufeff', '\u180e', '\u202f', '\u205f', '\u1680', '\u000b', '\u000c', ' \n', '\t\n', ' \r\n '];

function whitespace(rng) {
  let s = '';
  const n = rng.int(1, 20);
  for (let i = 0; i < n; i++) {
    const run = rng.int(1, 5);
    for (let j = 0; j < run; j++) s += rng.pick(SPACES);
    if (rng.next() < 0.7) s += rng.pick(['word', 'a', 'X', '1', '12345', '.', '!!', '中', 'é', '😀', '-x', '/path', '#', '"']);
  }
  return s;
}

const SPECIALS = [
  '<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>', '<｜▁pad▁｜>', '<｜User｜>', '<｜Assistant｜>', '<think>', '</think>',
  '<｜tool▁calls▁begin｜>', '<｜tool▁call▁begin｜>', '<｜tool▁sep｜>', '<｜tool▁call▁end｜>', '<｜tool▁calls▁end｜>',
  '<｜tool▁outputs▁begin｜>', '<｜tool▁output▁begin｜>', '<｜tool▁output▁end｜>', '<｜tool▁outputs▁end｜>',
  '<｜fim▁hole｜>', '<｜fim▁begin｜>', '<｜fim▁end｜>', '<｜place▁holder▁no▁0｜>', '<｜place▁holder▁no▁17｜>',
  '<｜place▁holder▁no▁799｜>',
  // near-misses: partial or mangled literals must stay plain text
  '<｜User', '｜User｜>', '<|User|>', '<｜user｜>', '<｜begin▁of▁sentence', '<｜<｜User｜>', '<think', 'think>', '< think>',
];

function specials(rng) {
  let s = '';
  const n = rng.int(1, 8);
  for (let i = 0; i < n; i++) {
    s += rng.pick(SPECIALS);
    if (rng.next() < 0.6) s += rng.pick([' ', '', '\n', 'Hello', ' world ', '你好', '123', '😀', '<', '｜', '▁']) + (rng.next() < 0.5 ? prose(rng).slice(0, 30) : '');
  }
  return s;
}

function randomCodepoints(rng) {
  let s = '';
  const n = rng.int(1, 25);
  for (let i = 0; i < n; i++) {
    const plane = rng.next();
    let c;
    if (plane < 0.5) c = rng.int(0, 0xffff);
    else if (plane < 0.75) c = rng.int(0x10000, 0x1ffff);
    else if (plane < 0.85) c = rng.int(0x20000, 0x3ffff);
    else c = rng.int(0x40000, 0x10ffff);
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;  // surrogates are not scalar values
    s += cp(c);
  }
  return s;
}

function assignedCodepoints(rng) {
  // Assigned characters only (per this Node's ICU), where Unicode classes actually matter.
  let s = '';
  const n = rng.int(1, 25);
  while (s.length < n) {
    const c = rng.next() < 0.7 ? rng.int(0x80, 0x2ffff) : rng.int(0, 0x10ffff);
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const ch = cp(c);
    if (/\p{Assigned}/u.test(ch)) s += ch + (rng.next() < 0.2 ? rng.pick([' ', 'a', '1', '\n']) : '');
  }
  return s;
}

function longWords(rng) {
  const k = rng.int(0, 9);
  const n = rng.int(100, 3000);
  const letters = (alpha, len) => Array.from({ length: len }, () => alpha[rng.int(0, alpha.length - 1)]).join('');
  switch (k) {
    case 0: return 'a'.repeat(n);
    case 1: return letters('abcdefghijklmnopqrstuvwxyz', n);
    case 2: return 'Supercalifragilisticexpialidocious'.repeat(rng.int(2, 40));
    case 3: return 'https://example.com/' + letters('abcdefghijklmnopqrstuvwxyz0123456789-_/?=&%', n);
    case 4: return letters('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/', n) + '==';
    case 5: return ' '.repeat(n) + 'x';
    case 6: return '😀'.repeat(rng.int(10, 300));
    case 7: return letters('的一是不了人我在有他', n);
    case 8: return '-'.repeat(n) + '\n' + '='.repeat(rng.int(1, 100));
    default: return letters('éèêëàâäôöûüçœæ', n);
  }
}

function mixed(rng, gens) {
  const n = rng.int(2, 6);
  let s = '';
  for (let i = 0; i < n; i++) {
    const g = rng.pick(gens);
    let piece = g(rng);
    if (piece.length > 300) piece = piece.slice(0, rng.int(1, 300));
    s += piece + (rng.next() < 0.5 ? rng.pick(SPACES) : '');
  }
  return s;
}

// Returns `count` strings; the fixed edge cases come first.
function buildCorpus(seed, count) {
  const rng = makeRng(seed);
  const fixed = [
    '', ' ', '  ', '\n', '\r\n', '\r', '\t', 'a', 'Hello world', 'Hello  world', 'Hello world ', ' Hello',
    "I'm don't we'll they've", 'a\r\nb\rc\n\rd', 'x \n y', '   \n\n   ', '1', '12', '123', '1234', '12345678901',
    '<｜begin▁of▁sentence｜>', '<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><think>\n</think>Hello<｜end▁of▁sentence｜>',
    '\u0000', '\u007f\u0080\u009f', '\ufffd', '\uffff\ufffe', '\u{10ffff}', '\u{e0001}\u{e0041}', 'ﬁ ﬀ Å Å', '\u0085x',
    'a\u0085b', '\u00a0\u00a0x', '\u3000中文', '中文abc中文', '日本語のテキスト、カタカナ', '한국어 텍스트', 'ｶﾀｶﾅ',
    '龥龦', '\u9fa5\u9fa6', 'ぁゟ゠ヿ', '👨‍👩‍👧‍👦', '🇺🇸🇯🇵', '👍🏽', 'é', 'é', 'ñ', '...', '!!!???', "'s", ' (x)',
  ];
  const gens = [prose, code, cjk, emoji, combining, script, numbers, whitespace, specials, randomCodepoints, assignedCodepoints, longWords];
  const out = fixed.slice(0, count);
  let i = 0;
  while (out.length < count) {
    const g = i % (gens.length + 1);
    out.push(g === gens.length ? mixed(rng, gens) : gens[g](rng));
    i++;
  }
  return out;
}

module.exports = { buildCorpus, makeRng };
