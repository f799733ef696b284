// The daemon's two faces, gRPC and REST (docs/api.md), are one edge: the same scenario asked
// of each gets the same answer. A gRPC status and a REST error agree when the JSON error has
// the status's code and message and the HTTP status is the code's (404 for NOT_FOUND ...); a
// success when the JSON parses back into the gRPC response; a stream when its messages are
// the same (StreamEvents and the server-sent events of a run, resumed from a seq too; an
// artifact's chunks and its bytes). Hostile input included: a missing or wrong token,
// another tenant's run and session, a NUL or bytes that are not UTF-8 in a field, a path that
// leaves the workspace, an id over its size limit, an upload over the transfer limit.
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_harness.h"
#include "tests/integration/rest_client.h"

namespace sandgate::testing {
namespace {

constexpr uint64_t kMaxInput = 1 << 20;  // max_input_bytes: also the transfer limit

// The HTTP status a gRPC code is answered with on the REST face (docs/api.md, "Errors").
long HttpStatusOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::ABORTED:
      return 409;
    case grpc::StatusCode::FAILED_PRECONDITION:
      return 412;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::UNIMPLEMENTED:
      return 501;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    default:
      return 500;
  }
}

enum class Compare { kCodeAndMessage, kCodeOnly };

// The REST error `rest` is the gRPC status `st`: the same code (and HTTP status), and with
// kCodeAndMessage the same message. The gRPC side must have failed.
void ExpectSameError(const grpc::Status& st, const Answer& rest,
                     Compare how = Compare::kCodeAndMessage) {
  ASSERT_FALSE(st.ok()) << "gRPC answered OK; REST " << rest.status << " " << rest.body;
  EXPECT_EQ(rest.status, HttpStatusOf(st.error_code()))
      << "gRPC " << st.error_code() << " " << st.error_message() << "; REST " << rest.body;
  nlohmann::json error = nlohmann::json::parse(rest.body, nullptr, false);
  ASSERT_TRUE(error.is_object()) << rest.body;
  EXPECT_EQ(error["code"], static_cast<int>(st.error_code())) << rest.body;
  if (how == Compare::kCodeAndMessage) {
    EXPECT_EQ(error["message"], st.error_message()) << rest.body;
  }
}

template <typename M>
void ExpectSameAnswer(const grpc::Status& st, const M& grpc_answer, const Answer& rest) {
  if (!st.ok()) return ExpectSameError(st, rest);
  ASSERT_EQ(rest.status, 200) << rest.body;
  M got = Parse<M>(rest);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, grpc_answer))
      << "REST: " << got.DebugString() << "\ngRPC: " << grpc_answer.DebugString();
}

// A run's events over StreamEvents, heartbeats left out, and how the stream ended.
struct GrpcEvents {
  grpc::Status status;
  std::vector<v1::Event> events;
};
GrpcEvents StreamEvents(v1::Sandgate::Stub& stub, const std::string& token,
                        const v1::StreamEventsRequest& req) {
  auto ctx = DaemonHarness::Context(token);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub.StreamEvents(ctx.get(), req);
  GrpcEvents out;
  v1::Event e;
  while (reader->Read(&e)) {
    if (e.type() != "heartbeat") out.events.push_back(e);
  }
  out.status = reader->Finish();
  return out;
}

// The same events, as the server-sent events of `rest` carry them.
void ExpectSameEvents(const std::vector<v1::Event>& grpc_events, const Answer& rest) {
  int comments = 0;
  std::vector<SseEvent> sse = ParseSse(rest.body, &comments);
  ASSERT_EQ(sse.size(), grpc_events.size()) << rest.body;
  for (size_t i = 0; i < sse.size(); ++i) {
    EXPECT_EQ(sse[i].id, absl::StrCat(grpc_events[i].seq()));
    EXPECT_EQ(sse[i].type, grpc_events[i].type());
    v1::Event e;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(sse[i].data, &e).ok()) << sse[i].data;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(e, grpc_events[i]))
        << e.DebugString() << " vs " << grpc_events[i].DebugString();
  }
}

class EdgeConformanceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new DaemonHarness(RestDaemonConfig(kMaxInput, 345000));
    daemon_->Start();
    auto stub = daemon_->Stub();
    // One finished run and one kept session of alice's, shared by the cases.
    v1::Run run;
    grpc::Status st =
        stub->RunAnalysis(DaemonHarness::Context(kAlice).get(), SampleRequest(), &run);
    ASSERT_TRUE(st.ok()) << st.error_message();
    run_ = new v1::Run(run);
    FollowToEnd(*stub, run.id(), kAlice);
    st = stub->GetRun(
        DaemonHarness::Context(kAlice).get(),
        [&] {
          v1::GetRunRequest get;
          get.set_run_id(run.id());
          return get;
        }(),
        run_);
    ASSERT_TRUE(st.ok()) << st.error_message();
    v1::Session session;
    st = stub->CreateSession(DaemonHarness::Context(kAlice).get(), v1::CreateSessionRequest(),
                             &session);
    ASSERT_TRUE(st.ok()) << st.error_message();
    session_ = new std::string(session.id());
    v1::UploadFileRequest::Header header;
    header.set_session_id(session.id());
    header.set_path("notes/a.txt");
    v1::FileInfo info;
    st = UploadOverGrpc(*stub, header, "the a file\n", &info, kAlice);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete run_;
    delete session_;
  }
  void SetUp() override {
    ASSERT_NE(session_, nullptr);
    stub_ = daemon_->Stub();
    base_ = HttpBase(*daemon_);
    ASSERT_TRUE(absl::StartsWith(base_, "http://127.0.0.1:")) << daemon_->Log();
  }
  std::string Url(const std::string& path) const { return base_ + path; }
  const std::string& session() const { return *session_; }

  static DaemonHarness* daemon_;
  static v1::Run* run_;          // alice's, finished
  static std::string* session_;  // alice's, with notes/a.txt
  std::unique_ptr<v1::Sandgate::Stub> stub_;
  std::string base_;
};
DaemonHarness* EdgeConformanceTest::daemon_ = nullptr;
v1::Run* EdgeConformanceTest::run_ = nullptr;
std::string* EdgeConformanceTest::session_ = nullptr;

// No token, or one that names no tenant: UNAUTHENTICATED with the same reason, on unary
// calls and streams alike.
TEST_F(EdgeConformanceTest, AMissingOrWrongTokenIsUnauthenticatedOnBoth) {
  for (const std::string token : {"", "wrong-token"}) {
    SCOPED_TRACE("token '" + token + "'");
    v1::GetRunRequest get;
    get.set_run_id(run_->id());
    v1::Run out;
    grpc::Status st = stub_->GetRun(DaemonHarness::Context(token).get(), get, &out);
    ExpectSameError(st, Http("GET", Url("/v1/runs/" + run_->id()), token));

    v1::StreamEventsRequest follow;
    follow.set_run_id(run_->id());
    follow.set_follow(true);
    ExpectSameError(StreamEvents(*stub_, token, follow).status,
                    Http("GET", Url("/v1/runs/" + run_->id() + "/events"), token));

    std::string data;
    ExpectSameError(DownloadOverGrpc(*stub_, session(), "notes/a.txt", &data, token),
                    Http("GET", Url("/v1/sessions/" + session() + "/files/notes/a.txt"), token));
    EXPECT_EQ(data, "");

    v1::ListResourcesRequest resources;
    v1::ListResourcesResponse listed;
    st = stub_->ListResources(DaemonHarness::Context(token).get(), resources, &listed);
    ExpectSameError(st, Http("GET", Url("/v1/resources"), token));
    // The metrics page on the API port is the operators' as ListResources is.
    ExpectSameError(st, Http("GET", Url("/metrics"), token));
  }
}

