// PostgresStore: Store on a PostgreSQL database that several sandgated replicas share.
//
// The same contract as SqliteStore (store/store.h), with what a shared database adds: every
// uniqueness rule (an idempotency key per tenant, an event's seq per run) is a constraint
// of the database, so two replicas racing one key or one seq get one row and
// ALREADY_EXISTS, never two. The schema is migrated at Open (store/postgres_schema.h).
//
// Durability as SqliteStore's: commits are not waited onto disk (a crashed server can lose
// its last fraction of a second, never consistency), except a durable journal record,
// which is flushed before Record returns.
//
//   PostgresOptions o;
//   o.dsn = "host=/run/postgresql dbname=sandgate user=sandgate";
//   SANDGATE_ASSIGN_OR_RETURN(auto store, PostgresStore::Open(o));
//
// Thread safe: statements run on connections of the pool (PostgresDatabase).
#ifndef SANDGATE_STORE_POSTGRES_STORE_H_
#define SANDGATE_STORE_POSTGRES_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "store/postgres_connection.h"
#include "store/store.h"

namespace sandgate::store {

class PostgresStore : public Store {
 public:
  // Connects and migrates the schema; FAILED_PRECONDITION if the database's schema is
  // newer than this binary's.
  static absl::StatusOr<std::unique_ptr<PostgresStore>> Open(const PostgresOptions& options);

  // The pool, for other parts that keep their tables in the same database (the replica
  // tables). Lives as long as the store.
  PostgresDatabase& database() { return *db_; }

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
  // The lease table (PostgresReplicaStore) is in the same database: a fenced write checks
  // and locks the writer's lease row in its own statement.
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
  explicit PostgresStore(std::unique_ptr<PostgresDatabase> db) : db_(std::move(db)) {}
  // Runs and sessions share one table shape. `request_sha256` null: an update of an
  // existing row (or an insert), which keeps the stored fingerprint.
  absl::Status PutRecord(PgConnection& conn, const char* table, const char* kind,
                         const std::string& id, const std::string& tenant, const std::string& key,
                         const std::string& replica, int64_t status, int64_t ended_ns,
                         std::string proto, const std::string* request_sha256);
  // PutRun's statements on `conn` (in its transaction, if one is open).
  absl::Status PutRunOn(PgConnection& conn, const v1::Run& run);
  // PutSession's statement on `conn` (in its transaction, if one is open).
  absl::Status PutSessionOn(PgConnection& conn, const v1::Session& session);
  // FenceWrites: replica "" = not fenced.
  struct Fence {
    std::string replica;
    int64_t epoch = 0;
  };
  Fence fence_now();
  // Why a fenced write to `record` (id `id` in `table`; null for events) was refused.
  absl::Status Fenced(PgConnection& conn, const Fence& fence, const char* table,
                      const std::string& record, const std::string& id);
  // The rows `sql` selects for owner `replica` ($1), parsed.
  template <typename Message>
  absl::StatusOr<std::vector<Message>> ListOwned(const char* what, const char* sql,
                                                 const std::string& replica, const char* kind);
  absl::Status InsertFencedEvents(PgConnection& conn, const Fence& fence, const v1::Event* events,
                                  size_t n);
  absl::StatusOr<std::optional<KeyedRecord>> FindByKey(const char* table, const std::string& tenant,
                                                       const std::string& key);
  absl::Status InsertEvents(PgConnection& conn, const v1::Event* events, size_t n);

  const std::unique_ptr<PostgresDatabase> db_;
  absl::Mutex fence_mu_;
  Fence fence_ ABSL_GUARDED_BY(fence_mu_);
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_POSTGRES_STORE_H_
