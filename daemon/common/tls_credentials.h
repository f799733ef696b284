// The gRPC channel credentials of a TLS client: the CLI talking to a `tcp:` daemon, and one
// replica calling another (mutual TLS, with the daemon's own certificate as its client
// certificate: see server/grpc_server.h, PeerChannelCredentials).
//
//   SANDGATE_ASSIGN_OR_RETURN(auto creds, TlsChannelCredentials(files, names));
//   auto channel = grpc::CreateCustomChannel("127.0.0.1:7443", creds, args);
//
// The files are read once, when called (a replica that wants a renewed certificate builds a
// new channel). Thread safe.
#ifndef SANDGATE_COMMON_TLS_CREDENTIALS_H_
#define SANDGATE_COMMON_TLS_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>

#include <memory>

#include "absl/status/statusor.h"
#include "common/tls.h"

namespace sandgate {

// Verifies the server against files.ca_file (gRPC's default roots when empty) and the name
// the channel is made for; presents files.cert_file and key_file when set. Errors are
// ReadTlsFiles's.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsChannelCredentials(
    const TlsFiles& files, const TlsFileNames& names);

}  // namespace sandgate

#endif  // SANDGATE_COMMON_TLS_CREDENTIALS_H_
