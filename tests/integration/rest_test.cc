// The REST/JSON face (server/http_api.h) of the real daemon: every RPC that has a route
// answers over HTTP as over gRPC (the JSON parsed back into the proto and compared), the
// event stream as server-sent events, artifacts, auth and tenants, /metrics; and the curl
// commands of docs/api.md ("REST").
#include <curl/curl.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/fakes/postgres_server.h"
#include "tests/fakes/test_certs.h"
#include "tests/integration/daemon_harness.h"
#include "tests/integration/rest_client.h"
#include "tests/integration/tls_replica.h"

namespace sandgate::testing {
namespace {

constexpr uint64_t kMaxInput = 1 << 20;  // max_input_bytes: the upload limit

// The NDJSON lines of an Exec answer; an {"error": ...} line is returned in `error`.
std::vector<v1::ExecResponse> ExecLines(const std::string& body, nlohmann::json* error) {
  std::vector<v1::ExecResponse> out;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("error")) {
      *error = j["error"];
      continue;
    }
    v1::ExecResponse r;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &r).ok()) << line;
    out.push_back(r);
  }
  return out;
}

class RestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonHarness>(RestDaemonConfig(kMaxInput, 340000));
    daemon_->Start();
    stub_ = daemon_->Stub();
    base_ = HttpBase(*daemon_);
    ASSERT_TRUE(absl::StartsWith(base_, "http://127.0.0.1:")) << daemon_->Log();
  }
  std::string Url(const std::string& path) const { return base_ + path; }
  int Port() const { return std::atoi(base_.substr(base_.rfind(':') + 1).c_str()); }
  v1::Run StartRun(const std::string& token) {
    Answer a = Http("POST", Url("/v1/runs"), token, ToJson(SampleRequest()));
    EXPECT_EQ(a.status, 200) << a.body;
    return Parse<v1::Run>(a);
  }

  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
  std::string base_;  // http://127.0.0.1:<port>
};

TEST_F(RestTest, EveryRunRouteAnswersAsGrpcDoes) {
  v1::Run run = StartRun(kAlice);
  ASSERT_FALSE(run.id().empty());
  FollowToEnd(*stub_, run.id(), kAlice);

  v1::GetRunRequest get;
  get.set_run_id(run.id());
  v1::Run grpc_run;
  grpc::Status st = stub_->GetRun(DaemonHarness::Context(kAlice).get(), get, &grpc_run);
  ExpectSame(Http("GET", Url("/v1/runs/" + run.id()), kAlice), st, grpc_run, "GetRun");
  EXPECT_EQ(grpc_run.status(), v1::RUN_STATUS_SUCCEEDED);

  v1::ListRunsRequest list;
  list.set_page_size(1);
  v1::ListRunsResponse grpc_list;
  st = stub_->ListRuns(DaemonHarness::Context(kAlice).get(), list, &grpc_list);
  ExpectSame(Http("GET", Url("/v1/runs?page_size=1"), kAlice), st, grpc_list, "ListRuns");

  v1::CancelRunRequest cancel;
  cancel.set_run_id(run.id());
  v1::Run grpc_cancel;
  st = stub_->CancelRun(DaemonHarness::Context(kAlice).get(), cancel, &grpc_cancel);
  ExpectSame(Http("POST", Url("/v1/runs/" + run.id() + ":cancel"), kAlice), st, grpc_cancel,
             "CancelRun of a finished run");

  // Errors: the same code and message.
  get.set_run_id("run_missing");
  st = stub_->GetRun(DaemonHarness::Context(kAlice).get(), get, &grpc_run);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  Answer missing = Http("GET", Url("/v1/runs/run_missing"), kAlice);
  ExpectSame(missing, st, grpc_run, "GetRun of a missing run");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(nlohmann::json::parse(missing.body)["status"], "NOT_FOUND");

  v1::RunAnalysisRequest bad = SampleRequest();
  bad.set_playbook("no-such-playbook");
  st = stub_->RunAnalysis(DaemonHarness::Context(kAlice).get(), bad, &grpc_run);
  ASSERT_FALSE(st.ok());
  ExpectSame(Http("POST", Url("/v1/runs"), kAlice, ToJson(bad)), st, grpc_run,
             "RunAnalysis refused");

  Answer garbage = Http("POST", Url("/v1/runs"), kAlice, "{\"playbok\": 1}");
  EXPECT_EQ(garbage.status, 400) << garbage.body;
  EXPECT_TRUE(absl::StrContains(garbage.body, "request body")) << garbage.body;
}

TEST_F(RestTest, EverySessionRouteAnswersAsGrpcDoes) {
  Answer created = Http("POST", Url("/v1/sessions"), kAlice, "{}");
  ASSERT_EQ(created.status, 200) << created.body;
  v1::Session session = Parse<v1::Session>(created);
  ASSERT_FALSE(session.id().empty());
  const std::string path = "/v1/sessions/" + session.id();

  v1::GetSessionRequest get;
  get.set_session_id(session.id());
  v1::Session grpc_session;
  grpc::Status st = stub_->GetSession(DaemonHarness::Context(kAlice).get(), get, &grpc_session);
  ExpectSame(Http("GET", Url(path), kAlice), st, grpc_session, "GetSession");

  v1::ListSessionsRequest list;
  v1::ListSessionsResponse grpc_list;
  st = stub_->ListSessions(DaemonHarness::Context(kAlice).get(), list, &grpc_list);
  ExpectSame(Http("GET", Url("/v1/sessions"), kAlice), st, grpc_list, "ListSessions");

  v1::ListFilesRequest files;
  files.set_session_id(session.id());
  v1::ListFilesResponse grpc_files;
  st = stub_->ListFiles(DaemonHarness::Context(kAlice).get(), files, &grpc_files);
  ExpectSame(Http("GET", Url(path + "/files"), kAlice), st, grpc_files, "ListFiles");
  files.set_dir("../etc");
  st = stub_->ListFiles(DaemonHarness::Context(kAlice).get(), files, &grpc_files);
  ExpectSame(Http("GET", Url(path + "/files?dir=../etc"), kAlice), st, grpc_files,
             "ListFiles outside the workspace");

  Answer kept = Http("POST", Url(path + ":keepAlive"), kAlice);
  ASSERT_EQ(kept.status, 200) << kept.body;
  EXPECT_EQ(Parse<v1::Session>(kept).id(), session.id());

  Answer closed = Http("POST", Url(path + ":close"), kAlice, "{\"reason\": \"done\"}");
  ASSERT_EQ(closed.status, 200) << closed.body;
  st = stub_->GetSession(DaemonHarness::Context(kAlice).get(), get, &grpc_session);
  ExpectSame(Http("GET", Url(path), kAlice), st, grpc_session, "GetSession of a closed one");

  v1::KeepAliveRequest keep;
  keep.set_session_id(session.id());
  st = stub_->KeepAlive(DaemonHarness::Context(kAlice).get(), keep, &grpc_session);
  ASSERT_FALSE(st.ok());
  ExpectSame(Http("POST", Url(path + ":keepAlive"), kAlice), st, grpc_session,
             "KeepAlive of a closed session");
}

// Issue 23 item 6: a session's usage (the dashboard's live figures) over REST as over gRPC:
// its cgroups' figures, another tenant's session NOT_FOUND, a closed one FAILED_PRECONDITION,
// an id that is not UTF-8 refused naming the field.
TEST_F(RestTest, SessionUsageAnswersAsGrpcDoes) {
  Answer created = Http("POST", Url("/v1/sessions"), kAlice, "{}");
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string sid = Parse<v1::Session>(created).id();
  const std::string path = "/v1/sessions/" + sid + "/usage";
  v1::GetSessionUsageRequest req;
  req.set_session_id(sid);

  v1::SessionUsage grpc_usage;
  grpc::Status st = stub_->GetSessionUsage(DaemonHarness::Context(kAlice).get(), req, &grpc_usage);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(grpc_usage.session_id(), sid);
  EXPECT_GT(grpc_usage.memory_bytes(), 0u) << grpc_usage.DebugString();
  EXPECT_GT(grpc_usage.processes(), 0u) << grpc_usage.DebugString();
  Answer rest = Http("GET", Url(path), kAlice);
  ASSERT_EQ(rest.status, 200) << rest.body;
  v1::SessionUsage rest_usage = Parse<v1::SessionUsage>(rest);
  // Two samples a moment apart: the same session, limit and what is unmeasured.
  EXPECT_EQ(rest_usage.session_id(), sid);
  EXPECT_EQ(rest_usage.memory_limit_bytes(), grpc_usage.memory_limit_bytes());
  EXPECT_EQ(rest_usage.unmeasured_size(), grpc_usage.unmeasured_size());
  EXPECT_GT(rest_usage.memory_bytes(), 0u);

  st = stub_->GetSessionUsage(DaemonHarness::Context(kBob).get(), req, &grpc_usage);
  ExpectSame(Http("GET", Url(path), kBob), st, grpc_usage, "another tenant's session");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);

  Answer bad = Http("GET", Url("/v1/sessions/%FF/usage"), kAlice);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("UTF-8"), std::string::npos) << bad.body;

  ASSERT_EQ(Http("POST", Url("/v1/sessions/" + sid + ":close"), kAlice, "{}").status, 200);
  st = stub_->GetSessionUsage(DaemonHarness::Context(kAlice).get(), req, &grpc_usage);
  ExpectSame(Http("GET", Url(path), kAlice), st, grpc_usage, "a closed session");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// Issue 23: processes over REST, as over gRPC: a python3 -i driven through a terminal, its
