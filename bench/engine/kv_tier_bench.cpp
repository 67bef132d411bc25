// kv_tier_bench: the KV tiers on a checkpoint (docs/kvcache.md, Tiers; docs/benchmarks.md).
//   1. TTFT of a long prompt: cold recompute, prefix from the engine's pool, prefix restored from
//      the SSD tier by a fresh engine (page cache warm, and after POSIX_FADV_DONTNEED on every
//      entry file, i.e. from the device);
//   2. restore GB/s (the tier's reads) against the disk's bandwidth measured in the same run on the
//      same entry files, with pread and with io_uring (queue depth 32);
//   3. with --redis URL (a running redis-server): TTFT with the prefix restored from the Redis tier
//      by a fresh engine, and the tier's read GB/s;
//   4. decode throughput with the tier write path on vs no tiers, the process CPU time of each run
//      (getrusage: other processes' load does not count) and the tier writer thread's own CPU on
//      its write jobs (TierStoreStats::write_cpu_ns_total), so the write path's cost is a measured
//      fraction of the run's even when wall times are noisy.
// Fixed seeds; medians over --runs.
//   kv_tier_bench --model DIR [--threads N] [--prefix-tokens 4096] [--runs 2] [--disk-dir DIR]
//                 [--redis redis://127.0.0.1:PORT]
//                 [--decode-requests 8] [--decode-prompt-tokens 256] [--decode-tokens 64]
#include <fcntl.h>
#include <fmt/format.h>
#include <liburing.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/unique_fd.h"
#include "engine/engine.h"
#include "engine/model_loader.h"
#include "kernels/isa.h"
#include "kvcache/disk_tier.h"
#include "kvcache/redis_tier.h"
#include "kvcache/tier_key.h"

namespace {

using namespace ds;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string model_dir;
  int n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int32_t prefix_tokens = 4096;
  int runs = 2;
  std::string disk_dir = "/tmp/ds_kv_tier_bench";
  std::string redis_url;  // "" = no Redis row
  int decode_requests = 8;
  int32_t decode_prompt_tokens = 256;
  int32_t decode_tokens = 64;
  int64_t kv_cache_mib = 2048;
  std::string only;  // "ttft" | "decode" | "" (both)
};

void check(const Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(fmt::format("{}: {}", what, s.to_string()));
}

std::vector<int32_t> random_tokens(int64_t n, int vocab, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& id : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// User + system CPU seconds of this process, all threads.
double process_cpu_s() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return s(u.ru_utime) + s(u.ru_stime);
}

struct TierEngine {
  std::unique_ptr<Engine> engine;
  std::shared_ptr<DiskTier> disk;
  std::shared_ptr<RedisTier> redis;
};

// An engine with no tier, the SSD tier in `disk_dir`, or (redis_url set) only the Redis tier under a
// namespace salted with `disk_dir` (so each run starts empty).
TierEngine make_engine(ModelRunner& model, const Args& a, const std::string* disk_dir,
                       const std::string& redis_url = {}) {
  EngineConfig cfg;
  cfg.scheduler.max_running = 16;
  cfg.kv_cache_bytes = a.kv_cache_mib << 20;
  cfg.prefix_hash_seed = 7;
  TierEngine t;
  if (disk_dir != nullptr) {
    Result<std::vector<std::byte>> secret = load_or_create_tier_secret(*disk_dir + "/secret");
    check(secret.status(), "secret");
    cfg.kv_tiers.model_fingerprint = 1;
    cfg.kv_tiers.secret = *secret;
    cfg.kv_tiers.open = [&t, disk_dir,
                         redis_url](uint64_t ns) -> Result<std::vector<std::shared_ptr<KvTier>>> {
      if (!redis_url.empty()) {
        RedisTierConfig rc;
        rc.url = redis_url;
        rc.namespace_id = ns;
        rc.ttl_s = 3600;
        rc.io_timeout_ms = 5000;  // a 4k-token prefix is ~60 MB in one batch of values
        DS_ASSIGN_OR_RETURN(std::unique_ptr<RedisTier> r, RedisTier::open(rc));
        t.redis = std::move(r);
        return std::vector<std::shared_ptr<KvTier>>{t.redis};
      }
      DS_ASSIGN_OR_RETURN(std::unique_ptr<DiskTier> d,
                          DiskTier::open({*disk_dir, int64_t{64} << 30, ns, {}, {}}));
      d->wait_for_scan();
      t.disk = std::move(d);
      return std::vector<std::shared_ptr<KvTier>>{t.disk};
    };
  }
  Result<std::unique_ptr<Engine>> e = Engine::create(cfg, model, nullptr);
  check(e.status(), "Engine::create");
  t.engine = std::move(e).value();
  return t;
}

