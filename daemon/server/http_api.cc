#include "server/http_api.h"

#include <google/protobuf/util/json_util.h>

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "core/event_log.h"
#include "core/file_transfer.h"
#include "nlohmann/json.hpp"
#include "server/dashboard_assets.h"
#include "server/reactor.h"
#include "server/utf8_fields.h"

namespace sandgate::server {

unsigned int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kFailedPrecondition:
      return 412;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;  // UNKNOWN, INTERNAL, DATA_LOSS
  }
}

namespace {

constexpr char kJson[] = "application/json; charset=utf-8";
constexpr uint32_t kEventBatch = 256;

HttpResponse Json(std::string body) {
  body.push_back('\n');
  return {200, {{"Content-Type", kJson}}, std::move(body)};
}

absl::StatusOr<std::string> ToJson(google::protobuf::Message* message) {
  EscapeStringFields(message);  // the JSON printer refuses invalid UTF-8
  std::string out;
  auto st = google::protobuf::util::MessageToJsonString(*message, &out);
  if (!st.ok()) return errors::Internal(absl::StrCat("JSON: ", std::string(st.message())));
  return out;
}

absl::Status FromJson(const std::string& json, const std::string& what,
                      google::protobuf::Message* message) {
  auto st = google::protobuf::util::JsonStringToMessage(json, message);
  if (!st.ok()) return errors::InvalidArgument(absl::StrCat(what, ": ", std::string(st.message())));
  return absl::OkStatus();
}

// The request message from the body (POST), then the path's {fields} and the query's
// parameters over it. A query value is a JSON string (the mapping takes numbers as strings)
// or, for true/false, a bool.
template <typename Req>
absl::Status ParseRequest(const HttpRequest& http, Req* request) {
  if (!http.body.empty() && absl::StripAsciiWhitespace(http.body) != "") {
    SANDGATE_RETURN_IF_ERROR(FromJson(http.body, "request body", request));
  }
  nlohmann::json fields = nlohmann::json::object();
  for (const auto& [k, v] : http.query) {
    if (v == "true" || v == "false") {
      fields[k] = v == "true";
    } else {
      fields[k] = v;
    }
  }
  if (!fields.empty()) {
    Req from_query;
    SANDGATE_RETURN_IF_ERROR(FromJson(fields.dump(), "query", &from_query));
    request->MergeFrom(from_query);
  }
  nlohmann::json path = nlohmann::json::object();
  for (const auto& [k, v] : http.params) path[k] = v;
  if (!path.empty()) {
    Req from_path;
    SANDGATE_RETURN_IF_ERROR(FromJson(path.dump(), "path", &from_path));
    request->MergeFrom(from_path);
  }
  return absl::OkStatus();
}

absl::StatusOr<core::Caller> AuthenticateHttp(const ServiceDeps& deps, const HttpRequest& http) {
  std::optional<std::string> authorization;
  auto it = http.headers.find("authorization");
  if (it != http.headers.end()) authorization = it->second;
  return deps.tenants->Authenticate(authorization);
}

using Exchange = std::shared_ptr<HttpExchange>;

// Runs `fn` on the I/O executor; answers "queue full" when it cannot queue.
void OnIo(const ServiceDeps& deps, const Exchange& x, std::function<void()> fn) {
  if (!deps.io->Submit(std::move(fn))) x->Reply(JsonError(QueueFull()));
}

// An audited call: its action, and what it acted on.
template <typename Req, typename Resp>
struct Audit {
  const char* action = nullptr;
  std::string (*target)(const Req&, const Resp&) = nullptr;
};

template <typename T>
struct Identity {
  using type = T;
};

// The one unary adapter, as service.cc's for gRPC: authenticate, parse, call the Api on the
// executor, answer its response as JSON or its status as a JSON error; audited with `audit`.
template <typename Req, typename Resp, typename Arg>
HttpRoute Unary(const ServiceDeps& deps, const char* method, const char* pattern,
                absl::Status (core::Api::*handler)(const core::Caller&, Arg, Resp*),
                typename Identity<Audit<Req, Resp>>::type audit = {}) {
  return {method, pattern, [&deps, handler, audit](const HttpRequest& http, Exchange x) {
            absl::StatusOr<core::Caller> caller = AuthenticateHttp(deps, http);
            if (!caller.ok()) return x->Reply(JsonError(caller.status()));
            OnIo(deps, x, [&deps, handler, audit, http, x, caller = *caller] {
              Req request;
              Resp response;
              absl::Status st = ParseRequest(http, &request);
              if (st.ok()) {
                if constexpr (std::is_pointer_v<Arg>) {
                  st = (deps.api->*handler)(caller, &request, &response);
                } else {
                  st = (deps.api->*handler)(caller, request, &response);
                }
                if (audit.action != nullptr && deps.audit != nullptr) {
                  deps.audit->Record(caller.tenant, audit.action, audit.target(request, response),
                                     st);
                }
              }
              if (!st.ok()) return x->Reply(JsonError(st));
              absl::StatusOr<std::string> json = ToJson(&response);
              x->Reply(json.ok() ? Json(*std::move(json)) : JsonError(json.status()));
            });
          }};
}

bool Terminal(const v1::Event& e) {
  return e.type() == "run.finished" ||
         (e.type() == "session.closed" && e.run_id() == e.session_id());
}

// GET /v1/runs/{run_id}/events: a follower of the EventLog, as EventStream in service.cc.
// It holds the exchange weakly (the exchange holds it, through its pull).
class SseFollower : public std::enable_shared_from_this<SseFollower> {
 public:
  SseFollower(const ServiceDeps& deps, core::Caller caller, v1::StreamEventsRequest req, Exchange x)
      : deps_(deps),
        caller_(std::move(caller)),
        req_(std::move(req)),
        x_(x),
        last_seq_(req_.after_seq()) {}