// output read from offsets with waits, input in base64, a signal, and the hostile cases.
TEST_F(RestTest, ProcessRoutesTalkToAProcessAsGrpcDoes) {
  Answer created = Http("POST", Url("/v1/sessions"), kAlice, "{}");
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string sid = Parse<v1::Session>(created).id();
  const std::string path = "/v1/sessions/" + sid + "/processes";
  Answer started = Http("POST", Url(path), kAlice,
                        R"({"argv": ["python3", "-i", "-q"], "pty": {"rows": 20, "cols": 70}})");
  ASSERT_EQ(started.status, 200) << started.body;
  v1::Process proc = Parse<v1::Process>(started);
  EXPECT_EQ(proc.state(), v1::Process::STATE_RUNNING);
  EXPECT_TRUE(proc.pty());
  const std::string pp = path + "/" + proc.id();
  // Reads from the last offset, each waiting up to 5 s, until `text` shows.
  uint64_t offset = 0;
  std::string seen;
  auto read_until = [&](const std::string& text) {
    for (int i = 0; i < 20 && !absl::StrContains(seen, text); ++i) {
      Answer a = Http("GET", Url(absl::StrCat(pp, "/output?offset=", offset, "&wait=5s")), kAlice);
      EXPECT_EQ(a.status, 200) << a.body;
      if (a.status != 200) return false;
      v1::ProcessOutput out = Parse<v1::ProcessOutput>(a);
      for (const auto& c : out.chunks()) seen += c.data();
      offset = out.next_offset();
    }
    return absl::StrContains(seen, text);
  };
  auto input = [&](const std::string& json) {
    Answer a = Http("POST", Url(pp + ":input"), kAlice, json);
    EXPECT_EQ(a.status, 200) << a.body;
    return a;
  };
  EXPECT_TRUE(read_until(">>> ")) << seen;
  // "print(6*7)\n" in base64, as JSON carries bytes.
  Answer wrote = input(R"({"data": "cHJpbnQoNio3KQo="})");
  EXPECT_EQ(Parse<v1::WriteProcessInputResponse>(wrote).written_bytes(), 11u);
  // Resized at the prompt: readline writes back the size it read as it shows one.
  EXPECT_TRUE(read_until("42\r\n>>> ")) << seen;
  input(R"({"resize": {"rows": 31, "cols": 99}})");
  // "import os; print(os.get_terminal_size())\n"
  input(R"({"data": "aW1wb3J0IG9zOyBwcmludChvcy5nZXRfdGVybWluYWxfc2l6ZSgpKQo="})");
  EXPECT_TRUE(read_until("columns=99, lines=31")) << seen;
  // gRPC lists it as REST does.
  v1::ListProcessesRequest list;
  list.set_session_id(sid);
  v1::ListProcessesResponse grpc_list;
  grpc::Status st = stub_->ListProcesses(DaemonHarness::Context(kAlice).get(), list, &grpc_list);
  ASSERT_TRUE(st.ok()) << st.error_message();
  Answer listed = Http("GET", Url(path), kAlice);
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(Parse<v1::ListProcessesResponse>(listed).processes(0).id(),
            grpc_list.processes(0).id());
  // Hostile and wrong-tenant requests.
  EXPECT_EQ(Http("GET", Url(pp + "/output"), kBob).status, 404);
  EXPECT_EQ(Http("POST", Url(pp + ":input"), kBob, R"({"signal": "SIGKILL"})").status, 404);
  Answer bad_signal = Http("POST", Url(pp + ":input"), kAlice, R"({"signal": "SIGSTOP"})");
  EXPECT_EQ(bad_signal.status, 400) << bad_signal.body;
  EXPECT_TRUE(absl::StrContains(bad_signal.body, "SIGSTOP")) << bad_signal.body;
  EXPECT_EQ(Http("GET", Url(path + "/..%2Fp1/output"), kAlice).status, 404);  // no such route
  Answer bad_id = Http("GET", Url(path + "/x1/output"), kAlice);
  EXPECT_EQ(bad_id.status, 400) << bad_id.body;
  EXPECT_TRUE(absl::StrContains(bad_id.body, "process_id")) << bad_id.body;
  Answer long_wait = Http("GET", Url(pp + "/output?wait=3600s"), kAlice);
  EXPECT_EQ(long_wait.status, 400) << long_wait.body;
  EXPECT_TRUE(absl::StrContains(long_wait.body, "wait: must be")) << long_wait.body;
  Answer bad_utf8 = Http("POST", Url(path), kAlice, "{\"command\": \"echo \xff\"}");
  EXPECT_EQ(bad_utf8.status, 400) << bad_utf8.body;
  // SIGKILL ends it; its end is in the next read.
  input(R"({"signal": "SIGKILL"})");
  v1::Process last;
  for (int i = 0; i < 20; ++i) {
    Answer a = Http("GET", Url(absl::StrCat(pp, "/output?offset=", offset, "&wait=5s")), kAlice);
    ASSERT_EQ(a.status, 200) << a.body;
    v1::ProcessOutput out = Parse<v1::ProcessOutput>(a);
    offset = out.next_offset();
    last = out.process();
    if (last.state() != v1::Process::STATE_RUNNING) break;
  }
  EXPECT_EQ(last.state(), v1::Process::STATE_EXITED);
  EXPECT_EQ(last.finished().signal(), SIGKILL);
  Answer ended = Http("POST", Url(pp + ":input"), kAlice, R"({"data": "eA=="})");
  EXPECT_EQ(ended.status, 412) << ended.body;
}

// Issue 23: stat, delete, rename and mkdir over REST, with UploadFile's path rules.
TEST_F(RestTest, FileRoutesManageTheWorkspaceAndRefuseHostilePaths) {
  Answer created = Http("POST", Url("/v1/sessions"), kAlice, "{}");
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string sid = Parse<v1::Session>(created).id();
  const std::string files = "/v1/sessions/" + sid + "/files";
  Answer made = Http("POST", Url(files + ":mkdir"), kAlice, R"({"path": "d/e", "parents": true})");
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_EQ(Parse<v1::FileInfo>(made).type(), v1::FileInfo::TYPE_DIRECTORY);
  v1::UploadFileRequest up;  // a file to move, through gRPC
  v1::FileInfo info;
  {
    auto ctx = DaemonHarness::Context(kAlice);
    auto writer = stub_->UploadFile(ctx.get(), &info);
    up.mutable_header()->set_session_id(sid);
    up.mutable_header()->set_path("d/e/f.txt");
    ASSERT_TRUE(writer->Write(up));
    up.Clear();
    up.set_data("abc");
    ASSERT_TRUE(writer->Write(up));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
  }
  Answer stat = Http("GET", Url(files + ":stat?path=d/e/f.txt"), kAlice);
  ASSERT_EQ(stat.status, 200) << stat.body;
  EXPECT_EQ(Parse<v1::FileInfo>(stat).size_bytes(), 3u);
  Answer moved =
      Http("POST", Url(files + ":rename"), kAlice, R"({"from": "d/e/f.txt", "to": "g.txt"})");
  ASSERT_EQ(moved.status, 200) << moved.body;
  EXPECT_EQ(Parse<v1::FileInfo>(moved).path(), "g.txt");
  Answer clash = Http("POST", Url(files + ":rename"), kAlice, R"({"from": "d", "to": "g.txt"})");
  EXPECT_EQ(clash.status, 409) << clash.body;
  EXPECT_EQ(Http("POST", Url(files + ":delete"), kAlice, R"({"path": "d"})").status, 412);
  EXPECT_EQ(
      Http("POST", Url(files + ":delete"), kAlice, R"({"path": "d", "recursive": true})").status,
      200);
  EXPECT_EQ(Http("GET", Url(files + ":stat?path=d"), kAlice).status, 404);
  // Another tenant's session, and paths out of the workspace.
  EXPECT_EQ(Http("POST", Url(files + ":delete"), kBob, R"({"path": "g.txt"})").status, 404);
  for (const char* body : {R"({"path": "../g.txt"})", R"({"path": "/etc/passwd"})",
                           R"({"path": "a/./b"})", "{\"path\": \"\xff\"}"}) {
    Answer bad = Http("POST", Url(files + ":delete"), kAlice, body);
    EXPECT_EQ(bad.status, 400) << body << ": " << bad.body;
  }
  Answer out =
      Http("POST", Url(files + ":rename"), kAlice, R"({"from": "g.txt", "to": "../../x"})");
  EXPECT_EQ(out.status, 400) << out.body;
  EXPECT_TRUE(absl::StrContains(out.body, "to")) << out.body;
  EXPECT_EQ(Http("GET", Url(files + ":stat?path=g.txt"), kAlice).status, 200);
}

