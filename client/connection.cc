#include "client/connection.h"

#include <arpa/inet.h>
#include <grpc/support/log.h>

#include <atomic>
#include <cstdlib>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/tls_credentials.h"

namespace sandgate::cli {
namespace {

// Must match the daemon's limit (server/grpc_server.cc): inputs travel in the request.
constexpr int kMaxMessageBytes = 80 << 20;

// The address family of an IP literal host (AF_INET, AF_INET6 for "[::1]"), or 0 for a name.
int Family(const std::string& host) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, host.c_str(), buf) == 1) return AF_INET;
  absl::string_view inner = host;
  if (absl::ConsumePrefix(&inner, "[") && absl::ConsumeSuffix(&inner, "]") &&
      inet_pton(AF_INET6, std::string(inner).c_str(), buf) == 1) {
    return AF_INET6;
  }
  return 0;
}

std::atomic<ChannelKind> last_channel_kind{ChannelKind::kUnix};

absl::Mutex handshake_mu;
std::string* const last_handshake_error ABSL_PT_GUARDED_BY(handshake_mu) = new std::string;

// gRPC's lines are dropped, but the reason a TLS handshake failed ("Handshake failed with
// fatal error SSL_ERROR_SSL: error:0A000086:SSL routines::certificate verify failed.") is
// kept for the CLI's own message: gRPC's status says only "Socket closed".
void KeepHandshakeError(gpr_log_func_args* args) {
  if (args->severity != GPR_LOG_SEVERITY_ERROR || args->message == nullptr) return;
  absl::string_view message = args->message;
  if (!absl::StrContains(message, "Handshake failed")) return;
  absl::string_view reason = absl::StripSuffix(absl::StripAsciiWhitespace(message), ".");
  if (size_t colon = reason.rfind(':'); colon != absl::string_view::npos) {
    reason = absl::StripAsciiWhitespace(reason.substr(colon + 1));
  }
  absl::MutexLock lock(&handshake_mu);
  *last_handshake_error = std::string(reason);
}

// The CLI reports every failure itself, once; gRPC's log lines would say it again in its
// own format. Left as they are when the user asks gRPC for them.
void QuietGrpcLogging() {
  if (std::getenv("GRPC_VERBOSITY") == nullptr && std::getenv("GRPC_TRACE") == nullptr) {
    gpr_set_log_function(KeepHandshakeError);
  }
}

}  // namespace

ChannelKind LastChannelKind() { return last_channel_kind.load(); }

std::string LastHandshakeError() {
  absl::MutexLock lock(&handshake_mu);
  return *last_handshake_error;
}

absl::Status ExplainConnectionFailure(const absl::Status& st, ChannelKind kind,
                                      absl::string_view handshake_error) {
  if (st.code() != absl::StatusCode::kUnavailable) return st;
  const absl::string_view msg = st.message();
  // Nothing listens there: no TLS question to ask.
  if (absl::StrContains(msg, "Connection refused") || absl::StrContains(msg, "No such file")) {
    return st;
  }
  if (kind == ChannelKind::kTls) {
    return absl::UnavailableError(absl::StrCat(
        msg, "; the TLS connection failed",
        handshake_error.empty() ? "" : absl::StrCat(" (", handshake_error, ")"),
        ": check that --tls-ca (SANDGATE_TLS_CA) is the CA that "
        "signed the daemon's certificate and that the certificate names the host of --addr, "
        "that the daemon serves TLS on this port (not plaintext), and, if it asks for client "
        "certificates, that --tls-cert and --tls-key are a pair its client CA signed"));
  }
  if (kind == ChannelKind::kTcp &&
      (absl::StrContains(msg, "Socket closed") || absl::StrContains(msg, "Connection reset") ||
       absl::StrContains(msg, "handshake"))) {
    return absl::UnavailableError(absl::StrCat(
        msg,
        "; the daemon closed a plaintext connection: if it serves TLS on this port, pass "
        "--tls-ca (SANDGATE_TLS_CA) with the CA that signed its certificate"));
  }
  return st;
}

absl::StatusOr<std::vector<Address>> ParseAddresses(absl::string_view text) {
  std::vector<Address> addresses;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    SANDGATE_ASSIGN_OR_RETURN(Address a, ParseAddress(absl::StripAsciiWhitespace(part)));
    addresses.push_back(std::move(a));
  }
  if (addresses.size() == 1) return addresses;
  const int family = addresses[0].unix_socket ? 0 : Family(addresses[0].host);
  for (const Address& a : addresses) {
    if (a.unix_socket || Family(a.host) == 0 || Family(a.host) != family) {
      return errors::InvalidArgument(absl::StrCat(
          "several addresses must all be tcp: IPv4 addresses, or all [IPv6] ones, got '",
          a.ToString(), "' (a host name that resolves to several replicas works alone)"));
    }
  }
  return addresses;
}

std::string ChannelTarget(const std::vector<Address>& addresses) {
  if (addresses.size() == 1) return addresses[0].GrpcTarget();
  std::vector<std::string> targets;
  for (const Address& a : addresses) targets.push_back(a.GrpcTarget());
  return absl::StrCat(Family(addresses[0].host) == AF_INET6 ? "ipv6:" : "ipv4:",
                      absl::StrJoin(targets, ","));
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const std::vector<Address>& addresses,
                                                           const TlsFiles& tls) {
  QuietGrpcLogging();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  const Address& first = addresses.at(0);
  if (first.unix_socket) {
    if (!tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty()) {
      return errors::InvalidArgument(absl::StrCat(
          "--tls-*: TLS is for tcp: addresses; ", first.ToString(),
          " is a local socket (unset SANDGATE_TLS_* or use the daemon's tcp: address)"));
    }
    last_channel_kind = ChannelKind::kUnix;
    return grpc::CreateCustomChannel(ChannelTarget(addresses), grpc::InsecureChannelCredentials(),
                                     args);
  }
  args.SetLoadBalancingPolicyName("round_robin");
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  last_channel_kind = ChannelKind::kTcp;
  if (!tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty()) {
    last_channel_kind = ChannelKind::kTls;
    SANDGATE_ASSIGN_OR_RETURN(creds,
                              TlsChannelCredentials(tls, {"--tls-cert", "--tls-key", "--tls-ca"}));
    // A list's target is not a host name: the replicas' certificates are checked against the
    // first one's host (a certificate for the service names them all).
    if (addresses.size() > 1) {
      args.SetSslTargetNameOverride(
          std::string(absl::StripSuffix(absl::StripPrefix(first.host, "["), "]")));
    }
  }
  return grpc::CreateCustomChannel(ChannelTarget(addresses), creds, args);
}

}  // namespace sandgate::cli
