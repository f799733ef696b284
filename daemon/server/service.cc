#include "server/service.h"

#include <atomic>
#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/errors.h"
#include "agent/agent.h"
#include "common/sha256.h"
#include "common/utf8.h"
#include "core/sandbox_spec.h"
#include "server/status.h"
#include "server/utf8_fields.h"
#include "absl/strings/match.h"

namespace sandgate::server {
namespace {

constexpr uint64_t kChunkBytes = 256 * 1024;
// gRPC clients refuse a message over 4 MiB unless told otherwise, and a default workspace
// holds 16384 names of up to 255 bytes: a listing ends (truncated) before that, so that any
// client can read it.
constexpr size_t kMaxListingBytes = 3 << 20;
constexpr uint32_t kEventBatch = 256;

// The executor's queue of blocking work is at its limit. Says "queue full" so a caller can
// tell it from gRPC's own RESOURCE_EXHAUSTED for a message over the size limit.
absl::Status QueueFull() {
  return errors::ResourceExhausted("queue full: the daemon's queue of blocking work is at its limit; retry");
}

absl::StatusOr<core::Caller> Authenticate(const core::Tenants& tenants,
                                          grpc::CallbackServerContext* ctx) {
  std::optional<std::string> authorization;
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) authorization = std::string(it->second.data(), it->second.size());
  return tenants.Authenticate(authorization);
}

// Runs `fn(caller)` on the I/O executor and finishes the unary call with its status and
// `response` (its strings escaped to UTF-8). With an `action`, the call is written to the
// audit log (`target()` is read after `fn` ran).
grpc::ServerUnaryReactor* Unary(const ServiceDeps& deps, grpc::CallbackServerContext* ctx,
                                google::protobuf::Message* response,
                                std::function<absl::Status(const core::Caller&)> fn,
                                const char* action = nullptr,
                                std::function<std::string()> target = nullptr) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<core::Caller> caller = Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) {
    reactor->Finish(ToGrpc(caller.status()));
    return reactor;
  }
  bool queued = deps.io->Submit([&deps, reactor, response, fn = std::move(fn), caller = *caller, action,
                                 target = std::move(target)] {
    absl::Status st = fn(caller);
    if (st.ok()) EscapeStringFields(response);
    if (action != nullptr && deps.audit != nullptr) deps.audit->Record(caller.tenant, action, target ? target() : "", st);
    reactor->Finish(ToGrpc(st));
  });
  if (!queued) reactor->Finish(ToGrpc(QueueFull()));
  return reactor;
}

// Lifetime of a write reactor whose work also runs on executor threads and in EventLog
// callbacks: it is deleted when gRPC is done with it (OnDone) and no such work still holds
// it. Finish is called at most once.
template <typename T>
class PullWriter : public grpc::ServerWriteReactor<T> {
 public:
  void OnDone() override { Release(); }

 protected:
  void Acquire() {
    absl::MutexLock lock(&mu_);
    ++refs_;
  }
  void Release() {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      last = --refs_ == 0;
    }
    if (last) delete this;
  }
  // Runs `fn` on the executor with a reference held; finishes the call if it cannot queue.
  void Schedule(core::Executor* io, std::function<void()> fn) {
    Acquire();
    if (!io->Submit([this, fn = std::move(fn)] {
          fn();
          Release();
        })) {
      FinishOnce(ToGrpc(QueueFull()));
      Release();
    }
  }
  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    this->Finish(status);
  }
  bool finished() {
    absl::MutexLock lock(&mu_);
    return finished_;
  }

  absl::Mutex mu_;

 private:
  int refs_ ABSL_GUARDED_BY(mu_) = 1;  // gRPC's, released in OnDone
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// StreamEvents: replay from the log, then follow until run.finished. One write in flight at
// a time; the next batch is read on the executor when the buffer is empty.
class EventStream final : public PullWriter<v1::Event> {
 public:
  EventStream(const ServiceDeps& deps, core::Caller caller, v1::StreamEventsRequest req)
      : deps_(deps), caller_(std::move(caller)), req_(std::move(req)), last_seq_(req_.after_seq()) {
    Schedule(deps_.io, [this] { FirstFetch(); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    bool terminal;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (current_.seq() > 0) last_seq_ = current_.seq();
      // A kept session's own log (run_id is the session's id) ends with session.closed.
      terminal = current_.type() == "run.finished" ||
                 (current_.type() == "session.closed" && current_.run_id() == current_.session_id());
    }
    if (terminal) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    Pump();
  }

  void OnCancel() override {
    uint64_t wait_id;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      wait_id = wait_id_;
      wait_id_ = 0;
    }
    if (wait_id != 0 && deps_.events->CancelWait(wait_id)) Release();
    bool writing;
    {
      absl::MutexLock lock(&mu_);
      writing = writing_;
    }
    if (!writing) FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
  }

