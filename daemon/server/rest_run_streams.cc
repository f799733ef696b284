// A run's streams over REST: its events as server-sent events (an EventFollower's sink) and
// an artifact's bytes (an ArtifactSource's), as StreamEvents and DownloadArtifact serve them
// over gRPC (service.cc).
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "server/edge_streams.h"
#include "server/rest_json.h"
#include "server/rest_streams.h"

namespace sandgate::server {
namespace {

// GET /v1/runs/{run_id}/events: the SSE sink of an EventFollower. Each event as "id: <seq>",
// "event: <type>", "data: <the Event as JSON>"; heartbeats are comments; an error once the
// stream began is its last event ("event: error"). Held by the exchange's pull and close
// (it holds the exchange weakly); the follower answers it through a weak reference.
class SseStream : public std::enable_shared_from_this<SseStream> {
 public:
  SseStream(const ServiceDeps& deps, core::Caller caller, v1::StreamEventsRequest req, Exchange x)
      : follower_(std::make_shared<EventFollower>(deps, std::move(caller), std::move(req))),
        x_(x) {}

  // On the I/O executor.
  void Start() {
    std::weak_ptr<SseStream> weak = shared_from_this();
    absl::StatusOr<bool> open =
        follower_->Open(EventFollower::Sink{[weak](std::vector<v1::Event> batch) {
                                              if (auto self = weak.lock())
                                                self->Send(std::move(batch));
                                            },
                                            [weak] {
                                              if (auto self = weak.lock())
                                                self->Write(": heartbeat\n\n");
                                            },
                                            [weak](const absl::Status& st) {
                                              if (auto self = weak.lock()) self->End(st);
                                            }});
    Exchange x = x_.lock();
    if (!x) return follower_->Close();
    if (!open.ok()) return x->Reply(JsonError(open.status()));
    // At or past the log's end: 204, which stops an EventSource reconnecting after the end.
    if (!*open) return x->Reply({204, {}, ""});
    auto self = shared_from_this();
    x->Stream(
        200, {{"Content-Type", "text/event-stream; charset=utf-8"}, {"Cache-Control", "no-cache"}},
        [self] { self->follower_->Pull(); }, [self] { self->follower_->Close(); });
  }

 private:
  void Send(std::vector<v1::Event> batch) {
    std::string text;
    for (v1::Event& e : batch) {
      absl::StatusOr<std::string> json = ToJson(&e);
      if (!json.ok()) return End(json.status());
      absl::StrAppend(&text, "id: ", e.seq(), "\nevent: ", e.type(), "\ndata: ", *json, "\n\n");
    }
    Write(std::move(text));
  }
  void Write(std::string text) {
    if (Exchange x = x_.lock()) x->Write(std::move(text));
  }
  // A stream that has begun cannot change its status: an error is its last event.
  void End(const absl::Status& st) {
    Exchange x = x_.lock();
    if (!x) return;
    if (!st.ok()) {
      HttpResponse e = JsonError(st);
      while (!e.body.empty() && e.body.back() == '\n') e.body.pop_back();
      x->Write(absl::StrCat("event: error\ndata: ", e.body, "\n\n"));
    }
    x->End(false);
  }

  const std::shared_ptr<EventFollower> follower_;
  const std::weak_ptr<HttpExchange> x_;
};

// The request of an event stream: follow unless ?follow=false; after the Last-Event-ID header
// (what an EventSource sends when it reconnects), else ?after_seq=.
absl::StatusOr<v1::StreamEventsRequest> EventsRequest(const HttpRequest& http) {
  v1::StreamEventsRequest req;
  req.set_run_id(http.params.at("run_id"));
  req.set_follow(true);
  std::string after = http.Header("last-event-id");
  auto q = http.query.find("after_seq");
  if (after.empty() && q != http.query.end()) after = q->second;
  int64_t seq = 0;
  if (!after.empty() && (!absl::SimpleAtoi(after, &seq) || seq < 0)) {
    return errors::InvalidArgument(
        absl::StrCat("Last-Event-ID/after_seq: expected a seq (0 or more), got '", after, "'"));
  }
  req.set_after_seq(seq);
  auto f = http.query.find("follow");
  if (f != http.query.end()) {
    if (f->second != "true" && f->second != "false") {
      return errors::InvalidArgument(
          absl::StrCat("follow: expected true or false, got '", f->second, "'"));
    }
    req.set_follow(f->second == "true");
  }
  return req;
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

// GET /v1/runs/{run_id}/artifacts/{name}: the ArtifactSource's chunks as the body, with the
// artifact's length and digest; a chunk read on the executor per pull.
struct ArtifactDownload {
  const ServiceDeps& deps;
  std::weak_ptr<HttpExchange> x;
  std::optional<ArtifactSource> source;  // touched only by the one read in flight
};

void NextChunk(const std::shared_ptr<ArtifactDownload>& d) {
  Exchange x = d->x.lock();
  if (!x) return;
  if (d->source->done()) return x->End(false);
  absl::StatusOr<v1::ArtifactChunk> chunk = d->source->Next();
  if (!chunk.ok()) return x->End(true);  // the length was promised: cut short
  x->Write(std::move(*chunk->mutable_data()));
}

}  // namespace

HttpRoute EventsRoute(const ServiceDeps& deps) {
  return AuthenticatedRoute(
      deps, "GET", "/v1/runs/{run_id}/events",
      [&deps](const HttpRequest& http, const Exchange& x, const core::Caller& caller) {
        absl::StatusOr<v1::StreamEventsRequest> req = EventsRequest(http);
        if (!req.ok()) return x->Reply(JsonError(req.status()));
        auto stream = std::make_shared<SseStream>(deps, caller, *std::move(req), x);
        OnIo(deps, x, [stream] { stream->Start(); });
      });
}

HttpRoute ArtifactsRoute(const ServiceDeps& deps) {
  return AuthenticatedRoute(
      deps, "GET", "/v1/runs/{run_id}/artifacts/{name}",
      [&deps](const HttpRequest& http, const Exchange& x, const core::Caller& caller) {
        v1::DownloadArtifactRequest req;
        req.set_run_id(http.params.at("run_id"));
        req.set_name(http.params.at("name"));
        OnIo(deps, x, [&deps, x, caller, req] {
          absl::StatusOr<ArtifactSource> source = ArtifactSource::Open(deps, caller, req);
          if (!source.ok()) return x->Reply(JsonError(source.status()));
          const v1::Artifact artifact = source->artifact();
          auto d =
              std::make_shared<ArtifactDownload>(ArtifactDownload{deps, x, std::move(*source)});
          std::string raw = absl::HexStringToBytes(artifact.sha256());
          HttpHeaders headers = SandboxMadeHeaders(artifact.name());
          headers.insert(headers.end(),
                         {{"X-Sandgate-Sha256", artifact.sha256()},
                          {"Digest", absl::StrCat("sha-256=", absl::Base64Escape(raw))},
                          {"X-Sandgate-Size", absl::StrCat(artifact.size_bytes())}});
          x->Stream(
              200, std::move(headers),
              [d] {
                if (!d->deps.io->Submit([d] { NextChunk(d); })) {
                  if (Exchange x = d->x.lock()) x->End(true);
                }
              },
              nullptr, artifact.size_bytes());
        });
      });
}

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

}  // namespace sandgate::server
