#include "upstream/openai_client.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/fakes/fake_credentials.h"
#include "tests/fakes/fake_http_client.h"
#include "tests/upstream/loopback_http_server.h"
#include "upstream/curl_http_client.h"
#include "upstream/retry.h"

namespace sandgate::upstream {
namespace {

using ::nlohmann::json;
using ::sandgate::testing::FakeCredentials;
using ::sandgate::testing::FakeHttpClient;
using ::sandgate::testing::RecordedRequest;
using ::sandgate::testing::ScriptedReply;
using ::sandgate::upstream::testing::LoopbackHttpServer;
using ::sandgate::upstream::testing::ReceivedRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kKey[] = "sk-test-THE-SECRET-KEY-0123456789";
constexpr char kBase[] = "https://upstream.example/v1";

class OpenAiClientTest : public ::testing::Test {
 protected:
  OpenAiClientTest() : creds_(kKey), client_(&http_, &creds_, kBase) {}

  RecordedRequest OnlyRequest() {
    std::vector<RecordedRequest> reqs = http_.requests();
    EXPECT_EQ(reqs.size(), 1u);
    return reqs.empty() ? RecordedRequest{} : reqs[0];
  }
  static json Body(const RecordedRequest& r) { return json::parse(r.body); }

  FakeHttpClient http_;
  FakeCredentials creds_;
  OpenAiClient client_;
};

void ExpectAuthorized(const RecordedRequest& r) {
  EXPECT_EQ(r.headers.Get("authorization"), std::string("Bearer ") + kKey);
}

// --- Files ---

TEST_F(OpenAiClientTest, UploadFileSendsMultipartAndParsesTheFile) {
  http_.Push(ScriptedReply::Json(200, {{"id", "file-abc"},
                                       {"object", "file"},
                                       {"bytes", 11},
                                       {"filename", "input.csv"},
                                       {"purpose", "user_data"}}));
  absl::StatusOr<File> f = client_.UploadFile("input.csv", "a,b\n1,2\n3,4");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->id, "file-abc");
  EXPECT_EQ(f->bytes, 11);
  EXPECT_EQ(f->filename, "input.csv");
  const RecordedRequest r = OnlyRequest();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, std::string(kBase) + "/files");
  ExpectAuthorized(r);
  EXPECT_EQ(r.headers.Find("content-type"), nullptr);  // the transport sets the boundary
  ASSERT_EQ(r.multipart.size(), 2u);
  EXPECT_EQ(r.multipart[0].name, "purpose");
  EXPECT_EQ(r.multipart[0].data, "user_data");
  EXPECT_EQ(r.multipart[0].filename, "");
  EXPECT_EQ(r.multipart[1].name, "file");
  EXPECT_EQ(r.multipart[1].filename, "input.csv");
  EXPECT_EQ(r.multipart[1].data, "a,b\n1,2\n3,4");
}

TEST_F(OpenAiClientTest, DeleteFile) {
  http_.Push(ScriptedReply::Json(200, {{"id", "file-abc"}, {"deleted", true}}));
  ASSERT_TRUE(client_.DeleteFile("file-abc").ok());
  const RecordedRequest r = OnlyRequest();
  EXPECT_EQ(r.method, "DELETE");
  EXPECT_EQ(r.url, std::string(kBase) + "/files/file-abc");
  ExpectAuthorized(r);
}

// --- Containers ---

