#!/usr/bin/env bash
# The main job on a small built-in model: set up, generate a tiny DeepSeek-V3-architecture checkpoint in the
# real Hugging Face format (random weights, real tokenizer), and stream a chat completion from it.
# Usage: scripts/demo.sh ["prompt text"]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh release
bin=build/release/apps/deepinfer/deepinfer
model=models/tiny-v3-fp8
if [ ! -f "$model/config.json" ]; then
  "$bin" make-model --arch deepseek_v3 --preset tiny --dtype fp8 --seed 0 --out "$model"
fi
"$bin" inspect "$model" | sed -n 1,12p   # sed reads everything: no SIGPIPE under pipefail
"$bin" generate --model "$model" --chat --prompt "${1:-Write a haiku about inference engines.}" \
  --max-tokens 48 --temperature 0.8 --seed 1
echo