Request request(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt_tokens = std::move(prompt);
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  r.detokenize = false;
  return r;
}

double ttft_ms(Engine& engine, const std::vector<int32_t>& prompt, int64_t* cached) {
  RequestStream s;
  check(engine.submit(request(prompt, 1), s.sink()).status(), "submit");
  const TokenEvent e = s.collect();
  check(e.error, "request");
  *cached = e.usage.cached_prompt_tokens;
  return std::chrono::duration<double, std::milli>(e.first_token_at - e.queued_at).count();
}

std::vector<std::string> entry_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".kv") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Writes back and drops every entry file from the page cache: the next read comes from the device.
void evict(const std::vector<std::string>& files) {
  ::sync();
  for (const std::string& f : files) {
    UniqueFd fd(::open(f.c_str(), O_RDONLY));
    if (fd.valid()) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  }
}

// Reads every file whole, one after the other, with pread. Returns GB/s.
double read_pread(const std::vector<std::string>& files, std::vector<std::vector<char>>& bufs) {
  const auto t0 = Clock::now();
  int64_t n = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    UniqueFd fd(::open(files[i].c_str(), O_RDONLY));
    size_t done = 0;
    while (done < bufs[i].size()) {
      const ssize_t got =
          ::pread(fd.get(), bufs[i].data() + done, bufs[i].size() - done, static_cast<off_t>(done));
      if (got <= 0) throw std::runtime_error("pread failed");
      done += static_cast<size_t>(got);
    }
    n += static_cast<int64_t>(done);
  }
  return static_cast<double>(n) / seconds_since(t0) / 1e9;
}

// The same reads through io_uring, up to 32 in flight. Returns GB/s.
double read_uring(const std::vector<std::string>& files, std::vector<std::vector<char>>& bufs) {
  io_uring ring;
  if (io_uring_queue_init(32, &ring, 0) != 0) return 0;
  std::vector<UniqueFd> fds;
  const auto t0 = Clock::now();
  for (const std::string& f : files) fds.emplace_back(::open(f.c_str(), O_RDONLY));
  size_t next = 0, inflight = 0;
  int64_t n = 0;
  while (next < files.size() || inflight > 0) {
    while (next < files.size() && inflight < 32) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_read(sqe, fds[next].get(), bufs[next].data(), static_cast<unsigned>(bufs[next].size()),
                         0);
      ++next;
      ++inflight;
    }
    io_uring_submit(&ring);
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) != 0) break;
    if (cqe->res > 0) n += cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    --inflight;
  }
  io_uring_queue_exit(&ring);
  return static_cast<double>(n) / seconds_since(t0) / 1e9;
}

