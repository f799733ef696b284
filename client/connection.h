// How the CLI reaches the daemon: one address or several replicas' (--addr a,b), plaintext
// or TLS (--tls-ca, --tls-cert, --tls-key), as one gRPC channel.
//
//   SANDGATE_ASSIGN_OR_RETURN(std::vector<Address> addrs,
//                             ParseAddresses("tcp:10.0.0.1:7443,tcp:10.0.0.2:7443"));
//   SANDGATE_ASSIGN_OR_RETURN(auto channel, OpenChannel(addrs, {.ca_file = "ca.pem"}));
//
// Several addresses make one channel with the round_robin policy over them: calls spread
// over the replicas that answer, and one that is down is skipped. They must be IP addresses
// of one family (gRPC's ipv4:/ipv6: targets); a host name that resolves to several replicas
// works as a single address (the same policy spreads over what it resolves to).
//
// Plain functions; thread safe.
#ifndef SANDGATE_CLIENT_CONNECTION_H_
#define SANDGATE_CLIENT_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/address.h"
#include "common/tls.h"

namespace sandgate::cli {

// A comma-separated list of addresses in the daemon's syntax (common/address.h).
// INVALID_ARGUMENT naming the address that is wrong, or why several cannot go together.
absl::StatusOr<std::vector<Address>> ParseAddresses(absl::string_view text);

// What gRPC's channel takes for `addresses` (from ParseAddresses): "unix:PATH", "HOST:PORT",
// or "ipv4:A:P,B:P" / "ipv6:[A]:P,[B]:P" for several.
std::string ChannelTarget(const std::vector<Address>& addresses);

// A channel to `addresses`; TLS when any of `tls`'s files is set (then TCP only: the
// certificates are checked against the first address's host). Errors name the --tls-* flag
// and the file. Also keeps gRPC's own log lines ("E1202 … ssl_transport_security.cc …") off
// stderr, where the CLI says what failed in its own words, unless $GRPC_VERBOSITY or
// $GRPC_TRACE asks for them.
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const std::vector<Address>& addresses,
                                                           const TlsFiles& tls);

// How the last channel OpenChannel made reaches the daemon.
enum class ChannelKind { kUnix, kTcp, kTls };
ChannelKind LastChannelKind();

// Why the last TLS handshake of this process failed on this side, as gRPC logged it
// ("certificate verify failed"); empty when none did (or gRPC's logs are asked for).
std::string LastHandshakeError();

// gRPC reports a refused connection as "Socket closed" and no more; this adds the likely
// causes to an UNAVAILABLE `st` on a `kind` channel: for TLS the `handshake_error` when this
// side saw one, and the CA, the daemon's certificate, the client certificate, or a daemon
// that speaks plaintext; for plaintext TCP a daemon that wants TLS. Any other status is
// returned as it is.
absl::Status ExplainConnectionFailure(const absl::Status& st, ChannelKind kind,
                                      absl::string_view handshake_error = "");

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_CONNECTION_H_
