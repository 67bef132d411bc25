#!/usr/bin/env python3
"""What N nodes would give for the full DeepSeek-V4.1-Flash under expert parallelism (issue 17).

A roofline model of one decode step, per node, with attention data-parallel (each node its own B
sequences) and the routed experts split over N nodes (docs/expert-parallel.md, "N nodes"):

  weights read per step  = dense (attention, shared expert, gates, head, norms; every node, once per step)
                         + n_layers * (E / N) * P(a local expert is chosen by any of the N*B tokens) * expert_bytes
                           with P = 1 - (1 - k/E)^(N*B)   (uniform routing, i.e. after EPLB)
  FLOPs per step         = B * 2 * active params per token (attention scores at short context not counted)
  compute time           = max(bytes / (read_bw * roofline fraction), FLOPs / (fp32 peak * GEMM fraction))
  all-to-all time        = n_layers * 2 * latency
                         + B * k * n_layers * hidden * (dispatch + combine bytes) * (N - 1) / N / net_bw
  step                   = compute + all-to-all (no overlap; DeepEP's two-batch overlap would hide part of it)

Per-node figures come from this machine (--measured, the JSON of ep_scaling.py) or from flags
describing another node; network figures are flags (the loopback run measures shared memory, not a
network). Shapes are V4.1-Flash's released config (model-spec.md section 2.2); FP8 weights carry one
E8M0 scale per 32x32 block, FP4 experts one per 32 weights. Engram tables (about 196 B FP8 parameters)
are counted in memory, replicated on every node unless --engram-sharded; they add a few rows per token
to the bytes read, which is ignored.
"""
import argparse
import json
import math

# DeepSeek-V4.1-Flash (text part): model-spec.md section 2.2.
V41 = dict(hidden=5120, layers=40, heads=64, head_dim=512, q_lora=1280, o_lora=1024, o_groups=8,
           experts=384, top_k=6, moe_inter=2304, vocab=129280, index_heads=32, index_head_dim=128,
           index_layers=8, engram_params=196e9)
FP8 = 1 + 1 / 1024  # e4m3 + one E8M0 byte per 32x32 block
FP4 = 0.5 + 1 / 32  # e2m1 + one E8M0 byte per 32 weights
GB = 1e9


def v41_sizes(m):
    """Bytes of each weight class and active parameters per token, from the config shapes."""
    h = m["hidden"]
    qdim = m["heads"] * m["head_dim"]
    attn = (h * m["q_lora"] + m["q_lora"] * qdim + h * m["head_dim"] + qdim * m["o_lora"]
            + m["o_groups"] * m["o_lora"] * h)
    indexer = m["q_lora"] * m["index_heads"] * m["index_head_dim"] + h * m["index_head_dim"]
    expert = 3 * h * m["moe_inter"]
    attn_params = m["layers"] * attn + m["index_layers"] * indexer
    shared_params = m["layers"] * expert
    gate_params = m["layers"] * m["experts"] * h
    head_params = m["vocab"] * h
    dense_bytes = (attn_params + shared_params) * FP8 + (gate_params + head_params) * 2
    routed_total = m["layers"] * m["experts"] * expert * FP4
    active = attn_params + shared_params + gate_params + head_params + m["layers"] * m["top_k"] * expert
    return dict(dense_bytes=dense_bytes, expert_bytes=expert * FP4, routed_total_bytes=routed_total,
                embed_bytes=head_params * 2, engram_bytes=m["engram_params"] * FP8, active_params=active)


def step(m, s, node, net, n, b):
    """One decode step on one of n nodes, each with b sequences: (seconds, weight bytes, a2a seconds)."""
    p_chosen = 1 - (1 - m["top_k"] / m["experts"]) ** (n * b)
    routed = m["layers"] * (m["experts"] / n) * p_chosen * s["expert_bytes"]
    weights = s["dense_bytes"] + routed
    mem_s = weights / (node["read_gbs"] * GB * node["roofline_fraction"])
    flop_s = b * 2 * s["active_params"] / (node["fp32_gflops"] * GB * node["gemm_fraction"])
    a2a_bytes = b * m["top_k"] * m["layers"] * m["hidden"] * (net["dispatch_bytes"] + net["combine_bytes"])
    a2a_s = 0.0 if n == 1 else (m["layers"] * 2 * net["latency_us"] * 1e-6
                                + a2a_bytes * (n - 1) / n / (net["gbs"] * GB))
    return max(mem_s, flop_s) + a2a_s, weights, a2a_s


