#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora:
  fuzz/corpus/safetensors_header/: small valid and invalid safetensors images;
  fuzz/corpus/model_config/: DeepSeek config.json variants.
Files named valid_* must parse, invalid_* must be rejected; safetensors_corpus_test checks both (and
that fuzzer-found files, named by hash, parse or fail without crashing).
Usage: fuzz/make_fuzz_corpus.py [CORPUS_ROOT]   (default fuzz/corpus)
"""
import json
import os
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E8M0": 1,
         "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def image(header, data=b"", pad=True):
    """8-byte little-endian length + header (str/bytes/dict) + data."""
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"), sort_keys=True)
    if isinstance(header, str):
        header = header.encode("utf-8")
    if pad:
        header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


def tensors(specs):
    """specs: [(name, dtype, shape)] laid out in order -> (header dict, data bytes)."""
    header, offset = {}, 0
    for name, dtype, shape in specs:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    return header, bytes((i * 37 + 11) & 0xFF for i in range(offset))


def safetensors_seeds():
    files = {}

    h, d = tensors([("w", "F32", [2, 2])])
    files["valid_single_f32"] = image(h, d)
    h, d = tensors([(n.lower(), n, [3]) for n in SIZES])
    files["valid_all_dtypes"] = image(h, d)
    h, d = tensors([("a", "F32", [0]), ("b", "U8", [2]), ("c", "I8", [3, 0]), ("s", "F32", [])])
    files["valid_zero_size_and_scalar"] = image(h, d)
    h, d = tensors([("x", "BF16", [1, 2, 1, 2])])
    h["__metadata__"] = {"format": "pt", "note": "caf\u00e9"}
    files["valid_metadata_rank4"] = image(h, d)
    files["valid_empty"] = image("{}")
    files["valid_unpadded"] = image('{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x07", pad=False)
    h, d = tensors([("model.layers.0.mlp.gate_proj.weight", "F8_E4M3", [4, 8]),
                    ("model.layers.0.mlp.gate_proj.weight_scale_inv", "F32", [1, 1])])
    files["valid_fp8_scale_inv"] = image(h, d)

    base, data = tensors([("w", "F32", [2, 2]), ("b", "BF16", [2])])

    def variant(mutate, extra=b"", cut=0):
        h = json.loads(json.dumps(base))
        mutate(h)
        return image(h, (data + extra)[: len(data) + len(extra) - cut])

    files["invalid_short"] = b"\x05\x00\x00"
    files["invalid_len_beyond_file"] = struct.pack("<Q", 1000) + b"{}"
    files["invalid_len_over_cap"] = struct.pack("<Q", (100 << 20) + 1) + b"{}"
    files["invalid_len_max"] = b"\xff" * 8 + b"{}"
    files["invalid_not_json"] = image("{\"w\":")
    files["invalid_not_object"] = image("[1,2,3]")
    files["invalid_utf8"] = image(b'{"\xff":1}')
    files["invalid_entry_not_object"] = variant(lambda h: h.update(w=[1]))
    files["invalid_missing_dtype"] = variant(lambda h: h["w"].pop("dtype"))
    files["invalid_missing_shape"] = variant(lambda h: h["w"].pop("shape"))
    files["invalid_missing_offsets"] = variant(lambda h: h["w"].pop("data_offsets"))
    files["invalid_unknown_dtype"] = variant(lambda h: h["w"].update(dtype="F31"))
    files["invalid_negative_dim"] = variant(lambda h: h["w"].update(shape=[-2, -2]))
    files["invalid_float_dim"] = variant(lambda h: h["w"].update(shape=[2.0, 2]))
    files["invalid_rank5"] = variant(lambda h: h["w"].update(shape=[1, 1, 1, 2, 2]))
    files["invalid_numel_overflow"] = variant(lambda h: h["w"].update(shape=[2**32, 2**32, 2**32]))
    files["invalid_offsets_reversed"] = variant(lambda h: h["w"].update(data_offsets=[16, 0]))
    files["invalid_offsets_beyond"] = variant(lambda h: h["w"].update(data_offsets=[0, 1 << 40]))
    files["invalid_offsets_three"] = variant(lambda h: h["w"].update(data_offsets=[0, 8, 16]))
    files["invalid_size_mismatch"] = variant(lambda h: h["w"].update(shape=[2, 3]))
    files["invalid_overlap"] = variant(lambda h: h["b"].update(data_offsets=[12, 16]), cut=4)
    files["invalid_hole"] = variant(lambda h: (h["w"].update(data_offsets=[4, 20]), h["b"].update(data_offsets=[20, 24])),
                                    extra=b"\0\0\0\0")
    files["invalid_trailing"] = variant(lambda h: None, extra=b"abc")
    files["invalid_truncated_data"] = variant(lambda h: None, cut=1)
    files["invalid_metadata_not_string"] = variant(lambda h: h.update(__metadata__={"v": 2}))
    files["invalid_metadata_not_object"] = variant(lambda h: h.update(__metadata__="x"))
    files["invalid_empty_name"] = variant(lambda h: h.update({"": h.pop("b")}))
    dup = json.dumps(base, separators=(",", ":"), sort_keys=True)
    dup = '{"b":' + json.dumps(base["b"], separators=(",", ":")) + "," + dup[1:]
    files["invalid_duplicate_key"] = image(dup, data)
    return files


V3_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"], "bos_token_id": 0, "eos_token_id": 1,
    "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": False,
    "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "v_head_dim": 128,
    "vocab_size": 129280,
}


def model_config_seeds():
    def cfg(**changes):
        c = json.loads(json.dumps(V3_CONFIG))
        for k, v in changes.items():
            if v is None and k != "q_lora_rank":
                c.pop(k, None)
            else:
                c[k] = v
        return json.dumps(c, indent=1).encode()

    files = {
        "valid_v3": cfg(),
        "valid_v32": cfg(model_type="deepseek_v32", index_n_heads=64, index_head_dim=128, index_topk=2048),
        "valid_v2_lite": cfg(model_type="deepseek_v2", q_lora_rank=None, n_routed_experts=64, n_group=1,
                             topk_group=1, num_experts_per_tok=6, scoring_func="softmax", topk_method="greedy",
                             quantization_config=None, first_k_dense_replace=1),
        "valid_dense_tiny": cfg(hidden_size=64, n_routed_experts=None, moe_intermediate_size=None,
                                num_experts_per_tok=None, n_shared_experts=None, rope_scaling=None,
                                num_hidden_layers=2, first_k_dense_replace=2),
        "invalid_not_object": b"[1, 2]",
        "invalid_odd_rope_dim": cfg(qk_rope_head_dim=63),
        "invalid_topk_over_experts": cfg(num_experts_per_tok=300),
        "invalid_missing_hidden": cfg(hidden_size=None),
        "invalid_v32_without_indexer": cfg(model_type="deepseek_v32"),
    }
    return files


def write_all(out_dir, files):
    os.makedirs(out_dir, exist_ok=True)
    for name, content in files.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(content)
    print(f"wrote {len(files)} files to {out_dir}")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    write_all(os.path.join(root, "safetensors_header"), safetensors_seeds())
    write_all(os.path.join(root, "model_config"), model_config_seeds())


if __name__ == "__main__":
    main()
