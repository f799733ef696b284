#include "core/warm_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {
namespace {

// How often the filler looks again when the budget had no room.
constexpr absl::Duration kBudgetRetry = absl::Milliseconds(100);
// How long it waits after a failed create before the next one.
constexpr absl::Duration kFailureBackoff = absl::Seconds(1);

const char* ModeName(sandbox::NetworkMode m) {
  switch (m) {
    case sandbox::NetworkMode::kRestricted:
      return "restricted";
    case sandbox::NetworkMode::kEnabled:
      return "enabled";
    case sandbox::NetworkMode::kDisabled:
      break;
  }
  return "disabled";
}

// The request a configured shape stands for, so that it gets exactly the defaults a
// CreateSession leaving the same fields 0 gets (ToSessionSpec).
v1::SandboxSpec ShapeRequest(const WarmPoolShape& s, const Config& cfg) {
  v1::SandboxSpec spec;
  spec.set_isolation(s.isolation.empty() ? cfg.isolation : s.isolation);
  spec.set_memory_bytes(s.memory_bytes);
  spec.set_max_processes(s.max_processes);
  spec.set_workspace_bytes(s.workspace_bytes);
  if (s.network_mode == "restricted") {
    spec.mutable_network()->set_mode(v1::NetworkPolicy::MODE_RESTRICTED);
  } else if (s.network_mode == "enabled") {
    spec.mutable_network()->set_mode(v1::NetworkPolicy::MODE_ENABLED);
  }
  for (const std::string& d : s.allowed_domains) spec.mutable_network()->add_allowed_domains(d);
  spec.set_image(s.image);
  return spec;
}

}  // namespace

std::string WarmPool::ShapeOf(const sandbox::SessionSpec& s) {
  std::vector<std::string> env;
  for (const auto& [k, v] : s.env) env.push_back(absl::StrCat(k, "=", v));
  std::vector<std::string> ports;
  for (uint16_t p : s.network.allowed_ports) ports.push_back(absl::StrCat(p));
  // Every field of the spec but id and callback; \x1f never occurs in a valid field.
  return absl::StrJoin(
      {absl::StrCat(s.memory_bytes), absl::StrCat(s.max_processes), absl::StrCat(s.workspace_bytes),
       absl::StrCat(s.workspace_inodes), std::string(ModeName(s.network.mode)),
       absl::StrJoin(s.network.allowed_domains, ","), absl::StrJoin(ports, ","),
       absl::StrCat(s.network.max_connections), absl::StrCat(s.network.max_bytes),
       absl::StrJoin(env, "\x1e"), absl::StrCat(s.cpu_seconds_per_process),
       absl::StrCat(s.cpu_millicores), std::string(sandbox::IsolationName(s.isolation)),
       s.root_dir},
      "\x1f");
}

WarmPool::WarmPool(WarmPoolDeps deps) : deps_(std::move(deps)) {
  absl::MutexLock lock(&mu_);
  for (const WarmPoolShape& configured : deps_.config->warm_pool) {
    Shape& shape = shapes_.emplace_back();
    shape.request = ShapeRequest(configured, *deps_.config);
    shape.spec = ToSessionSpec("", shape.request, *deps_.config);
    shape.description = absl::StrCat(
        "memory_bytes ", shape.spec.memory_bytes, ", max_processes ", shape.spec.max_processes,
        ", workspace_bytes ", shape.spec.workspace_bytes, ", isolation ",
        sandbox::IsolationName(shape.spec.isolation), ", network ",
        ModeName(shape.spec.network.mode),
        shape.spec.network.allowed_domains.empty()
            ? ""
            : absl::StrCat(" (", absl::StrJoin(shape.spec.network.allowed_domains, ", "), ")"),
        configured.image.empty() ? "" : absl::StrCat(", image ", configured.image));
    shape.size = configured.size;
  }
}

WarmPool::~WarmPool() { Drain(); }

void WarmPool::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (shapes_.empty() || stop_) return;
  }
  filler_ = std::thread([this] { FillLoop(); });
}