TEST_F(OpenAiClientTest, CreateContainerSendsTheSpecAsJson) {
  http_.Push(
      ScriptedReply::Json(200, {{"id", "cntr_1"},
                                {"object", "container"},
                                {"name", "run-42"},
                                {"created_at", 1760000000},
                                {"status", "running"},
                                {"last_active_at", 1760000005},
                                {"expires_after", {{"anchor", "last_active_at"}, {"minutes", 30}}},
                                {"memory_limit", "4g"}}));
  ContainerSpec spec;
  spec.name = "run-42";
  spec.file_ids = {"file-1", "file-2"};
  spec.memory_limit = "4g";
  spec.expires_after_minutes = 30;
  NetworkPolicy policy;
  policy.type = NetworkPolicy::Type::kAllowlist;
  policy.allowed_domains = {"pypi.org"};
  policy.domain_secrets = {{"pypi.org", "TOKEN", "s3cret"}};
  spec.network_policy = policy;
  absl::StatusOr<Container> c = client_.CreateContainer(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->id, "cntr_1");
  EXPECT_EQ(c->status, "running");
  EXPECT_EQ(c->last_active_at, 1760000005);
  EXPECT_EQ(c->expires_after_minutes, 30);
  EXPECT_EQ(c->memory_limit, "4g");
  const RecordedRequest r = OnlyRequest();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, std::string(kBase) + "/containers");
  EXPECT_EQ(r.headers.Get("content-type"), "application/json");
  ExpectAuthorized(r);
  EXPECT_EQ(Body(r), json::parse(R"({
    "name": "run-42", "file_ids": ["file-1", "file-2"], "memory_limit": "4g",
    "expires_after": {"anchor": "last_active_at", "minutes": 30},
    "network_policy": {"type": "allowlist", "allowed_domains": ["pypi.org"],
                       "domain_secrets": [{"domain": "pypi.org", "name": "TOKEN", "value": "s3cret"}]}
  })"));
}

TEST_F(OpenAiClientTest, CreateContainerMinimalAndDisabledNetwork) {
  http_.Push(ScriptedReply::Json(200, {{"id", "cntr_2"}, {"status", "running"}}));
  ContainerSpec spec;
  spec.name = "bare";
  spec.network_policy = NetworkPolicy{};
  ASSERT_TRUE(client_.CreateContainer(spec).ok());
  EXPECT_EQ(Body(OnlyRequest()),
            json::parse(R"({"name":"bare","network_policy":{"type":"disabled"}})"));
}

TEST_F(OpenAiClientTest, CreateContainerRefusesBadSpecsWithoutCallingUpstream) {
  EXPECT_EQ(client_.CreateContainer(ContainerSpec{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ContainerSpec spec;
  spec.name = "x";
  spec.network_policy = NetworkPolicy{NetworkPolicy::Type::kAllowlist, {}, {}};
  EXPECT_EQ(client_.CreateContainer(spec).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(http_.requests().empty());
}

TEST_F(OpenAiClientTest, RetrieveAndDeleteContainerEscapeTheId) {
  http_.Push(ScriptedReply::Json(200, {{"id", "cntr_1"}, {"status", "expired"}}));
  http_.Push(ScriptedReply::Status(200));  // the SDK accepts an empty body
  absl::StatusOr<Container> c = client_.RetrieveContainer("cntr_1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status, "expired");
  ASSERT_TRUE(client_.DeleteContainer("../files?x=1").ok());
  std::vector<RecordedRequest> reqs = http_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].url, std::string(kBase) + "/containers/cntr_1");
  EXPECT_EQ(reqs[1].method, "DELETE");
  EXPECT_EQ(reqs[1].url, std::string(kBase) + "/containers/..%2Ffiles%3Fx%3D1");
}

TEST_F(OpenAiClientTest, ListContainersPassesTheCursor) {
  http_.Push(ScriptedReply::Json(200, json::parse(R"({"object":"list","data":[
      {"id":"cntr_a","status":"running"},{"id":"cntr_b","status":"running"}],
      "first_id":"cntr_a","last_id":"cntr_b","has_more":true})")));
  ListParams params;
  params.after = "cntr_0";
  params.limit = 2;
  params.order = "asc";
  absl::StatusOr<ContainerPage> page = client_.ListContainers(params);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->data.size(), 2u);
  EXPECT_EQ(page->data[1].id, "cntr_b");
  EXPECT_TRUE(page->has_more);
  EXPECT_EQ(page->last_id, "cntr_b");
  EXPECT_EQ(OnlyRequest().url, std::string(kBase) + "/containers?after=cntr_0&limit=2&order=asc");
}

// --- Container files ---

TEST_F(OpenAiClientTest, UploadContainerFileSendsOneFilePart) {
  http_.Push(ScriptedReply::Json(200, json::parse(R"({"id":"cfile_1","object":"container.file",
      "created_at":1,"bytes":3,"container_id":"cntr_1","path":"/mnt/data/x-in.csv","source":"user"})")));
  absl::StatusOr<ContainerFile> f = client_.UploadContainerFile("cntr_1", "in.csv", "a,b");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->id, "cfile_1");
  EXPECT_EQ(f->path, "/mnt/data/x-in.csv");
  EXPECT_EQ(f->bytes, 3);
  EXPECT_EQ(f->source, "user");
  const RecordedRequest r = OnlyRequest();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, std::string(kBase) + "/containers/cntr_1/files");
  ASSERT_EQ(r.multipart.size(), 1u);
  EXPECT_EQ(r.multipart[0].name, "file");
  EXPECT_EQ(r.multipart[0].filename, "in.csv");
  EXPECT_EQ(r.multipart[0].data, "a,b");
}

TEST_F(OpenAiClientTest, ListContainerFilesFollowsEveryPage) {
  http_.Push(ScriptedReply::Json(200, json::parse(R"({"object":"list","data":[
      {"id":"cfile_1","path":"/mnt/data/a","bytes":1,"source":"user"}],
      "last_id":"cfile_1","has_more":true})")));
  http_.Push(ScriptedReply::Json(200, json::parse(R"({"object":"list","data":[
      {"id":"cfile_2","path":"/mnt/data/memo.md","bytes":20,"source":"assistant"}],
      "last_id":"cfile_2","has_more":false})")));
  absl::StatusOr<std::vector<ContainerFile>> files = client_.ListContainerFiles("cntr_1");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[1].path, "/mnt/data/memo.md");
  EXPECT_EQ((*files)[1].source, "assistant");
  std::vector<RecordedRequest> reqs = http_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].url, std::string(kBase) + "/containers/cntr_1/files?limit=100");
  EXPECT_EQ(reqs[1].url, std::string(kBase) + "/containers/cntr_1/files?after=cfile_1&limit=100");
}