def memory_gb(s, n, engram_sharded, kv_gb):
    engram = s["engram_bytes"] / (n if engram_sharded else 1)
    return (s["dense_bytes"] + s["embed_bytes"] + s["routed_total_bytes"] / n + engram) / GB + kv_gb


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", help="JSON written by ep_scaling.py --json (this machine's per-node figures)")
    ap.add_argument("--read-gbs", type=float, help="node read bandwidth, GB/s (default: measured)")
    ap.add_argument("--roofline-fraction", type=float, help="fraction of read bandwidth decode reaches (default: measured)")
    ap.add_argument("--fp32-gflops", type=float, help="node fp32 FMA peak, GFLOP/s (default: measured)")
    ap.add_argument("--gemm-fraction", type=float, default=0.8,
                    help="fraction of that peak the batched GEMMs reach (FP8 panel GEMM: 0.8, docs/benchmarks.md)")
    ap.add_argument("--node-ram-gb", type=float, default=768.0, help="memory per node, GB")
    ap.add_argument("--kv-gb", type=float, default=32.0, help="KV cache per node, GB")
    ap.add_argument("--net-gbs", type=float, default=12.5, help="network bandwidth per node and direction, GB/s (100 GbE)")
    ap.add_argument("--net-latency-us", type=float, default=15.0, help="one all-to-all's latency, microseconds")
    ap.add_argument("--wire", choices=["f32", "deepep"], default="f32",
                    help="row format on the wire: ours today (f32 out and back) or DeepEP's (FP8 out, bf16 back)")
    ap.add_argument("--engram-sharded", action="store_true", help="split the Engram tables over the nodes")
    ap.add_argument("--nodes", default="1,2,4,8,16")
    ap.add_argument("--batch", default="1,8,32,128", help="sequences per node")
    a = ap.parse_args()

    measured = json.load(open(a.measured)) if a.measured else None
    def pick(flag, key):
        if flag is not None:
            return flag
        if measured is None:
            raise SystemExit(f"ep_projection: give --measured or --{key.replace('_', '-')}")
        return measured["peaks"][{"read_gbs": "read_gbs_2", "roofline_fraction": "decode_roofline_fraction",
                                  "fp32_gflops": "fp32_gflops_2"}[key]]
    node = dict(read_gbs=pick(a.read_gbs, "read_gbs"), roofline_fraction=pick(a.roofline_fraction, "roofline_fraction"),
                fp32_gflops=pick(a.fp32_gflops, "fp32_gflops"), gemm_fraction=a.gemm_fraction)
    m = V41
    # Bytes per hidden element out (dispatch) and back (combine): ours, f32 rows plus an 8-byte
    # {expert, weight} header per row; DeepEP's, FP8 with one f32 scale per 128 and bf16 back.
    wire = {"f32": (4 + 8 / m["hidden"], 4), "deepep": (1 + 4 / 128, 2)}[a.wire]
    net = dict(gbs=a.net_gbs, latency_us=a.net_latency_us, dispatch_bytes=wire[0], combine_bytes=wire[1])
    s = v41_sizes(m)
    print(f"DeepSeek-V4.1-Flash: dense {s['dense_bytes'] / GB:.1f} GB read per step, routed experts "
          f"{s['routed_total_bytes'] / GB:.0f} GB ({s['expert_bytes'] / 1e6:.1f} MB each), Engram "
          f"{s['engram_bytes'] / GB:.0f} GB, {s['active_params'] / 1e9:.1f} B active params/token")
    print(f"node: read {node['read_gbs']:.1f} GB/s at {node['roofline_fraction']:.0%}, fp32 {node['fp32_gflops']:.0f} "
          f"GFLOP/s at {node['gemm_fraction']:.0%}, {a.node_ram_gb:.0f} GB; network {net['gbs']} GB/s, "
          f"{net['latency_us']} us per all-to-all, wire {a.wire}")
    if measured:
        print(f"(measured here: 2-rank loopback all-to-all {measured['alltoall_per_exchange_s'] * 1e6:.0f} us per "
              f"dispatch+combine of {measured['alltoall_bytes_per_exchange'] / 1e3:.0f} kB; bytes/token "
              f"{measured['bytes_per_token'] / measured['theory_bytes_per_token']:.3f}x the theoretical count)")
    print(f"{'nodes':>5s} {'mem/node GB':>11s} {'fits':>4s} {'B/node':>6s} {'step ms':>8s} {'a2a %':>6s} "
          f"{'tok/s/user':>10s} {'tok/s total':>11s}")
    for n in map(int, a.nodes.split(",")):
        mem = memory_gb(s, n, a.engram_sharded, a.kv_gb)
        for b in map(int, a.batch.split(",")):
            t, _, a2a = step(m, s, node, net, n, b)
            print(f"{n:5d} {mem:11.0f} {'yes' if mem <= a.node_ram_gb else 'no':>4s} {b:6d} {t * 1e3:8.1f} "
                  f"{a2a / t:6.1%} {1 / t:10.2f} {n * b / t:11.1f}")


if __name__ == "__main__":
    main()
