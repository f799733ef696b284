#include "tests/integration/rest_client.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/sha256.h"

namespace sandgate::testing {
namespace {

size_t CollectHeader(char* data, size_t size, size_t n, void* out) {
  std::string line(data, size * n);
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    (*static_cast<std::map<std::string, std::string>*>(out))[name] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * n;
}

}  // namespace

nlohmann::json RestDaemonConfig(uint64_t max_input_bytes, int uid_base) {
  return nlohmann::json{
      {"http_listen", "127.0.0.1:0"},
      {"allow_plaintext_tokens", true},
      {"tenants",
       {{{"name", "alice"}, {"token_sha256", Sha256::Hex(kAlice)}},
        {{"name", "bob"}, {"token_sha256", Sha256::Hex(kBob)}},
        {{"name", "ops"}, {"token_sha256", Sha256::Hex(kOps)}, {"operator", true}}}},
      {"max_input_bytes", max_input_bytes},
      {"local", {{"uid_base", uid_base}, {"uid_count", 16}}}};
}

size_t Collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

void CollectInto(CURL* curl, Answer* a) {
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &a->body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &CollectHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &a->headers);
}

Answer Http(const std::string& method, const std::string& url, const std::string& token,
            const std::string& body, const std::vector<std::string>& headers, const std::string& ca,
            long timeout_seconds) {
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

std::string HttpBase(const std::string& log) {
  size_t at = log.find("\"event\":\"daemon.http\"");
  size_t url = log.find("\"url\":\"", at);
  if (at == std::string::npos || url == std::string::npos) return "";
  url += 7;
  return log.substr(url, log.find('"', url) - url);
}

std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &out).ok());
  return out;
}

std::vector<SseEvent> ParseSse(const std::string& body, int* comments) {
  std::vector<SseEvent> out;
  *comments = 0;
  for (absl::string_view block : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    SseEvent e;
    for (absl::string_view line : absl::StrSplit(block, '\n')) {
      if (absl::ConsumePrefix(&line, ":")) ++*comments;
      if (absl::ConsumePrefix(&line, "id: ")) e.id = std::string(line);
      if (absl::ConsumePrefix(&line, "event: ")) e.type = std::string(line);
      if (absl::ConsumePrefix(&line, "data: ")) e.data = std::string(line);
    }
    if (!e.data.empty()) out.push_back(e);
  }
  return out;
}

grpc::Status UploadOverGrpc(v1::Sandgate::Stub& stub, const v1::UploadFileRequest::Header& header,
                            const std::string& data, v1::FileInfo* info, const std::string& token) {
  auto ctx = DaemonHarness::Context(token);
  auto writer = stub.UploadFile(ctx.get(), info);
  v1::UploadFileRequest m;
  *m.mutable_header() = header;
  writer->Write(m);
  m.set_data(data);
  writer->Write(m);
  writer->WritesDone();
  return writer->Finish();
}

grpc::Status DownloadOverGrpc(v1::Sandgate::Stub& stub, const std::string& session,
                              const std::string& path, std::string* data,
                              const std::string& token) {
  auto ctx = DaemonHarness::Context(token);
  v1::DownloadFileRequest req;
  req.set_session_id(session);
  req.set_path(path);
  auto reader = stub.DownloadFile(ctx.get(), req);
  v1::FileChunk chunk;
  while (reader->Read(&chunk)) data->append(chunk.data());
  return reader->Finish();
}

}  // namespace sandgate::testing
