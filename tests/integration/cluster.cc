#include "tests/integration/cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "store/postgres_connection.h"
#include "tests/common/eventually.h"
#include "tests/common/temp_dir.h"

namespace sandgate::testing {
namespace {

// A port the kernel has just handed out on 127.0.0.1. Replicas need their address before they
// start (advertise_address) and keep it across a restart, so the port is chosen here, not by
// the daemon; another process taking it in between is unlikely on loopback.
absl::StatusOr<int> FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket");
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return absl::InternalError("bind 127.0.0.1:0");
  return ntohs(addr.sin_port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Create(ClusterOptions options) {
  if (options.dsn.empty()) return absl::InvalidArgumentError("cluster: no dsn");
  if (options.uid_base == 0) return absl::InvalidArgumentError("cluster: no uid_base");
  std::unique_ptr<Cluster> c(new Cluster(std::move(options)));
  char tmpl[] = "/tmp/sg-cluster-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cluster: mkdtemp");
  c->dir_ = tmpl;
  absl::StatusOr<TestCertificates> certs = TestCertificates::Create(c->dir_);
  if (!certs.ok()) return certs.status();
  c->certs_ = *certs;
  const ClusterOptions& o = c->options_;
  nlohmann::json openai;
  if (!o.openai_base_url.empty()) {
    const std::string key_file = WriteKeyFile(c->dir_, o.openai_key);
    openai = {{"base_url", o.openai_base_url},
              {"api_key_file", key_file},
              {"model", "fake-model"},
              {"max_turns", 10}};
  }
  const nlohmann::json tenants =
      nlohmann::json::array({{{"name", "alpha"}, {"token_sha256", Sha256::Hex(kAlphaToken)}},
                             {{"name", "beta"}, {"token_sha256", Sha256::Hex(kBetaToken)}}});
  for (int i = 0; i < o.replicas; ++i) {
    absl::StatusOr<int> port = FreePort();
    if (!port.ok()) return port.status();
    c->ports_.push_back(*port);
    c->pids_.push_back(-1);
    nlohmann::json config = {
        {"listen", absl::StrCat("tcp:", c->address(i))},
        {"state_dir", c->state_dir(i)},
        {"store", {{"type", "postgres"}, {"dsn", o.dsn}}},
        {"replica",
         {{"id", Id(i)},
          {"advertise_address", c->address(i)},
          {"lease_seconds", o.lease_seconds},
          {"renew_seconds", o.renew_seconds}}},
        {"tls",
         {{"cert_file", c->certs_.server.cert},
          {"key_file", c->certs_.server.key},
          {"client_ca_file", c->certs_.ca},
          {"require_client_cert", true}}},
        {"tenants", tenants},
        {"local", {{"uid_base", o.uid_base + 100 * i}, {"uid_count", o.uid_count}}}};
    if (!openai.is_null()) config["openai"] = openai;
    config.merge_patch(o.config);
    std::ofstream(absl::StrCat(c->dir_, "/", Id(i), ".json")) << config.dump(2);
  }
  return c;
}

Cluster::~Cluster() {
  for (int i = 0; i < size(); ++i) {
    if (running(i)) kill(pids_[i], SIGTERM);
  }
  for (int i = 0; i < size(); ++i) {
    if (!running(i)) continue;
    const pid_t pid = pids_[i];
    if (!Eventually(
            absl::StrCat(Id(i), " to exit after SIGTERM"),
            [pid] { return waitpid(pid, nullptr, WNOHANG) == pid; }, absl::Seconds(10))) {
      Stop(i, SIGKILL);
    }
    pids_[i] = -1;
  }
  if (keep_dir_) {
    std::fprintf(stderr, "cluster: kept %s (configs, logs, state)\n", dir_.c_str());
  } else if (!dir_.empty()) {
    std::system(absl::StrCat("rm -rf '", dir_, "'").c_str());
  }
}

std::string Cluster::Id(int i) { return absl::StrCat("replica-", std::string(1, 'a' + i)); }

int Cluster::IndexOf(const std::string& replica_id) const {
  for (int i = 0; i < size(); ++i) {
    if (Id(i) == replica_id) return i;
  }
  return -1;
}

std::string Cluster::address(int i) const { return absl::StrCat("127.0.0.1:", ports_[i]); }

std::string Cluster::state_dir(int i) const { return absl::StrCat(dir_, "/", Id(i)); }

std::string Cluster::Log(int i) const { return ReadFileOrEmpty(state_dir(i) + ".log"); }

absl::Status Cluster::Start(int i) {
  if (running(i)) return absl::FailedPreconditionError(Id(i) + " is running");
  const std::string config = absl::StrCat(dir_, "/", Id(i), ".json");
  const std::string log = state_dir(i) + ".log", out = state_dir(i) + ".out";
  // Emptied here, not in the child: a restart must not read the last start's line.
  std::ofstream(out, std::ios::trunc).close();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork");
  if (pid == 0) {
    int err = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int so = open(out.c_str(), O_WRONLY | O_CLOEXEC);
    dup2(err, 2);
    dup2(so, 1);
    execl(SANDGATED_PATH, "sandgated", "--config", config.c_str(), "--log-level", "debug", nullptr);
    _exit(127);
  }
  pids_[i] = pid;
  // Its first line on stdout says it listens: the store is open and the lease joined.
  bool exited = false;
  const bool up = Eventually(
      absl::StrCat(Id(i), " to listen"),
      [&] {
        exited = waitpid(pid, nullptr, WNOHANG) == pid;
        return exited || absl::StartsWith(ReadFileOrEmpty(out), "sandgated listening on");
      },
      absl::Seconds(15));
  if (exited) {
    pids_[i] = -1;
    return absl::InternalError(absl::StrCat(Id(i), " exited during start:\n", Log(i)));
  }
  if (!up) return absl::InternalError(absl::StrCat(Id(i), " did not listen in 15 s:\n", Log(i)));
  return absl::OkStatus();
}

absl::Status Cluster::StartAll() {
  for (int i = 0; i < size(); ++i) {
    if (absl::Status st = Start(i); !st.ok()) return st;
  }
  return absl::OkStatus();
}

int Cluster::Stop(int i, int sig) {
  if (!running(i)) return -1;
  kill(pids_[i], sig);
  int status = 0;
  waitpid(pids_[i], &status, 0);
  pids_[i] = -1;
  return status;
}

std::shared_ptr<grpc::Channel> Cluster::Channel(const std::string& target) const {
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ReadFileOrEmpty(certs_.ca);
  tls.pem_cert_chain = ReadFileOrEmpty(certs_.client.cert);
  tls.pem_private_key = ReadFileOrEmpty(certs_.client.key);
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(80 << 20);
  args.SetMaxReceiveMessageSize(80 << 20);
  args.SetLoadBalancingPolicyName("round_robin");
  // A list's target is no host name; the certificate names 127.0.0.1.
  args.SetSslTargetNameOverride("127.0.0.1");
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(tls), args);
}

std::unique_ptr<v1::Sandgate::Stub> Cluster::Stub(int i) const {
  return v1::Sandgate::NewStub(Channel(address(i)));
}

std::unique_ptr<v1::Sandgate::Stub> Cluster::StubAll() const {
  std::vector<std::string> all;
  for (int i = 0; i < size(); ++i) all.push_back(address(i));
  return v1::Sandgate::NewStub(Channel(absl::StrCat("ipv4:", absl::StrJoin(all, ","))));
}

std::unique_ptr<grpc::ClientContext> Cluster::Context(const std::string& token) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + token);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return ctx;
}

int64_t Cluster::QueryInt(const std::string& sql) const {
  store::PostgresOptions o;
  o.dsn = options_.dsn;
  o.pool_size = 1;
  auto db = store::PostgresDatabase::Open(o);
  if (!db.ok()) {
    std::fprintf(stderr, "cluster: %s\n", std::string(db.status().message()).c_str());
    return -1;
  }
  auto conn = (*db)->Acquire("cluster query");
  if (!conn.ok()) return -1;
  auto r = (*conn)->Exec("cluster query", sql.c_str());
  if (!r.ok()) {
    std::fprintf(stderr, "cluster: %s: %s\n", sql.c_str(),
                 std::string(r.status().message()).c_str());
    return -1;
  }
  return r->Int(0, 0);
}

}  // namespace sandgate::testing
