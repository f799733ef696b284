#include "common/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace sandgate {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

absl::Status Bad(const std::string& name, const std::string& path, absl::string_view what) {
  return errors::InvalidArgument(absl::StrCat(name, ": ", path, " ", what));
}

absl::StatusOr<std::string> Read(const std::string& name, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Bad(name, path, absl::StrCat("cannot be read (", std::strerror(errno), ")"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate in a PEM text, in order; parse errors end the list (and are cleared,
// so they do not surface in an unrelated OpenSSL call later).
std::vector<Cert> Certificates(const std::string& pem) {
  std::vector<Cert> certs;
  Bio bio = MemoryBio(pem);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  ERR_clear_error();
  return certs;
}

std::string Asn1Time(const ASN1_TIME* t) {
  Bio bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), t);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

absl::StatusOr<TlsPem> ReadTlsFiles(const TlsFiles& files, const TlsFileNames& names) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return errors::InvalidArgument(absl::StrCat(names.cert_file, " and ", names.key_file,
                                                ": set both (a certificate and its key) or "
                                                "neither"));
  }
  TlsPem pem;
  if (!files.cert_file.empty()) {
    absl::StatusOr<std::string> chain = Read(names.cert_file, files.cert_file);
    if (!chain.ok()) return chain.status();
    std::vector<Cert> certs = Certificates(*chain);
    if (certs.empty()) return Bad(names.cert_file, files.cert_file, "holds no PEM certificate");
    X509* leaf = certs[0].get();
    if (X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0) {
      return Bad(names.cert_file, files.cert_file,
                 absl::StrCat("expired on ", Asn1Time(X509_get0_notAfter(leaf))));
    }
    if (X509_cmp_current_time(X509_get0_notBefore(leaf)) > 0) {
      return Bad(names.cert_file, files.cert_file,
                 absl::StrCat("is not valid before ", Asn1Time(X509_get0_notBefore(leaf))));
    }
    absl::StatusOr<std::string> key_text = Read(names.key_file, files.key_file);
    if (!key_text.ok()) return key_text.status();
    Bio bio = MemoryBio(*key_text);
    // No password callback: an encrypted key fails here instead of prompting on a terminal.
    Key key(PEM_read_bio_PrivateKey(
        bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
    ERR_clear_error();
    if (!key) {
      return Bad(names.key_file, files.key_file,
                 "holds no unencrypted PEM private key (an encrypted key cannot be read at start)");
    }
    if (X509_check_private_key(leaf, key.get()) != 1) {
      ERR_clear_error();
      return Bad(names.key_file, files.key_file,
                 absl::StrCat("does not match the certificate in ", files.cert_file));
    }
    pem.cert_chain = *std::move(chain);
    pem.private_key = *std::move(key_text);
  }
  if (!files.ca_file.empty()) {
    absl::StatusOr<std::string> ca = Read(names.ca_file, files.ca_file);
    if (!ca.ok()) return ca.status();
    if (Certificates(*ca).empty())
      return Bad(names.ca_file, files.ca_file, "holds no PEM certificate");
    pem.ca = *std::move(ca);
  }
  return pem;
}

}  // namespace sandgate
