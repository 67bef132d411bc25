#include "ops_bench.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/thread_pool.h"
#include "bench_weights.h"
#include "kernels/attention.h"
#include "kernels/norm.h"
#include "kernels/softmax.h"
#include "machine/bench_timing.h"

namespace ds::bench {
namespace {

void print_row(const std::string& op, Isa isa, int n_threads, double seconds, double bytes, double flops,
               const MachinePeaks& peaks) {
  const double gbps = bytes / seconds * 1e-9;
  const double bw = peaks.read_gbps.peak_at(n_threads);
  fmt::print("{:<44} {:>9} {:>3} {:>10.3f} {:>8.1f} {:>9.1f} {:>7.0f}%\n", op, isa_name(isa), n_threads,
             seconds * 1e3, gbps, flops / seconds * 1e-9, bw > 0 ? 100.0 * gbps / bw : 0.0);
  std::fflush(stdout);
}

}  // namespace

void run_ops_bench(const OpsBenchOptions& opt, const MachinePeaks& peaks) {
  fmt::print("{:<44} {:>9} {:>3} {:>10} {:>8} {:>9} {:>8}\n", "op (bytes counted)", "isa", "thr", "ms/call",
             "GB/s", "GFLOP/s", "%readBW");

  // RMSNorm over [rows, 2048] into a separate output: reads x and writes y once (w stays in L1).
  // 8192 rows x 2048 = 64 MiB each way, beyond L3, like a long prefill's activations.
  {
    const int64_t rows = opt.quick ? 4096 : 8192, dim = 2048;
    AlignedBuffer<float> x(static_cast<size_t>(rows * dim)), y(static_cast<size_t>(rows * dim)), w(dim);
    fill_signed_unit(x.data(), rows * dim, opt.seed);
    fill_signed_unit(w.data(), dim, opt.seed + 1);
    const double bytes = 2.0 * static_cast<double>(rows * dim) * 4;
    for (Isa isa : opt.isas) {
      const RunStats s = time_runs(opt.n_warmup, opt.n_runs, [&] {
        rmsnorm(isa, x.data(), rows, dim, dim, w.data(), 1e-6f, y.data(), dim);
      });
      print_row(fmt::format("rmsnorm [{}, {}] (read x + write y)", rows, dim), isa, 1, s.median_s, bytes,
                4.0 * static_cast<double>(rows * dim), peaks);
    }
  }

  // Softmax in place over rows of 4096 (an attention row at 4K context): read + write each row.
  {
    const int64_t rows = opt.quick ? 4096 : 8192, n = 4096;
    AlignedBuffer<float> x(static_cast<size_t>(rows * n));
    AlignedBuffer<float> src(static_cast<size_t>(rows * n));
    fill_signed_unit(src.data(), rows * n, opt.seed + 2);
    const double bytes = 2.0 * static_cast<double>(rows * n) * 4;
    for (Isa isa : opt.isas) {
      // Each run starts from the same logits: softmax of a softmax would drift toward uniform.
      std::vector<double> seconds;
      for (int r = 0; r < opt.n_warmup + opt.n_runs; ++r) {
        std::copy(src.data(), src.data() + rows * n, x.data());
        const RunStats s = time_runs(0, 1, [&] {
          for (int64_t i = 0; i < rows; ++i) softmax(isa, x.data() + i * n, n);
        });
        if (r >= opt.n_warmup) seconds.push_back(s.median_s);
      }
      print_row(fmt::format("softmax [{}, {}] in place (read + write)", rows, n), isa, 1, median_of(seconds),
                bytes, 0.0, peaks);
    }
  }

  // MLA absorbed decode attention, one query token, n_ctx cached latents shared by all heads.
  // Bytes counted: the latent cache once ([n_ctx, 576] f32); FLOPs: scores and the weighted sum.
  {
    std::map<int, std::unique_ptr<ThreadPool>> pools;
    for (int t : opt.thread_counts) {
      if (!pools.count(t)) pools[t] = std::make_unique<ThreadPool>(t);
    }
    const int latent = 512, rope = 64;
    for (int n_heads : {16, 128}) {  // bench preset, DeepSeek-V3
      const int64_t n_ctx = opt.quick ? 4096 : 16384;
      AlignedBuffer<float> q(static_cast<size_t>(n_heads * (latent + rope)));
      AlignedBuffer<float> cache(static_cast<size_t>(n_ctx * (latent + rope)));
      AlignedBuffer<float> out(static_cast<size_t>(n_heads * latent));
      fill_signed_unit(q.data(), static_cast<int64_t>(q.size()), opt.seed + 3);
      fill_signed_unit(cache.data(), static_cast<int64_t>(cache.size()), opt.seed + 4);
      const int32_t q_pos = static_cast<int32_t>(n_ctx - 1);
      MlaAbsorbedArgs a;
      a.q = q.data();
      a.n_q = 1;
      a.q_pos = &q_pos;
      a.cache = cache.data();
      a.n_ctx = n_ctx;
      a.n_heads = n_heads;
      a.latent_dim = latent;
      a.rope_dim = rope;
      a.scale = 0.07f;
      a.out = out.data();
      const double bytes = static_cast<double>(n_ctx) * (latent + rope) * 4;
      const double flops = 2.0 * n_heads * static_cast<double>(n_ctx) * (latent + rope + latent);
      for (Isa isa : opt.isas) {
        for (int t : opt.thread_counts) {
          // The scalar reference takes ~1 s per call here: one call, one thread, 16 heads only.
          if (isa == Isa::reference && (t > 1 || n_heads > 16)) continue;
          const bool ref = isa == Isa::reference;
          const RunStats s = time_runs(ref ? 0 : opt.n_warmup, ref ? 1 : opt.n_runs,
                                       [&] { mla_attention_absorbed(isa, *pools[t], a); });
          print_row(fmt::format("mla decode {} heads, ctx {} (latent cache)", n_heads, n_ctx), isa, t,
                    s.median_s, bytes, flops, peaks);
        }
      }
    }
  }
}

}  // namespace ds::bench