  void Start() {
    absl::StatusOr<std::unique_ptr<core::SessionManager::Lease>> lease =
        deps_.api->StartEventStream(caller_, req_);
    Exchange x = x_.lock();
    if (!x) return;
    if (!lease.ok()) return x->Reply(JsonError(lease.status()));
    {
      absl::MutexLock lock(&mu_);
      lease_ = *std::move(lease);
    }
    auto self = shared_from_this();
    x->Stream(
        200, {{"Content-Type", "text/event-stream; charset=utf-8"}, {"Cache-Control", "no-cache"}},
        [self] { self->Schedule(); }, [self] { self->Close(); });
  }

 private:
  void Schedule() {
    auto self = shared_from_this();
    if (!deps_.io->Submit([self] { self->Fetch(); })) End(true);
  }

  void End(bool failed) {
    if (Exchange x = x_.lock()) x->End(failed);
  }

  // The client is gone or the server stops: no more waits; the session may idle again.
  void Close() {
    uint64_t wait_id;
    std::unique_ptr<core::SessionManager::Lease> lease;
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
      wait_id = wait_id_;
      wait_id_ = 0;
      lease = std::move(lease_);
    }
    if (wait_id != 0) deps_.events->CancelWait(wait_id);
  }

  // On the executor: the next batch, written at once; or a wait for one.
  void Fetch() {
    int64_t after;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      after = last_seq_;
    }
    absl::StatusOr<std::vector<v1::Event>> batch =
        deps_.events->Read(req_.run_id(), after, kEventBatch);
    Exchange x = x_.lock();
    if (!x) return;
    if (!batch.ok()) return WriteError(x, batch.status());
    if (batch->empty()) {
      if (!req_.follow()) return x->End(false);
      auto self = shared_from_this();
      {
        absl::MutexLock lock(&mu_);
        woken_ = false;
      }
      // The callback may run before Wait returns; woken_ tells whether the id is still live.
      uint64_t id = deps_.events->Wait(req_.run_id(), after, deps_.heartbeat_interval,
                                       [self](core::EventLog::WaitResult r) { self->OnWake(r); });
      absl::MutexLock lock(&mu_);
      if (!woken_) wait_id_ = id;
      return;
    }
    std::string text;
    bool terminal = false;
    for (v1::Event& e : *batch) {
      absl::StatusOr<std::string> json = ToJson(&e);
      if (!json.ok()) return WriteError(x, json.status());
      absl::StrAppend(&text, "id: ", e.seq(), "\nevent: ", e.type(), "\ndata: ", *json, "\n\n");
      terminal = terminal || Terminal(e);
    }
    {
      absl::MutexLock lock(&mu_);
      last_seq_ = batch->back().seq();
    }
    x->Write(std::move(text));
    if (terminal) x->End(false);
  }

  // From the EventLog (appending thread, timer, or inside Wait): never blocks.
  void OnWake(core::EventLog::WaitResult result) {
    {
      absl::MutexLock lock(&mu_);
      wait_id_ = 0;
      woken_ = true;
    }
    Exchange x = x_.lock();
    if (!x) return;
    switch (result) {
      case core::EventLog::WaitResult::kReady:
        Schedule();
        break;
      case core::EventLog::WaitResult::kTimeout:
        x->Write(": heartbeat\n\n");
        break;
      case core::EventLog::WaitResult::kShutdown:
        WriteError(x, errors::Unavailable(
                          "the daemon is shutting down; the run stays queued: follow again "
                          "with Last-Event-ID once it is back"));
        break;
    }
  }

  // A stream that has begun cannot change its status: the error is its last event.
  void WriteError(const Exchange& x, const absl::Status& st) {
    HttpResponse e = JsonError(st);
    while (!e.body.empty() && e.body.back() == '\n') e.body.pop_back();
    x->Write(absl::StrCat("event: error\ndata: ", e.body, "\n\n"));
    x->End(false);
  }

  const ServiceDeps& deps_;
  const core::Caller caller_;
  const v1::StreamEventsRequest req_;
  const std::weak_ptr<HttpExchange> x_;
  absl::Mutex mu_;
  int64_t last_seq_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t wait_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<core::SessionManager::Lease> lease_ ABSL_GUARDED_BY(mu_);
};