TEST_F(OpenAiClientTest, ListContainerFilesRefusesACursorThatDoesNotMove) {
  for (int i = 0; i < 3; ++i) {
    http_.Push(ScriptedReply::Json(200, json::parse(R"({"data":[{"id":"cfile_1"}],
        "last_id":"cfile_1","has_more":true})")));
  }
  EXPECT_EQ(client_.ListContainerFiles("cntr_1").status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(http_.requests().size(), 2u);
}

TEST_F(OpenAiClientTest, ContainerFileContentStreamsAndCapsTheSize) {
  http_.Push(ScriptedReply::Stream({"0123456789", "abcdef"}));
  absl::StatusOr<std::string> content =
      client_.ContainerFileContent("cntr_1", "cfile_1", /*max_bytes=*/16);
  ASSERT_TRUE(content.ok()) << content.status();
  EXPECT_EQ(*content, "0123456789abcdef");
  const RecordedRequest r = OnlyRequest();
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.url, std::string(kBase) + "/containers/cntr_1/files/cfile_1/content");
  EXPECT_TRUE(r.streaming);
  EXPECT_EQ(r.headers.Get("accept"), "application/binary");
  ExpectAuthorized(r);
}

TEST_F(OpenAiClientTest, ContainerFileContentBeyondMaxBytesIsResourceExhausted) {
  http_.Push(ScriptedReply::Stream({"0123456789", "abcdefg", "never read"}));
  absl::StatusOr<std::string> content =
      client_.ContainerFileContent("cntr_1", "cfile_1", /*max_bytes=*/16);
  EXPECT_EQ(content.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(content.status().message(), HasSubstr("16"));
  EXPECT_THAT(content.status().message(), HasSubstr("cfile_1"));
}

TEST_F(OpenAiClientTest, DeleteContainerFile) {
  http_.Push(ScriptedReply::Json(200, {{"deleted", true}}));
  ASSERT_TRUE(client_.DeleteContainerFile("cntr_1", "cfile_1").ok());
  const RecordedRequest r = OnlyRequest();
  EXPECT_EQ(r.method, "DELETE");
  EXPECT_EQ(r.url, std::string(kBase) + "/containers/cntr_1/files/cfile_1");
}

// --- Responses ---

TEST_F(OpenAiClientTest, CreateResponseSendsTheRequestAsIs) {
  const json request = json::parse(R"({"model":"gpt-5.5","input":"hi",
      "tools":[{"type":"shell","environment":{"type":"container_reference","container_id":"cntr_1"}}]})");
  http_.Push(ScriptedReply::Json(200, {{"id", "resp_1"}, {"status", "completed"}}));
  absl::StatusOr<json> resp = client_.CreateResponse(request);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ((*resp)["id"], "resp_1");
  const RecordedRequest r = OnlyRequest();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, std::string(kBase) + "/responses");
  EXPECT_EQ(Body(r), request);
  ExpectAuthorized(r);
}