 private:
  void FirstFetch() {
    // A run's log, or a kept session's own (its id).
    absl::Status visible = deps_.runs->CheckEventsVisible(caller_, req_.run_id());
    if (!visible.ok()) {
      FinishOnce(ToGrpc(visible));
      return;
    }
    Fetch();
  }

  // On the executor: read the next batch, then write it, or wait for more.
  void Fetch() {
    int64_t after;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return;
      after = last_seq_;
    }
    absl::StatusOr<std::vector<v1::Event>> batch =
        deps_.events->Read(req_.run_id(), after, kEventBatch);
    if (!batch.ok()) {
      FinishOnce(ToGrpc(batch.status()));
      return;
    }
    if (batch->empty()) {
      if (!req_.follow()) {
        FinishOnce(grpc::Status::OK);
        return;
      }
      Acquire();
      {
        absl::MutexLock lock(&mu_);
        woken_ = false;
      }
      // The callback may run before Wait returns; woken_ tells whether the id is still live.
      uint64_t id = deps_.events->Wait(req_.run_id(), after, deps_.heartbeat_interval,
                                       [this](core::EventLog::WaitResult r) { OnWake(r); });
      absl::MutexLock lock(&mu_);
      if (!woken_) wait_id_ = id;
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      for (auto& e : *batch) buffer_.push_back(std::move(e));
    }
    Pump();
  }

  // From the EventLog (appending thread or timer): never blocks.
  void OnWake(core::EventLog::WaitResult result) {
    {
      absl::MutexLock lock(&mu_);
      wait_id_ = 0;
      woken_ = true;
    }
    switch (result) {
      case core::EventLog::WaitResult::kReady:
        Schedule(deps_.io, [this] { Fetch(); });
        break;
      case core::EventLog::WaitResult::kTimeout: {
        v1::Event hb;
        hb.set_run_id(req_.run_id());
        hb.set_type("heartbeat");
        hb.mutable_heartbeat();
        {
          absl::MutexLock lock(&mu_);
          buffer_.push_back(std::move(hb));
        }
        Pump();
        break;
      }
      case core::EventLog::WaitResult::kShutdown:
        FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the daemon is shutting down; the run stays queued: follow again "
                                "with after_seq once it is back"));
        break;
    }
    Release();
  }

  // Starts the next write, or the next fetch when nothing is buffered; ends a cancelled
  // stream once no write is in flight (every reactor must reach Finish, or Server::Shutdown
  // waits for it forever).
  void Pump() {
    bool end = false;
    {
      absl::MutexLock lock(&mu_);
      if (writing_) return;
      end = cancelled_;
    }
    if (end) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || cancelled_) return;
      if (!buffer_.empty()) {
        current_ = std::move(buffer_.front());
        buffer_.pop_front();
        writing_ = true;
      }
    }
    if (finished()) return;
    bool have;
    {
      absl::MutexLock lock(&mu_);
      have = writing_;
    }
    if (have) {
      EscapeStringFields(&current_);
      StartWrite(&current_);
    } else {
      Schedule(deps_.io, [this] { Fetch(); });
    }
  }

  const ServiceDeps deps_;
  const core::Caller caller_;
  const v1::StreamEventsRequest req_;
  int64_t last_seq_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::Event> buffer_ ABSL_GUARDED_BY(mu_);
  v1::Event current_;  // the write in flight; touched only by the writer
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t wait_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
};

