"""Step 2: train the byte-level BPE on the corpus and write tokenizer.json + tokenizer_config.json.

usage: build_tokenizer.py --corpus DIR/corpus.jsonl --out TOKDIR [--vocab 8192]
"""
import argparse
import json
import os
import time

import bpe
import data_sources
import tokenizer_files
from chat_format import ADDED_MARKERS, SPECIAL_MARKERS

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def training_texts(corpus_path, max_docs):
    texts = []
    with open(corpus_path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= max_docs:
                break
            texts += [t for marker, t, _ in json.loads(line)["segments"] if not marker]
    texts += data_sources.python_doc_paragraphs()
    texts += [f"{w} ({pos}): {d}" for w, pos, d, _ in data_sources.wordnet_definitions()]
    return texts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=8192, help="total ids, added tokens included")
    ap.add_argument("--max-docs", type=int, default=60000)
    args = ap.parse_args()
    t0 = time.time()
    counts = bpe.count_words(training_texts(args.corpus, args.max_docs))
    n_merges = args.vocab - len(SPECIAL_MARKERS) - 256 - len(ADDED_MARKERS)
    merges = bpe.train_bpe(counts, n_merges)
    # Fewer merges than asked (rare pairs) leave the vocabulary smaller; the model's vocab_size
    # is the tokenizer's size either way.
    tokenizer_files.write_tokenizer(args.out, merges, REPO_ROOT)
    print(f"wrote {args.out}: {len(merges)} merges, {tokenizer_files.n_tokens(merges)} ids, "
          f"{len(counts)} distinct words, {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