TEST_F(OpenAiClientTest, RetrieveAndCancelResponse) {
  http_.Push(ScriptedReply::Json(200, {{"id", "resp_1"}, {"status", "in_progress"}}));
  http_.Push(ScriptedReply::Json(200, {{"id", "resp_1"}, {"status", "cancelled"}}));
  EXPECT_EQ((*client_.RetrieveResponse("resp_1"))["status"], "in_progress");
  EXPECT_EQ((*client_.CancelResponse("resp_1"))["status"], "cancelled");
  std::vector<RecordedRequest> reqs = http_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].url, std::string(kBase) + "/responses/resp_1");
  EXPECT_EQ(reqs[1].method, "POST");
  EXPECT_EQ(reqs[1].url, std::string(kBase) + "/responses/resp_1/cancel");
}

std::string Frame(const std::string& type, json data) {
  data["type"] = type;
  return "event: " + type + "\ndata: " + data.dump() + "\n\n";
}

TEST_F(OpenAiClientTest, CreateResponseStreamReturnsTheTerminalResponse) {
  const std::string stream =
      Frame("response.created", {{"sequence_number", 0}, {"response", {{"id", "resp_1"}}}}) +
      ": keep-alive\n\n" +
      Frame("response.output_text.delta", {{"sequence_number", 1}, {"delta", "Hel"}}) +
      Frame("response.output_text.delta", {{"sequence_number", 2}, {"delta", "lo"}}) +
      Frame("response.completed",
            {{"sequence_number", 3},
             {"response", {{"id", "resp_1"}, {"status", "completed"}, {"output", json::array()}}}});
  // Split awkwardly, as a network would.
  http_.Push(
      ScriptedReply::Stream({stream.substr(0, 7), stream.substr(7, 150), stream.substr(157)}));
  std::vector<std::string> types;
  absl::StatusOr<json> final_response =
      client_.CreateResponseStream({{"model", "gpt-5.5"}, {"input", "hi"}}, [&](const json& event) {
        types.push_back(event["type"]);
        return absl::OkStatus();
      });
  ASSERT_TRUE(final_response.ok()) << final_response.status();
  EXPECT_EQ((*final_response)["status"], "completed");
  EXPECT_THAT(types, ElementsAre("response.created", "response.output_text.delta",
                                 "response.output_text.delta", "response.completed"));
  const RecordedRequest r = OnlyRequest();
  EXPECT_TRUE(r.streaming);
  EXPECT_EQ(r.headers.Get("accept"), "text/event-stream");
  EXPECT_EQ(Body(r), json::parse(R"({"model":"gpt-5.5","input":"hi","stream":true})"));
}