// DownloadArtifact: one chunk read on the executor per write.
class ArtifactStream final : public PullWriter<v1::ArtifactChunk> {
 public:
  ArtifactStream(const ServiceDeps& deps, core::Caller caller, v1::DownloadArtifactRequest req)
      : deps_(deps), caller_(std::move(caller)), req_(std::move(req)) {
    Schedule(deps_.io, [this] { Next(); });
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    if (last_) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    Schedule(deps_.io, [this] { Next(); });
  }
  // A write or a read task is always in flight until Finish; the failed write that follows
  // a cancellation ends the stream.
  void OnCancel() override {}

 private:
  void Next() {
    if (finished()) return;
    if (!artifact_) {
      absl::StatusOr<v1::Run> run = deps_.runs->Get(caller_, req_.run_id());
      if (!run.ok()) {
        FinishOnce(ToGrpc(run.status()));
        return;
      }
      for (const auto& a : run->artifacts()) {
        if (a.name() == req_.name()) artifact_ = a;
      }
      if (!artifact_) {
        FinishOnce(ToGrpc(errors::NotFound("artifact", absl::StrCat(req_.run_id(), "/", req_.name()))));
        return;
      }
    }
    absl::StatusOr<std::string> data =
        deps_.runs->ReadArtifact(caller_, req_.run_id(), req_.name(), offset_, kChunkBytes);
    if (!data.ok()) {
      FinishOnce(ToGrpc(data.status()));
      return;
    }
    chunk_.Clear();
    chunk_.set_offset(offset_);
    chunk_.set_total_size(artifact_->size_bytes());
    offset_ += data->size();
    chunk_.set_data(std::move(*data));
    last_ = offset_ >= artifact_->size_bytes();
    if (last_) chunk_.set_sha256(artifact_->sha256());
    StartWrite(&chunk_);
  }

  const ServiceDeps deps_;
  const core::Caller caller_;
  const v1::DownloadArtifactRequest req_;
  // Touched only by the one task or reaction in flight at a time.
  std::optional<v1::Artifact> artifact_;
  uint64_t offset_ = 0;
  bool last_ = false;
  v1::ArtifactChunk chunk_;
};

// A stream that only reports an error.
template <typename T>
class FailedWriter : public grpc::ServerWriteReactor<T> {
 public:
  explicit FailedWriter(const absl::Status& s) { this->Finish(ToGrpc(s)); }
  void OnDone() override { delete this; }
};

template <typename Reactor, typename Request, typename T>
grpc::ServerWriteReactor<T>* StartStream(const ServiceDeps& deps,
                                         grpc::CallbackServerContext* ctx, const Request& req) {
  absl::StatusOr<core::Caller> caller = Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) return new FailedWriter<T>(caller.status());
  return new Reactor(deps, *caller, req);
}

v1::FileInfo::Type ToProto(sandbox::FileType t) {
  switch (t) {
    case sandbox::FileType::kRegular: return v1::FileInfo::TYPE_REGULAR;
    case sandbox::FileType::kDirectory: return v1::FileInfo::TYPE_DIRECTORY;
    case sandbox::FileType::kSymlink: return v1::FileInfo::TYPE_SYMLINK;
    case sandbox::FileType::kOther: return v1::FileInfo::TYPE_OTHER;
  }
  return v1::FileInfo::TYPE_OTHER;
}

