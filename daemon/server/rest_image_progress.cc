#include "server/rest_image_progress.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/errors.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"
#include "server/http_api.h"
#include "server/rest_json.h"
#include "server/utf8_fields.h"

namespace sandgate::server {
namespace {

// The one-event text of an error: its JSON on one data line.
std::string ErrorEvent(const absl::Status& st) {
  HttpResponse e = JsonError(st);
  while (!e.body.empty() && e.body.back() == '\n') e.body.pop_back();
  return absl::StrCat("event: error\ndata: ", e.body, "\n\n");
}

// The closing event of a build that ended: the image, or why not.
std::string EndEvent(const absl::Status& status, v1::Image image) {
  if (!status.ok()) return ErrorEvent(status);
  EscapeStringFields(&image);
  absl::StatusOr<std::string> json = ToJson(&image);
  if (!json.ok()) return ErrorEvent(json.status());
  return absl::StrCat("event: image\ndata: ", *json, "\n\n");
}

// One follower of one build. Each pull of the exchange is answered by exactly one Write or
// End: at once when the store has lines (or the end), else on the store's next wake. Held by
// the exchange's pull and close; the store's wake holds it weakly.
class ProgressStream : public std::enable_shared_from_this<ProgressStream> {
 public:
  ProgressStream(const ServiceDeps& deps, core::ImageStore* store, std::string name, uint64_t from,
                 Exchange x)
      : deps_(deps), store_(store), name_(std::move(name)), x_(x), next_(from) {}

  // On the I/O executor, once the caller may see the image.
  void Start(const v1::Image& image) {
    Exchange x = x_.lock();
    if (!x) return;
    std::weak_ptr<ProgressStream> weak = shared_from_this();
    absl::StatusOr<uint64_t> watch = store_->Watch(name_, [weak] {
      if (auto self = weak.lock()) self->Wake();  // the build thread: schedule, never block
    });
    if (!watch.ok()) {
      // No build since the daemon started: a built image's stream is its image alone.
      return x->Reply({200, SseHeaders(), EndEvent(absl::OkStatus(), image)});
    }
    {
      absl::MutexLock lock(&mu_);
      watch_ = *watch;
    }
    auto self = shared_from_this();
    x->Stream(
        200, SseHeaders(), [self] { self->Pulled(); }, [self] { self->Closed(); });
  }

 private:
  static HttpHeaders SseHeaders() {
    return {{"Content-Type", "text/event-stream; charset=utf-8"}, {"Cache-Control", "no-cache"}};
  }

  // The exchange wants more: read now.
  void Pulled() {
    {
      absl::MutexLock lock(&mu_);
      wanted_ = true;
    }
    Schedule();
  }
  // A new line or the end: read if a pull waits.
  void Wake() {
    {
      absl::MutexLock lock(&mu_);
      if (!wanted_) return;
    }
    Schedule();
  }
  void Schedule() {
    std::weak_ptr<ProgressStream> weak = shared_from_this();
    if (!deps_.io->Submit([weak] {
          if (auto self = weak.lock()) self->Read();
        })) {
      if (Exchange x = x_.lock()) x->End(true);
    }
  }

  // On the I/O executor: answers the pull that waits, if the store has something for it.
  void Read() {
    uint64_t from;
    {
      absl::MutexLock lock(&mu_);
      if (!wanted_ || closed_ || ended_) return;
      from = next_;
    }
    absl::StatusOr<core::ImageStore::Progress> p = store_->ReadProgress(name_, from);
    std::string text;
    bool end = false;
    if (!p.ok()) {
      text = ErrorEvent(p.status());  // the name was deleted (its build record went)
      end = true;
    } else {
      const uint64_t first = p->next - p->lines.size();
      for (size_t i = 0; i < p->lines.size(); ++i) {
        const nlohmann::json data = {{"line", EscapeInvalidUtf8(p->lines[i])}};
        absl::StrAppend(&text, "id: ", first + i, "\nevent: line\ndata: ", data.dump(), "\n\n");
      }
      if (p->done) {
        absl::StrAppend(&text, EndEvent(p->status, p->image));
        end = true;
      }
    }
    if (text.empty()) return;  // nothing yet: the next wake reads again
    {
      absl::MutexLock lock(&mu_);
      // Another read, scheduled by a wake while this one read, may have answered meanwhile.
      if (!wanted_ || closed_ || ended_ || next_ != from) return;
      wanted_ = false;
      ended_ = end;  // the exchange may pull again before it has taken the End
      if (p.ok()) next_ = p->next;
    }
    Exchange x = x_.lock();
    if (!x) return;
    x->Write(std::move(text));
    if (end) x->End(false);
  }

  // The client left, or the stream ended: no wake reaches this follower after Unwatch.
  void Closed() {
    uint64_t watch;
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
      watch = watch_;
    }
    store_->Unwatch(name_, watch);
  }

  const ServiceDeps& deps_;
  core::ImageStore* const store_;
  const std::string name_;
  const std::weak_ptr<HttpExchange> x_;
  absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_);
  uint64_t watch_ ABSL_GUARDED_BY(mu_) = 0;
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;  // a pull waits for a Write or End
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // the last event is written
};

// Where a stream begins: after the Last-Event-ID header, else at ?from=.
absl::StatusOr<uint64_t> FromOf(const HttpRequest& http) {
  const std::string last = http.Header("last-event-id");
  uint64_t n = 0;
  if (!last.empty()) {
    if (!absl::SimpleAtoi(last, &n) || n == UINT64_MAX) {
      return errors::InvalidArgument(
          absl::StrCat("Last-Event-ID: expected a line index (0 or more), got '",
                       EscapeInvalidUtf8(last.substr(0, 40)), "'"));
    }
    return n + 1;
  }
  auto q = http.query.find("from");
  if (q == http.query.end()) return 0;
  if (!absl::SimpleAtoi(q->second, &n)) {
    return errors::InvalidArgument(absl::StrCat("from: expected a line index (0 or more), got '",
                                                EscapeInvalidUtf8(q->second.substr(0, 40)), "'"));
  }
  return n;
}

}  // namespace

HttpRoute ImageProgressRoute(const ServiceDeps& deps, core::ImageApi* images) {
  return AuthenticatedRoute(
      deps, "GET", "/v1/images/{name}/progress",
      [&deps, images](const HttpRequest& http, const Exchange& x, const core::Caller& caller) {
        absl::StatusOr<uint64_t> from = FromOf(http);
        if (!from.ok()) return x->Reply(JsonError(from.status()));
        v1::GetImageRequest get;
        get.set_name(http.params.at("name"));
        OnIo(deps, x, [&deps, images, x, caller, get, from = *from] {
          v1::Image image;
          // As GET /v1/images/{name}: a bad name, another's image, an unknown one.
          absl::Status st = images->GetImage(caller, get, &image);
          if (!st.ok()) return x->Reply(JsonError(st));
          auto stream =
              std::make_shared<ProgressStream>(deps, images->store(), get.name(), from, x);
          stream->Start(image);
        });
      });
}

}  // namespace sandgate::server
