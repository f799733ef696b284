#include "core/config.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/test_certs.h"

namespace sandgate::core {
namespace {

constexpr char kHash[] = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8";

TEST(ConfigTest, EmptyObjectGivesEmbeddedDefaults) {
  auto c = ParseConfig("{}", "test.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen, "unix:/run/sandgate/sandgated.sock");
  EXPECT_TRUE(c->tenants.empty());
  EXPECT_TRUE(ValidateConfig(*c).ok());
}

TEST(ConfigTest, ReadsEverySection) {
  auto c = ParseConfig(R"({
    // comments are allowed
    "listen": "tcp:127.0.0.1:0", "allow_plaintext_tokens": true, "state_dir": "/tmp/x",
    "max_concurrent_runs": 2, "tenants": [{"name": "a", "token_sha256": ")" +
                           std::string(kHash) + R"(", "operator": true}],
    "defaults": {"memory_bytes": 536870912, "command_timeout_seconds": 30},
    "local": {"uid_base": 200000, "uid_count": 10, "max_open_files": 4096},
    "sandbox_events": {"per_second": 5, "burst": 7, "max_per_log": 90},
    "processes": {"max_running_per_session": 3, "output_buffer_bytes": 8192,
                  "session_buffer_bytes": 65536, "max_read_wait_seconds": 5}})",
                       "test.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_concurrent_runs, 2u);
  EXPECT_EQ(c->sandbox_events.per_second, 5u);
  EXPECT_EQ(c->sandbox_events.burst, 7u);
  EXPECT_EQ(c->sandbox_events.max_per_log, 90u);
  EXPECT_EQ(c->processes.max_running_per_session, 3u);
  EXPECT_EQ(c->processes.output_buffer_bytes, 8192u);
  EXPECT_EQ(c->processes.session_buffer_bytes, 65536u);
  EXPECT_EQ(c->processes.max_read_wait, absl::Seconds(5));
  ASSERT_EQ(c->tenants.size(), 1u);
  EXPECT_TRUE(c->tenants[0].is_operator);
  EXPECT_EQ(c->memory_bytes, 536870912u);
  EXPECT_EQ(c->command_timeout, absl::Seconds(30));
  EXPECT_EQ(c->uid_base, 200000u);
  EXPECT_EQ(c->max_open_files, 4096u);
  EXPECT_EQ(ParseConfig("{}", "test.json")->max_open_files, 1024u);
  EXPECT_TRUE(ValidateConfig(*c).ok());
}

TEST(ConfigTest, TheShippedExampleParsesAndValidates) {
  auto c = LoadConfigFile(std::string(SANDGATE_SOURCE_DIR) + "/deploy/sandgated.example.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->session_expiry_warning, absl::Seconds(60));
  EXPECT_EQ(c->max_queued_input_bytes, 1ull << 30);
  EXPECT_EQ(c->session_max_lifetime, absl::Hours(2));
  // Its openai section names every key the section takes.
  EXPECT_TRUE(c->openai.configured());
  EXPECT_EQ(c->openai.api_key_file, "/etc/sandgate/openai.key");
  EXPECT_EQ(c->openai.request_timeout, absl::Seconds(600));
  EXPECT_EQ(c->openai.container_create_settle, absl::Seconds(60));
  EXPECT_EQ(c->sandbox_events.per_second, SandboxEventLimits().per_second);
  EXPECT_EQ(c->sandbox_events.max_per_log, SandboxEventLimits().max_per_log);
  EXPECT_TRUE(ValidateConfig(*c).ok());
}

TEST(ConfigTest, IsolationLevelsOfTheDaemonTenantsAndWarmPool) {
  EXPECT_EQ(ParseConfig("{}", "c")->isolation, "namespaces");
  EXPECT_EQ(ParseConfig("{}", "c")->gvisor_platform, "ptrace");
  auto c = ParseConfig(R"({"local": {"isolation": "gvisor", "gvisor_platform": "kvm",
                                     "runsc": "/opt/runsc"},
                           "warm_pool": [{"isolation": "gvisor"}],
                           "tenants": [{"name": "a", "token_sha256": ")" +
                           std::string(kHash) + R"(", "policy": {
                             "isolation_levels": ["namespaces", "gvisor"],
                             "default_isolation": "gvisor"}}]})",
                       "c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->isolation, "gvisor");
  EXPECT_EQ(c->gvisor_platform, "kvm");
  EXPECT_EQ(c->runsc_path, "/opt/runsc");
  EXPECT_EQ(c->warm_pool[0].isolation, "gvisor");
  EXPECT_EQ(c->tenants[0].policy.isolation_levels,
            (std::vector<std::string>{"namespaces", "gvisor"}));
  EXPECT_EQ(c->tenants[0].policy.default_isolation, "gvisor");
}

TEST(ConfigTest, ErrorsNameTheKey) {
  struct Case {
    std::string text, expect;
  };
  for (
      const Case& c : std::vector<Case>{
          {R"({"listn": "x"})", "listn: unknown key"},
          {R"({"max_concurrent_runs": "4"})", "max_concurrent_runs: expected a whole number"},
          {R"({"max_concurrent_runs": 0})", "max_concurrent_runs: out of range"},
          {R"({"defaults": {"memory": 1}})", "defaults.memory: unknown key"},
          {R"({"local": {"uid_base": -1}})", "local.uid_base: expected a whole number"},
          {R"({"local": {"max_open_files": 8}})", "local.max_open_files: out of range: 8"},
          {R"({"local": {"max_open_files": 2000000}})", "local.max_open_files: at most 1048576"},
          {R"({"tenants": [{"name": "a", "token_sha256": "abc"}]})", "tenants[0].token_sha256"},
          {R"({"tenants": [{"token_sha256": ")" + std::string(kHash) + R"("}]})",
           "tenants[0].name: required"},
          {R"({"defaults": {"command_timeout_seconds": -3}})", "defaults.command_timeout_seconds"},
          {"{", "not valid JSON"},
          {R"({"sandbox_events": {"per_second": 0}})", "sandbox_events.per_second: out of range"},
          {R"({"sandbox_events": {"rate": 5}})", "sandbox_events.rate: unknown key"},
          {R"({"processes": {"max_running_per_session": 0}})",
           "processes.max_running_per_session: out of range"},
          {R"({"processes": {"output_buffer_bytes": 65536, "session_buffer_bytes": 8192}})",
           "processes.session_buffer_bytes: must be at least processes.output_buffer_bytes"},
          {R"({"warm_pool": {"size": 1}})", "warm_pool: expected a list of shapes"},
          {R"({"warm_pool": [{"size": 0}]})", "warm_pool[0].size: out of range"},
          {R"({"warm_pool": [{"files": []}]})", "warm_pool[0].files: unknown key"},
          {R"({"warm_pool": [{"network_mode": "open"}]})", "warm_pool[0].network_mode: expected"},
          {R"({"local": {"isolation": "vm"}})",
           "local.isolation: 'vm' is not an isolation level (namespaces or gvisor)"},
          {R"({"local": {"gvisor_platform": "systrap"}})",
           "local.gvisor_platform: 'systrap' is not ptrace or kvm"},
          {R"({"warm_pool": [{"isolation": "kvm"}]})", "warm_pool[0].isolation: 'kvm' is not"},
          {R"({"tenants": [{"name": "a", "token_sha256": ")" + std::string(kHash) +
               R"(", "policy": {"isolation_levels": ["gvisor", "vm"]}}]})",
           "tenants[0].policy.isolation_levels: 'vm' is not an isolation level"},
          {R"({"tenants": [{"name": "a", "token_sha256": ")" + std::string(kHash) +
               R"(", "policy": {"isolation_levels": ["namespaces"], "default_isolation": "gvisor"}}]})",
           "tenants[0].policy.default_isolation: 'gvisor' is not one of its isolation_levels"},
          {R"({"warm_pool": [{"allowed_domains": ["a.com"]}]})",
           "warm_pool[0].allowed_domains: only for network_mode restricted"},
      }) {
    auto parsed = ParseConfig(c.text, "cfg.json");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), c.expect))
        << "'" << parsed.status().message() << "' should contain '" << c.expect << "'";
    EXPECT_TRUE(absl::StartsWith(parsed.status().message(), "cfg.json")) << parsed.status();
  }
}

