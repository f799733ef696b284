// TlsReplica: one sandgated for a test or a benchmark of replicas on loopback TCP with mutual
// TLS (tests/fakes/test_certs.h), advertising its own address to the others. Its port is
// chosen (free at the time) before it starts, since its config must name it. The daemon is
// drained (SIGTERM) when the object goes.
#ifndef SANDGATE_TESTS_INTEGRATION_TLS_REPLICA_H_
#define SANDGATE_TESTS_INTEGRATION_TLS_REPLICA_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/fakes/test_certs.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {

// A free loopback port, for a daemon that must advertise it before it listens.
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bind(fd, reinterpret_cast<sockaddr*>(&a), len);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// One replica: sandgated on tcp:127.0.0.1:<port> with mutual TLS, advertising that address.
class TlsReplica {
 public:
  TlsReplica(const std::string& dir, nlohmann::json config, const TestCertificates& certs)
      : dir_(dir), port_(FreePort()), certs_(certs) {
    mkdir(dir_.c_str(), 0700);
    address_ = absl::StrCat("tcp:127.0.0.1:", port_);
    config["listen"] = address_;
    config["state_dir"] = dir_ + "/state";
    config["replica"]["advertise_address"] = address_;
    std::ofstream(dir_ + "/config.json") << config.dump();
  }
  ~TlsReplica() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Starts the daemon; true once it answers a call over mutual TLS (with `token`).
  bool Start(const std::string& token) {
    pid_ = fork();
    if (pid_ == 0) {
      int err = open((dir_ + "/stderr").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      dup2(err, STDERR_FILENO);
      int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
      dup2(null, STDOUT_FILENO);
      execl(SANDGATED_PATH, "sandgated", "--config", (dir_ + "/config.json").c_str(), nullptr);
      _exit(127);
    }
    return Eventually(
        "the replica to answer over mutual TLS",
        [&] {
          auto ctx = DaemonHarness::Context(token);
          ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
          v1::ListSessionsResponse resp;
          return Stub()->ListSessions(ctx.get(), {}, &resp).ok();
        },
        absl::Seconds(20));
  }
  // Sends `sig` and waits for the daemon to exit; its status as from waitpid.
  int Stop(int sig) {
    int status = 0;
    kill(pid_, sig);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // A caller's stub: the test CA, and the client certificate mutual TLS asks for.
  std::unique_ptr<v1::Sandgate::Stub> Stub() const {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadFileOrEmpty(certs_.ca);
    o.pem_cert_chain = ReadFileOrEmpty(certs_.client.cert);
    o.pem_private_key = ReadFileOrEmpty(certs_.client.key);
    return v1::Sandgate::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::SslCredentials(o)));
  }
  std::string Log() const { return ReadFileOrEmpty(dir_ + "/stderr"); }
  std::string Audit() const { return ReadFileOrEmpty(dir_ + "/state/audit.log"); }

 private:
  const std::string dir_;
  const int port_;
  const TestCertificates& certs_;
  std::string address_;
  pid_t pid_ = -1;
};

// A replica's config on PostgreSQL `dsn` with mutual TLS from `certs`, `tenants`, a short
// lease, and its own uid range.
inline nlohmann::json TlsReplicaConfig(const std::string& dsn, const std::string& id,
                                       uint32_t uid_base, const TestCertificates& certs,
                                       nlohmann::json tenants, double lease_seconds = 2) {
  return {{"store", {{"type", "postgres"}, {"dsn", dsn}}},
          {"replica", {{"id", id}, {"lease_seconds", lease_seconds}, {"renew_seconds", 0.5}}},
          {"tls",
           {{"cert_file", certs.server.cert},
            {"key_file", certs.server.key},
            {"client_ca_file", certs.ca},
            {"require_client_cert", true}}},
          {"tenants", std::move(tenants)},
          {"local", {{"uid_base", uid_base}, {"uid_count", 8}}}};
}

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_INTEGRATION_TLS_REPLICA_H_
