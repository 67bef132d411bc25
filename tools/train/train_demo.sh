#!/usr/bin/env bash
# Reproduces models/demo from scratch (docs/demo-model.md): corpus -> tokenizer -> token ids ->
# training (resumable: rerun the same command to continue) -> export.
# usage: tools/train/train_demo.sh [RUN_DIR] [STEPS]     (default build/demo-train, 600)
# THREADS=N sets torch threads (default 2; 1 on a machine busy with builds).
# Needs: build/release/apps/deepinfer/deepinfer and the Debian packages of scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-build/demo-train}
steps=${2:-600}
py=/usr/bin/python3   # Debian's python3 with python3-torch, python3-numpy, python3-regex
bin=$PWD/build/release/apps/deepinfer/deepinfer
t=tools/train
[ -f "$run/data/corpus.jsonl" ] || $py $t/build_corpus.py --out "$run/data" --docs 200000 --seed 1234
[ -f "$run/tokenizer/tokenizer.json" ] || $py $t/build_tokenizer.py --corpus "$run/data/corpus.jsonl" \
  --out "$run/tokenizer" --vocab 8192
[ -f "$run/data/tokens.npy" ] || $py $t/tokenize_corpus.py --corpus "$run/data/corpus.jsonl" \
  --tokenizer "$run/tokenizer" --deepinfer "$bin" --out "$run/data"
$py $t/train.py --data "$run/data" --tokenizer "$run/tokenizer" --run "$run/run" --steps "$steps" \
  --batch 16 --seq-len 128 --lr 2e-3 --seed 1234 --threads "${THREADS:-2}"
echo "trained: $run/run/export (copy it to models/demo: tools/train/export.py --checkpoint $run/run/checkpoint.pt --tokenizer $run/tokenizer --out models/demo)"
