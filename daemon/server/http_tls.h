// The HTTPS identity of the daemon's HTTP port (GnuTLS, through libmicrohttpd's certificate
// callback): its key pair, re-read from its files every reload interval. Internal to
// server/http_server.cc.
#ifndef SANDGATE_SERVER_HTTP_TLS_H_
#define SANDGATE_SERVER_HTTP_TLS_H_

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include "server/http_server.h"

namespace sandgate::server {

// Makes the pair of `o` (tls_cert_pem, tls_key_pem; the files to re-read, the interval and
// the clock) the process's HTTPS identity, replacing any before it; null when the pair does
// not load into GnuTLS. One per process: the callback has no user pointer.
void* InstallTlsIdentity(const HttpServerOptions& o);
// Removes `identity` when it is still the process's (an HttpServer that stops).
void UninstallTlsIdentity(void* identity);
// MHD_OPTION_HTTPS_CERT_CALLBACK: the current pair, re-read first when the interval passed.
int RetrieveTlsIdentity(gnutls_session_t, const gnutls_datum_t*, int, const gnutls_pk_algorithm_t*,
                        int, gnutls_pcert_st** pcert, unsigned int* pcert_length,
                        gnutls_privkey_t* key);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_HTTP_TLS_H_
