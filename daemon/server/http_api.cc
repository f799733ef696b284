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
#include "common/cancel.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "core/event_log.h"
#include "core/exec_stream.h"
#include "core/file_transfer.h"
#include "nlohmann/json.hpp"
#include "server/codex_exec_route.h"
#include "server/dashboard_assets.h"
#include "server/forwarding.h"
#include "server/http_request.h"
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

// `fields` as JSON text. The HTTP server let in only valid UTF-8 (server/http_request.h),
// which is all that could make dump() throw; were that ever missed, a bad byte becomes
// U+FFFD here instead of an exception that ends the daemon.
std::string DumpFields(const nlohmann::json& fields) {
  return fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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
    SANDGATE_RETURN_IF_ERROR(FromJson(DumpFields(fields), "query", &from_query));
    request->MergeFrom(from_query);
  }
  nlohmann::json path = nlohmann::json::object();
  for (const auto& [k, v] : http.params) path[k] = v;
  if (!path.empty()) {
    Req from_path;
    SANDGATE_RETURN_IF_ERROR(FromJson(DumpFields(path), "path", &from_path));
    request->MergeFrom(from_path);
  }
  return absl::OkStatus();
}

absl::StatusOr<core::Caller> AuthenticateHttp(const core::Tenants& tenants,
                                              const HttpRequest& http) {
  std::optional<std::string> authorization;
  auto it = http.headers.find("authorization");
  if (it != http.headers.end()) authorization = it->second;
  return tenants.Authenticate(authorization);
}

absl::StatusOr<core::Caller> AuthenticateHttp(const ServiceDeps& deps, const HttpRequest& http) {
  return AuthenticateHttp(*deps.tenants, http);
}

using Exchange = std::shared_ptr<HttpExchange>;

// Runs `fn` on the I/O executor; answers "queue full" when it cannot queue.
void OnIo(const ServiceDeps& deps, const Exchange& x, std::function<void()> fn) {
  if (!deps.io->Submit(std::move(fn))) x->Reply(JsonError(QueueFull()));
}

// Where a call runs: the I/O executor (short blocking work), or Exec's executor, shared fairly
// by the tenants, for a call that may wait long (ReadProcessOutput's wait, the input of a
// process that does not read).
enum class Lane { kIo, kWaits };

void OnLane(const ServiceDeps& deps, Lane lane, const std::string& tenant, const Exchange& x,
            std::function<void()> fn) {
  if (lane == Lane::kIo) return OnIo(deps, x, std::move(fn));
  if (!deps.exec->Submit(tenant, std::move(fn))) x->Reply(JsonError(QueueFull()));
}

// Forwarding (server/forwarding.h) from the REST face: a call on a run or session another
// replica owns is served there, its answer relayed (a stream message by message). REST has no gRPC
// call of its own to forward from (a null server context: no forwarding marker to honour, no
// deadline or cancellation to inherit: a hang-up cancels the relay), and the caller's
// Authorization header travels as gRPC's authorization metadata, so the owner authenticates
// the caller as if called directly.
absl::StatusOr<std::optional<Route>> OwnerOfSession(const ServiceDeps& deps,
                                                    const core::Caller& caller,
                                                    const std::string& id) {
  if (deps.forwarder == nullptr || id.empty()) return std::nullopt;
  return deps.forwarder->ForSession(nullptr, caller, id);
}

absl::StatusOr<std::optional<Route>> OwnerOfRun(const ServiceDeps& deps, const core::Caller& caller,
                                                const std::string& id) {
  if (deps.forwarder == nullptr || id.empty()) return std::nullopt;
  return deps.forwarder->ForRun(nullptr, caller, id);
}

std::unique_ptr<grpc::ClientContext> ForwardedContext(const ServiceDeps& deps,
                                                      const std::string& authorization) {
  std::unique_ptr<grpc::ClientContext> ctx = deps.forwarder->ClientContextFor(nullptr);
  if (!authorization.empty()) ctx->AddMetadata("authorization", authorization);
  return ctx;
}

absl::Status FromGrpc(const grpc::Status& st) {
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
}

// What a unary call names that may live on another replica, and its method there (the
// owner audits a forwarded call).
template <typename Req>
struct Forward {
  bool by_run = false;  // the id names a run (else a session)
  std::string (*id)(const Req&) = nullptr;
  const char* method = nullptr;  // "/sandgate.v1.Sandgate/KeepAlive"
  // As UnaryForward::again (server/forwarding.h): a local answer after which the owner is
  // asked once more. Untyped here: the one user is CancelRun, whose answer is a v1::Run.
  bool (*again)(const v1::Run&) = nullptr;
};