HttpRoute Events(const ServiceDeps& deps) {
  return {"GET", "/v1/runs/{run_id}/events", [&deps](const HttpRequest& http, Exchange x) {
            absl::StatusOr<core::Caller> caller = AuthenticateHttp(deps, http);
            if (!caller.ok()) return x->Reply(JsonError(caller.status()));
            v1::StreamEventsRequest req;
            req.set_run_id(http.params.at("run_id"));
            req.set_follow(true);
            std::string after = http.Header("last-event-id");
            auto q = http.query.find("after_seq");
            if (after.empty() && q != http.query.end()) after = q->second;
            int64_t seq = 0;
            if (!after.empty() && (!absl::SimpleAtoi(after, &seq) || seq < 0)) {
              return x->Reply(JsonError(errors::InvalidArgument(absl::StrCat(
                  "Last-Event-ID/after_seq: expected a seq (0 or more), got '", after, "'"))));
            }
            req.set_after_seq(seq);
            auto f = http.query.find("follow");
            if (f != http.query.end()) {
              if (f->second != "true" && f->second != "false") {
                return x->Reply(JsonError(errors::InvalidArgument(
                    absl::StrCat("follow: expected true or false, got '", f->second, "'"))));
              }
              req.set_follow(f->second == "true");
            }
            auto follower = std::make_shared<SseFollower>(deps, *caller, std::move(req), x);
            OnIo(deps, x, [follower] { follower->Start(); });
          }};
}

std::string ContentTypeOf(const std::string& name) {
  static const std::pair<const char*, const char*> kTypes[] = {
      {".md", "text/markdown; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".json", "application/json"},
      {".csv", "text/csv; charset=utf-8"},
      {".txt", "text/plain; charset=utf-8"},
      {".png", "image/png"},
      {".html", "text/plain; charset=utf-8"},  // never rendered as a page from this origin
      {".pdf", "application/pdf"},
  };
  for (const auto& [ext, type] : kTypes) {
    if (absl::EndsWithIgnoreCase(name, ext)) return type;
  }
  return "application/octet-stream";
}

// GET /v1/runs/{run_id}/artifacts/{name}: the bytes, a chunk read on the executor per pull.
struct ArtifactDownload {
  const ServiceDeps& deps;
  core::Caller caller;
  std::string run_id, name;
  uint64_t size = 0;
  std::weak_ptr<HttpExchange> x;
  uint64_t offset = 0;  // touched only by the one read in flight
  v1::Run run;          // as the caller may see it, read once when the stream starts
};

void NextChunk(const std::shared_ptr<ArtifactDownload>& d) {
  Exchange x = d->x.lock();
  if (!x) return;
  if (d->offset >= d->size) return x->End(false);
  absl::StatusOr<std::string> data =
      d->deps.runs->ReadArtifact(d->run, d->name, d->offset, core::kTransferChunkBytes);
  if (!data.ok() || data->empty()) return x->End(true);
  d->offset += data->size();
  x->Write(*std::move(data));
}

HttpRoute Artifacts(const ServiceDeps& deps) {
  return {
      "GET", "/v1/runs/{run_id}/artifacts/{name}", [&deps](const HttpRequest& http, Exchange x) {
        absl::StatusOr<core::Caller> caller = AuthenticateHttp(deps, http);
        if (!caller.ok()) return x->Reply(JsonError(caller.status()));
        auto d = std::make_shared<ArtifactDownload>(ArtifactDownload{
            deps, *caller, http.params.at("run_id"), http.params.at("name"), 0, x, 0, v1::Run()});
        OnIo(deps, x, [d, x] {
          absl::StatusOr<v1::Run> run = d->deps.runs->Get(d->caller, d->run_id);
          if (!run.ok()) return x->Reply(JsonError(run.status()));
          const v1::Artifact* artifact = nullptr;
          for (const auto& a : run->artifacts()) {
            if (a.name() == d->name) artifact = &a;
          }
          if (artifact == nullptr) {
            return x->Reply(
                JsonError(errors::NotFound("artifact", absl::StrCat(d->run_id, "/", d->name))));
          }
          d->size = artifact->size_bytes();
          d->run = *run;
          std::string raw = absl::HexStringToBytes(artifact->sha256());
          HttpHeaders headers = {
              {"Content-Type", ContentTypeOf(d->name)},
              {"Content-Disposition", absl::StrCat("attachment; filename=\"", d->name, "\"")},
              {"X-Sandgate-Sha256", artifact->sha256()},
              {"Digest", absl::StrCat("sha-256=", absl::Base64Escape(raw))},
              {"X-Sandgate-Size", absl::StrCat(artifact->size_bytes())},
          };
          const ServiceDeps& deps = d->deps;
          x->Stream(
              200, std::move(headers),
              [d, &deps] {
                if (!deps.io->Submit([d] { NextChunk(d); })) {
                  if (Exchange x = d->x.lock()) x->End(true);
                }
              },
              nullptr);
        });
      }};
}

}  // namespace

