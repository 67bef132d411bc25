"""Unit tests of the demo-model tools that need no engine: worked solutions, held-out split, BPE,
chat rendering rules, packing, the balancing bias and the safetensors round trip.
usage: python3 -m unittest tools/train/test_train_tools.py (or ctest -R demo_python_unit)"""
import os
import random
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import bpe  # noqa: E402
import chat_format  # noqa: E402
import safetensors_io  # noqa: E402
import tasks  # noqa: E402
from model import DemoConfig, DemoModel  # noqa: E402
from packing import Packer  # noqa: E402
import build_corpus  # noqa: E402
from train import (losses, main_hidden, mtp_chain_rows, mtp_first_level, param_groups,  # noqa: E402
                   update_balance_bias)


def written_digits(worked):
    return [int(d) for d in re.findall(r"write (?:the carry )?(\d)", worked)]


class WorkedSolutions(unittest.TestCase):
    def test_addition_digits_compose_the_sum(self):
        rng = random.Random(1)
        for _ in range(500):
            a, b = rng.randint(1, 9999), rng.randint(1, 9999)
            digits = written_digits(tasks.worked_addition(a, b))
            self.assertEqual(int("".join(map(str, reversed(digits)))), a + b, (a, b))

    def test_subtraction_digits_compose_the_difference(self):
        rng = random.Random(2)
        for _ in range(500):
            a, b = rng.randint(1, 9999), rng.randint(1, 9999)
            columns = [line for line in tasks.worked_subtraction(a, b).split("\n") if not re.search("vs|first", line)]
            results = [int(re.search(r"= (\d+)$", line).group(1)) for line in columns]
            self.assertEqual(int("".join(map(str, reversed(results)))), abs(a - b), (a, b))

    def test_subtraction_compares_the_operands_and_every_column_first(self):
        lines = tasks.worked_subtraction(42, 45).split("\n")
        self.assertEqual(lines, ["42 vs 45: 4 = 4, 2 < 5, so 42 < 45", "negative: 45 - 42 first",
                                 "5 > 2, 5 - 2 = 3", "4 = 4, 4 - 4 = 0"])
        self.assertEqual(tasks.worked_subtraction(305, 47).split("\n"),
                         ["305 vs 47: 3 digits > 2 digits, so 305 > 47", "5 < 7, borrow: 15 - 7 = 8",
                          "-1 < 4, borrow: 9 - 4 = 5", "2 > 0, 2 - 0 = 2"])
        rng = random.Random(5)
        for _ in range(500):
            a, b = rng.randint(1, 9999), rng.randint(1, 9999)
            verdict = re.search(r"so (\d+) ([<>=]) (\d+)$", tasks.worked_subtraction(a, b).split("\n")[0])
            self.assertEqual((int(verdict[1]), int(verdict[3])), (a, b))
            self.assertEqual(verdict[2], "<" if a < b else ">" if a > b else "=", (a, b))

    def test_shared_digits_keep_the_sizes_and_share_some_columns_never_all(self):
        rng = random.Random(6)
        shared_leading = equal = same_size = 0
        for _ in range(2000):
            da, db = rng.choice([(2, 2), (3, 3), (4, 4), (3, 2), (2, 3), (4, 3)])
            a, b = tasks.operands(rng, "-", da, db, shared_digits=True)
            self.assertEqual((len(str(a)), len(str(b))), (da, db))
            self.assertFalse(tasks.is_held_out(a, "-", b))
            n = min(da, db)
            same = [x == y for x, y in zip(str(a)[::-1][:n], str(b)[::-1][:n])]
            self.assertTrue(any(same) or str(a)[-n] == "0", (a, b))  # a leading zero is never copied
            if da == db:
                same_size += 1
                equal += a == b  # only where the columns not copied happened to agree already
                shared_leading += str(a)[0] == str(b)[0]
        self.assertLess(equal, same_size / 10)
        self.assertGreater(shared_leading, same_size / 3)  # uniform operands: ~1 time in 9

    def test_multiplication_ends_with_the_product(self):
        for a, b in ((57, 23), (12, 10), (99, 9), (305, 41)):
            self.assertTrue(tasks.worked_multiplication(a, b).endswith(str(a * b)))


