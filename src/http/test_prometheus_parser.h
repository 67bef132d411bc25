// Test-only: a strict parser for the Prometheus text format 0.0.4, independent of the renderer, so a
// malformed /metrics fails the test with the line that broke it. It checks what scrapers rely on:
// HELP/TYPE before a family's samples, valid names, quoted and escaped label values, float values, no
// duplicate series, and histogram buckets that are cumulative, end with +Inf and match _count.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ds::server::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromParse {
  std::vector<PromSample> samples;
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram
  std::vector<std::string> errors;           // empty: well-formed

  // Value of the sample with this name and exactly these labels; NaN when absent.
  double value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const;
};

PromParse parse_prometheus_text(std::string_view text);

}  // namespace ds::server::testing