// A background response's stream is picked up again with a GET from a sequence number, and
// ends as a created stream does: at its terminal event.
TEST_F(OpenAiClientTest, ResumeResponseStreamGetsTheEventsAfterASequenceNumber) {
  http_.Push(ScriptedReply::Stream(
      {Frame("response.output_text.delta", {{"sequence_number", 8}, {"delta", "lo"}}),
       Frame("response.completed", {{"sequence_number", 9},
                                    {"response", {{"id", "resp_1"}, {"status", "completed"}}}})}));
  std::vector<int64_t> seqs;
  absl::StatusOr<json> r = client_.ResumeResponseStream("resp_1", 7, [&](const json& event) {
    seqs.push_back(event["sequence_number"]);
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["status"], "completed");
  EXPECT_THAT(seqs, ElementsAre(8, 9));
  const RecordedRequest req = OnlyRequest();
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.url, std::string(kBase) + "/responses/resp_1?stream=true&starting_after=7");
  EXPECT_TRUE(req.body.empty());
  EXPECT_EQ(req.headers.Get("accept"), "text/event-stream");

  // Cut before its terminal event: broken, like a created stream.
  http_.Push(ScriptedReply::Stream({Frame("response.output_text.delta", {{"delta", "x"}})}));
  r = client_.ResumeResponseStream("resp_1", 9, nullptr);
  EXPECT_TRUE(IsBrokenStream(r.status())) << r.status();
}

TEST_F(OpenAiClientTest, CreateResponseStreamReturnsFailedAndIncompleteResponses) {
  for (const char* type : {"response.failed", "response.incomplete"}) {
    http_.Push(ScriptedReply::Stream(
        {Frame(type, {{"response",
                       {{"id", "resp_1"},
                        {"status", "failed"},
                        {"error", {{"code", "server_error"}, {"message", "boom"}}}}}})}));
    absl::StatusOr<json> r = client_.CreateResponseStream({{"model", "m"}}, nullptr);
    ASSERT_TRUE(r.ok()) << type << ": " << r.status();
    EXPECT_EQ((*r)["id"], "resp_1");
  }
}

