#include "server/session_streams.h"

#include <atomic>
#include <optional>
#include <utility>

#include "common/cancel.h"
#include "core/exec_stream.h"
#include "core/file_transfer.h"
#include "server/edge_streams.h"
#include "server/edge_unary.h"
#include "server/forwarding.h"
#include "server/reactor.h"
#include "server/utf8_fields.h"

namespace sandgate::server {
namespace {

// Exec: the command runs on the exec executor (core::RunExec); its messages reach the
// client through a core::ExecOutput, which this reactor adapts as the stream's writer.
class ExecStream final : public PullWriter<v1::ExecResponse>, private core::ExecWriter {
 public:
  ExecStream(const ServiceDeps& deps, grpc::CallbackServerContext* ctx, core::Caller caller,
             v1::ExecRequest req)
      : deps_(deps),
        relay_(deps_, Policy("Exec"), ctx, this),
        caller_(std::move(caller)),
        req_(std::move(req)),
        output_(this, &cancel_, deps_.clock) {
    absl::Status valid = CheckNoNul(req_);
    if (valid.ok()) valid = deps_.sessions->CheckExec(req_);
    if (!valid.ok()) {
      FinishOnce(ToGrpc(valid));
    } else {
      Schedule(deps_.exec, caller_.tenant, [this] { Run(); });
    }
  }
  void OnWriteDone(bool ok) override {
    if (relay_.WriteDone(ok)) return;
    // After Stop, the completion of the write then in flight ends the call, also when that
    // write went through: the output calls this writer no more.
    if (!ok || stopped_.load()) {
      cancel_.Cancel("the caller went away");
      output_.Stop();
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    output_.WriteDone();
  }
  void OnCancel() override {
    if (relay_.Cancel()) return;
    cancel_.Cancel("the caller cancelled the stream");
    stopped_.store(true);
    if (!output_.Stop()) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
    }
  }

 private:
  void Run() {
    if (relay_.ToOwner(caller_, req_,
                       [this](auto* async, auto* ctx, auto* r) { async->Exec(ctx, &req_, r); })) {
      return;
    }
    output_.Close(ServeExec(deps_, caller_, req_, &cancel_, &output_));
  }
  void Send(const v1::ExecResponse* msg) override {
    if (!finished()) StartWrite(msg);
  }
  void End(const absl::Status& status) override { FinishOnce(ToGrpc(status)); }