// Issue 20 item 17: REST takes the sandbox's workspace size as gRPC does, a small memory
// needs none, and one too large is refused naming the field.
TEST_F(RestTest, TheWorkspaceSizeIsARequestFieldAndASmallMemoryNeedsNone) {
  Answer small =
      Http("POST", Url("/v1/sessions"), kAlice, R"({"sandbox": {"memoryBytes": "134217728"}})");
  ASSERT_EQ(small.status, 200) << small.body;
  Answer sized = Http("POST", Url("/v1/sessions"), kAlice,
                      R"({"sandbox": {"memoryBytes": "134217728", "workspaceBytes": "25165824"}})");
  ASSERT_EQ(sized.status, 200) << sized.body;
  EXPECT_EQ(Parse<v1::Session>(sized).sandbox().workspace_bytes(), 25165824u);
  Answer too_large =
      Http("POST", Url("/v1/sessions"), kAlice,
           R"({"sandbox": {"memoryBytes": "134217728", "workspaceBytes": "134217728"}})");
  EXPECT_EQ(too_large.status, 400) << too_large.body;
  EXPECT_TRUE(absl::StrContains(too_large.body,
                                "sandbox.workspace_bytes: 128 MiB must be below "
                                "sandbox.memory_bytes (128 MiB)"))
      << too_large.body;
}

// Issue 22: the isolation level is the same request field over REST; hostile values are a
// 400 naming it, and the session records the level it got.
TEST_F(RestTest, TheIsolationLevelIsARequestFieldAndBadLevelsAreNamed) {
  Answer plain = Http("POST", Url("/v1/sessions"), kAlice, R"({"sandbox": {}})");
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(Parse<v1::Session>(plain).sandbox().isolation(), "namespaces");
  for (const std::string& bad :
       {std::string(R"("../../etc/passwd")"), std::string(R"("gvisor\u0000")"),
        std::string(R"("VM")"), "\"" + std::string(5000, 'x') + "\""}) {
    Answer a = Http("POST", Url("/v1/sessions"), kAlice,
                    absl::StrCat(R"({"sandbox": {"isolation": )", bad, "}}"));
    EXPECT_EQ(a.status, 400) << bad << ": " << a.body;
    // A NUL never reaches the level check: the JSON parser refuses it first.
    if (!absl::StrContains(bad, "u0000")) {
      EXPECT_TRUE(absl::StrContains(a.body, "sandbox.isolation: unknown level")) << a.body;
    }
  }
}

TEST_F(RestTest, EventsStreamAsServerSentEventsAndResumeFromLastEventId) {
  v1::Run run = StartRun(kAlice);
  // Followed from the start while the run goes on: every event once, in order, to the end.
  Answer live = Http("GET", Url("/v1/runs/" + run.id() + "/events"), kAlice);
  ASSERT_EQ(live.status, 200) << live.body;
  EXPECT_EQ(live.headers["content-type"], "text/event-stream; charset=utf-8");
  EXPECT_EQ(live.headers["x-content-type-options"], "nosniff");
  int comments = 0;
  std::vector<SseEvent> events = ParseSse(live.body, &comments);
  std::vector<v1::Event> grpc_events = FollowToEnd(*stub_, run.id(), kAlice);
  ASSERT_EQ(events.size(), grpc_events.size()) << live.body;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].id, absl::StrCat(i + 1));
    EXPECT_EQ(events[i].type, grpc_events[i].type());
    v1::Event e;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(events[i].data, &e).ok());
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(e, grpc_events[i]))
        << e.DebugString() << " vs " << grpc_events[i].DebugString();
  }
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back().type, "run.finished");

  // Resumed after a middle seq: the rest, once each.
  const size_t mid = events.size() / 2;
  Answer resumed = Http("GET", Url("/v1/runs/" + run.id() + "/events"), kAlice, "",
                        {"Last-Event-ID: " + events[mid - 1].id});
  std::vector<SseEvent> rest = ParseSse(resumed.body, &comments);
  ASSERT_EQ(rest.size(), events.size() - mid) << resumed.body;
  EXPECT_EQ(rest.front().id, events[mid].id);
  EXPECT_EQ(rest.back().type, "run.finished");

  Answer replay = Http(
      "GET", Url("/v1/runs/" + run.id() + "/events?follow=false&after_seq=" + events[mid - 1].id),
      kAlice);
  EXPECT_EQ(ParseSse(replay.body, &comments).size(), events.size() - mid);

  Answer bad =
      Http("GET", Url("/v1/runs/" + run.id() + "/events"), kAlice, "", {"Last-Event-ID: seven"});
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(absl::StrContains(bad.body, "Last-Event-ID")) << bad.body;
}

// An EventSource reconnects with the last id it got whenever a stream ends, also after
// run.finished: that follow, and any from at or past the end, is answered 204 No Content (on
// which an EventSource stops) at once, not with heartbeats until the client gives up.
TEST_F(RestTest, AFollowFromTheEndOfAFinishedRunIsNoContentAtOnce) {
  constexpr long kAtOnce = 10;  // seconds; heartbeats come every 15
  v1::Run run = StartRun(kAlice);
  std::vector<v1::Event> events = FollowToEnd(*stub_, run.id(), kAlice);
  ASSERT_FALSE(events.empty());
  const int64_t last = events.back().seq();
  const std::string url = Url("/v1/runs/" + run.id() + "/events");
  const std::vector<std::pair<std::string, Answer>> ended = {
      {"Last-Event-ID",
       Http("GET", url, kAlice, "", {absl::StrCat("Last-Event-ID: ", last)}, "", kAtOnce)},
      {"after_seq",
       Http("GET", absl::StrCat(url, "?after_seq=", last), kAlice, "", {}, "", kAtOnce)},
      {"past the end",
       Http("GET", url, kAlice, "", {absl::StrCat("Last-Event-ID: ", last + 3)}, "", kAtOnce)},
  };
  for (const auto& [what, answer] : ended) {
    EXPECT_EQ(answer.status, 204) << what << ": " << answer.body;
    EXPECT_EQ(answer.body, "") << what;
  }
  // From before the end: the rest, and the stream ends after run.finished.
  Answer one =
      Http("GET", url, kAlice, "", {absl::StrCat("Last-Event-ID: ", last - 1)}, "", kAtOnce);
  EXPECT_EQ(one.status, 200) << one.body;
  int comments = 0;
  std::vector<SseEvent> rest = ParseSse(one.body, &comments);
  ASSERT_EQ(rest.size(), 1u) << one.body;
  EXPECT_EQ(rest[0].type, "run.finished");
  // A replay (no follow) from the end is an empty stream, as before.
  Answer replay =
      Http("GET", absl::StrCat(url, "?follow=false&after_seq=", last), kAlice, "", {}, "", kAtOnce);
  EXPECT_EQ(replay.status, 200) << replay.body;
  EXPECT_TRUE(ParseSse(replay.body, &comments).empty()) << replay.body;
}

TEST_F(RestTest, ArtifactsDownloadWithTheirTypeAndDigest) {
  v1::Run run = StartRun(kAlice);
  FollowToEnd(*stub_, run.id(), kAlice);
  v1::Run done = Parse<v1::Run>(Http("GET", Url("/v1/runs/" + run.id()), kAlice));
  ASSERT_GT(done.artifacts_size(), 0);
  for (const v1::Artifact& artifact : done.artifacts()) {
    SCOPED_TRACE(artifact.name());
    Answer a = Http("GET", Url("/v1/runs/" + run.id() + "/artifacts/" + artifact.name()), kAlice);
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.body.size(), artifact.size_bytes());
    EXPECT_EQ(Sha256Hex(a.body), artifact.sha256());
    EXPECT_EQ(a.headers["x-sandgate-sha256"], artifact.sha256());
    EXPECT_TRUE(absl::StartsWith(a.headers["digest"], "sha-256=")) << a.headers["digest"];
    EXPECT_EQ(a.headers["content-disposition"],
              absl::StrCat("attachment; filename=\"", artifact.name(), "\""));
    EXPECT_EQ(a.headers["x-content-type-options"], "nosniff");
    EXPECT_EQ(a.headers["content-security-policy"], "sandbox; default-src 'none'");
    EXPECT_EQ(a.headers["content-length"], absl::StrCat(artifact.size_bytes()));
    if (absl::EndsWith(artifact.name(), ".md")) {
      EXPECT_EQ(a.headers["content-type"], "text/markdown; charset=utf-8");
    }
  }
  Answer missing = Http("GET", Url("/v1/runs/" + run.id() + "/artifacts/nope.md"), kAlice);
  EXPECT_EQ(missing.status, 404) << missing.body;
}