TEST_F(OpenAiClientTest, CreateResponseStreamErrorEventFails) {
  http_.Push(ScriptedReply::Stream(
      {Frame("response.created", {{"response", {{"id", "resp_1"}}}}),
       Frame("error",
             {{"code", "rate_limit_exceeded"}, {"message", "Slow down."}, {"param", nullptr}}),
       Frame("response.completed", {{"response", {{"id", "resp_1"}}}})}));
  int events = 0;
  absl::StatusOr<json> r = client_.CreateResponseStream({{"model", "m"}}, [&](const json&) {
    ++events;
    return absl::OkStatus();
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("Slow down."));
  EXPECT_THAT(r.status().message(), HasSubstr("rate_limit_exceeded"));
  EXPECT_EQ(events, 2);  // nothing after the error
}

TEST_F(OpenAiClientTest, CreateResponseStreamTopLevelErrorKeyFails) {
  http_.Push(
      ScriptedReply::Stream({"data: {\"error\":{\"message\":\"The server had an "
                             "error\",\"type\":\"server_error\"}}\n\n"}));
  absl::StatusOr<json> r = client_.CreateResponseStream({{"model", "m"}}, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("The server had an error"));
}

TEST_F(OpenAiClientTest, CreateResponseStreamWithoutTerminalEventIsUnavailable) {
  http_.Push(ScriptedReply::Stream({Frame("response.created", {{"response", {{"id", "r"}}}})}));
  EXPECT_EQ(client_.CreateResponseStream({{"model", "m"}}, nullptr).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(OpenAiClientTest, CreateResponseStreamCallbackErrorStopsTheStream) {
  http_.Push(ScriptedReply::Stream({Frame("response.created", {{"response", {{"id", "r"}}}}),
                                    Frame("response.completed", {{"response", {{"id", "r"}}}})}));
  int events = 0;
  absl::StatusOr<json> r = client_.CreateResponseStream({{"model", "m"}}, [&](const json&) {
    ++events;
    return absl::FailedPreconditionError("output limit reached");
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(events, 1);
}

TEST_F(OpenAiClientTest, CreateResponseStreamMalformedEventIsAnError) {
  http_.Push(ScriptedReply::Stream({"data: {not json\n\n"}));
  EXPECT_EQ(client_.CreateResponseStream({{"model", "m"}}, nullptr).status().code(),
            absl::StatusCode::kInternal);
}

// --- Chat Completions ---

TEST_F(OpenAiClientTest, CreateChatCompletion) {
  http_.Push(ScriptedReply::Json(200, {{"id", "chatcmpl-1"}, {"choices", json::array()}}));
  const json request = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  ASSERT_TRUE(client_.CreateChatCompletion(request).ok());
  const RecordedRequest r = OnlyRequest();
  EXPECT_EQ(r.url, std::string(kBase) + "/chat/completions");
  EXPECT_EQ(Body(r), request);
}

std::string ChatChunk(const json& delta, const json& finish_reason = nullptr) {
  json chunk = {{"id", "chatcmpl-9"},
                {"model", "local-model"},
                {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish_reason}}}}};
  return "data: " + chunk.dump() + "\n\n";
}

TEST_F(OpenAiClientTest, CreateChatCompletionStreamAssemblesToolCallsByIndex) {
  const json usage = {{"prompt_tokens", 10}, {"completion_tokens", 5}, {"total_tokens", 15}};
  std::vector<std::string> chunks = {
      ChatChunk({{"role", "assistant"}, {"content", "Let me "}}),
      ChatChunk({{"content", "check."}}),
      ChatChunk({{"tool_calls",
                  {{{"index", 0},
                    {"id", "call_A"},
                    {"type", "function"},
                    {"function", {{"name", "run_shell"}, {"arguments", "{\"cmd\":"}}}}}}}),
      ChatChunk({{"tool_calls",
                  {{{"index", 1},
                    {"id", "call_B"},
                    {"type", "function"},
                    {"function", {{"name", "run_shell"}, {"arguments", ""}}}}}}}),
      ChatChunk(
          {{"tool_calls", {{{"index", 1}, {"function", {{"arguments", "{\"cmd\":\"pwd\"}"}}}}}}}),
      ChatChunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "\"ls\"}"}}}}}}}),
      ChatChunk(json::object(), "tool_calls"),
      "data: " + json{{"id", "chatcmpl-9"}, {"choices", json::array()}, {"usage", usage}}.dump() +
          "\n\n",
      "data: [DONE]\n\n",
      "data: {\"ignored\": \"after done\"}\n\n"};
  http_.Push(ScriptedReply::Stream(chunks));
  int seen = 0;
  absl::StatusOr<ChatCompletionResult> result = client_.CreateChatCompletionStream(
      {{"model", "local-model"}, {"messages", json::array()}}, [&](const json&) {
        ++seen;
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(seen, 8);
  EXPECT_EQ(result->content, "Let me check.");
  EXPECT_EQ(result->finish_reason, "tool_calls");
  EXPECT_EQ(result->usage, usage);
  EXPECT_EQ(result->id, "chatcmpl-9");
  ASSERT_EQ(result->tool_calls.size(), 2u);
  EXPECT_EQ(result->tool_calls[0].id, "call_A");
  EXPECT_EQ(result->tool_calls[0].name, "run_shell");
  EXPECT_EQ(result->tool_calls[0].arguments, "{\"cmd\":\"ls\"}");
  EXPECT_EQ(result->tool_calls[1].id, "call_B");
  EXPECT_EQ(result->tool_calls[1].arguments, "{\"cmd\":\"pwd\"}");
  EXPECT_EQ(result->MessageJson(), json::parse(R"({"role":"assistant","content":"Let me check.",
      "tool_calls":[
        {"id":"call_A","type":"function","function":{"name":"run_shell","arguments":"{\"cmd\":\"ls\"}"}},
        {"id":"call_B","type":"function","function":{"name":"run_shell","arguments":"{\"cmd\":\"pwd\"}"}}]})"));
  EXPECT_EQ(Body(OnlyRequest())["stream"], true);
}

TEST_F(OpenAiClientTest, CreateChatCompletionStreamWithoutContentHasNullContent) {
  http_.Push(ScriptedReply::Stream({ChatChunk({{"role", "assistant"}}, "stop")}));  // no [DONE]
  absl::StatusOr<ChatCompletionResult> result =
      client_.CreateChatCompletionStream({{"model", "m"}}, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->content.has_value());
  EXPECT_EQ(result->finish_reason, "stop");
  EXPECT_TRUE(result->MessageJson()["content"].is_null());
  EXPECT_FALSE(result->MessageJson().contains("tool_calls"));
}

// --- Errors ---

struct ErrorCase {
  int status;
  absl::StatusCode code;
};

class OpenAiErrorMappingTest : public OpenAiClientTest,
                               public ::testing::WithParamInterface<ErrorCase> {};

TEST_P(OpenAiErrorMappingTest, HttpErrorsBecomeStatusesWithUpstreamDetails) {
  const ErrorCase c = GetParam();
  http_.Push(ScriptedReply::Json(c.status,
                                 {{"error",
                                   {{"message", "Container is expired."},
                                    {"type", "invalid_request_error"},
                                    {"param", nullptr},
                                    {"code", "container_expired"}}}},
                                 {{"x-request-id", "req_abc123"}}));
  absl::Status s = client_.RetrieveContainer("cntr_1").status();
  EXPECT_EQ(s.code(), c.code) << c.status;
  EXPECT_THAT(s.message(), HasSubstr("Container is expired."));
  EXPECT_THAT(s.message(), HasSubstr("container_expired"));
  EXPECT_THAT(s.message(), HasSubstr("req_abc123"));
  EXPECT_THAT(s.message(), HasSubstr("GET /containers/cntr_1"));
  EXPECT_THAT(s.message(), HasSubstr(std::to_string(c.status)));
}

INSTANTIATE_TEST_SUITE_P(Statuses, OpenAiErrorMappingTest,
                         ::testing::Values(ErrorCase{400, absl::StatusCode::kInvalidArgument},
                                           ErrorCase{401, absl::StatusCode::kUnauthenticated},
                                           ErrorCase{403, absl::StatusCode::kPermissionDenied},
                                           ErrorCase{404, absl::StatusCode::kNotFound},
                                           ErrorCase{408, absl::StatusCode::kDeadlineExceeded},
                                           ErrorCase{409, absl::StatusCode::kAborted},
                                           ErrorCase{422, absl::StatusCode::kFailedPrecondition},
                                           ErrorCase{429, absl::StatusCode::kResourceExhausted},
                                           ErrorCase{500, absl::StatusCode::kUnavailable},
                                           ErrorCase{503, absl::StatusCode::kUnavailable}));

TEST_F(OpenAiClientTest, NonJsonErrorBodyIsQuoted) {
  ScriptedReply reply = ScriptedReply::Status(502, {{"x-request-id", "req_9"}});
  reply.body = "<html>Bad Gateway</html>";
  http_.Push(reply);
  absl::Status s = client_.DeleteFile("file-1");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("Bad Gateway"));
  EXPECT_THAT(s.message(), HasSubstr("req_9"));
}

