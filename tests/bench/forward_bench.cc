// The cost of forwarding (docs/replicas.md, "Forwarding"): Exec on a kept session of replica
// A, sent directly to A and through replica B, alternately in the same run, with two real
// daemons on one throwaway PostgreSQL database and loopback TCP with mutual TLS. Prints the
// median and p90 of each, for a command with no output and one writing 1 MiB; then a GET
// through an exposed port of that session (docs/sessions.md, "Exposed ports"), to A's REST
// port and to B's (relayed on A's ConnectPort stream), each on a new HTTPS connection.
//
//   build/bin/bench_forward [rounds]     # default 200
#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/sha256.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/postgres_server.h"
#include "tests/fakes/test_certs.h"
#include "tests/integration/rest_client.h"
#include "tests/integration/tls_replica.h"

namespace sandgate::testing {
namespace {

constexpr char kToken[] = "bench-forward-token";

// Wall time of one Exec, from the call to its status, in ms; -1 when it failed.
double TimedExec(v1::Sandgate::Stub& stub, const std::string& session, const std::string& cmd) {
  const auto start = std::chrono::steady_clock::now();
  auto ctx = DaemonHarness::Context(kToken);
  v1::ExecRequest req;
  req.set_session_id(session);
  req.set_command(cmd);
  auto reader = stub.Exec(ctx.get(), req);
  v1::ExecResponse r;
  while (reader->Read(&r)) {
  }
  if (!reader->Finish().ok()) return -1;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Wall time of one GET of `url` on a new connection, in ms; -1 unless it answered 200 with
// `want` bytes.
double TimedGet(CURL* curl, const std::string& url, const std::string& ca, size_t want) {
  const auto start = std::chrono::steady_clock::now();
  std::string body;
  body.reserve(want);  // no reallocation in the timed path
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CAINFO, ca.c_str());
  curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(curl, CURLOPT_FRESH_CONNECT, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_slist* headers = curl_slist_append(nullptr, "Authorization: Bearer bench-forward-token");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  long status = 0;
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  if (status != 200 || body.size() != want) return -1;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

int Run(int rounds) {
  ScopedTempDir tmp("sg-bench-forward");
  absl::StatusOr<TestCertificates> certs = TestCertificates::Create(tmp.path());
  if (!certs.ok()) {
    std::fprintf(stderr, "certificates: %s\n", certs.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::string> dsn = PostgresServer::Shared().CreateDatabase();
  if (!dsn.ok()) {
    std::fprintf(stderr, "postgres: %s\n", dsn.status().ToString().c_str());
    return 1;
  }
  const nlohmann::json tenants = {{{"name", "bench"}, {"token_sha256", Sha256::Hex(kToken)}}};
  const int http[2] = {FreePort(), FreePort()};
  auto config = [&](const char* id, uint32_t uid_base, int http_port) {
    nlohmann::json c = TlsReplicaConfig(*dsn, id, uid_base, *certs, tenants, 15);
    c["http_listen"] = absl::StrCat("127.0.0.1:", http_port);
    return c;
  };
  TlsReplica a(tmp.path() + "/a", config("replica-a", 306000, http[0]), *certs);
  TlsReplica b(tmp.path() + "/b", config("replica-b", 306100, http[1]), *certs);
  if (!a.Start(kToken) || !b.Start(kToken)) {
    std::fprintf(stderr, "a replica did not start:\n%s\n%s\n", a.Log().c_str(), b.Log().c_str());
    return 1;
  }
  auto direct = a.Stub();
  auto through = b.Stub();
  v1::Session s;
  {
    v1::CreateSessionRequest req;
    for (const auto& [path, size] : {std::pair<const char*, size_t>{"f1k.txt", 1024},
                                     std::pair<const char*, size_t>{"f1m.bin", 1 << 20}}) {
      auto* f = req.mutable_sandbox()->add_files();
      f->set_path(path);
      f->set_content(std::string(size, 'x'));
    }
    grpc::Status st = direct->CreateSession(DaemonHarness::Context(kToken).get(), req, &s);
    if (!st.ok()) {
      std::fprintf(stderr, "CreateSession: %s\n", st.error_message().c_str());
      return 1;
    }
  }
  struct Case {
    const char* name;
    std::string command;
  };
  for (const Case& c :
       {Case{"true", "true"}, Case{"1 MiB of output", "head -c 1048576 /dev/zero"}}) {
    for (int i = 0; i < 10; ++i) {  // warm: channels connected, caches filled
      TimedExec(*direct, s.id(), c.command);
      TimedExec(*through, s.id(), c.command);
    }
    std::vector<double> on_a, via_b;
    for (int i = 0; i < rounds; ++i) {
      double x = TimedExec(*direct, s.id(), c.command);
      double y = TimedExec(*through, s.id(), c.command);
      if (x < 0 || y < 0) {
        std::fprintf(stderr, "an Exec failed\n%s\n", b.Log().c_str());
        return 1;
      }
      on_a.push_back(x);
      via_b.push_back(y);
    }
    const double ma = Percentile(on_a, 0.5), mb = Percentile(via_b, 0.5);
    std::printf(
        "Exec %-16s rounds %d: directly on A median %.2f ms p90 %.2f; through B median %.2f ms "
        "p90 %.2f; +%.2f ms (%.2fx)\n",
        c.name, rounds, ma, Percentile(on_a, 0.9), mb, Percentile(via_b, 0.9), mb - ma, mb / ma);
  }
  // The same session's exposed port, through A's REST port and through B's.
  {
    v1::StartProcessRequest start;
    start.set_session_id(s.id());
    start.set_command("python3 -m http.server 8000 --bind 127.0.0.1");
    v1::Process process;
    v1::ExposePortRequest expose;
    expose.set_session_id(s.id());
    expose.set_port(8000);
    v1::ExposedPort exposed;
    if (!direct->StartProcess(DaemonHarness::Context(kToken).get(), start, &process).ok() ||
        !through->ExposePort(DaemonHarness::Context(kToken).get(), expose, &exposed).ok()) {
      std::fprintf(stderr, "StartProcess or ExposePort failed\n%s\n", a.Log().c_str());
      return 1;
    }
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURL* curl = curl_easy_init();
  auto url = [&](int i, const char* file) {
    return absl::StrCat("https://127.0.0.1:", http[i], "/v1/sessions/", s.id(), "/ports/8000/",
                        file);
  };
  for (int i = 0; i < 100 && TimedGet(curl, url(1, "f1k.txt"), certs->ca, 1024) < 0; ++i) {
    absl::SleepFor(absl::Milliseconds(100));  // the server starts in the background
  }
  for (const auto& [file, size] : {std::pair<const char*, size_t>{"f1k.txt", 1024},
                                   std::pair<const char*, size_t>{"f1m.bin", 1 << 20}}) {
    for (int i = 0; i < 10; ++i) {  // warm
      TimedGet(curl, url(0, file), certs->ca, size);
      TimedGet(curl, url(1, file), certs->ca, size);
    }
    std::vector<double> on_a, via_b;
    for (int i = 0; i < rounds; ++i) {
      double x = TimedGet(curl, url(0, file), certs->ca, size);
      double y = TimedGet(curl, url(1, file), certs->ca, size);
      if (x < 0 || y < 0) {
        std::fprintf(stderr, "a GET of %s failed\n%s\n", file, b.Log().c_str());
        return 1;
      }
      on_a.push_back(x);
      via_b.push_back(y);
    }
    const double ma = Percentile(on_a, 0.5), mb = Percentile(via_b, 0.5);
    std::printf(
        "GET port %-9s rounds %d: A's REST port median %.2f ms p90 %.2f; B's median %.2f ms "
        "p90 %.2f; +%.2f ms (%.2fx)\n",
        file, rounds, ma, Percentile(on_a, 0.9), mb, Percentile(via_b, 0.9), mb - ma, mb / ma);
  }
  curl_easy_cleanup(curl);
  return 0;
}

}  // namespace
}  // namespace sandgate::testing

int main(int argc, char** argv) {
  return sandgate::testing::Run(argc > 1 ? std::atoi(argv[1]) : 200);
}
