#include "server/http_request.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"

namespace sandgate::server {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Matches `path` against `pattern`, filling the {name} segments ("{id}:cancel" matches a
// segment ending in ":cancel"); a last {name*} takes one or more segments, {name**} zero or
// more (a trailing '/' included).
bool Match(const std::string& pattern, const std::string& path,
           std::map<std::string, std::string>* params) {
  std::vector<absl::string_view> want = absl::StrSplit(pattern, '/');
  std::vector<absl::string_view> got = absl::StrSplit(path, '/');
  // {name**}: the rest of the path as it is, also none at all or ending in '/' (a proxy's).
  const bool any = absl::EndsWith(pattern, "**}");
  const bool rest = !any && absl::EndsWith(pattern, "*}");
  if (any ? got.size() + 1 < want.size()
          : (rest ? got.size() < want.size() : want.size() != got.size())) {
    return false;
  }
  std::map<std::string, std::string> found;
  for (size_t i = 0; i < want.size(); ++i) {
    absl::string_view w = want[i];
    if (any && i + 1 == want.size()) {
      std::string tail = i < got.size() ? absl::StrJoin(got.begin() + i, got.end(), "/") : "";
      found[std::string(w.substr(1, w.size() - 4))] = std::move(tail);
      break;
    }
    absl::string_view g = got[i];
    if (rest && i + 1 == want.size()) {
      std::string tail = absl::StrJoin(got.begin() + i, got.end(), "/");
      if (tail.empty() || absl::EndsWith(tail, "/")) return false;
      found[std::string(w.substr(1, w.size() - 3))] = std::move(tail);
      break;
    }
    if (!absl::StartsWith(w, "{")) {
      if (w != g) return false;
      continue;
    }
    size_t close = w.find('}');
    absl::string_view verb = w.substr(close + 1);  // "" or ":cancel"
    if (!absl::ConsumeSuffix(&g, verb) || g.empty() || absl::StrContains(g, ':')) return false;
    found[std::string(w.substr(1, close - 1))] = std::string(g);
  }
  *params = std::move(found);
  return true;
}

HttpResponse BadRequest(const absl::Status& status) { return ErrorAnswer(400, status); }

// RFC 9112 section 6.3: a request whose body length is ambiguous is refused, and the
// connection closed (what follows the headers cannot be told apart from a next request).
std::optional<HttpResponse> CheckFraming(const HttpHeaders& headers) {
  int lengths = 0;
  bool chunked = false;
  for (const auto& [name, value] : headers) {
    if (absl::EqualsIgnoreCase(name, "content-length")) ++lengths;
    if (absl::EqualsIgnoreCase(name, "transfer-encoding")) chunked = true;
  }
  std::string why;
  if (lengths > 1) why = "more than one Content-Length header: the body's length is ambiguous";
  if (lengths > 0 && chunked) {
    why = "both Content-Length and Transfer-Encoding: the body's length is ambiguous";
  }
  if (why.empty()) return std::nullopt;
  HttpResponse r = BadRequest(errors::InvalidArgument(why));
  r.headers.emplace_back("Connection", "close");
  return r;
}

// Why `path` (decoded, not valid text) is refused: naming the route parameter that holds the
// bad byte when a route matches, else the whole path.
absl::Status PathRefusal(const std::vector<HttpRoute>& routes, const std::string& path) {
  for (const HttpRoute& r : routes) {
    std::map<std::string, std::string> params;
    if (!Match(r.pattern, path, &params)) continue;
    for (const auto& [name, value] : params) {
      if (absl::Status st = CheckRequestText(name, value); !st.ok()) return st;
    }
  }
  return CheckRequestText("path", path);
}

}  // namespace

std::string PercentDecode(absl::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size() && HexDigit(raw[i + 1]) >= 0 &&
        HexDigit(raw[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigit(raw[i + 1]) * 16 + HexDigit(raw[i + 2])));
      i += 2;
    } else {
      out.push_back(raw[i]);
    }
  }
  return out;
}

absl::Status CheckRequestText(absl::string_view field, absl::string_view value) {
  if (value.find('\0') != absl::string_view::npos) {
    return errors::InvalidArgument(absl::StrCat(field, ": contains a NUL byte"));
  }
  for (size_t i = 0; i < value.size();) {
    const size_t n = Utf8SequenceLength(value, i);
    if (n == 0) {
      return errors::InvalidArgument(
          absl::StrFormat("%s: not valid UTF-8 (byte 0x%02X at offset %d)", field,
                          static_cast<unsigned char>(value[i]), i));
    }
    i += n;
  }
  return absl::OkStatus();
}

const HttpRoute* RouteRequest(const std::vector<HttpRoute>& routes, const RawHttpRequest& raw,
                              HttpRequest* request, std::optional<HttpResponse>* refused) {
  if ((*refused = CheckFraming(raw.headers))) return nullptr;
  request->method = raw.method;
  for (const auto& [name, value] : raw.headers) {
    absl::Status st = CheckRequestText("header name", name);
    if (st.ok()) st = CheckRequestText(absl::StrCat("header ", name), value);
    if (!st.ok()) {
      *refused = BadRequest(st);
      return nullptr;
    }
    request->headers[absl::AsciiStrToLower(name)] = value;
  }
  request->path = PercentDecode(raw.path);
  if (!CheckRequestText("path", request->path).ok()) {
    *refused = BadRequest(PathRefusal(routes, request->path));
    return nullptr;
  }
  for (const auto& [raw_name, raw_value] : raw.query) {
    if (!request->raw_query.empty()) request->raw_query.push_back('&');
    absl::StrAppend(&request->raw_query, absl::StrReplaceAll(raw_name, {{" ", "%20"}}));
    if (!raw_value.empty()) {
      absl::StrAppend(&request->raw_query, "=", absl::StrReplaceAll(raw_value, {{" ", "%20"}}));
    }
    std::string name = PercentDecode(raw_name);
    std::string value = PercentDecode(raw_value);
    absl::Status st = CheckRequestText("query parameter name", name);
    if (st.ok()) st = CheckRequestText(name, value);
    if (!st.ok()) {
      *refused = BadRequest(st);
      return nullptr;
    }
    request->query[std::move(name)] = std::move(value);
  }
  bool path_known = false;
  for (const HttpRoute& r : routes) {
    std::map<std::string, std::string> params;
    if (!Match(r.pattern, request->path, &params)) continue;
    path_known = true;
    if (r.method != request->method) continue;
    request->params = std::move(params);
    return &r;
  }
  *refused =
      path_known
          ? ErrorAnswer(405, absl::Status(absl::StatusCode::kUnimplemented,
                                          absl::StrCat(request->method, " is not allowed on ",
                                                       request->path)))
          : ErrorAnswer(404, absl::Status(absl::StatusCode::kNotFound,
                                          absl::StrCat("no such path: ", request->path)));
  return nullptr;
}

HttpResponse ErrorAnswer(unsigned int http_status, const absl::Status& status) {
  nlohmann::json body = {{"code", static_cast<int>(status.code())},
                         {"status", absl::StatusCodeToString(status.code())},
                         {"message", EscapeInvalidUtf8(status.message())}};
  return {http_status, {{"Content-Type", "application/json; charset=utf-8"}}, body.dump() + "\n"};
}

}  // namespace sandgate::server