TEST(ConfigTest, UpstreamsExistOnlyWithAKeySource) {
  auto c =
      ParseConfig(R"({"openai": {"api_key_file": "/etc/sandgate/openai.key", "model": "gpt-5.5"},
                          "chat": {"base_url": "http://127.0.0.1:8000/v1", "api_key_env": "VLLM_KEY"}})",
                  "c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->openai.configured());
  EXPECT_EQ(c->openai.base_url, "https://api.openai.com/v1");
  EXPECT_TRUE(c->chat.configured());
  EXPECT_FALSE(ParseConfig("{}", "c")->openai.configured());
  EXPECT_EQ(c->openai.container_create_settle, absl::Seconds(60));
  auto settle =
      ParseConfig(R"({"openai": {"api_key_env": "K", "container_create_settle_seconds": 2}})", "c");
  ASSERT_TRUE(settle.ok()) << settle.status();
  EXPECT_EQ(settle->openai.container_create_settle, absl::Seconds(2));
  for (const auto& [text, expect] : std::vector<std::pair<std::string, std::string>>{
           {R"({"openai": {"api_key_file": "a", "api_key_env": "B"}})", "not both"},
           {R"({"openai": {"base_url": "ftp://x"}})", "openai.base_url"},
           {R"({"openai": {"container_memory_limit": "2g"}})", "openai.container_memory_limit"},
           {R"({"chat": {"api_key_env": "K"}})", "chat.base_url: required"},
           {R"({"chat": {"container_memory_limit": "1g"}})",
            "chat.container_memory_limit: unknown key"},
           {R"({"chat": {"container_create_settle_seconds": 2}})",
            "chat.container_create_settle_seconds: unknown key"},
       }) {
    auto bad = ParseConfig(text, "c");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_TRUE(absl::StrContains(bad.status().message(), expect)) << bad.status();
  }
}

