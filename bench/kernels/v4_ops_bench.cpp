#include "v4_ops_bench.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/thread_pool.h"
#include "bench_weights.h"
#include "kernels/compressor.h"
#include "kernels/hadamard.h"
#include "kernels/indexer.h"
#include "kernels/quant_sim.h"
#include "kernels/sparse_attention.h"
#include "machine/bench_timing.h"

namespace ds::bench {
namespace {

void print_row(const std::string& op, Isa isa, int n_threads, double seconds, double bytes, double flops,
               const MachinePeaks& peaks) {
  const double gbps = bytes / seconds * 1e-9;
  const double gflops = flops / seconds * 1e-9;
  const double bw = peaks.read_gbps.peak_at(n_threads);
  const double fma = peaks.fp32_fma_roofline_gflops(n_threads);
  fmt::print("{:<52} {:>9} {:>3} {:>10.3f} {:>8.1f} {:>9.1f} {:>7.0f}% {:>7.0f}%\n", op, isa_name(isa),
             n_threads, seconds * 1e3, gbps, gflops, bw > 0 ? 100.0 * gbps / bw : 0.0,
             fma > 0 ? 100.0 * gflops / fma : 0.0);
  std::fflush(stdout);
}

AlignedBuffer<float> random_buffer(int64_t n, uint64_t seed) {
  AlignedBuffer<float> b(static_cast<size_t>(n));
  fill_signed_unit(b.data(), n, seed);
  return b;
}

}  // namespace

void run_v4_ops_bench(const V4OpsBenchOptions& opt, const MachinePeaks& peaks) {
  fmt::print("{:<52} {:>9} {:>3} {:>10} {:>8} {:>9} {:>8} {:>8}\n", "v4 op (bytes counted)", "isa", "thr",
             "ms/call", "GB/s", "GFLOP/s", "%readBW", "%FMA");
  std::map<int, std::unique_ptr<ThreadPool>> pools;
  for (int t : opt.thread_counts) {
    if (!pools.count(t)) pools[t] = std::make_unique<ThreadPool>(t);
  }

  // Row ops over a prefill chunk's indexer queries: [tokens x 64 heads, 128], in place (the
  // transform is linear and the simulation idempotent, so repeated runs stay finite).
  {
    const int64_t rows = (opt.quick ? 512 : 2048) * 64, n = 128;
    AlignedBuffer<float> x = random_buffer(rows * n, opt.seed);
    const double bytes = 2.0 * static_cast<double>(rows * n) * 4;
    for (Isa isa : opt.isas) {
      const RunStats s = time_runs(opt.n_warmup, opt.n_runs, [&] {
        hadamard_rows(isa, x.data(), rows, n, n, hadamard_default_scale(n));
      });
      print_row(fmt::format("hadamard-128 [{}, 128] in place (r+w)", rows), isa, 1, s.median_s, bytes,
                static_cast<double>(rows * n) * 8, peaks);
    }
    const std::pair<const char*, QuantSimSpec> specs[] = {{"fp4/32 pow2", v4_indexer_fp4_spec()},
                                                          {"fp8/64 pow2", v4_kv_fp8_spec()}};
    for (const auto& named : specs) {
      const QuantSimSpec spec = named.second;
      for (Isa isa : opt.isas) {
        const RunStats s =
            time_runs(opt.n_warmup, opt.n_runs, [&] { quant_sim_rows(isa, x.data(), rows, n, n, spec); });
        print_row(fmt::format("quant_sim {} [{}, 128] in place (r+w)", named.first, rows), isa, 1, s.median_s,
                  bytes, 0.0, peaks);
      }
    }
  }

  // CSA compressor (ratio 4, overlap, d_c 512) over a prefill chunk: reads a and z once.
  {
    const int64_t n_rows = opt.quick ? 1024 : 4096;
    const int32_t d_c = 512;
    AlignedBuffer<float> kv = random_buffer(n_rows * 2 * d_c, opt.seed + 1);
    AlignedBuffer<float> score = random_buffer(n_rows * 2 * d_c, opt.seed + 2);
    AlignedBuffer<float> out(static_cast<size_t>(n_rows / 4 * d_c));
    CompressorArgs a{kv.data(), score.data(), 2 * d_c, n_rows, 4, d_c, true, false, out.data(), d_c};
    const double bytes = 2.0 * static_cast<double>(n_rows) * 2 * d_c * 4;
    for (Isa isa : opt.isas) {
      for (int t : opt.thread_counts) {
        const RunStats s = time_runs(opt.n_warmup, opt.n_runs, [&] { compressor_pool(isa, *pools[t], a); });
        print_row(fmt::format("compressor CSA r4 d512, {} tokens (read a, z)", n_rows), isa, t, s.median_s,
                  bytes, 0.0, peaks);
      }
    }
  }

  // Indexer decode: one query, 64 heads x 128 against n_keys compressed keys (16K / 64K context
  // at ratio 4), top-512. Bytes: the keys once; FLOPs: 2 · heads · 128 per key.
  {
    const int32_t n_heads = 64, head_dim = 128;
    for (int64_t n_keys : {int64_t{4096}, opt.quick ? int64_t{8192} : int64_t{16384}}) {
      AlignedBuffer<float> q = random_buffer(n_heads * head_dim, opt.seed + 3);
      AlignedBuffer<float> w = random_buffer(n_heads, opt.seed + 4);
      AlignedBuffer<float> keys = random_buffer(n_keys * head_dim, opt.seed + 5);
      std::vector<int32_t> top(512);
      const int64_t n_visible = n_keys;
      IndexerArgs a{q.data(), w.data(), 1,          n_heads, head_dim, keys.data(),
                    n_keys,   head_dim, &n_visible, 512,     nullptr,  top.data()};
      const double bytes = static_cast<double>(n_keys) * head_dim * 4;
      const double flops = 2.0 * n_heads * head_dim * static_cast<double>(n_keys);
      for (Isa isa : opt.isas) {
        for (int t : opt.thread_counts) {
          if (isa == Isa::reference && t > 1) continue;
          const RunStats s = time_runs(opt.n_warmup, opt.n_runs, [&] { indexer_topk(isa, *pools[t], a); });
          print_row(fmt::format("indexer decode 64h x 128, {} keys, top-512 (keys)", n_keys), isa, t,
                    s.median_s, bytes, flops, peaks);
        }
      }
    }
  }

  // Sparse attention decode: one query, 64 heads, d 512, 128 window slots + 512 selected entries.
  // Bytes: the 640 key rows once; FLOPs: scores and the weighted sum.
  {
    const int32_t n_heads = 64, d = 512;
    const int64_t n_win = 128, n_comp = 512, n_comp_rows = 8192;
    AlignedBuffer<float> q = random_buffer(n_heads * d, opt.seed + 6);
    AlignedBuffer<float> win = random_buffer(n_win * d, opt.seed + 7);
    AlignedBuffer<float> comp = random_buffer(n_comp_rows * d, opt.seed + 8);
    AlignedBuffer<float> sink = random_buffer(n_heads, opt.seed + 9);
    AlignedBuffer<float> out(static_cast<size_t>(n_heads * d));
    std::vector<int32_t> idx_win(n_win), idx_comp(n_comp);
    for (int64_t j = 0; j < n_win; ++j) idx_win[j] = static_cast<int32_t>(j);
    SplitMix64 rng(opt.seed + 10);
    for (auto& v : idx_comp) v = static_cast<int32_t>(rng.next() % n_comp_rows);
    SparseAttentionArgs a;
    a.q = q.data();
    a.n_q = 1;
    a.n_heads = n_heads;
    a.d = d;
    a.window = {win.data(), d, idx_win.data(), n_win};
    a.compressed = {comp.data(), d, idx_comp.data(), n_comp};
    a.sink = sink.data();
    a.scale = 0.044194173f;
    a.out = out.data();
    const double bytes = static_cast<double>(n_win + n_comp) * d * 4;
    const double flops = 4.0 * n_heads * d * static_cast<double>(n_win + n_comp);
    for (Isa isa : opt.isas) {
      for (int t : opt.thread_counts) {
        if (isa == Isa::reference && t > 1) continue;
        const RunStats s = time_runs(opt.n_warmup, opt.n_runs, [&] { sparse_attention(isa, *pools[t], a); });
        print_row("sparse attn decode 64h d512, 128 win + 512 sel (rows)", isa, t, s.median_s, bytes, flops,
                  peaks);
      }
    }
  }
}

}  // namespace ds::bench
