// The REST edge under libFuzzer: each input is one HTTP request, taken through the same entry
// as the HTTP server's (server/http_request.h RouteRequest: decoding, checks, routing) and
// answered by the real routes (RestRoutes, MetricsRoute, DashboardRoutes) over the real
// core/ managers, with an in-memory store directory, a fake clock and a sandbox provider that
// keeps files in memory and runs no command (tests/fakes/memory_sandbox.h). Only the socket
// is missing.
//
// An input is a request in HTTP/1.1's shape, "\n" for line ends:
//
//   METHOD /path?query\n
//   Name: value\n          (any number of headers)
//   \n
//   body
//
// "{S}" in the target or the body stands for a live session's id and "{R}" for a finished
// run's, so that the routes reach past "not found". What is checked, besides the sanitizers:
// every request is answered exactly once (and within seconds), never with a 500, every
// header is free of CR, LF and NUL, and every JSON answer (errors included) parses, in the
// REST error shape with the HTTP status of its code.
//
// Built with -DSANDGATE_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt); without it, the same
// file makes rest_fuzz_replay, which runs the checked-in corpus once (ctest fuzz.rest_corpus).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "agent/reference_agent.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/utf8.h"
#include "core/api.h"
#include "core/event_log.h"
#include "core/executor.h"
#include "core/fair_executor.h"
#include "core/run_manager.h"
#include "core/session_manager.h"
#include "core/tenants.h"
#include "nlohmann/json.hpp"
#include "server/http_api.h"
#include "server/http_request.h"
#include "store/file_artifact_store.h"
#include "store/sqlite_store.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/memory_sandbox.h"

namespace sandgate::testing {
namespace {

using server::ExchangeClose;
using server::HttpExchange;
using server::HttpResponse;

[[noreturn]] void Fail(const std::string& what, const HttpResponse& r) {
  std::fprintf(stderr, "rest_fuzz: %s\nstatus %u\nbody: %s\n", what.c_str(), r.status,
               r.body.c_str());
  std::abort();
}

// One request's answer, as the HTTP server's exchange takes it, held for the checks.
class FuzzExchange final : public HttpExchange {
 public:
  void Reply(HttpResponse response) override {
    absl::MutexLock lock(&mu_);
    if (answered_) Fail("answered twice", response);
    answered_ = true;
    response_.status = response.status;
    response_.headers = std::move(response.headers);
    response_.body = std::move(response.body);
  }
  void Stream(unsigned int status, server::HttpHeaders headers, Pull pull,
              std::function<void()> on_close, uint64_t) override {
    std::function<void()> gone;
    {
      absl::MutexLock lock(&mu_);
      if (answered_) Fail("answered twice (a stream after an answer)", response_);
      answered_ = true;
      streaming_ = true;
      response_.status = status;
      response_.headers = std::move(headers);
      pull_ = std::move(pull);
      if (on_close) gone = close_.Set(std::move(on_close));
    }
    if (gone) gone();
  }
  void Upgrade(HttpResponse response, std::function<void(Upgraded)>,
               std::function<void()>) override {
    Reply(std::move(response));  // no connection to take over here: checked as an answer
  }
  void OnClose(std::function<void()> on_close) override {
    std::function<void()> now;
    {
      absl::MutexLock lock(&mu_);
      now = close_.Set(std::move(on_close));
    }
    if (now) now();
  }
  bool Write(std::string data) override {
    absl::MutexLock lock(&mu_);
    if (close_.closed() || ended_) return false;
    response_.body.append(data);
    ++writes_;
    return true;
  }
  void End(bool) override {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }
  // The client goes away (or the answer is complete): the producer is told once.
  void Close() {
    std::function<void()> gone;
    {
      absl::MutexLock lock(&mu_);
      gone = close_.Close();
    }
    if (gone) gone();
  }

  // Waits for the answer to begin; false after `timeout`.
  bool AwaitAnswer(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&answered_), timeout);
  }
  // Pulls a streamed answer until it ends, stalls (a follower waiting for events that will
  // not come: the client then hangs up) or reached `max_pulls`.
  void Drain(int max_pulls) {
    for (int i = 0; i < max_pulls; ++i) {
      Pull pull;
      int writes;
      {
        absl::MutexLock lock(&mu_);
        if (!streaming_ || ended_ || close_.closed()) return;
        pull = pull_;
        writes = writes_;
      }
      pull();
      absl::MutexLock lock(&mu_);
      auto moved = [&] { return ended_ || writes_ != writes; };
      if (!mu_.AwaitWithTimeout(absl::Condition(&moved), absl::Milliseconds(50))) return;
    }
  }
  HttpResponse response() {
    absl::MutexLock lock(&mu_);
    return response_;
  }
  bool streaming() {
    absl::MutexLock lock(&mu_);
    return streaming_;
  }

