// What the replica integration tests (replicas_test.cc, replica_fencing_test.cc) ask of the
// daemons they run and of the PostgreSQL database those share.
#ifndef SANDGATE_TESTS_INTEGRATION_REPLICA_CALLS_H_
#define SANDGATE_TESTS_INTEGRATION_REPLICA_CALLS_H_

#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "store/postgres_connection.h"
#include "tests/fakes/postgres_server.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {

inline absl::StatusOr<v1::Run> GetRun(DaemonHarness& d, const std::string& id) {
  auto stub = d.Stub();
  auto ctx = DaemonHarness::Context();
  v1::GetRunRequest req;
  req.set_run_id(id);
  v1::Run run;
  grpc::Status st = stub->GetRun(ctx.get(), req, &run);
  if (!st.ok()) return absl::UnknownError(st.error_message());
  return run;
}

// Follows `run_id` on `d` until its first command has started (its sandbox exists).
inline bool WaitForCommand(DaemonHarness& d, const std::string& run_id) {
  auto stub = d.Stub();
  auto ctx = DaemonHarness::Context();
  v1::StreamEventsRequest req;
  req.set_run_id(run_id);
  req.set_follow(true);
  auto reader = stub->StreamEvents(ctx.get(), req);
  v1::Event e;
  bool started = false;
  while (!started && reader->Read(&e)) started = e.type() == "command.started";
  ctx->TryCancel();
  reader->Finish();
  return started;
}

// The one number `sql` selects from the shared database; -1 (and a test failure) on error.
inline int64_t CountRows(const std::string& dsn, const std::string& sql) {
  absl::StatusOr<int64_t> n = QueryCount(dsn, sql.c_str());
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : -1;
}

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_INTEGRATION_REPLICA_CALLS_H_