// Sends the unary call to `route`'s replica and answers with its response or status.
template <typename Resp>
void RelayUnary(const ServiceDeps& deps, const Route& route, const char* method,
                const google::protobuf::Message& request, const std::string& authorization,
                const Exchange& x) {
  std::shared_ptr<grpc::ClientContext> ctx = ForwardedContext(deps, authorization);
  std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  auto req = std::make_shared<grpc::ByteBuffer>(&slice, 1);
  auto resp = std::make_shared<grpc::ByteBuffer>();
  route.generic->UnaryCall(
      ctx.get(), method, grpc::StubOptions(), req.get(), resp.get(),
      [ctx, req, resp, route, x](grpc::Status st) {
        if (!st.ok()) return x->Reply(JsonError(FromGrpc(Forwarder::Explain(route, st))));
        Resp response;
        if (!grpc::SerializationTraits<Resp>::Deserialize(resp.get(), &response).ok()) {
          return x->Reply(JsonError(errors::Internal(absl::StrCat(
              "replica ", route.peer.replica, " answered with a message that does not parse"))));
        }
        absl::StatusOr<std::string> json = ToJson(&response);
        x->Reply(json.ok() ? Json(*std::move(json)) : JsonError(json.status()));
      });
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
// With `forward`, a call on another replica's run or session is sent to its owner instead.
template <typename Req, typename Resp, typename Arg>
HttpRoute Unary(const ServiceDeps& deps, const char* method, const char* pattern,
                absl::Status (core::Api::*handler)(const core::Caller&, Arg, Resp*),
                typename Identity<Audit<Req, Resp>>::type audit = {},
                typename Identity<Forward<Req>>::type forward = {}, Lane lane = Lane::kIo) {
  return {method, pattern,
          [&deps, handler, audit, forward, lane](const HttpRequest& http, Exchange x) {
            absl::StatusOr<core::Caller> caller = AuthenticateHttp(deps, http);
            if (!caller.ok()) return x->Reply(JsonError(caller.status()));
            OnLane(deps, lane, caller->tenant, x,
                   [&deps, handler, audit, forward, http, x, caller = *caller] {
                     Req request;
                     Resp response;
                     absl::Status st = ParseRequest(http, &request);
                     // True when the owner is another replica: the answer is relayed from it.
                     auto forwarded = [&]() {
                       if (!st.ok() || forward.id == nullptr) return false;
                       const std::string id = forward.id(request);
                       absl::StatusOr<std::optional<Route>> owner =
                           forward.by_run ? OwnerOfRun(deps, caller, id)
                                          : OwnerOfSession(deps, caller, id);
                       if (!owner.ok()) {
                         x->Reply(JsonError(owner.status()));
                         return true;
                       }
                       if (!owner->has_value()) return false;
                       RelayUnary<Resp>(deps, **owner, forward.method, request,
                                        http.Header("authorization"), x);
                       return true;
                     };
                     if (forwarded()) return;
                     if (st.ok()) {
                       if constexpr (std::is_pointer_v<Arg>) {
                         st = (deps.api->*handler)(caller, &request, &response);
                       } else {
                         st = (deps.api->*handler)(caller, request, &response);
                       }
                       if constexpr (std::is_same_v<Resp, v1::Run>) {
                         if (st.ok() && forward.again != nullptr && forward.again(response) &&
                             forwarded()) {
                           return;  // the owner answers (and audits)
                         }
                       }
                       if (audit.action != nullptr && deps.audit != nullptr) {
                         deps.audit->Record(caller.tenant, audit.action,
                                            audit.target(request, response), st);
                       }
                     }
                     if (!st.ok()) return x->Reply(JsonError(st));
                     absl::StatusOr<std::string> json = ToJson(&response);
                     x->Reply(json.ok() ? Json(*std::move(json)) : JsonError(json.status()));
                   });
          }};
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
    if (req_.follow()) {
      // At or past the log's end: 204, which stops an EventSource reconnecting after the end.
      absl::StatusOr<bool> ended = deps_.events->Ended(req_.run_id(), req_.after_seq());
      if (!ended.ok()) return x->Reply(JsonError(ended.status()));
      if (*ended) return x->Reply({204, {}, ""});
    }
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
      terminal = terminal || core::IsTerminal(e);
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

// The headers of an answer that carries bytes a sandbox made (an artifact, a workspace file):
// a download, never a page of this origin: were it opened anyway (an SVG, an HTML file named
// .txt), the browser runs it sandboxed (no scripts, no same-origin access) and lets it load
// nothing (default-src 'none': no style sheet, image or font that could carry data away);
// and nosniff (every answer's) keeps the declared type.
HttpHeaders SandboxMadeHeaders(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  // Only what cannot end the quoted string or the header: the name in full is the caller's
  // own (the URL), or the playbook's.
  std::string safe;
  for (char c : name) {
    const bool plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != ';';
    safe.push_back(plain ? c : '_');
  }
  return {{"Content-Type", ContentTypeOf(name)},
          {"Content-Disposition", absl::StrCat("attachment; filename=\"", safe, "\"")},
          {"Content-Security-Policy", "sandbox; default-src 'none'"}};
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
          HttpHeaders headers = SandboxMadeHeaders(d->name);
          headers.insert(headers.end(),
                         {{"X-Sandgate-Sha256", artifact->sha256()},
                          {"Digest", absl::StrCat("sha-256=", absl::Base64Escape(raw))},
                          {"X-Sandgate-Size", absl::StrCat(artifact->size_bytes())}});
          const ServiceDeps& deps = d->deps;
          x->Stream(
              200, std::move(headers),
              [d, &deps] {
                if (!deps.io->Submit([d] { NextChunk(d); })) {
                  if (Exchange x = d->x.lock()) x->End(true);
                }
              },
              nullptr, d->size);
        });
      }};
}

