#include "upstream/curl_http_client.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "common/errors.h"
#include "common/log.h"

namespace sandgate::upstream {
namespace {

// The handles one thread reuses call after call, so its connections stay open between calls.
// `busy` covers a Send made from inside a body callback of another Send on the same thread:
// that one gets fresh handles.
struct ThreadHandles {
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  bool busy = false;
  ~ThreadHandles() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
};

// Hands out a thread's cached handles, or a private pair when they are taken, and gives them
// back (or frees the private pair) on destruction.
class HandleLease {
 public:
  HandleLease() {
    thread_local ThreadHandles cached;
    if (!cached.busy) {
      if (cached.multi == nullptr) cached.multi = curl_multi_init();
      if (cached.easy == nullptr) cached.easy = curl_easy_init();
      cached.busy = true;
      cached_ = &cached;
      multi_ = cached.multi;
      easy_ = cached.easy;
    } else {
      multi_ = curl_multi_init();
      easy_ = curl_easy_init();
    }
    if (easy_ != nullptr) curl_easy_reset(easy_);
  }
  ~HandleLease() {
    if (cached_ != nullptr) {
      cached_->busy = false;
      return;
    }
    if (easy_ != nullptr) curl_easy_cleanup(easy_);
    if (multi_ != nullptr) curl_multi_cleanup(multi_);
  }
  HandleLease(const HandleLease&) = delete;
  HandleLease& operator=(const HandleLease&) = delete;

  CURLM* multi() const { return multi_; }
  CURL* easy() const { return easy_; }