// The operator's pages: a tenant's token is PERMISSION_DENIED on both (the metrics page counts
// every tenant's runs: on the REST port it is refused as ListResources is), an operator's
// is served.
TEST_F(EdgeConformanceTest, OperatorCallsAndTheMetricsPageRefuseATenantAlike) {
  v1::ListResourcesResponse listed;
  grpc::Status st = stub_->ListResources(DaemonHarness::Context(kAlice).get(),
                                         v1::ListResourcesRequest(), &listed);
  ExpectSameError(st, Http("GET", Url("/v1/resources"), kAlice));
  Answer metrics = Http("GET", Url("/metrics"), kAlice);
  ExpectSameError(st, metrics, Compare::kCodeOnly);
  EXPECT_TRUE(absl::StrContains(metrics.body, "the operator role is required")) << metrics.body;
  EXPECT_FALSE(absl::StrContains(metrics.body, "sandgate_")) << metrics.body;

  st =
      stub_->ListResources(DaemonHarness::Context(kOps).get(), v1::ListResourcesRequest(), &listed);
  ASSERT_TRUE(st.ok()) << st.error_message();
  Answer ops = Http("GET", Url("/metrics"), kOps);
  EXPECT_EQ(ops.status, 200) << ops.body;
  EXPECT_TRUE(absl::StrContains(ops.body, "sandgate_runs_active")) << ops.body;
}

// Another tenant's run and session do not exist for bob: NOT_FOUND, the same message, on
// every call that names one.
TEST_F(EdgeConformanceTest, AnotherTenantsRunAndSessionAreNotFoundOnBoth) {
  const std::string run = "/v1/runs/" + run_->id();
  const std::string ses = "/v1/sessions/" + session();
  {
    v1::GetRunRequest q;
    q.set_run_id(run_->id());
    v1::Run out;
    ExpectSameError(stub_->GetRun(DaemonHarness::Context(kBob).get(), q, &out),
                    Http("GET", Url(run), kBob));
  }
  {
    v1::CancelRunRequest q;
    q.set_run_id(run_->id());
    v1::Run out;
    ExpectSameError(stub_->CancelRun(DaemonHarness::Context(kBob).get(), q, &out),
                    Http("POST", Url(run + ":cancel"), kBob));
  }
  {
    v1::StreamEventsRequest q;
    q.set_run_id(run_->id());
    q.set_follow(true);
    ExpectSameError(StreamEvents(*stub_, kBob, q).status, Http("GET", Url(run + "/events"), kBob));
  }
  ASSERT_GT(run_->artifacts_size(), 0);
  const std::string artifact = run_->artifacts(0).name();
  ExpectSameError(DownloadArtifact(*stub_, run_->id(), artifact, kBob).status,
                  Http("GET", Url(run + "/artifacts/" + artifact), kBob));
  {
    v1::GetSessionRequest q;
    q.set_session_id(session());
    v1::Session out;
    ExpectSameError(stub_->GetSession(DaemonHarness::Context(kBob).get(), q, &out),
                    Http("GET", Url(ses), kBob));
  }
  {
    v1::KeepAliveRequest q;
    q.set_session_id(session());
    v1::Session out;
    ExpectSameError(stub_->KeepAlive(DaemonHarness::Context(kBob).get(), q, &out),
                    Http("POST", Url(ses + ":keepAlive"), kBob));
  }
  {
    v1::ListFilesRequest q;
    q.set_session_id(session());
    v1::ListFilesResponse out;
    ExpectSameError(stub_->ListFiles(DaemonHarness::Context(kBob).get(), q, &out),
                    Http("GET", Url(ses + "/files"), kBob));
  }
  {
    v1::StatFileRequest q;
    q.set_session_id(session());
    q.set_path("notes/a.txt");
    v1::FileInfo out;
    ExpectSameError(stub_->StatFile(DaemonHarness::Context(kBob).get(), q, &out),
                    Http("GET", Url(ses + "/files:stat?path=notes/a.txt"), kBob));
  }
  std::string data;
  ExpectSameError(DownloadOverGrpc(*stub_, session(), "notes/a.txt", &data, kBob),
                  Http("GET", Url(ses + "/files/notes/a.txt"), kBob));
  EXPECT_EQ(data, "");
  v1::UploadFileRequest::Header header;
  header.set_session_id(session());
  header.set_path("from-bob.txt");
  v1::FileInfo info;
  ExpectSameError(UploadOverGrpc(*stub_, header, "x", &info, kBob),
                  Http("PUT", Url(ses + "/files/from-bob.txt"), kBob, "x"));
}

