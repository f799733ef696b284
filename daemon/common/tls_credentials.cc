#include "common/tls_credentials.h"

#include "common/status_macros.h"

namespace sandgate {

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsChannelCredentials(
    const TlsFiles& files, const TlsFileNames& names) {
  SANDGATE_ASSIGN_OR_RETURN(TlsPem pem, ReadTlsFiles(files, names));
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = std::move(pem.ca);
  options.pem_private_key = std::move(pem.private_key);
  options.pem_cert_chain = std::move(pem.cert_chain);
  return grpc::SslCredentials(options);
}

}  // namespace sandgate