HttpResponse JsonError(const absl::Status& status) {
  nlohmann::json body = {{"code", static_cast<int>(status.code())},
                         {"status", absl::StatusCodeToString(status.code())},
                         {"message", EscapeInvalidUtf8(status.message())}};
  return {HttpStatusOf(status.code()), {{"Content-Type", kJson}}, body.dump() + "\n"};
}

HttpRoute MetricsRoute(std::function<std::string()> render) {
  return {
      "GET", "/metrics", [render = std::move(render)](const HttpRequest&, Exchange x) {
        x->Reply({200, {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}}, render()});
      }};
}

HttpServer::Routes RestRoutes(const ServiceDeps& deps) {
  using core::Api;
  return {
      Unary<v1::RunAnalysisRequest, v1::Run>(deps, "POST", "/v1/runs", &Api::RunAnalysis,
                                             {"RunAnalysis", &CreatedId}),
      Unary<v1::ListRunsRequest, v1::ListRunsResponse>(deps, "GET", "/v1/runs", &Api::ListRuns),
      Unary<v1::GetRunRequest, v1::Run>(deps, "GET", "/v1/runs/{run_id}", &Api::GetRun),
      Unary<v1::CancelRunRequest, v1::Run>(deps, "POST", "/v1/runs/{run_id}:cancel",
                                           &Api::CancelRun, {"CancelRun", &RunIdOf}),
      Events(deps),
      Artifacts(deps),
      Unary<v1::CreateSessionRequest, v1::Session>(
          deps, "POST", "/v1/sessions", &Api::CreateSession, {"CreateSession", &CreatedId}),
      Unary<v1::ListSessionsRequest, v1::ListSessionsResponse>(deps, "GET", "/v1/sessions",
                                                               &Api::ListSessions),
      Unary<v1::GetSessionRequest, v1::Session>(deps, "GET", "/v1/sessions/{session_id}",
                                                &Api::GetSession),
      Unary<v1::KeepAliveRequest, v1::Session>(deps, "POST", "/v1/sessions/{session_id}:keepAlive",
                                               &Api::KeepAlive, {"KeepAlive", &SessionIdOf}),
      Unary<v1::CloseSessionRequest, v1::Session>(deps, "POST", "/v1/sessions/{session_id}:close",
                                                  &Api::CloseSession,
                                                  {"CloseSession", &SessionIdOf}),
      Unary<v1::ListFilesRequest, v1::ListFilesResponse>(
          deps, "GET", "/v1/sessions/{session_id}/files", &Api::ListFiles),
      Unary<v1::ListResourcesRequest, v1::ListResourcesResponse>(deps, "GET", "/v1/resources",
                                                                 &Api::ListResources),
  };
}

HttpServer::Routes DashboardRoutes() {
  auto serve = [](const HttpRequest& request, Exchange x) {
    const EmbeddedFile* file = FindDashboardFile(request.path);
    if (file == nullptr) {
      x->Reply(JsonError(errors::NotFound("dashboard file", request.path)));
      return;
    }
    HttpResponse response{
        200, {{"Content-Type", std::string(file->content_type)}}, std::string(file->body)};
    for (const auto& [name, value] : DashboardHeaders()) {
      response.headers.emplace_back(std::string(name), std::string(value));
    }
    x->Reply(std::move(response));
  };
  HttpServer::Routes routes;
  for (const char* pattern : {"/", "/ui", "/ui/", "/ui/{file}", "/ui/vendor/{file}"}) {
    routes.push_back({"GET", pattern, serve});
  }
  return routes;
}

}  // namespace sandgate::server