class Copying(unittest.TestCase):
    def test_repeat_answers_with_the_asked_words_after_a_space_each(self):
        rng = random.Random(7)
        words = [("garden", "noun", "", None), ("river", "noun", "", None), ("run", "verb", "", None)]
        for _ in range(50):
            question, answer = (m["content"] for m in tasks.repeat_words(rng, words))
            said = question.split(": ", 1)[1]
            self.assertEqual(answer, f"You said: {said}.")
            self.assertTrue(set(said.split()) <= {"garden", "river", "run"})


    def test_phase7_copy_drills_use_the_common_words_only(self):
        rng = random.Random(11)
        common = [("garden", "noun", "", None), ("run", "verb", "", None)]
        rare = [("zymurgy", "noun", "", None)]
        for _ in range(30):
            segs = build_corpus.make_document("repeat_common", rng, rare, [], [], common)
            answer = [s.text for s in segs if s.trained and s.text.startswith("You said:")]
            self.assertEqual(len(answer), 1)
            self.assertTrue(set(answer[0][len("You said: "):-1].split()) <= {"garden", "run"})
        self.assertIn(("repeat_common", 90), build_corpus.MIXES["definitions"])


class VocabLearningRate(unittest.TestCase):
    def test_embedding_and_head_get_their_own_scaled_group(self):
        model = DemoModel(DemoConfig(vocab_size=64, num_hidden_layers=2, first_k_dense_replace=1))
        names = {id(p): n for n, p in model.named_parameters()}
        default = param_groups(model)
        self.assertEqual(len(default), 2)
        scaled = param_groups(model, 5.0)
        self.assertEqual(len(scaled), 3)
        self.assertEqual(sorted(names[id(p)] for p in scaled[2]["params"]), ["embed_tokens.weight", "lm_head.weight"])
        self.assertEqual(scaled[2]["lr_scale"], 5.0)
        for groups in (default, scaled):  # every parameter in exactly one group
            ids = [id(p) for g in groups for p in g["params"]]
            self.assertEqual(sorted(ids), sorted(names))


class HeldOut(unittest.TestCase):
    def test_training_operands_are_never_held_out(self):
        rng = random.Random(3)
        for _ in range(2000):
            a, b = tasks.operands(rng, "+", 2, 2)
            self.assertFalse(tasks.is_held_out(a, "+", b))
        share = np.mean([tasks.is_held_out(a, "*", b) for a in range(10, 100) for b in range(10, 100)])
        self.assertAlmostEqual(share, 0.1, delta=0.02)


class CommonWords(unittest.TestCase):
    def test_frequent_lemmas_once_each_with_their_first_sense(self):
        import data_sources
        words = data_sources.common_definitions(300)
        self.assertEqual(len(words), 300)
        self.assertEqual(len({w for w, _, _, _ in words}), 300)
        by_word = {w: (pos, d) for w, pos, d, _ in words}
        self.assertEqual(by_word["person"], ("noun", "a human being"))  # the most frequent noun sense
        self.assertTrue(all(pos in ("noun", "verb", "adjective", "adverb") for pos, _ in by_word.values()))


class Phase4Data(unittest.TestCase):
    def test_default_arithmetic_thinks_without_a_system_prompt(self):
        conv = tasks.arithmetic(random.Random(4), think=True, think_system=False)
        self.assertEqual([m["role"] for m in conv], ["user", "assistant"])
        self.assertTrue(conv[1]["reasoning"])

    def test_definition_repeats_the_asked_word_with_the_same_token_text(self):
        rng = random.Random(5)
        words = [("run", "verb", "move fast by using one's feet", None), ("dog", "noun", "domestic animal", None),
                 ("big", "adjective", "above average in size", None)]
        for _ in range(30):
            q, a = tasks.definition(rng, words, style="word")
            word = next(w for w, _, _, _ in words if re.search(rf"\b{w}\b", q["content"]))
            self.assertTrue(a["content"].startswith(f"The word {word} means "), a["content"])
        self.assertEqual(tasks.word_definition_sentence("run", "verb", "move fast"), "The word run means to move fast.")
        self.assertEqual(tasks.word_definition_sentence("dog", "noun", "domestic animal"),
                         "The word dog means a domestic animal.")

    def test_earlier_worked_turns_are_history_not_trained(self):
        rng = random.Random(6)
        for _ in range(200):
            conv = tasks.multi_turn(rng, [("dog", "noun", "domestic animal", None)], ["x"], style="word")
            replies = [m for m in conv if m["role"] == "assistant"]
            self.assertTrue(all(m.get("reasoning") is None for m in replies[:-1]))
            segs = chat_format.render(conv, add_generation_prompt=False)
            for m in replies[:-1]:
                if m.get("context"):
                    self.assertFalse(any(s.trained for s in segs if s.text == m["content"]))
            self.assertTrue(segs[-1].trained)


