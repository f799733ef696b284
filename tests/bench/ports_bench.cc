// Request latency through an exposed port (docs/sessions.md "Exposed ports") against a direct
// request to the same server, on one real sandgated (gRPC on a Unix socket, http_listen on
// loopback):
//
//   build/bin/bench_ports [--requests 500] [--isolation namespaces|gvisor]   (as root)
//
// The server is `python3 -m http.server` serving a 1 KiB file, twice: inside a session (reached
// through GET /v1/sessions/SID/ports/8000/f.txt with the tenant's token) and on the host
// (reached at 127.0.0.1 directly) — the same program, the same file. The requests alternate
// one by one between the two, each on a new connection (libcurl, no reuse: the proxy's upstream
// connection is one per request too). Prints the median and p90 of each, in ms.
#include <curl/curl.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"

namespace {

using sandgate::bench::Daemon;
using sandgate::bench::FreePort;
using sandgate::bench::NowNanos;
using sandgate::bench::Quantile;
namespace v1 = sandgate::v1;

size_t Sink(char*, size_t size, size_t n, void* out) {
  *static_cast<size_t*>(out) += size * n;
  return size * n;
}

// One GET on a new connection: its HTTP status (0 on a transport error) and bytes.
long Get(CURL* curl, const std::string& url, const std::string& token, size_t* bytes) {
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(curl, CURLOPT_FRESH_CONNECT, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Sink);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, bytes);
  curl_slist* headers = nullptr;
  if (!token.empty())
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  long status = 0;
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  int requests = 500;
  std::string isolation = "namespaces";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--requests") == 0) requests = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--isolation") == 0) isolation = argv[i + 1];
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const int http_port = FreePort();
  Daemon d =
      Daemon::Start(std::string(R"({"http_listen": "127.0.0.1:)") + std::to_string(http_port) +
                    R"(", "allow_plaintext_tokens": true, "tenants": [{"name": "bench",
      "token_sha256": "7137e16f75a1d75b6fd65930672814806cdc1a0d6e0aa38611afc996a402258b"}]})");
  // (the sha256 of "bench-token")
  auto stub = d.Stub();
  auto ctx = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", "Bearer bench-token");
    return c;
  };
  const std::string file(1024, 'x');
  v1::CreateSessionRequest create;
  create.mutable_sandbox()->set_isolation(isolation);
  auto* f = create.mutable_sandbox()->add_files();
  f->set_path("f.txt");
  f->set_content(file);
  v1::Session session;
  grpc::Status st = stub->CreateSession(ctx().get(), create, &session);
  if (!st.ok()) {
    std::fprintf(stderr, "CreateSession: %s\n", st.error_message().c_str());
    return 1;
  }
  const std::string server = "python3 -m http.server 8000 --bind 127.0.0.1";
  if (isolation == "gvisor") {
    // StartProcess's stdin pipe does not cross the gVisor tunnel yet: a command that leaves
    // the server running in a session of its own.
    v1::ExecRequest exec;
    exec.set_session_id(session.id());
    exec.set_command("setsid " + server + " >/dev/null 2>&1 & sleep 1");
    auto c = ctx();
    auto reader = stub->Exec(c.get(), exec);
    v1::ExecResponse r;
    while (reader->Read(&r)) {
    }
    st = reader->Finish();
  } else {
    v1::StartProcessRequest start;
    start.set_session_id(session.id());
    start.set_command(server);
    v1::Process proc;
    st = stub->StartProcess(ctx().get(), start, &proc);
  }
  if (!st.ok()) {
    std::fprintf(stderr, "starting the server: %s\n", st.error_message().c_str());
    return 1;
  }
  v1::ExposePortRequest expose;
  expose.set_session_id(session.id());
  expose.set_port(8000);
  v1::ExposedPort exposed;
  if (!(st = stub->ExposePort(ctx().get(), expose, &exposed)).ok()) {
    std::fprintf(stderr, "ExposePort: %s\n", st.error_message().c_str());
    return 1;
  }
  // The same server on the host, serving the same file.
  char tmpl[] = "/tmp/sg-bench-ports-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/f.txt") << file;
  const int direct_port = FreePort();
  pid_t host_server = fork();
  if (host_server == 0) {
    if (chdir(dir.c_str()) != 0) _exit(127);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execlp("python3", "python3", "-m", "http.server", std::to_string(direct_port).c_str(), "--bind",
           "127.0.0.1", nullptr);
    _exit(127);
  }
  const std::string proxied =
      "http://127.0.0.1:" + std::to_string(http_port) + exposed.path() + "f.txt";
  const std::string direct = "http://127.0.0.1:" + std::to_string(direct_port) + "/f.txt";
  CURL* curl = curl_easy_init();
  for (int i = 0; i < 200; ++i) {  // both servers up
    size_t b = 0, c = 0;
    if (Get(curl, proxied, "bench-token", &b) == 200 && Get(curl, direct, "", &c) == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<double> through, straight;
  for (int i = 0; i < requests; ++i) {
    for (int face = 0; face < 2; ++face) {
      const bool proxy = (i + face) % 2 == 0;  // alternate which goes first
      size_t bytes = 0;
      const int64_t t0 = NowNanos();
      long status = Get(curl, proxy ? proxied : direct, proxy ? "bench-token" : "", &bytes);
      const double ms = (NowNanos() - t0) / 1e6;
      if (status != 200 || bytes != file.size()) {
        std::fprintf(stderr, "%s: status %ld, %zu bytes\n", proxy ? "proxied" : "direct", status,
                     bytes);
        return 1;
      }
      (proxy ? through : straight).push_back(ms);
    }
  }
  curl_easy_cleanup(curl);
  kill(host_server, SIGTERM);
  waitpid(host_server, nullptr, 0);
  std::system(("rm -rf " + dir).c_str());
  std::printf("isolation %s, %d requests each, 1 KiB file, new connection each\n",
              isolation.c_str(), requests);
  std::printf("through the exposed port: median %.3f ms, p90 %.3f ms\n", Quantile(through, 0.5),
              Quantile(through, 0.9));
  std::printf("direct to the same server: median %.3f ms, p90 %.3f ms\n", Quantile(straight, 0.5),
              Quantile(straight, 0.9));
  return 0;
}
