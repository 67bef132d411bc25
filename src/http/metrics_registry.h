// A small Prometheus registry: counters, gauges and fixed-bucket histograms, rendered in the text
// exposition format 0.0.4 for GET /metrics.
//
// Lock-light: a series' value is atomics only (inc/set/observe never lock). Looking a labelled series up
// (`family.with({...})`) takes the family's shared lock, exclusive only the first time a label set is
// seen; hot paths keep the returned reference, which stays valid for the registry's lifetime.
// Registration errors (bad names, a name registered twice) are programming errors and abort.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ds::server {

class Counter {
 public:
  void inc(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }
  // For counters mirrored from a monotonic source (engine totals read at scrape time).
  void set_total(double total) { value_.store(total, std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `upper_bounds`: finite, strictly increasing; a +Inf bucket is implied.
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // For histograms mirrored from a source that buckets itself with the same bounds (KV tier
  // latencies read at scrape time): per-bucket counts (not cumulative, +Inf last) and the sum.
  void set_totals(const std::vector<uint64_t>& bucket_counts, double sum);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative_counts;  // [upper_bounds.size() + 1], the last is +Inf == count
    double sum = 0.0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // [upper_bounds_.size() + 1], not cumulative
  std::atomic<double> sum_{0.0};
};

enum class MetricType { counter, gauge, histogram };

class MetricFamilyBase {
 public:
  MetricFamilyBase(std::string name, std::string help, std::vector<std::string> label_names, MetricType type);
  virtual ~MetricFamilyBase() = default;
  const std::string& name() const { return name_; }
  virtual void render(std::string& out) const = 0;

 protected:
  void render_header(std::string& out) const;
  // `name{l1="v1",l2="v2"<extra>}` (no braces when there are no labels and no extra).
  std::string series_name(std::string_view suffix, const std::vector<std::string>& label_values,
                          std::string_view extra_label = {}) const;

  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  MetricType type_;
};

template <class T>
class MetricFamily : public MetricFamilyBase {
 public:
  using Factory = std::function<std::unique_ptr<T>()>;
  MetricFamily(std::string name, std::string help, std::vector<std::string> label_names, MetricType type,
               Factory factory)
      : MetricFamilyBase(std::move(name), std::move(help), std::move(label_names), type),
        factory_(std::move(factory)) {}

  // The series for these label values (one per label name, in order); created on first use.
  T& with(const std::vector<std::string>& label_values);
  void render(std::string& out) const override;

 private:
  Factory factory_;
  mutable std::shared_mutex mu_;                                   // guards series_ (the map, not values)
  std::map<std::vector<std::string>, std::unique_ptr<T>> series_;  // ordered: stable output
};

class MetricsRegistry {
 public:
  MetricFamily<Counter>& counter_family(std::string name, std::string help,
                                        std::vector<std::string> label_names);
  MetricFamily<Gauge>& gauge_family(std::string name, std::string help, std::vector<std::string> label_names);
  MetricFamily<Histogram>& histogram_family(std::string name, std::string help,
                                            std::vector<std::string> label_names,
                                            std::vector<double> upper_bounds);
  Counter& counter(std::string name, std::string help) { return counter_family(name, help, {}).with({}); }
  Gauge& gauge(std::string name, std::string help) { return gauge_family(name, help, {}).with({}); }
  Histogram& histogram(std::string name, std::string help, std::vector<double> upper_bounds) {
    return histogram_family(name, help, {}, std::move(upper_bounds)).with({});
  }

  // Runs before each render (e.g. copies engine stats into gauges). Called on the scraping thread.
  void add_collector(std::function<void()> collect);
  // Text format 0.0.4: # HELP, # TYPE, then the samples of each family, in registration order.
  std::string render() const;

 private:
  template <class T>
  MetricFamily<T>& add(std::unique_ptr<MetricFamily<T>> family);

  mutable std::mutex mu_;  // guards families_ and collectors_ (registration and render, not updates)
  std::vector<std::unique_ptr<MetricFamilyBase>> families_;
  std::vector<std::function<void()>> collectors_;
};

// Prometheus value text: integers without a fraction, "+Inf", "-Inf", "NaN", else shortest round-trip.
std::string format_metric_value(double v);
// Escapes a label value (backslash, double quote, newline).
std::string escape_label_value(std::string_view v);

}  // namespace ds::server

namespace ds::server {
extern template class MetricFamily<Counter>;
extern template class MetricFamily<Gauge>;
extern template class MetricFamily<Histogram>;
}  // namespace ds::server
