"""Step 3: corpus.jsonl -> token ids with the engine's own tokenizer (`deepinfer tokenize`), so
training sees exactly the ids the engine will feed. Text segments are plain BPE (--no-special),
markers are single ids, as src/recipe/prompt.cpp tokenizes a prompt.

Writes DIR/tokens.npy (uint16), DIR/trained.npy (uint8: 1 where the loss applies) and
DIR/doc_starts.npy (int64 offsets, one per document, plus the end).
usage: tokenize_corpus.py --corpus DIR/corpus.jsonl --tokenizer TOKDIR --deepinfer BIN --out DIR
"""
import argparse
import json
import os
import subprocess

import numpy as np


def engine_tokenize(deepinfer, tok_dir, texts):
    r = subprocess.run([deepinfer, "tokenize", "--model", tok_dir, "--json", "--no-special"],
                       input=json.dumps(texts, ensure_ascii=False).encode(), capture_output=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"deepinfer tokenize failed: {r.stderr.decode()}")
    return json.loads(r.stdout)


def marker_ids(tok_dir):
    with open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8") as f:
        return {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}


def tokenize_documents(docs, deepinfer, tok_dir):
    """docs: lists of [is_marker, text, trained]. Returns (ids, trained, starts) numpy arrays."""
    markers = marker_ids(tok_dir)
    texts = [t for d in docs for m, t, _ in d if not m]
    encoded = iter(engine_tokenize(deepinfer, tok_dir, texts))
    ids, trained, starts = [], [], []
    for d in docs:
        starts.append(len(ids))
        for m, t, tr in d:
            piece = [markers[t]] if m else next(encoded)
            ids += piece
            trained += [tr] * len(piece)
    starts.append(len(ids))
    return np.array(ids, dtype=np.uint16), np.array(trained, dtype=np.uint8), np.array(starts, dtype=np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--deepinfer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chunk", type=int, default=20000, help="documents per deepinfer call")
    args = ap.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        docs = [json.loads(line)["segments"] for line in f]
    all_ids, all_tr, all_starts, offset = [], [], [], 0
    for i in range(0, len(docs), args.chunk):
        ids, tr, starts = tokenize_documents(docs[i:i + args.chunk], args.deepinfer, args.tokenizer)
        all_ids.append(ids)
        all_tr.append(tr)
        all_starts.append(starts[:-1] + offset)
        offset += len(ids)
    os.makedirs(args.out, exist_ok=True)
    np.save(os.path.join(args.out, "tokens.npy"), np.concatenate(all_ids))
    np.save(os.path.join(args.out, "trained.npy"), np.concatenate(all_tr))
    np.save(os.path.join(args.out, "doc_starts.npy"), np.concatenate(all_starts + [np.array([offset])]))
    n_tr = int(sum(t.sum() for t in all_tr))
    print(f"wrote {args.out}: {len(docs)} documents, {offset} tokens ({n_tr} trained)")


if __name__ == "__main__":
    main()