// A NUL in a field that names something (an id, a path, a page token): INVALID_ARGUMENT
// naming the field, on both; never NOT_FOUND on one face and INVALID_ARGUMENT on the other.
TEST_F(EdgeConformanceTest, ANulInAFieldIsInvalidArgumentNamingItOnBoth) {
  {
    v1::GetRunRequest q;
    q.set_run_id(std::string("run\0x", 5));
    v1::Run out;
    ExpectSameError(stub_->GetRun(DaemonHarness::Context(kAlice).get(), q, &out),
                    Http("GET", Url("/v1/runs/run%00x"), kAlice));
  }
  {
    v1::GetSessionRequest q;
    q.set_session_id(session() + std::string("\0", 1));
    v1::Session out;
    ExpectSameError(stub_->GetSession(DaemonHarness::Context(kAlice).get(), q, &out),
                    Http("GET", Url("/v1/sessions/" + session() + "%00"), kAlice));
  }
  {
    v1::ListRunsRequest q;
    q.set_page_token(std::string("a\0b", 3));
    v1::ListRunsResponse out;
    ExpectSameError(stub_->ListRuns(DaemonHarness::Context(kAlice).get(), q, &out),
                    Http("GET", Url("/v1/runs?page_token=a%00b"), kAlice));
  }
  {
    v1::StreamEventsRequest q;
    q.set_run_id(run_->id() + std::string("\0", 1));
    q.set_follow(true);
    ExpectSameError(StreamEvents(*stub_, kAlice, q).status,
                    Http("GET", Url("/v1/runs/" + run_->id() + "%00/events"), kAlice));
  }
  {
    // Refused for the NUL before the token is looked at, on both (REST reads its path first).
    v1::GetRunRequest q;
    q.set_run_id(std::string("run\0x", 5));
    v1::Run out;
    ExpectSameError(stub_->GetRun(DaemonHarness::Context("").get(), q, &out),
                    Http("GET", Url("/v1/runs/run%00x"), ""));
  }
  ExpectSameError(DownloadArtifact(*stub_, run_->id(), std::string("a\0.md", 5), kAlice).status,
                  Http("GET", Url("/v1/runs/" + run_->id() + "/artifacts/a%00.md"), kAlice));
  std::string data;
  ExpectSameError(
      DownloadOverGrpc(*stub_, session(), std::string("notes/a\0.txt", 12), &data, kAlice),
      Http("GET", Url("/v1/sessions/" + session() + "/files/notes/a%00.txt"), kAlice));
}

// Bytes that are not UTF-8 in a string field: INVALID_ARGUMENT on both (gRPC refuses the
// message whole, as it does not parse; REST names the field).
TEST_F(EdgeConformanceTest, InvalidUtf8IsInvalidArgumentOnBoth) {
  v1::GetSessionRequest q;
  q.set_session_id("ses_\xff");  // the C++ client logs, and sends it anyway
  v1::Session out;
  ExpectSameError(stub_->GetSession(DaemonHarness::Context(kAlice).get(), q, &out),
                  Http("GET", Url("/v1/sessions/ses_%FF"), kAlice), Compare::kCodeOnly);
  v1::StatFileRequest stat;
  stat.set_session_id(session());
  stat.set_path("notes/\xc3");
  v1::FileInfo info;
  ExpectSameError(
      stub_->StatFile(DaemonHarness::Context(kAlice).get(), stat, &info),
      Http("GET", Url("/v1/sessions/" + session() + "/files:stat?path=notes/%C3"), kAlice),
      Compare::kCodeOnly);
}

