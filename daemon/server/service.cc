#include "server/service.h"

#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/errors.h"
#include "server/status.h"

namespace sandgate::server {
namespace {

constexpr uint64_t kChunkBytes = 256 * 1024;
constexpr uint32_t kEventBatch = 256;

absl::StatusOr<core::Caller> Authenticate(const core::Tenants& tenants,
                                          grpc::CallbackServerContext* ctx) {
  std::optional<std::string> authorization;
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) authorization = std::string(it->second.data(), it->second.size());
  return tenants.Authenticate(authorization);
}

// Runs `fn(caller)` on the I/O executor and finishes the unary call with its status.
grpc::ServerUnaryReactor* Unary(const ServiceDeps& deps, grpc::CallbackServerContext* ctx,
                                std::function<absl::Status(const core::Caller&)> fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<core::Caller> caller = Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) {
    reactor->Finish(ToGrpc(caller.status()));
    return reactor;
  }
  bool queued = deps.io->Submit([reactor, fn = std::move(fn), caller = *caller] {
    reactor->Finish(ToGrpc(fn(caller)));
  });
  if (!queued) reactor->Finish(ToGrpc(errors::ResourceExhausted("the daemon is overloaded; retry")));
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
      FinishOnce(ToGrpc(errors::ResourceExhausted("the daemon is overloaded; retry")));
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
      terminal = current_.type() == "run.finished";
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
    absl::StatusOr<v1::Run> run = deps_.runs->Get(caller_, req_.run_id());
    if (!run.ok()) {
      FinishOnce(ToGrpc(run.status()));
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
        FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the daemon is shutting down"));
        break;
    }
    Release();
  }

  // Starts the next write, or the next fetch when nothing is buffered.
  void Pump() {
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
  void OnCancel() override { FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client")); }

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

template <typename Reactor, typename Request, typename T>
grpc::ServerWriteReactor<T>* StartStream(const ServiceDeps& deps,
                                         grpc::CallbackServerContext* ctx, const Request& req) {
  absl::StatusOr<core::Caller> caller = Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) {
    // A reactor that only reports the error.
    class Failed : public grpc::ServerWriteReactor<T> {
     public:
      explicit Failed(grpc::Status s) { this->Finish(s); }
      void OnDone() override { delete this; }
    };
    return new Failed(ToGrpc(caller.status()));
  }
  return new Reactor(deps, *caller, req);
}

}  // namespace

grpc::ServerUnaryReactor* SandgateService::RunAnalysis(grpc::CallbackServerContext* ctx,
                                                       const v1::RunAnalysisRequest* request,
                                                       v1::Run* response) {
  return Unary(deps_, ctx, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<v1::Run> run = deps_.runs->Start(caller, *request);
    if (run.ok()) *response = std::move(*run);
    return run.status();
  });
}

grpc::ServerUnaryReactor* SandgateService::GetRun(grpc::CallbackServerContext* ctx,
                                                  const v1::GetRunRequest* request,
                                                  v1::Run* response) {
  return Unary(deps_, ctx, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<v1::Run> run = deps_.runs->Get(caller, request->run_id());
    if (run.ok()) *response = std::move(*run);
    return run.status();
  });
}

grpc::ServerUnaryReactor* SandgateService::ListRuns(grpc::CallbackServerContext* ctx,
                                                    const v1::ListRunsRequest* request,
                                                    v1::ListRunsResponse* response) {
  return Unary(deps_, ctx, [this, request, response](const core::Caller& caller) -> absl::Status {
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
  return Unary(deps_, ctx, [this, request, response](const core::Caller& caller) -> absl::Status {
    absl::StatusOr<v1::Run> run = deps_.runs->Cancel(caller, request->run_id(), request->reason());
    if (run.ok()) *response = std::move(*run);
    return run.status();
  });
}

grpc::ServerWriteReactor<v1::Event>* SandgateService::StreamEvents(
    grpc::CallbackServerContext* ctx, const v1::StreamEventsRequest* request) {
  if (request->run_id().empty() || request->after_seq() < 0) {
    class Failed : public grpc::ServerWriteReactor<v1::Event> {
     public:
      explicit Failed(grpc::Status s) { this->Finish(s); }
      void OnDone() override { delete this; }
    };
    return new Failed(ToGrpc(errors::InvalidArgument(
        request->run_id().empty() ? "run_id: required" : "after_seq: must not be negative")));
  }
  return StartStream<EventStream, v1::StreamEventsRequest, v1::Event>(deps_, ctx, *request);
}

grpc::ServerWriteReactor<v1::ArtifactChunk>* SandgateService::DownloadArtifact(
    grpc::CallbackServerContext* ctx, const v1::DownloadArtifactRequest* request) {
  return StartStream<ArtifactStream, v1::DownloadArtifactRequest, v1::ArtifactChunk>(deps_, ctx,
                                                                                     *request);
}

}  // namespace sandgate::server
