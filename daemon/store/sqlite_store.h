// SqliteStore: Store on one SQLite database in WAL mode.
//
// Thread safe: one connection guarded by a mutex (SQLite serialises writers anyway, and the
// daemon's write rate is a few events per command). Journal writes are synchronous=FULL so
// a record is on disk before the resource it names exists; runs and events use NORMAL (WAL),
// which a killed daemon cannot lose, only a power cut — and that takes the sandboxes too.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto store, SqliteStore::Open("/var/lib/sandgate/state.db"));
#ifndef SANDGATE_STORE_SQLITE_STORE_H_
#define SANDGATE_STORE_SQLITE_STORE_H_

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace sandgate::store {

class SqliteStore : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path);
  ~SqliteStore() override;

  absl::Status CreateRun(const v1::Run& run, const std::string& request_sha256) override;
  absl::Status PutRun(const v1::Run& run) override;
  absl::StatusOr<v1::Run> GetRun(const std::string& run_id) override;
  absl::Status PutRunRequest(const std::string& run_id,
                             const v1::RunAnalysisRequest& request) override;
  absl::StatusOr<v1::RunAnalysisRequest> GetRunRequest(const std::string& run_id) override;
  absl::StatusOr<RunPage> ListRuns(const std::string& tenant, uint32_t page_size,
                                   const std::string& page_token) override;
  absl::StatusOr<std::optional<KeyedRecord>> FindRunByIdempotencyKey(
      const std::string& tenant, const std::string& key) override;
  absl::StatusOr<std::vector<v1::Run>> ListUnfinishedRuns() override;
  absl::StatusOr<std::vector<v1::Run>> ListUnfinishedRunsOf(const std::string& replica) override;
  absl::StatusOr<std::vector<v1::Session>> ListLiveSessionsOf(const std::string& replica) override;
  // The lease table (SqliteReplicaStore) is in the same file: a fenced write checks it in
  // its own statement.
  void FenceWrites(const std::string& replica, int64_t epoch) override;
  absl::Status CreateSession(const v1::Session& session,
                             const std::string& request_sha256) override;
  absl::Status PutSession(const v1::Session& session) override;
  absl::StatusOr<v1::Session> GetSession(const std::string& session_id) override;
  absl::StatusOr<std::vector<v1::Session>> ListSessions(const std::string& tenant,
                                                        bool include_closed) override;
  absl::StatusOr<std::optional<KeyedRecord>> FindSessionByIdempotencyKey(
      const std::string& tenant, const std::string& key) override;
  absl::StatusOr<std::vector<std::string>> PurgeBefore(absl::Time cutoff) override;
  absl::Status AppendEvent(const v1::Event& event) override;
  absl::Status AppendEventsWithRuns(const std::vector<v1::Event>& events,
                                    const std::vector<v1::Run>& runs) override;
  absl::Status AppendEventsWithRecords(const std::vector<v1::Event>& events,
                                       const std::vector<v1::Run>& runs,
                                       const std::vector<v1::Session>& sessions) override;
  absl::Status SettleTakeover(const std::vector<v1::Event>& events,
                              const std::vector<v1::Run>& runs,
                              const std::vector<v1::Session>& sessions, const std::string& lost,
                              const std::string& by) override;
  absl::StatusOr<std::vector<v1::Event>> ReadEvents(const std::string& run_id, int64_t after_seq,
                                                    uint32_t limit) override;
  absl::StatusOr<int64_t> LastSeq(const std::string& run_id) override;

  absl::Status Record(const JournalEntry& entry) override;
  absl::Status Erase(const std::string& id) override;
  absl::StatusOr<std::vector<JournalEntry>> List() override;

 private:
  explicit SqliteStore(sqlite3* db) : db_(db) {}
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Brings an older database to the current schema (PRAGMA user_version), in
  // one transaction.
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs and sessions share one table shape: id, tenant, idempotency_key,
  // request_sha256, status, proto. `request_sha256` null: an update, which
  // keeps the stored fingerprint.
  template <typename Message>
  absl::Status PutRecord(const char* table, const char* kind, const Message& m, int64_t status,
                         const std::string* request_sha256) ABSL_LOCKS_EXCLUDED(mu_);
  template <typename Message>
  absl::Status PutRecordLocked(const char* table, const char* kind, const Message& m,
                               int64_t status, const std::string* request_sha256)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // PutRun's statements, in the caller's transaction (or each its own).
  absl::Status PutRunLocked(const v1::Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename Message>
  absl::StatusOr<Message> GetRecord(const char* table, const char* kind, const std::string& id);
  absl::StatusOr<std::optional<KeyedRecord>> FindByKey(const char* table, const std::string& tenant,
                                                       const std::string& key);
  absl::Status Error(const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a fenced write to `record` (id `id` in `table`; null for events) was refused.
  absl::Status Fenced(const char* table, const std::string& record, const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status InsertEvent(const v1::Event& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs a statement without parameters or rows through the statement cache.
  absl::Status StepCached(const char* sql, const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The statement for `sql` (a string literal: cached by address), prepared once and kept
  // for the store's life; null if it cannot be prepared. For the statements run per event,
  // whose preparation would otherwise cost as much as running them.
  sqlite3_stmt* Cached(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);
  std::map<const char*, sqlite3_stmt*> cached_ ABSL_GUARDED_BY(mu_);
  // FenceWrites: "" = not fenced.
  std::string fence_replica_ ABSL_GUARDED_BY(mu_);
  int64_t fence_epoch_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_SQLITE_STORE_H_
