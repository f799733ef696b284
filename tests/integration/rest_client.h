// A small HTTP client for the REST tests (curl): one call and its answer, the answer's JSON
// as a message, and the comparison of a REST answer with the gRPC one.
#ifndef SANDGATE_TESTS_INTEGRATION_REST_CLIENT_H_
#define SANDGATE_TESTS_INTEGRATION_REST_CLIENT_H_

#include <curl/curl.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {

struct Answer {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased
};

inline size_t Collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

inline size_t CollectHeader(char* data, size_t size, size_t n, void* out) {
  std::string line(data, size * n);
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    (*static_cast<std::map<std::string, std::string>*>(out))[name] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * n;
}

// The answer's body and headers go to `a`.
inline void CollectInto(CURL* curl, Answer* a) {
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &a->body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &CollectHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &a->headers);
}

// `ca`: the CA file that verifies an https:// server. An answer not complete within
// `timeout_seconds` fails the test.
inline Answer Http(const std::string& method, const std::string& url, const std::string& token,
                   const std::string& body = "", const std::vector<std::string>& headers = {},
                   const std::string& ca = "", long timeout_seconds = 120) {
  Answer a;
  CURL* curl = curl_easy_init();
  if (!ca.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, ca.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "POST" || !body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_slist* list = nullptr;
  if (!token.empty()) list = curl_slist_append(list, ("Authorization: Bearer " + token).c_str());
  for (const std::string& h : headers) list = curl_slist_append(list, h.c_str());
  list = curl_slist_append(list, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  CollectInto(curl, &a);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout_seconds);
  CURLcode rc = curl_easy_perform(curl);
  EXPECT_EQ(rc, CURLE_OK) << curl_easy_strerror(rc) << " " << method << " " << url;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &a.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return a;
}

template <typename M>
M Parse(const Answer& a) {
  M m;
  auto st = google::protobuf::util::JsonStringToMessage(a.body, &m);
  EXPECT_TRUE(st.ok()) << st.message() << " in " << a.body;
  return m;
}

inline std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &out).ok());
  return out;
}

// The REST answer is the gRPC one: the same message on success, the same code and message
// (and the mapped HTTP status) on failure.
template <typename M>
void ExpectSame(const Answer& rest, const grpc::Status& st, const M& grpc_answer,
                const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(rest.headers.at("x-content-type-options"), "nosniff");
  EXPECT_EQ(rest.headers.at("content-type"), "application/json; charset=utf-8");
  if (st.ok()) {
    ASSERT_EQ(rest.status, 200) << rest.body;
    M got = Parse<M>(rest);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, grpc_answer))
        << "REST: " << got.DebugString() << "\ngRPC: " << grpc_answer.DebugString();
    return;
  }
  nlohmann::json error = nlohmann::json::parse(rest.body);
  EXPECT_EQ(error["code"], static_cast<int>(st.error_code())) << rest.body;
  EXPECT_EQ(error["message"], st.error_message());
  EXPECT_NE(rest.status, 200);
}

// The HTTP port's base URL, from the daemon's daemon.http log line.
inline std::string HttpBase(const std::string& log) {
  size_t at = log.find("\"event\":\"daemon.http\"");
  size_t url = log.find("\"url\":\"", at);
  if (at == std::string::npos || url == std::string::npos) return "";
  url += 7;
  return log.substr(url, log.find('"', url) - url);
}
inline std::string HttpBase(const DaemonHarness& daemon) { return HttpBase(daemon.Log()); }

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_INTEGRATION_REST_CLIENT_H_
