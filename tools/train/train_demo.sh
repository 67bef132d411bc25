#!/usr/bin/env bash
# Reproduces models/demo from scratch (docs/demo-model.md): corpus -> tokenizer -> token ids ->
# phase 1 (every skill) -> phase 2 (arithmetic-heavy mix) -> phase 3 (subtraction and multiplication)
# [-> phase 4 (arithmetic thinks by default, definitions repeat the word) -> phase 5 (phase 4 annealed)],
# each phase starting from the last one's weights -> export. Every phase is resumable: rerun the same
# command to continue.
# usage: tools/train/train_demo.sh [RUN_DIR] [PHASE1_STEPS] [PHASE2_STEPS] [PHASE3_STEPS] [PHASE4_STEPS] [PHASE5_STEPS]
#        (default build/demo-train 4000 4000 2000 0 0: the committed models/demo; 200 80 adds the phase-4/5
#        experiment of docs/demo-model.md, not committed: it did not keep the worked solutions' accuracy)
# THREADS=N sets torch threads (default 2; 1 on a machine busy with builds).
# Needs: build/release/apps/deepinfer/deepinfer and the Debian packages of scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-build/demo-train}
steps1=${2:-4000}
steps2=${3:-4000}
steps3=${4:-2000}
steps4=${5:-0}   # phases 4-5: an experiment, not in the committed model (docs/demo-model.md); run it with 200 80
steps5=${6:-0}
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
# phase DATA RUN FROM SEED MIX STEPS LR WARMUP [TRAIN.PY ARGS]: a corpus of its own, tokenized with phase 1's tokenizer, trained
# from FROM (under RUN_DIR): the checkpoint.pt of the phase before (weights and AdamW moments) or its export/
# (weights only, fresh moments: phase 4 was trained from the committed phase-3 model).
phase() {
  local data=$run/$1 out=$run/$2 from=$run/$3
  [ -f "$data/corpus.jsonl" ] || $py $t/build_corpus.py --out "$data" --docs 200000 --seed "$4" --mix "$5"
  [ -f "$data/tokens.npy" ] || $py $t/tokenize_corpus.py --corpus "$data/corpus.jsonl" \
    --tokenizer "$run/tokenizer" --deepinfer "$bin" --out "$data"
  $py $t/train.py --data "$data" --run "$out" --steps "$6" --lr "$7" --warmup "$8" --init-from "$from" "${common[@]}" \
    "${@:9}"
  last=$out
}
last=$run/run
if [ "$steps2" -gt 0 ]; then
  phase data2 run2 run/checkpoint.pt 5678 arithmetic "$steps2" 1e-3 100
  if [ "$steps3" -gt 0 ]; then
    phase data3 run3 run2/checkpoint.pt 9012 hard_arithmetic "$steps3" 5e-4 50
    if [ "$steps4" -gt 0 ]; then
      # phase 4 was laid out as 1200 steps and cut at 200 (the machine was shared with five builds);
      # phase 5 anneals it: 80 steps from 2e-4 to 2e-5, phase 4's corpus in another order
      phase data4 run4 run3/export 3456 default_think "$steps4" 5e-4 100 --schedule-steps 1200
      if [ "$steps5" -gt 0 ]; then
        phase data4 run5 run4/checkpoint.pt 3456 default_think "$steps5" 2e-4 1 --seed 4321
      fi
    fi
  fi
fi
echo "trained: $last/export (to models/demo: $py $t/export.py --checkpoint $last/checkpoint.pt --tokenizer $run/tokenizer --out models/demo)"