// One relayed stream, owned by the object that adapts it to its HTTP answer (its host).
// Thread safe.
template <typename Resp>
class HttpRelay {
 public:
  // Opens the call on the owner (`start(async_stub, client_context, reactor)`): each message
  // goes to `write`, and `finish` gets the owner's status (or why there is none). `host` is
  // kept until `finish` ran: the relay, the host's, is gRPC's until then.
  template <typename StartFn>
  void Begin(std::shared_ptr<void> host, const ServiceDeps& deps, const Route& route,
             const std::string& authorization, std::function<void(const Resp*)> write,
             std::function<void(const absl::Status&)> finish, StartFn start) {
    std::unique_ptr<grpc::ClientContext> ctx = ForwardedContext(deps, authorization);
    auto keep = std::make_shared<std::shared_ptr<void>>(std::move(host));
    auto relay = std::make_unique<StreamRelay<Resp>>(
        std::move(ctx), std::move(write), [keep, route, finish](const grpc::Status& st) {
          finish(FromGrpc(Forwarder::Explain(route, st)));
          keep->reset();  // the last act: the host, and this relay with it, may go now
        });
    StreamRelay<Resp>* r = relay.get();
    {
      absl::MutexLock lock(&mu_);
      if (!cancelled_) relay_ = std::move(relay);
    }
    if (relay != nullptr) return finish(errors::Cancelled("the caller went away"));
    std::shared_ptr<v1::Sandgate::Stub> stub = route.stub;
    r->Begin([&](grpc::ClientContext* c, grpc::ClientReadReactor<Resp>* reactor) {
      start(stub->async(), c, reactor);
    });
  }
  // The last message was sent to the client: the next is read. False when not relaying.
  bool Next() {
    StreamRelay<Resp>* r;
    {
      absl::MutexLock lock(&mu_);
      r = relay_.get();
    }
    if (r != nullptr) r->WriteDone(true);
    return r != nullptr;
  }
  // The client went away: the owner's call is cancelled. False when not relaying.
  bool Cancel() {
    StreamRelay<Resp>* r;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      r = relay_.get();
    }
    if (r != nullptr) r->Cancel();
    return r != nullptr;
  }

 private:
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<StreamRelay<Resp>> relay_ ABSL_GUARDED_BY(mu_);
};

// POST /v1/sessions/{session_id}:exec: the command's messages (ExecResponse) as NDJSON, one
// JSON object a line as each is produced, the last the CommandFinished with the exit status;
// an error after the stream began is a last line {"error": {code, status, message}}. As
// ExecStream in session_streams.cc: the command runs on the exec executor, its messages pass
// through a core::ExecOutput (the next one is taken once the last was sent, so a slow reader
// slows the command), and a client that hangs up (or the server's stop) cancels it. In a
// session another replica owns, the command runs there (HttpRelay).
class HttpExec final : public core::ExecWriter, public std::enable_shared_from_this<HttpExec> {
 public:
  HttpExec(const ServiceDeps& deps, core::Caller caller, v1::ExecRequest req,
           std::string authorization, Exchange x)
      : deps_(deps),
        caller_(std::move(caller)),
        req_(std::move(req)),
        authorization_(std::move(authorization)),
        x_(x),
        output_(this, &cancel_, deps_.clock) {}

  // On the polling thread, before Run is queued: from now on the client's going away (even
  // while Run waits in the executor's queue) cancels the command.
  void WatchClient(const Exchange& x) {
    auto self = shared_from_this();
    x->OnClose([self] { self->Gone(); });
  }

  // On the exec executor, for the command's whole run.
  void Run() {
    if (cancel_.cancelled()) return;  // the client left while this waited: nothing ran
    auto self = shared_from_this();
    absl::StatusOr<std::optional<Route>> owner = OwnerOfSession(deps_, caller_, req_.session_id());
    if (!owner.ok()) return End(owner.status());
    if (owner->has_value()) {
      return relay_.Begin(
          self, deps_, **owner, authorization_, [this](const v1::ExecResponse* m) { Send(m); },
          [this](const absl::Status& st) { End(st); },
          [this](auto* async, auto* ctx, auto* r) { async->Exec(ctx, &req_, r); });
    }
    core::ExecOutcome outcome = core::RunExec(*deps_.sessions, caller_, req_, &cancel_, &output_);
    if (outcome.ran && deps_.audit != nullptr) {
      deps_.audit->Record(caller_.tenant, "Exec", req_.session_id(), outcome.command_status);
    }
    output_.Close(outcome.stream_status);
  }

 private:
  void Send(const v1::ExecResponse* msg) override {
    Exchange x = x_.lock();
    if (!x) return;
    v1::ExecResponse copy = *msg;
    absl::StatusOr<std::string> json = ToJson(&copy);
    x->Write(json.ok() ? *json + "\n" : ErrorLine(json.status()));
    if (started_) return;
    // The first message: the answer begins (an error before it is a plain JSON error).
    started_ = true;
    auto self = shared_from_this();
    x->Stream(
        200, {{"Content-Type", "application/x-ndjson"}, {"Cache-Control", "no-cache"}},
        [self] {
          if (!self->deps_.io->Submit([self] {
                if (!self->relay_.Next()) self->output_.WriteDone();
              })) {
            self->Gone();
          }
        },
        [self] { self->Gone(); });
  }
  void End(const absl::Status& status) override {
    Exchange x = x_.lock();
    if (!x) return;
    if (!started_) return x->Reply(status.ok() ? Json("") : JsonError(status));
    if (!status.ok()) x->Write(ErrorLine(status));
    x->End(false);
  }
  static std::string ErrorLine(const absl::Status& status) {
    std::string body = JsonError(status).body;
    body.pop_back();  // its newline
    return absl::StrCat("{\"error\":", body, "}\n");
  }
  void Gone() {
    if (relay_.Cancel()) return;  // the owner's status ends it
    cancel_.Cancel("the caller went away");
    output_.Stop();
  }