 private:
  absl::Mutex mu_;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  bool streaming_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  ExchangeClose close_ ABSL_GUARDED_BY(mu_);  // the real exchange's close rule
  int writes_ ABSL_GUARDED_BY(mu_) = 0;
  HttpResponse response_ ABSL_GUARDED_BY(mu_);
  Pull pull_ ABSL_GUARDED_BY(mu_);
};

core::TenantConfig Tenant(const std::string& name, bool is_operator) {
  core::TenantConfig t;
  t.name = name;
  t.token_sha256 = Sha256::Hex(name + "-token");
  t.is_operator = is_operator;
  t.quotas.live_sessions = 4;  // what the fuzzer can make stays small
  t.quotas.concurrent_runs = 1;
  t.quotas.runs_per_minute = 2;
  return t;
}

// The daemon's parts behind the routes, made once for the whole fuzzing process.
class Harness {
 public:
  Harness() {
    log::SetMinLevel(log::Level::kError);  // a line for each session made would slow it down
    char tmpl[] = "/dev/shm/sg-fuzz-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) std::abort();
    dir_ = tmpl;
    store_ = *store::SqliteStore::Open(dir_ + "/state.db");
    artifacts_ = *store::FileArtifactStore::Open(dir_ + "/artifacts");
    events_ = std::make_unique<core::EventLog>(store_.get(), &clock_);
    sessions_ = std::make_unique<core::SessionManager>(core::SessionManagerDeps{
        &config_, store_.get(), &clock_, {{"local", &provider_}}, &budget_, events_.get()});
    tenants_ = std::make_unique<core::Tenants>(
        std::vector<core::TenantConfig>{Tenant("alice", false), Tenant("ops", true)});
    core::RunManagerDeps rd;
    rd.config = &config_;
    rd.store = store_.get();
    rd.artifacts = artifacts_.get();
    rd.events = events_.get();
    rd.clock = &clock_;
    rd.providers["local"] = &provider_;
    rd.agents["reference"] = &reference_;
    rd.sessions = sessions_.get();
    rd.budget = &budget_;
    rd.tenants = tenants_.get();
    runs_ = std::make_unique<core::RunManager>(std::move(rd));
    core::ApiDeps ad;
    ad.runs = runs_.get();
    ad.sessions = sessions_.get();
    ad.max_transfer_bytes = 1 << 16;
    ad.journal = store_.get();
    api_ = std::make_unique<core::Api>(std::move(ad));
    deps_.api = api_.get();
    deps_.tenants = tenants_.get();
    deps_.runs = runs_.get();
    deps_.events = events_.get();
    deps_.sessions = sessions_.get();
    deps_.io = &io_;
    deps_.exec = &exec_;
    deps_.clock = &clock_;
    routes_ = server::RestRoutes(deps_);
    routes_.push_back(
        server::MetricsRoute([] { return std::string("sandgate_up 1\n"); }, tenants_.get()));
    for (server::HttpRoute& r : server::DashboardRoutes()) routes_.push_back(std::move(r));
    run_id_ = FinishedRun();
  }

  // Answers one request (the fuzz input) and checks the answer.
  void Serve(absl::string_view input) {
    server::RawHttpRequest raw = Parse(input);
    server::HttpRequest request;
    std::optional<HttpResponse> refused;
    const server::HttpRoute* route = server::RouteRequest(routes_, raw, &request, &refused);
    auto x = std::make_shared<FuzzExchange>();
    if (route == nullptr) {
      x->Reply(*std::move(refused));
    } else if (route->open_body) {
      server::HttpBodySink sink = route->open_body(request);
      std::optional<HttpResponse> answer = std::move(sink.refused);
      // The body in two pieces, as it may arrive.
      const size_t half = body_.size() / 2;
      for (absl::string_view piece :
           {absl::string_view(body_).substr(0, half), absl::string_view(body_).substr(half)}) {
        if (!answer && !piece.empty()) answer = sink.append(piece.data(), piece.size());
      }
      if (answer) {
        x->Reply(*std::move(answer));
      } else {
        sink.done(x);
      }
    } else {
      request.body = body_;
      route->handler(request, x);
    }
    if (!x->AwaitAnswer(absl::Seconds(10))) {
      Fail(absl::StrCat("no answer to ", raw.method, " ", raw.path), HttpResponse());
    }
    x->Drain(64);
    x->Close();
    Check(x->response(), x->streaming());
  }

