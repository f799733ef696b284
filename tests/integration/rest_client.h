// What the tests of the daemon's two faces share: a REST call with libcurl (its status,
// headers and body), the HTTP port's address from the daemon's log, server-sent events
// parsed, and the gRPC file transfers they are compared with. For the REST tests
// (rest_test.cc, rest_images_test.cc, edge_conformance_test.cc) and the forwarding bench.
#ifndef SANDGATE_TESTS_INTEGRATION_REST_CLIENT_H_
#define SANDGATE_TESTS_INTEGRATION_REST_CLIENT_H_

#include <curl/curl.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {

// The tokens of the three tenants of RestDaemonConfig.
inline constexpr char kAlice[] = "alice-token";
inline constexpr char kBob[] = "bob-token";
inline constexpr char kOps[] = "ops-token";  // an operator's

// A daemon with its REST port on 127.0.0.1 (any free port), tenants alice, bob and ops (an
// operator), `max_input_bytes`, and local sandboxes from uid `uid_base` (16 of them).
nlohmann::json RestDaemonConfig(uint64_t max_input_bytes, int uid_base);

struct Answer {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased
};

// The answer's body and headers go to `a`.
void CollectInto(CURL* curl, Answer* a);
// A libcurl write callback that appends to the std::string `out`.
size_t Collect(char* data, size_t size, size_t n, void* out);

// `ca`: the CA file that verifies an https:// server. An answer not complete within
// `timeout_seconds` fails the test. `token` goes as "Authorization: Bearer <token>" (none
// when empty).
Answer Http(const std::string& method, const std::string& url, const std::string& token,
            const std::string& body = "", const std::vector<std::string>& headers = {},
            const std::string& ca = "", long timeout_seconds = 120);

// The HTTP port's base URL (http://127.0.0.1:<port>), from the daemon's daemon.http log line.
std::string HttpBase(const std::string& log);
inline std::string HttpBase(const DaemonHarness& daemon) { return HttpBase(daemon.Log()); }

template <typename M>
M Parse(const Answer& a) {
  M m;
  auto st = google::protobuf::util::JsonStringToMessage(a.body, &m);
  EXPECT_TRUE(st.ok()) << st.message() << " in " << a.body;
  return m;
}
std::string ToJson(const google::protobuf::Message& m);

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

struct SseEvent {
  std::string id, type, data;
};
// The events of a text/event-stream body; `comments` counts its comment lines (heartbeats).
std::vector<SseEvent> ParseSse(const std::string& body, int* comments);

// UploadFile / DownloadFile over gRPC as `token`: the file whole, in one data message.
grpc::Status UploadOverGrpc(v1::Sandgate::Stub& stub, const v1::UploadFileRequest::Header& header,
                            const std::string& data, v1::FileInfo* info, const std::string& token);
grpc::Status DownloadOverGrpc(v1::Sandgate::Stub& stub, const std::string& session,
                              const std::string& path, std::string* data, const std::string& token);

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_INTEGRATION_REST_CLIENT_H_