TEST_F(RestTest, WrongTokenIs401AndAnotherTenantsRunIs404) {
  v1::Run run = StartRun(kAlice);
  for (const std::string& token : {std::string("wrong-token"), std::string()}) {
    Answer a = Http("GET", Url("/v1/runs/" + run.id()), token);
    EXPECT_EQ(a.status, 401) << a.body;
    nlohmann::json error = nlohmann::json::parse(a.body);
    EXPECT_EQ(error["code"], 16);
    EXPECT_EQ(error["status"], "UNAUTHENTICATED");
    EXPECT_EQ(Http("GET", Url("/v1/runs/" + run.id() + "/events"), token).status, 401);
  }
  for (const std::string& path : {"/v1/runs/" + run.id(), "/v1/runs/" + run.id() + "/events",
                                  "/v1/runs/" + run.id() + "/artifacts/investment_analysis.md"}) {
    Answer a = Http("GET", Url(path), kBob);
    EXPECT_EQ(a.status, 404) << path << ": " << a.body;
  }
  FollowToEnd(*stub_, run.id(), kAlice);
  Answer nowhere = Http("GET", Url("/v2/nothing"), kAlice);
  EXPECT_EQ(nowhere.status, 404);
  EXPECT_EQ(nlohmann::json::parse(nowhere.body)["status"], "NOT_FOUND");
}

// The page counts every tenant's runs and sessions: on the REST port it is an operator's, as
// ListResources is (metrics_listen, a port of its own, serves it to a scraper without one).
TEST_F(RestTest, MetricsOnTheHttpPortNeedAnOperatorsToken) {
  Answer a = Http("GET", Url("/metrics"), kOps);
  EXPECT_EQ(a.status, 200);
  EXPECT_TRUE(absl::StrContains(a.body, "sandgate_runs_active 0")) << a.body;
  EXPECT_EQ(a.headers["x-content-type-options"], "nosniff");

  Answer anonymous = Http("GET", Url("/metrics"), "");
  EXPECT_EQ(anonymous.status, 401) << anonymous.body;
  EXPECT_FALSE(absl::StrContains(anonymous.body, "sandgate_")) << anonymous.body;
  EXPECT_EQ(nlohmann::json::parse(anonymous.body)["status"], "UNAUTHENTICATED");
  Answer tenant = Http("GET", Url("/metrics"), kAlice);
  EXPECT_EQ(tenant.status, 403) << tenant.body;
  EXPECT_TRUE(absl::StrContains(tenant.body, "operator")) << tenant.body;
}

// GET /v1/whoami (REST only, for the dashboard's header): the token's tenant, and whether it
// may build images (rest_images_test.cc holds that to the policy); no token, a wrong one or
// another scheme is 401 with the reason, as on every route.
TEST_F(RestTest, WhoAmINamesTheTokensTenantAndRefusesAMissingOrWrongToken) {
  Answer alice = Http("GET", Url("/v1/whoami"), kAlice);
  ASSERT_EQ(alice.status, 200) << alice.body;
  EXPECT_EQ(alice.headers["content-type"], "application/json; charset=utf-8");
  EXPECT_EQ(nlohmann::json::parse(alice.body),
            (nlohmann::json{{"tenant", "alice"}, {"operator", false}, {"buildImages", false}}));
  Answer ops = Http("GET", Url("/v1/whoami"), kOps);
  EXPECT_EQ(nlohmann::json::parse(ops.body),
            (nlohmann::json{{"tenant", "ops"}, {"operator", true}, {"buildImages", true}}));

  struct Refused {
    std::string token;
    std::vector<std::string> headers;
    std::string why;
  };
  for (const Refused& r : std::vector<Refused>{
           {"", {}, "missing authorization"},
           {"wrong-token", {}, "unknown token"},
           {"", {"Authorization: Basic YWxpY2U6YWxpY2U="}, "Bearer <token>"},
           {"", {"Authorization: Bearer "}, "Bearer <token>"},
       }) {
    Answer a = Http("GET", Url("/v1/whoami"), r.token, "", r.headers);
    SCOPED_TRACE(r.why);
    EXPECT_EQ(a.status, 401) << a.body;
    nlohmann::json error = nlohmann::json::parse(a.body);
    EXPECT_EQ(error["status"], "UNAUTHENTICATED");
    EXPECT_TRUE(absl::StrContains(error["message"].get<std::string>(), r.why)) << a.body;
  }
}

// The REST examples of docs/api.md, run with the real curl as a user would.
TEST_F(RestTest, TheReadmeCurlExamplesWork) {
  const std::string dir = daemon_->dir();
  std::ofstream(dir + "/run.json") << ToJson(SampleRequest());
  auto sh = [&](const std::string& command) {
    std::string full = absl::StrCat("cd ", dir, " && SANDGATE_URL=", base_,
                                    " SANDGATE_TOKEN=", kAlice, " sh -c '", command, "'");
    FILE* f = popen(full.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    EXPECT_EQ(pclose(f), 0) << command << "\n" << out;
    return out;
  };
  // These lines are docs/api.md's (section "REST"), with $SANDGATE_URL and $SANDGATE_TOKEN.
  std::string created =
      sh("curl -sS --fail-with-body -H \"Authorization: Bearer $SANDGATE_TOKEN\" "
         "-H \"Content-Type: application/json\" -d @run.json \"$SANDGATE_URL/v1/runs\"");
  v1::Run run;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(created, &run).ok()) << created;
  std::string events =
      sh(absl::StrCat("curl -sS -N --fail-with-body -H \"Authorization: Bearer $SANDGATE_TOKEN\" "
                      "\"$SANDGATE_URL/v1/runs/",
                      run.id(), "/events\""));
  EXPECT_TRUE(absl::StrContains(events, "event: run.finished")) << events;
  std::string got =
      sh(absl::StrCat("curl -sS --fail-with-body -H \"Authorization: Bearer $SANDGATE_TOKEN\" "
                      "\"$SANDGATE_URL/v1/runs/",
                      run.id(), "\""));
  EXPECT_TRUE(absl::StrContains(got, "\"status\":\"RUN_STATUS_SUCCEEDED\"")) << got;
  sh(
      absl::StrCat("curl -sS --fail-with-body -OJ -H \"Authorization: Bearer $SANDGATE_TOKEN\" "
                   "\"$SANDGATE_URL/v1/runs/",
                   run.id(), "/artifacts/investment_analysis.md\""));
  std::ifstream report(dir + "/investment_analysis.md");
  EXPECT_TRUE(report.good()) << "curl -OJ saved no investment_analysis.md";

  // A kept session: upload, exec, download.
  const std::string csv = SampleCsv();
  std::ofstream(dir + "/q3.csv") << csv;
  std::string created_session =
      sh("curl -sS --fail-with-body -H \"Authorization: Bearer $SANDGATE_TOKEN\" "
         "-d \"{}\" \"$SANDGATE_URL/v1/sessions\"");
  v1::Session session;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(created_session, &session).ok())
      << created_session;
  const std::string at = absl::StrCat("\"$SANDGATE_URL/v1/sessions/", session.id());
  std::string put = sh(absl::StrCat("curl -sS --fail-with-body -H \"Authorization: Bearer ",
                                    "$SANDGATE_TOKEN\" -T q3.csv ", at, "/files/in/q3.csv\""));
  EXPECT_TRUE(absl::StrContains(put, "\"path\":\"in/q3.csv\"")) << put;
  std::string exec =
      sh(absl::StrCat("curl -sS -N --fail-with-body -H \"Authorization: Bearer $SANDGATE_TOKEN\" ",
                      "-d \"{\\\"command\\\": \\\"wc -l in/q3.csv\\\"}\" ", at, ":exec\""));
  nlohmann::json error;
  std::vector<v1::ExecResponse> lines = ExecLines(exec, &error);
  ASSERT_EQ(lines.size(), 2u) << exec;
  const size_t rows = std::count(csv.begin(), csv.end(), '\n');
  EXPECT_EQ(lines[0].output().data(), absl::StrCat(rows, " in/q3.csv\n")) << exec;
  EXPECT_TRUE(lines[1].has_finished()) << exec;
  std::remove((dir + "/q3.csv").c_str());
  sh(absl::StrCat("curl -sS --fail-with-body -OJ -H \"Authorization: Bearer $SANDGATE_TOKEN\" ", at,
                  "/files/in/q3.csv\""));
  std::ifstream back(dir + "/q3.csv");
  std::string text((std::istreambuf_iterator<char>(back)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, csv) << "curl -OJ saved no q3.csv";
}