// A path that leaves the workspace: the same INVALID_ARGUMENT, word for word.
TEST_F(EdgeConformanceTest, PathTraversalIsRefusedAlikeOnBoth) {
  const std::string ses = "/v1/sessions/" + session();
  std::string data;
  ExpectSameError(DownloadOverGrpc(*stub_, session(), "../etc/passwd", &data, kAlice),
                  Http("GET", Url(ses + "/files/%2E%2E/etc/passwd"), kAlice));
  EXPECT_EQ(data, "");
  {
    v1::ListFilesRequest q;
    q.set_session_id(session());
    q.set_dir("notes/../../etc");
    v1::ListFilesResponse out;
    ExpectSameError(stub_->ListFiles(DaemonHarness::Context(kAlice).get(), q, &out),
                    Http("GET", Url(ses + "/files?dir=notes/../../etc"), kAlice));
  }
  {
    v1::StatFileRequest q;
    q.set_session_id(session());
    q.set_path("/etc/passwd");
    v1::FileInfo out;
    ExpectSameError(stub_->StatFile(DaemonHarness::Context(kAlice).get(), q, &out),
                    Http("GET", Url(ses + "/files:stat?path=/etc/passwd"), kAlice));
  }
  v1::UploadFileRequest::Header header;
  header.set_session_id(session());
  header.set_path("../escape.txt");
  v1::FileInfo info;
  ExpectSameError(UploadOverGrpc(*stub_, header, "x", &info, kAlice),
                  Http("PUT", Url(ses + "/files/%2E%2E/escape.txt"), kAlice, "x"));
}

// Over the limits: an id of 5000 bytes, an upload larger than the transfer limit.
TEST_F(EdgeConformanceTest, OversizeInputIsAnsweredAlikeOnBoth) {
  const std::string long_id(5000, 'r');
  v1::GetRunRequest q;
  q.set_run_id(long_id);
  v1::Run out;
  ExpectSameError(stub_->GetRun(DaemonHarness::Context(kAlice).get(), q, &out),
                  Http("GET", Url("/v1/runs/" + long_id), kAlice));

  const std::string big(kMaxInput + 1, 'b');
  v1::UploadFileRequest::Header header;
  header.set_session_id(session());
  header.set_path("big.bin");
  header.set_size_bytes(big.size());
  v1::FileInfo info;
  ExpectSameError(UploadOverGrpc(*stub_, header, big, &info, kAlice),
                  Http("PUT", Url("/v1/sessions/" + session() + "/files/big.bin"), kAlice, big));
}

// One answer for a successful call too: the JSON is the response message.
TEST_F(EdgeConformanceTest, UnaryAnswersAreTheSameMessage) {
  v1::GetRunRequest get;
  get.set_run_id(run_->id());
  v1::Run run;
  grpc::Status st = stub_->GetRun(DaemonHarness::Context(kAlice).get(), get, &run);
  ExpectSameAnswer(st, run, Http("GET", Url("/v1/runs/" + run_->id()), kAlice));
  v1::StatFileRequest stat;
  stat.set_session_id(session());
  stat.set_path("notes/a.txt");
  v1::FileInfo info;
  st = stub_->StatFile(DaemonHarness::Context(kAlice).get(), stat, &info);
  ExpectSameAnswer(
      st, info,
      Http("GET", Url("/v1/sessions/" + session() + "/files:stat?path=notes/a.txt"), kAlice));
}

