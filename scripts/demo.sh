#!/usr/bin/env bash
# The main job on the built-in model: set up, then chat with models/demo, a small DeepSeek-V3-architecture
# model trained here (docs/demo-model.md), in the real Hugging Face format. Without models/demo (a checkout
# that lacks it) a tiny random-weight checkpoint is generated instead, which prints noise.
# Usage: scripts/demo.sh ["prompt text"]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh release
bin=build/release/apps/deepinfer/deepinfer
model=models/demo
prompt="${1:-What is 27 + 45?}"
if [ ! -f "$model/config.json" ]; then
  model=models/tiny-v3-fp8
  [ -f "$model/config.json" ] ||
    "$bin" make-model --arch deepseek_v3 --preset tiny --dtype fp8 --seed 0 --out "$model"
fi
"$bin" inspect "$model" | sed -n 1,12p   # sed reads everything: no SIGPIPE under pipefail
"$bin" generate --model "$model" --chat --prompt "$prompt" --max-tokens 48 --temperature 0
echo
