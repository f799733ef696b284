// The REST image routes (POST/GET/DELETE /v1/images, docs/images.md) against hostile input:
// names that are not UTF-8, that look like paths, that are too long; package lists over the
// limit or not Debian's; another tenant's image; what a tenant's policy refuses. Each is a
// clear 4xx naming the problem, the same code as over gRPC, and leaves nothing behind. Builds
// run a fake mmdebstrap (tests/fakes/fake_mmdebstrap.sh): no network, instant.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "sandgate/v1/images.grpc.pb.h"
#include "tests/common/eventually.h"
#include "tests/integration/daemon_harness.h"
#include "tests/integration/rest_client.h"

namespace sandgate::testing {
namespace {

// The tokens are rest_client.h's, with a fourth tenant; the policies are this test's own:
// alice may build and use every image, bob may use "py" only and not build, carol may build
// "own" only, ops is an operator.
constexpr char kCarol[] = "carol-token";

class RestImagesTest : public ::testing::Test {
 protected:
  // The daemon's warm_pool, if any.
  virtual nlohmann::json WarmPoolShapes() const { return nullptr; }

  void SetUp() override {
    nlohmann::json config{
        {"http_listen", "127.0.0.1:0"},
        {"allow_plaintext_tokens", true},
        {"tenants",
         {{{"name", "alice"},
           {"token_sha256", Sha256::Hex(kAlice)},
           {"policy", {{"build_images", true}}}},
          {{"name", "bob"}, {"token_sha256", Sha256::Hex(kBob)}, {"policy", {{"images", {"py"}}}}},
          {{"name", "carol"},
           {"token_sha256", Sha256::Hex(kCarol)},
           {"policy", {{"build_images", true}, {"images", {"own"}}}}},
          {{"name", "ops"}, {"token_sha256", Sha256::Hex(kOps)}, {"operator", true}}}},
        {"local", {{"uid_base", 357000}, {"uid_count", 4}, {"mmdebstrap", FAKE_MMDEBSTRAP}}}};
    if (nlohmann::json shapes = WarmPoolShapes(); !shapes.is_null()) config["warm_pool"] = shapes;
    daemon_ = std::make_unique<DaemonHarness>(config);
    daemon_->Start();
    base_ = HttpBase(*daemon_);
    ASSERT_TRUE(absl::StartsWith(base_, "http://127.0.0.1:")) << daemon_->Log();
    images_ = v1::Images::NewStub(
        grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  }
  std::string Url(const std::string& path) const { return base_ + path; }

  // Builds `name` as `token` over REST and waits until it is ready.
  void Build(const std::string& token, const std::string& name) {
    Answer a = Http("POST", Url("/v1/images"), token,
                    absl::StrCat(R"({"name": ")", name, R"(", "packages": ["busybox"]})"));
    ASSERT_EQ(a.status, 200) << a.body;
    ASSERT_TRUE(Eventually(name + " ready", [&] {
      Answer got = Http("GET", Url("/v1/images/" + name), token);
      return got.status == 200 && absl::StrContains(got.body, "STATE_READY");
    })) << daemon_->Log();
  }

  // The names the images listing shows `token`.
  std::vector<std::string> Listed(const std::string& token) {
    v1::ListImagesResponse list =
        Parse<v1::ListImagesResponse>(Http("GET", Url("/v1/images"), token));
    std::vector<std::string> names;
    for (const v1::Image& image : list.images()) names.push_back(image.name());
    return names;
  }

  // A REST error: its HTTP status and code, and a message containing `says`.
  static void ExpectError(const Answer& a, long status, const std::string& code,
                          const std::string& says) {
    EXPECT_EQ(a.status, status) << a.body;
    nlohmann::json error = nlohmann::json::parse(a.body, nullptr, false);
    ASSERT_TRUE(error.is_object()) << a.body;
    EXPECT_EQ(error["status"], code) << a.body;
    EXPECT_TRUE(absl::StrContains(error["message"].get<std::string>(), says)) << a.body;
  }

  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<v1::Images::Stub> images_;
  std::string base_;
};

TEST_F(RestImagesTest, HostileNamesAreRefusedNamingTheProblemAndNothingIsBuilt) {
  struct Case {
    std::string json_name;  // as it appears between the quotes of the JSON body
    std::string url_name;   // percent-encoded, for GET and DELETE
    std::string says;
  };
  const std::vector<Case> cases = {
      {"../../etc", "..%2F..%2Fetc", "must start with a lower-case letter or a digit"},
      {"a/../b", "a%2F..%2Fb", "'/' is not allowed"},
      {"..", "..", "must start with a lower-case letter or a digit"},
      {"x\\u0000y", "x%00y", ""},
      {"Py", "Py", "must start with a lower-case letter"},
      {"host", "host", "'host' is the host's own root file system"},
      {std::string(300, 'a'), std::string(300, 'a'), "300 bytes"},
      {"", "%20", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.url_name.substr(0, 20));
    Answer built =
        Http("POST", Url("/v1/images"), kAlice,
             absl::StrCat(R"({"name": ")", c.json_name, R"(", "packages": ["busybox"]})"));
    ExpectError(built, 400, "INVALID_ARGUMENT", c.says);
    for (const char* method : {"GET", "DELETE"}) {
      Answer a = Http(method, Url("/v1/images/" + c.url_name), kAlice);
      EXPECT_GE(a.status, 400) << method << " " << a.body;
      EXPECT_LT(a.status, 500) << method << " " << a.body;
    }
  }
  // Raw bytes that are not UTF-8: in the JSON body, and in the path.
  ExpectError(
      Http("POST", Url("/v1/images"), kAlice, "{\"name\": \"x\xff\", \"packages\": [\"a1\"]}"), 400,
      "INVALID_ARGUMENT", "");
  ExpectError(Http("GET", Url("/v1/images/x%ff"), kAlice), 400, "INVALID_ARGUMENT",
              "not valid UTF-8");
  ExpectError(Http("DELETE", Url("/v1/images/%c0%af"), kAlice), 400, "INVALID_ARGUMENT",
              "not valid UTF-8");
  EXPECT_TRUE(Listed(kAlice).empty()) << "nothing was built";
}

TEST_F(RestImagesTest, PackageListsOverTheLimitOrNotDebiansAreRefused) {
  std::string many = "[";
  for (int i = 0; i < 201; ++i) absl::StrAppend(&many, i ? "," : "", "\"p", i, "\"");
  many += "]";
  struct Case {
    std::string packages;
    std::string says;
  };
  const std::vector<Case> cases = {
      {many, "packages: 201 named, at most 200"},
      {"[]", "packages: name at least one"},
      {absl::StrCat("[\"", std::string(5000, 'a'), "\"]"), "bytes, longer than"},
      {R"(["python3; rm -rf /"])", "is not a Debian package name"},
      {R"(["--root=/"])", "is not a Debian package name"},
      {R"(["../x"])", "is not a Debian package name"},
      {R"([""])", "is empty"},
      {"[\"p\xff\"]", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.packages.substr(0, 30));
    Answer a = Http("POST", Url("/v1/images"), kAlice,
                    absl::StrCat(R"({"name": "fine", "packages": )", c.packages, "}"));
    ExpectError(a, 400, "INVALID_ARGUMENT", c.says);
  }
  // A body far over any sane size is refused before it is parsed.
  std::string huge =
      absl::StrCat(R"({"name": "fine", "packages": [")", std::string(32 << 20, 'a'), R"("]})");
  Answer big = Http("POST", Url("/v1/images"), kAlice, huge);
  EXPECT_GE(big.status, 400) << big.body.substr(0, 200);
  EXPECT_LT(big.status, 500) << big.body.substr(0, 200);
  EXPECT_TRUE(Listed(kAlice).empty()) << "nothing was built";
}

TEST_F(RestImagesTest, TenantsSeeAndTouchOnlyWhatTheirPolicyAllows) {
  Build(kAlice, "py");
  Build(kCarol, "own");
  // Bob may use py only, and may not build or delete.
  EXPECT_EQ(Listed(kBob), std::vector<std::string>{"py"});
  EXPECT_EQ(Http("GET", Url("/v1/images/py"), kBob).status, 200);
  ExpectError(Http("GET", Url("/v1/images/own"), kBob), 403, "PERMISSION_DENIED",
              "image 'own' is not allowed (allowed: py)");
  ExpectError(Http("POST", Url("/v1/images"), kBob, R"({"name": "py", "packages": ["a1"]})"), 403,
              "PERMISSION_DENIED", "policy.build_images is false");
  ExpectError(Http("DELETE", Url("/v1/images/py"), kBob), 403, "PERMISSION_DENIED",
              "policy.build_images is false");
  ExpectError(Http("POST", Url("/v1/sessions"), kBob, R"({"sandbox": {"image": "own"}})"), 403,
              "PERMISSION_DENIED", "image 'own' is not allowed (allowed: py)");
  ExpectError(Http("POST", Url("/v1/sessions"), kBob, "{}"), 403, "PERMISSION_DENIED",
              "image 'host' is not allowed (allowed: py)");
  // Carol may build "own" only, and may not delete what alice built.
  EXPECT_EQ(Listed(kCarol), std::vector<std::string>{"own"});
  ExpectError(Http("POST", Url("/v1/images"), kCarol, R"({"name": "other", "packages": ["a1"]})"),
              403, "PERMISSION_DENIED", "image 'other' is not allowed (allowed: own)");
  ExpectError(Http("DELETE", Url("/v1/images/py"), kCarol), 403, "PERMISSION_DENIED",
              "image 'py' is not allowed (allowed: own)");
  // Alice sees both but may delete only her own; the operator may delete any.
  ExpectError(Http("DELETE", Url("/v1/images/own"), kAlice), 403, "PERMISSION_DENIED",
              "image 'own' was built by tenant 'carol'; only it or an operator may delete it");
  // A second build of a name that exists, an unknown name, a wrong token.
  ExpectError(Http("POST", Url("/v1/images"), kAlice, R"({"name": "py", "packages": ["a1"]})"), 409,
              "ALREADY_EXISTS", "py");
  ExpectError(Http("GET", Url("/v1/images/nosuch"), kAlice), 404, "NOT_FOUND",
              "image not found: nosuch");
  EXPECT_EQ(Http("GET", Url("/v1/images"), "wrong-token").status, 401);
  EXPECT_EQ(Http("DELETE", Url("/v1/images/py"), "").status, 401);
  EXPECT_EQ(Http("DELETE", Url("/v1/images/own"), kOps).status, 200);
  EXPECT_EQ(Listed(kOps), std::vector<std::string>{"py"});
  // The same refusals as over gRPC.
  v1::GetImageRequest get;
  get.set_name("own");
  v1::Image image;
  grpc::Status st = images_->GetImage(DaemonHarness::Context(kBob).get(), get, &image);
  ExpectSame(Http("GET", Url("/v1/images/own"), kBob), st, image, "GetImage of another's name");
}

// The image RPCs are served by the one edge on both faces (server/rpc_policy.h): the same
// request gets the same answer over REST and gRPC, hostile ones included (a NUL, "..", an
// oversize name, another tenant's image, a tenant that may not delete, a wrong token). A name
// with a '/' is no single path segment, so REST has no route for it (404, "no such path"):
// HostileNamesAreRefusedNamingTheProblemAndNothingIsBuilt holds that to a 4xx.
TEST_F(RestImagesTest, ImageCallsAnswerTheSameOverRestAndGrpc) {
  Build(kCarol, "own");
  struct Case {
    std::string token;
    std::string name;      // the request's name
    std::string url_name;  // percent-encoded
  };
  const std::vector<Case> cases = {
      {kCarol, "own", "own"},                                  // served
      {kAlice, std::string("o\0wn", 4), "o%00wn"},             // a NUL
      {kAlice, "..", "%2E%2E"},                                // a path
      {kAlice, std::string(300, 'a'), std::string(300, 'a')},  // oversize
      {kAlice, "nosuch", "nosuch"},                            // missing
      {kBob, "own", "own"},                                    // not in bob's policy
      {"wrong-token", "own", "own"},                           // no tenant
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.url_name.substr(0, 20) + " as " + c.token);
    v1::GetImageRequest get;
    get.set_name(c.name);
    v1::Image image;
    grpc::Status st = images_->GetImage(DaemonHarness::Context(c.token).get(), get, &image);
    ExpectSame(Http("GET", Url("/v1/images/" + c.url_name), c.token), st, image, "GetImage");
  }
  v1::ListImagesResponse listed;
  grpc::Status st =
      images_->ListImages(DaemonHarness::Context(kBob).get(), v1::ListImagesRequest(), &listed);
  ExpectSame(Http("GET", Url("/v1/images"), kBob), st, listed, "ListImages");
  // Refusals of DeleteImage, and of BuildImage (whose gRPC form streams; its refusal ends the
  // stream before any line).
  for (const Case& c : cases) {
    if (c.name == "own" && c.token == kCarol) continue;  // would delete it
    SCOPED_TRACE(c.url_name.substr(0, 20) + " as " + c.token);
    v1::DeleteImageRequest remove;
    remove.set_name(c.name);
    v1::Image image;
    st = images_->DeleteImage(DaemonHarness::Context(c.token).get(), remove, &image);
    ExpectSame(Http("DELETE", Url("/v1/images/" + c.url_name), c.token), st, image, "DeleteImage");
  }
  v1::BuildImageRequest build;
  build.set_name("py");
  build.add_packages("busybox");
  auto ctx = DaemonHarness::Context(kBob);
  auto stream = images_->BuildImage(ctx.get(), build);
  v1::ImageBuildProgress progress;
  EXPECT_FALSE(stream->Read(&progress));
  st = stream->Finish();
  ExpectSame(Http("POST", Url("/v1/images"), kBob, R"({"name": "py", "packages": ["busybox"]})"),
             st, v1::Image(), "BuildImage");
}

// GET /v1/whoami says whether the token's tenant may build images (so the dashboard can say it
// before one tries), and a build then finds the same: alice and carol may by their policy
// (carol only "own"), bob may not, an operator may.
TEST_F(RestImagesTest, WhoAmISaysWhetherTheTenantMayBuildImagesAsABuildFinds) {
  struct Who {
    const char* token;
    const char* tenant;
    const char* image;  // one its policy lets it use
    bool builds;
  };
  for (const Who& w : {Who{kAlice, "alice", "mine", true}, Who{kBob, "bob", "py", false},
                       Who{kCarol, "carol", "own", true}, Who{kOps, "ops", "ops", true}}) {
    SCOPED_TRACE(w.tenant);
    Answer me = Http("GET", Url("/v1/whoami"), w.token);
    ASSERT_EQ(me.status, 200) << me.body;
    nlohmann::json j = nlohmann::json::parse(me.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << me.body;
    EXPECT_EQ(j["tenant"], w.tenant) << me.body;
    EXPECT_EQ(j["buildImages"], w.builds) << me.body;
    Answer built = Http("POST", Url("/v1/images"), w.token,
                        absl::StrCat(R"({"name": ")", w.image, R"(", "packages": ["busybox"]})"));
    if (w.builds) {
      EXPECT_EQ(built.status, 200) << built.body;
    } else {
      ExpectError(built, 403, "PERMISSION_DENIED", "policy.build_images is false");
    }
  }
}

// GET /v1/images/{name}/progress (server/rest_image_progress.h): a build's lines as SSE, as
// they come, ending with its image or its error; resumed after Last-Event-ID or ?from=.
TEST_F(RestImagesTest, ABuildsProgressStreamsAsServerSentEventsToItsEnd) {
  // A build that waits to be cancelled: the stream shows its lines while it runs, and ends
  // with the cancellation when it is deleted.
  ASSERT_EQ(
      Http("POST", Url("/v1/images"), kAlice, R"({"name": "py", "packages": ["slow"]})").status,
      200);
  // The stream is read as it comes (a plain socket, not a client that waits for the end): the
  // lines arrive while the build still runs, before anything ends it.
  const int port = std::stoi(base_.substr(base_.rfind(':') + 1));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  absl::Cleanup close_fd = [fd] { close(fd); };
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request = absl::StrCat(
      "GET /v1/images/py/progress HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ", kAlice,
      "\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string live;
  // Reads until `what` has arrived or the connection ends (each wait at most 30 s).
  auto read_until = [&](const std::string& what) {
    char buf[4096];
    while (!absl::StrContains(live, what)) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 30000) <= 0) return false;
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) return false;
      live.append(buf, static_cast<size_t>(n));
    }
    return true;
  };
  ASSERT_TRUE(read_until("slow step 1")) << live;
  EXPECT_TRUE(absl::StartsWith(live, "HTTP/1.1 200")) << live;
  EXPECT_TRUE(absl::StrContains(live, "text/event-stream; charset=utf-8")) << live;
  EXPECT_FALSE(absl::StrContains(live, "event: error")) << live;
  ASSERT_EQ(Http("DELETE", Url("/v1/images/py"), kAlice).status, 200);
  ASSERT_TRUE(read_until("event: error")) << live;
  read_until("\r\n0\r\n\r\n");  // the end of the chunked body
  // The body without its chunk framing (each event here fits one chunk).
  std::string body;
  for (size_t at = live.find("\r\n\r\n") + 4; at < live.size();) {
    size_t eol = live.find("\r\n", at);
    if (eol == std::string::npos) break;
    const size_t size = std::stoul(live.substr(at, eol - at), nullptr, 16);
    if (size == 0) break;
    body += live.substr(eol + 2, size);
    at = eol + 2 + size + 2;
  }
  int comments = 0;
  std::vector<SseEvent> events = ParseSse(body, &comments);
  ASSERT_GE(events.size(), 4u) << body;
  EXPECT_EQ(events[0].type, "line");
  EXPECT_EQ(nlohmann::json::parse(events[0].data)["line"], "queued: slow (bookworm, essential)");
  // Each line's id is its index, in order; one closing event, last.
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i].type, "line") << body;
    EXPECT_EQ(events[i].id, absl::StrCat(i)) << body;
  }
  EXPECT_TRUE(absl::StrContains(body, R"("line":"I: fake mmdebstrap: including slow")")) << body;
  // The markup a page must show as text is a JSON string, never raw HTML in the stream.
  bool markup = false;
  for (const SseEvent& e : events) {
    if (e.type == "line" && absl::StrContains(e.data, "<img src=x onerror")) markup = true;
  }
  EXPECT_TRUE(markup) << body;
  EXPECT_EQ(events.back().type, "error") << body;
  EXPECT_TRUE(absl::StrContains(events.back().data, "CANCELLED")) << events.back().data;

  // A finished build: every line again, then the image; resumed after an id or from an index.
  Build(kAlice, "done");
  Answer all = Http("GET", Url("/v1/images/done/progress"), kAlice);
  ASSERT_EQ(all.status, 200) << all.body;
  events = ParseSse(all.body, &comments);
  ASSERT_GE(events.size(), 3u) << all.body;
  EXPECT_EQ(events.back().type, "image");
  EXPECT_EQ(nlohmann::json::parse(events.back().data)["state"], "STATE_READY") << all.body;
  EXPECT_EQ(events[events.size() - 2].type, "line") << all.body;  // one image event
  const size_t lines = events.size() - 1;
  for (const std::vector<std::string>& resume :
       {std::vector<std::string>{"Last-Event-ID: 0"}, std::vector<std::string>{}}) {
    Answer rest = Http(
        "GET", Url(resume.empty() ? "/v1/images/done/progress?from=1" : "/v1/images/done/progress"),
        kAlice, "", resume);
    std::vector<SseEvent> after = ParseSse(rest.body, &comments);
    ASSERT_EQ(after.size(), lines) << rest.body << "\nafter the whole stream:\n"
                                   << all.body;  // line 0 skipped, the image last
    EXPECT_EQ(after.front().id, "1") << rest.body;
    EXPECT_EQ(after.back().type, "image");
  }
  EXPECT_EQ(comments, 0);
}