// A run's events: the whole log, a resume after a seq, a replay without follow, and a follow
// from the end (gRPC ends OK with no event; REST answers 204, on which an EventSource stops).
TEST_F(EdgeConformanceTest, StreamEventsAndServerSentEventsCarryTheSameEvents) {
  const std::string url = Url("/v1/runs/" + run_->id() + "/events");
  v1::StreamEventsRequest req;
  req.set_run_id(run_->id());
  req.set_follow(true);
  GrpcEvents all = StreamEvents(*stub_, kAlice, req);
  ASSERT_TRUE(all.status.ok()) << all.status.error_message();
  ASSERT_GE(all.events.size(), 3u);
  EXPECT_EQ(all.events.back().type(), "run.finished");
  Answer sse = Http("GET", url, kAlice);
  ASSERT_EQ(sse.status, 200) << sse.body;
  ExpectSameEvents(all.events, sse);

  const int64_t mid = all.events[all.events.size() / 2].seq();
  req.set_after_seq(mid);
  GrpcEvents resumed = StreamEvents(*stub_, kAlice, req);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status.error_message();
  EXPECT_EQ(resumed.events.front().seq(), mid + 1);
  ExpectSameEvents(resumed.events,
                   Http("GET", url, kAlice, "", {absl::StrCat("Last-Event-ID: ", mid)}));
  ExpectSameEvents(resumed.events, Http("GET", absl::StrCat(url, "?after_seq=", mid), kAlice));

  req.set_follow(false);
  GrpcEvents replay = StreamEvents(*stub_, kAlice, req);
  ASSERT_TRUE(replay.status.ok()) << replay.status.error_message();
  ExpectSameEvents(replay.events,
                   Http("GET", absl::StrCat(url, "?follow=false&after_seq=", mid), kAlice));

  req.set_follow(true);
  req.set_after_seq(all.events.back().seq());
  GrpcEvents at_end = StreamEvents(*stub_, kAlice, req);
  EXPECT_TRUE(at_end.status.ok()) << at_end.status.error_message();
  EXPECT_TRUE(at_end.events.empty());
  Answer none = Http("GET", url, kAlice, "",
                     {absl::StrCat("Last-Event-ID: ", all.events.back().seq())}, "", 10);
  EXPECT_EQ(none.status, 204) << none.body;

  req.set_after_seq(-1);
  ExpectSameError(StreamEvents(*stub_, kAlice, req).status,
                  Http("GET", absl::StrCat(url, "?after_seq=-1"), kAlice), Compare::kCodeOnly);
}

// An artifact: the same bytes and digest; a name the run did not make, the same NOT_FOUND.
TEST_F(EdgeConformanceTest, ArtifactsAreTheSameBytesOnBoth) {
  for (const v1::Artifact& artifact : run_->artifacts()) {
    SCOPED_TRACE(artifact.name());
    DownloadedArtifact grpc = DownloadArtifact(*stub_, run_->id(), artifact.name(), kAlice);
    ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();
    Answer rest =
        Http("GET", Url("/v1/runs/" + run_->id() + "/artifacts/" + artifact.name()), kAlice);
    ASSERT_EQ(rest.status, 200) << rest.body;
    EXPECT_EQ(rest.body, grpc.data);
    EXPECT_EQ(rest.headers["x-sandgate-sha256"], grpc.sha256);
    EXPECT_EQ(Sha256Hex(rest.body), artifact.sha256());
  }
  ExpectSameError(DownloadArtifact(*stub_, run_->id(), "nope.md", kAlice).status,
                  Http("GET", Url("/v1/runs/" + run_->id() + "/artifacts/nope.md"), kAlice));
  std::string data;
  grpc::Status st = DownloadOverGrpc(*stub_, session(), "notes/a.txt", &data, kAlice);
  ASSERT_TRUE(st.ok()) << st.error_message();
  Answer file = Http("GET", Url("/v1/sessions/" + session() + "/files/notes/a.txt"), kAlice);
  EXPECT_EQ(file.status, 200);
  EXPECT_EQ(file.body, data);
}

}  // namespace
}  // namespace sandgate::testing