// The session streams over gRPC, as the REST answers are compared with them.
struct GrpcExec {
  std::vector<v1::ExecResponse> messages;
  grpc::Status status;
};

GrpcExec ExecOverGrpc(v1::Sandgate::Stub& stub, const v1::ExecRequest& req) {
  auto ctx = DaemonHarness::Context(kAlice);
  auto reader = stub.Exec(ctx.get(), req);
  GrpcExec out;
  v1::ExecResponse r;
  while (reader->Read(&r)) out.messages.push_back(r);
  out.status = reader->Finish();
  return out;
}

// What both faces must agree on: the messages, without what differs by run (the command's
// number, its duration).
std::string Comparable(std::vector<v1::ExecResponse> messages) {
  std::string out;
  for (v1::ExecResponse& m : messages) {
    m.mutable_output()->clear_command_id();
    if (m.has_finished()) {
      m.mutable_finished()->clear_command_id();
      m.mutable_finished()->clear_duration();
    }
    if (!m.has_output()) m.clear_output();
    absl::StrAppend(&out, m.ShortDebugString(), "\n");
  }
  return out;
}

// Issue 20 item 2 on REST: its Exec takes the same per-tenant share of the exec threads as
// gRPC's. One thread: alice holds it (gRPC), so her REST exec waits; bob's REST echo does
// not wait for either of hers.
TEST(RestExecFairnessTest, AnotherTenantsRestExecIsAdmittedWhileOneTenantHoldsEveryThread) {
  DaemonHarness daemon(nlohmann::json{{"http_listen", "127.0.0.1:0"},
                                      {"allow_plaintext_tokens", true},
                                      {"max_concurrent_execs", 1},
                                      {"tenants",
                                       {{{"name", "alice"}, {"token_sha256", Sha256::Hex(kAlice)}},
                                        {{"name", "bob"}, {"token_sha256", Sha256::Hex(kBob)}}}},
                                      {"local", {{"uid_base", 340000}, {"uid_count", 16}}}});
  daemon.Start();
  auto stub = daemon.Stub();
  const std::string base = HttpBase(daemon);
  v1::Session alice = Parse<v1::Session>(Http("POST", base + "/v1/sessions", kAlice, "{}"));
  v1::Session bob = Parse<v1::Session>(Http("POST", base + "/v1/sessions", kBob, "{}"));
  ASSERT_FALSE(alice.id().empty());
  ASSERT_FALSE(bob.id().empty());

  auto hold_ctx = DaemonHarness::Context(kAlice);
  v1::ExecRequest hold;
  hold.set_session_id(alice.id());
  hold.set_command("echo started; exec sleep 600");
  auto holding = stub->Exec(hold_ctx.get(), hold);
  v1::ExecResponse first;
  ASSERT_TRUE(holding->Read(&first)) << daemon.Log();
  // Alice's second command, over REST, waits for her first: the one thread is hers.
  std::atomic<bool> alice_rest_done{false};
  Answer alice_rest;
  std::thread alice_thread([&] {
    alice_rest = Http("POST", base + "/v1/sessions/" + alice.id() + ":exec", kAlice,
                      R"({"command": "echo second"})");
    alice_rest_done.store(true);
  });

  Answer echo =
      Http("POST", base + "/v1/sessions/" + bob.id() + ":exec", kBob, R"({"command": "echo hi"})");
  EXPECT_FALSE(alice_rest_done.load()) << "alice's second command ran beside her first";
  ASSERT_EQ(echo.status, 200) << echo.body;
  nlohmann::json error;
  std::vector<v1::ExecResponse> lines = ExecLines(echo.body, &error);
  EXPECT_TRUE(error.is_null()) << echo.body;
  ASSERT_FALSE(lines.empty()) << echo.body;
  EXPECT_EQ(lines.front().output().data(), "hi\n");
  EXPECT_EQ(lines.back().finished().exit_code(), 0) << echo.body;

  hold_ctx->TryCancel();  // alice's first ends; her second runs
  while (holding->Read(&first)) {
  }
  holding->Finish();
  alice_thread.join();
  EXPECT_EQ(alice_rest.status, 200) << alice_rest.body;
  std::vector<v1::ExecResponse> second = ExecLines(alice_rest.body, &error);
  ASSERT_FALSE(second.empty()) << alice_rest.body;
  EXPECT_EQ(second.front().output().data(), "second\n") << alice_rest.body;
}

TEST_F(RestTest, ExecStreamsTheCommandAndItsExitStatusAsGrpcDoes) {
  v1::Session session = Parse<v1::Session>(Http("POST", Url("/v1/sessions"), kAlice, "{}"));
  ASSERT_FALSE(session.id().empty());
  const std::string exec = "/v1/sessions/" + session.id() + ":exec";
  v1::ExecRequest req;
  req.set_session_id(session.id());
  req.set_command("echo hello; echo oops >&2; exit 3");
  Answer rest =
      Http("POST", Url(exec), kAlice, R"({"command": "echo hello; echo oops >&2; exit 3"})");
  ASSERT_EQ(rest.status, 200) << rest.body;
  EXPECT_EQ(rest.headers["content-type"], "application/x-ndjson");
  EXPECT_EQ(rest.headers["transfer-encoding"], "chunked");
  nlohmann::json error;
  std::vector<v1::ExecResponse> lines = ExecLines(rest.body, &error);
  GrpcExec grpc_exec = ExecOverGrpc(*stub_, req);
  ASSERT_TRUE(grpc_exec.status.ok()) << grpc_exec.status.error_message();
  EXPECT_TRUE(error.is_null()) << rest.body;
  EXPECT_EQ(Comparable(lines), Comparable(grpc_exec.messages));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().finished().exit_code(), 3) << rest.body;

  // Refusals before anything ran: the same code and message, as a JSON error.
  req.add_argv("true");  // both argv and command
  GrpcExec both = ExecOverGrpc(*stub_, req);
  ASSERT_FALSE(both.status.ok());
  ExpectSame(Http("POST", Url(exec), kAlice, R"({"command": "true", "argv": ["true"]})"),
             both.status, v1::ExecResponse(), "Exec with argv and command");
  req.clear_argv();
  req.set_session_id("ses_missing");
  GrpcExec missing = ExecOverGrpc(*stub_, req);
  ASSERT_EQ(missing.status.error_code(), grpc::StatusCode::NOT_FOUND);
  ExpectSame(Http("POST", Url("/v1/sessions/ses_missing:exec"), kAlice, R"({"command": "true"})"),
             missing.status, v1::ExecResponse(), "Exec in a missing session");
  req.set_session_id(session.id());
  auto ctx = DaemonHarness::Context(kBob);
  auto reader = stub_->Exec(ctx.get(), req);
  v1::ExecResponse ignored;
  while (reader->Read(&ignored)) {
  }
  grpc::Status bob = reader->Finish();
  ExpectSame(Http("POST", Url(exec), kBob, R"({"command": "true"})"), bob, v1::ExecResponse(),
             "Exec in another tenant's session");
  EXPECT_EQ(Http("POST", Url(exec), "", R"({"command": "true"})").status, 401);
}

// A curl handle that POSTs `body` (kept by the caller until the transfer ends) to an exec
// `url` as alice; the caller frees it and *headers.
CURL* ExecCall(const std::string& url, const std::string& body, curl_slist** headers) {
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  *headers = curl_slist_append(nullptr, "Authorization: Bearer alice-token");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, *headers);
  return curl;
}

size_t AbortOnFirstByte(char*, size_t, size_t, void* got) {
  *static_cast<bool*>(got) = true;
  return 0;  // curl closes the connection
}

TEST_F(RestTest, AClientThatHangsUpCancelsItsExec) {
  v1::Session session = Parse<v1::Session>(Http("POST", Url("/v1/sessions"), kAlice, "{}"));
  ASSERT_FALSE(session.id().empty());
  // The command writes once and then is quiet: only the hang-up itself can stop it.
  const std::string body = R"({"command": "echo started; exec sleep 60"})";
  curl_slist* list = nullptr;
  CURL* curl = ExecCall(Url("/v1/sessions/" + session.id() + ":exec"), body, &list);
  bool got = false;
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AbortOnFirstByte);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &got);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  EXPECT_EQ(curl_easy_perform(curl), CURLE_WRITE_ERROR);
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  ASSERT_TRUE(got);

  // The command is cancelled: the session has nothing in flight long before the sleep ends.
  v1::GetSessionRequest get;
  get.set_session_id(session.id());
  EXPECT_TRUE(Eventually("the command to end once its caller hung up", [&] {
    v1::Session now;
    return stub_->GetSession(DaemonHarness::Context(kAlice).get(), get, &now).ok() &&
           now.in_flight() == 0;
  }));
}

