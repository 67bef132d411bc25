"""A small byte-level BPE trainer: word counts -> merges, updated incrementally per merge.

Pieces that hold a digit are never merged, so every digit stays its own token: arithmetic then
works digit by digit, which a small model can learn.
"""
import heapq
from collections import Counter, defaultdict

from pretokenize import byte_level, pre_tokenize


def count_words(texts):
    counts = Counter()
    for t in texts:
        for piece in pre_tokenize(t):
            if not any(c.isdigit() for c in piece):
                counts[byte_level(piece)] += 1
    return counts


def train_bpe(word_counts, n_merges, min_count=2):
    """Returns the merges [(left, right)] in order. Ties break on the smaller pair (deterministic).
    A heap with lazy deletion holds (-count, pair); stale entries are skipped when popped."""
    words = [list(w) for w in word_counts]
    freqs = list(word_counts.values())
    pair_count = Counter()
    pair_words = defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += freqs[i]
            pair_words[(a, b)].add(i)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        neg, pair = heapq.heappop(heap)
        count = pair_count.get(pair, 0)
        if count != -neg:
            continue  # stale
        if count < min_count:
            break
        merges.append(pair)
        merged = pair[0] + pair[1]
        touched = set()
        for i in sorted(pair_words[pair]):
            w = words[i]
            for a, b in zip(w, w[1:]):  # remove this word's old pairs
                touched.add((a, b))
                pair_count[(a, b)] -= freqs[i]
                if pair_count[(a, b)] <= 0:
                    del pair_count[(a, b)]
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == pair[0] and w[j + 1] == pair[1]:
                    out.append(merged)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for a, b in zip(out, out[1:]):
                pair_count[(a, b)] += freqs[i]
                pair_words[(a, b)].add(i)
                touched.add((a, b))
        pair_words.pop(pair, None)
        for p in touched:
            if pair_count.get(p, 0) > 0:
                heapq.heappush(heap, (-pair_count[p], p))
    return merges
