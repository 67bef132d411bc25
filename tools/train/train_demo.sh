#!/usr/bin/env bash
# Reproduces models/demo from scratch (docs/demo-model.md): corpus -> tokenizer -> token ids ->
# phase 1 (every skill) -> phase 2 (arithmetic-heavy mix) -> phase 3 (subtraction and multiplication),
# each phase starting from the last one's weights -> export. Every phase is resumable: rerun the same
# command to continue.
# usage: tools/train/train_demo.sh [RUN_DIR] [PHASE1_STEPS] [PHASE2_STEPS] [PHASE3_STEPS]
#        (default build/demo-train 4000 4000 2000)
# THREADS=N sets torch threads (default 2; 1 on a machine busy with builds).
# Needs: build/release/apps/deepinfer/deepinfer and the Debian packages of scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-build/demo-train}
steps1=${2:-4000}
steps2=${3:-4000}
steps3=${4:-2000}
py=/usr/bin/python3   # Debian's python3 with python3-torch, python3-numpy, python3-regex
bin=$PWD/build/release/apps/deepinfer/deepinfer
t=tools/train
common=(--tokenizer "$run/tokenizer" --batch 16 --seq-len 128 --seed 1234 --threads "${THREADS:-2}")
[ -f "$run/data/corpus.jsonl" ] || $py $t/build_corpus.py --out "$run/data" --docs 200000 --seed 1234
[ -f "$run/tokenizer/tokenizer.json" ] || $py $t/build_tokenizer.py --corpus "$run/data/corpus.jsonl" \
  --out "$run/tokenizer" --vocab 8192
[ -f "$run/data/tokens.npy" ] || $py $t/tokenize_corpus.py --corpus "$run/data/corpus.jsonl" \
  --tokenizer "$run/tokenizer" --deepinfer "$bin" --out "$run/data"
$py $t/train.py --data "$run/data" --run "$run/run" --steps "$steps1" --lr 2e-3 "${common[@]}"
if [ "$steps2" -gt 0 ]; then
  [ -f "$run/data2/corpus.jsonl" ] || $py $t/build_corpus.py --out "$run/data2" --docs 200000 --seed 5678 \
    --mix arithmetic
  [ -f "$run/data2/tokens.npy" ] || $py $t/tokenize_corpus.py --corpus "$run/data2/corpus.jsonl" \
    --tokenizer "$run/tokenizer" --deepinfer "$bin" --out "$run/data2"
  $py $t/train.py --data "$run/data2" --run "$run/run2" --steps "$steps2" --lr 1e-3 --warmup 100 \
    --init-from "$run/run/checkpoint.pt" "${common[@]}"
  last=$run/run2
  if [ "$steps3" -gt 0 ]; then
    [ -f "$run/data3/corpus.jsonl" ] || $py $t/build_corpus.py --out "$run/data3" --docs 200000 --seed 9012 \
      --mix hard_arithmetic
    [ -f "$run/data3/tokens.npy" ] || $py $t/tokenize_corpus.py --corpus "$run/data3/corpus.jsonl" \
      --tokenizer "$run/tokenizer" --deepinfer "$bin" --out "$run/data3"
    $py $t/train.py --data "$run/data3" --run "$run/run3" --steps "$steps3" --lr 5e-4 --warmup 50 \
      --init-from "$run/run2/checkpoint.pt" "${common[@]}"
    last=$run/run3
  fi
else
  last=$run/run
fi
echo "trained: $last/export (to models/demo: $py $t/export.py --checkpoint $last/checkpoint.pt --tokenizer $run/tokenizer --out models/demo)"