// Exec: the command runs on the exec executor under a session lease; its output is queued
// and written one message at a time. A full queue blocks the command's output callback, so a
// slow reader slows the command (its pipe fills) instead of growing the daemon's memory.
class ExecStream final : public PullWriter<v1::ExecResponse> {
 public:
  ExecStream(const ServiceDeps& deps, core::Caller caller, v1::ExecRequest req)
      : deps_(deps), caller_(std::move(caller)), req_(std::move(req)) {
    if (absl::Status valid = deps_.sessions->CheckExec(req_); !valid.ok()) {
      FinishOnce(ToGrpc(valid));
    } else {
      Schedule(deps_.exec, [this] { Run(); });
    }
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      cancel_.Cancel("the caller went away");
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
    }
    Pump();
  }
  void OnCancel() override {
    cancel_.Cancel("the caller cancelled the stream");
    bool writing;
    {
      absl::MutexLock lock(&mu_);
      writing = writing_;
    }
    if (!writing) FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
  }

 private:
  static constexpr size_t kMaxQueuedBytes = 1 << 20;

  void Run() {
    absl::StatusOr<std::unique_ptr<core::SessionManager::Lease>> lease =
        deps_.sessions->Acquire(caller_, req_.session_id(), {&cancel_, [this](const v1::SessionExpiring& x) {
                                  v1::ExecResponse msg;
                                  *msg.mutable_expiring() = x;
                                  Enqueue(std::move(msg), /*wait_for_room=*/false);
                                }});
    if (!lease.ok()) {
      FinishOnce(ToGrpc(lease.status()));
      return;
    }
    sandbox::ExecRequest exec;
    if (req_.argv().empty()) {
      exec.argv = {"/bin/sh", "-c", req_.command()};
    } else {
      exec.argv.assign(req_.argv().begin(), req_.argv().end());
    }
    exec.env.insert(req_.env().begin(), req_.env().end());
    exec.cwd = req_.cwd();
    exec.timeout = req_.has_timeout() ? core::FromProto(req_.timeout()) : (*lease)->command_timeout();
    if (req_.output_cap_bytes() > 0) exec.output_cap_bytes = req_.output_cap_bytes();
    absl::StatusOr<sandbox::ExecResult> result = (*lease)->session().Exec(
        exec,
        [this](sandbox::OutputStream stream, absl::string_view data) {
          v1::ExecResponse msg;
          auto* out = msg.mutable_output();
          out->set_stream(agent::ToProto(stream));
          out->set_data(std::string(data));
          Enqueue(std::move(msg), /*wait_for_room=*/true);
        },
        &cancel_);
    lease->reset();
    grpc::Status final_status = grpc::Status::OK;
    if (!result.ok()) {
      final_status = ToGrpc(result.status());
    } else {
      v1::ExecResponse msg;
      *msg.mutable_finished() = agent::ToCommandFinished(*result);
      Enqueue(std::move(msg), /*wait_for_room=*/false);
      // A command ended by its session's end says so in the stream's status.
      if (result->cancelled && absl::StartsWith(cancel_.reason(), "session ")) {
        final_status = grpc::Status(grpc::StatusCode::ABORTED, cancel_.reason());
      }
    }
    if (deps_.audit) {
      absl::Status outcome = result.ok() ? absl::OkStatus() : result.status();
      deps_.audit->Record(caller_.tenant, "Exec", req_.session_id(), outcome);
    }
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      final_status_ = final_status;
    }
    Pump();
  }

  void Enqueue(v1::ExecResponse msg, bool wait_for_room) {
    {
      absl::MutexLock lock(&mu_);
      if (wait_for_room) {
        auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return queued_bytes_ < kMaxQueuedBytes || cancel_.cancelled();
        };
        while (!room()) mu_.AwaitWithTimeout(absl::Condition(&room), absl::Milliseconds(100));
        if (cancel_.cancelled()) return;
      }
      queued_bytes_ += msg.ByteSizeLong();
      queue_.push_back(std::move(msg));
    }
    Pump();
  }

  void Pump() {
    grpc::Status finish;
    bool do_finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (writing_) return;
      if (!queue_.empty()) {
        current_ = std::move(queue_.front());
        queue_.pop_front();
        queued_bytes_ -= current_.ByteSizeLong();
        writing_ = true;
      } else if (done_) {
        do_finish = true;
        finish = final_status_;
      } else {
        return;
      }
    }
    if (do_finish) {
      FinishOnce(finish);
    } else if (!finished()) {
      StartWrite(&current_);
    }
  }

  const ServiceDeps deps_;
  const core::Caller caller_;
  const v1::ExecRequest req_;
  CancelToken cancel_;
  std::deque<v1::ExecResponse> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  v1::ExecResponse current_;  // the write in flight
};

