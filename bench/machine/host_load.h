// How busy the host was while a bench ran. On a shared machine other processes steal cores and
// memory bandwidth; every bench prints these so a reader can tell a slow kernel from a busy host.
#pragma once

#include <string>

namespace ds::bench {

struct HostLoad {
  double load_1min = -1;  // /proc/loadavg; -1 when unavailable
  double load_5min = -1;
  int n_cpus = 0;  // online CPUs
};

HostLoad read_host_load();

// CPU seconds (user + system) this process has used so far, all threads.
double process_cpu_seconds();

// "host load 10.4 (1 min) / 10.6 (5 min) on 2 CPUs"
std::string format_host_load(const HostLoad& load);

// Fraction of the available CPU time the process got between two samples:
// cpu_seconds / (wall_seconds * n_threads). Near 1: it ran undisturbed; well below: it waited.
double cpu_share(double cpu_seconds, double wall_seconds, int n_threads);

}  // namespace ds::bench
