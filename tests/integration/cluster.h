// Cluster: N real sandgated replicas (three by default) sharing one PostgreSQL database, on
// loopback TCP with mutual TLS (a throwaway CA, tests/fakes/test_certs.h), each with its own
// state directory and uid range, for the multi-replica tests, the chaos test and the cluster
// benchmark. A replica can be SIGKILLed and restarted on the same address.
//
//   ClusterOptions o;
//   o.dsn = *PostgresServer::Shared().CreateDatabase();
//   o.uid_base = 420000;
//   absl::StatusOr<std::unique_ptr<Cluster>> c = Cluster::Create(o);
//   ASSERT_TRUE(c.ok() && (*c)->StartAll().ok());
//   auto ctx = Cluster::Context(Cluster::kAlphaToken);
//   (*c)->Stub(1)->RunAnalysis(ctx.get(), SampleRequest(), &run);   // through replica-b
//   (*c)->Stop(0, SIGKILL);                                          // replica-a dies
//
// Every replica has the tenants `alpha` and `beta` (kAlphaToken, kBetaToken), a 2 s lease
// renewed every 0.5 s, and the options' `config` merged over that (JSON merge patch). Errors
// are absl::Status (no gtest assertions), so programs without gtest (tests/load, tests/bench)
// use it too.
//
// Not thread safe: one thread starts and stops replicas; Stub, Context and Log may be called
// from any thread.
#ifndef SANDGATE_TESTS_INTEGRATION_CLUSTER_H_
#define SANDGATE_TESTS_INTEGRATION_CLUSTER_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/fakes/test_certs.h"

namespace sandgate::testing {

struct ClusterOptions {
  int replicas = 3;
  std::string dsn;  // the shared database (PostgresServer::CreateDatabase)
  // Replica i's sandboxes run as uid_base + 100 i and the uid_count after it: a range no
  // other test running at the same time uses.
  uint32_t uid_base = 0;
  uint32_t uid_count = 32;
  double lease_seconds = 2;
  double renew_seconds = 0.5;
  // With a base URL (a FakeOpenAiServer's base_url()), every replica's openai provider and
  // agent use it with this key (written to a 0600 file of the cluster's), model fake-model.
  std::string openai_base_url, openai_key;
  nlohmann::json config = nlohmann::json::object();  // merged over every replica's config
};

class Cluster {
 public:
  static constexpr char kAlphaToken[] = "cluster-alpha-token";
  static constexpr char kBetaToken[] = "cluster-beta-token";

  // Makes the directory, the certificates and each replica's config; starts nothing.
  static absl::StatusOr<std::unique_ptr<Cluster>> Create(ClusterOptions options);
  // Drains every running replica (SIGTERM, then SIGKILL after 10 s) and removes the
  // directory unless keep_dir() was asked for (a failed test's logs).
  ~Cluster();

  // Starts replica i and waits until it listens (15 s at most). INTERNAL with its log when it
  // exits or does not come up.
  absl::Status Start(int i);
  absl::Status StartAll();
  // Sends `sig` to replica i and waits for it; the status as from waitpid (-1 if not running).
  int Stop(int i, int sig);
  bool running(int i) const { return pids_[i] > 0; }
  pid_t pid(int i) const { return pids_[i]; }

  int size() const { return static_cast<int>(pids_.size()); }
  static std::string Id(int i);                      // "replica-a", "replica-b", …
  int IndexOf(const std::string& replica_id) const;  // -1 if none
  std::string address(int i) const;                  // "127.0.0.1:PORT"
  std::string state_dir(int i) const;
  std::string Log(int i) const;  // replica i's stderr so far (all its starts)
  const std::string& dsn() const { return options_.dsn; }
  const TestCertificates& certs() const { return certs_; }
  void keep_dir() { keep_dir_ = true; }

  // A channel to replica i, or one round robin over all of them (what the CLI's --addr a,b,c
  // makes), with the test CA and the client certificate.
  std::unique_ptr<v1::Sandgate::Stub> Stub(int i) const;
  std::unique_ptr<v1::Sandgate::Stub> StubAll() const;
  // A context carrying `token`, with a 120 s deadline.
  static std::unique_ptr<grpc::ClientContext> Context(const std::string& token);

  // The first column of the first row of `sql` on the shared database, or -1 (logged).
  int64_t QueryInt(const std::string& sql) const;

 private:
  explicit Cluster(ClusterOptions options) : options_(std::move(options)) {}
  std::shared_ptr<grpc::Channel> Channel(const std::string& target) const;

  ClusterOptions options_;
  std::string dir_;
  TestCertificates certs_;
  std::vector<int> ports_;
  std::vector<pid_t> pids_;
  bool keep_dir_ = false;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_INTEGRATION_CLUSTER_H_