  const ServiceDeps& deps_;
  const core::Caller caller_;
  const v1::ExecRequest req_;
  const std::string authorization_;  // passed on to the session's owner
  const std::weak_ptr<HttpExchange> x_;
  HttpRelay<v1::ExecResponse> relay_;
  CancelToken cancel_;
  core::ExecOutput output_;
  bool started_ = false;  // ExecOutput calls Send and End one at a time
};

HttpRoute ExecRoute(const ServiceDeps& deps) {
  return {"POST", "/v1/sessions/{session_id}:exec", [&deps](const HttpRequest& http, Exchange x) {
            absl::StatusOr<core::Caller> caller = AuthenticateHttp(deps, http);
            if (!caller.ok()) return x->Reply(JsonError(caller.status()));
            v1::ExecRequest req;
            absl::Status st = ParseRequest(http, &req);
            if (st.ok()) st = deps.sessions->CheckExec(req);
            if (!st.ok()) return x->Reply(JsonError(st));
            auto exec = std::make_shared<HttpExec>(deps, *caller, std::move(req),
                                                   http.Header("authorization"), x);
            exec->WatchClient(x);
            if (!deps.exec->Submit(caller->tenant, [exec] { exec->Run(); })) {
              x->Reply(JsonError(QueueFull()));
            }
          }};
}

// GET /v1/sessions/{session_id}/files/{path*}: the file's bytes (read under a lease, as
// DownloadFile does, or relayed from the session's owner), with its length; a chunk written
// per pull.
class HttpDownload final : public std::enable_shared_from_this<HttpDownload> {
 public:
  HttpDownload(const ServiceDeps& deps, core::Caller caller, std::string authorization, Exchange x)
      : deps_(deps), caller_(std::move(caller)), authorization_(std::move(authorization)), x_(x) {}

  // On the I/O executor.
  void Start(const HttpRequest& http) {
    Exchange x = x_.lock();
    if (!x) return;
    auto self = shared_from_this();
    x->OnClose([self] { self->relay_.Cancel(); });
    if (absl::Status st = ParseRequest(http, &req_); !st.ok()) return End(st);
    absl::StatusOr<std::optional<Route>> owner = OwnerOfSession(deps_, caller_, req_.session_id());
    if (!owner.ok()) return End(owner.status());
    if (owner->has_value()) {
      return relay_.Begin(
          self, deps_, **owner, authorization_, [this](const v1::FileChunk* c) { Send(*c); },
          [this](const absl::Status& st) { End(st); },
          [this](auto* async, auto* ctx, auto* r) { async->DownloadFile(ctx, &req_, r); });
    }
    absl::StatusOr<core::FileChunker> chunks =
        core::ReadForDownload(*deps_.sessions, caller_, req_, deps_.api->max_transfer_bytes());
    if (!chunks.ok()) return End(chunks.status());
    chunks_.emplace(*std::move(chunks));
    Send(chunks_->Next());
  }

 private:
  // One chunk at a time: the next is asked for (read here, or relayed) once this one was sent.
  void Send(const v1::FileChunk& chunk) {
    Exchange x = x_.lock();
    if (!x) return;
    x->Write(chunk.data());
    if (started_) return;
    started_ = true;
    auto self = shared_from_this();
    x->Stream(
        200, SandboxMadeHeaders(req_.path()),
        [self] {
          if (!self->deps_.io->Submit([self] { self->Next(); })) self->End(QueueFull());
        },
        [self] { self->relay_.Cancel(); }, chunk.total_size());
  }
  void Next() {
    if (relay_.Next()) return;
    if (chunks_->done()) return End(absl::OkStatus());
    Send(chunks_->Next());
  }
  // Once begun, the answer has its length: an error can only cut it short.
  void End(const absl::Status& st) {
    Exchange x = x_.lock();
    if (!x) return;
    if (!started_) return x->Reply(JsonError(st.ok() ? errors::Internal("no chunk") : st));
    x->End(!st.ok());
  }

  const ServiceDeps& deps_;
  const core::Caller caller_;
  const std::string authorization_;
  const std::weak_ptr<HttpExchange> x_;
  HttpRelay<v1::FileChunk> relay_;
  // Touched by one task or relayed message at a time.
  v1::DownloadFileRequest req_;
  std::optional<core::FileChunker> chunks_;
  bool started_ = false;
};

HttpRoute DownloadRoute(const ServiceDeps& deps) {
  return {"GET", "/v1/sessions/{session_id}/files/{path*}",
          [&deps](const HttpRequest& http, Exchange x) {
            absl::StatusOr<core::Caller> caller = AuthenticateHttp(deps, http);
            if (!caller.ok()) return x->Reply(JsonError(caller.status()));
            auto download =
                std::make_shared<HttpDownload>(deps, *caller, http.Header("authorization"), x);
            OnIo(deps, x, [download, http] { download->Start(http); });
          }};
}

