// A session's streams over REST: a command's output as NDJSON (Exec), a file's bytes
// (DownloadFile), a body streamed in as a file (UploadFile); served here through the same
// core units as the gRPC reactors (session_streams.cc), or relayed to the replica that holds
// the session (server/forwarding.h), its answer passed on as it comes.
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/cancel.h"
#include "common/errors.h"
#include "core/exec_stream.h"
#include "core/file_transfer.h"
#include "server/edge_streams.h"
#include "server/edge_unary.h"
#include "server/forwarding.h"
#include "server/reactor.h"
#include "server/rest_json.h"
#include "server/rest_streams.h"
#include "server/status.h"

namespace sandgate::server {
namespace {

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
    std::unique_ptr<grpc::ClientContext> ctx = deps.forwarder->ContextFor({nullptr, authorization});
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
    absl::StatusOr<std::optional<Route>> owner =
        OwnerRoute(deps_, Policy("Exec").owner, EdgeCall{nullptr, authorization_}, caller_, req_);
    if (!owner.ok()) return End(owner.status());
    if (owner->has_value()) {
      return relay_.Begin(
          self, deps_, **owner, authorization_, [this](const v1::ExecResponse* m) { Send(m); },
          [this](const absl::Status& st) { End(st); },
          [this](auto* async, auto* ctx, auto* r) { async->Exec(ctx, &req_, r); });
    }
    output_.Close(ServeExec(deps_, caller_, req_, &cancel_, &output_));
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
    absl::StatusOr<std::optional<Route>> owner = OwnerRoute(
        deps_, Policy("DownloadFile").owner, EdgeCall{nullptr, authorization_}, caller_, req_);
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
            x_->Reply(JsonAnswer(&info));
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

}  // namespace

HttpRoute ExecRoute(const ServiceDeps& deps) {
  return {"POST", "/v1/sessions/{session_id}:exec", [&deps](const HttpRequest& http, Exchange x) {
            absl::StatusOr<core::Caller> caller = AuthenticateHttp(*deps.tenants, http);
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

HttpRoute DownloadRoute(const ServiceDeps& deps) {
  return {"GET", "/v1/sessions/{session_id}/files/{path*}",
          [&deps](const HttpRequest& http, Exchange x) {
            absl::StatusOr<core::Caller> caller = AuthenticateHttp(*deps.tenants, http);
            if (!caller.ok()) return x->Reply(JsonError(caller.status()));
            auto download =
                std::make_shared<HttpDownload>(deps, *caller, http.Header("authorization"), x);
            OnIo(deps, x, [download, http] { download->Start(http); });
          }};
}

// PUT /v1/sessions/{session_id}/files/{path*}[?mode=&sha256=&sizeBytes=]: the body is the
// file. As UploadFile: the body goes to a core::UploadAssembler piece by piece as it arrives
// (the HTTP server holds none of it), over the limit it is refused (at once when
// Content-Length, which stands for size_bytes when the query gives none, says so), and the
// file appears only once the whole body arrived and matched; a body cut short writes nothing.
HttpRoute UploadRoute(const ServiceDeps& deps) {
  HttpRoute route{"PUT", "/v1/sessions/{session_id}/files/{path*}", nullptr};
  route.open_body = [&deps](const HttpRequest& http) {
    HttpBodySink sink;
    absl::StatusOr<core::Caller> caller = AuthenticateHttp(*deps.tenants, http);
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
    auto fail = [&deps, upload, caller = *caller](const absl::Status& st) {
      AuditCall(deps, Policy("UploadFile"), caller, upload->target(), st);
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
        const EdgeCall from{nullptr, authorization};
        absl::StatusOr<std::optional<Route>> owner =
            OwnerRoute(deps, Policy("UploadFile").owner, from, caller, upload->header());
        if (!owner.ok()) return x->Reply(fail(owner.status()));
        if (owner->has_value()) {
          auto relay = std::make_shared<HttpUploadRelay>(upload, x);
          return relay->Begin(relay, **owner, deps.forwarder->ContextFor(from));
        }
        absl::StatusOr<v1::FileInfo> info = upload->Commit(*deps.sessions, caller, false);
        if (!info.ok()) return x->Reply(fail(info.status()));
        AuditCall(deps, Policy("UploadFile"), caller, upload->target(), absl::OkStatus());
        x->Reply(JsonAnswer(&*info));
      });
    };
    return sink;
  };
  return route;
}

}  // namespace sandgate::server