// The progress route against hostile input and other tenants: the same refusals as
// GET /v1/images/{name}, and bad resume points named.
TEST_F(RestImagesTest, TheProgressRouteRefusesWhatGetRefuses) {
  Build(kAlice, "py");
  Build(kCarol, "own");
  // A name with slashes is no route at all; ".." is a name the store refuses.
  ExpectError(Http("GET", Url("/v1/images/..%2F..%2Fetc/progress"), kAlice), 404, "NOT_FOUND", "");
  ExpectError(Http("GET", Url("/v1/images/%2E%2E/progress"), kAlice), 400, "INVALID_ARGUMENT",
              "must start with a lower-case letter or a digit");
  ExpectError(Http("GET", Url("/v1/images/" + std::string(300, 'a') + "/progress"), kAlice), 400,
              "INVALID_ARGUMENT", "300 bytes");
  EXPECT_EQ(Http("GET", Url("/v1/images/p%ff/progress"), kAlice).status, 400);
  ExpectError(Http("GET", Url("/v1/images/nosuch/progress"), kAlice), 404, "NOT_FOUND",
              "image not found: nosuch");
  ExpectError(Http("GET", Url("/v1/images/own/progress"), kBob), 403, "PERMISSION_DENIED",
              "image 'own' is not allowed (allowed: py)");
  ExpectError(Http("GET", Url("/v1/images/py/progress"), kCarol), 403, "PERMISSION_DENIED",
              "image 'py' is not allowed (allowed: own)");
  EXPECT_EQ(Http("GET", Url("/v1/images/py/progress"), "wrong-token").status, 401);
  ExpectError(Http("GET", Url("/v1/images/py/progress?from=-1"), kAlice), 400, "INVALID_ARGUMENT",
              "from: expected a line index (0 or more), got '-1'");
  ExpectError(Http("GET", Url("/v1/images/py/progress"), kAlice, "", {"Last-Event-ID: x1"}), 400,
              "INVALID_ARGUMENT", "Last-Event-ID: expected a line index");
  ExpectError(Http("GET", Url("/v1/images/py/progress?from=99999999999999999999999"), kAlice), 400,
              "INVALID_ARGUMENT", "from: expected a line index");
  // Bob may see py: its stream, to the image.
  Answer bob = Http("GET", Url("/v1/images/py/progress"), kBob);
  EXPECT_EQ(bob.status, 200) << bob.body;
  EXPECT_TRUE(absl::StrContains(bob.body, "event: image")) << bob.body;
}