// GET /v1/whoami: the tenant the bearer token names, and whether it is an operator (what the
// dashboard shows in its header). REST only, for the dashboard: it has no RPC.
HttpRoute WhoAmIRoute(const ServiceDeps& deps) {
  return {"GET", "/v1/whoami", [&deps](const HttpRequest& http, Exchange x) {
            absl::StatusOr<core::Caller> caller = AuthenticateHttp(deps, http);
            if (!caller.ok()) return x->Reply(JsonError(caller.status()));
            nlohmann::json me = {{"tenant", EscapeInvalidUtf8(caller->tenant)},
                                 {"operator", caller->is_operator}};
            x->Reply(Json(me.dump()));
          }};
}

// An upload taken whole (and checked) here, sent on to its session's owner in messages of
// kTransferChunkBytes through forwarding's UploadRelay, which asks for each once the last
// was written; the owner's FileInfo or status is the answer (and the owner audits it).
class HttpUploadRelay {
 public:
  HttpUploadRelay(std::shared_ptr<core::UploadAssembler> upload, Exchange x)
      : upload_(std::move(upload)), x_(std::move(x)) {}

  // `self` is this, kept until the relay finished.
  void Begin(std::shared_ptr<HttpUploadRelay> self, const Route& route,
             std::unique_ptr<grpc::ClientContext> ctx) {
    keep_ = std::move(self);
    relay_ = std::make_unique<UploadRelay>(
        std::move(ctx), [this] { Next(); },
        [this, route](const grpc::Status& st, const grpc::ByteBuffer& response) {
          std::shared_ptr<HttpUploadRelay> last = std::move(keep_);  // this goes with it
          v1::FileInfo info;
          grpc::ByteBuffer copy = response;
          if (!st.ok()) {
            x_->Reply(JsonError(FromGrpc(Forwarder::Explain(route, st))));
          } else if (!grpc::SerializationTraits<v1::FileInfo>::Deserialize(&copy, &info).ok()) {
            x_->Reply(JsonError(errors::Internal(absl::StrCat(
                "replica ", route.peer.replica, " answered with a message that does not parse"))));
          } else {
            absl::StatusOr<std::string> json = ToJson(&info);
            x_->Reply(json.ok() ? Json(*std::move(json)) : JsonError(json.status()));
          }
        });
    v1::UploadFileRequest first;
    *first.mutable_header() = upload_->header();
    Serialize(first);
    relay_->Begin(route.generic.get(), &message_);
  }

 private:
  // The last message was written: the next, or the end of the stream.
  void Next() {
    const std::string& data = upload_->data();
    if (offset_ >= data.size()) return relay_->End(/*cut=*/false);
    v1::UploadFileRequest msg;
    msg.set_data(data.substr(offset_, core::kTransferChunkBytes));
    offset_ += msg.data().size();
    Serialize(msg);
    relay_->Write(&message_);
  }
  void Serialize(const v1::UploadFileRequest& msg) {
    bool own = false;
    message_.Clear();
    grpc::SerializationTraits<v1::UploadFileRequest>::Serialize(msg, &message_, &own);
  }

  const std::shared_ptr<core::UploadAssembler> upload_;
  const Exchange x_;
  std::shared_ptr<HttpUploadRelay> keep_;
  std::unique_ptr<UploadRelay> relay_;
  // The relay's one write in flight at a time.
  grpc::ByteBuffer message_;
  size_t offset_ = 0;
};

// PUT /v1/sessions/{session_id}/files/{path*}[?mode=&sha256=&sizeBytes=]: the body is the
// file. As UploadFile: the body goes to a core::UploadAssembler piece by piece as it arrives
// (the HTTP server holds none of it), over the limit it is refused (at once when
// Content-Length, which stands for size_bytes when the query gives none, says so), and the
// file appears only once the whole body arrived and matched; a body cut short writes nothing.
HttpRoute UploadRoute(const ServiceDeps& deps) {
  HttpRoute route{"PUT", "/v1/sessions/{session_id}/files/{path*}", nullptr};
  route.open_body = [&deps](const HttpRequest& http) {
    HttpBodySink sink;
    absl::StatusOr<core::Caller> caller = AuthenticateHttp(deps, http);
    if (!caller.ok()) {
      sink.refused = JsonError(caller.status());
      return sink;
    }
    v1::UploadFileRequest first;
    absl::Status st = ParseRequest(http, first.mutable_header());
    uint64_t length = 0;
    if (st.ok() && !first.header().has_size_bytes() &&
        absl::SimpleAtoi(http.Header("content-length"), &length)) {
      first.mutable_header()->set_size_bytes(length);
    }
    auto upload = std::make_shared<core::UploadAssembler>(deps.api->max_transfer_bytes());
    if (st.ok()) st = upload->Add(first);
    auto fail = [&deps, upload, tenant = caller->tenant](const absl::Status& st) {
      if (deps.audit != nullptr) deps.audit->Record(tenant, "UploadFile", upload->target(), st);
      return JsonError(st);
    };
    if (!st.ok()) {
      sink.refused = fail(st);
      return sink;
    }
    sink.append = [upload, fail](const char* data, size_t size) -> std::optional<HttpResponse> {
      v1::UploadFileRequest msg;
      msg.set_data(data, size);
      absl::Status st = upload->Add(msg);
      if (!st.ok()) return fail(st);
      return std::nullopt;
    };
    sink.done = [&deps, upload, fail, caller = *caller,
                 authorization = http.Header("authorization")](Exchange x) {
      OnIo(deps, x, [&deps, upload, fail, caller, authorization, x] {
        absl::StatusOr<std::optional<Route>> owner =
            OwnerOfSession(deps, caller, upload->header().session_id());
        if (!owner.ok()) return x->Reply(fail(owner.status()));
        if (owner->has_value()) {
          auto relay = std::make_shared<HttpUploadRelay>(upload, x);
          return relay->Begin(relay, **owner, ForwardedContext(deps, authorization));
        }
        absl::StatusOr<v1::FileInfo> info = upload->Commit(*deps.sessions, caller, false);
        if (!info.ok()) return x->Reply(fail(info.status()));
        if (deps.audit != nullptr) {
          deps.audit->Record(caller.tenant, "UploadFile", upload->target(), absl::OkStatus());
        }
        absl::StatusOr<std::string> json = ToJson(&*info);
        x->Reply(json.ok() ? Json(*std::move(json)) : JsonError(json.status()));
      });
    };
    return sink;
  };
  return route;
}

}  // namespace