class Bpe(unittest.TestCase):
    def test_most_frequent_pair_first_and_digits_never_merged(self):
        merges = bpe.train_bpe(bpe.count_words(["low lower lowest 123 123 123"] * 5), 10)
        self.assertEqual(merges[0], ("l", "o"))
        self.assertFalse(any(c.isdigit() for a, b in merges for c in a + b))


class ChatRendering(unittest.TestCase):
    def test_tool_turn_has_no_assistant_header_and_prompt_ends_with_one(self):
        conv = [{"role": "user", "content": "x"},
                {"role": "assistant", "content": "", "tool_calls": [{"name": "clock", "arguments": "{}"}]},
                {"role": "tool", "content": "12:00"}]
        segs = chat_format.render(conv + [{"role": "assistant", "content": "noon"}], add_generation_prompt=False)
        texts = [s.text for s in segs]
        i = texts.index(chat_format.TOOL_OUTPUTS_END)
        self.assertEqual(texts[i + 1], "noon")
        self.assertEqual(texts[-1], chat_format.EOS)
        prompt = chat_format.render(conv[:1], add_generation_prompt=True)
        self.assertEqual([s.text for s in prompt], [chat_format.BOS, chat_format.USER, "x", chat_format.ASSISTANT])
        self.assertFalse(any(s.trained for s in prompt))


class PackingAndBalance(unittest.TestCase):
    def test_rows_hold_whole_documents_and_resume_identically(self):
        with tempfile.TemporaryDirectory() as d:
            lengths = [5, 7, 3, 9, 4, 6, 2, 8]
            starts = np.concatenate([[0], np.cumsum(lengths)])
            np.save(f"{d}/tokens.npy", np.arange(starts[-1], dtype=np.uint16))
            np.save(f"{d}/trained.npy", np.ones(starts[-1], dtype=np.uint8))
            np.save(f"{d}/doc_starts.npy", starts)
            p = Packer(d, 16, seed=1, pad_id=1)
            ids, pos, doc, _ = p.row()
            for k in set(doc.tolist()):
                seg = np.where(doc == k)[0]
                if ids[seg[0]] == 1 and pos[seg[0]] == 0 and len(seg) == 1:
                    continue  # padding
                self.assertEqual(pos[seg].tolist(), list(range(len(seg))))
            state = p.state()
            nxt = p.batch(3)
            q = Packer(d, 16, seed=1, pad_id=1)
            q.load_state(state)
            for a, b in zip(nxt, q.batch(3)):
                self.assertTrue(torch.equal(a, b))

    def test_bias_moves_towards_the_underloaded_expert(self):
        torch.manual_seed(0)
        model = DemoModel(DemoConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, intermediate_size=32,
                                     q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                                     v_head_dim=8, moe_intermediate_size=8))
        moe = model.moe_layers()[0]
        moe.last_load = torch.tensor([10, 0, 2, 2, 2, 2, 2, 4])
        for m in model.moe_layers()[1:]:
            m.last_load = torch.zeros(8)
        update_balance_bias(model)
        bias = moe.gate.e_score_correction_bias
        self.assertLess(bias[0].item(), 0)
        self.assertGreater(bias[1].item(), 0)