// Follow-up of issue 22: a warm pool's ready sandbox of an image is no use of it. DELETE
// closes it and removes the image; a session made from the image still blocks the delete,
// naming that one session, until it is closed. The fake image has only a /usr and an /etc:
// enough for the sandbox (its init is copied in by the daemon) to start and stay ready.
class RestImagesWarmPoolTest : public RestImagesTest {
 protected:
  nlohmann::json WarmPoolShapes() const override { return {{{"size", 1}, {"image", "py"}}}; }

  // How many times the log says the pool is full (of the one shape).
  size_t Filled() const {
    const std::string log = daemon_->Log();
    size_t n = 0;
    for (size_t at = 0; (at = log.find("\"event\":\"warm_pool.filled\"", at)) != std::string::npos;
         ++at) {
      ++n;
    }
    return n;
  }
};

TEST_F(RestImagesWarmPoolTest, OnlyASessionUsingTheImageBlocksItsDeletionNotAReadySandbox) {
  Build(kAlice, "py");
  ASSERT_TRUE(Eventually(
      "a ready sandbox of py", [&] { return Filled() >= 1; }, absl::Seconds(30)))
      << daemon_->Log();
  Answer gone = Http("DELETE", Url("/v1/images/py"), kAlice);
  EXPECT_EQ(gone.status, 200) << gone.body;
  EXPECT_TRUE(absl::StrContains(daemon_->Log(), "its image is being deleted")) << daemon_->Log();
  EXPECT_EQ(Http("GET", Url("/v1/images/py"), kAlice).status, 404);

  // Again, and a session takes the ready sandbox: that one is a use.
  Build(kAlice, "py");
  ASSERT_TRUE(Eventually(
      "a ready sandbox of py again", [&] { return Filled() >= 2; }, absl::Seconds(30)))
      << daemon_->Log();
  Answer made = Http("POST", Url("/v1/sessions"), kAlice, R"({"sandbox": {"image": "py"}})");
  ASSERT_EQ(made.status, 200) << made.body;
  const nlohmann::json session = nlohmann::json::parse(made.body);
  const std::string id = session["id"];
  EXPECT_EQ(session.value("fromWarmPool", false), true) << made.body;
  ExpectError(Http("DELETE", Url("/v1/images/py"), kAlice), 412, "FAILED_PRECONDITION",
              "image 'py' is in use by 1 live session (" + id + "); close them first");
  // Another tenant's delete of it is refused for what it is, not for the use.
  ExpectError(Http("DELETE", Url("/v1/images/py"), kBob), 403, "PERMISSION_DENIED", "");
  ASSERT_EQ(Http("POST", Url("/v1/sessions/" + id + ":close"), kAlice, "{}").status, 200);
  gone = Http("DELETE", Url("/v1/images/py"), kAlice);
  EXPECT_EQ(gone.status, 200) << gone.body;
}

}  // namespace
}  // namespace sandgate::testing