TEST(ConfigTest, DuplicateTenantsAreRefused) {
  std::string t = R"({"name": "a", "token_sha256": ")" + std::string(kHash) + R"("})";
  auto parsed = ParseConfig(R"({"tenants": [)" + t + "," + t + "]}", "c");
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), "duplicate tenant 'a'"));
}

TEST(ConfigTest, TcpWithoutTenantsIsRefusedUnlessAllowed) {
  Config c;
  c.listen = "tcp:0.0.0.0:7443";
  absl::Status st = ValidateConfig(c);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "tenants"));
  c.allow_unauthenticated_tcp = true;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.listen = "http://x";
  EXPECT_FALSE(ValidateConfig(c).ok());
}

// The HTTP port: a bad address is named; no tenants is refused unless allowed (client
// certificates are not checked there); tokens in the clear are refused unless allowed.
TEST(ConfigTest, HttpListenFollowsTheTcpRulesAndRefusesPlaintextTokens) {
  Config c;
  c.listen = "unix:/tmp/x.sock";
  c.http_listen = "localhost:8080";
  absl::Status st = ValidateConfig(c);
  EXPECT_TRUE(absl::StrContains(st.message(), "http_listen: expected IPv4 host:port")) << st;
  c.http_listen = "127.0.0.1:8080";
  st = ValidateConfig(c);
  EXPECT_TRUE(absl::StrContains(st.message(), "http_listen: TCP without tenants")) << st;
  c.tenants.push_back({});
  c.tenants.back().name = "a";
  c.tenants.back().token_sha256 = kHash;
  st = ValidateConfig(c);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "bearer tokens in the clear")) << st;
  c.allow_plaintext_tokens = true;
  EXPECT_TRUE(ValidateConfig(c).ok());
  auto parsed = ParseConfig(R"({"http_listen": 8080})", "c");
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), "http_listen")) << parsed.status();
}

TEST(ConfigTest, MissingFileIsNotFoundNamingIt) {
  auto c = LoadConfigFile("/nonexistent/sandgated.json");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "/nonexistent/sandgated.json"));
}

}  // namespace
}  // namespace sandgate::core

namespace sandgate::core {
namespace {

TEST(ConfigTest, TheMachinesCeilingsAreReadAndTheDefaultsMustFitUnderThem) {
  auto c = ParseConfig(
      R"({"limits": {"memory_bytes": 4294967296, "workspace_bytes": 1073741824,
    "max_processes": 512, "run_timeout_seconds": 3600, "command_timeout_seconds": 600}})",
      "test.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->limits.memory_bytes, 4ull << 30);
  EXPECT_EQ(c->limits.workspace_bytes, 1ull << 30);
  EXPECT_EQ(c->limits.max_processes, 512u);
  EXPECT_EQ(c->limits.run_timeout, absl::Hours(1));
  EXPECT_EQ(c->limits.command_timeout, absl::Minutes(10));
  EXPECT_TRUE(ValidateConfig(*c).ok());
  auto low = ParseConfig(R"({"limits": {"run_timeout_seconds": 60}})", "test.json");
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(ValidateConfig(*low).message(),
            "defaults.run_timeout_seconds: above limits.run_timeout_seconds");
  EXPECT_TRUE(
      absl::StrContains(ParseConfig(R"({"limits": {"memory": 1}})", "t.json").status().message(),
                        "limits.memory: unknown key"));
}

}  // namespace
}  // namespace sandgate::core