  const ServiceDeps deps_;
  RelayedWriter<v1::ExecResponse> relay_;
  const core::Caller caller_;
  const v1::ExecRequest req_;
  CancelToken cancel_;
  std::atomic<bool> stopped_{false};  // the caller cancelled: output_ was stopped
  core::ExecOutput output_;
};

// DownloadFile: the file is read under a lease (core::ReadForDownload), then written chunk by
// chunk.
class FileDownload final : public PullWriter<v1::FileChunk> {
 public:
  FileDownload(const ServiceDeps& deps, grpc::CallbackServerContext* ctx, core::Caller caller,
               v1::DownloadFileRequest req)
      : deps_(deps),
        relay_(deps_, Policy("DownloadFile"), ctx, this),
        caller_(std::move(caller)),
        req_(std::move(req)) {
    Schedule(deps_.io, [this] { Read(); });
  }
  void OnWriteDone(bool ok) override {
    if (relay_.WriteDone(ok)) return;
    if (!ok || chunks_->done()) {
      FinishOnce(ok ? grpc::Status::OK
                    : grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    WriteNext();
  }
  // As for artifacts: the read task or the write in flight ends the stream.
  void OnCancel() override { relay_.Cancel(); }

 private:
  void Read() {
    if (absl::Status valid = CheckNoNul(req_); !valid.ok()) {
      FinishOnce(ToGrpc(valid));
      return;
    }
    if (relay_.ToOwner(caller_, req_, [this](auto* async, auto* ctx, auto* r) {
          async->DownloadFile(ctx, &req_, r);
        })) {
      return;
    }
    absl::StatusOr<core::FileChunker> chunks =
        core::ReadForDownload(*deps_.sessions, caller_, req_, deps_.api->max_transfer_bytes());
    if (!chunks.ok()) {
      FinishOnce(ToGrpc(chunks.status()));
      return;
    }
    chunks_ = std::move(*chunks);
    WriteNext();
  }
  void WriteNext() {
    chunk_ = chunks_->Next();
    StartWrite(&chunk_);
  }

  const ServiceDeps deps_;
  RelayedWriter<v1::FileChunk> relay_;
  const core::Caller caller_;
  const v1::DownloadFileRequest req_;
  // Touched only by the one task or reaction in flight at a time.
  std::optional<core::FileChunker> chunks_;
  v1::FileChunk chunk_;
};

// UploadFile: each message goes to a core::UploadAssembler, which commits the file when the
// client half-closed the stream (not when it was cancelled or broke).
//
// The method is registered raw and each message parsed here: in the callback API a message
// that does not parse reads as OnReadDone(false), exactly like the end of the stream, and
// would commit what came before it.
class FileUpload final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  FileUpload(const ServiceDeps& deps, grpc::CallbackServerContext* ctx, core::Caller caller,
             grpc::ByteBuffer* response)
      : deps_(deps),
        ctx_(ctx),
        caller_(std::move(caller)),
        response_(response),
        upload_(deps_.api->max_transfer_bytes()) {
    StartRead(&buf_);
  }
  void OnReadDone(bool ok) override {
    if (UploadRelay* relay = relayed()) {  // the owner parses what is passed on
      if (ok) {
        relay->Write(&buf_);
      } else {
        relay->End(Cut());
      }
      return;
    }
    if (!ok) {
      EndOfStream();
      return;
    }
    // Parsing consumes the buffer: the first message is kept (a shallow copy) to pass on.
    if (!routed_ && deps_.forwarder != nullptr) first_raw_ = buf_;
    v1::UploadFileRequest msg;
    const bool parsed =
        grpc::SerializationTraits<v1::UploadFileRequest>::Deserialize(&buf_, &msg).ok();
    if (parsed && msg.has_header()) {
      if (absl::Status valid = CheckNoNul(msg.header()); !valid.ok()) {
        Fail(valid);
        return;
      }
    }
    if (!routed_ && parsed && msg.has_header() && deps_.forwarder != nullptr) {
      // The header names the session: its owner takes the whole stream, this message first.
      routed_ = true;
      first_ = std::move(msg);
      if (!deps_.io->Submit([this] { Route(); })) Fail(QueueFull());
      return;
    }
    routed_ = true;
    Accept(parsed ? upload_.Add(msg) : upload_.Unparsable());
  }
  void OnCancel() override {
    cancelled_.store(true);
    if (UploadRelay* relay = relayed()) relay->Cancel();
  }
  void OnDone() override { Unref(); }

 private:
  void Accept(const absl::Status& st) {
    if (!st.ok()) {
      Fail(st);
      return;
    }
    StartRead(&buf_);
  }
  // On the executor: serve the upload here, or relay it to the session's owner.
  void Route() {
    absl::StatusOr<std::optional<server::Route>> route =
        OwnerRoute(deps_, Policy("UploadFile").owner, EdgeCall{ctx_, ""}, caller_, first_.header());
    if (!route.ok()) {
      Fail(route.status());
      return;
    }
    if (!route->has_value()) {
      Accept(upload_.Add(first_));
      return;
    }
    auto relay = std::make_unique<UploadRelay>(
        deps_.forwarder->ContextFor({ctx_, ""}), [this] { StartRead(&buf_); },
        [this, route = **route](const grpc::Status& status, const grpc::ByteBuffer& response) {
          if (status.ok()) *response_ = response;
          Finish(Forwarder::Explain(route, status));  // the owner audited it
          Unref();
        });
    UploadRelay* r = relay.get();
    {
      absl::MutexLock lock(&mu_);
      // The relay's, and this task's own: once started, the whole upload may end (and gRPC
      // be done with this reactor) before Begin returns.
      refs_ += 2;
      relay_ = std::move(relay);
    }
    // Asked before the call starts: from then on the whole upload may end, and gRPC free
    // ctx_, before Begin returns. (A cancellation after this finds the relay in OnCancel.)
    const bool cut = Cut();
    r->Begin((*route)->generic.get(), &first_raw_);
    if (cut) r->Cancel();  // cancelled during the lookup
    Unref();
  }
  UploadRelay* relayed() {
    absl::MutexLock lock(&mu_);
    return relay_.get();
  }
  // Deleted once gRPC is done with it and a relay has finished.
  void Unref() {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      last = --refs_ == 0;
    }
    if (last) delete this;
  }