// DownloadFile: the file is read from the workspace under a lease (regular files only, capped),
// then written in chunks.
class FileDownload final : public PullWriter<v1::FileChunk> {
 public:
  FileDownload(const ServiceDeps& deps, core::Caller caller, v1::DownloadFileRequest req)
      : deps_(deps), caller_(std::move(caller)), req_(std::move(req)) {
    Schedule(deps_.io, [this] { Read(); });
  }
  void OnWriteDone(bool ok) override {
    if (!ok || offset_ >= data_.size()) {
      FinishOnce(ok ? grpc::Status::OK : grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    WriteNext();
  }
  // As for artifacts: the read task or the write in flight ends the stream.
  void OnCancel() override {}

 private:
  void Read() {
    if (req_.path().empty()) {
      FinishOnce(ToGrpc(errors::InvalidArgument("path: required")));
      return;
    }
    absl::StatusOr<std::unique_ptr<core::SessionManager::Lease>> lease =
        deps_.sessions->Acquire(caller_, req_.session_id());
    if (!lease.ok()) {
      FinishOnce(ToGrpc(lease.status()));
      return;
    }
    uint64_t cap = req_.max_bytes() ? std::min(req_.max_bytes(), deps_.max_transfer_bytes) : deps_.max_transfer_bytes;
    absl::StatusOr<std::string> data = (*lease)->session().ReadFile(req_.path(), cap);
    if (!data.ok()) {
      FinishOnce(ToGrpc(data.status()));
      return;
    }
    data_ = std::move(*data);
    sha256_ = Sha256::Hex(data_);
    WriteNext();
  }
  void WriteNext() {
    chunk_.Clear();
    chunk_.set_offset(offset_);
    chunk_.set_total_size(data_.size());
    size_t n = std::min<size_t>(kChunkBytes, data_.size() - offset_);
    chunk_.set_data(data_.substr(offset_, n));
    offset_ += n;
    if (offset_ >= data_.size()) chunk_.set_sha256(sha256_);
    StartWrite(&chunk_);
  }

  const ServiceDeps deps_;
  const core::Caller caller_;
  const v1::DownloadFileRequest req_;
  // Touched only by the one task or reaction in flight at a time.
  std::string data_, sha256_;
  size_t offset_ = 0;
  v1::FileChunk chunk_;
};

// UploadFile: a header, then data, gathered up to the transfer cap. The file appears under
// its name only when the client half-closed the stream (not when it was cancelled or broke)
// and the bytes match the header's size_bytes and sha256 when given; the workspace write
// itself goes through a temporary name (Session::WriteFile), so nothing partial is ever seen.
//
// The method is registered raw and each message parsed here: in the callback API a message
// that does not parse reads as OnReadDone(false), exactly like the end of the stream, and
// would commit what came before it.
class FileUpload final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  FileUpload(const ServiceDeps& deps, grpc::CallbackServerContext* ctx, core::Caller caller,
             grpc::ByteBuffer* response)
      : deps_(deps), ctx_(ctx), caller_(std::move(caller)), response_(response) {
    StartRead(&buf_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      EndOfStream();
      return;
    }
    ++messages_;
    v1::UploadFileRequest msg;
    if (!grpc::SerializationTraits<v1::UploadFileRequest>::Deserialize(&buf_, &msg).ok()) {
      Fail(errors::InvalidArgument(absl::StrCat(
          "message ", messages_, " is not a valid sandgate.v1.UploadFileRequest (a string field "
          "that is not UTF-8, or bytes that are not one); nothing was written")));
      return;
    }
    if (!have_header_) {
      if (!msg.has_header() || msg.header().session_id().empty() || msg.header().path().empty()) {
        Fail(errors::InvalidArgument("header: the first message must carry session_id and path"));
        return;
      }
      header_ = msg.header();
      have_header_ = true;
      absl::Status valid = CheckHeader();
      if (!valid.ok()) {
        Fail(valid);
        return;
      }
    } else if (msg.has_header()) {
      Fail(errors::InvalidArgument("header: only the first message carries one"));
      return;
    } else {
      if (data_.size() + msg.data().size() > deps_.max_transfer_bytes) {
        Fail(errors::ResourceExhausted(absl::StrCat("upload of ", header_.path(), " is larger than the ",
                                                    deps_.max_transfer_bytes, "-byte limit")));
        return;
      }
      if (header_.has_size_bytes() && data_.size() + msg.data().size() > header_.size_bytes()) {
        Fail(errors::FailedPrecondition(absl::StrCat("upload of ", header_.path(),
                                                     ": more bytes than header.size_bytes (",
                                                     header_.size_bytes(), "); nothing was written")));
        return;
      }
      data_.append(msg.data());
    }
    StartRead(&buf_);
  }
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

 private:
  absl::Status CheckHeader() const {
    if (absl::EndsWith(header_.path(), "/")) {
      return errors::InvalidArgument(absl::StrCat("header.path: \"", header_.path(),
                                                  "\" ends with \"/\"; name a file, not a directory"));
    }
    if (!header_.sha256().empty() && !IsSha256Hex(header_.sha256())) {
      return errors::InvalidArgument("header.sha256: must be 64 lowercase hex digits");
    }
    if (header_.has_size_bytes() && header_.size_bytes() > deps_.max_transfer_bytes) {
      return errors::InvalidArgument(absl::StrCat("header.size_bytes: ", header_.size_bytes(),
                                                  " is larger than the ", deps_.max_transfer_bytes,
                                                  "-byte limit"));
    }
    return absl::OkStatus();
  }
  static bool IsSha256Hex(absl::string_view s) {
    if (s.size() != 64) return false;
    for (char c : s) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
  }
  // A cancelled RPC (the client's TryCancel, a dropped connection, the deadline) also ends
  // the reads with ok=false; only a half-close of a live call means the client sent all.
  bool Cut() const { return cancelled_.load() || ctx_->IsCancelled(); }

  void EndOfStream() {
    if (Cut()) {
      Fail(CutError());
      return;
    }
    if (!have_header_) {
      Fail(errors::InvalidArgument("header: the first message must carry session_id and path"));
      return;
    }
    if (!deps_.io->Submit([this] { Write(); })) Fail(QueueFull());
  }
  absl::Status CutError() const {
    return errors::Cancelled(absl::StrCat("upload of ", have_header_ ? header_.path() : "(no header yet)",
                                          " was cancelled after ", data_.size(), " bytes; nothing was written"));
  }
  // Size and digest, when the header gave them, against what arrived.
  absl::Status CheckReceived(const std::string& sha256) const {
    if (header_.has_size_bytes() && data_.size() != header_.size_bytes()) {
      return errors::FailedPrecondition(absl::StrCat("upload of ", header_.path(), ": header.size_bytes says ",
                                                     header_.size_bytes(), " bytes, got ", data_.size(),
                                                     "; nothing was written"));
    }
    if (!header_.sha256().empty() && sha256 != header_.sha256()) {
      return errors::FailedPrecondition(absl::StrCat("upload of ", header_.path(), ": header.sha256 says ",
                                                     header_.sha256(), ", got ", sha256, "; nothing was written"));
    }
    return absl::OkStatus();
  }

  void Write() {
    const std::string sha256 = Sha256::Hex(data_);
    absl::Status st = CheckReceived(sha256);
    if (st.ok() && Cut()) st = CutError();
    if (st.ok()) {
      absl::StatusOr<std::unique_ptr<core::SessionManager::Lease>> lease =
          deps_.sessions->Acquire(caller_, header_.session_id());
      st = lease.status();
      if (st.ok()) {
        st = (*lease)->session().WriteFile(header_.path(), data_,
                                           header_.mode() ? static_cast<int>(header_.mode()) : 0644);
      }
    }
    if (!st.ok()) {
      Fail(st);
      return;
    }
    v1::FileInfo info;
    info.set_path(header_.path());
    info.set_type(v1::FileInfo::TYPE_REGULAR);
    info.set_size_bytes(data_.size());
    info.set_sha256(sha256);
    bool own = false;
    grpc::Status serialized = grpc::SerializationTraits<v1::FileInfo>::Serialize(info, response_, &own);
    Audit(absl::OkStatus());
    Finish(serialized);
  }
  // Every upload the daemon ends is audited, also one cut before its header arrived.
  void Audit(const absl::Status& st) {
    if (deps_.audit == nullptr) return;
    deps_.audit->Record(caller_.tenant, "UploadFile",
                        have_header_ ? absl::StrCat(header_.session_id(), ":", header_.path()) : "(no header)", st);
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
  int messages_ = 0;
  v1::UploadFileRequest::Header header_;
  bool have_header_ = false;
  std::string data_;
};

}  // namespace

grpc::ServerUnaryReactor* SandgateService::RunAnalysis(grpc::CallbackServerContext* ctx,
                                                       const v1::RunAnalysisRequest* request,
                                                       v1::Run* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    // Moved out, not copied: its inputs may be max_input_bytes. gRPC owns the (non-const)
    // message and only destroys it after the call.
    absl::StatusOr<v1::Run> run =
        deps_.runs->Start(caller, std::move(*const_cast<v1::RunAnalysisRequest*>(request)));
    if (run.ok()) *response = std::move(*run);
    return run.status();
  }, "RunAnalysis", [response] { return response->id(); });
}