HttpResponse JsonError(const absl::Status& status) {
  return ErrorAnswer(HttpStatusOf(status.code()), status);
}

HttpRoute MetricsRoute(std::function<std::string()> render, const core::Tenants* tenants) {
  return {
      "GET", "/metrics",
      [render = std::move(render), tenants](const HttpRequest& http, Exchange x) {
        if (tenants != nullptr) {
          absl::StatusOr<core::Caller> caller = AuthenticateHttp(*tenants, http);
          if (!caller.ok()) return x->Reply(JsonError(caller.status()));
          if (!caller->is_operator) {
            return x->Reply(
                JsonError(errors::PermissionDenied("/metrics: the operator role is required")));
          }
        }
        x->Reply({200, {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}}, render()});
      }};
}

HttpServer::Routes RestRoutes(const ServiceDeps& deps) {
  using core::Api;
  return {
      // A run in a kept session runs in its sandbox.
      Unary<v1::RunAnalysisRequest, v1::Run>(
          deps, "POST", "/v1/runs", &Api::RunAnalysis, {"RunAnalysis", &CreatedId},
          {false, &SessionOf<v1::RunAnalysisRequest>, "/sandgate.v1.Sandgate/RunAnalysis"}),
      Unary<v1::ListRunsRequest, v1::ListRunsResponse>(deps, "GET", "/v1/runs", &Api::ListRuns),
      Unary<v1::GetRunRequest, v1::Run>(deps, "GET", "/v1/runs/{run_id}", &Api::GetRun),
      Unary<v1::CancelRunRequest, v1::Run>(deps, "POST", "/v1/runs/{run_id}:cancel",
                                           &Api::CancelRun, {"CancelRun", &RunIdOf},
                                           {true, &RunOf<v1::CancelRunRequest>,
                                            "/sandgate.v1.Sandgate/CancelRun", &RunMayHaveMoved}),
      Events(deps),
      Artifacts(deps),
      Unary<v1::CreateSessionRequest, v1::Session>(
          deps, "POST", "/v1/sessions", &Api::CreateSession, {"CreateSession", &CreatedId}),
      Unary<v1::ListSessionsRequest, v1::ListSessionsResponse>(deps, "GET", "/v1/sessions",
                                                               &Api::ListSessions),
      Unary<v1::GetSessionRequest, v1::Session>(deps, "GET", "/v1/sessions/{session_id}",
                                                &Api::GetSession),
      Unary<v1::KeepAliveRequest, v1::Session>(
          deps, "POST", "/v1/sessions/{session_id}:keepAlive", &Api::KeepAlive,
          {"KeepAlive", &SessionIdOf},
          {false, &SessionOf<v1::KeepAliveRequest>, "/sandgate.v1.Sandgate/KeepAlive"}),
      Unary<v1::CloseSessionRequest, v1::Session>(
          deps, "POST", "/v1/sessions/{session_id}:close", &Api::CloseSession,
          {"CloseSession", &SessionIdOf},
          {false, &SessionOf<v1::CloseSessionRequest>, "/sandgate.v1.Sandgate/CloseSession"}),
      Unary<v1::ListFilesRequest, v1::ListFilesResponse>(
          deps, "GET", "/v1/sessions/{session_id}/files", &Api::ListFiles, {},
          {false, &SessionOf<v1::ListFilesRequest>, "/sandgate.v1.Sandgate/ListFiles"}),
      Unary<v1::ListResourcesRequest, v1::ListResourcesResponse>(deps, "GET", "/v1/resources",
                                                                 &Api::ListResources),
      ExecRoute(deps),
      // Processes you talk to (docs/sessions.md): start, list, read output from an offset
      // (?offset=&max_bytes=&wait=5s), and input (data in base64, close_stdin, signal, resize).
      Unary<v1::StartProcessRequest, v1::Process>(
          deps, "POST", "/v1/sessions/{session_id}/processes", &Api::StartProcess,
          {"StartProcess",
           [](const v1::StartProcessRequest& q, const v1::Process& p) {
             return absl::StrCat(q.session_id(), "/", p.id());
           }},
          {false, &SessionOf<v1::StartProcessRequest>, "/sandgate.v1.Sandgate/StartProcess"}),
      Unary<v1::ListProcessesRequest, v1::ListProcessesResponse>(
          deps, "GET", "/v1/sessions/{session_id}/processes", &Api::ListProcesses, {},
          {false, &SessionOf<v1::ListProcessesRequest>, "/sandgate.v1.Sandgate/ListProcesses"}),
      Unary<v1::ReadProcessOutputRequest, v1::ProcessOutput>(
          deps, "GET", "/v1/sessions/{session_id}/processes/{process_id}/output",
          &Api::ReadProcessOutput, {},
          {false, &SessionOf<v1::ReadProcessOutputRequest>,
           "/sandgate.v1.Sandgate/ReadProcessOutput"},
          Lane::kWaits),
      Unary<v1::WriteProcessInputRequest, v1::WriteProcessInputResponse>(
          deps, "POST", "/v1/sessions/{session_id}/processes/{process_id}:input",
          &Api::WriteProcessInput, {},
          {false, &SessionOf<v1::WriteProcessInputRequest>,
           "/sandgate.v1.Sandgate/WriteProcessInput"},
          Lane::kWaits),
      // What a session uses now, for the dashboard's live figures (docs/dashboard.md).
      Unary<v1::GetSessionUsageRequest, v1::SessionUsage>(
          deps, "GET", "/v1/sessions/{session_id}/usage", &Api::GetSessionUsage, {},
          {false, &SessionOf<v1::GetSessionUsageRequest>, "/sandgate.v1.Sandgate/GetSessionUsage"}),
      // The rest of a session's files (docs/sessions.md).
      Unary<v1::StatFileRequest, v1::FileInfo>(
          deps, "GET", "/v1/sessions/{session_id}/files:stat", &Api::StatFile, {},
          {false, &SessionOf<v1::StatFileRequest>, "/sandgate.v1.Sandgate/StatFile"}),
      Unary<v1::DeleteFileRequest, v1::DeleteFileResponse>(
          deps, "POST", "/v1/sessions/{session_id}/files:delete", &Api::DeleteFile,
          {"DeleteFile",
           [](const v1::DeleteFileRequest& q, const v1::DeleteFileResponse&) {
             return absl::StrCat(q.session_id(), "/", q.path());
           }},
          {false, &SessionOf<v1::DeleteFileRequest>, "/sandgate.v1.Sandgate/DeleteFile"}),
      Unary<v1::RenameFileRequest, v1::FileInfo>(
          deps, "POST", "/v1/sessions/{session_id}/files:rename", &Api::RenameFile,
          {"RenameFile",
           [](const v1::RenameFileRequest& q, const v1::FileInfo&) {
             return absl::StrCat(q.session_id(), "/", q.from(), " -> ", q.to());
           }},
          {false, &SessionOf<v1::RenameFileRequest>, "/sandgate.v1.Sandgate/RenameFile"}),
      Unary<v1::MakeDirectoryRequest, v1::FileInfo>(
          deps, "POST", "/v1/sessions/{session_id}/files:mkdir", &Api::MakeDirectory,
          {"MakeDirectory",
           [](const v1::MakeDirectoryRequest& q, const v1::FileInfo&) {
             return absl::StrCat(q.session_id(), "/", q.path());
           }},
          {false, &SessionOf<v1::MakeDirectoryRequest>, "/sandgate.v1.Sandgate/MakeDirectory"}),
      // Exposed ports (docs/sessions.md); the proxy itself is server/port_proxy.h.
      Unary<v1::ExposePortRequest, v1::ExposedPort>(
          deps, "POST", "/v1/sessions/{session_id}/ports", &Api::ExposePort,
          {"ExposePort",
           [](const v1::ExposePortRequest& q, const v1::ExposedPort&) {
             return absl::StrCat(q.session_id(), "/", q.port());
           }},
          {false, &SessionOf<v1::ExposePortRequest>, "/sandgate.v1.Sandgate/ExposePort"}),
      Unary<v1::ListPortsRequest, v1::ListPortsResponse>(
          deps, "GET", "/v1/sessions/{session_id}/ports", &Api::ListPorts, {},
          {false, &SessionOf<v1::ListPortsRequest>, "/sandgate.v1.Sandgate/ListPorts"}),
      Unary<v1::UnexposePortRequest, v1::UnexposePortResponse>(
          deps, "POST", "/v1/sessions/{session_id}/ports/{port}:unexpose", &Api::UnexposePort,
          {"UnexposePort",
           [](const v1::UnexposePortRequest& q, const v1::UnexposePortResponse&) {
             return absl::StrCat(q.session_id(), "/", q.port());
           }},
          {false, &SessionOf<v1::UnexposePortRequest>, "/sandgate.v1.Sandgate/UnexposePort"}),
      // Snapshots (docs/sessions.md): take one (?close for a pause), list, get, delete.
      Unary<v1::SnapshotSessionRequest, v1::Snapshot>(
          deps, "POST", "/v1/sessions/{session_id}:snapshot", &Api::SnapshotSession,
          {"SnapshotSession",
           [](const v1::SnapshotSessionRequest& q, const v1::Snapshot& s) {
             return absl::StrCat(q.session_id(), " -> ", s.id());
           }},
          {false, &SessionOf<v1::SnapshotSessionRequest>, "/sandgate.v1.Sandgate/SnapshotSession"},
          Lane::kWaits),
      Unary<v1::ListSnapshotsRequest, v1::ListSnapshotsResponse>(deps, "GET", "/v1/snapshots",
                                                                 &Api::ListSnapshots),
      Unary<v1::GetSnapshotRequest, v1::Snapshot>(deps, "GET", "/v1/snapshots/{snapshot_id}",
                                                  &Api::GetSnapshot),
      Unary<v1::DeleteSnapshotRequest, v1::DeleteSnapshotResponse>(
          deps, "POST", "/v1/snapshots/{snapshot_id}:delete", &Api::DeleteSnapshot,
          {"DeleteSnapshot", [](const v1::DeleteSnapshotRequest& q,
                                const v1::DeleteSnapshotResponse&) { return q.snapshot_id(); }}),
      UploadRoute(deps),
      DownloadRoute(deps),
      WhoAmIRoute(deps),
      CodexExecServerRoute(deps),  // server/codex_exec_route.h: a WebSocket
      Unary<v1::DrainRequest, v1::DrainResponse>(
          deps, "POST", "/v1/daemon:drain", &Api::Drain,
          {"Drain", [](const v1::DrainRequest&,
                       const v1::DrainResponse&) { return std::string("daemon"); }}),
      Unary<v1::PurgeRequest, v1::PurgeResponse>(
          deps, "POST", "/v1/runs:purge", &Api::Purge,
          {"Purge",
           [](const v1::PurgeRequest& req, const v1::PurgeResponse&) {
             return absl::StrCat("older_than ", req.older_than().seconds(), "s");
           }}),
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

// The image routes (images.proto, docs/images.md). POST /v1/images starts a build and answers
// the image at once (state BUILDING, or READY when its packages were built already): the
// build goes on without the call; GET /v1/images/{name} shows its last progress line, and
// DELETE /v1/images/{name} cancels it (or removes a built image).
HttpServer::Routes ImageRoutes(const ServiceDeps& deps, core::ImageApi* images) {
  auto route = [&deps, images](const char* method, const char* pattern, auto handler,
                               const char* action) {
    return HttpRoute{method, pattern,
                     [&deps, images, handler, action](const HttpRequest& http, Exchange x) {
                       absl::StatusOr<core::Caller> caller = AuthenticateHttp(deps, http);
                       if (!caller.ok()) return x->Reply(JsonError(caller.status()));
                       OnIo(deps, x, [&deps, images, handler, action, http, x, caller = *caller] {
                         handler(deps, images, caller, http, x, action);
                       });
                     }};
  };
  // One unary image call: parse, call, audit (with `action`), answer.
  auto unary = [](auto request_type, auto call) {
    return [call](const ServiceDeps& deps, core::ImageApi* images, const core::Caller& caller,
                  const HttpRequest& http, const Exchange& x, const char* action) {
      decltype(request_type) request;
      absl::Status st = ParseRequest(http, &request);
      std::unique_ptr<google::protobuf::Message> response;
      if (st.ok()) {
        absl::StatusOr<std::unique_ptr<google::protobuf::Message>> r =
            call(images, caller, request);
        st = r.status();
        if (r.ok()) response = std::move(*r);
      }
      if (action != nullptr && deps.audit != nullptr) {
        deps.audit->Record(caller.tenant, action, request.name(), st);
      }
      if (!st.ok()) return x->Reply(JsonError(st));
      absl::StatusOr<std::string> json = ToJson(response.get());
      x->Reply(json.ok() ? Json(*std::move(json)) : JsonError(json.status()));
    };
  };
  using Out = absl::StatusOr<std::unique_ptr<google::protobuf::Message>>;
  auto build =
      unary(v1::BuildImageRequest(),
            [](core::ImageApi* images, const core::Caller& c, v1::BuildImageRequest& q) -> Out {
              SANDGATE_RETURN_IF_ERROR(images->StartBuild(c, q));
              auto image = std::make_unique<v1::Image>();
              v1::GetImageRequest get;
              get.set_name(q.name());
              SANDGATE_RETURN_IF_ERROR(images->GetImage(c, get, image.get()));
              return image;
            });
  auto get =
      unary(v1::GetImageRequest(),
            [](core::ImageApi* images, const core::Caller& c, v1::GetImageRequest& q) -> Out {
              auto image = std::make_unique<v1::Image>();
              SANDGATE_RETURN_IF_ERROR(images->GetImage(c, q, image.get()));
              return image;
            });
  auto remove =
      unary(v1::DeleteImageRequest(),
            [](core::ImageApi* images, const core::Caller& c, v1::DeleteImageRequest& q) -> Out {
              auto image = std::make_unique<v1::Image>();
              SANDGATE_RETURN_IF_ERROR(images->DeleteImage(c, q, image.get()));
              return image;
            });
  auto list = [](const ServiceDeps&, core::ImageApi* images, const core::Caller& caller,
                 const HttpRequest& http, const Exchange& x, const char*) {
    v1::ListImagesRequest request;
    v1::ListImagesResponse response;
    absl::Status st = ParseRequest(http, &request);
    if (st.ok()) st = images->ListImages(caller, request, &response);
    if (!st.ok()) return x->Reply(JsonError(st));
    absl::StatusOr<std::string> json = ToJson(&response);
    x->Reply(json.ok() ? Json(*std::move(json)) : JsonError(json.status()));
  };
  return {route("POST", "/v1/images", build, "BuildImage"),
          route("GET", "/v1/images", list, nullptr),
          route("GET", "/v1/images/{name}", get, nullptr),
          route("DELETE", "/v1/images/{name}", remove, "DeleteImage")};
}

}  // namespace sandgate::server
