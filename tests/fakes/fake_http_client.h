// FakeHttpClient: the HttpClient fake. It answers from a queue of canned replies and records
// every request it was sent; with `forward_to`, a request that finds no scripted reply goes on
// to a real client (e.g. CurlHttpClient pointed at the fake OpenAI server), still recorded.
// For tests of code above the transport (retry policy, OpenAI client, agents); it never
// touches the network itself. Thread safe.
//
//   FakeHttpClient http;
//   http.Push(ScriptedReply::Json(200, {{"id", "file-1"}}));
//   ... code under test calls http.Send(...) ...
//   EXPECT_EQ(http.requests()[0].method, "POST");
#ifndef SANDGATE_TESTS_FAKES_FAKE_HTTP_CLIENT_H_
#define SANDGATE_TESTS_FAKES_FAKE_HTTP_CLIENT_H_

#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "upstream/http_client.h"

namespace sandgate::testing {

struct ScriptedReply {
  // Returned instead of a response when not OK (after `chunks`, if the request streams).
  absl::Status error;
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // For a streaming request with a 2xx status: handed to the body callback one by one
  // (`body` is ignored then). For other requests they are joined into the body.
  std::vector<std::string> chunks;

  static ScriptedReply Json(int status, const nlohmann::json& body,
                            std::vector<std::pair<std::string, std::string>> headers = {}) {
    ScriptedReply r;
    r.status = status;
    r.body = body.dump();
    r.headers = std::move(headers);
    r.headers.emplace_back("Content-Type", "application/json");
    return r;
  }
  static ScriptedReply Status(int status,
                              std::vector<std::pair<std::string, std::string>> headers = {}) {
    ScriptedReply r;
    r.status = status;
    r.headers = std::move(headers);
    return r;
  }
  static ScriptedReply Fail(absl::Status error) {
    ScriptedReply r;
    r.error = std::move(error);
    return r;
  }
  static ScriptedReply Stream(std::vector<std::string> chunks) {
    ScriptedReply r;
    r.chunks = std::move(chunks);
    r.headers.emplace_back("Content-Type", "text/event-stream");
    return r;
  }
};

// A copy of what Send received (the callback reduced to whether there was one).
struct RecordedRequest {
  std::string method;
  std::string url;
  upstream::HttpHeaders headers;
  std::string body;
  std::vector<upstream::MultipartPart> multipart;
  bool streaming = false;
  absl::Duration total_timeout;
};

class FakeHttpClient : public upstream::HttpClient {
 public:
  // `forward_to` (optional, not owned, outlives this): where a request goes when no reply is
  // scripted; without it such a request fails with INTERNAL.
  explicit FakeHttpClient(upstream::HttpClient* forward_to = nullptr) : forward_to_(forward_to) {}

  void Push(ScriptedReply reply) {
    absl::MutexLock lock(&mu_);
    replies_.push_back(std::move(reply));
  }
  // Runs at the start of every Send, e.g. to cancel a token mid-test.
  void OnSend(std::function<void(const upstream::HttpRequest&)> hook) {
    absl::MutexLock lock(&mu_);
    hook_ = std::move(hook);
  }
  std::vector<RecordedRequest> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  size_t pending() const {
    absl::MutexLock lock(&mu_);
    return replies_.size();
  }
  // The bodies of the requests sent to URLs ending in `url_suffix`, parsed as JSON (discarded
  // values for bodies that are not JSON), in the order they were sent.
  std::vector<nlohmann::json> JsonBodies(absl::string_view url_suffix) const {
    absl::MutexLock lock(&mu_);
    std::vector<nlohmann::json> out;
    for (const RecordedRequest& r : requests_) {
      if (absl::EndsWith(r.url, url_suffix)) {
        out.push_back(nlohmann::json::parse(r.body, nullptr, false));
      }
    }
    return out;
  }

  absl::StatusOr<upstream::HttpResponse> Send(const upstream::HttpRequest& request,
                                              const CancelToken* cancel) override {
    ScriptedReply reply;
    std::function<void(const upstream::HttpRequest&)> hook;
    bool forward = false;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(RecordedRequest{
          request.method, request.url, request.headers, request.body, request.multipart,
          static_cast<bool>(request.on_body_chunk), request.total_timeout});
      if (replies_.empty() && forward_to_ == nullptr) {
        return absl::InternalError("FakeHttpClient: no reply scripted for " + request.url);
      }
      if (replies_.empty()) {
        forward = true;
      } else {
        reply = std::move(replies_.front());
        replies_.pop_front();
      }
      hook = hook_;
    }
    if (hook) hook(request);
    if (forward) return forward_to_->Send(request, cancel);
    if (cancel != nullptr && cancel->cancelled()) return absl::CancelledError("cancelled");
    upstream::HttpResponse response;
    response.status = reply.status;
    for (auto& [name, value] : reply.headers) response.headers.Add(name, value);
    const bool ok_status = reply.status >= 200 && reply.status < 300;
    if (request.on_body_chunk && ok_status && request.on_stream_open && !request.on_stream_open()) {
      return absl::AbortedError("FakeHttpClient: the stream's opener stopped it");
    }
    if (request.on_body_chunk && ok_status && !reply.chunks.empty()) {
      for (const std::string& chunk : reply.chunks) {
        if (!request.on_body_chunk(chunk)) {
          return absl::AbortedError("FakeHttpClient: the body consumer stopped");
        }
      }
      if (!reply.error.ok()) return reply.error;
      return response;
    }
    if (!reply.error.ok()) return reply.error;
    response.body = reply.chunks.empty() ? reply.body : absl::StrJoin(reply.chunks, "");
    if (request.on_body_chunk && ok_status && !response.body.empty()) {
      if (!request.on_body_chunk(response.body)) {
        return absl::AbortedError("FakeHttpClient: the body consumer stopped");
      }
      response.body.clear();
    }
    return response;
  }

 private:
  upstream::HttpClient* const forward_to_;
  mutable absl::Mutex mu_;
  std::deque<ScriptedReply> replies_ ABSL_GUARDED_BY(mu_);
  std::vector<RecordedRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::function<void(const upstream::HttpRequest&)> hook_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_FAKE_HTTP_CLIENT_H_
