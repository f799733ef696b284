// TlsMirror: the copies of the TLS files that the listener actually serves. gRPC's file
// watcher drops the key pair when a file it re-reads is bad (half written, removed, a key of
// another certificate), and then every new handshake fails until someone fixes the file. The
// mirror checks the configured files with ReadTlsFiles every reload interval and copies them
// into its own directory only when they pass, so a bad replacement is logged
// ("tls.reload_refused", naming the file and the problem) and the last good pair stays in
// service.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto mirror, TlsMirror::Start(config.tls, state_dir + "/tls",
//                                                           Clock::Real()));
//   ... FileWatcherCertificateProvider(mirror->served().key_file, ...) ...
//
// Thread safe: one thread of its own copies; the destructor stops and joins it. Between the
// copy of the key and of the certificate (two renames) a reader may see a new key with the
// old certificate, for one reload interval at most.
#ifndef SANDGATE_SERVER_TLS_MIRROR_H_
#define SANDGATE_SERVER_TLS_MIRROR_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/tls.h"
#include "core/config.h"

namespace sandgate::server {

class TlsMirror {
 public:
  // Copies the files (checked: the daemon's config check read them just before, but they may
  // have changed since) into `dir` (created, mode 0700; the copies 0600) and starts watching
  // `tls`'s files every tls.reload_interval_seconds of `clock`, which outlives the mirror.
  static absl::StatusOr<std::unique_ptr<TlsMirror>> Start(const core::TlsConfig& tls,
                                                          const std::string& dir, Clock* clock);
  ~TlsMirror();

  // `tls` with the copies' paths: what the listener is given.
  const core::TlsConfig& served() const { return served_; }

 private:
  TlsMirror(const core::TlsConfig& tls, const std::string& dir, Clock* clock);
  absl::Status Write(const TlsPem& pem);  // the copies, each through a rename
  void Refresh();                         // on the mirror's thread
  void Loop();

  // Constant after construction.
  const core::TlsConfig source_;
  core::TlsConfig served_;
  Clock* const clock_;

  // Only the mirror's thread (and Start, before it runs).
  TlsPem copied_;
  std::string last_error_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_TLS_MIRROR_H_
