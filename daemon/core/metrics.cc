#include "core/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace sandgate::core {
namespace {

std::string Number(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v)))
    return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrCat(v);
}

std::string LabelText(const Labels& labels) {
  if (labels.empty()) return "";
  std::vector<std::string> parts;
  for (const auto& [k, v] : labels) {
    parts.push_back(absl::StrCat(
        k, "=\"", absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}), "\""));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

void Header(std::string* out, const std::string& name, const std::string& help, const char* type) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

void Counter::Add(const Labels& labels, double v) {
  absl::MutexLock lock(&mu_);
  values_[labels] += v;
}

void Counter::Declare(const Labels& labels) {
  absl::MutexLock lock(&mu_);
  values_.emplace(labels, 0);
}

void Counter::Render(std::string* out) {
  Header(out, name_, help_, "counter");
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, v] : values_)
    absl::StrAppend(out, name_, LabelText(labels), " ", Number(v), "\n");
}

void Histogram::Observe(double v) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (v <= bounds_[i]) ++buckets_[i];
  }
  ++count_;
  sum_ += v;
}

void Histogram::Render(std::string* out) {
  Header(out, name_, help_, "histogram");
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < bounds_.size(); ++i) {
    absl::StrAppend(out, name_, "_bucket{le=\"", Number(bounds_[i]), "\"} ", buckets_[i], "\n");
  }
  absl::StrAppend(out, name_, "_bucket{le=\"+Inf\"} ", count_, "\n", name_, "_sum ", Number(sum_),
                  "\n", name_, "_count ", count_, "\n");
}

Metrics::Metrics() {
  // Where core/ counts a failed cleanup (run_manager.cc).
  for (const char* where : {"sweep", "session_close"}) cleanup_failures.Declare({{"where", where}});
}

void Metrics::AddGauge(std::string name, std::string help, std::function<double()> read) {
  absl::MutexLock lock(&mu_);
  gauges_.push_back({std::move(name), std::move(help), std::move(read)});
}

std::string Metrics::Render() {
  std::string out;
  runs_finished.Render(&out);
  upstream_errors.Render(&out);
  cleanup_failures.Render(&out);
  rpcs.Render(&out);
  sandbox_create_seconds.Render(&out);
  run_seconds.Render(&out);
  absl::MutexLock lock(&mu_);
  for (const Gauge& g : gauges_) {
    Header(&out, g.name, g.help, "gauge");
    absl::StrAppend(&out, g.name, " ", Number(g.read()), "\n");
  }
  return out;
}

}  // namespace sandgate::core
