#include "http/test_prometheus_parser.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

namespace ds::server::testing {
namespace {

bool name_char(char c, bool first) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
  return alpha || (!first && c >= '0' && c <= '9');
}

bool parse_value(std::string_view s, double& out) {
  if (s == "+Inf") {
    out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == "-Inf") {
    out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == "NaN") {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (s.empty()) return false;
  std::string tmp(s);
  char* end = nullptr;
  out = std::strtod(tmp.c_str(), &end);
  return end == tmp.c_str() + tmp.size();
}

// The family a sample belongs to: histogram samples carry _bucket/_sum/_count suffixes.
std::string family_of(const std::string& name, const std::map<std::string, std::string>& types) {
  if (types.count(name)) return name;
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      const std::string base = name.substr(0, name.size() - suffix.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return {};
}

}  // namespace

double PromParse::value(const std::string& name, const std::map<std::string, std::string>& labels) const {
  for (const PromSample& s : samples) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

PromParse parse_prometheus_text(std::string_view text) {
  PromParse p;
  std::set<std::string> helped;
  std::set<std::string> series_seen;
  size_t pos = 0;
  int line_no = 0;
  auto error = [&](const std::string& what) {
    p.errors.push_back("line " + std::to_string(line_no) + ": " + what);
  };
  if (!text.empty() && text.back() != '\n') p.errors.push_back("text does not end with a newline");
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
      const std::string_view rest = line.substr(7);
      const size_t sp = rest.find(' ');
      if (sp == std::string_view::npos) {
        error("HELP/TYPE without text");
        continue;
      }
      const std::string name(rest.substr(0, sp));
      if (line.starts_with("# HELP ")) {
        if (!helped.insert(name).second) error("second HELP for " + name);
      } else {
        const std::string type(rest.substr(sp + 1));
        if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
            type != "untyped") {
          error("unknown type " + type);
        }
        if (p.types.count(name)) error("second TYPE for " + name);
        p.types[name] = type;
      }
      continue;
    }
    if (line.starts_with("#")) continue;
    PromSample s;
    size_t i = 0;
    while (i < line.size() && name_char(line[i], i == 0)) ++i;
    if (i == 0) {
      error("sample without a metric name");
      continue;
    }
    s.name = std::string(line.substr(0, i));
    bool ok = true;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (ok && i < line.size() && line[i] != '}') {
        const size_t start = i;
        while (i < line.size() && name_char(line[i], i == start) && line[i] != ':') ++i;
        const std::string label(line.substr(start, i - start));
        if (label.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
          ok = false;
          break;
        }
        i += 2;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            if (i + 1 >= line.size()) {
              ok = false;
              break;
            }
            const char e = line[i + 1];
            if (e == 'n') {
              value += '\n';
            } else if (e == '\\' || e == '"') {
              value += e;
            } else {
              ok = false;
              break;
            }
            i += 2;
          } else {
            value += line[i++];
          }
        }
        if (!ok || i >= line.size()) {
          ok = false;
          break;
        }
        ++i;  // closing quote
        if (s.labels.count(label)) ok = false;
        s.labels[label] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (!ok || i >= line.size() || line[i] != '}') {
        error("malformed labels in: " + std::string(line));
        continue;
      }
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      error("no space before the value in: " + std::string(line));
      continue;
    }
    const std::string_view value_text = line.substr(i + 1);
    if (!parse_value(value_text, s.value)) {
      error("bad value '" + std::string(value_text) + "'");
      continue;
    }
    const std::string family = family_of(s.name, p.types);
    if (family.empty()) error("sample " + s.name + " before its # TYPE");
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "|" + k + "=" + v;
    if (!series_seen.insert(key).second) error("duplicate series " + key);
    p.samples.push_back(std::move(s));
  }

  // Histogram invariants, per series (labels without le).
  for (const auto& [family, type] : p.types) {
    if (type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    for (const PromSample& s : p.samples) {
      if (s.name != family + "_bucket") continue;
      auto labels = s.labels;
      auto le = labels.find("le");
      if (le == labels.end()) {
        p.errors.push_back(family + ": bucket without le");
        continue;
      }
      double bound = 0;
      if (!parse_value(le->second, bound)) p.errors.push_back(family + ": bad le " + le->second);
      labels.erase(le);
      buckets[labels].emplace_back(bound, s.value);
    }
    for (const auto& [labels, list] : buckets) {
      for (size_t k = 1; k < list.size(); ++k) {
        if (!(list[k].first > list[k - 1].first)) p.errors.push_back(family + ": le not increasing");
        if (list[k].second < list[k - 1].second) p.errors.push_back(family + ": buckets not cumulative");
      }
      if (list.empty() || !std::isinf(list.back().first)) {
        p.errors.push_back(family + ": no +Inf bucket");
        continue;
      }
      if (p.value(family + "_count", labels) != list.back().second) {
        p.errors.push_back(family + ": +Inf bucket differs from _count");
      }
      if (std::isnan(p.value(family + "_sum", labels))) p.errors.push_back(family + ": no _sum");
    }
  }
  return p;
}

}  // namespace ds::server::testing