void bench_ttft(ModelRunner& model, const Args& a, int vocab) {
  fmt::print("== TTFT of a {}-token prompt, median of {} ==\n", a.prefix_tokens + 1, a.runs);
  std::vector<double> cold, pool, ssd_cached, ssd_device, tier_gbs, redis_ms, redis_gbs;
  int64_t hit_pool = 0, hit_ssd = 0, hit_device = 0, hit_redis = 0, block_bytes = 0, n_entries = 0;
  std::vector<std::string> files;
  for (int run = 0; run < a.runs; ++run) {
    const std::vector<int32_t> prompt =
        random_tokens(a.prefix_tokens + 1, vocab, 100 + static_cast<uint64_t>(run));
    int64_t cached = 0;
    {
      TierEngine e = make_engine(model, a, nullptr);
      cold.push_back(ttft_ms(*e.engine, prompt, &cached));
      pool.push_back(ttft_ms(*e.engine, prompt, &hit_pool));
    }
    const std::string dir = fmt::format("{}/run{}", a.disk_dir, run);
    fs::remove_all(dir);
    fs::create_directories(dir);
    {
      TierEngine writer = make_engine(model, a, &dir);
      (void)ttft_ms(*writer.engine, prompt, &cached);
      writer.engine->shutdown();  // drains the writes
    }
    {
      TierEngine reader = make_engine(model, a, &dir);
      ssd_cached.push_back(ttft_ms(*reader.engine, prompt, &hit_ssd));
    }
    files = entry_files(dir);
    evict(files);
    {
      TierEngine reader = make_engine(model, a, &dir);
      ssd_device.push_back(ttft_ms(*reader.engine, prompt, &hit_device));
      const TierStats s = reader.disk->stats();
      tier_gbs.push_back(
          s.read_ns_total > 0 ? static_cast<double>(s.bytes_read) / static_cast<double>(s.read_ns_total) : 0);
      n_entries = s.n_entries;
      block_bytes = model.kv_block_bytes();
    }
    if (!a.redis_url.empty()) {
      // The Redis tier alone: written by one engine, restored by a fresh one (the secret file in
      // `dir` is shared, so both compute the same keys).
      {
        TierEngine writer = make_engine(model, a, &dir, a.redis_url);
        (void)ttft_ms(*writer.engine, prompt, &cached);
        writer.engine->shutdown();
      }
      TierEngine reader = make_engine(model, a, &dir, a.redis_url);
      redis_ms.push_back(ttft_ms(*reader.engine, prompt, &hit_redis));
      const TierStats s = reader.redis->stats();
      redis_gbs.push_back(
          s.read_ns_total > 0 ? static_cast<double>(s.bytes_read) / static_cast<double>(s.read_ns_total) : 0);
      if (s.n_errors > 0) fmt::print("  (Redis tier errors: {})\n", s.n_errors);
    }
  }
  const double c = median(cold);
  fmt::print("  cold recompute            {:9.1f} ms\n", c);
  fmt::print("  pool hit ({:5} tokens)    {:9.1f} ms  {:6.1f}x faster than cold\n", hit_pool, median(pool),
             c / median(pool));
  fmt::print("  SSD, page cache ({:5})   {:9.1f} ms  {:6.1f}x\n", hit_ssd, median(ssd_cached),
             c / median(ssd_cached));
  fmt::print("  SSD, device ({:5})       {:9.1f} ms  {:6.1f}x\n", hit_device, median(ssd_device),
             c / median(ssd_device));
  if (!redis_ms.empty())
    fmt::print("  Redis ({:5})             {:9.1f} ms  {:6.1f}x; tier reads {:.2f} GB/s (median)\n",
               hit_redis, median(redis_ms), c / median(redis_ms), median(redis_gbs));
  fmt::print("  {} entries of {:.2f} MB; tier reads from the device: {:.2f} GB/s (median)\n", n_entries,
             static_cast<double>(block_bytes) / 1e6, median(tier_gbs));

  // The device's bandwidth on the same files, in this run.
  std::vector<std::vector<char>> bufs;
  for (const std::string& f : files) bufs.emplace_back(static_cast<size_t>(fs::file_size(f)));
  std::vector<double> p, u;
  for (int i = 0; i < 3; ++i) {
    evict(files);
    p.push_back(read_pread(files, bufs));
    evict(files);
    u.push_back(read_uring(files, bufs));
  }
  fmt::print("  same files from the device: pread {:.2f} GB/s, io_uring QD32 {:.2f} GB/s (median of 3)\n",
             median(p), median(u));
  for (auto& b : bufs) std::fill(b.begin(), b.end(), 0);
  evict(files);
  (void)read_pread(files, bufs);  // now cached
  fmt::print("  same files from the page cache: pread {:.2f} GB/s, io_uring {:.2f} GB/s\n",
             read_pread(files, bufs), read_uring(files, bufs));
}

struct DecodeRun {
  double tok_s = 0;        // decode tokens per second (wall)
  double cpu_s = 0;        // process CPU from the first submit to the engine's shutdown (writes drained)
  double write_cpu_s = 0;  // of which the tier writer thread's, on write jobs (EngineStats)
};

// Decode tok/s of a concurrent batch: the tokens after each request's first, over the time from the
// last first token (every prompt prefilled) to the end, so prefill does not dilute the figure. The
// CPU time covers the whole run (prefill, decode and every tier write), so on - off is the write
// path's own CPU.
DecodeRun decode_run(ModelRunner& model, const Args& a, int vocab, const std::string* dir, uint64_t seed) {
  TierEngine e = make_engine(model, a, dir);
  const double cpu0 = process_cpu_s();
  std::vector<RequestStream> streams(static_cast<size_t>(a.decode_requests));
  for (int i = 0; i < a.decode_requests; ++i) {
    check(e.engine
              ->submit(request(random_tokens(a.decode_prompt_tokens, vocab,
                                             seed * 1000 + static_cast<uint64_t>(i)),
                               a.decode_tokens),
                       streams[static_cast<size_t>(i)].sink())
              .status(),
          "submit");
  }
  SteadyTime last_first{};
  for (RequestStream& s : streams) {
    const TokenEvent ev = s.collect();
    check(ev.error, "request");
    last_first = std::max(last_first, ev.first_token_at);
  }
  DecodeRun r;
  const double decode_s = std::chrono::duration<double>(Clock::now() - last_first).count();
  r.tok_s = a.decode_requests * (a.decode_tokens - 1) / decode_s;
  e.engine->shutdown();  // drains the tier writes
  r.cpu_s = process_cpu_s() - cpu0;
  r.write_cpu_s = static_cast<double>(e.engine->stats().kv_tier_write_cpu_ns) * 1e-9;
  if (e.disk) {
    const TierStats st = e.disk->stats();
    fmt::print("    (tier wrote {} entries, {:.1f} MB)\n", st.n_writes,
               static_cast<double>(st.bytes_written) / 1e6);
  }
  return r;
}