grpc::ServerUnaryReactor* SandgateService::GetRun(grpc::CallbackServerContext* ctx,
                                                  const v1::GetRunRequest* request,
                                                  v1::Run* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<v1::Run> run = deps_.runs->Get(caller, request->run_id());
    if (run.ok()) *response = std::move(*run);
    return run.status();
  });
}

grpc::ServerUnaryReactor* SandgateService::ListRuns(grpc::CallbackServerContext* ctx,
                                                    const v1::ListRunsRequest* request,
                                                    v1::ListRunsResponse* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<store::RunPage> page =
        deps_.runs->List(caller, request->page_size(), request->page_token());
    if (!page.ok()) return page.status();
    for (auto& run : page->runs) *response->add_runs() = std::move(run);
    response->set_next_page_token(page->next_page_token);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SandgateService::CancelRun(grpc::CallbackServerContext* ctx,
                                                     const v1::CancelRunRequest* request,
                                                     v1::Run* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<v1::Run> run = deps_.runs->Cancel(caller, request->run_id(), request->reason());
    if (run.ok()) *response = std::move(*run);
    return run.status();
  }, "CancelRun", [request] { return request->run_id(); });
}

grpc::ServerWriteReactor<v1::Event>* SandgateService::StreamEvents(
    grpc::CallbackServerContext* ctx, const v1::StreamEventsRequest* request) {
  if (request->run_id().empty() || request->after_seq() < 0) {
    return new FailedWriter<v1::Event>(errors::InvalidArgument(
        request->run_id().empty() ? "run_id: required" : "after_seq: must not be negative"));
  }
  return StartStream<EventStream, v1::StreamEventsRequest, v1::Event>(deps_, ctx, *request);
}