TEST_F(OpenAiClientTest, StreamingRequestGetsHttpErrorsToo) {
  http_.Push(ScriptedReply::Json(
      429, {{"error", {{"message", "quota"}, {"code", "insufficient_quota"}}}}));
  absl::Status s = client_.CreateResponseStream({{"model", "m"}}, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("insufficient_quota"));
}

TEST_F(OpenAiClientTest, TransportFailuresKeepTheirCodeAndNameTheCall) {
  http_.Push(ScriptedReply::Fail(absl::DeadlineExceededError("Operation timed out")));
  absl::Status s = client_.CreateResponse({{"model", "m"}}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("POST /responses"));
  EXPECT_THAT(s.message(), HasSubstr("Operation timed out"));
}

TEST_F(OpenAiClientTest, CancellationIsCancelledAndNamesTheCall) {
  http_.Push(ScriptedReply::Json(200, {{"id", "cntr_1"}}));
  CancelToken cancel;
  http_.OnSend([&cancel](const HttpRequest&) { cancel.Cancel("run cancelled"); });
  absl::Status s = client_.RetrieveContainer("cntr_1", &cancel).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(s.message(), HasSubstr("GET /containers/cntr_1"));
}

TEST_F(OpenAiClientTest, CredentialErrorsStopTheCallAndNameTheSource) {
  FileCredentials missing("/nonexistent/sandgate/openai.key");
  OpenAiClient client(&http_, &missing, kBase);
  absl::Status s = client.DeleteFile("file-1");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/sandgate/openai.key"));
  EXPECT_TRUE(http_.requests().empty());
}