namespace sandgate::core {
namespace {

TEST(ConfigTest, WarmPoolShapes) {
  auto c = ParseConfig(R"({"max_sandboxes": 8, "warm_pool": [{"size": 3},
      {"size": 2, "memory_bytes": 536870912, "network_mode": "restricted",
       "allowed_domains": ["pypi.org"]}]})",
                       "t");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->warm_pool.size(), 2u);
  EXPECT_EQ(c->warm_pool[0].size, 3u);
  EXPECT_EQ(c->warm_pool[0].network_mode, "disabled");
  EXPECT_EQ(c->warm_pool[1].memory_bytes, 536870912u);
  EXPECT_EQ(c->warm_pool[1].allowed_domains, std::vector<std::string>{"pypi.org"});
  EXPECT_TRUE(ValidateConfig(*c).ok());
  EXPECT_EQ(c->warm_pool[0].image, "") << "the host's root";

  auto image = ParseConfig(R"({"warm_pool": [{"size": 1, "image": "py"}]})", "t");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->warm_pool[0].image, "py");
  for (const char* bad : {R"("../etc")", R"("a/b")", R"("")"}) {
    auto c2 = ParseConfig(absl::StrCat(R"({"warm_pool": [{"image": )", bad, "}]}"), "t");
    if (std::string(bad) == R"("")") {
      EXPECT_TRUE(c2.ok()) << "empty is the host's root";
      continue;
    }
    ASSERT_FALSE(c2.ok()) << bad;
    EXPECT_NE(c2.status().message().find("warm_pool[0].image: image name"), std::string::npos)
        << c2.status();
  }
}

TEST(ConfigTest, WarmPoolBeyondTheMachineIsRefused) {
  auto over = ParseConfig(R"({"max_sandboxes": 4, "warm_pool": [{"size": 3}, {"size": 2}]})", "t");
  ASSERT_TRUE(over.ok());
  absl::Status st = ValidateConfig(*over);
  EXPECT_NE(st.message().find("warm_pool: 5 sandboxes kept ready, more than max_sandboxes (4)"),
            std::string::npos)
      << st;
  auto big = ParseConfig(R"({"warm_pool": [{"memory_bytes": 137438953472}]})", "t");
  ASSERT_TRUE(big.ok());
  EXPECT_NE(ValidateConfig(*big).message().find("warm_pool[0]: a limit above"), std::string::npos);
}

// The store: SQLite by default (unchanged: state_dir/state.db), PostgreSQL by DSN and a
// password file; a password in the DSN is refused naming the key, never echoed.
TEST(ConfigTest, StoreIsSqliteByDefaultOrPostgresWithADsnAndAPasswordFile) {
  auto def = ParseConfig("{}", "t.json");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->store.type, "sqlite");
  auto pg = ParseConfig(R"({"store": {"type": "postgres",
      "dsn": "host=/run/postgresql dbname=sandgate user=sandgate",
      "password_file": "/etc/sandgate/pg-password", "pool_size": 4}})",
                        "t.json");
  ASSERT_TRUE(pg.ok()) << pg.status();
  EXPECT_EQ(pg->store.type, "postgres");
  EXPECT_EQ(pg->store.dsn, "host=/run/postgresql dbname=sandgate user=sandgate");
  EXPECT_EQ(pg->store.password_file, "/etc/sandgate/pg-password");
  EXPECT_EQ(pg->store.pool_size, 4u);
  EXPECT_TRUE(
      ParseConfig(R"({"store": {"type": "postgres", "dsn": "user=sg_password_user"}})", "t.json")
          .ok())
      << "a user named after the word is not a password";
  struct Case {
    std::string text, expect;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"store": {"type": "mysql"}})", "store.type: expected sqlite or postgres"},
           {R"({"store": {"type": "postgres"}})", "store.dsn: required for type postgres"},
           {R"({"store": {"dsn": "dbname=x"}})", "store.dsn, store.password_file: only for"},
           {R"({"store": {"type": "postgres", "dsn": "dbname=x password=s3cret"}})",
            "store.dsn: must not hold a password"},
           {R"({"store": {"type": "postgres", "dsn": "postgresql://u:s3cret@db/x"}})",
            "store.dsn: must not hold a password"},
           {R"({"store": {"type": "postgres", "dsn": "postgresql://db/x?password=s3cret"}})",
            "store.dsn: must not hold a password"},
           {R"({"store": {"type": "postgres", "dsn": "dbname=x password =s3cret"}})",
            "store.dsn: must not hold a password"},
           {R"({"store": {"type": "postgres", "dsn": "dbname=x", "pool_size": 0}})",
            "store.pool_size: out of range"},
           {R"({"store": {"kind": "postgres"}})", "store.kind: unknown key"},
       }) {
    auto parsed = ParseConfig(c.text, "cfg.json");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), c.expect))
        << "'" << parsed.status().message() << "' should contain '" << c.expect << "'";
    EXPECT_FALSE(absl::StrContains(parsed.status().message(), "s3cret")) << parsed.status();
  }
}

}  // namespace
}  // namespace sandgate::core

