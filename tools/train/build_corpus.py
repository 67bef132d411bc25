"""Step 1: the training corpus as JSONL, one rendered document per line: {"kind", "segments":
[[is_marker, text, trained], ...]}. Deterministic for a seed.

usage: build_corpus.py --out DIR [--docs N] [--seed S] [--mix NAME]   (NAME: a key of MIXES below)
"""
import argparse
import json
import os
import random

import chat_format
import data_sources
import tasks

MIXES = {  # name -> [(kind, weight)]
    # every mix has a few "comparison" documents (second recipe, docs/demo-model.md): "which is larger"
    # answered column by column, the step the worked subtraction now starts with; the first recipe's
    # models got subtraction wrong mostly when the operands shared their leading digits; and a few
    # "repeat" documents (copy practice: that model's definitions named another word than the asked one)
    # phase 1: every skill
    "general": [("arithmetic", 30), ("arithmetic_think", 12), ("units", 7), ("json", 8), ("tools", 13),
                ("definition", 12), ("multi_turn", 8), ("small_talk", 2), ("quote", 2), ("prose", 6),
                ("comparison", 3), ("repeat", 3)],
    # phase 2 (train_demo.sh): arithmetic was still climbing when the format skills had converged, so the
    # second phase gives it 64% of the documents and keeps replaying the rest so nothing is forgotten
    "arithmetic": [("arithmetic", 40), ("arithmetic_think", 24), ("units", 4), ("json", 4), ("tools", 8),
                   ("definition", 8), ("multi_turn", 6), ("small_talk", 2), ("quote", 1), ("prose", 3),
                   ("comparison", 3), ("repeat", 2)],
    # phase 3: after phase 2, addition was right ~100% of the time with thinking, subtraction and
    # multiplication about half: more of those two, most of it with the worked solution; and
    # definitions of the 1500 most common words only (92k glosses seen once each taught nothing)
    "hard_arithmetic": [("arithmetic_hard", 26), ("arithmetic_hard_think", 38), ("units", 3), ("json", 3),
                        ("tools", 7), ("definition_common", 14), ("multi_turn", 5), ("small_talk", 2),
                        ("quote", 1), ("prose", 1), ("comparison", 3), ("repeat", 2)],
    # phase 4: arithmetic thinks by default (no system prompt: a plain chat request gets the worked
    # solution; direct answers were 19-66% right on subtraction and multiplication, worked ones 88%),
    # and definitions start by repeating the asked word ("The word X means ..."), of the 1500 common
    # lemmas mostly, a few of all WordNet so the copy generalises
    "default_think": [("arithmetic_default_think", 30), ("arithmetic_hard_think", 18),
                      ("definition_word_common", 16), ("definition_word", 3), ("units", 3), ("json", 4),
                      ("tools_word", 9), ("multi_turn_word", 6), ("small_talk", 2), ("quote", 1), ("prose", 2)],
    # phase 4, second form (2026-12-02, session 9): default_think lost phase 3's worked solutions under the
    # thinking system prompt (3-digit subtraction 96% -> 68-80%) at 18% replay; this keeps phase 3's 38%
    # share of them (arithmetic_hard_think) beside the new default-thinking requests
    "default_think_replay": [("arithmetic_default_think", 22), ("arithmetic_hard_think", 30),
                             ("definition_word_common", 16), ("definition_word", 3), ("units", 3), ("json", 4),
                             ("tools_word", 9), ("multi_turn_word", 6), ("small_talk", 2), ("quote", 1),
                             ("prose", 2), ("comparison", 2), ("repeat", 3)],
}
# phase 6 (second recipe): the 6600-step curriculum leaves 2-digit multiplication at ~62% (the first
# recipe's 11200 steps: 87-89%): phase 4's mix with worked multiplications added (18% of the documents;
# with the x of the other arithmetic kinds, a third are multiplications)
MIXES["mul_replay"] = ([("arithmetic_mul_default_think", 14), ("arithmetic_mul_think", 8)]
                       + MIXES["default_think_replay"])