TEST_F(OpenAiClientTest, BaseUrlIsConfigurableAndDefaultsToOpenAi) {
  OpenAiClient default_client(&http_, &creds_);
  EXPECT_EQ(default_client.base_url(), "https://api.openai.com/v1");
  OpenAiClient local(&http_, &creds_, "http://127.0.0.1:8000/v1/");
  http_.Push(ScriptedReply::Json(200, json::object()));
  ASSERT_TRUE(local.CreateChatCompletion({{"model", "m"}}).ok());
  EXPECT_EQ(OnlyRequest().url, "http://127.0.0.1:8000/v1/chat/completions");
}

TEST_F(OpenAiClientTest, TheKeyNeverAppearsInAStatusOrALogLine) {
  // A server that echoes the key back, in the error body and in a header.
  const std::string echo = std::string("Incorrect API key provided: ") + kKey;
  http_.Push(ScriptedReply::Json(401, {{"error", {{"message", echo}, {"code", kKey}}}},
                                 {{"x-request-id", kKey}}));
  http_.Push(ScriptedReply::Fail(absl::UnavailableError(std::string("proxy said ") + kKey)));
  http_.Push(ScriptedReply::Status(500));
  http_.Push(ScriptedReply::Status(500));
  http_.Push(ScriptedReply::Stream({"data: {\"type\":\"error\",\"message\":\"bad\"}\n\n"}));
  RetryOptions retry_options;
  retry_options.sleep = [](absl::Duration, const CancelToken*) { return false; };
  RetryingHttpClient retrying(&http_, retry_options);
  OpenAiClient client(&retrying, &creds_, kBase);

  log::SetMinLevel(log::Level::kDebug);
  ::testing::internal::CaptureStderr();
  std::vector<absl::Status> statuses = {
      client.DeleteFile("file-1"),                                      // 401 echoing the key
      client.RetrieveContainer("cntr_1").status(),                      // retried twice, then 500
      client.CreateResponseStream({{"model", "m"}}, nullptr).status(),  // stream error event
  };
  const std::string logged = ::testing::internal::GetCapturedStderr();
  log::SetMinLevel(log::Level::kInfo);

  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(statuses[0].message(), HasSubstr("[REDACTED]"));
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(statuses[2].ok());
  for (const absl::Status& s : statuses) EXPECT_THAT(s.message(), Not(HasSubstr(kKey))) << s;
  EXPECT_THAT(logged, HasSubstr("openai.error"));
  EXPECT_THAT(logged, Not(HasSubstr(kKey)));
}

// End to end over a real socket: libcurl + SSE + the Responses stream.
TEST(OpenAiClientOverCurlTest, StreamsAResponseFromALoopbackServer) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n";
    LoopbackHttpServer::WriteAll(fd, head);
    const std::string frames[] = {
        "event: response.created\r\ndata: "
        "{\"type\":\"response.created\",\"response\":{\"id\":\"r1\"}}\r\n\r\n",
        "event: response.completed\r\ndata: {\"type\":\"response.completed\",",
        "\"response\":{\"id\":\"r1\",\"status\":\"completed\"}}\r\n\r\n"};
    for (const std::string& f : frames)
      LoopbackHttpServer::WriteAll(fd, LoopbackHttpServer::Chunk(f));
    LoopbackHttpServer::WriteAll(fd, "0\r\n\r\n");
  });
  CurlHttpClient curl;
  FakeCredentials creds(kKey);
  OpenAiClient client(&curl, &creds, server.Url("/v1"));
  int events = 0;
  absl::StatusOr<json> r = client.CreateResponseStream({{"model", "m"}}, [&](const json&) {
    ++events;
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["status"], "completed");
  EXPECT_EQ(events, 2);
  ASSERT_EQ(server.requests().size(), 1u);
  const ReceivedRequest got = server.requests()[0];
  EXPECT_EQ(got.target, "/v1/responses");
  EXPECT_EQ(got.headers.Get("authorization"), std::string("Bearer ") + kKey);
  EXPECT_EQ(json::parse(got.body)["stream"], true);
}

}  // namespace
}  // namespace sandgate::upstream
