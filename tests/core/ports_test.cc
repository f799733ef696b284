// PortManager on the host fake provider (a port is the host's loopback there) and a fake
// clock: exposing, tenants, signed URLs that expire at their exact instant, and the limits.
#include "core/ports.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "core/sandbox_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/sqlite_store.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/host_listener.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::core {
namespace {

using testing::FakeClock;
using ::testing::HasSubstr;
using testing::HostListener;
using testing::HostProvider;

class PortsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-ports-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = *store::SqliteStore::Open(dir_ + "/s.db");
    provider_ = std::make_unique<HostProvider>(store_.get());
    limits_.max_exposed_per_session = 2;
    limits_.max_connections_per_session = 1;
    SessionManagerDeps deps;
    deps.config = &config_;
    deps.store = store_.get();
    deps.clock = &clock_;
    deps.providers = {{"local", provider_.get()}};
    sessions_ = std::make_unique<SessionManager>(deps);
    ports_ = std::make_unique<PortManager>(PortManager::Deps{
        &limits_, sessions_.get(), &clock_, std::string(32, 'k'), "http://gw.example"});
  }
  void TearDown() override {
    ports_.reset();
    sessions_.reset();
    store_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  std::string NewSession(const Caller& caller) {
    auto s = sessions_->Create(caller, v1::CreateSessionRequest(), nullptr);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->id() : "";
  }
  absl::StatusOr<v1::ExposedPort> Expose(const Caller& caller, const std::string& sid,
                                         uint32_t port, absl::Duration ttl = absl::ZeroDuration()) {
    v1::ExposePortRequest req;
    req.set_session_id(sid);
    req.set_port(port);
    if (ttl > absl::ZeroDuration()) {
      req.set_signed_url(true);
      *req.mutable_signed_ttl() = ToProto(ttl);
    }
    v1::ExposedPort out;
    absl::Status st = ports_->Expose(caller, req, &out);
    if (!st.ok()) return st;
    return out;
  }
  // The grant of a signed path: what follows ":signed/", without the last '/'.
  static std::string GrantOf(const v1::ExposedPort& p) {
    const std::string& path = p.signed_path();
    const size_t at = path.find(":signed/") + 8;
    return path.substr(at, path.size() - at - 1);
  }

  std::string dir_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<HostProvider> provider_;
  Config config_;
  PortLimits limits_;
  FakeClock clock_;
  std::unique_ptr<SessionManager> sessions_;
  std::unique_ptr<PortManager> ports_;
  Caller alice_{"alice"}, bob_{"bob"};
};

TEST_F(PortsTest, ExposesAPortOfTheCallersSessionOnly) {
  const std::string sid = NewSession(alice_);
  absl::StatusOr<v1::ExposedPort> p = Expose(alice_, sid, 8000);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->path(), "/v1/sessions/" + sid + "/ports/8000/");
  EXPECT_EQ(p->url(), "http://gw.example/v1/sessions/" + sid + "/ports/8000/");
  EXPECT_TRUE(p->signed_path().empty());
  EXPECT_EQ(Expose(bob_, sid, 8000).status().code(), absl::StatusCode::kNotFound);
  v1::ListPortsRequest list;
  list.set_session_id(sid);
  v1::ListPortsResponse listed;
  ASSERT_TRUE(ports_->List(alice_, list, &listed).ok());
  ASSERT_EQ(listed.ports_size(), 1);
  EXPECT_EQ(listed.ports(0).port(), 8000u);
  EXPECT_EQ(ports_->List(bob_, list, &listed).code(), absl::StatusCode::kNotFound);
}

TEST_F(PortsTest, RefusesBadPortsAndTtlsNamingTheField) {
  const std::string sid = NewSession(alice_);
  for (uint32_t port : {0u, 65536u, 100000u}) {
    absl::Status st = Expose(alice_, sid, port).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << port;
    EXPECT_THAT(st.message(), HasSubstr("port: expected 1..65535"));
  }
  absl::Status ttl = Expose(alice_, sid, 8000, absl::Hours(25)).status();
  EXPECT_EQ(ttl.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ttl.message(), HasSubstr("ports.max_signed_ttl_seconds"));
  for (absl::string_view text : {"0", "65536", "", "abc", "80a", "+80", " 80", "123456"}) {
    EXPECT_EQ(PortManager::ParsePort(text).status().code(), absl::StatusCode::kInvalidArgument)
        << text;
  }
  EXPECT_EQ(*PortManager::ParsePort("65535"), 65535);
}

