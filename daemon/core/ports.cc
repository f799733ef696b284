#include "core/ports.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {
namespace {

constexpr size_t kMinKeyBytes = 32;

absl::Status CheckPortField(uint32_t port) {
  if (port < 1 || port > 65535) {
    return errors::InvalidArgument(absl::StrCat("port: expected 1..65535, got ", port));
  }
  return absl::OkStatus();
}

std::string PortPath(const std::string& id, uint32_t port) {
  return absl::StrCat("/v1/sessions/", id, "/ports/", port, "/");
}

absl::Status NotExposed(const std::string& id, uint32_t port) {
  return errors::NotFound("exposed port", absl::StrCat(id, "/", port));
}

}  // namespace

absl::StatusOr<std::string> PortManager::LoadSigningKey(const PortLimits& limits) {
  if (limits.signing_key_file.empty()) {
    std::string key(kMinKeyBytes, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size())) !=
        1) {
      return errors::Internal("ports: cannot make a signing key (RAND_bytes)");
    }
    return key;
  }
  std::ifstream in(limits.signing_key_file, std::ios::binary);
  if (!in) {
    return errors::InvalidArgument(
        absl::StrCat("ports.signing_key_file: cannot read ", limits.signing_key_file));
  }
  std::stringstream data;
  data << in.rdbuf();
  std::string key = data.str();
  if (key.size() < kMinKeyBytes) {
    return errors::InvalidArgument(absl::StrCat("ports.signing_key_file: ", limits.signing_key_file,
                                                " holds ", key.size(), " bytes; at least ",
                                                kMinKeyBytes, " are needed"));
  }
  return key;
}

absl::StatusOr<uint16_t> PortManager::ParsePort(absl::string_view text) {
  uint32_t port = 0;
  const bool digits = !text.empty() && text.size() <= 5 &&
                      std::all_of(text.begin(), text.end(), absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(text, &port) || port < 1 || port > 65535) {
    return errors::InvalidArgument(
        absl::StrCat("port: expected a number 1..65535, got '", absl::CHexEscape(text), "'"));
  }
  return static_cast<uint16_t>(port);
}

std::string PortManager::Sign(const std::string& id, uint16_t port, int64_t expiry) const {
  const std::string message = absl::StrCat(id, "\n", port, "\n", expiry);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), deps_.signing_key.data(), static_cast<int>(deps_.signing_key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &mac_len);
  return absl::StrCat(
      expiry, ".",
      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(mac), mac_len)));
}

void PortManager::Fill(const std::string& id, uint16_t port, const Exposure& e,
                       v1::ExposedPort* out) const {
  out->set_session_id(id);
  out->set_port(port);
  out->set_path(PortPath(id, port));
  out->set_url(base_url_ + out->path());
  *out->mutable_exposed_at() = ToProto(e.exposed_at);
  out->set_open_connections(static_cast<uint32_t>(e.open.size()));
}

void PortManager::ForgetEndedLocked() {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    it = it->second.open == 0 && !deps_.sessions->Holds(it->first) ? sessions_.erase(it)
                                                                   : std::next(it);
  }
}

absl::Status PortManager::Expose(const Caller& caller, const v1::ExposePortRequest& request,
                                 v1::ExposedPort* response) {
  SANDGATE_RETURN_IF_ERROR(CheckPortField(request.port()));
  const absl::Duration ttl =
      request.has_signed_ttl() ? FromProto(request.signed_ttl()) : deps_.limits->default_signed_ttl;
  if (request.has_signed_ttl() && !request.signed_url()) {
    return errors::InvalidArgument("signed_ttl: only with signed_url");
  }
  if (request.signed_url() && (ttl <= absl::ZeroDuration() || ttl > deps_.limits->max_signed_ttl)) {
    return errors::InvalidArgument(absl::StrCat("signed_ttl: expected more than 0 s and at most ",
                                                absl::FormatDuration(deps_.limits->max_signed_ttl),
                                                " (ports.max_signed_ttl_seconds), got ",
                                                absl::FormatDuration(ttl)));
  }
  // The caller's own live session (NOT_FOUND otherwise), on a provider that can reach ports.
  SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<SessionManager::Lease> lease,
                            deps_.sessions->Acquire(caller, request.session_id()));
  if (!lease->session().reaches_ports()) {
    return errors::FailedPrecondition(
        absl::StrCat("session ", request.session_id(),
                     ": its provider runs commands upstream; only local sessions expose ports"));
  }
  const uint16_t port = static_cast<uint16_t>(request.port());
  const absl::Time now = deps_.clock->Now();
  absl::MutexLock lock(&mu_);
  ForgetEndedLocked();
  SessionPorts& s = sessions_[request.session_id()];
  s.tenant = caller.tenant;
  auto it = s.ports.find(port);
  if (it == s.ports.end()) {
    if (s.ports.size() >= deps_.limits->max_exposed_per_session) {
      return errors::ResourceExhausted(absl::StrCat("session ", request.session_id(),
                                                    " already exposes ", s.ports.size(),
                                                    " ports (ports.max_exposed_per_session)"));
    }
    it = s.ports.emplace(port, Exposure{now, {}}).first;
  }
  Fill(request.session_id(), port, it->second, response);
  if (request.signed_url()) {
    const int64_t expiry = absl::ToUnixSeconds(now + ttl);
    response->set_signed_path(absl::StrCat("/v1/sessions/", request.session_id(), "/ports/", port,
                                           ":signed/", Sign(request.session_id(), port, expiry),
                                           "/"));
    response->set_signed_url(base_url_ + response->signed_path());
    *response->mutable_signed_expires_at() = ToProto(absl::FromUnixSeconds(expiry));
  }
  return absl::OkStatus();
}

