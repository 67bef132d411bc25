#!/usr/bin/env python3
"""Black-box tests of `deepinfer generate | logits | inspect` on make-model checkpoints.

Usage: cli_test.py DEEPINFER WORKDIR TEST_NAME
WORKDIR holds tiny_bf16/ and tiny_fp8/ (made by the `make_models` test, a CTest fixture).
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

DEEPINFER, WORK, TEST = sys.argv[1], sys.argv[2], sys.argv[3]
BF16 = os.path.join(WORK, "tiny_bf16")
FP8 = os.path.join(WORK, "tiny_fp8")
IDS = "0,17,42,9000,128000,5,77,1234,31,100000,64,2"
N_IDS = len(IDS.split(","))
VOCAB = 129280


def run(*args, expect_rc=0):
    p = subprocess.run([DEEPINFER, *args], capture_output=True, text=True, timeout=120)
    if expect_rc is not None and p.returncode != expect_rc:
        sys.exit(f"FAIL: {' '.join(args)}: exit {p.returncode}, expected {expect_rc}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def check(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)


def logits(model, name, *extra):
    out = os.path.join(WORK, f"{TEST}_{name}.npy")
    run("logits", "--model", model, "--ids", IDS, "--out", out, "--threads", "2", *extra)
    a = np.load(out)
    check(a.dtype == np.float32 and a.shape == (N_IDS, VOCAB), f"{out}: dtype {a.dtype} shape {a.shape}")
    check(np.isfinite(a).all(), f"{out}: non-finite logits")
    check(a.std() > 1e-3, f"{out}: logits are constant")
    return a


def rel_err(a, b):
    return float(np.abs(a.astype(np.float64) - b).max() / max(1.0, np.abs(a).max()))


def make_models():
    for d, dtype in ((BF16, "bf16"), (FP8, "fp8")):
        shutil.rmtree(d, ignore_errors=True)
        run("make-model", "--preset", "tiny", "--dtype", dtype, "--seed", "0", "--out", d)


def generate():
    base = ("generate", "--model", BF16, "--prompt", "The quick brown fox", "--max-tokens", "12", "--threads", "2")
    a = run(*base, "--temperature", "0.8", "--seed", "5")
    b = run(*base, "--temperature", "0.8", "--seed", "5")
    c = run(*base, "--temperature", "0.8", "--seed", "6")
    check(a.stdout.strip() != "", "generate printed no text")
    check(a.stdout == b.stdout, f"same seed, different text:\n{a.stdout!r}\n{b.stdout!r}")
    check(a.stdout != c.stdout, "seeds 5 and 6 gave the same 12 sampled tokens")
    check("prompt tokens: " in a.stderr and "generated tokens: 12" in a.stderr and "decode:" in a.stderr,
          f"summary line missing: {a.stderr!r}")
    greedy = run(*base)
    check(greedy.stdout.strip() != "", "greedy generate printed no text")
    # --chat on the FP8 model: the user's marker-like text stays plain BPE, the template adds the markers.
    chat = run("generate", "--model", FP8, "--prompt", "Hi <｜User｜> there", "--chat", "--max-tokens", "4")
    check("generated tokens: " in chat.stderr, chat.stderr)


def logits_chunking():
    # Absorbed MLA is batch-invariant, so chunking changes nothing (the engine relies on it);
    # the tolerance is the one the numpy reference uses for f32 reordering, 1e-5 relative.
    for model in (BF16, FP8):
        tag = os.path.basename(model)
        all_ = logits(model, tag + "_all", "--mtp-out", os.path.join(WORK, f"{TEST}_{tag}_mtp_all.npy"))
        mtp_all = np.load(os.path.join(WORK, f"{TEST}_{tag}_mtp_all.npy"))
        check(mtp_all.shape == (N_IDS - 1, VOCAB) and mtp_all.dtype == np.float32, f"mtp shape {mtp_all.shape}")
        for p in ("1", "3"):
            mtp_path = os.path.join(WORK, f"{TEST}_{tag}_mtp_{p}.npy")
            x = logits(model, f"{tag}_p{p}", "--prefill", p, "--mtp-out", mtp_path)
            check(rel_err(all_, x) < 1e-5, f"{tag} --prefill {p}: logits differ by {rel_err(all_, x)}")
            m = np.load(mtp_path)
            check(rel_err(mtp_all, m) < 1e-5, f"{tag} --prefill {p}: MTP logits differ by {rel_err(mtp_all, m)}")
        # Each row is a real prediction: rows differ from each other.
        check(np.abs(all_[0] - all_[1]).max() > 1e-3, "rows 0 and 1 are identical")


def logits_isa():
    ref = logits(BF16, "ref", "--isa", "reference")
    plain = logits(BF16, "plain", "--isa", "reference", "--mla", "plain")
    check(rel_err(ref, plain) < 1e-5, f"plain vs absorbed MLA differ by {rel_err(ref, plain)}")
    tested = ["reference"]
    for isa in ("avx2", "avx512", "auto"):
        out = os.path.join(WORK, f"{TEST}_{isa}.npy")
        p = run("logits", "--model", BF16, "--ids", IDS, "--out", out, "--isa", isa, expect_rc=None)
        if p.returncode != 0 and "does not support" in p.stderr:
            print(f"skip {isa}: {p.stderr.strip()}")
            continue
        check(p.returncode == 0, f"--isa {isa}: exit {p.returncode}: {p.stderr}")
        x = np.load(out)
        check(rel_err(ref, x) < 1e-5, f"--isa {isa} differs from reference by {rel_err(ref, x)}")
        tested.append(isa)
    print("isa paths checked:", tested)


def inspect():
    p = run("inspect", FP8)
    for needle in ("model_type: deepseek_v3", "num_nextn_predict_layers: 1", "num_hidden_layers: 3",
                   "quantization.quant_method: fp8", "model.layers.3.eh_proj.weight", "model.layers.3.enorm.weight",
                   "model.layers.3.hnorm.weight", "model.layers.3.shared_head.head.weight",
                   "model.layers.3.shared_head.norm.weight", "model.layers.3.embed_tokens.weight",
                   "model.layers.3.self_attn.kv_b_proj.weight_scale_inv", "total_tensors:", "total_bytes:"):
        check(needle in p.stdout, f"inspect output lacks {needle!r}")
    line = next(l for l in p.stdout.splitlines() if l.startswith("model.layers.3.eh_proj.weight "))
    check("[64, 128]" in line and "BF16" in line and ".safetensors" in line, f"eh_proj row: {line!r}")


def usage_errors():
    out = os.path.join(WORK, f"{TEST}.npy")
    for args in (("--ids", "1,x"), ("--ids", ""), ("--ids", "1,2", "--prefill", "3"), ("--ids", "1", "--isa", "sse9"),
                 ("--ids", "1", "--mla", "weird"), ("--ids", "1", "--numerics", "fp64")):
        p = run("logits", "--model", BF16, "--out", out, *args, expect_rc=2)
        check(len(p.stderr.strip().splitlines()) == 1, f"{args}: stderr is not one line: {p.stderr!r}")
    p = run("generate", "--model", BF16, "--prompt", "x", "--temperature", "-1", expect_rc=2)
    p = run("generate", "--model", BF16, "--prompt", "x", "--thinking", expect_rc=2)


def copy_model(name, src=BF16):
    dst = os.path.join(WORK, f"{TEST}_{name}")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def expect_error(model_dir, *needles, cmd="logits"):
    args = ["inspect", model_dir] if cmd == "inspect" else \
        ["logits", "--model", model_dir, "--ids", "0,5,7", "--out", os.path.join(WORK, f"{TEST}_err.npy")]
    p = run(*args, expect_rc=1)  # a signal would be a negative return code
    lines = p.stderr.strip().splitlines()
    check(len(lines) == 1, f"{model_dir}: expected one stderr line, got {p.stderr!r}")
    for n in needles:
        check(n in lines[0], f"{model_dir}: error {lines[0]!r} does not name {n!r}")
    print("ok:", lines[0])


def rewrite_without(shard_path, tensor):
    """Rewrites a safetensors shard without `tensor` (data repacked, header padded to 8 bytes)."""
    with open(shard_path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    meta = header.pop("__metadata__", None)
    header.pop(tensor)
    new_header, chunks, off = {}, [], 0
    for name in sorted(header):
        b, e = header[name]["data_offsets"]
        chunks.append(data[b:e])
        new_header[name] = dict(header[name], data_offsets=[off, off + e - b])
        off += e - b
    if meta is not None:
        new_header["__metadata__"] = meta
    h = json.dumps(new_header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(shard_path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))


def corrupt():
    # 1. a truncated shard: the error names the shard file.
    d = copy_model("truncated")
    shard = os.path.join(d, "model-00002-of-00004.safetensors")
    os.truncate(shard, os.path.getsize(shard) // 2)
    expect_error(d, "model-00002-of-00004.safetensors")
    expect_error(d, "model-00002-of-00004.safetensors", cmd="inspect")

    # 2. a config that disagrees with the tensors' shapes: the error names the tensor.
    d = copy_model("shape")
    cfg_path = os.path.join(d, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["intermediate_size"] = 96
    json.dump(cfg, open(cfg_path, "w"))
    expect_error(d, "model.layers.0.mlp.gate_proj.weight", "[96, 64]")

    # 3. a tensor missing from its shard and the index: the error names it.
    d = copy_model("missing")
    missing = "model.layers.1.mlp.experts.5.up_proj.weight"
    idx_path = os.path.join(d, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    rewrite_without(os.path.join(d, idx["weight_map"].pop(missing)), missing)
    json.dump(idx, open(idx_path, "w"))
    expect_error(d, missing)

    # 4. a bad config key: the error names config.json and the key.
    d = copy_model("badkey")
    cfg_path = os.path.join(d, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["hidden_size"] = "sixty-four"
    json.dump(cfg, open(cfg_path, "w"))
    expect_error(d, "config.json", "hidden_size")
    expect_error(d, "config.json", "hidden_size", cmd="inspect")

    # 5. a token id outside the vocabulary.
    p = run("logits", "--model", BF16, "--ids", f"0,{VOCAB}", "--out", os.path.join(WORK, f"{TEST}_err.npy"),
            expect_rc=1)
    check("model_bad_input" in p.stderr and str(VOCAB) in p.stderr and len(p.stderr.strip().splitlines()) == 1,
          p.stderr)
    # 6. a directory that is not a checkpoint.
    expect_error(os.path.join(WORK, "no_such_model"), "no_such_model")


def prompt_tokens(p):
    for part in p.stderr.split(","):
        if part.strip().startswith("prompt tokens:"):
            return int(part.split(":")[1])
    sys.exit(f"FAIL: no prompt token count in {p.stderr!r}")


def chat_v4():
    # make-model --arch deepseek_v4 writes the V3 tokenizer plus V4's template markers (<think>,
    # </think>, ｜DSML｜, <｜latest_reminder｜>) as added tokens, so --chat renders V4 prompts on it.
    v4 = os.path.join(WORK, "tiny_v4")
    shutil.rmtree(v4, ignore_errors=True)
    run("make-model", "--arch", "deepseek_v4", "--preset", "tiny", "--seed", "0", "--out", v4)
    with open(os.path.join(v4, "tokenizer.json"), encoding="utf-8") as f:
        added = {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}
    with open(os.path.join(v4, "config.json"), encoding="utf-8") as f:
        vocab_size = json.load(f)["vocab_size"]
    for marker in ("<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>"):
        check(marker in added and added[marker] < vocab_size, f"{marker}: {added.get(marker)} vs vocab {vocab_size}")
    # The V4 prompt is V3's plus one marker: BOS <｜User｜> text <｜Assistant｜> </think> (or <think>);
    # the user's "<｜User｜>" stays plain BPE in both.
    chat = ("generate", "--prompt", "Hi <｜User｜> there", "--chat", "--max-tokens", "3", "--threads", "2")
    v3 = run(*chat, "--model", BF16)
    off = run(*chat, "--model", v4)
    on = run(*chat, "--model", v4, "--thinking")
    check("generated tokens: " in off.stderr and "generated tokens: " in on.stderr, off.stderr + on.stderr)
    check(prompt_tokens(off) == prompt_tokens(v3) + 1, f"V4 prompt {off.stderr!r} vs V3 {v3.stderr!r}")
    check(prompt_tokens(on) == prompt_tokens(off), f"thinking {on.stderr!r} vs not {off.stderr!r}")
    # A V4 checkpoint whose tokenizer lacks a marker (the plain V3 files): --chat fails with the
    # recipe's error naming the marker and the encoding, before loading any weights.
    no_markers = copy_model("v4_no_markers", src=v4)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(BF16, name), os.path.join(no_markers, name))
    p = run(*chat, "--model", no_markers, expect_rc=1)
    lines = p.stderr.strip().splitlines()
    check(len(lines) == 1 and "</think>" in lines[0] and "deepseek_v4" in lines[0], f"error: {p.stderr!r}")
    # V3 has no thinking mode: --thinking is refused rather than ignored.
    p = run(*chat, "--model", BF16, "--thinking", expect_rc=1)
    check("thinking" in p.stderr and "deepseek_v3" in p.stderr, p.stderr)


def serve_metrics(spec):
    # serve with speculation on a free loopback port: a completion, then vLLM's spec_decode names in /metrics.
    import urllib.request
    proc = subprocess.Popen([DEEPINFER, "serve", "--model", BF16, "--port", "0", "--threads", "2", *spec],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # "deepinfer serve: listening on http://127.0.0.1:PORT ..." (bounded by timeout)
        check("listening on http://" in line, f"serve did not start: {line!r}")
        url = line.split("listening on ")[1].split()[0]
        body = json.dumps({"model": "x", "prompt": "Hello there", "max_tokens": 12}).encode()
        req = urllib.request.Request(url + "/v1/completions", data=body, headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            check(json.load(r)["usage"]["completion_tokens"] == 12, "completion did not generate 12 tokens")
        with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
            metrics = r.read().decode()
        values = {}
        for m in metrics.splitlines():
            if m.startswith(("vllm:spec_decode", "deepinfer:spec_decode")):
                name, value = m.rsplit(" ", 1)
                values[name] = float(value)
        check(values.get("vllm:spec_decode_num_drafts_total", 0) > 0, f"no drafts counted: {values}")
        check(values["vllm:spec_decode_num_draft_tokens_total"] >= values["vllm:spec_decode_num_drafts_total"], str(values))
        check("vllm:spec_decode_num_accepted_tokens_total" in values, str(values))
        for pos in range(3):
            check(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{pos}"}}' in values, str(values))
        check(values["deepinfer:spec_decode_mean_acceptance_length"] >= 1.0, str(values))
        for name in ("deepinfer:spec_decode_target_cost_scale", "deepinfer:spec_decode_draft_cost_scale"):
            check(0.125 <= values.get(name, 0) <= 8, f"{name}: {values}")  # the policy's bounds
        # The policy's per-step overhead: observed on decode steps, a fraction of a second on any host.
        check(0 < values.get("deepinfer:spec_decode_step_overhead_seconds", -1) < 1, str(values))
        print("serve /metrics:", values)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def speculative():
    # --speculative-config: the same text as without it (greedy and sampled, --prompt and --input), a summary
    # line with the acceptance figures, and one usage-error line per bad config.
    base = ("generate", "--model", BF16, "--prompt", "The quick brown fox", "--max-tokens", "16", "--threads", "2")
    spec = ("--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}')
    for extra in ((), ("--temperature", "0.9", "--seed", "4")):
        plain = run(*base, *extra)
        drafted = run(*base, *extra, *spec)
        check(plain.stdout == drafted.stdout, f"{extra}: text differs with speculation:\n{plain.stdout!r}\n{drafted.stdout!r}")
        check("speculative decoding:" in drafted.stderr and "mean acceptance length" in drafted.stderr, drafted.stderr)
    prompts = os.path.join(WORK, f"{TEST}_in.jsonl")
    with open(prompts, "w") as f:
        for i, text in enumerate(("Hello", "Bonjour tout le monde", "1 2 3 4")):
            f.write(json.dumps({"prompt": text, "max_tokens": 10 + i}) + "\n")
    outs = []
    for extra in ((), spec):
        out = os.path.join(WORK, f"{TEST}_out{len(outs)}.jsonl")
        run("generate", "--model", BF16, "--input", prompts, "--output", out, "--threads", "2", *extra)
        with open(out) as f:
            outs.append([json.loads(line)["text"] for line in f])
    check(outs[0] == outs[1], f"offline batch differs with speculation: {outs}")
    serve_metrics(spec)
    for bad, needle in (('{"method": "mtp"', "not valid JSON"), ('{"method": "mtp"}', "num_speculative_tokens"),
                        ('{"method": "eagle", "num_speculative_tokens": 2}', "eagle"),
                        ('{"method": "mtp", "num_speculative_tokens": 99}', "[1, 16]")):
        for cmd in (("generate", "--model", BF16, "--prompt", "x"), ("serve", "--model", BF16, "--port", "0")):
            p = run(*cmd, "--speculative-config", bad, expect_rc=2)
            lines = p.stderr.strip().splitlines()
            check(len(lines) == 1 and needle in lines[0] and "--speculative-config" in lines[0], f"{cmd[0]} {bad}: {p.stderr!r}")


TESTS = {f.__name__: f for f in (make_models, generate, logits_chunking, logits_isa, inspect, usage_errors, corrupt,
                                 chat_v4, speculative)}
TESTS[TEST]()
print("PASS", TEST)
