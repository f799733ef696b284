// Metrics: the daemon's counters, gauges and histograms, rendered in the Prometheus text
// format (server/http_server.h serves them on metrics_listen and http_listen).
//
//   metrics->runs_finished.Add({{"status", "SUCCEEDED"}});
//   metrics->sandbox_create_seconds.Observe(0.012);
//
// Thread safe. Gauges are read at render time from callbacks, so nothing can drift.
#ifndef SANDGATE_CORE_METRICS_H_
#define SANDGATE_CORE_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace sandgate::core {

using Labels = std::map<std::string, std::string>;

class Counter {
 public:
  Counter(std::string name, std::string help) : name_(std::move(name)), help_(std::move(help)) {}
  void Add(const Labels& labels = {}, double v = 1);
  // Starts a label set at 0, so that it has a sample (and rate() a start) before the first
  // event: for counters of rare events whose label values are known up front.
  void Declare(const Labels& labels);
  void Render(std::string* out);

 private:
  const std::string name_, help_;
  absl::Mutex mu_;
  std::map<Labels, double> values_ ABSL_GUARDED_BY(mu_);
};

class Histogram {
 public:
  Histogram(std::string name, std::string help, std::vector<double> bounds)
      : name_(std::move(name)),
        help_(std::move(help)),
        bounds_(std::move(bounds)),
        buckets_(bounds_.size(), 0) {}
  void Observe(double v);
  void Render(std::string* out);

 private:
  const std::string name_, help_;
  const std::vector<double> bounds_;
  absl::Mutex mu_;
  std::vector<uint64_t> buckets_ ABSL_GUARDED_BY(mu_);
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

class Metrics {
 public:
  Metrics();

  Counter runs_finished{"sandgate_runs_finished_total",
                        "Runs that reached a final status, by status."};
  Counter upstream_errors{"sandgate_upstream_errors_total",
                          "Failed upstream HTTP attempts (error statuses, connection failures, "
                          "timeouts), by upstream, endpoint, kind and whether they were retried."};
  Counter cleanup_failures{"sandgate_cleanup_failures_total",
                           "Sandboxes or journal records that could not be removed, by where."};
  Counter rpcs{"sandgate_rpcs_total", "RPCs answered, by method and code."};
  Histogram sandbox_create_seconds{"sandgate_sandbox_create_seconds",
                                   "Time to create a sandbox.",
                                   {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
  Histogram run_seconds{"sandgate_run_seconds",
                        "Run duration from start to finish.",
                        {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800}};

  // A gauge is a function read at render time.
  void AddGauge(std::string name, std::string help, std::function<double()> read);
  std::string Render();

 private:
  struct Gauge {
    std::string name, help;
    std::function<double()> read;
  };
  absl::Mutex mu_;
  std::vector<Gauge> gauges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_METRICS_H_
