// Daemon: the composition root. sandgated assembled from its config — store, providers,
// agents, session and run managers, the API, the gRPC server — with the start and drain
// sequences. The only place that names the concrete implementations (server/ knows the
// service, core/ the interfaces).
//
//   SANDGATE_ASSIGN_OR_RETURN(auto d, Daemon::Create(config));
//   SANDGATE_RETURN_IF_ERROR(d->Start());   // sweeps leftovers, then serves
//   ... on SIGTERM:
//   d->Drain();                             // refuse, cancel, clean up, end streams, stop
//
// Start and Drain are called from one thread (main); the rest is thread safe.
#ifndef SANDGATE_APP_DAEMON_H_
#define SANDGATE_APP_DAEMON_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/config.h"

namespace sandgate::app {

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(core::Config config);
  ~Daemon();

  // Recovers (sweeps the journal, fails interrupted runs), then listens.
  absl::Status Start();
  // "unix:/path" or "tcp:host:port" with the port actually bound.
  std::string address() const;
  // Refuses new runs, cancels active ones and waits for their terminal events, ends every
  // stream, stops the server. Idempotent.
  void Drain();

 private:
  struct Parts;
  explicit Daemon(std::unique_ptr<Parts> parts);
  static absl::Status StartHttp(Parts& p);  // metrics_listen, http_listen
  std::unique_ptr<Parts> parts_;
};

}  // namespace sandgate::app

#endif  // SANDGATE_APP_DAEMON_H_