# phase 7 (third recipe): definitions. After phase 6 the model answers "What does seize mean?" with "The
# word reize means ...": it does not copy the asked word (the "repeat" drills above draw from all 92k
# WordNet lemmas, each copied about once). Copying a word is learnt per token, from dozens of copies of it:
# copy drills over the 1500 common lemmas (most are one token) are 37% of the documents, definitions of
# those lemmas 19% (with the replayed ones), phase 6's mix the rest
MIXES["definitions"] = [("definition_word_common", 30), ("repeat_common", 90)] + MIXES["mul_replay"]
# copy drills alone: session 19's experiment (docs/demo-model.md, "How phase 7 came about"); not in the recipe
MIXES["copy_probe"] = [("repeat_common", 1)]


def make_document(kind, rng, words, fortunes, prose, common_words):
    if kind == "prose":
        text = rng.choice(prose)
        return [chat_format.Segment(True, chat_format.BOS), chat_format.Segment(False, text, True)]
    conv = {
        "arithmetic": lambda: tasks.arithmetic(rng),
        "arithmetic_think": lambda: tasks.arithmetic(rng, think=True),
        "arithmetic_hard": lambda: tasks.arithmetic(rng, ops=tasks.HARD_OPS),
        "arithmetic_hard_think": lambda: tasks.arithmetic(rng, think=True, ops=tasks.HARD_OPS),
        "arithmetic_default_think": lambda: tasks.arithmetic(rng, think=True, ops=tasks.HARD_OPS,
                                                             think_system=False),
        "comparison": lambda: tasks.comparison(rng),
        "repeat": lambda: tasks.repeat_words(rng, words),
        "repeat_common": lambda: tasks.repeat_words(rng, common_words),
        "arithmetic_mul_think": lambda: tasks.arithmetic(rng, think=True, ops=tasks.MUL_OPS),
        "arithmetic_mul_default_think": lambda: tasks.arithmetic(rng, think=True, ops=tasks.MUL_OPS,
                                                                 think_system=False),
        "units": lambda: tasks.unit_conversion(rng),
        "json": lambda: tasks.json_record(rng),
        "tools": lambda: tasks.tool_call_chat(rng, words),
        "definition": lambda: tasks.definition(rng, words),
        "definition_common": lambda: tasks.definition(rng, common_words),
        "definition_word": lambda: tasks.definition(rng, words, style="word"),
        "definition_word_common": lambda: tasks.definition(rng, common_words, style="word"),
        "tools_word": lambda: tasks.tool_call_chat(rng, words, style="word"),
        "multi_turn": lambda: tasks.multi_turn(rng, words, fortunes),
        "multi_turn_word": lambda: tasks.multi_turn(rng, common_words, fortunes, style="word"),
        "small_talk": lambda: tasks.small_talk(rng),
        "quote": lambda: tasks.quote(rng, fortunes),
    }[kind]()
    return chat_format.render(conv, add_generation_prompt=False)


def load_sources():
    words = data_sources.wordnet_definitions()
    fortunes = data_sources.fortunes()
    prose = data_sources.python_doc_paragraphs() + fortunes
    return words, fortunes, prose


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--docs", type=int, default=200000)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--mix", choices=sorted(MIXES), default="general")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    words, fortunes, prose = load_sources()
    common_words = data_sources.common_definitions()
    kinds = [k for k, _ in MIXES[args.mix]]
    weights = [w for _, w in MIXES[args.mix]]
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "corpus.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(args.docs):
            kind = rng.choices(kinds, weights)[0]
            segs = make_document(kind, rng, words, fortunes, prose, common_words)
            f.write(json.dumps({"kind": kind, "segments": [[int(s.marker), s.text, int(s.trained)] for s in segs]},
                               ensure_ascii=False) + "\n")
    print(f"wrote {path}: {args.docs} documents, mix {args.mix}")


if __name__ == "__main__":
    main()
