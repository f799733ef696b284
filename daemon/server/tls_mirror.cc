#include "server/tls_mirror.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace sandgate::server {
namespace {

const TlsFileNames kNames = {"tls.cert_file", "tls.key_file", "tls.client_ca_file"};

TlsFiles Files(const core::TlsConfig& tls) {
  return {tls.cert_file, tls.key_file, tls.client_ca_file};
}

// `data` into `path` through a temporary name, mode 0600 (one of them is a private key).
absl::Status WriteFile(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".new";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return errors::FromErrno(errno, absl::StrCat("create ", tmp));
  const bool written = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  const int write_errno = errno;
  close(fd);
  if (!written) return errors::FromErrno(write_errno, absl::StrCat("write ", tmp));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return errors::FromErrno(errno, absl::StrCat("rename ", tmp));
  return absl::OkStatus();
}

}  // namespace

TlsMirror::TlsMirror(const core::TlsConfig& tls, const std::string& dir, Clock* clock)
    : source_(tls), served_(tls), clock_(clock) {
  served_.cert_file = dir + "/cert.pem";
  served_.key_file = dir + "/key.pem";
  if (!tls.client_ca_file.empty()) served_.client_ca_file = dir + "/client_ca.pem";
}

absl::StatusOr<std::unique_ptr<TlsMirror>> TlsMirror::Start(const core::TlsConfig& tls,
                                                            const std::string& dir, Clock* clock) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return errors::FromErrno(errno, absl::StrCat("create ", dir));
  chmod(dir.c_str(), 0700);  // one left by an older daemon with other permissions
  std::unique_ptr<TlsMirror> m(new TlsMirror(tls, dir, clock));
  SANDGATE_ASSIGN_OR_RETURN(m->copied_, ReadTlsFiles(Files(tls), kNames));
  SANDGATE_RETURN_IF_ERROR(m->Write(m->copied_));
  m->thread_ = std::thread([p = m.get()] { p->Loop(); });
  return m;
}

TlsMirror::~TlsMirror() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status TlsMirror::Write(const TlsPem& pem) {
  // The key before the certificate: gRPC reads them in that order too.
  SANDGATE_RETURN_IF_ERROR(WriteFile(served_.key_file, pem.private_key));
  SANDGATE_RETURN_IF_ERROR(WriteFile(served_.cert_file, pem.cert_chain));
  if (!served_.client_ca_file.empty())
    SANDGATE_RETURN_IF_ERROR(WriteFile(served_.client_ca_file, pem.ca));
  return absl::OkStatus();
}

void TlsMirror::Refresh() {
  absl::StatusOr<TlsPem> pem = ReadTlsFiles(Files(source_), kNames);
  if (!pem.ok()) {
    // Once per distinct problem: the file is re-read every interval until it is fixed.
    std::string error(pem.status().message());
    if (error != last_error_) {
      log::Warning("tls.reload_refused", {{"error", error}, {"serving", "the last good files"}});
    }
    last_error_ = std::move(error);
    return;
  }
  last_error_.clear();
  if (pem->cert_chain == copied_.cert_chain && pem->private_key == copied_.private_key &&
      pem->ca == copied_.ca) {
    return;
  }
  if (absl::Status written = Write(*pem); !written.ok()) {
    log::Warning("tls.reload_failed", {{"error", std::string(written.message())}});
    return;
  }
  copied_ = *std::move(pem);
  log::Info("tls.reloaded", {{"cert_file", source_.cert_file}});
}

void TlsMirror::Loop() {
  const absl::Duration every = absl::Seconds(source_.reload_interval_seconds);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (clock_->AwaitWithDeadline(mu_, absl::Condition(&stop_), clock_->Now() + every)) return;
    }
    Refresh();
  }
}

}  // namespace sandgate::server