namespace sandgate::core {
namespace {

TEST(ConfigTest, ReplicaKeys) {
  auto c =
      ParseConfig(R"({"replica": {"id": "gw-1.eu_west", "advertise_address": "tcp:10.0.0.5:7443",
                                       "lease_seconds": 30, "renew_seconds": 10}})",
                  "t");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->replica.id, "gw-1.eu_west");
  EXPECT_EQ(c->replica.advertise_address, "tcp:10.0.0.5:7443");
  EXPECT_EQ(c->replica.lease_period, absl::Seconds(30));
  EXPECT_EQ(c->replica.renew_interval, absl::Seconds(10));
  EXPECT_TRUE(ValidateConfig(*c).ok());
  auto defaults = ParseConfig("{}", "t");
  EXPECT_EQ(defaults->replica.lease_period, absl::Seconds(15));
  EXPECT_EQ(defaults->replica.renew_interval, absl::Seconds(5));
  EXPECT_EQ(defaults->replica.follow_poll, absl::Milliseconds(500));
  auto poll = ParseConfig(R"({"replica": {"follow_poll_ms": 250}})", "t");
  ASSERT_TRUE(poll.ok()) << poll.status();
  EXPECT_EQ(poll->replica.follow_poll, absl::Milliseconds(250));
  EXPECT_EQ(defaults->replica.claim_poll, absl::Seconds(1));
  auto claim = ParseConfig(R"({"replica": {"claim_poll_ms": 200}})", "t");
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->replica.claim_poll, absl::Milliseconds(200));
  for (const char* key : {"follow_poll_ms", "claim_poll_ms"}) {
    for (const char* bad : {"0", "9", "60001", "1.5", "\"fast\""}) {
      auto refused = ParseConfig(absl::StrCat(R"({"replica": {")", key, R"(": )", bad, "}}"), "t");
      ASSERT_FALSE(refused.ok()) << key << " " << bad;
      EXPECT_TRUE(
          absl::StrContains(refused.status().message(), absl::StrCat("replica.", key, ": ")))
          << refused.status();
    }
  }

  EXPECT_TRUE(absl::StrContains(ParseConfig(R"({"replica": {"lease": 1}})", "t").status().message(),
                                "replica.lease: unknown key"));
  EXPECT_TRUE(
      absl::StrContains(ParseConfig(R"({"replica": {"lease_seconds": 0}})", "t").status().message(),
                        "replica.lease_seconds: expected a positive number of seconds"));
  auto slash = ParseConfig(R"({"replica": {"id": "a/b"}})", "t");
  ASSERT_TRUE(slash.ok());
  EXPECT_TRUE(absl::StrContains(ValidateConfig(*slash).message(), "replica.id: 'a/b' is not"));
  auto slow = ParseConfig(R"({"replica": {"lease_seconds": 10, "renew_seconds": 6}})", "t");
  ASSERT_TRUE(slow.ok());
  EXPECT_TRUE(absl::StrContains(ValidateConfig(*slow).message(),
                                "replica.renew_seconds: at most half of replica.lease_seconds"));
}

}  // namespace
}  // namespace sandgate::core

