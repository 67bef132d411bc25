#!/usr/bin/env bash
# Reproduces models/demo from scratch (docs/demo-model.md): corpus -> tokenizer -> token ids ->
# phase 1 (every skill) -> phase 2 (arithmetic-heavy mix) -> phase 3 (subtraction and multiplication)
# -> phase 4 (arithmetic thinks by default, definitions repeat the word, phase 3's worked solutions
# replayed) -> phase 5 (phase 4's corpus again at half the lr) -> phase 6 (phase 4's mix with worked
# multiplications added) -> phase 7 (copy drills and definitions of the common words, phase 6's mix
# replayed) -> phase 8 (the MTP layer alone, also on its own output as the engine chains drafts), each
# phase starting from the last one's weights -> export. Every phase is resumable: rerun the same command
# to continue.
# usage: tools/train/train_demo.sh [RUN_DIR] [PHASE1_STEPS] ... [PHASE8_STEPS]
#        (default build/demo-train 2000 2000 1600 500 500 2000 1500 800, batch 11 x 192 tokens: the third recipe,
#        models/demo; 0 for a phase stops the curriculum before it. The first recipe — 4000/4000/2000/600/600
#        steps at 16 x 128 with the first data formats, ~2.5 h — is this script before session 18 in git; the
#        second is this script without phases 7 and 8)
# THREADS=N sets torch threads (default 2; 1 on a machine busy with builds).
# Needs: build/release/apps/deepinfer/deepinfer and the Debian packages of scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-build/demo-train}
steps1=${2:-2000}
steps2=${3:-2000}
steps3=${4:-1600}
steps4=${5:-500}
steps5=${6:-500}
steps6=${7:-2000}
steps7=${8:-1500}
steps8=${9:-800}
py=/usr/bin/python3   # Debian's python3 with python3-torch, python3-numpy, python3-regex
# glibc returns torch's freed activations to the kernel and faults them back in every step (46k page faults
# a second, 40% system time on a 2-core Zen 5 host): keep them in the heap (1.0-1.1 -> 0.6-0.8 s a step)
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-33554432} MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-17179869184}
export MALLOC_TOP_PAD_=${MALLOC_TOP_PAD_:-536870912}
bin=$PWD/build/release/apps/deepinfer/deepinfer
t=tools/train
# rows of 192 tokens: a worked subtraction that compares first is 94 / 117 / 139 tokens on average for
# 2 / 3 / 4 digits (with the thinking system prompt), a quarter of them over 128; 11 x 192 tokens a step
# is about the first recipe's 16 x 128
common=(--tokenizer "$run/tokenizer" --batch 11 --seq-len 192 --seed 1234 --threads "${THREADS:-2}")
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
      # phase 4 ("4r" in docs/demo-model.md) from phase 3's export (weights only, fresh AdamW moments: it
      # was trained from the phase-3 models/demo) at a peak lr of 1e-4, twice the lr phase 3 ended on;
      # phase 5 goes over the same corpus in another order at 5e-5
      phase data4 run4 run3/export 3456 default_think_replay "$steps4" 1e-4 60
      if [ "$steps5" -gt 0 ]; then
        phase data4 run5 run4/checkpoint.pt 3456 default_think_replay "$steps5" 5e-5 1 --seed 4321
        if [ "$steps6" -gt 0 ]; then
          phase data6 run6 run5/checkpoint.pt 7890 mul_replay "$steps6" 1e-4 50
          if [ "$steps7" -gt 0 ]; then
            # phase 7 from phase 6's export (weights only: it was trained from the committed phase-6
            # models/demo), at twice phase 6's lr and 5x that for the embedding and output head, whose rows
            # of the copied words move only when those words occur
            phase data7 run7 run6/export 2468 definitions "$steps7" 2e-4 50 --vocab-lr-scale 5
            if [ "$steps8" -gt 0 ]; then
              # phase 8: the MTP layer alone (the main model, embedding and head frozen: phase 7's answers
              # stay bit for bit), phase 7's corpus in another order, its loss also on chained rows (the
              # layer's own output in place of the main model's hidden state, as the engine's second
              # draft); from phase 7's export (weights only: the optimizer holds the MTP layer alone)
              phase data7 run8 run7/export 2468 definitions "$steps8" 3e-4 30 --mtp-chain --train-only mtp \
                --seed 8642
            fi
          fi
        fi
      fi
    fi
  fi
fi
echo "trained: $last/export (to models/demo: $py $t/export.py --checkpoint $last/checkpoint.pt --tokenizer $run/tokenizer --out models/demo)"
