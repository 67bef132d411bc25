#!/usr/bin/python3
"""V4.1 decoder replay through the engine: `deepinfer generate --input` (offline batch: the Engine, scheduler,
StepBatch setting SequenceState::prompt_len, two prompts batched) must give the same greedy text as the standalone
`generate --prompt` loop for each prompt, with `--yoco-prefill-truncation-mode compact` as without; and compact must
change the output (the cut reaches the model through the engine): its text or, where the 12 greedy tokens happen to
agree (they do on some ISAs' kernels), the chosen tokens' log-probabilities.

    check_v41_decoder_replay_engine.py --deepinfer BIN --model DIR --work DIR [--keep 16]
"""
import argparse
import json
import os
import subprocess
import sys

PROMPTS = [
    "The quick brown fox jumps over the lazy dog while the committee debates the budget for the next fiscal year, "
    "and nobody in the room remembers who first proposed the bridge across the river.",
    "In a small village by the sea, an old fisherman mended his nets every morning and told stories about storms "
    "to anyone who would listen.",
]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deepinfer", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--keep", type=int, default=16)
    args = ap.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    texts, ok = {}, True
    for mode in ("off", "compact"):
        flags = ["--max-tokens", "12", "--threads", "2", "--yoco-prefill-truncation-mode", mode,
                 "--yoco-prefill-keep-tokens", str(args.keep)]
        alone = []
        for p in PROMPTS:
            out = subprocess.run([args.deepinfer, "generate", "--model", args.model, "--prompt", p] + flags,
                                 check=True, capture_output=True, text=True).stdout
            alone.append(out)
        inp, outp = os.path.join(args.work, f"in_{mode}.jsonl"), os.path.join(args.work, f"out_{mode}.jsonl")
        with open(inp, "w") as f:
            for i, p in enumerate(PROMPTS):
                f.write(json.dumps({"id": i, "prompt": p, "max_tokens": 12, "logprobs": True}) + "\n")
        subprocess.run([args.deepinfer, "generate", "--model", args.model, "--input", inp, "--output", outp] + flags,
                       check=True, capture_output=True)
        with open(outp) as f:
            rows = [json.loads(line) for line in f]
        batched = [r["text"] for r in rows]
        for i, (a, b) in enumerate(zip(alone, batched)):
            same = a.rstrip("\n").endswith(b) and len(b) > 0
            print(f"{mode} prompt {i}: engine batch {b!r} vs standalone -> {'ok' if same else 'FAIL'}")
            ok &= same
        texts[mode] = [(r["text"], [lp["logprob"] for lp in r["logprobs"]]) for r in rows]
    differs = texts["off"] != texts["compact"]
    same_text = [a[0] for a in texts["off"]] == [a[0] for a in texts["compact"]]
    print(f"compact changes the output: {differs} (text {'the same' if same_text else 'differs'}) -> "
          f"{'ok' if differs else 'FAIL'}")
    return 0 if ok and differs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
