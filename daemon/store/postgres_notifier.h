// PostgresNotifier: Notifier (store/notifier.h) on PostgreSQL's LISTEN/NOTIFY.
//
// One dedicated libpq connection, outside the pool, LISTENs on every subscribed channel; its
// thread waits on the connection's socket and hands each notification to the channel's
// subscribers. When the connection drops (the server restarts, a backend is terminated) it
// reconnects with backoff on the injected clock (kMinBackoff doubling to kMaxBackoff),
// LISTENs again, and tells every subscriber with an empty payload that it may have missed
// something. Notify runs `SELECT pg_notify(…)` on a pooled connection; PgNotify runs it on a
// connection the caller holds, so a notification goes out with the transaction that made
// the change (delivered only at its commit, and not at all on rollback).
//
//   SANDGATE_ASSIGN_OR_RETURN(auto n, PostgresNotifier::Start(options, &store->database()));
//   n->Subscribe(kEventsChannel, cb);
//
// Thread safe.
#ifndef SANDGATE_STORE_POSTGRES_NOTIFIER_H_
#define SANDGATE_STORE_POSTGRES_NOTIFIER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/cancel.h"
#include "store/notifier.h"
#include "store/postgres_connection.h"

namespace sandgate::store {

// `SELECT pg_notify(channel, payload)` on `conn`: inside the caller's transaction if one is
// open (sent at its COMMIT), else at once.
absl::Status PgNotify(PgConnection& conn, const std::string& channel, const std::string& payload);

class PostgresNotifier : public Notifier {
 public:
  static constexpr absl::Duration kMinBackoff = absl::Milliseconds(100);
  static constexpr absl::Duration kMaxBackoff = absl::Seconds(5);

  // Connects the listening connection with `options` (its clock paces the reconnects) and
  // starts its thread; `db` (the store's pool, for Notify) outlives the notifier.
  static absl::StatusOr<std::unique_ptr<PostgresNotifier>> Start(const PostgresOptions& options,
                                                                 PostgresDatabase* db);
  ~PostgresNotifier() override;

  absl::StatusOr<uint64_t> Subscribe(const std::string& channel, Callback cb) override;
  void Unsubscribe(uint64_t id) override;
  absl::Status Notify(const std::string& channel, const std::string& payload) override;

  // Times the listening connection was (re)established, the first included.
  int64_t connects() const;

 private:
  struct Subscription {
    std::string channel;
    Callback cb;
  };
  PostgresNotifier(const PostgresOptions& options, PostgresDatabase* db,
                   std::unique_ptr<PostgresDatabase> listener);
  // Reconnects (with backoff) for as long as the notifier lives.
  void Loop();
  // One listening connection: LISTENs, then delivers until the connection fails (the
  // error) or the notifier stops (OK). `connected` is set once it listens.
  absl::Status Listen(bool* connected);
  // LISTENs on every subscribed channel not yet listened to on `conn`; adds them to
  // `listening`. Returns the channels it added.
  absl::StatusOr<std::set<std::string>> ListenNew(PgConnection& conn,
                                                  std::set<std::string>& listening);
  // Calls the subscribers of `channel` (all of them when `channel` is null) with `payload`.
  void Deliver(const std::string* channel, const std::string& payload);

  const PostgresOptions options_;
  PostgresDatabase* const db_;
  // A pool of one: the LISTENing connection, reopened by Acquire after it broke.
  const std::unique_ptr<PostgresDatabase> listener_;
  CancelToken stop_;
  const int wake_;  // an eventfd: Subscribe wakes the loop's poll() to LISTEN on a new channel

  mutable absl::Mutex mu_;
  std::map<uint64_t, Subscription> subs_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t connects_ ABSL_GUARDED_BY(mu_) = 0;
  // Held while callbacks run, so Unsubscribe returns only once its callback is done.
  absl::Mutex deliver_mu_;
  std::thread thread_;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_POSTGRES_NOTIFIER_H_
