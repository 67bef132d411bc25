#include "machine/host_load.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace ds::bench {

HostLoad read_host_load() {
  HostLoad h;
  h.n_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf", &h.load_1min, &h.load_5min) != 2) h.load_1min = h.load_5min = -1;
    std::fclose(f);
  }
  return h;
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

std::string format_host_load(const HostLoad& h) {
  if (h.load_1min < 0) return fmt::format("host load unknown on {} CPUs", h.n_cpus);
  std::string s =
      fmt::format("host load {:.1f} (1 min) / {:.1f} (5 min) on {} CPUs", h.load_1min, h.load_5min, h.n_cpus);
  if (h.n_cpus > 0 && h.load_1min > 1.2 * h.n_cpus) s += " -- contended: other processes share the cores";
  return s;
}

double cpu_share(double cpu_seconds, double wall_seconds, int n_threads) {
  if (wall_seconds <= 0 || n_threads <= 0) return 0;
  return cpu_seconds / (wall_seconds * n_threads);
}

}  // namespace ds::bench