// Whether a process runs whose command line is `argv` (its arguments NUL-separated).
bool ProcessRuns(const std::vector<std::string>& argv) {
  const std::string nul(1, '\0');
  const std::string want = absl::StrCat(absl::StrJoin(argv, nul), nul);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline == want) return true;
  }
  return false;
}

// Aborts the transfer (curl closes the connection) once *hang_up is set.
int HangUpWhenTold(void* hang_up, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<std::atomic<bool>*>(hang_up)->load() ? 1 : 0;
}

// A client that hangs up on its exec, before the command wrote anything or after, leaves
// nothing behind: the command's process ends, and the drain that follows has no answer to
// wait for. (An answer never begun used to hold the HTTP server's stop until the daemon's
// drain_timeout, 35 s, and exit 1.)
TEST_F(RestTest, AnExecWhoseClientHungUpLeavesNothingForTheDrain) {
  for (const std::string quiet_first : {"", "echo started; "}) {
    SCOPED_TRACE(quiet_first.empty() ? "quiet command" : "command that wrote first");
    v1::Session session = Parse<v1::Session>(Http("POST", Url("/v1/sessions"), kAlice, "{}"));
    ASSERT_FALSE(session.id().empty());
    const std::string seconds = quiet_first.empty() ? "3171" : "3172";  // names the process
    const std::string body =
        absl::StrCat(R"({"command": ")", quiet_first, "exec sleep ", seconds, R"("})");
    std::atomic<bool> hang_up{false};
    Answer answer;
    std::thread client([&] {
      curl_slist* list = nullptr;
      CURL* curl = ExecCall(Url("/v1/sessions/" + session.id() + ":exec"), body, &list);
      CollectInto(curl, &answer);
      curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &HangUpWhenTold);
      curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &hang_up);
      curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
      EXPECT_EQ(curl_easy_perform(curl), CURLE_ABORTED_BY_CALLBACK);
      curl_slist_free_all(list);
      curl_easy_cleanup(curl);
    });
    EXPECT_TRUE(Eventually(
        "the command to run",
        [&] {
          return ProcessRuns({"sleep", seconds});
        },
        absl::Seconds(30)));
    hang_up = true;
    client.join();
    EXPECT_TRUE(Eventually("the command to end once its caller hung up", [&] {
      return !ProcessRuns({"sleep", seconds});
    }));
  }
  const absl::Time signalled = absl::Now();
  const int status = daemon_->Stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << daemon_->Log();
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(15)) << "the drain's limit is 35 s";
  EXPECT_FALSE(absl::StrContains(daemon_->Log(), "daemon.drain_timeout")) << daemon_->Log();
}

TEST_F(RestTest, FilesUploadAndDownloadAsGrpcDoes) {
  v1::Session session = Parse<v1::Session>(Http("POST", Url("/v1/sessions"), kAlice, "{}"));
  ASSERT_FALSE(session.id().empty());
  const std::string files = "/v1/sessions/" + session.id() + "/files/";
  const std::string data = "year,revenue\n2023,100\n2024,120\n<script>alert(1)</script>\n";

  Answer put = Http("PUT", Url(files + "in/data.csv?mode=416"), kAlice, data);
  ASSERT_EQ(put.status, 200) << put.body;
  v1::FileInfo rest_info = Parse<v1::FileInfo>(put);
  v1::UploadFileRequest::Header header;
  header.set_session_id(session.id());
  header.set_path("in/copy.csv");
  header.set_mode(416);
  v1::FileInfo grpc_info;
  ASSERT_TRUE(UploadOverGrpc(*stub_, header, data, &grpc_info, kAlice).ok());
  EXPECT_EQ(rest_info.path(), "in/data.csv");
  grpc_info.set_path(rest_info.path());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(rest_info, grpc_info))
      << rest_info.DebugString() << " vs " << grpc_info.DebugString();

  Answer got = Http("GET", Url(files + "in/data.csv"), kAlice);
  ASSERT_EQ(got.status, 200) << got.body;
  std::string grpc_data;
  ASSERT_TRUE(DownloadOverGrpc(*stub_, session.id(), "in/data.csv", &grpc_data, kAlice).ok());
  EXPECT_EQ(got.body, grpc_data);
  EXPECT_EQ(got.body, data);
  EXPECT_EQ(got.headers["content-length"], absl::StrCat(data.size()));
  EXPECT_EQ(got.headers["content-type"], "text/csv; charset=utf-8");
  EXPECT_EQ(got.headers["content-disposition"], "attachment; filename=\"data.csv\"");
  EXPECT_EQ(got.headers["content-security-policy"], "sandbox; default-src 'none'");
  EXPECT_EQ(got.headers["x-content-type-options"], "nosniff");

  // Refusals: the same code and message as over gRPC, and nothing written.
  std::string none;
  grpc::Status absent = DownloadOverGrpc(*stub_, session.id(), "nope.txt", &none, kAlice);
  ASSERT_FALSE(absent.ok());
  ExpectSame(Http("GET", Url(files + "nope.txt"), kAlice), absent, v1::FileChunk(),
             "DownloadFile of a missing file");
  const std::string wrong(64, 'a');
  header.set_path("bad.csv");
  header.set_sha256(wrong);
  grpc::Status mismatch = UploadOverGrpc(*stub_, header, data, &grpc_info, kAlice);
  ASSERT_EQ(mismatch.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  ExpectSame(Http("PUT", Url(files + "bad.csv?sha256=" + wrong), kAlice, data), mismatch,
             v1::FileInfo(), "UploadFile with a wrong sha256");
  EXPECT_EQ(Http("GET", Url(files + "bad.csv"), kAlice).status, 404);
  EXPECT_EQ(Http("GET", Url(files + "in/data.csv"), kBob).status, 404);
  EXPECT_EQ(Http("PUT", Url(files + "x.txt"), "", data).status, 401);
}

// A PUT of `size` bytes, chunked (no Content-Length) or not.
Answer Put(const std::string& url, const std::string& data, bool chunked) {
  struct Source {
    const std::string* data;
    size_t at = 0;
  } source{&data};
  Answer a;
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(
      curl, CURLOPT_READFUNCTION, +[](char* buf, size_t size, size_t n, void* p) -> size_t {
        auto* s = static_cast<Source*>(p);
        size_t take = std::min(size * n, s->data->size() - s->at);
        std::memcpy(buf, s->data->data() + s->at, take);
        s->at += take;
        return take;
      });
  curl_easy_setopt(curl, CURLOPT_READDATA, &source);
  curl_slist* list = curl_slist_append(nullptr, "Authorization: Bearer alice-token");
  if (chunked) {
    list = curl_slist_append(list, "Transfer-Encoding: chunked");
  } else {
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(data.size()));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  CollectInto(curl, &a);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
  curl_easy_perform(curl);  // a refusal before the whole body was sent may cut the send
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &a.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return a;
}

