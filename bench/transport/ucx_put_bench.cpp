// ucx_put_bench: how fast KV pages move between a prefill and a decode process's worker over UCX
// (here: two workers in one process, on loopback; UCX picks shared memory or tcp as it would for
// two processes on one host; --tls tcp forces the network path), as a fraction of memcpy of the
// same bytes measured in the same run. Also what a transfer pays to set up: a fresh UCX context +
// worker + connection + first round trip (what every P/D transfer paid before the connections were
// kept) against one control round trip on the kept connection (what it pays now).
//
//   ucx_put_bench [--mib 256] [--page-kib 64] [--repeats 5] [--tls tcp|sm,tcp|...] [--lanes]
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

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double memcpy_gbps(size_t bytes, int repeats) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    rates.push_back(static_cast<double>(bytes) / seconds_since(t0) / 1e9);
  }
  return median(rates);
}

void die(const ds::Status& s) {
  if (!s.ok()) {
    fmt::print(stderr, "ucx_put_bench: {}\n", s.to_string());
    std::exit(1);
  }
}

// Decode side: the region registered once; per round: a hello comes in on the kept connection, the
// grant of every page goes back on it, then kv_written.
void serve_decode(UcxWorker& w, std::vector<char>& region, size_t page_bytes, int rounds) {
  auto mem = w.register_memory(region.data(), region.size());
  die(mem.status());
  KvGrant grant;
  grant.regions = {{(*mem)->address(), (*mem)->bytes(), (*mem)->packed_rkey()}};
  grant.arrays = {{(*mem)->address(), page_bytes}};
  grant.n_blocks = static_cast<uint32_t>(region.size() / page_bytes);
  for (uint32_t i = 0; i < grant.n_blocks; ++i) grant.block_ids.push_back(i);
  const std::string grant_frame =
      encode_control_message({ControlType::kv_grant, 1, encode_kv_grant(grant)}, kSecret);
  for (int r = 0; r < 2 * rounds; ++r) {  // a hello and a kv_written per round
    ds::Result<Frame> f = ds::Status(ds::ErrorCode::transport_timeout, "no frame");
    for (auto until = in_s(60); !f.ok() && Clock::now() < until;) {
      w.accept_pending();
      f = w.receive_frame(Clock::now() + std::chrono::milliseconds(20));
    }
    die(f.status());
    auto m = decode_control_message(f->bytes, kSecret);
    die(m.status());
    if (m->type == ControlType::hello) die(w.find(f->from)->send(grant_frame, in_s(30)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"KV-page transfer over UCX vs memcpy"};
  size_t mib = 256, page_kib = 64;
  int repeats = 5;
  std::string tls;
  bool lanes = false, by_address = false, spin = false;
  app.add_option("--mib", mib, "bytes moved per round, MiB")->check(CLI::Range(1, 8192));
  app.add_option("--page-kib", page_kib, "one put per page of this size, KiB")->check(CLI::Range(4, 65536));
  app.add_option("--repeats", repeats, "timed rounds (median reported)")->check(CLI::Range(1, 100));
  app.add_option("--tls", tls, "UCX transports (UCX_TLS syntax; default: UCX_TLS / UCX's choice)");
  app.add_flag("--spin", spin, "waits spin (yield) instead of sleeping on the UCX wakeup fd");
  app.add_flag("--lanes", lanes, "print the lanes UCX chose for the prefill side's endpoint");
  app.add_flag("--by-address", by_address,
               "puts on an endpoint made from the decode worker's UCX address (shared memory for a same-host "
               "peer) instead of the sockaddr connection");
  CLI11_PARSE(app, argc, argv);
  const size_t bytes = mib << 20, page = page_kib << 10;
  if (bytes % page != 0) {
    fmt::print(stderr, "ucx_put_bench: --mib must be a multiple of --page-kib\n");
    return 2;
  }
  const UcxOptions options{tls, spin};
  fmt::print("{}\n", ds::bench::format_host_load(ds::bench::read_host_load()));
  const double copy = memcpy_gbps(bytes, repeats);

  auto decode = UcxWorker::create(options);
  die(decode.status());
  die((*decode)->listen("127.0.0.1", 0));
  std::vector<char> region(bytes, 0);
  auto address = (*decode)->address();
  die(address.status());
  const std::string decode_address = *address;
  std::vector<double> rates, round_trips;
  double setup_s = 0;
  std::thread prefill([&] {
    std::vector<char> src(bytes, 7);
    const auto t_setup = Clock::now();
    auto w = UcxWorker::create(options);
    die(w.status());
    for (int r = 0; r < repeats + 1; ++r) {  // round 0: setup + warm-up (connection, page faults)
      const auto t_rt = Clock::now();
      auto ep = (*w)->connect_cached("127.0.0.1", (*decode)->listen_port());
      die(ep.status());
      die((*ep)->send(encode_control_message({ControlType::hello, 1, ""}, kSecret), in_s(30)));
      auto frame = (*w)->receive(in_s(30));
      die(frame.status());
      if (r == 0) setup_s = seconds_since(t_setup);
      if (r == 0 && lanes) ucp_ep_print_info((*ep)->handle(), stdout);  // after wireup: the real lanes
      if (r > 0) round_trips.push_back(seconds_since(t_rt));
      auto m = decode_control_message(*frame, kSecret);
      die(m.status());
      auto grant = decode_kv_grant(m->payload);
      die(grant.status());
      UcxEndpoint* put_ep = *ep;
      if (by_address) {
        // In a server the address comes over the authenticated control channel.
        auto e = (*w)->connect_address_cached("decode-by-address", decode_address);
        die(e.status());
        put_ep = *e;
        if (r == 0) {
          die(put_ep->flush(in_s(30)));  // wireup
          if (lanes) ucp_ep_print_info(put_ep->handle(), stdout);
        }
      }
      auto key = put_ep->unpack_remote_key(grant->regions.at(0).packed_rkey);
      die(key.status());
      const auto t0 = Clock::now();
      for (uint32_t id : grant->block_ids)
        die(put_ep->put(src.data() + size_t{id} * page, page,
                        grant->arrays.at(0).address + uint64_t{id} * page, *key));
      die(put_ep->flush(in_s(60)));
      if (r > 0) rates.push_back(static_cast<double>(bytes) / seconds_since(t0) / 1e9);
      die((*ep)->send(encode_control_message({ControlType::kv_written, 1, ""}, kSecret), in_s(30)));
    }
  });
  serve_decode(**decode, region, page, repeats + 1);
  prefill.join();
  const bool intact = std::all_of(region.begin(), region.end(), [](char c) { return c == 7; });
  const double put = median(rates);
  fmt::print("transports        {}{}{}\n",
             tls.empty() ? "UCX default (UCX_TLS unset or from the environment)" : tls,
             by_address ? "; puts on an endpoint by worker address" : "; puts on the sockaddr connection",
             spin ? "; waits spin" : "; waits sleep on the wakeup fd");
  fmt::print("memcpy            {:8.2f} GB/s (1 thread, median of {})\n", copy, repeats);
  fmt::print("UCX put + flush   {:8.2f} GB/s ({} MiB in {} KiB pages, median of {})  = {:.2f} x memcpy\n",
             put, mib, page_kib, repeats, put / copy);
  const double rt = median(round_trips);
  fmt::print("setup             {:8.2f} ms (new context + worker + connection + first round trip)\n",
             setup_s * 1e3);
  fmt::print("kept connection   {:8.3f} ms (one control round trip, median of {})  = setup / {:.0f}\n",
             rt * 1e3, repeats, setup_s / rt);
  fmt::print("bytes at the decode side {}\n", intact ? "intact" : "WRONG");
  return intact ? 0 : 1;
}
