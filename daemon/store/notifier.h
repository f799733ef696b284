// Notifier: a nudge from one replica to the others that something in the shared store changed.
//
// A notification says only where to look (a channel, and a small payload such as a run id
// and its last seq); the store's tables stay the truth. Notifications can be lost (a
// listener reconnecting misses what was sent meanwhile), so a subscriber that must not miss
// a change also polls the table on a bounded interval: a lost notification delays, never
// loses. PostgreSQL carries them (LISTEN/NOTIFY, store/postgres_notifier.h); on SQLite there
// is none (no notifier: the poll is the mechanism).
//
//   uint64_t id = notifier->Subscribe("sandgate_events",
//       [](const std::string& channel, const std::string& payload) { ... });
//   notifier->Notify("sandgate_queue", "");   // alone; inside a store transaction, see
//                                             // PgNotify (store/postgres_notifier.h)
//   notifier->Unsubscribe(id);
//
// Thread safe. Callbacks run on the notifier's own thread, one at a time, never under a lock
// a subscriber might hold; they must not block, nor Subscribe or Unsubscribe.
#ifndef SANDGATE_STORE_NOTIFIER_H_
#define SANDGATE_STORE_NOTIFIER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sandgate::store {

// The channel of appended events: payload "<run id> <last seq>", one per run per batch
// (PostgresStore::AppendEvents sends them with the events, in the same transaction).
inline constexpr char kEventsChannel[] = "sandgate_events";

class Notifier {
 public:
  // `payload` as sent; EMPTY when the listener has just (re)connected: anything on the
  // channel may have changed while it was not listening, so look at the table now.
  using Callback = std::function<void(const std::string& channel, const std::string& payload)>;

  virtual ~Notifier() = default;

  // From now on, calls `cb` for every notification on `channel` (a lower-case SQL
  // identifier: letters, digits, '_'; INVALID_ARGUMENT otherwise), this process's own
  // included. Returns an id for Unsubscribe.
  virtual absl::StatusOr<uint64_t> Subscribe(const std::string& channel, Callback cb) = 0;
  // Once it returns, the subscription's callback is not running and never runs again.
  virtual void Unsubscribe(uint64_t id) = 0;
  // Sends `payload` (at most kMaxPayload bytes) on `channel` to every listener, committed at
  // once.
  virtual absl::Status Notify(const std::string& channel, const std::string& payload) = 0;

  // PostgreSQL's limit is 8000 bytes; a nudge needs far less.
  static constexpr size_t kMaxPayload = 1000;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_NOTIFIER_H_