TEST_F(PortsTest, ASignedUrlOpensThePortUntilItExpiresOnTheClock) {
  const std::string sid = NewSession(alice_);
  absl::StatusOr<v1::ExposedPort> p = Expose(alice_, sid, 8000, absl::Minutes(10));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(FromProto(p->signed_expires_at()), clock_.Now() + absl::Minutes(10));
  EXPECT_EQ(p->signed_url(), "http://gw.example" + p->signed_path());
  const std::string grant = GrantOf(*p);
  absl::StatusOr<Caller> who = ports_->CheckGrant(sid, 8000, grant);
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ(who->tenant, "alice");
  // Another port, another session, a changed expiry or signature: not the same grant.
  EXPECT_EQ(ports_->CheckGrant(sid, 8001, grant).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ports_->CheckGrant("s-other", 8000, grant).status().code(),
            absl::StatusCode::kPermissionDenied);
  std::string later = grant;
  later[0] = later[0] == '9' ? '8' : '9';
  EXPECT_THAT(ports_->CheckGrant(sid, 8000, later).status().message(),
              HasSubstr("signature does not match"));
  for (const std::string& bad :
       std::vector<std::string>{"", "abc", ".", "12.", "-5.aa", grant + "0"}) {
    EXPECT_EQ(ports_->CheckGrant(sid, 8000, bad).status().code(),
              absl::StatusCode::kPermissionDenied)
        << bad;
  }
  clock_.Advance(absl::Minutes(10) - absl::Seconds(1));
  EXPECT_TRUE(ports_->CheckGrant(sid, 8000, grant).ok());
  clock_.Advance(absl::Seconds(1));
  absl::Status expired = ports_->CheckGrant(sid, 8000, grant).status();
  EXPECT_EQ(expired.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(expired.message(), HasSubstr("expired at"));
}

TEST_F(PortsTest, UnexposingEndsItsSignedUrlsAndOpenConnections) {
  HostListener server;
  const std::string sid = NewSession(alice_);
  absl::StatusOr<v1::ExposedPort> p = Expose(alice_, sid, server.port(), absl::Minutes(10));
  ASSERT_TRUE(p.ok());
  auto conn = ports_->Open(alice_, sid, server.port());
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_FALSE((*conn)->cancel().cancelled());
  v1::UnexposePortRequest un;
  un.set_session_id(sid);
  un.set_port(server.port());
  v1::UnexposePortResponse done;
  EXPECT_EQ(ports_->Unexpose(bob_, un, &done).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(ports_->Unexpose(alice_, un, &done).ok());
  EXPECT_TRUE((*conn)->cancel().cancelled());
  EXPECT_EQ(ports_->CheckGrant(sid, server.port(), GrantOf(*p)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ports_->Open(alice_, sid, server.port()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ports_->Unexpose(alice_, un, &done).code(), absl::StatusCode::kNotFound);
}

TEST_F(PortsTest, LimitsGiveClearErrors) {
  HostListener server;
  const std::string sid = NewSession(alice_);
  ASSERT_TRUE(Expose(alice_, sid, server.port()).ok());
  ASSERT_TRUE(Expose(alice_, sid, 8001).ok());
  ASSERT_TRUE(Expose(alice_, sid, 8001).ok());  // again: the same exposure
  absl::Status third = Expose(alice_, sid, 8002).status();
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.message(), HasSubstr("ports.max_exposed_per_session"));

  EXPECT_EQ(ports_->Open(bob_, sid, server.port()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ports_->Open(alice_, sid, 8003).status().code(), absl::StatusCode::kNotFound);
  auto first = ports_->Open(alice_, sid, server.port());
  ASSERT_TRUE(first.ok()) << first.status();
  absl::Status second = ports_->Open(alice_, sid, server.port()).status();
  EXPECT_EQ(second.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(second.message(), HasSubstr("ports.max_connections_per_session"));
  first->reset();  // its place is free again
  EXPECT_TRUE(ports_->Open(alice_, sid, server.port()).ok());
  // Nothing listens on 8001 (on the fake's host: a free port).
  EXPECT_EQ(ports_->Open(alice_, sid, 8001).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ports_->Open(alice_, sid, server.port()).ok());  // a failed open kept no place
}

TEST_F(PortsTest, AnOpenConnectionEndsWithItsSession) {
  HostListener server;
  const std::string sid = NewSession(alice_);
  ASSERT_TRUE(Expose(alice_, sid, server.port()).ok());
  auto conn = ports_->Open(alice_, sid, server.port());
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE(sessions_->Close(alice_, sid, "done").ok());
  EXPECT_TRUE((*conn)->cancel().cancelled());
  EXPECT_EQ(ports_->Open(alice_, sid, server.port()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace sandgate::core