absl::Status PortManager::Unexpose(const Caller& caller, const v1::UnexposePortRequest& request,
                                   v1::UnexposePortResponse*) {
  SANDGATE_RETURN_IF_ERROR(CheckPortField(request.port()));
  // NOT_FOUND for another tenant's session, as everywhere (a closed one of the caller's may
  // still unexpose: nothing is left to reach).
  SANDGATE_RETURN_IF_ERROR(deps_.sessions->Get(caller, request.session_id()).status());
  absl::MutexLock lock(&mu_);
  auto s = sessions_.find(request.session_id());
  const uint16_t port = static_cast<uint16_t>(request.port());
  if (s == sessions_.end() || s->second.ports.count(port) == 0) {
    return NotExposed(request.session_id(), port);
  }
  for (Connection* c : s->second.ports[port].open) c->cancel_.Cancel("the port was unexposed");
  // The open connections release their places as they end (Release finds no exposure then).
  s->second.ports.erase(port);
  return absl::OkStatus();
}

absl::Status PortManager::List(const Caller& caller, const v1::ListPortsRequest& request,
                               v1::ListPortsResponse* response) {
  SANDGATE_RETURN_IF_ERROR(deps_.sessions->Get(caller, request.session_id()).status());
  absl::MutexLock lock(&mu_);
  ForgetEndedLocked();
  auto s = sessions_.find(request.session_id());
  if (s == sessions_.end()) return absl::OkStatus();
  for (const auto& [port, e] : s->second.ports) Fill(s->first, port, e, response->add_ports());
  return absl::OkStatus();
}

absl::StatusOr<Caller> PortManager::CheckGrant(const std::string& id, uint16_t port,
                                               absl::string_view grant) {
  const size_t dot = grant.find('.');
  int64_t expiry = 0;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(grant.substr(0, dot), &expiry) ||
      expiry <= 0) {
    return errors::PermissionDenied("the signed URL is malformed (expected <expiry>.<signature>)");
  }
  const std::string want = Sign(id, port, expiry);
  if (want.size() != grant.size() || CRYPTO_memcmp(want.data(), grant.data(), want.size()) != 0) {
    return errors::PermissionDenied("the signed URL's signature does not match");
  }
  const absl::Time expires = absl::FromUnixSeconds(expiry);
  if (deps_.clock->Now() >= expires) {
    return errors::PermissionDenied(
        absl::StrCat("the signed URL expired at ", absl::FormatTime(expires, absl::UTCTimeZone())));
  }
  absl::MutexLock lock(&mu_);
  auto s = sessions_.find(id);
  if (s == sessions_.end() || s->second.ports.count(port) == 0) return NotExposed(id, port);
  Caller caller;
  caller.tenant = s->second.tenant;
  return caller;
}

absl::StatusOr<std::unique_ptr<PortManager::Connection>> PortManager::Open(const Caller& caller,
                                                                           const std::string& id,
                                                                           uint16_t port) {
  std::unique_ptr<Connection> c(new Connection(this, id, port));
  LeaseWatch watch;
  watch.cancel = &c->cancel_;
  SANDGATE_ASSIGN_OR_RETURN(c->lease_, deps_.sessions->Acquire(caller, id, watch));
  {
    absl::MutexLock lock(&mu_);
    auto s = sessions_.find(id);
    if (s == sessions_.end() || s->second.tenant != caller.tenant ||
        s->second.ports.count(port) == 0) {
      return NotExposed(id, port);
    }
    if (open_ >= deps_.limits->max_connections) {
      return errors::ResourceExhausted(absl::StrCat(
          "this daemon has ", open_, " proxied connections open (ports.max_connections)"));
    }
    if (s->second.open >= deps_.limits->max_connections_per_session) {
      return errors::ResourceExhausted(absl::StrCat("session ", id, " has ", s->second.open,
                                                    " proxied connections open "
                                                    "(ports.max_connections_per_session)"));
    }
    ++open_;
    ++s->second.open;
    s->second.ports[port].open.insert(c.get());
    c->counted_ = true;
  }
  // From here the destructor releases the places taken.
  SANDGATE_ASSIGN_OR_RETURN(c->fd_,
                            c->lease_->session().ConnectPort(port, deps_.limits->connect_timeout));
  return c;
}

void PortManager::Release(Connection* c) {
  absl::MutexLock lock(&mu_);
  if (!c->counted_) return;
  --open_;
  auto s = sessions_.find(c->id_);
  if (s == sessions_.end()) return;
  --s->second.open;
  auto p = s->second.ports.find(c->port_);
  if (p != s->second.ports.end()) p->second.open.erase(c);
}

PortManager::Connection::~Connection() {
  fd_.reset();
  manager_->Release(this);
}

}  // namespace sandgate::core