void bench_decode(ModelRunner& model, const Args& a, int vocab) {
  fmt::print("\n== decode: {} requests x {} tokens ({}-token unique prompts), write path on vs no tiers ==\n",
             a.decode_requests, a.decode_tokens, a.decode_prompt_tokens);
  const std::string dir = a.disk_dir + "/decode";
  std::vector<double> off, on, cpu_off, cpu_on, write_share;
  for (int run = 0; run < std::max(a.runs, 2); ++run) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const uint64_t seed = 10 + static_cast<uint64_t>(run);  // the same prompts both ways
    const DecodeRun r_off = decode_run(model, a, vocab, nullptr, seed);
    const DecodeRun r_on = decode_run(model, a, vocab, &dir, seed);
    fmt::print(
        "  run {}: no tiers {:.1f} tok/s, {:.2f} CPU-s; write path on {:.1f} tok/s, {:.2f} CPU-s, of which "
        "the "
        "tier writer {:.3f} CPU-s\n",
        run, r_off.tok_s, r_off.cpu_s, r_on.tok_s, r_on.cpu_s, r_on.write_cpu_s);
    write_share.push_back(r_on.write_cpu_s / r_on.cpu_s);
    off.push_back(r_off.tok_s);
    on.push_back(r_on.tok_s);
    cpu_off.push_back(r_off.cpu_s);
    cpu_on.push_back(r_on.cpu_s);
  }
  fmt::print("  no tiers {:.1f} tok/s, write path on {:.1f} tok/s: {:+.1f}% wall (medians)\n", median(off),
             median(on), 100.0 * (median(on) / median(off) - 1.0));
  fmt::print("  process CPU per run: no tiers {:.3f} s, write path on {:.3f} s: {:+.2f}% (medians)\n",
             median(cpu_off), median(cpu_on), 100.0 * (median(cpu_on) / median(cpu_off) - 1.0));
  fmt::print(
      "  the tier writer thread's CPU: {:.2f}% of the run's CPU (median; what the write path takes from the "
      "model when the cores are saturated)\n",
      100.0 * median(write_share));
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"KV tier benchmark"};
  app.add_option("--model", a.model_dir, "checkpoint directory")->required();
  app.add_option("--threads", a.n_threads);
  app.add_option("--prefix-tokens", a.prefix_tokens);
  app.add_option("--runs", a.runs);
  app.add_option("--disk-dir", a.disk_dir, "folder on the disk to measure (removed at the end)");
  app.add_option("--redis", a.redis_url, "redis://HOST:PORT of a running redis-server: adds the Redis row");
  app.add_option("--decode-requests", a.decode_requests);
  app.add_option("--decode-prompt-tokens", a.decode_prompt_tokens);
  app.add_option("--decode-tokens", a.decode_tokens);
  app.add_option("--kv-cache-mib", a.kv_cache_mib);
  app.add_option("--only", a.only, "ttft | decode (default: both)");
  CLI11_PARSE(app, argc, argv);
  try {
    ModelOptions mo;
    mo.isa = best_isa();
    mo.n_threads = a.n_threads;
    mo.max_seq_len = std::max(a.prefix_tokens + 16, a.decode_prompt_tokens + a.decode_tokens + 16);
    Result<std::unique_ptr<ModelRunner>> model = load_model(a.model_dir, mo);
    check(model.status(), "load");
    const int vocab = (*model)->config().vocab_size;
    fs::create_directories(a.disk_dir);
    if (a.only != "decode") bench_ttft(**model, a, vocab);
    if (a.only != "ttft") bench_decode(**model, a, vocab);
    fs::remove_all(a.disk_dir);
  } catch (const std::exception& e) {
    fmt::print(stderr, "kv_tier_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
