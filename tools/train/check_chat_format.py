"""Check that chat_format.render (what the model is trained on) gives the same ids as the engine's
own prompt rendering (`deepinfer tokenize --chat`, src/recipe/encoding_v3.cpp) for every kind of
generated conversation: system prompts, multi-turn, tool calls, tool outputs, thinking. The
trained reply is cut off where the prompt of the next request would end. Exit 1 on a mismatch.

usage: check_chat_format.py --deepinfer BIN --tokenizer TOKDIR [--count N]
"""
import argparse
import json
import random
import subprocess
import sys

import chat_format
import data_sources
import tasks
from tokenize_corpus import tokenize_documents


def prompts_of(conv):
    """Every prefix of conv that ends before an assistant turn (the requests a client would send).
    Thinking replies are skipped as history: the V3 encoding renders them as plain text."""
    out = []
    for i, m in enumerate(conv):
        if m["role"] == "assistant" and i > 0:
            history = conv[:i]
            if not any(h.get("reasoning") is not None for h in history):
                out.append(history)
    return out


def conversations(rng, count):
    words = data_sources.wordnet_definitions()[:5000]
    fortunes = data_sources.fortunes()
    makers = [lambda: tasks.arithmetic(rng), lambda: tasks.arithmetic(rng, think=True),
              lambda: tasks.tool_call_chat(rng, words), lambda: tasks.multi_turn(rng, words, fortunes),
              lambda: tasks.json_record(rng), lambda: tasks.unit_conversion(rng)]
    return [makers[i % len(makers)]() for i in range(count)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deepinfer", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--count", type=int, default=120)
    args = ap.parse_args()
    rng = random.Random(5)
    prompts = [p for conv in conversations(rng, args.count) for p in prompts_of(conv)]
    ours = []
    for p in prompts:
        segs = chat_format.render(p, add_generation_prompt=True)
        ours.append([[int(s.marker), s.text, 0] for s in segs])
    ids, _, starts = tokenize_documents(ours, args.deepinfer, args.tokenizer)
    bodies = [{"model": "demo", "messages": chat_format.to_api_messages(p)} for p in prompts]
    r = subprocess.run([args.deepinfer, "tokenize", "--model", args.tokenizer, "--chat"],
                       input=json.dumps(bodies).encode(), capture_output=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"deepinfer tokenize --chat failed: {r.stderr.decode()}")
    engine = json.loads(r.stdout)
    bad = 0
    for k, p in enumerate(prompts):
        mine = ids[starts[k]:starts[k + 1]].tolist()
        if mine != engine[k]:
            bad += 1
            if bad <= 3:
                print(f"FAIL prompt {k}: {json.dumps(p)[:300]}\n  ours:   {mine}\n  engine: {engine[k]}")
    kinds = sum(1 for p in prompts if any(m["role"] == "tool" for m in p))
    print(f"{len(prompts) - bad}/{len(prompts)} prompts identical ({kinds} with tool calls and outputs)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
