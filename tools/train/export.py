"""Exports a DemoModel in the Hugging Face DeepSeek-V3 layout: config.json (model_type
deepseek_v3), model.safetensors with the released tensor names (BF16; the router bias F32) incl.
MTP layer N = num_hidden_layers with its own copies of the embedding and head, and the tokenizer.

usage: export.py --checkpoint CKPT.pt --tokenizer TOKDIR --out DIR
"""
import argparse
import json
import os
import shutil

import torch

import safetensors_io
from model import DemoConfig, DemoModel


def hf_config(cfg):
    return {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "torch_dtype": "bfloat16",
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
        "moe_intermediate_size": cfg.moe_intermediate_size, "num_hidden_layers": cfg.num_hidden_layers,
        "num_nextn_predict_layers": cfg.num_nextn_predict_layers,
        "num_attention_heads": cfg.num_attention_heads, "num_key_value_heads": cfg.num_attention_heads,
        "q_lora_rank": cfg.q_lora_rank, "kv_lora_rank": cfg.kv_lora_rank,
        "qk_nope_head_dim": cfg.qk_nope_head_dim, "qk_rope_head_dim": cfg.qk_rope_head_dim,
        "v_head_dim": cfg.v_head_dim, "n_routed_experts": cfg.n_routed_experts,
        "n_shared_experts": cfg.n_shared_experts, "num_experts_per_tok": cfg.num_experts_per_tok,
        "n_group": cfg.n_group, "topk_group": cfg.topk_group, "first_k_dense_replace": cfg.first_k_dense_replace,
        "moe_layer_freq": 1, "norm_topk_prob": True, "routed_scaling_factor": cfg.routed_scaling_factor,
        "scoring_func": "sigmoid", "topk_method": "noaux_tc", "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position_embeddings, "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta, "rope_scaling": None, "tie_word_embeddings": False,
        "bos_token_id": cfg.bos_token_id, "eos_token_id": cfg.eos_token_id,
    }


def hf_tensors(model):
    """{HF name: tensor}. Linear and embedding weights BF16, norms BF16, router bias F32."""
    cfg = model.cfg
    out = {}
    for name, t in model.state_dict().items():
        if name.startswith("mtp."):
            continue
        hf = "lm_head.weight" if name == "lm_head.weight" else "model." + name
        out[hf] = t
    for k, m in enumerate(model.mtp):
        p = f"model.layers.{cfg.num_hidden_layers + k}."
        out[p + "embed_tokens.weight"] = model.embed_tokens.weight
        out[p + "shared_head.head.weight"] = model.lm_head.weight
        out[p + "enorm.weight"] = m.enorm.weight
        out[p + "hnorm.weight"] = m.hnorm.weight
        out[p + "eh_proj.weight"] = m.eh_proj.weight
        out[p + "shared_head.norm.weight"] = m.head_norm.weight
        for name, t in m.block.state_dict().items():
            out[p + name] = t
    return {n: (t.detach().float() if n.endswith("e_score_correction_bias") else t.detach().to(torch.bfloat16))
            for n, t in out.items()}


def export_model(model, tokenizer_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, "model.safetensors.tmp")
    safetensors_io.save(hf_tensors(model), tmp, metadata={"format": "pt"})
    os.replace(tmp, os.path.join(out_dir, "model.safetensors"))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(hf_config(model.cfg), f, indent=2)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(out_dir, name))
    # The data licenses travel with the weights (WordNet's asks for its notice on all copies).
    shutil.copyfile(os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_notice.md"),
                    os.path.join(out_dir, "NOTICE.md"))


def load_checkpoint_model(path):
    ckpt = torch.load(path, map_location="cpu")
    model = DemoModel(DemoConfig(**ckpt["config"]))
    model.load_state_dict(ckpt["model"])
    return model, ckpt


def load_hf_model(model_dir):
    """The inverse of export_model: a DemoModel from DIR/config.json + model.safetensors (weights only; a
    later phase can start from a committed model, whose BF16 weights become its float32 starting point)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        hf = json.load(f)
    fields = DemoConfig.__dataclass_fields__
    model = DemoModel(DemoConfig(**{k: v for k, v in hf.items() if k in fields}))
    tensors = {n: t.float() for n, t in safetensors_io.load(os.path.join(model_dir, "model.safetensors")).items()}
    state = {}
    for name in model.state_dict():
        if name.startswith("mtp."):
            k, rest = name.split(".", 2)[1:]
            rest = rest.replace("head_norm.", "shared_head.norm.").replace("block.", "")
            state[name] = tensors.pop(f"model.layers.{model.cfg.num_hidden_layers + int(k)}.{rest}")
        else:
            state[name] = tensors.pop(name if name == "lm_head.weight" else "model." + name)
    model.load_state_dict(state)
    leftover = [n for n in tensors if not n.endswith(("embed_tokens.weight", "shared_head.head.weight"))]
    if leftover:
        raise ValueError(f"{model_dir}: tensors the model does not have: {leftover[:5]}")
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model, ckpt = load_checkpoint_model(args.checkpoint)
    export_model(model, args.tokenizer, args.out)
    print(f"exported step {ckpt['step']} to {args.out}")


if __name__ == "__main__":
    main()