TEST_F(RestTest, AnUploadOverTheLimitIsRefusedWithAJsonErrorAndWritesNothing) {
  v1::Session session = Parse<v1::Session>(Http("POST", Url("/v1/sessions"), kAlice, "{}"));
  ASSERT_FALSE(session.id().empty());
  const std::string big(kMaxInput + 1, 'x');
  const std::string files = "/v1/sessions/" + session.id() + "/files/";

  // With its length: refused on the headers, as gRPC refuses a header.size_bytes over it.
  v1::UploadFileRequest::Header header;
  header.set_session_id(session.id());
  header.set_path("big.bin");
  header.set_size_bytes(big.size());
  v1::FileInfo info;
  grpc::Status sized = UploadOverGrpc(*stub_, header, big, &info, kAlice);
  ASSERT_FALSE(sized.ok());
  Answer a = Put(Url(files + "big.bin"), big, /*chunked=*/false);
  ExpectSame(a, sized, v1::FileInfo(), "a sized upload over the limit");
  EXPECT_EQ(a.status, 400) << a.body;

  // Chunked: refused once the bytes pass the limit, as a gRPC upload without a size.
  header.clear_size_bytes();
  grpc::Status unsized = UploadOverGrpc(*stub_, header, big, &info, kAlice);
  ASSERT_EQ(unsized.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  a = Put(Url(files + "big.bin"), big, /*chunked=*/true);
  ExpectSame(a, unsized, v1::FileInfo(), "a chunked upload over the limit");
  EXPECT_EQ(a.status, 429) << a.body;

  v1::ListFilesResponse listed = Parse<v1::ListFilesResponse>(
      Http("GET", Url("/v1/sessions/" + session.id() + "/files"), kAlice));
  for (const v1::FileInfo& f : listed.files()) EXPECT_NE(f.path(), "big.bin");

  // At the limit it is taken, in either form.
  const std::string full(kMaxInput, 'y');
  Answer sized_ok = Put(Url(files + "full.bin"), full, false);
  EXPECT_EQ(sized_ok.status, 200) << sized_ok.body;
  Answer chunked_ok = Put(Url(files + "full2.bin"), full, true);
  EXPECT_EQ(chunked_ok.status, 200) << chunked_ok.body;
  EXPECT_EQ(Parse<v1::FileInfo>(chunked_ok).size_bytes(), kMaxInput);
}

TEST_F(RestTest, DrainAndPurgeAreForOperatorsAsOverGrpc) {
  v1::PurgeRequest purge;
  purge.mutable_older_than()->set_seconds(86400);
  v1::PurgeResponse grpc_purge;
  grpc::Status st = stub_->Purge(DaemonHarness::Context(kAlice).get(), purge, &grpc_purge);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  const std::string body = R"({"olderThan": "86400s"})";
  ExpectSame(Http("POST", Url("/v1/runs:purge"), kAlice, body), st, grpc_purge,
             "Purge by a tenant");
  st = stub_->Purge(DaemonHarness::Context(kOps).get(), purge, &grpc_purge);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ExpectSame(Http("POST", Url("/v1/runs:purge"), kOps, body), st, grpc_purge,
             "Purge by an operator");

  v1::DrainRequest drain;
  v1::DrainResponse grpc_drain;
  st = stub_->Drain(DaemonHarness::Context(kAlice).get(), drain, &grpc_drain);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ExpectSame(Http("POST", Url("/v1/daemon:drain"), kAlice), st, grpc_drain, "Drain by a tenant");
  // An operator's Drain is the gRPC one's path (daemon_test drains that way); its exit takes
  // seconds that this suite does not spend again.
}

// Issue 20: one request with a byte that is not UTF-8 (decoded from the path or the query,
// or raw in a header) aborted the daemon, every tenant's runs and sessions with it. Each is a
// 400 naming the field, and the daemon goes on.
TEST_F(RestTest, InvalidUtf8AnywhereInARequestIsA400NamingTheField) {
  Answer created = Http("POST", Url("/v1/sessions"), kAlice, "{}");
  v1::Session session = Parse<v1::Session>(created);
  ASSERT_FALSE(session.id().empty()) << created.body;
  const std::string s = "/v1/sessions/" + session.id();
  struct Case {
    std::string path;
    std::vector<std::string> headers;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"/v1/runs/%ff", {}, "run_id"},
      {"/v1/runs?page_token=%ff", {}, "page_token"},
      {"/v1/runs?%ff=1", {}, "query parameter name"},
      {s + "/files?dir=%80", {}, "dir"},
      {s + "/files/%ff%fe", {}, "path"},
      {"/v1/runs/run_x/artifacts/%c0%af.md", {}, "name"},
      {"/v2/%ff", {}, "path"},
      {"/v1/runs", {"X-Trace: caf\xe9"}, "header X-Trace"},
      {"/v1/runs/run_x/events", {"Last-Event-ID: \xff"}, "header Last-Event-ID"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    Answer a = Http("GET", Url(c.path), kAlice, "", c.headers);
    EXPECT_EQ(a.status, 400) << a.body;
    nlohmann::json error = nlohmann::json::parse(a.body, nullptr, false);
    ASSERT_TRUE(error.is_object()) << a.body;
    EXPECT_EQ(error["status"], "INVALID_ARGUMENT");
    EXPECT_TRUE(
        absl::StartsWith(error["message"].get<std::string>(), c.field + ": not valid UTF-8"))
        << a.body;
  }
  // The daemon is still there, with the session.
  v1::GetSessionRequest get;
  get.set_session_id(session.id());
  v1::Session now;
  grpc::Status st = stub_->GetSession(DaemonHarness::Context(kAlice).get(), get, &now);
  EXPECT_TRUE(st.ok()) << st.error_message() << "\n" << daemon_->Log();
  EXPECT_EQ(now.status(), v1::SESSION_STATUS_ACTIVE);
}

// Issue 20: "%00" in a path ended the decoded C string: files/x%00.txt served x, and a PUT of
// up%00load wrote "up". Refused as gRPC refuses a NUL in the path (INVALID_ARGUMENT, naming
// it), and nothing is read or written.
TEST_F(RestTest, ANulInAPathIsRefusedAsGrpcRefusesIt) {
  v1::Session session = Parse<v1::Session>(Http("POST", Url("/v1/sessions"), kAlice, "{}"));
  ASSERT_FALSE(session.id().empty());
  const std::string files = "/v1/sessions/" + session.id() + "/files/";
  ASSERT_EQ(Http("PUT", Url(files + "x"), kAlice, "the x file").status, 200);

  std::string data;
  grpc::Status grpc_get =
      DownloadOverGrpc(*stub_, session.id(), std::string("x\0.txt", 6), &data, kAlice);
  ASSERT_EQ(grpc_get.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::UploadFileRequest::Header header;
  header.set_session_id(session.id());
  header.set_path(std::string("up\0load", 7));
  v1::FileInfo info;
  grpc::Status grpc_put = UploadOverGrpc(*stub_, header, "abc", &info, kAlice);
  ASSERT_EQ(grpc_put.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", files + "x%00.txt"}, {"PUT", files + "up%00load"}, {"GET", files + "%00"}}) {
    SCOPED_TRACE(method + " " + path);
    Answer a = Http(method, Url(path), kAlice, method == "PUT" ? "abc" : "");
    EXPECT_EQ(a.status, 400) << a.body;
    EXPECT_NE(a.body, "the x file");
    nlohmann::json error = nlohmann::json::parse(a.body, nullptr, false);
    ASSERT_TRUE(error.is_object()) << a.body;
    EXPECT_EQ(error["code"], static_cast<int>(grpc_get.error_code()));
    EXPECT_EQ(error["message"], "path: contains a NUL byte");
  }
  Answer other = Http("GET", Url("/v1/runs/run%00x"), kAlice);
  EXPECT_EQ(other.status, 400) << other.body;
  EXPECT_TRUE(absl::StrContains(other.body, "run_id: contains a NUL byte")) << other.body;
  Answer query = Http("GET", Url("/v1/runs?page_token=a%00b"), kAlice);
  EXPECT_EQ(query.status, 400) << query.body;
  EXPECT_TRUE(absl::StrContains(query.body, "page_token: contains a NUL byte")) << query.body;

  v1::ListFilesResponse listed =
      Parse<v1::ListFilesResponse>(Http("GET", Url(files.substr(0, files.size() - 1)), kAlice));
  for (const v1::FileInfo& f : listed.files()) EXPECT_NE(f.path(), "up");
}

// Issue 20 (RFC 9112 section 6.3): with two Content-Length headers the first was used and a
// second request hidden in the body was served; with Content-Length and Transfer-Encoding the
// connection stayed open. Each is refused with 400 and the connection closed, so nothing that
// follows is read as a request.
TEST_F(RestTest, AmbiguousFramingIsRefusedAndTheConnectionClosed) {
  const std::string auth = absl::StrCat("Authorization: Bearer ", kAlice, "\r\n");
  const std::string smuggled =
      absl::StrCat("GET /v1/sessions HTTP/1.1\r\nHost: x\r\n", auth, "\r\n");
  const std::string two_lengths = absl::StrCat(
      "POST /v1/sessions HTTP/1.1\r\nHost: x\r\n", auth,
      "Content-Length: 2\r\nContent-Length: ", 2 + smuggled.size(), "\r\n\r\n{}", smuggled);
  const std::string length_and_chunked = absl::StrCat(
      "POST /v1/sessions HTTP/1.1\r\nHost: x\r\n", auth,
      "Content-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", smuggled);
  for (const std::string& request : {two_lengths, length_and_chunked}) {
    SCOPED_TRACE(request);
    bool closed = false;
    std::string answer = HttpRaw(Port(), request, absl::Seconds(5), &closed);
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 400")) << answer;
    EXPECT_TRUE(absl::StrContains(answer, "Content-Length")) << answer;
    EXPECT_TRUE(absl::StrContains(answer, "ambiguous")) << answer;
    size_t answers = 0;
    for (size_t at = answer.find("HTTP/1.1 "); at != std::string::npos;
         at = answer.find("HTTP/1.1 ", at + 1)) {
      ++answers;
    }
    EXPECT_EQ(answers, 1u) << "a second request was served:\n" << answer;
    EXPECT_TRUE(closed) << "the connection stayed open";
  }
  // Nothing was made by either.
  v1::ListSessionsResponse listed =
      Parse<v1::ListSessionsResponse>(Http("GET", Url("/v1/sessions"), kAlice));
  EXPECT_EQ(listed.sessions_size(), 0) << listed.DebugString();
  // One Content-Length is fine, on the same kind of connection.
  bool closed = false;
  std::string one =
      HttpRaw(Port(),
              absl::StrCat("POST /v1/sessions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", auth,
                           "Content-Length: 2\r\n\r\n{}"),
              absl::Seconds(5), &closed);
  EXPECT_TRUE(absl::StartsWith(one, "HTTP/1.1 200")) << one;
}

// With `tls`, the HTTP port is HTTPS with the gRPC port's certificate, and tokens need no
// allow_plaintext_tokens; plain HTTP gets no answer from it.
class RestTlsTest : public TlsFixture {};

TEST_F(RestTlsTest, HttpsWithTheTlsFilesCarriesTokens) {
  DaemonHarness daemon(
      nlohmann::json{{"http_listen", "127.0.0.1:0"},
                     {"tls", {{"cert_file", certs_.server.cert}, {"key_file", certs_.server.key}}},
                     {"tenants", {{{"name", "alice"}, {"token_sha256", Sha256::Hex(kAlice)}}}},
                     {"local", {{"uid_base", 340000}, {"uid_count", 16}}}});
  daemon.Start();
  const std::string base = HttpBase(daemon);
  ASSERT_TRUE(absl::StartsWith(base, "https://127.0.0.1:")) << daemon.Log();
  Answer a = Http("GET", base + "/v1/runs", kAlice, "", {}, certs_.ca);
  EXPECT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.headers["x-content-type-options"], "nosniff");
  CURL* curl = curl_easy_init();
  std::string plain = "http://" + base.substr(8) + "/v1/runs";
  curl_easy_setopt(curl, CURLOPT_URL, plain.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  std::string body;
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  EXPECT_TRUE(rc != CURLE_OK || status != 200) << "plain HTTP answered on the HTTPS port: " << body;
}

std::string WithoutSpace(std::string s) {
  s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return std::isspace(c); }), s.end());
  return s;
}