 private:
  ThreadHandles* cached_ = nullptr;
  CURLM* multi_ = nullptr;
  CURL* easy_ = nullptr;
};

// State shared with libcurl's callbacks for one exchange.
struct Transfer {
  const HttpRequest* request = nullptr;
  const CancelToken* cancel = nullptr;
  CURL* easy = nullptr;
  HttpResponse response;
  bool body_callback_stopped = false;
  bool stream_opened = false;  // on_stream_open was called
};

bool Streaming(const Transfer& t) {
  if (!t.request->on_body_chunk) return false;
  long code = 0;
  curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &code);
  return code >= 200 && code < 300;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (t->cancel != nullptr && t->cancel->cancelled()) return 0;
  if (Streaming(*t)) {
    if (!t->request->on_body_chunk(absl::string_view(data, n))) {
      t->body_callback_stopped = true;
      return 0;  // anything but n makes libcurl stop with CURLE_WRITE_ERROR
    }
    return n;
  }
  t->response.body.append(data, n);
  return n;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  absl::string_view line(data, n);
  if (absl::StartsWith(line, "HTTP/")) {
    // A new status line (after "100 Continue" or an informational response) starts over.
    t->response.headers = HttpHeaders();
    return n;
  }
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) {  // the blank line that ends the headers
    if (t->request->on_stream_open && !t->stream_opened && Streaming(*t)) {
      t->stream_opened = true;
      if (!t->request->on_stream_open()) {
        t->body_callback_stopped = true;
        return 0;  // anything but n makes libcurl stop with CURLE_WRITE_ERROR
      }
    }
    return n;
  }
  t->response.headers.Add(std::string(absl::StripAsciiWhitespace(line.substr(0, colon))),
                          std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  return n;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  return t->cancel != nullptr && t->cancel->cancelled() ? 1 : 0;
}

bool HasLineBreak(absl::string_view s) {
  return s.find_first_of("\r\n") != absl::string_view::npos;
}

// The URL without its query, for messages: a query may carry cursors nobody needs to read.
absl::string_view UrlForMessages(absl::string_view url) { return url.substr(0, url.find('?')); }

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

CurlHttpClient::CurlHttpClient(CurlHttpClientOptions options) : options_(std::move(options)) {
  InitCurlOnce();
}

absl::StatusOr<HttpResponse> CurlHttpClient::Send(const HttpRequest& request,
                                                  const CancelToken* cancel) {
  const std::string what = absl::StrCat(request.method, " ", UrlForMessages(request.url));
  if (request.method.empty() || HasLineBreak(request.method) || HasLineBreak(request.url)) {
    return errors::InvalidArgument(absl::StrCat("malformed HTTP request line: ", what));
  }
  if (cancel != nullptr && cancel->cancelled()) {
    return errors::Cancelled(absl::StrCat(what, ": ", cancel->reason()));
  }
  HandleLease handles;
  CURL* easy = handles.easy();
  CURLM* multi = handles.multi();
  if (easy == nullptr || multi == nullptr) return errors::Internal("libcurl: cannot make a handle");

  Transfer transfer;
  transfer.request = &request;
  transfer.cancel = cancel;
  transfer.easy = easy;

  curl_slist* header_list = nullptr;
  auto free_headers = absl::MakeCleanup([&header_list] { curl_slist_free_all(header_list); });
  for (const auto& [name, value] : request.headers.fields()) {
    if (name.empty() || HasLineBreak(name) || HasLineBreak(value) ||
        name.find(':') != std::string::npos) {
      // Name the header, never its value: it may be a credential.
      return errors::InvalidArgument(absl::StrCat("malformed header ", name, " in ", what));
    }
    // "Name;" is libcurl's spelling of a header sent with an empty value.
    const std::string field =
        value.empty() ? absl::StrCat(name, ";") : absl::StrCat(name, ": ", value);
    header_list = curl_slist_append(header_list, field.c_str());
  }
  // No "Expect: 100-continue" round trip before uploads.
  header_list = curl_slist_append(header_list, "Expect:");

  curl_mime* mime = nullptr;
  auto free_mime = absl::MakeCleanup([&mime] { curl_mime_free(mime); });

  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, options_.user_agent.c_str());
  if (!options_.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, options_.ca_file.c_str());
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(request.connect_timeout)));
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(request.total_timeout)));
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, header_list);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(easy, CURLOPT_XFERINFODATA, &transfer);

  if (!request.multipart.empty()) {
    mime = curl_mime_init(easy);
    for (const MultipartPart& part : request.multipart) {
      curl_mimepart* p = curl_mime_addpart(mime);
      curl_mime_name(p, part.name.c_str());
      curl_mime_data(p, part.data.data(), part.data.size());
      if (!part.filename.empty()) curl_mime_filename(p, part.filename.c_str());
      if (!part.content_type.empty()) curl_mime_type(p, part.content_type.c_str());
    }
    curl_easy_setopt(easy, CURLOPT_MIMEPOST, mime);
    if (request.method != "POST") {
      curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
  } else if (request.method == "GET") {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  } else if (request.method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else {
    if (request.method != "DELETE" || !request.body.empty()) {
      curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
      curl_easy_setopt(easy, CURLOPT_POSTFIELDS, request.body.data());
    }
    if (request.method != "POST") {
      curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
  }

  const absl::Time started = Clock::Real()->Now();
  if (curl_multi_add_handle(multi, easy) != CURLM_OK) {
    return errors::Internal("libcurl: cannot start a transfer");
  }
  // Detached and reset before the buffers it points at (headers, mime, error buffer) go away.
  auto detach = absl::MakeCleanup([multi, easy] {
    curl_multi_remove_handle(multi, easy);
    curl_easy_reset(easy);
  });

  bool cancelled = false;
  CURLcode result = CURLE_OK;
  for (;;) {
    int running = 0;
    CURLMcode mc = curl_multi_perform(multi, &running);
    if (mc != CURLM_OK) {
      return errors::Internal(absl::StrCat("libcurl: ", curl_multi_strerror(mc)));
    }
    if (running == 0) {
      int queued = 0;
      CURLMsg* msg = curl_multi_info_read(multi, &queued);
      result = (msg != nullptr && msg->msg == CURLMSG_DONE) ? msg->data.result : CURLE_OK;
      break;
    }
    if (cancel != nullptr && cancel->cancelled()) {
      cancelled = true;
      break;
    }
    curl_waitfd cancel_fd = {cancel != nullptr ? cancel->fd() : -1, CURL_WAIT_POLLIN, 0};
    const bool watch = cancel != nullptr && cancel->fd() >= 0;
    mc = curl_multi_poll(multi, watch ? &cancel_fd : nullptr, watch ? 1 : 0, 1000, nullptr);
    if (mc != CURLM_OK) {
      return errors::Internal(absl::StrCat("libcurl: ", curl_multi_strerror(mc)));
    }
  }

  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  log::Debug("upstream.http", {{"method", request.method},
                               {"url", std::string(UrlForMessages(request.url))},
                               {"request_headers", RedactedHeaders(request.headers)},
                               {"status", status},
                               {"curl_result", static_cast<int>(result)},
                               {"request_id", transfer.response.headers.Get("x-request-id")},
                               {"ms", absl::ToInt64Milliseconds(Clock::Real()->Now() - started)}});

  if (cancelled || result == CURLE_ABORTED_BY_CALLBACK ||
      (cancel != nullptr && cancel->cancelled() && result != CURLE_OK)) {
    return errors::Cancelled(
        absl::StrCat(what, ": ", cancel != nullptr ? cancel->reason() : "cancelled"));
  }
  if (transfer.body_callback_stopped) {
    // errors.h has no ABORTED constructor; this is the one place the transport needs it.
    return absl::AbortedError(absl::StrCat(what, ": the body consumer stopped the transfer"));
  }
  const std::string detail =
      error_buffer[0] != '\0' ? std::string(error_buffer) : std::string(curl_easy_strerror(result));
  switch (result) {
    case CURLE_OK:
      break;
    case CURLE_OPERATION_TIMEDOUT:
      return errors::DeadlineExceeded(absl::StrCat(what, ": ", detail));
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return errors::InvalidArgument(absl::StrCat(what, ": ", detail));
    default:
      if (curl_off_t got = 0; status >= 200 && status < 300 &&
                              curl_easy_getinfo(easy, CURLINFO_SIZE_DOWNLOAD_T, &got) == CURLE_OK &&
                              got > 0) {
        // Say how much of the body came, so a cut download is told from a refused connection.
        curl_off_t total = -1;
        curl_easy_getinfo(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &total);
        const std::string cut = absl::StrCat(
            "cut after ", got, total >= 0 ? absl::StrCat(" of ", total) : std::string(), " bytes");
        if (request.method == "GET") {
          return errors::Unavailable(absl::StrCat("download of ", UrlForMessages(request.url), " ",
                                                  cut, " (", what, ": ", detail, ")"));
        }
        return errors::Unavailable(
            absl::StrCat(what, ": the response body was ", cut, ": ", detail));
      }
      return errors::Unavailable(absl::StrCat(what, ": ", detail));
  }
  transfer.response.status = static_cast<int>(status);
  return std::move(transfer.response);
}

}  // namespace sandgate::upstream
