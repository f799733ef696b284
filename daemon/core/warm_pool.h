// WarmPool: local sandboxes started ahead of demand, per sandbox shape, so that a
// CreateSession asking for a shape the daemon keeps ready gets a sandbox at once instead of
// waiting for bubblewrap.
//
// A shape is what decides how a sandbox is started (memory, process and workspace limits,
// network policy, isolation level, root file system): config.warm_pool lists the shapes and
// how many of each to keep ready. A shape's image is resolved to its digest each time a
// sandbox is made (an image not built yet is retried like a failed create), and a ready
// sandbox is handed only to a request whose spec has that very root: a request for image X
// never gets a host-root sandbox or one of image Y, nor the reverse.
// Files and setup commands are not part of a shape; the taker places them afterwards
// (core/sandbox_maker.h). A ready sandbox is made through the provider like any other, so it
// is journaled before it exists and a restarted daemon sweeps it; it holds one unit of the
// machine's sandbox budget (max_sandboxes) from before it is made until the session that took
// it ends. Each one is handed to exactly one caller and never comes back to the pool: the
// taker closes it when its session ends.
//
// One filler thread makes sandboxes one at a time, shape by shape, whenever a shape has fewer
// than its size ready, and only while the budget has room; when it has none, it looks again
// every 100 ms of the injected clock (a caller refused by the budget may Evict a ready one
// instead, so ready sandboxes never keep a caller of another shape out). A failed create is
// logged and retried after a second, so a broken host does not spin.
//
//   WarmPool pool(WarmPoolDeps{&config, provider, budget, clock});
//   pool.Start();
//   std::optional<WarmSandbox> w = pool.Take(ToSessionSpec("", req.sandbox(), config));
//   if (w) w->ConnectDecisions(on_decision);  // w->session is the caller's now
//   ...
//   pool.Drain();  // at shutdown: stops refilling, closes every ready sandbox
//
// Thread safe.
#ifndef SANDGATE_CORE_WARM_POOL_H_
#define SANDGATE_CORE_WARM_POOL_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "core/admission.h"
#include "core/config.h"
#include "core/images.h"
#include "sandbox/sandbox.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

struct WarmPoolDeps {
  const Config* config = nullptr;         // not owned; config->warm_pool lists the shapes
  sandbox::Provider* provider = nullptr;  // not owned; the local provider
  SandboxBudget* budget = nullptr;        // not owned; may be null (no machine budget)
  Clock* clock = nullptr;                 // not owned
  // Resolves shapes' images; not owned; may be null when no shape names an image.
  const ImageStore* images = nullptr;
};

// A ready sandbox, now one caller's. The budget unit it held is the caller's now: give it
// back when the sandbox ends.
struct WarmSandbox {
  // Where the sandbox's network decisions go: nowhere until it is taken (nothing has run in
  // it), then to the taker. Shared with the provider's callback.
  struct Relay {
    absl::Mutex mu;
    std::function<void(const sandbox::NetworkDecision&)> to ABSL_GUARDED_BY(mu);
  };
  // From now on its network decisions go to `to` (from the provider's threads).
  void ConnectDecisions(std::function<void(const sandbox::NetworkDecision&)> to);

  std::unique_ptr<sandbox::Session> session;  // its id is the taker's session id
  std::string key;                            // WarmPool::ShapeOf the spec it was made for
  std::string shape;         // its description, for events and logs ("memory_bytes …")
  absl::Time made;           // when it became ready
  absl::Duration make_took;  // what starting it took (the wait the caller was spared)
  std::shared_ptr<Relay> relay;
  std::string root_dir;  // its root file system (SessionSpec::root_dir; "" = the host's)
};

class WarmPool {
 public:
  explicit WarmPool(WarmPoolDeps deps);  // no I/O, no thread: Start
  ~WarmPool();                           // Drain

  // Starts the filler thread. Once.
  void Start();

  // The shape key of a sandbox spec: equal for two specs exactly when a sandbox made for one
  // serves the other. The spec's id and callback are not part of it.
  static std::string ShapeOf(const sandbox::SessionSpec& spec);

  // The provider its sandboxes come from.
  sandbox::Provider* provider() const { return deps_.provider; }

  // A ready sandbox of `spec`'s shape, taken out of the pool (the filler makes another), or
  // nullopt when no configured shape matches or none is ready now. Never blocks on a create.
  std::optional<WarmSandbox> Take(const sandbox::SessionSpec& spec);

  // Closes one ready sandbox (of the shape with the most ready) and gives its budget unit
  // back, for a caller that max_sandboxes refused. False when none is ready.
  bool Evict();

  // For an image being deleted (ImageStore::Remove): makes no sandbox on the root file system
  // `root_dir` until as many ResumeRoot calls, waits for one being made on it now, and closes
  // the ready ones on it (each gives its budget back). Returns how many it closed; blocks
  // while they close. Other roots' sandboxes stay and are made as before.
  size_t HoldRoot(const std::string& root_dir);
  void ResumeRoot(const std::string& root_dir);

  // Stops refilling, waits for a create in progress, and closes every ready sandbox (each
  // gives its budget back). Blocks until they are deleted. Idempotent; Take returns nullopt
  // afterwards.
  void Drain();

  // Ready sandboxes now, over all shapes.
  size_t ready();

 private:
  struct Shape {
    std::string description;    // for logs and events
    sandbox::SessionSpec spec;  // id and callback set per sandbox
    v1::SandboxSpec request;    // what spec stands for (its image resolved per sandbox)
    uint32_t size = 0;
    std::deque<WarmSandbox> ready;
    bool making = false;     // the filler is making one for this shape
    bool announced = false;  // "warm_pool.filled" logged since it was last below size
  };

  void FillLoop();
  // The spec of a new sandbox of a shape's `request`: its image resolved to the digest the
  // name has now.
  absl::StatusOr<sandbox::SessionSpec> SpecToMake(v1::SandboxSpec request) const;
  // The index of the shape most in need of a sandbox, or -1 when every one is full (or being
  // filled).
  int Needy() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes `w`'s sandbox and gives its budget back (outside mu_: closing blocks).
  void Discard(WarmSandbox w, const char* why);

  const WarmPoolDeps deps_;
  absl::Mutex mu_;
  // A deque: its elements never move, and a Shape (holding sandboxes) cannot be copied.
  std::deque<Shape> shapes_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Roots HoldRoot holds (how many times), and the root of the sandbox being made now.
  std::map<std::string, int> held_roots_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> making_root_ ABSL_GUARDED_BY(mu_);
  std::thread filler_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_WARM_POOL_H_