// The certificate an HTTPS port serves to a new connection (PEM, whitespace removed), or "".
std::string ServedCertificate(const std::string& url, const std::string& ca) {
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CAINFO, ca.c_str());
  curl_easy_setopt(curl, CURLOPT_CERTINFO, 1L);
  curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  std::string pem;
  if (curl_easy_perform(curl) == CURLE_OK) {
    curl_certinfo* info = nullptr;
    curl_easy_getinfo(curl, CURLINFO_CERTINFO, &info);
    for (curl_slist* e = info && info->num_of_certs > 0 ? info->certinfo[0] : nullptr; e;
         e = e->next) {
      absl::string_view line(e->data);
      if (absl::ConsumePrefix(&line, "Cert:")) pem = std::string(line);
    }
  }
  curl_easy_cleanup(curl);
  return WithoutSpace(pem);
}

std::string Pem(const std::string& file) { return WithoutSpace(ReadFileOrEmpty(file)); }

TEST_F(RestTlsTest, ARotatedCertificateIsServedWithoutARestart) {
  const std::string live_cert = tmp_.path() + "/live.pem";
  const std::string live_key = tmp_.path() + "/live.key";
  auto install = [&](const TestCertificates::Pair& pair) {
    InstallPair(pair, live_cert, live_key);
  };
  install(certs_.server);
  DaemonHarness daemon(nlohmann::json{
      {"http_listen", "127.0.0.1:0"},
      {"tls", {{"cert_file", live_cert}, {"key_file", live_key}, {"reload_interval_seconds", 1}}},
      {"tenants", {{{"name", "alice"}, {"token_sha256", Sha256::Hex(kAlice)}}}},
      {"local", {{"uid_base", 340000}, {"uid_count", 16}}}});
  daemon.Start();
  const std::string url = HttpBase(daemon) + "/metrics";
  ASSERT_EQ(ServedCertificate(url, certs_.ca), Pem(certs_.server.cert)) << daemon.Log();

  install(certs_.server2);
  std::string served;
  EXPECT_TRUE(Eventually("the renewed certificate to be served",
                         [&] {
                           served = ServedCertificate(url, certs_.ca);
                           return served == Pem(certs_.server2.cert);
                         }))
      << "still served: " << served;

  // A replacement that is not a certificate: refused, logged, the last good pair still served.
  std::ofstream(live_cert + ".new") << "-----BEGIN CERTIFICATE-----\nhalf written";
  std::filesystem::rename(live_cert + ".new", live_cert);
  EXPECT_TRUE(Eventually("the HTTP port's tls.reload_refused in the log", [&] {
    ServedCertificate(url, certs_.ca);  // the re-read comes with a handshake
    return absl::StrContains(daemon.Log(), "\"listener\":\"http_listen\"");
  })) << daemon.Log();
  EXPECT_EQ(ServedCertificate(url, certs_.ca), Pem(certs_.server2.cert));
}

// Two replicas on one PostgreSQL database with mutual TLS between them: the session streams
// asked of B's REST port act on the sandbox A owns, relayed as gRPC's are.
class RestReplicaTest : public TlsFixture {};

TEST_F(RestReplicaTest, SessionStreamsThroughBsRestPortActOnTheSandboxOnA) {
  absl::StatusOr<std::string> dsn = PostgresServer::Shared().CreateDatabase();
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  auto config = [&](const std::string& id, uint32_t uid_base) {
    nlohmann::json c = TlsReplicaConfig(
        *dsn, id, uid_base, certs_, {{{"name", "alice"}, {"token_sha256", Sha256::Hex(kAlice)}}});
    c["http_listen"] = "127.0.0.1:0";
    return c;
  };
  TlsReplica a(tmp_.path() + "/a", config("replica-a", 340000), certs_);
  TlsReplica b(tmp_.path() + "/b", config("replica-b", 340100), certs_);
  ASSERT_TRUE(a.Start(kAlice)) << a.Log();
  ASSERT_TRUE(b.Start(kAlice)) << b.Log();
  const std::string base = HttpBase(b.Log());
  ASSERT_TRUE(absl::StartsWith(base, "https://")) << b.Log();
  v1::Session s;
  ASSERT_TRUE(a.Stub()->CreateSession(DaemonHarness::Context(kAlice).get(), {}, &s).ok());
  ASSERT_EQ(s.replica(), "replica-a");

  v1::ExecRequest req;
  req.set_session_id(s.id());
  req.set_command("echo hello; echo oops >&2; exit 3");
  Answer rest = Http("POST", base + "/v1/sessions/" + s.id() + ":exec", kAlice,
                     R"({"command": "echo hello; echo oops >&2; exit 3"})", {}, certs_.ca);
  ASSERT_EQ(rest.status, 200) << rest.body << b.Log();
  nlohmann::json error;
  std::vector<v1::ExecResponse> lines = ExecLines(rest.body, &error);
  EXPECT_TRUE(error.is_null()) << rest.body;
  GrpcExec on_a = ExecOverGrpc(*a.Stub(), req);
  EXPECT_EQ(Comparable(lines), Comparable(on_a.messages));

  v1::UploadFileRequest::Header header;
  header.set_session_id(s.id());
  header.set_path("made-on-a.txt");
  v1::FileInfo info;
  const std::string data(300 << 10, 'a');  // more than one chunk
  ASSERT_TRUE(UploadOverGrpc(*a.Stub(), header, data, &info, kAlice).ok());
  Answer got = Http("GET", base + "/v1/sessions/" + s.id() + "/files/made-on-a.txt", kAlice, "", {},
                    certs_.ca);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body, data);
  EXPECT_EQ(got.headers["content-length"], absl::StrCat(data.size()));
  Answer missing =
      Http("GET", base + "/v1/sessions/" + s.id() + "/files/nope.txt", kAlice, "", {}, certs_.ca);
  EXPECT_EQ(missing.status, 404) << missing.body;

  // An upload through B lands in A's workspace (sent on in more than one message).
  const std::string sent(600 << 10, 'b');
  Answer put = Http("PUT", base + "/v1/sessions/" + s.id() + "/files/via-b.txt", kAlice, sent, {},
                    certs_.ca);
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Parse<v1::FileInfo>(put).sha256(), Sha256::Hex(sent));
  std::string landed;
  ASSERT_TRUE(DownloadOverGrpc(*a.Stub(), s.id(), "via-b.txt", &landed, kAlice).ok());
  EXPECT_EQ(landed, sent);

  // The unary calls on the session, too.
  const std::string path = base + "/v1/sessions/" + s.id();
  v1::ListFilesRequest files;
  files.set_session_id(s.id());
  v1::ListFilesResponse on_a_files;
  grpc::Status st = a.Stub()->ListFiles(DaemonHarness::Context(kAlice).get(), files, &on_a_files);
  ExpectSame(Http("GET", path + "/files", kAlice, "", {}, certs_.ca), st, on_a_files,
             "ListFiles through B");
  Answer kept = Http("POST", path + ":keepAlive", kAlice, "", {}, certs_.ca);
  EXPECT_EQ(kept.status, 200) << kept.body;
  Answer closed = Http("POST", path + ":close", kAlice, "{}", {}, certs_.ca);
  ASSERT_EQ(closed.status, 200) << closed.body;
  EXPECT_EQ(Parse<v1::Session>(closed).status(), v1::SESSION_STATUS_CLOSED) << closed.body;
}

}  // namespace
}  // namespace sandgate::testing