int WarmPool::Needy() {
  int best = -1;
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const Shape& s = shapes_[i];
    if (s.making || s.ready.size() >= s.size) continue;
    // The emptiest first, relative to its size, so one large shape does not starve the rest.
    if (best < 0 || s.ready.size() * shapes_[best].size < shapes_[best].ready.size() * s.size) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

void WarmPool::FillLoop() {
  // Held except while a sandbox is being made.
  mu_.Lock();
  for (;;) {
    auto needed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || Needy() >= 0; };
    while (!needed()) {
      // Woken when a Take (or Evict) leaves a shape below its size: the condition is
      // evaluated again whenever mu_ is released.
      deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&needed), absl::InfiniteFuture());
    }
    if (stop_) break;
    if (deps_.budget != nullptr && !deps_.budget->TryTake()) {
      deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&stop_),
                                     deps_.clock->Now() + kBudgetRetry);
      continue;
    }
    const int index = Needy();
    shapes_[index].making = true;
    const v1::SandboxSpec request = shapes_[index].request;
    auto relay = std::make_shared<WarmSandbox::Relay>();
    const absl::Time start = deps_.clock->Now();
    mu_.Unlock();
    absl::StatusOr<sandbox::SessionSpec> spec = SpecToMake(request);
    std::string key;
    absl::StatusOr<std::unique_ptr<sandbox::Session>> made = errors::Internal("not made");
    mu_.Lock();
    if (spec.ok() && held_roots_.count(spec->root_dir) != 0) {
      spec = errors::FailedPrecondition(
          absl::StrCat("the image ", request.image(), " is being deleted"));
    }
    if (spec.ok()) making_root_ = spec->root_dir;  // HoldRoot waits for it
    mu_.Unlock();
    if (!spec.ok()) {
      made = spec.status();  // the shape's image is not (or no longer) ready
    } else {
      key = ShapeOf(*spec);
      spec->id = absl::StrCat("s", RandomHex(8));  // the session id of whoever takes it
      spec->on_network_decision = [relay](const sandbox::NetworkDecision& d) {
        absl::MutexLock l(&relay->mu);
        if (relay->to) relay->to(d);
      };
      // No cancel token: Drain waits for this create rather than leave a half-made sandbox.
      made = deps_.provider->Create(*spec, nullptr);
    }
    mu_.Lock();
    making_root_.reset();
    Shape& s = shapes_[index];
    s.making = false;
    if (!made.ok()) {
      if (deps_.budget != nullptr) deps_.budget->Give();
      log::Warning("warm_pool.create_failed",
                   {{"shape", s.description}, {"error", made.status().ToString()}});
      deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&stop_),
                                     deps_.clock->Now() + kFailureBackoff);
      continue;
    }
    const absl::Time now = deps_.clock->Now();
    s.ready.push_back(WarmSandbox{std::move(*made), std::move(key), s.description, now, now - start,
                                  std::move(relay), spec->root_dir});
    if (s.ready.size() >= s.size && !s.announced) {
      s.announced = true;
      log::Info("warm_pool.filled", {{"shape", s.description}, {"ready", s.ready.size()}});
    }
  }
  mu_.Unlock();
}

absl::StatusOr<sandbox::SessionSpec> WarmPool::SpecToMake(v1::SandboxSpec request) const {
  SANDGATE_RETURN_IF_ERROR(ResolveImage(&request, "local", deps_.images));
  return ToSessionSpec("", request, *deps_.config);
}

void WarmSandbox::ConnectDecisions(std::function<void(const sandbox::NetworkDecision&)> to) {
  absl::MutexLock l(&relay->mu);
  relay->to = std::move(to);
}

std::optional<WarmSandbox> WarmPool::Take(const sandbox::SessionSpec& spec) {
  const std::string key = ShapeOf(spec);
  absl::MutexLock lock(&mu_);
  if (stop_) return std::nullopt;
  for (Shape& s : shapes_) {
    // Oldest first: every ready one is equally fresh (nothing has run in it). Matched one by
    // one: sandboxes of a shape with an image have the root its name had when each was made.
    for (auto it = s.ready.begin(); it != s.ready.end(); ++it) {
      if (it->key != key) continue;
      WarmSandbox taken = std::move(*it);
      s.ready.erase(it);
      s.announced = false;
      return taken;
    }
  }
  return std::nullopt;
}

bool WarmPool::Evict() {
  WarmSandbox victim;
  {
    absl::MutexLock lock(&mu_);
    Shape* most = nullptr;
    for (Shape& s : shapes_) {
      if (!s.ready.empty() && (most == nullptr || s.ready.size() > most->ready.size())) most = &s;
    }
    if (most == nullptr) return false;
    victim = std::move(most->ready.back());
    most->ready.pop_back();
    most->announced = false;
  }
  Discard(std::move(victim), "evicted: max_sandboxes was reached by a request of another shape");
  return true;
}

void WarmPool::Discard(WarmSandbox w, const char* why) {
  const std::string id = w.session->id();
  absl::Status closed = w.session->Close();
  w.session.reset();
  if (deps_.budget != nullptr) deps_.budget->Give();
  if (!closed.ok()) {
    log::Error("warm_pool.close_failed", {{"sandbox", id}, {"error", closed.ToString()}});
  } else {
    log::Info("warm_pool.closed", {{"sandbox", id}, {"why", why}});
  }
}

size_t WarmPool::HoldRoot(const std::string& root_dir) {
  std::vector<WarmSandbox> doomed;
  {
    absl::MutexLock lock(&mu_);
    ++held_roots_[root_dir];
    // One being made on it now would be ready after this returned.
    auto not_making = [this, &root_dir]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return making_root_ != root_dir; };
    mu_.Await(absl::Condition(&not_making));
    for (Shape& s : shapes_) {
      for (auto it = s.ready.begin(); it != s.ready.end();) {
        if (it->root_dir != root_dir) {
          ++it;
          continue;
        }
        doomed.push_back(std::move(*it));
        it = s.ready.erase(it);
        s.announced = false;
      }
    }
  }
  for (WarmSandbox& w : doomed) Discard(std::move(w), "its image is being deleted");
  return doomed.size();
}

void WarmPool::ResumeRoot(const std::string& root_dir) {
  absl::MutexLock lock(&mu_);
  auto it = held_roots_.find(root_dir);
  if (it != held_roots_.end() && --it->second <= 0) held_roots_.erase(it);
}

void WarmPool::Drain() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (filler_.joinable()) filler_.join();
  std::vector<WarmSandbox> all;
  {
    absl::MutexLock lock(&mu_);
    for (Shape& s : shapes_) {
      for (WarmSandbox& w : s.ready) all.push_back(std::move(w));
      s.ready.clear();
    }
  }
  for (WarmSandbox& w : all) Discard(std::move(w), "the daemon is shutting down");
}

size_t WarmPool::ready() {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const Shape& s : shapes_) n += s.ready.size();
  return n;
}

}  // namespace sandgate::core