 private:
  // METHOD target\nheaders\n\nbody; the query split as MHD splits it ('+' a space, each
  // name=value still percent-encoded).
  server::RawHttpRequest Parse(absl::string_view input) {
    EnsureSession();
    std::string text = absl::StrReplaceAll(input, {{"{S}", session_id_}, {"{R}", run_id_}});
    server::RawHttpRequest raw;
    size_t head_end = text.find("\n\n");
    absl::string_view head = text;
    body_.clear();
    if (head_end != std::string::npos) {
      head = absl::string_view(text).substr(0, head_end);
      body_ = text.substr(head_end + 2);
    }
    std::vector<absl::string_view> lines = absl::StrSplit(head, '\n');
    absl::string_view first = lines[0];
    size_t space = first.find(' ');
    raw.method = std::string(first.substr(0, space));
    absl::string_view target = space == absl::string_view::npos ? "" : first.substr(space + 1);
    size_t q = target.find('?');
    raw.path = std::string(target.substr(0, q));
    if (q != absl::string_view::npos) {
      std::string query = absl::StrReplaceAll(target.substr(q + 1), {{"+", " "}});
      for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
        size_t eq = pair.find('=');
        raw.query.emplace_back(std::string(pair.substr(0, eq)),
                               eq == absl::string_view::npos ? "" : pair.substr(eq + 1));
      }
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      size_t colon = lines[i].find(':');
      if (colon == absl::string_view::npos) continue;
      raw.headers.emplace_back(
          std::string(lines[i].substr(0, colon)),
          std::string(absl::StripLeadingAsciiWhitespace(lines[i].substr(colon + 1))));
    }
    return raw;
  }

  // {S}: a live session of alice's (the fuzzer may have closed the last one).
  void EnsureSession() {
    core::Caller alice{"alice", false, tenants_->Find("alice")->config};
    if (!session_id_.empty()) {
      absl::StatusOr<v1::Session> s = sessions_->Get(alice, session_id_);
      if (s.ok() && s->status() == v1::SESSION_STATUS_ACTIVE) return;
    }
    absl::StatusOr<v1::Session> s = sessions_->Create(alice, v1::CreateSessionRequest(), nullptr);
    session_id_ = s.ok() ? s->id() : "sess_unavailable";
  }

  // {R}: a run of alice's that has finished (it fails: the memory sandbox runs nothing).
  std::string FinishedRun() {
    core::Caller alice{"alice", false, tenants_->Find("alice")->config};
    v1::RunAnalysisRequest req;
    req.set_playbook("sandbox-probe");
    v1::InputFile* input = req.add_inputs();
    input->set_name("probe.txt");
    input->set_content("probe\n");
    v1::Run run;
    if (absl::Status st = api_->RunAnalysis(alice, &req, &run); !st.ok()) {
      std::fprintf(stderr, "rest_fuzz: no run for {R}: %s\n", st.ToString().c_str());
      return "run_unavailable";
    }
    for (int i = 0; i < 500; ++i) {
      v1::GetRunRequest get;
      get.set_run_id(run.id());
      v1::Run now;
      if (api_->GetRun(alice, get, &now).ok() && now.status() != v1::RUN_STATUS_QUEUED &&
          now.status() != v1::RUN_STATUS_RUNNING) {
        return run.id();
      }
      usleep(10000);
    }
    return run.id();
  }

  static void Check(const HttpResponse& r, bool streamed) {
    if (r.status == 0 || r.status == 500) Fail("a server error", r);
    for (const auto& [name, value] : r.headers) {
      for (const std::string& s : {name, value}) {
        if (s.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
          Fail(absl::StrCat("a header with CR, LF or NUL: ", name), r);
        }
      }
    }
    std::string type;
    for (const auto& [name, value] : r.headers) {
      if (absl::EqualsIgnoreCase(name, "content-type")) type = value;
    }
    if (!absl::StartsWith(type, "application/json") || streamed) return;
    if (!IsValidUtf8(r.body)) Fail("a JSON answer that is not UTF-8", r);
    nlohmann::json j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) Fail("a JSON answer that does not parse", r);
    if (r.status == 200) return;
    if (!j.is_object() || !j.contains("code") || !j["code"].is_number_integer() ||
        !j.contains("message") || !j["message"].is_string() || !j.contains("status")) {
      Fail("an error not in the REST shape", r);
    }
    const auto code = static_cast<absl::StatusCode>(j["code"].get<int>());
    // 405: UNIMPLEMENTED, for a method a path does not take.
    const bool method = r.status == 405 && code == absl::StatusCode::kUnimplemented;
    if (server::HttpStatusOf(code) != r.status && !method) {
      Fail("an error whose HTTP status is not its code's", r);
    }
  }

  std::string dir_;
  core::Config config_;
  FakeClock clock_;
  MemoryProvider provider_;
  agent::ReferenceAgent reference_;
  core::SandboxBudget budget_{64};
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<store::ArtifactStore> artifacts_;
  std::unique_ptr<core::EventLog> events_;
  std::unique_ptr<core::SessionManager> sessions_;
  std::unique_ptr<core::Tenants> tenants_;
  std::unique_ptr<core::RunManager> runs_;
  std::unique_ptr<core::Api> api_;
  core::Executor io_{"io", 2, 64};
  core::FairExecutor exec_{"exec", 0, 0};  // refuses every command: the fuzzer writes them
  server::ServiceDeps deps_;
  server::HttpServer::Routes routes_;
  std::string session_id_, run_id_, body_;
};

}  // namespace
}  // namespace sandgate::testing

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Made once and never destroyed: its threads outlive any exit path of the fuzzer.
  static auto* harness = new sandgate::testing::Harness();
  harness->Serve(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