  // A cancelled RPC (the client's TryCancel, a dropped connection, the deadline) also ends
  // the reads with ok=false; only a half-close of a live call means the client sent all.
  bool Cut() const { return cancelled_.load() || ctx_->IsCancelled(); }

  void EndOfStream() {
    if (Cut()) {
      Fail(upload_.CutError());
      return;
    }
    if (!deps_.io->Submit([this] { Commit(); })) Fail(QueueFull());
  }
  void Commit() {
    absl::StatusOr<v1::FileInfo> info = upload_.Commit(*deps_.sessions, caller_, Cut());
    if (!info.ok()) {
      Fail(info.status());
      return;
    }
    bool own = false;
    grpc::Status serialized =
        grpc::SerializationTraits<v1::FileInfo>::Serialize(*info, response_, &own);
    Audit(absl::OkStatus());
    Finish(serialized);
  }
  // Every upload the daemon ends is audited, also one cut before its header arrived.
  void Audit(const absl::Status& st) {
    AuditCall(deps_, Policy("UploadFile"), caller_, upload_.target(), st);
  }
  void Fail(const absl::Status& st) {
    Audit(st);
    Finish(ToGrpc(st));
  }

  const ServiceDeps deps_;
  grpc::CallbackServerContext* const ctx_;  // gRPC's, valid until OnDone
  const core::Caller caller_;
  grpc::ByteBuffer* const response_;
  std::atomic<bool> cancelled_{false};
  // Touched only by the one reaction or task in flight at a time.
  grpc::ByteBuffer buf_;
  core::UploadAssembler upload_;
  bool routed_ = false;          // the first message was looked at
  v1::UploadFileRequest first_;  // the header, while its session's owner is looked up
  grpc::ByteBuffer first_raw_;   // its bytes, for the owner
  absl::Mutex mu_;
  int refs_ ABSL_GUARDED_BY(mu_) = 1;  // gRPC's, and a relay's while it runs
  std::unique_ptr<UploadRelay> relay_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerWriteReactor<v1::ExecResponse>* NewExecStream(const ServiceDeps& deps,
                                                          grpc::CallbackServerContext* ctx,
                                                          const v1::ExecRequest& request) {
  absl::StatusOr<core::Caller> caller = Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) return new FailedWriter<v1::ExecResponse>(caller.status());
  return new ExecStream(deps, ctx, *caller, request);
}

grpc::ServerWriteReactor<v1::FileChunk>* NewFileDownload(const ServiceDeps& deps,
                                                         grpc::CallbackServerContext* ctx,
                                                         const v1::DownloadFileRequest& request) {
  absl::StatusOr<core::Caller> caller = Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) return new FailedWriter<v1::FileChunk>(caller.status());
  return new FileDownload(deps, ctx, *caller, request);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* NewFileUpload(const ServiceDeps& deps,
                                                         grpc::CallbackServerContext* ctx,
                                                         grpc::ByteBuffer* response) {
  absl::StatusOr<core::Caller> caller = Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) {
    class Failed : public grpc::ServerReadReactor<grpc::ByteBuffer> {
     public:
      explicit Failed(const absl::Status& s) { Finish(ToGrpc(s)); }
      void OnDone() override { delete this; }
    };
    return new Failed(caller.status());
  }
  return new FileUpload(deps, ctx, *caller, response);
}

}  // namespace sandgate::server
