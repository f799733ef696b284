#include "server/grpc_server.h"

#include <google/protobuf/stubs/logging.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/address.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/tls_credentials.h"
#include "common/utf8.h"
#include "grpc/health/v1/health.pb.h"
#include "sandgate/v1/images.grpc.pb.h"
#include "server/rpc_observer.h"

namespace sandgate::server {
namespace {

// Inputs are up to 64 MiB per run and travel in the request: the limit is raised on purpose,
// with room for the envelope.
constexpr int kMaxMessageBytes = 80 << 20;

void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  nlohmann::json fields = {{"message", EscapeInvalidUtf8(message)},
                           {"at", absl::StrCat(file, ":", line)}};
  if (level >= google::protobuf::LOGLEVEL_ERROR) {
    log::Warning("protobuf", fields);
  } else {
    log::Info("protobuf", fields);
  }
}

// TLS through a certificate provider that re-reads the files (the mirror's copies), so a
// renewed certificate is served to new connections without a restart (open ones keep theirs).
std::shared_ptr<grpc::ServerCredentials> TlsListenerCredentials(const core::TlsConfig& tls) {
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.client_ca_file, tls.reload_interval_seconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!tls.client_ca_file.empty()) options.watch_root_certs();
  options.set_cert_request_type(
      tls.require_client_cert      ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
      : tls.client_ca_file.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                   : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace

void InstallProtobufLogHandler() { google::protobuf::SetLogHandler(&ProtobufLog); }

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> PeerChannelCredentials(
    const core::TlsConfig& tls) {
  return TlsChannelCredentials({tls.cert_file, tls.key_file, tls.client_ca_file},
                               {"tls.cert_file", "tls.key_file", "tls.client_ca_file"});
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const std::string& listen_address, const core::TlsConfig& tls, const std::string& tls_dir,
    SandgateService* service, core::Metrics* metrics, grpc::Service* images) {
  std::unique_ptr<GrpcServer> s(new GrpcServer());
  s->waker_ = std::make_unique<CallbackQueueWaker>(Clock::Real());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();  // v1alpha
  // gRPC's health service has no protobuf descriptor of its own; naming one of health.proto's
  // types links ours into the binary (and so into the pool reflection answers from).
  const std::string health_service =
      grpc::health::v1::HealthCheckRequest::descriptor()->file()->service(0)->full_name();
  s->reflection_v1_ = std::make_unique<ReflectionV1>(std::vector<std::string>{
      v1::Sandgate::service_full_name(), v1::Images::service_full_name(), health_service,
      grpc::reflection::v1::ServerReflection::service_full_name(),
      "grpc.reflection.v1alpha.ServerReflection"});
  grpc::ServerBuilder builder;
  SANDGATE_ASSIGN_OR_RETURN(Address listen, ParseAddress(listen_address));
  int port = 0;
  if (listen.unix_socket) {
    unlink(listen.path.c_str());  // a socket left by a killed daemon
    builder.AddListeningPort(listen.GrpcTarget(), grpc::InsecureServerCredentials());
  } else if (tls.enabled()) {
    SANDGATE_ASSIGN_OR_RETURN(s->tls_mirror_, TlsMirror::Start(tls, tls_dir, Clock::Real()));
    builder.AddListeningPort(listen.GrpcTarget(), TlsListenerCredentials(s->tls_mirror_->served()),
                             &port);
  } else {
    builder.AddListeningPort(listen.GrpcTarget(), grpc::InsecureServerCredentials(), &port);
  }
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(service);
  if (images != nullptr) builder.RegisterService(images);
  builder.RegisterService(s->reflection_v1_.get());
  builder.experimental().SetInterceptorCreators(RpcObserver::Factories(metrics));
  s->server_ = builder.BuildAndStart();
  if (!s->server_) return errors::Unavailable(absl::StrCat("cannot listen on ", listen_address));
  if (listen.unix_socket) {
    // With no tenants the socket's permissions are the access control: owner only.
    chmod(listen.path.c_str(), 0600);
  } else {
    listen.port = port;
  }
  s->address_ = listen.ToString();
  // Per service as well as overall: clients (and load balancers) ask for the service they
  // use. Drain sets them all NOT_SERVING.
  s->SetServing(true);
  return s;
}

GrpcServer::~GrpcServer() { Shutdown(absl::ZeroDuration()); }

void GrpcServer::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (serving) {
    health->SetServingStatus(true);
    health->SetServingStatus(v1::Sandgate::service_full_name(), true);
  } else {
    health->SetServingStatus(false);
  }
}

void GrpcServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
}

}  // namespace sandgate::server
