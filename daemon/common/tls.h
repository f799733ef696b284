// TLS files (a certificate chain, its private key, a CA bundle) checked before gRPC sees them,
// so that a wrong file stops the daemon or the CLI with a message naming the file and the
// problem instead of a handshake error on the first call (or a log line nobody reads).
//
//   TlsFiles files{.cert_file = "/etc/sandgate/tls.pem", .key_file = "/etc/sandgate/tls.key",
//                  .ca_file = "/etc/sandgate/clients-ca.pem"};
//   absl::StatusOr<TlsPem> pem = ReadTlsFiles(files, {"tls.cert_file", "tls.key_file",
//                                                     "tls.client_ca_file"});
//   // "tls.key_file: /etc/sandgate/tls.key does not match the certificate in ..."
//
// Plain functions and values; thread safe. The gRPC credentials built from these live in
// common/tls_credentials.h (the CLI's and replica-to-replica channels) and
// server/grpc_server.cc (the listener).
#ifndef SANDGATE_COMMON_TLS_H_
#define SANDGATE_COMMON_TLS_H_

#include <string>

#include "absl/status/statusor.h"

namespace sandgate {

// Paths; an empty one is not used. cert_file and key_file come together.
struct TlsFiles {
  std::string cert_file;  // PEM certificate chain, the leaf first
  std::string key_file;   // PEM private key of the leaf, unencrypted
  std::string ca_file;    // PEM bundle that verifies the peer
};

// What each file is called where the user set it ("tls.cert_file", "--tls-cert"), for errors.
struct TlsFileNames {
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
};

// The files' contents, each checked.
struct TlsPem {
  std::string cert_chain;
  std::string private_key;
  std::string ca;
};

// Reads the files given and checks that the certificate chain parses and its leaf is valid
// now, that the key parses and belongs to the leaf, and that the CA bundle holds at least one
// certificate. INVALID_ARGUMENT naming the setting, the file and what is wrong otherwise (and
// when only one of cert_file and key_file is set).
absl::StatusOr<TlsPem> ReadTlsFiles(const TlsFiles& files, const TlsFileNames& names);

}  // namespace sandgate

#endif  // SANDGATE_COMMON_TLS_H_