// TLS on the listener (issue 13): the keys, and the two rules of a TCP listener.
namespace sandgate::core {
namespace {

TenantConfig OneTenant() {
  TenantConfig t;
  t.name = "a";
  t.token_sha256 = kHash;
  return t;
}

TEST(ConfigTlsTest, TheTlsSectionIsReadAndItsMistakesNamed) {
  auto c = ParseConfig(R"({"tls": {"cert_file": "/c.pem", "key_file": "/k.pem",
      "client_ca_file": "/ca.pem", "require_client_cert": true, "reload_interval_seconds": 3},
      "allow_plaintext_tokens": true})",
                       "t.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tls.cert_file, "/c.pem");
  EXPECT_EQ(c->tls.key_file, "/k.pem");
  EXPECT_EQ(c->tls.client_ca_file, "/ca.pem");
  EXPECT_TRUE(c->tls.require_client_cert);
  EXPECT_EQ(c->tls.reload_interval_seconds, 3u);
  EXPECT_TRUE(c->allow_plaintext_tokens);
  EXPECT_EQ(ParseConfig("{}", "t")->tls.reload_interval_seconds, 10u);
  for (const auto& [text, expect] : std::vector<std::pair<std::string, std::string>>{
           {R"({"tls": {"cert_file": "/c.pem"}})", "tls: cert_file and key_file are both required"},
           {R"({"tls": {"cert_file": "/c", "key_file": "/k", "require_client_cert": true}})",
            "tls.require_client_cert: needs client_ca_file"},
           {R"({"tls": {"cert_file": "/c", "key_file": "/k", "reload_interval_seconds": 0}})",
            "tls.reload_interval_seconds: out of range"},
           {R"({"tls": {"cert": "/c"}})", "tls.cert: unknown key"},
           {R"({"allow_plaintext_tokens": "yes"})",
            "allow_plaintext_tokens: expected true or false"},
       }) {
    auto bad = ParseConfig(text, "t");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_TRUE(absl::StrContains(bad.status().message(), expect)) << bad.status();
  }
}

TEST(ConfigTlsTest, TokensOverPlaintextTcpAreRefusedUnlessOptedIn) {
  Config c;
  c.listen = "tcp:0.0.0.0:7443";
  c.tenants.push_back(OneTenant());
  absl::Status st = ValidateConfig(c);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "bearer tokens in the clear")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), R"(add "tls")")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), R"("allow_plaintext_tokens": true)")) << st;
  c.allow_plaintext_tokens = true;
  EXPECT_TRUE(ValidateConfig(c).ok());
  // A Unix socket carries tokens between local processes only.
  c.allow_plaintext_tokens = false;
  c.listen = "unix:/tmp/s.sock";
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(ConfigTlsTest, ClientCertificatesAuthenticateTcpWithoutTenants) {
  Config c;
  c.listen = "tcp:127.0.0.1:0";
  c.tls.cert_file = "/nonexistent/c.pem";
  c.tls.key_file = "/nonexistent/k.pem";
  // TLS alone encrypts but proves nothing about the caller.
  EXPECT_TRUE(absl::StrContains(ValidateConfig(c).message(), "tls.require_client_cert"));
  c.tls.client_ca_file = "/nonexistent/ca.pem";
  c.tls.require_client_cert = true;
  // Past the rules, the files are read: a missing one is named.
  absl::Status st = ValidateConfig(c);
  EXPECT_TRUE(absl::StrContains(st.message(), "tls.cert_file: /nonexistent/c.pem cannot be read"))
      << st;
}

TEST(ConfigTlsTest, TlsIsForTcpOnly) {
  Config c;
  c.tls.cert_file = "/c.pem";
  c.tls.key_file = "/k.pem";
  EXPECT_TRUE(absl::StrContains(ValidateConfig(c).message(), "tls: only for a TCP listen"));
}

TEST(ConfigTlsTest, GoodFilesPass) {
  testing::ScopedTempDir tmp("sandgate-config-tls");
  ASSERT_TRUE(tmp.ok());
  auto certs = testing::TestCertificates::Create(tmp.path());
  ASSERT_TRUE(certs.ok()) << certs.status();
  Config c;
  c.listen = "tcp:127.0.0.1:0";
  c.tenants.push_back(OneTenant());
  c.tls.cert_file = certs->server.cert;
  c.tls.key_file = certs->server.key;
  c.tls.client_ca_file = certs->ca;
  c.tls.require_client_cert = true;
  EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c);
  c.tls.key_file = certs->client.key;
  EXPECT_TRUE(absl::StrContains(ValidateConfig(c).message(), "does not match the certificate"));
}

}  // namespace
}  // namespace sandgate::core
