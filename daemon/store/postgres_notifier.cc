#include "store/postgres_notifier.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace sandgate::store {
namespace {

// A channel is spliced into LISTEN (which takes no parameters): only plain identifiers.
absl::Status CheckChannel(const std::string& channel) {
  const bool plain = !channel.empty() && channel.size() <= 63 &&
                     std::all_of(channel.begin(), channel.end(), [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                     });
  if (plain) return absl::OkStatus();
  return errors::InvalidArgument(absl::StrCat("notifier channel '", channel,
                                              "': want 1 to 63 lower-case letters, digits or '_'"));
}

}  // namespace

absl::Status PgNotify(PgConnection& conn, const std::string& channel, const std::string& payload) {
  SANDGATE_RETURN_IF_ERROR(CheckChannel(channel));
  if (payload.size() > Notifier::kMaxPayload) {
    return errors::InvalidArgument(absl::StrCat("notify payload: ", payload.size(),
                                                " bytes, at most ", Notifier::kMaxPayload));
  }
  return conn.Run("notify", "SELECT pg_notify($1, $2)", PgParams().Text(channel).Text(payload));
}

absl::StatusOr<std::unique_ptr<PostgresNotifier>> PostgresNotifier::Start(
    const PostgresOptions& options, PostgresDatabase* db) {
  PostgresOptions one = options;
  one.pool_size = 1;
  // Opening connects at once: a wrong DSN fails the start, not the first reconnect.
  SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<PostgresDatabase> listener,
                            PostgresDatabase::Open(one));
  return std::unique_ptr<PostgresNotifier>(new PostgresNotifier(options, db, std::move(listener)));
}

PostgresNotifier::PostgresNotifier(const PostgresOptions& options, PostgresDatabase* db,
                                   std::unique_ptr<PostgresDatabase> listener)
    : options_(options),
      db_(db),
      listener_(std::move(listener)),
      wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      thread_([this] { Loop(); }) {}

PostgresNotifier::~PostgresNotifier() {
  stop_.Cancel("notifier stopped");
  if (thread_.joinable()) thread_.join();
  if (wake_ >= 0) close(wake_);
}

absl::StatusOr<uint64_t> PostgresNotifier::Subscribe(const std::string& channel, Callback cb) {
  SANDGATE_RETURN_IF_ERROR(CheckChannel(channel));
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
    subs_[id] = Subscription{channel, std::move(cb)};
  }
  const uint64_t one = 1;
  (void)!write(wake_, &one, sizeof one);  // the loop LISTENs on a channel new to it
  return id;
}

void PostgresNotifier::Unsubscribe(uint64_t id) {
  {
    absl::MutexLock lock(&mu_);
    subs_.erase(id);
  }
  // A delivery that copied the callback before the erase is done once this lock is free.
  absl::MutexLock lock(&deliver_mu_);
}

absl::Status PostgresNotifier::Notify(const std::string& channel, const std::string& payload) {
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db_->Acquire("notify"));
  return PgNotify(*conn, channel, payload);
}

int64_t PostgresNotifier::connects() const {
  absl::MutexLock lock(&mu_);
  return connects_;
}

void PostgresNotifier::Deliver(const std::string* channel, const std::string& payload) {
  absl::MutexLock deliver(&deliver_mu_);
  std::vector<std::pair<std::string, Callback>> cbs;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, sub] : subs_) {
      if (channel == nullptr || sub.channel == *channel) cbs.emplace_back(sub.channel, sub.cb);
    }
  }
  for (const auto& [ch, cb] : cbs) cb(ch, payload);
}

absl::StatusOr<std::set<std::string>> PostgresNotifier::ListenNew(
    PgConnection& conn, std::set<std::string>& listening) {
  std::set<std::string> wanted;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, sub] : subs_) wanted.insert(sub.channel);
  }
  std::set<std::string> added;
  for (const std::string& channel : wanted) {
    if (listening.count(channel) > 0) continue;
    // LISTEN is not a statement PQprepare takes; the channel was checked at Subscribe.
    const std::string sql = absl::StrCat("LISTEN ", channel);
    SANDGATE_RETURN_IF_ERROR(conn.Check("listen", PQexec(conn.conn_, sql.c_str())).status());
    listening.insert(channel);
    added.insert(channel);
  }
  return added;
}

void PostgresNotifier::Loop() {
  absl::Duration backoff = kMinBackoff;
  while (!stop_.cancelled()) {
    bool connected = false;
    absl::Status st = Listen(&connected);
    if (stop_.cancelled()) return;
    if (connected) {
      // It worked a while: the first retry is at once, so the gap is as short as can be.
      backoff = kMinBackoff;
      log::Warning("notifier.disconnected", {{"error", st.ToString()}});
      continue;
    }
    log::Warning("notifier.reconnect_failed",
                 {{"error", st.ToString()}, {"retry_in", absl::FormatDuration(backoff)}});
    if (options_.clock->SleepFor(backoff, &stop_)) return;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

absl::Status PostgresNotifier::Listen(bool* connected) {
  SANDGATE_ASSIGN_OR_RETURN(PgLease lease, listener_->Acquire("listen"));
  PgConnection& conn = *lease;
  std::set<std::string> listening;
  SANDGATE_RETURN_IF_ERROR(ListenNew(conn, listening).status());
  *connected = true;
  {
    absl::MutexLock lock(&mu_);
    ++connects_;
  }
  // Whatever was sent while nobody listened is lost: every subscriber looks at its table.
  Deliver(nullptr, "");
  PGconn* const raw = conn.conn_;
  for (;;) {
    pollfd fds[3] = {{PQsocket(raw), POLLIN, 0}, {wake_, POLLIN, 0}, {stop_.fd(), POLLIN, 0}};
    if (poll(fds, 3, -1) < 0 && errno != EINTR) return errors::FromErrno(errno, "notifier poll");
    if (stop_.cancelled()) return absl::OkStatus();
    if (fds[1].revents & POLLIN) {
      uint64_t n;
      (void)!read(wake_, &n, sizeof n);
      SANDGATE_ASSIGN_OR_RETURN(std::set<std::string> added, ListenNew(conn, listening));
      // A channel's first subscribers may have missed what came before its LISTEN.
      for (const std::string& channel : added) Deliver(&channel, "");
    }
    if (fds[0].revents != 0 && PQconsumeInput(raw) == 0) {
      return errors::Unavailable(absl::StrCat(
          "postgres listen: ", absl::StripTrailingAsciiWhitespace(PQerrorMessage(raw))));
    }
    while (PGnotify* n = PQnotifies(raw)) {
      const std::string channel = n->relname;
      const std::string payload = n->extra ? n->extra : "";
      PQfreemem(n);
      Deliver(&channel, payload);
    }
    if (PQstatus(raw) != CONNECTION_OK) {
      return errors::Unavailable(absl::StrCat(
          "postgres listen: ", absl::StripTrailingAsciiWhitespace(PQerrorMessage(raw))));
    }
  }
}

}  // namespace sandgate::store
