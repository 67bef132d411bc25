"""Writes tokenizer.json + tokenizer_config.json in the shape of DeepSeek-V3's.

Layout: ids 0-2 the special BOS/EOS/pad (as in V3), then the 256 byte symbols, then one token per
merge, then the chat markers (chat_format.ADDED_MARKERS) as added tokens. The pre-tokenizer,
decoder and post-processor entries are V3's.
"""
import json
import os

from chat_format import ADDED_MARKERS, BOS, EOS, SPECIAL_MARKERS
from pretokenize import BYTE_TO_CHAR, SPLIT_PATTERNS

V3_TOKENIZER_CONFIG = "models/tokenizer/deepseek-v3/tokenizer_config.json"


def _added(i, content, special):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": not special, "special": special}


def build_vocab(merges):
    vocab = {t: i for i, t in enumerate(SPECIAL_MARKERS)}
    for ch in BYTE_TO_CHAR.values():
        vocab[ch] = len(vocab)
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    return vocab


def tokenizer_json(merges):
    vocab = build_vocab(merges)
    added = [_added(i, t, True) for i, t in enumerate(SPECIAL_MARKERS)]
    added += [_added(len(vocab) + k, t, False) for k, t in enumerate(ADDED_MARKERS)]
    splits = [{"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False}
              for p in SPLIT_PATTERNS]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": []},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": splits + [
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


def tokenizer_config(repo_root):
    def token(content):
        return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": True,
                "rstrip": False, "single_word": False}
    config = {"add_bos_token": True, "add_eos_token": False, "bos_token": token(BOS),
              "clean_up_tokenization_spaces": False, "eos_token": token(EOS), "legacy": True,
              "model_max_length": 2048, "pad_token": token(EOS), "sp_model_kwargs": {}, "unk_token": None,
              "tokenizer_class": "LlamaTokenizerFast"}
    v3 = os.path.join(repo_root, V3_TOKENIZER_CONFIG)
    if os.path.exists(v3):  # V3's template renders the same prompts as src/recipe/encoding_v3.cpp
        with open(v3, encoding="utf-8") as f:
            config["chat_template"] = json.load(f)["chat_template"]
    return config


def n_tokens(merges):
    return len(build_vocab(merges)) + len(ADDED_MARKERS)


def write_tokenizer(out_dir, merges, repo_root):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(merges), f, ensure_ascii=False, indent=1)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(repo_root), f, ensure_ascii=False, indent=2)