grpc::ServerWriteReactor<v1::ArtifactChunk>* SandgateService::DownloadArtifact(
    grpc::CallbackServerContext* ctx, const v1::DownloadArtifactRequest* request) {
  return StartStream<ArtifactStream, v1::DownloadArtifactRequest, v1::ArtifactChunk>(deps_, ctx,
                                                                                     *request);
}

grpc::ServerUnaryReactor* SandgateService::CreateSession(grpc::CallbackServerContext* ctx,
                                                         const v1::CreateSessionRequest* request,
                                                         v1::Session* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<v1::Session> s = deps_.sessions->Create(caller, *request, nullptr);
    if (s.ok()) *response = std::move(*s);
    return s.status();
  }, "CreateSession", [response] { return response->id(); });
}

grpc::ServerUnaryReactor* SandgateService::GetSession(grpc::CallbackServerContext* ctx,
                                                      const v1::GetSessionRequest* request,
                                                      v1::Session* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<v1::Session> s = deps_.sessions->Get(caller, request->session_id());
    if (s.ok()) *response = std::move(*s);
    return s.status();
  });
}

grpc::ServerUnaryReactor* SandgateService::ListSessions(grpc::CallbackServerContext* ctx,
                                                        const v1::ListSessionsRequest* request,
                                                        v1::ListSessionsResponse* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<std::vector<v1::Session>> all = deps_.sessions->List(caller, request->include_closed());
    if (!all.ok()) return all.status();
    for (auto& s : *all) *response->add_sessions() = std::move(s);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SandgateService::KeepAlive(grpc::CallbackServerContext* ctx,
                                                     const v1::KeepAliveRequest* request,
                                                     v1::Session* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<v1::Session> s = deps_.sessions->KeepAlive(caller, request->session_id());
    if (s.ok()) *response = std::move(*s);
    return s.status();
  }, "KeepAlive", [request] { return request->session_id(); });
}

grpc::ServerUnaryReactor* SandgateService::CloseSession(grpc::CallbackServerContext* ctx,
                                                        const v1::CloseSessionRequest* request,
                                                        v1::Session* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<v1::Session> s = deps_.sessions->Close(caller, request->session_id(), request->reason());
    if (s.ok()) *response = std::move(*s);
    return s.status();
  }, "CloseSession", [request] { return request->session_id(); });
}

