// ValidateConfig: the rules across a config's fields (who may call a TCP listener, defaults
// within their ceilings, the warm pool within the machine's budget, the replica's timing), then
// the TLS files. ParseConfig (config.cc) has already checked each field on its own.
#include <arpa/inet.h>

#include <algorithm>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/address.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "core/config.h"

namespace sandgate::core {
namespace {

// The two rules of a TCP listener (`key`), in the order an operator meets them: who may
// call, then whether a token would cross the network in the clear. A Unix socket is guarded by
// its permissions and needs neither. The HTTP port does not check client certificates, so
// there only tenants' tokens (or allow_unauthenticated_tcp) let callers in.
absl::Status CheckTcpListener(const Config& c, const std::string& key, bool checks_client_certs) {
  const bool client_certs = checks_client_certs && c.tls.enabled() && c.tls.require_client_cert;
  if (c.tenants.empty() && !client_certs && !c.allow_unauthenticated_tcp) {
    return errors::InvalidArgument(absl::StrCat(
        key, ": TCP without tenants would let anyone on the network run code; configure tenants",
        checks_client_certs ? ", require client certificates (tls.require_client_cert)"
                            : " (client certificates are not checked on this port)",
        " or set allow_unauthenticated_tcp"));
  }
  if (!c.tenants.empty() && !c.tls.enabled() && !c.allow_plaintext_tokens) {
    return errors::InvalidArgument(absl::StrCat(
        key,
        ": TCP without TLS would carry the tenants' bearer tokens in the clear; add "
        "\"tls\": {\"cert_file\": ..., \"key_file\": ...} or set \"allow_plaintext_tokens\": "
        "true (only on a network you trust)"));
  }
  return absl::OkStatus();
}

// http_listen: an IPv4 host:port, then the TCP rules.
absl::Status CheckHttpListener(const Config& c) {
  const std::string& a = c.http_listen;
  size_t colon = a.rfind(':');
  int port = -1;
  struct in_addr ip;
  if (colon == std::string::npos || !absl::SimpleAtoi(a.substr(colon + 1), &port) || port < 0 ||
      port > 65535 || inet_pton(AF_INET, a.substr(0, colon).c_str(), &ip) != 1) {
    return errors::InvalidArgument(
        absl::StrCat("http_listen: expected IPv4 host:port (e.g. 127.0.0.1:8080), got '", a, "'"));
  }
  return CheckTcpListener(c, "http_listen", /*checks_client_certs=*/false);
}

}  // namespace

absl::Status ValidateConfig(const Config& c) {
  // The CLI's --addr takes the same forms (common/address.h).
  absl::StatusOr<Address> listen = ParseAddress(c.listen);
  if (!listen.ok())
    return errors::InvalidArgument(absl::StrCat("listen: ", listen.status().message()));
  if (listen->unix_socket && c.tls.enabled() && c.http_listen.empty()) {
    return errors::InvalidArgument(
        "tls: only for a TCP listen address or http_listen (a Unix socket is guarded by its "
        "permissions)");
  }
  if (!listen->unix_socket) SANDGATE_RETURN_IF_ERROR(CheckTcpListener(c, "listen", true));
  if (!c.http_listen.empty()) SANDGATE_RETURN_IF_ERROR(CheckHttpListener(c));
  static const char* kLevels[] = {"debug", "info", "warning", "error"};
  if (std::find(std::begin(kLevels), std::end(kLevels), c.log_level) == std::end(kLevels)) {
    return errors::InvalidArgument(
        absl::StrCat("log_level: expected debug, info, warning or error, got '", c.log_level, "'"));
  }
  // A default above its ceiling would refuse every request that leaves the
  // field 0.
  const struct {
    bool above;
    const char* keys;
  } ceilings[] = {
      {c.memory_bytes > c.limits.memory_bytes, "memory_bytes: above limits.memory_bytes"},
      {c.workspace_bytes > c.limits.workspace_bytes,
       "workspace_bytes: above limits.workspace_bytes"},
      {c.max_processes > c.limits.max_processes, "max_processes: above limits.max_processes"},
      {c.run_timeout > c.limits.run_timeout,
       "run_timeout_seconds: above limits.run_timeout_seconds"},
      {c.command_timeout > c.limits.command_timeout,
       "command_timeout_seconds: above limits.command_timeout_seconds"},
  };
  for (const auto& ceiling : ceilings) {
    if (ceiling.above) return errors::InvalidArgument(absl::StrCat("defaults.", ceiling.keys));
  }
  // Ready sandboxes hold budget and uids: a pool that could fill either would starve every
  // request.
  uint64_t warm = 0;
  for (size_t i = 0; i < c.warm_pool.size(); ++i) {
    const WarmPoolShape& s = c.warm_pool[i];
    warm += s.size;
    if ((s.memory_bytes ? s.memory_bytes : c.memory_bytes) > c.limits.memory_bytes ||
        (s.workspace_bytes ? s.workspace_bytes : c.workspace_bytes) > c.limits.workspace_bytes ||
        (s.max_processes ? s.max_processes : c.max_processes) > c.limits.max_processes) {
      return errors::InvalidArgument(
          absl::StrCat("warm_pool[", i, "]: a limit above the machine's limits"));
    }
  }
  if (warm > c.max_sandboxes || warm > c.uid_count) {
    return errors::InvalidArgument(
        absl::StrCat("warm_pool: ", warm, " sandboxes kept ready, more than max_sandboxes (",
                     c.max_sandboxes, ") or local.uid_count (", c.uid_count, ")"));
  }
  if (c.replica.id.size() > 128 ||
      c.replica.id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789._-") != std::string::npos) {
    return errors::InvalidArgument(absl::StrCat(
        "replica.id: '", c.replica.id, "' is not letters, digits, '.', '_', '-' (at most 128)"));
  }
  // One late renewal must not end the lease: another replica would fail this one's runs.
  if (c.replica.renew_interval * 2 > c.replica.lease_period) {
    return errors::InvalidArgument(
        "replica.renew_seconds: at most half of replica.lease_seconds, so one late renewal does "
        "not end the lease");
  }
  if (c.uid_base + static_cast<uint64_t>(c.uid_count) > 0xfffffffeull) {
    return errors::InvalidArgument("local.uid_base + local.uid_count: beyond the uid range");
  }
  // Last: the only check that reads files. The listener re-reads them (server/grpc_server.cc);
  // this makes a wrong file stop the start, naming it.
  if (c.tls.enabled()) {
    absl::StatusOr<TlsPem> pem =
        ReadTlsFiles({c.tls.cert_file, c.tls.key_file, c.tls.client_ca_file},
                     {"tls.cert_file", "tls.key_file", "tls.client_ca_file"});
    if (!pem.ok()) return pem.status();
  }
  return absl::OkStatus();
}

}  // namespace sandgate::core
