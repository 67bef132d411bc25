#!/usr/bin/python3
"""V4.1 decoder-side SWA bounded replay (`--yoco-prefill-truncation-mode compact`) against deepseek_v41_ref.py.

The engine's `deepinfer logits --prefill P --yoco-prefill-truncation-mode compact --yoco-prefill-keep-tokens K`
(a P-token prompt whose decoder layers run only on its last K tokens, then teacher-forced decode of the remaining
ids) against the reference's `--prefill P --decoder-replay K` at the tight no-bf16 bound of compare_v41_logits.py
(the replay is the same computation on both sides), and the loose bound in production numerics. Then what the
replay changes against the exact run (both engine, and both reference): on the rows that reach the head (the
prompt's last K rows and the decode rows), max |Δ logit|, per-row KL(exact || replay) and top-1 agreement, printed
for docs/models.md (no bound: the change is the design's approximation).

With `--hit H` (repeatable) also a prefix-cache hit of H prompt tokens (`deepinfer logits --replay-hit H`: encoder
SWA bounded replay from H - W, W = window + max_ngram_size - 1 with Engram) against the reference's `--replay-hit H`,
alone and together with decoder replay, at the same bounds: a prompt resumed from a cached prefix equals the
reference's run of the same replay (the rows from the replay start; their change against the cold run is printed).

    compare_v41_replay.py --deepinfer BIN --model DIR --work DIR [--n-ids 56] [--prompt 48] [--keep 20] [--hit 32]
"""
import argparse
import json
import os
import random
import subprocess
import sys

import numpy as np

from compare_v4_logits import check, check_tight

HERE = os.path.dirname(os.path.abspath(__file__))

MODES = {  # mode -> (deepinfer --numerics, reference switches, tight bound)
    "no-bf16": ("no-bf16", ["--no-bf16", "--sim-input", "f32"], True),
    "production": ("production", ["--sim-input", "f32"], False),
}


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def change(name, exact, replay, n_prompt_rows):
    """What replay changes: rows [0, n_prompt_rows) are the prompt's last rows, the rest decode rows."""
    for part, rows in (("prompt rows", slice(0, n_prompt_rows)), ("decode rows", slice(n_prompt_rows, None))):
        a, b = exact[rows], replay[rows]
        if len(a) == 0:
            continue
        la, lb = log_softmax(a), log_softmax(b)
        kl = np.sum(np.exp(la) * (la - lb), axis=1)
        top1 = float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))
        print(f"{name} replay vs exact, {part} ({len(a)}): max |d| {float(np.abs(a - b).max()):.3g}, "
              f"KL max {float(kl.max()):.3g} mean {float(kl.mean()):.3g}, top-1 agreement {top1:.3f}")


def replay_tokens(model):
    """The engine's swa_replay_tokens: the window, plus max_ngram_size - 1 with Engram (model/swa_replay.h)."""
    with open(os.path.join(model, "config.json")) as f:
        c = json.load(f)["text_config"]
    return c["sliding_window"] + (c["engram_max_ngram_size"] - 1 if c.get("engram_layer_ids") else 0)


def run_engine(args, numerics, id_text, out, keep=0, hit=0):
    cmd = [args.deepinfer, "logits", "--model", args.model, "--ids", id_text, "--prefill", str(args.prompt),
           "--numerics", numerics, "--out", out]
    if keep:
        cmd += ["--yoco-prefill-truncation-mode", "compact", "--yoco-prefill-keep-tokens", str(keep)]
    if hit:
        cmd += ["--replay-hit", str(hit)]
    subprocess.run(cmd, check=True)
    return np.load(out)


def run_ref(args, switches, id_text, out, keep=0, hit=0):
    start = hit - replay_tokens(args.model) if hit else 0
    cmd = [sys.executable, os.path.join(HERE, "deepseek_v41_ref.py"), "--model", args.model, "--tokens", id_text,
           "--prefill", str(args.prompt - start), "--prompt-len", str(args.prompt), "--out", out] + switches
    if keep:
        cmd += ["--decoder-replay", str(keep)]
    if hit:
        cmd += ["--replay-hit", str(hit), "--replay-tokens", str(replay_tokens(args.model))]
    subprocess.run(cmd, check=True)
    return np.load(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deepinfer", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--n-ids", type=int, default=56)
    ap.add_argument("--prompt", type=int, default=48)
    ap.add_argument("--keep", type=int, default=20)
    ap.add_argument("--hit", type=int, action="append", default=[],
                    help="also a prefix-cache hit of this many tokens (encoder replay), with and without decoder replay")
    ap.add_argument("--mode", choices=["all"] + list(MODES), default="all")
    args = ap.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    rng = random.Random(7)  # the ids of compare_v41_logits.py (exact mode held to the tight bound there)
    ids = [0] + [rng.randrange(129280) for _ in range(args.n_ids - 1)]
    id_text = ",".join(str(i) for i in ids)
    cut = max(0, args.prompt - args.keep)
    w = replay_tokens(args.model)
    # (name, decoder keep, hit, first row that reaches the head)
    cases = [("decoder replay", args.keep, 0, cut)]
    for hit in args.hit:
        cases += [(f"hit {hit}", 0, hit, hit - w), (f"hit {hit} + decoder replay", args.keep, hit, max(cut, hit - w))]
    ok = True
    for mode in (list(MODES) if args.mode == "all" else [args.mode]):
        numerics, switches, tight = MODES[mode]
        path = lambda name: os.path.join(args.work, f"{name}_{mode}.npy")  # noqa: E731
        eng_exact = run_engine(args, numerics, id_text, path("eng_exact"))
        for name, keep, hit, first in cases:
            tag = name.replace(" ", "_").replace("+", "")
            eng = run_engine(args, numerics, id_text, path("eng_" + tag), keep, hit)
            ref = run_ref(args, switches, id_text, path("ref_" + tag), keep, hit)
            expected_rows = args.n_ids - first
            shape_ok = eng.shape[0] == expected_rows and ref.shape[0] == expected_rows
            print(f"{mode} {name}: rows from {first}: engine {eng.shape[0]}, reference {ref.shape[0]}, "
                  f"expected {expected_rows} -> {'ok' if shape_ok else 'FAIL'}")
            ok &= shape_ok
            if not shape_ok:
                continue
            ok &= (check_tight if tight else check)(f"{mode} {name}: engine vs reference", eng, ref)
            n_prompt_rows = args.prompt - first
            change(f"{mode} {name} (engine)", eng_exact[first:], eng, n_prompt_rows)
            if tight and keep and not hit:
                ref_exact = run_ref(args, switches, id_text, path("ref_exact"))
                change(f"{mode} {name} (reference)", ref_exact[first:], ref, n_prompt_rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