grpc::ServerUnaryReactor* SandgateService::ListFiles(grpc::CallbackServerContext* ctx,
                                                     const v1::ListFilesRequest* request,
                                                     v1::ListFilesResponse* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<std::unique_ptr<core::SessionManager::Lease>> lease =
        deps_.sessions->Acquire(caller, request->session_id());
    if (!lease.ok()) return lease.status();
    absl::StatusOr<sandbox::FileListing> files = (*lease)->session().ListFiles(request->dir());
    if (!files.ok()) return files.status();
    response->set_truncated(files->truncated);
    size_t bytes = 0;
    for (const auto& f : files->entries) {
      v1::FileInfo info;
      // Sandbox code names its files: a name need not be UTF-8, which a proto3 string must be.
      bool escaped = false;
      info.set_path(EscapeInvalidUtf8(f.path, &escaped));
      info.set_path_escaped(escaped);
      info.set_type(ToProto(f.type));
      info.set_size_bytes(f.size);
      info.set_not_listed(f.not_listed);
      bytes += info.ByteSizeLong() + 4;  // with the field's tag and length
      if (bytes > kMaxListingBytes) {
        response->set_truncated(true);
        break;
      }
      *response->add_files() = std::move(info);
    }
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::ExecResponse>* SandgateService::Exec(grpc::CallbackServerContext* ctx,
                                                                  const v1::ExecRequest* request) {
  return StartStream<ExecStream, v1::ExecRequest, v1::ExecResponse>(deps_, ctx, *request);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* SandgateService::UploadFile(grpc::CallbackServerContext* ctx,
                                                                      grpc::ByteBuffer* response) {
  absl::StatusOr<core::Caller> caller = Authenticate(*deps_.tenants, ctx);
  if (!caller.ok()) {
    class Failed : public grpc::ServerReadReactor<grpc::ByteBuffer> {
     public:
      explicit Failed(const absl::Status& s) { Finish(ToGrpc(s)); }
      void OnDone() override { delete this; }
    };
    return new Failed(caller.status());
  }
  return new FileUpload(deps_, ctx, *caller, response);
}

grpc::ServerWriteReactor<v1::FileChunk>* SandgateService::DownloadFile(
    grpc::CallbackServerContext* ctx, const v1::DownloadFileRequest* request) {
  return StartStream<FileDownload, v1::DownloadFileRequest, v1::FileChunk>(deps_, ctx, *request);
}

grpc::ServerUnaryReactor* SandgateService::Drain(grpc::CallbackServerContext* ctx,
                                                 const v1::DrainRequest* request,
                                                 v1::DrainResponse* response) {
  return Unary(deps_, ctx, response, [this, response](const core::Caller& caller) -> absl::Status {
    if (!caller.is_operator) return errors::PermissionDenied("Drain: the operator role is required");
    response->set_active_runs(static_cast<uint32_t>(deps_.runs->active_runs()));
    if (!deps_.request_drain) return errors::Unavailable("Drain: this daemon cannot be drained over the API");
    deps_.request_drain();
    return absl::OkStatus();
  }, "Drain", [] { return std::string("daemon"); });
}

grpc::ServerUnaryReactor* SandgateService::Purge(grpc::CallbackServerContext* ctx,
                                                 const v1::PurgeRequest* request,
                                                 v1::PurgeResponse* response) {
  return Unary(deps_, ctx, response, [this, request, response](const core::Caller& caller) -> absl::Status {
    if (!caller.is_operator) return errors::PermissionDenied("Purge: the operator role is required");
    absl::Duration older_than = core::FromProto(request->older_than());
    if (older_than < absl::ZeroDuration()) return errors::InvalidArgument("older_than: must not be negative");
    absl::StatusOr<size_t> purged = deps_.runs->PurgeOlderThan(older_than);
    if (!purged.ok()) return purged.status();
    response->set_runs_deleted(static_cast<uint32_t>(*purged));
    return absl::OkStatus();
  }, "Purge", [request] { return absl::StrCat("older_than ", request->older_than().seconds(), "s"); });
}

}  // namespace sandgate::server
