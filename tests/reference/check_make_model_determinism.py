#!/usr/bin/python3
"""make-model determinism: the same seed gives byte-identical files (with different thread
counts), a different seed gives different weights. Compares sha256 of every file.

    check_make_model_determinism.py --deepinfer BIN --work DIR [--preset tiny] [--dtype fp8]
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys


def make(deepinfer, out, preset, dtype, seed, threads):
    shutil.rmtree(out, ignore_errors=True)
    cmd = [deepinfer, "make-model", "--arch", "deepseek_v3", "--preset", preset, "--dtype", dtype,
           "--seed", str(seed), "--threads", str(threads), "--out", out]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {proc.returncode}\n{proc.stderr}")


def digests(directory):
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deepinfer", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--dtype", default="fp8")
    args = ap.parse_args(argv)
    dirs = {k: os.path.join(args.work, k) for k in ("a", "b", "c")}
    make(args.deepinfer, dirs["a"], args.preset, args.dtype, seed=7, threads=1)
    make(args.deepinfer, dirs["b"], args.preset, args.dtype, seed=7, threads=2)
    make(args.deepinfer, dirs["c"], args.preset, args.dtype, seed=8, threads=2)
    a, b, c = (digests(dirs[k]) for k in ("a", "b", "c"))
    ok = True
    if a != b:
        ok = False
        print("FAIL same seed differs:", [n for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)])
    shards = [n for n in a if n.endswith(".safetensors")]
    if len(shards) < 2:
        ok = False
        print(f"FAIL expected a sharded checkpoint, got {shards}")
    same_weights = [n for n in shards if a[n] == c.get(n)]
    if same_weights:
        ok = False
        print("FAIL a different seed left shards unchanged:", same_weights)
    # config, index and tokenizer files do not depend on the seed.
    for n in a:
        if not n.endswith(".safetensors") and a[n] != c.get(n):
            ok = False
            print(f"FAIL {n} depends on the seed")
    for n, d in a.items():
        print(f"{d[:16]}  {n}")
    print("PASS" if ok else "FAIL")
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
