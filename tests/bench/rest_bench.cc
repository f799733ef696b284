// The REST face against gRPC, from a client process, on one real sandgated (gRPC on a Unix
// socket, http_listen on loopback):
//
//   build/bin/bench_rest [--calls 500] [--rounds 3] [--events 200] [--interval-ms 10]  (as root)
//
// getrun: GetRun of the same finished run, `calls` times per face per round, the faces
// alternating round by round; one connection each (a libcurl handle kept alive, one stub).
// Prints the median and p99 per face.
//
// lag: a run whose setup command prints a line every `interval-ms`; one SSE follower
// (GET /v1/runs/{id}/events) and one gRPC StreamEvents follower attached before the output
// starts; receipt time − event time of every command.output event, per face (client and
// daemon share the machine's clock). Both must see every event once, in order (checked).
#include <curl/curl.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"

namespace {

using sandgate::bench::Daemon;
using sandgate::bench::EventNanos;
using sandgate::bench::FreePort;
using sandgate::bench::NowNanos;
using sandgate::bench::Quantile;
namespace v1 = sandgate::v1;

std::string StartRun(v1::Sandgate::Stub& stub, const std::string& setup) {
  v1::RunAnalysisRequest req;
  req.set_playbook("sandbox-probe");
  auto* in = req.add_inputs();
  in->set_name("input.txt");
  in->set_content("x\n");
  if (!setup.empty()) req.mutable_sandbox()->add_setup_commands(setup);
  v1::Run run;
  grpc::ClientContext ctx;
  grpc::Status st = stub.RunAnalysis(&ctx, req, &run);
  if (!st.ok()) {
    std::fprintf(stderr, "RunAnalysis: %s\n", st.error_message().c_str());
    std::exit(1);
  }
  return run.id();
}

void WaitFinished(v1::Sandgate::Stub& stub, const std::string& run) {
  grpc::ClientContext ctx;
  v1::StreamEventsRequest req;
  req.set_run_id(run);
  req.set_follow(true);
  auto reader = stub.StreamEvents(&ctx, req);
  v1::Event e;
  while (reader->Read(&e)) {
  }
  reader->Finish();
}

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// SSE: the receipt time of each command.output event, parsed as it arrives.
struct SseSeen {
  std::string pending;
  std::vector<double> lags_ms;
  int64_t last_seq = 0;
  bool in_order = true;
};

size_t OnSse(char* data, size_t size, size_t n, void* cls) {
  const int64_t now = NowNanos();
  auto* s = static_cast<SseSeen*>(cls);
  s->pending.append(data, size * n);
  size_t end;
  while ((end = s->pending.find("\n\n")) != std::string::npos) {
    std::string block = s->pending.substr(0, end);
    s->pending.erase(0, end + 2);
    size_t d = block.find("data: ");
    if (d == std::string::npos) continue;
    v1::Event e;
    if (!google::protobuf::util::JsonStringToMessage(block.substr(d + 6), &e).ok()) continue;
    if (e.seq() != s->last_seq + 1) s->in_order = false;
    s->last_seq = e.seq();
    if (e.has_command_output()) s->lags_ms.push_back((now - EventNanos(e)) / 1e6);
  }
  return size * n;
}

void Print(const char* what, const std::vector<double>& v) {
  std::printf("  %-28s n=%zu median %.3f ms  p99 %.3f ms\n", what, v.size(), Quantile(v, 0.5),
              Quantile(v, 0.99));
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 500, rounds = 3, events = 200, interval_ms = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (k == "--calls") calls = v;
    if (k == "--rounds") rounds = v;
    if (k == "--events") events = v;
    if (k == "--interval-ms") interval_ms = v;
  }
  curl_global_init(CURL_GLOBAL_ALL);
  const int port = FreePort();
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  Daemon d = Daemon::Start("{\"http_listen\": \"127.0.0.1:" + std::to_string(port) +
                           "\", \"allow_unauthenticated_tcp\": true, \"local\": "
                           "{\"uid_base\": 350000, \"uid_count\": 16}}");
  auto stub = d.Stub();
  const std::string run = StartRun(*stub, "");
  WaitFinished(*stub, run);

  std::vector<double> grpc_ms, rest_ms;
  CURL* curl = curl_easy_init();
  std::string body;
  curl_easy_setopt(curl, CURLOPT_URL, (base + "/v1/runs/" + run).c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < calls; ++i) {
      v1::GetRunRequest req;
      req.set_run_id(run);
      v1::Run out;
      grpc::ClientContext ctx;
      int64_t t0 = NowNanos();
      if (!stub->GetRun(&ctx, req, &out).ok()) return 1;
      grpc_ms.push_back((NowNanos() - t0) / 1e6);
    }
    for (int i = 0; i < calls; ++i) {
      body.clear();
      int64_t t0 = NowNanos();
      if (curl_easy_perform(curl) != CURLE_OK) return 1;
      v1::Run out;
      if (!google::protobuf::util::JsonStringToMessage(body, &out).ok()) return 1;
      rest_ms.push_back((NowNanos() - t0) / 1e6);
    }
  }
  curl_easy_cleanup(curl);
  std::printf("GetRun of one finished run, %d calls x %d rounds per face:\n", calls, rounds);
  Print("gRPC (Unix socket)", grpc_ms);
  Print("REST (loopback TCP, JSON)", rest_ms);

  std::vector<double> grpc_lag, sse_lag;
  bool ok = true;
  for (int r = 0; r < rounds; ++r) {
    char setup[256];
    std::snprintf(setup, sizeof(setup),
                  "sleep 1; i=0; while [ $i -lt %d ]; do echo $i; sleep %.3f; i=$((i+1)); done",
                  events, interval_ms / 1000.0);
    const std::string lag_run = StartRun(*stub, setup);
    std::thread grpc_follower([&] {
      grpc::ClientContext ctx;
      v1::StreamEventsRequest req;
      req.set_run_id(lag_run);
      req.set_follow(true);
      auto reader = stub->StreamEvents(&ctx, req);
      v1::Event e;
      int64_t last = 0;
      while (reader->Read(&e)) {
        const int64_t now = NowNanos();
        if (e.seq() == 0) continue;
        if (e.seq() != last + 1) ok = false;
        last = e.seq();
        if (e.has_command_output()) grpc_lag.push_back((now - EventNanos(e)) / 1e6);
      }
      reader->Finish();
    });
    SseSeen seen;
    CURL* sse = curl_easy_init();
    curl_easy_setopt(sse, CURLOPT_URL, (base + "/v1/runs/" + lag_run + "/events").c_str());
    curl_easy_setopt(sse, CURLOPT_WRITEFUNCTION, &OnSse);
    curl_easy_setopt(sse, CURLOPT_WRITEDATA, &seen);
    CURLcode rc = curl_easy_perform(sse);
    curl_easy_cleanup(sse);
    grpc_follower.join();
    ok = ok && rc == CURLE_OK && seen.in_order;
    sse_lag.insert(sse_lag.end(), seen.lags_ms.begin(), seen.lags_ms.end());
  }
  std::printf("Follower lag, %d command.output events every %d ms x %d rounds:\n", events,
              interval_ms, rounds);
  Print("gRPC StreamEvents", grpc_lag);
  Print("SSE /v1/runs/{id}/events", sse_lag);
  if (!ok) std::printf("  FAILED: a follower skipped or repeated an event\n");
  return ok ? 0 : 1;
}
