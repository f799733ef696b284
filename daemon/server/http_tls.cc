#include "server/http_tls.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/tls.h"

namespace sandgate::server {
namespace {

// The HTTPS listener's key pair, handed to GnuTLS at each handshake (MHD's certificate
// callback) and re-read from its files every reload interval, at the first handshake after
// it (two small files, once an interval, on the polling thread). Every pair loaded stays until
// the process ends: a handshake under way may still use an older one, and a renewal a day
// costs a few KB. The callback has no user pointer: one TLS identity per process (the daemon
// has one HTTPS port). Thread safe.
class TlsIdentity {
 public:
  static TlsIdentity* Install(const HttpServerOptions& o) {
    auto* identity = new TlsIdentity(o);
    absl::Status st;
    {
      absl::MutexLock lock(&identity->mu_);
      st = identity->AddLocked(o.tls_cert_pem, o.tls_key_pem);
    }
    if (!st.ok()) {
      delete identity;
      return nullptr;
    }
    delete current_.exchange(identity);
    return identity;
  }
  static void Uninstall(TlsIdentity* identity) {
    TlsIdentity* expected = identity;
    if (current_.compare_exchange_strong(expected, nullptr)) delete identity;
  }

  static int Retrieve(gnutls_session_t, const gnutls_datum_t*, int, const gnutls_pk_algorithm_t*,
                      int, gnutls_pcert_st** pcert, unsigned int* pcert_length,
                      gnutls_privkey_t* key) {
    TlsIdentity* self = current_.load();
    if (self == nullptr) return -1;
    absl::MutexLock lock(&self->mu_);
    self->MaybeReloadLocked();
    Pair& p = *self->pairs_.back();
    *pcert = p.certs.data();
    *pcert_length = static_cast<unsigned int>(p.certs.size());
    *key = p.key;
    return 0;
  }

  ~TlsIdentity() {
    absl::MutexLock lock(&mu_);
    for (auto& p : pairs_) {
      for (auto& c : p->certs) gnutls_pcert_deinit(&c);
      gnutls_privkey_deinit(p->key);
    }
  }

 private:
  struct Pair {
    std::vector<gnutls_pcert_st> certs;
    gnutls_privkey_t key = nullptr;
  };

  explicit TlsIdentity(const HttpServerOptions& o)
      : options_(o), next_check_(o.clock->Now() + absl::Seconds(o.tls_reload_interval_seconds)) {}

  void MaybeReloadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (options_.tls_reload_interval_seconds <= 0 || options_.tls_cert_file.empty()) return;
    const absl::Time now = options_.clock->Now();
    if (now < next_check_) return;
    next_check_ = now + absl::Seconds(options_.tls_reload_interval_seconds);
    absl::StatusOr<TlsPem> pem = ReadTlsFiles({options_.tls_cert_file, options_.tls_key_file, ""},
                                              {"tls.cert_file", "tls.key_file", ""});
    absl::Status st = pem.status();
    if (st.ok() && pem->cert_chain == cert_pem_ && pem->private_key == key_pem_) return;
    if (st.ok()) st = AddLocked(pem->cert_chain, pem->private_key);
    if (!st.ok()) {
      log::Warning("tls.reload_refused",
                   {{"listener", options_.key_name}, {"message", std::string(st.message())}});
      return;
    }
    log::Info("tls.reloaded", {{"listener", options_.key_name}});
  }

  absl::Status AddLocked(const std::string& cert_pem, const std::string& key_pem)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto pair = std::make_unique<Pair>();
    pair->certs.resize(16);
    unsigned int n = static_cast<unsigned int>(pair->certs.size());
    gnutls_datum_t cert{reinterpret_cast<unsigned char*>(const_cast<char*>(cert_pem.data())),
                        static_cast<unsigned int>(cert_pem.size())};
    if (gnutls_pcert_list_import_x509_raw(pair->certs.data(), &n, &cert, GNUTLS_X509_FMT_PEM, 0) <
        0) {
      return errors::InvalidArgument("the certificate chain does not load into GnuTLS");
    }
    pair->certs.resize(n);
    gnutls_datum_t key{reinterpret_cast<unsigned char*>(const_cast<char*>(key_pem.data())),
                       static_cast<unsigned int>(key_pem.size())};
    if (gnutls_privkey_init(&pair->key) < 0 ||
        gnutls_privkey_import_x509_raw(pair->key, &key, GNUTLS_X509_FMT_PEM, nullptr, 0) < 0) {
      for (auto& c : pair->certs) gnutls_pcert_deinit(&c);
      if (pair->key != nullptr) gnutls_privkey_deinit(pair->key);
      return errors::InvalidArgument("the private key does not load into GnuTLS");
    }
    pairs_.push_back(std::move(pair));
    cert_pem_ = cert_pem;
    key_pem_ = key_pem;
    return absl::OkStatus();
  }

  const HttpServerOptions options_;
  static std::atomic<TlsIdentity*> current_;
  absl::Mutex mu_;
  absl::Time next_check_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Pair>> pairs_ ABSL_GUARDED_BY(mu_);
  std::string cert_pem_ ABSL_GUARDED_BY(mu_), key_pem_ ABSL_GUARDED_BY(mu_);
};

std::atomic<TlsIdentity*> TlsIdentity::current_{nullptr};

}  // namespace

void* InstallTlsIdentity(const HttpServerOptions& o) { return TlsIdentity::Install(o); }

void UninstallTlsIdentity(void* identity) {
  TlsIdentity::Uninstall(static_cast<TlsIdentity*>(identity));
}

int RetrieveTlsIdentity(gnutls_session_t session, const gnutls_datum_t* req_ca_dn, int nreqs,
                        const gnutls_pk_algorithm_t* pk_algos, int pk_algos_length,
                        gnutls_pcert_st** pcert, unsigned int* pcert_length,
                        gnutls_privkey_t* key) {
  return TlsIdentity::Retrieve(session, req_ca_dn, nreqs, pk_algos, pk_algos_length, pcert,
                               pcert_length, key);
}

}  // namespace sandgate::server
