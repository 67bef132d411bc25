#include "http/metrics_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/assert.h"

namespace ds::server {
namespace {

bool valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool valid_label_name(std::string_view name) {
  if (name.empty() || name.starts_with("__") || name == "le") return false;
  return valid_metric_name(name) && name.find(':') == std::string_view::npos;
}

const char* type_name(MetricType t) {
  switch (t) {
    case MetricType::counter:
      return "counter";
    case MetricType::gauge:
      return "gauge";
    case MetricType::histogram:
      return "histogram";
  }
  return "untyped";
}

std::string escape_help(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(new std::atomic<uint64_t>[upper_bounds_.size() + 1]) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    DS_ASSERT(std::isfinite(upper_bounds_[i]), "histogram bucket bounds must be finite (+Inf is implied)");
    DS_ASSERT(i == 0 || upper_bounds_[i - 1] < upper_bounds_[i], "histogram bucket bounds must increase");
  }
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe(double value) {
  // Prometheus buckets are "less than or equal": the first bound >= value.
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

void Histogram::set_totals(const std::vector<uint64_t>& bucket_counts, double sum) {
  DS_ASSERT(bucket_counts.size() == upper_bounds_.size() + 1, "one count per bucket, +Inf last");
  for (size_t i = 0; i < bucket_counts.size(); ++i)
    counts_[i].store(bucket_counts[i], std::memory_order_relaxed);
  sum_.store(sum, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  s.cumulative_counts.resize(upper_bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative_counts[i] = running;
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

MetricFamilyBase::MetricFamilyBase(std::string name, std::string help, std::vector<std::string> label_names,
                                   MetricType type)
    : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)), type_(type) {
  DS_ASSERT(valid_metric_name(name_), "invalid Prometheus metric name");
  for (const std::string& l : label_names_) DS_ASSERT(valid_label_name(l), "invalid Prometheus label name");
}

void MetricFamilyBase::render_header(std::string& out) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, escape_help(help_), name_, type_name(type_));
}

std::string MetricFamilyBase::series_name(std::string_view suffix,
                                          const std::vector<std::string>& label_values,
                                          std::string_view extra_label) const {
  std::string s = name_;
  s += suffix;
  if (label_values.empty() && extra_label.empty()) return s;
  s += '{';
  for (size_t i = 0; i < label_values.size(); ++i) {
    if (i > 0) s += ',';
    s += fmt::format("{}=\"{}\"", label_names_[i], escape_label_value(label_values[i]));
  }
  if (!extra_label.empty()) {
    if (!label_values.empty()) s += ',';
    s += extra_label;
  }
  s += '}';
  return s;
}

template <class T>
T& MetricFamily<T>::with(const std::vector<std::string>& label_values) {
  DS_ASSERT(label_values.size() == label_names_.size(), "label value count differs from the family's labels");
  {
    std::shared_lock lock(mu_);
    auto it = series_.find(label_values);
    if (it != series_.end()) return *it->second;
  }
  std::unique_lock lock(mu_);
  auto [it, inserted] = series_.try_emplace(label_values, nullptr);
  if (inserted) it->second = factory_();
  return *it->second;
}

template <class T>
void MetricFamily<T>::render(std::string& out) const {
  render_header(out);
  std::shared_lock lock(mu_);
  for (const auto& [labels, series] : series_) {
    if constexpr (std::is_same_v<T, Histogram>) {
      const Histogram::Snapshot s = series->snapshot();
      for (size_t i = 0; i < s.cumulative_counts.size(); ++i) {
        const std::string le = i < s.upper_bounds.size() ? format_metric_value(s.upper_bounds[i]) : "+Inf";
        out += fmt::format("{} {}\n", series_name("_bucket", labels, fmt::format("le=\"{}\"", le)),
                           s.cumulative_counts[i]);
      }
      out += fmt::format("{} {}\n", series_name("_sum", labels), format_metric_value(s.sum));
      out += fmt::format("{} {}\n", series_name("_count", labels), s.cumulative_counts.back());
    } else {
      out += fmt::format("{} {}\n", series_name("", labels), format_metric_value(series->value()));
    }
  }
}

template class MetricFamily<Counter>;
template class MetricFamily<Gauge>;
template class MetricFamily<Histogram>;

template <class T>
MetricFamily<T>& MetricsRegistry::add(std::unique_ptr<MetricFamily<T>> family) {
  std::lock_guard lock(mu_);
  for (const auto& f : families_) DS_ASSERT(f->name() != family->name(), "metric family registered twice");
  MetricFamily<T>& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

MetricFamily<Counter>& MetricsRegistry::counter_family(std::string name, std::string help,
                                                       std::vector<std::string> label_names) {
  return add(std::make_unique<MetricFamily<Counter>>(std::move(name), std::move(help), std::move(label_names),
                                                     MetricType::counter,
                                                     [] { return std::make_unique<Counter>(); }));
}

MetricFamily<Gauge>& MetricsRegistry::gauge_family(std::string name, std::string help,
                                                   std::vector<std::string> label_names) {
  return add(std::make_unique<MetricFamily<Gauge>>(std::move(name), std::move(help), std::move(label_names),
                                                   MetricType::gauge,
                                                   [] { return std::make_unique<Gauge>(); }));
}

MetricFamily<Histogram>& MetricsRegistry::histogram_family(std::string name, std::string help,
                                                           std::vector<std::string> label_names,
                                                           std::vector<double> upper_bounds) {
  const Histogram validate_bounds(upper_bounds);  // aborts on bad bounds now, not at the first observation
  return add(std::make_unique<MetricFamily<Histogram>>(
      std::move(name), std::move(help), std::move(label_names), MetricType::histogram,
      [bounds = std::move(upper_bounds)] { return std::make_unique<Histogram>(bounds); }));
}

void MetricsRegistry::add_collector(std::function<void()> collect) {
  std::lock_guard lock(mu_);
  collectors_.push_back(std::move(collect));
}

std::string MetricsRegistry::render() const {
  std::lock_guard lock(mu_);
  for (const auto& collect : collectors_) collect();
  std::string out;
  for (const auto& f : families_) f->render(out);
  return out;
}

}  // namespace ds::server
