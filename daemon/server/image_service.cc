#include "server/image_service.h"

#include <string>
#include <utility>

#include "server/edge_unary.h"
#include "server/grpc_unary.h"
#include "server/reactor.h"
#include "server/status.h"
#include "server/unary_rpcs.h"
#include "server/utf8_fields.h"

namespace sandgate::server {
namespace {

// BuildImage: starts the build, then writes each progress line as the store reports it, and
// last the built image. One write in flight; the store's wake only schedules a pull.
class BuildStream final : public PullWriter<v1::ImageBuildProgress> {
 public:
  BuildStream(const ServiceDeps& deps, core::Caller caller, v1::BuildImageRequest req)
      : deps_(deps), images_(deps.images), caller_(std::move(caller)), req_(std::move(req)) {
    Schedule(deps_.io, [this] { Begin(); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    bool last;
    {
      absl::MutexLock lock(&state_mu_);
      writing_ = false;
      last = last_written_;
    }
    if (last) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    Wake();
  }

  void OnCancel() override {
    if (!req_.detach()) {
      images_->store()->CancelBuild(req_.name(), "its BuildImage call was cancelled");
    }
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "BuildImage cancelled"));
  }

  void OnDone() override {
    uint64_t watch = 0;
    {
      absl::MutexLock lock(&state_mu_);
      std::swap(watch, watch_);
    }
    if (watch != 0) {
      images_->store()->Unwatch(req_.name(), watch);  // no wake runs after this
      Release();                                      // the watch's reference
    }
    PullWriter::OnDone();
  }

 private:
  void Begin() {
    absl::Status st = Authorize(Policy("BuildImage"), caller_);
    if (st.ok()) st = images_->StartBuild(caller_, req_);
    AuditCall(deps_, Policy("BuildImage"), caller_, req_.name(), st);
    if (!st.ok()) {
      FinishOnce(ToGrpc(st));
      return;
    }
    Acquire();  // held by the watch until OnDone
    absl::StatusOr<uint64_t> watch = images_->store()->Watch(req_.name(), [this] { Wake(); });
    if (!watch.ok()) {
      Release();
      FinishOnce(ToGrpc(watch.status()));
      return;
    }
    {
      absl::MutexLock lock(&state_mu_);
      watch_ = *watch;
    }
    Wake();
  }

  // From the store's build thread (under its lock: never calls the store) and after writes.
  void Wake() {
    {
      absl::MutexLock lock(&state_mu_);
      if (pull_scheduled_ || writing_ || last_written_) return;
      pull_scheduled_ = true;
    }
    Schedule(deps_.io, [this] { Pull(); });
  }

  void Pull() {
    uint64_t from;
    {
      absl::MutexLock lock(&state_mu_);
      pull_scheduled_ = false;
      if (writing_ || last_written_) return;
      from = next_;
    }
    if (finished()) return;
    absl::StatusOr<core::ImageStore::Progress> p =
        images_->store()->ReadProgress(req_.name(), from);
    if (!p.ok()) {
      FinishOnce(ToGrpc(p.status()));
      return;
    }
    if (p->lines.empty() && !p->done) return;  // the next line wakes us
    if (p->lines.empty() && !p->status.ok()) {
      FinishOnce(ToGrpc(p->status));
      return;
    }
    {
      absl::MutexLock lock(&state_mu_);
      // Another Pull, scheduled by a wake while this one read, may have written meanwhile:
      // one write in flight, and no line twice.
      if (writing_ || last_written_ || next_ != from) return;
      writing_ = true;
      message_.Clear();
      if (!p->lines.empty()) {
        message_.set_line(p->lines.front());
        next_ = p->next - p->lines.size() + 1;
      } else {
        *message_.mutable_image() = p->image;
        last_written_ = true;
      }
      EscapeStringFields(&message_);
    }
    StartWrite(&message_);
  }

  const ServiceDeps& deps_;
  core::ImageApi* const images_;
  const core::Caller caller_;
  const v1::BuildImageRequest req_;

  absl::Mutex state_mu_;
  uint64_t watch_ ABSL_GUARDED_BY(state_mu_) = 0;
  uint64_t next_ ABSL_GUARDED_BY(state_mu_) = 0;
  bool pull_scheduled_ ABSL_GUARDED_BY(state_mu_) = false;
  bool writing_ ABSL_GUARDED_BY(state_mu_) = false;
  bool last_written_ ABSL_GUARDED_BY(state_mu_) = false;
  v1::ImageBuildProgress message_;  // written while writing_
};

}  // namespace

grpc::ServerWriteReactor<v1::ImageBuildProgress>* ImageService::BuildImage(
    grpc::CallbackServerContext* ctx, const v1::BuildImageRequest* request) {
  if (absl::Status valid = CheckNoNul(*request); !valid.ok()) {
    return new FailedWriter<v1::ImageBuildProgress>(valid);
  }
  return StartStream<BuildStream, v1::BuildImageRequest, v1::ImageBuildProgress>(deps_, ctx,
                                                                                 *request);
}

grpc::ServerUnaryReactor* ImageService::GetImage(grpc::CallbackServerContext* ctx,
                                                 const v1::GetImageRequest* request,
                                                 v1::Image* response) {
  return GrpcUnary(deps_, ctx, rpcs::kGetImage, request, response);
}

grpc::ServerUnaryReactor* ImageService::ListImages(grpc::CallbackServerContext* ctx,
                                                   const v1::ListImagesRequest* request,
                                                   v1::ListImagesResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kListImages, request, response);
}

grpc::ServerUnaryReactor* ImageService::DeleteImage(grpc::CallbackServerContext* ctx,
                                                    const v1::DeleteImageRequest* request,
                                                    v1::Image* response) {
  return GrpcUnary(deps_, ctx, rpcs::kDeleteImage, request, response);
}

}  // namespace sandgate::server
