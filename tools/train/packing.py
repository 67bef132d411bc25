"""Packs whole documents into fixed-length rows (no document is cut; each row holds several).

Row tensors: ids, positions (restart at 0 per document), doc ids (attention stays inside one) and
the trained mask. Documents come in a seeded random order per epoch; the state (epoch, next
document) is saved in the checkpoint, so a resumed run sees exactly the rows it would have seen.
"""
import numpy as np
import torch


class Packer:
    def __init__(self, data_dir, seq_len, seed, pad_id):
        self.tokens = np.load(f"{data_dir}/tokens.npy").astype(np.int64)
        self.trained = np.load(f"{data_dir}/trained.npy")
        self.starts = np.load(f"{data_dir}/doc_starts.npy")
        self.seq_len, self.seed, self.pad_id = seq_len, seed, pad_id
        self.epoch, self.next_doc = 0, 0
        self._order = self._order_for(0)

    def n_docs(self):
        return len(self.starts) - 1

    def _order_for(self, epoch):
        return np.random.default_rng(self.seed + epoch).permutation(self.n_docs())

    def state(self):
        return {"epoch": self.epoch, "next_doc": self.next_doc}

    def load_state(self, s):
        self.epoch, self.next_doc = s["epoch"], s["next_doc"]
        self._order = self._order_for(self.epoch)

    def _take_doc(self):
        if self.next_doc >= self.n_docs():
            self.epoch, self.next_doc = self.epoch + 1, 0
            self._order = self._order_for(self.epoch)
        d = self._order[self.next_doc]
        a, b = self.starts[d], self.starts[d + 1]
        if b - a > self.seq_len:
            b = a + self.seq_len  # a document longer than a row is cut (rare: long prose)
        return a, b

    def row(self):
        T = self.seq_len
        ids = np.full(T, self.pad_id, dtype=np.int64)
        pos = np.zeros(T, dtype=np.int64)
        doc = np.full(T, -1, dtype=np.int64)
        tr = np.zeros(T, dtype=np.uint8)
        used, k = 0, 0
        while True:
            a, b = self._take_doc()
            n = b - a
            if used + n > T:
                break  # this document starts the next row
            ids[used:used + n] = self.tokens[a:b]
            tr[used:used + n] = self.trained[a:b]
            pos[used:used + n] = np.arange(n)
            doc[used:used + n] = k
            used, k = used + n, k + 1
            self.next_doc += 1
        doc[used:] = np.arange(k, k + T - used)  # each pad token alone: nothing attends to it
        return ids, pos, doc, tr

    def batch(self, batch_size):
        rows = [self.row() for _ in range(batch_size)]
        return [torch.from_numpy(np.stack(c)) for c in zip(*rows)]
