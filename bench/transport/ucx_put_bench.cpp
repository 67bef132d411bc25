// ucx_put_bench: how fast KV pages move between a prefill and a decode process's worker over UCX
// (here: two workers in one process, on loopback; UCX picks shared memory or tcp as it would for
// two processes on one host; UCX_TLS=tcp forces the network path), as a fraction of memcpy of the
// same bytes measured in the same run.
//
//   ucx_put_bench [--mib 256] [--page-kib 64] [--repeats 5]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "machine/host_load.h"
#include "transport/control_message.h"
#include "transport/registered_memory.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"

namespace {

using namespace ds::transport;
using Clock = std::chrono::steady_clock;

const SharedSecret kSecret = "bench";

Deadline in_s(int s) { return Clock::now() + std::chrono::seconds(s); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double memcpy_gbps(size_t bytes, int repeats) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    rates.push_back(static_cast<double>(bytes) / std::chrono::duration<double>(Clock::now() - t0).count() /
                    1e9);
  }
  return median(rates);
}

void die(const ds::Status& s) {
  if (!s.ok()) {
    fmt::print(stderr, "ucx_put_bench: {}\n", s.to_string());
    std::exit(1);
  }
}

// Decode side: register, grant every page, then acknowledge each round's kv_written.
void serve_decode(UcxWorker& w, std::vector<char>& region, size_t page_bytes, int rounds) {
  auto mem = w.register_memory(region.data(), region.size());
  die(mem.status());
  auto ep = w.accept(in_s(30));
  die(ep.status());
  KvGrant grant{
      (*mem)->address(), (*mem)->bytes(), (*mem)->packed_rkey(), static_cast<uint32_t>(page_bytes), {}};
  for (uint32_t i = 0; i < region.size() / page_bytes; ++i) grant.block_ids.push_back(i);
  die((*ep)->send(encode_control_message({ControlType::kv_grant, 1, encode_kv_grant(grant)}, kSecret),
                  in_s(30)));
  for (int r = 0; r < rounds; ++r) die(w.receive(in_s(60)).status());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"KV-page transfer over UCX vs memcpy"};
  size_t mib = 256, page_kib = 64;
  int repeats = 5;
  app.add_option("--mib", mib, "bytes moved per round, MiB")->check(CLI::Range(1, 8192));
  app.add_option("--page-kib", page_kib, "one put per page of this size, KiB")->check(CLI::Range(4, 65536));
  app.add_option("--repeats", repeats, "timed rounds (median reported)")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  const size_t bytes = mib << 20, page = page_kib << 10;
  if (bytes % page != 0) {
    fmt::print(stderr, "ucx_put_bench: --mib must be a multiple of --page-kib\n");
    return 2;
  }
  fmt::print("{}\n", ds::bench::format_host_load(ds::bench::read_host_load()));
  const double copy = memcpy_gbps(bytes, repeats);

  auto decode = UcxWorker::create();
  die(decode.status());
  die((*decode)->listen("127.0.0.1", 0));
  std::vector<char> region(bytes, 0);
  std::vector<double> rates;
  std::thread prefill([&] {
    auto w = UcxWorker::create();
    die(w.status());
    auto ep = (*w)->connect("127.0.0.1", (*decode)->listen_port());
    die(ep.status());
    auto frame = (*w)->receive(in_s(30));
    die(frame.status());
    auto m = decode_control_message(*frame, kSecret);
    die(m.status());
    auto grant = decode_kv_grant(m->payload);
    die(grant.status());
    auto key = (*ep)->unpack_remote_key(grant->packed_rkey);
    die(key.status());
    std::vector<char> src(bytes, 7);
    for (int r = 0; r < repeats + 1; ++r) {  // round 0 warms up (connection, page faults)
      const auto t0 = Clock::now();
      for (uint32_t id : grant->block_ids)
        die((*ep)->put(src.data() + size_t{id} * page, page, grant->remote_address + uint64_t{id} * page,
                       *key));
      die((*ep)->flush(in_s(60)));
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r > 0) rates.push_back(static_cast<double>(bytes) / s / 1e9);
      die((*ep)->send(encode_control_message({ControlType::kv_written, 1, ""}, kSecret), in_s(30)));
    }
  });
  serve_decode(**decode, region, page, repeats + 1);
  prefill.join();
  const bool intact = std::all_of(region.begin(), region.end(), [](char c) { return c == 7; });
  const double put = median(rates);
  fmt::print("memcpy            {:8.2f} GB/s (1 thread, median of {})\n", copy, repeats);
  fmt::print("UCX put + flush   {:8.2f} GB/s ({} MiB in {} KiB pages, median of {})  = {:.2f} x memcpy\n",
             put, mib, page_kib, repeats, put / copy);
  fmt::print("bytes at the decode side {}\n", intact ? "intact" : "WRONG");
  return intact ? 0 : 1;
}
