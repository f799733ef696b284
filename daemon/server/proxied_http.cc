#include "server/proxied_http.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"
#include "server/http_api.h"

namespace sandgate::server::proxied_http {

bool IsHopByHop(const std::string& lower) {
  static const char* const kNames[] = {
      "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
      "te",         "trailer",    "trailers",         "transfer-encoding",  "upgrade"};
  for (const char* n : kNames) {
    if (lower == n) return true;
  }
  return false;
}

bool NotForwarded(const std::string& lower) {
  return IsHopByHop(lower) || lower == "authorization" || lower == "cookie" || lower == "host" ||
         lower == "content-length" || lower == "expect" || absl::StartsWith(lower, "x-forwarded-");
}

absl::StatusOr<std::string> UpstreamPath(const std::string& decoded) {
  std::string out = "/";
  bool first = true;
  for (absl::string_view segment : absl::StrSplit(decoded, '/')) {
    if (segment == "." || segment == "..") {
      return errors::InvalidArgument(
          absl::StrCat("path: '", segment, "' segments are not allowed in a proxied path"));
    }
    if (!first) out.push_back('/');
    first = false;
    for (char c : segment) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (absl::ascii_isalnum(u) || absl::StrContains("-._~!$&'()*+,;=:@", c)) {
        out.push_back(c);
      } else {
        absl::StrAppend(&out, "%", absl::Hex(u, absl::kZeroPad2));
      }
    }
  }
  return out;
}

bool ContainsIgnoreCase(const std::string& text, absl::string_view word) {
  return absl::StrContains(absl::AsciiStrToLower(text), word);
}

bool WantsWebSocket(const HttpRequest& r) {
  return ContainsIgnoreCase(r.Header("upgrade"), "websocket") &&
         ContainsIgnoreCase(r.Header("connection"), "upgrade");
}

absl::StatusOr<Head> ParseHead(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, "\r\n");
  Head head;
  absl::string_view status_line = lines.empty() ? "" : lines[0];
  std::vector<absl::string_view> parts = absl::StrSplit(status_line, absl::MaxSplits(' ', 2));
  if (parts.size() < 2 || !absl::StartsWith(parts[0], "HTTP/1.") ||
      !absl::SimpleAtoi(parts[1], &head.status) || head.status < 100 || head.status > 599) {
    return errors::Unavailable("the sandbox's server answered something that is not HTTP/1.x");
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return errors::Unavailable("the sandbox's server answered a malformed header line");
    }
    head.headers.emplace_back(absl::AsciiStrToLower(lines[i].substr(0, colon)),
                              std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1))));
  }
  return head;
}

HttpResponse BadGateway(const absl::Status& st) {
  HttpResponse r = JsonError(st);
  if (st.code() == absl::StatusCode::kUnavailable) r.status = 502;
  return r;
}

}  // namespace sandgate::server::proxied_http
