// GrpcServer: sandgated's gRPC listener for a SandgateService — with the health service
// (overall and per service), reflection (v1 and v1alpha), the RPC metrics interceptor and
// the message size limits. It knows the service, not what implements the calls behind it
// (the composition root, app/, builds those).
//
//   SANDGATE_ASSIGN_OR_RETURN(auto server, GrpcServer::Start("unix:/run/s.sock", config.tls,
//                                                             tls_dir, &service, &metrics));
//   ... server->address() ...
//   server->SetServing(false);                 // drain: health says NOT_SERVING
//   server->Shutdown(absl::Seconds(2));        // ends open streams after the grace
//
// SetServing is thread safe; Shutdown (and the destructor) are called from one thread.
// `service` and `metrics` are not owned and outlive the server.
#ifndef SANDGATE_SERVER_GRPC_SERVER_H_
#define SANDGATE_SERVER_GRPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/config.h"
#include "core/metrics.h"
#include "server/callback_queue_waker.h"
#include "server/reflection_v1.h"
#include "server/service.h"
#include "server/tls_mirror.h"

namespace sandgate::server {

class GrpcServer {
 public:
  // `listen`: "unix:/path", "tcp:host:port" or "host:port" (port 0 picks one). With
  // tls.enabled() (TCP only) the listener speaks TLS only, serving the copies a TlsMirror
  // keeps in `tls_dir` (server/tls_mirror.h) of the files it re-reads every
  // tls.reload_interval_seconds; otherwise plaintext. Which combinations may start is
  // core::ValidateConfig's rule, checked before.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      const std::string& listen, const core::TlsConfig& tls, const std::string& tls_dir,
      SandgateService* service, core::Metrics* metrics, grpc::Service* images = nullptr);
  ~GrpcServer();  // Shutdown with no grace if not called

  // "unix:/path" or "tcp:host:port" with the port actually bound.
  const std::string& address() const { return address_; }
  // The health service's answer, overall and for the Sandgate service.
  void SetServing(bool serving);
  // Stops accepting calls, ends those still open after `grace`, and waits for them.
  // Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  GrpcServer() = default;

  std::unique_ptr<ReflectionV1> reflection_v1_;
  std::unique_ptr<TlsMirror> tls_mirror_;  // TLS only
  std::unique_ptr<grpc::Server> server_;
  // Keeps the reactors' completions prompt (server/callback_queue_waker.h); made before the
  // server starts, gone after it stops.
  std::unique_ptr<CallbackQueueWaker> waker_;
  std::string address_;
  bool shut_down_ = false;
};

// The credentials one replica calls another with: mutual TLS from the same `tls` section,
// the daemon's certificate and key as the client certificate (so it needs the clientAuth
// extended key usage, or none) and client_ca_file to verify the replica called. Read once;
// errors name the config key and the file.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> PeerChannelCredentials(
    const core::TlsConfig& tls);

// protobuf reports each request that does not parse (a string that is not UTF-8) on stderr
// in its own format; this sends it to the daemon's log (one JSON object per line) instead.
void InstallProtobufLogHandler();

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_GRPC_SERVER_H_