class MtpChain(unittest.TestCase):
    @staticmethod
    def small_model():
        torch.manual_seed(3)
        return DemoModel(DemoConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, intermediate_size=32,
                                    q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                                    v_head_dim=8, moe_intermediate_size=8))

    def test_chained_rows_are_the_engines_second_draft(self):
        # Row p of the chain, recomputed the way the engine drafts it: the MTP block over the first-level
        # rows before p and one more row built from the layer's own output at p - 1 and token p + 1.
        model = self.small_model().eval()
        with torch.no_grad():  # norms away from 1: the head norm's weights must matter
            for n, p in model.named_parameters():
                if "norm" in n:
                    p.uniform_(0.5, 1.5)
        T = 9
        ids = torch.randint(0, 64, (1, T))
        with torch.no_grad():
            h, mask, cos, sin = main_hidden(model, ids, torch.arange(T)[None], torch.zeros(1, T, dtype=torch.long))
            m = model.mtp[0]
            e, inputs, z = mtp_first_level(model, m, ids, h, cos, sin, mask)
            z2 = mtp_chain_rows(m, inputs, z, e, cos, sin, mask)
            self.assertEqual(z2.shape[1], T - 2)
            for p in range(1, T - 1):
                chained = torch.cat([e[:, p:p + 1], m.hnorm(m.head_norm(z[:, p - 1:p]))], dim=-1)
                rows = m.eh_proj(torch.cat([inputs[:, :p], chained], dim=1))
                causal = torch.ones(p + 1, p + 1, dtype=torch.bool).tril()[None]
                want = m.block(rows, cos[:, :p + 1], sin[:, :p + 1], causal)[:, -1]
                torch.testing.assert_close(z2[:, p - 1], want, rtol=1e-5, atol=1e-5)

    def test_mtp_only_training_leaves_the_main_model_and_its_biases(self):
        model = self.small_model()
        for n, p in model.named_parameters():
            p.requires_grad_(n.startswith("mtp."))
        names = {id(p): n for n, p in model.named_parameters()}
        self.assertTrue(all(names[id(p)].startswith("mtp.") for g in param_groups(model) for p in g["params"]))
        ids = torch.randint(0, 64, (2, 12))
        pos = torch.arange(12)[None].expand(2, 12)
        doc = torch.zeros(2, 12, dtype=torch.long)
        trained = torch.ones(2, 12, dtype=torch.long)
        main, mtp, _ = losses(model, ids, pos, doc, trained, mtp_chain=True, main_frozen=True)
        self.assertFalse(main.requires_grad)
        (main + mtp).backward()
        self.assertTrue(all(p.grad is None for n, p in model.named_parameters() if not n.startswith("mtp.")))
        self.assertIsNotNone(model.mtp[0].eh_proj.weight.grad)
        main_biases = [m.gate.e_score_correction_bias.clone() for m in model.moe_layers()[:-1]]
        for moe in model.moe_layers():
            moe.last_load = torch.tensor([10, 0, 2, 2, 2, 2, 2, 4])
        update_balance_bias(model, mtp_only=True)
        for before, moe in zip(main_biases, model.moe_layers()[:-1]):
            self.assertTrue(torch.equal(before, moe.gate.e_score_correction_bias))
        self.assertLess(model.mtp[0].block.mlp.gate.e_score_correction_bias[0].item(), 0)


class ExportImport(unittest.TestCase):
    def test_exported_model_loads_back_identically(self):
        from export import export_model, hf_tensors, load_hf_model
        torch.manual_seed(1)
        model = DemoModel(DemoConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, intermediate_size=32,
                                     q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                                     v_head_dim=8, moe_intermediate_size=8))
        with torch.no_grad():
            for m in model.moe_layers():
                m.gate.e_score_correction_bias.normal_()
        here = os.path.dirname(os.path.abspath(__file__))
        with tempfile.TemporaryDirectory() as d:
            export_model(model, os.path.join(here, "..", "..", "models", "demo"), d)
            back = load_hf_model(d)
        a, b = hf_tensors(model), hf_tensors(back)
        self.assertEqual(sorted(a), sorted(b))
        self.assertTrue(all(torch.equal(a[k], b[k]) for k in a))


class Safetensors(unittest.TestCase):
    def test_round_trip(self):
        t = {"a": torch.randn(3, 5).to(torch.bfloat16), "b": torch.randn(7)}
        with tempfile.TemporaryDirectory() as d:
            safetensors_io.save(t, f"{d}/x.safetensors")
            back = safetensors_io.load(f"{d}/x.safetensors")
        self.assertTrue(torch.equal(back["a"], t["a"]) and torch.equal(back["b"], t["b"]))


if __name__ == "__main__":
    unittest.main()
