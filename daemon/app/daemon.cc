#include "app/daemon.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/chat_agent.h"
#include "agent/openai_agent.h"
#include "agent/reference_agent.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "core/api.h"
#include "core/event_log.h"
#include "core/executor.h"
#include "core/fair_executor.h"
#include "core/image_api.h"
#include "core/images.h"
#include "core/metrics.h"
#include "core/mmdebstrap_builder.h"
#include "core/owner.h"
#include "core/ports.h"
#include "core/processes.h"
#include "core/replica.h"
#include "core/run_manager.h"
#include "core/snapshots.h"
#include "core/tenants.h"
#include "sandbox/agents/agents_provider.h"
#include "sandbox/local/bwrap_provider.h"
#include "sandbox/openai/openai_provider.h"
#include "server/forwarding.h"
#include "server/grpc_server.h"
#include "server/http_api.h"
#include "server/http_server.h"
#include "server/image_service.h"
#include "server/port_proxy.h"
#include "server/rest_image_progress.h"
#include "server/service.h"
#include "store/artifact_store.h"
#include "store/file_artifact_store.h"
#include "store/postgres_admission_store.h"
#include "store/postgres_artifact_store.h"
#include "store/postgres_notifier.h"
#include "store/postgres_replica_store.h"
#include "store/postgres_snapshot_store.h"
#include "store/postgres_store.h"
#include "store/sqlite_admission_store.h"
#include "store/sqlite_replica_store.h"
#include "store/sqlite_snapshot_store.h"
#include "store/sqlite_store.h"
#include "store/state_dir_lock.h"
#include "upstream/agents_client.h"
#include "upstream/credentials.h"
#include "upstream/curl_http_client.h"
#include "upstream/openai_client.h"
#include "upstream/retry.h"

namespace sandgate::app {
namespace {

absl::Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return errors::FromErrno(errno, absl::StrCat("create directory ", path));
  }
  return absl::OkStatus();
}

// sandgate-init beside the running daemon (a build tree, or an install that keeps them
// together), else the configured libexec default.
std::string FindInit(const core::Config& config) {
  if (!config.init_path.empty()) return config.init_path;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    std::string beside = dir + "/sandgate-init";
    if (access(beside.c_str(), X_OK) == 0) return beside;
    std::string libexec = dir + "/../libexec/sandgate/sandgate-init";
    if (access(libexec.c_str(), X_OK) == 0) return libexec;
  }
  return sandbox::BwrapOptions().init_path;
}

// One OpenAI-compatible upstream: where its key comes from, its HTTP stack, its client.
struct Upstream {
  std::unique_ptr<upstream::Credentials> credentials;
  std::unique_ptr<upstream::CurlHttpClient> curl;
  std::unique_ptr<upstream::RetryingHttpClient> http;
  std::unique_ptr<upstream::OpenAiClient> client;
};

// `name` ("openai", "chat") labels its failed attempts in sandgate_upstream_errors_total.
std::unique_ptr<Upstream> MakeUpstream(const core::UpstreamConfig& c, const std::string& name,
                                       core::Metrics* metrics) {
  auto u = std::make_unique<Upstream>();
  if (!c.api_key_file.empty()) {
    u->credentials = std::make_unique<upstream::FileCredentials>(c.api_key_file);
  } else {
    u->credentials = std::make_unique<upstream::EnvCredentials>(c.api_key_env);
  }
  u->curl = std::make_unique<upstream::CurlHttpClient>(upstream::CurlHttpClientOptions{});
  upstream::RetryOptions retry;
  retry.on_failed_attempt = [name, metrics](const upstream::HttpRequest& request,
                                            const absl::StatusOr<upstream::HttpResponse>& outcome,
                                            bool retrying) {
    std::optional<std::string> kind = upstream::UpstreamErrorKind(request, outcome);
    if (!kind) return;
    metrics->upstream_errors.Add({{"upstream", name},
                                  {"endpoint", upstream::EndpointLabel(request.url)},
                                  {"kind", *kind},
                                  {"retried", retrying ? "true" : "false"}});
  };
  u->http = std::make_unique<upstream::RetryingHttpClient>(u->curl.get(), std::move(retry));
  upstream::OpenAiOptions options;
  options.timeout = c.request_timeout;
  u->client = std::make_unique<upstream::OpenAiClient>(u->http.get(), u->credentials.get(),
                                                       c.base_url, options);
  return u;
}

// The state store the config names: SQLite in state_dir (one daemon), or the PostgreSQL
// database replicas share. `postgres` is set to the latter's pool, for the parts that keep
// their own tables there.
absl::StatusOr<std::unique_ptr<store::Store>> OpenStore(const core::Config& c,
                                                        store::PostgresDatabase** postgres,
                                                        store::PostgresOptions* options) {
  if (c.store.type != "postgres") {
    SANDGATE_ASSIGN_OR_RETURN(auto sqlite, store::SqliteStore::Open(c.state_dir + "/state.db"));
    return std::unique_ptr<store::Store>(std::move(sqlite));
  }
  store::PostgresOptions o;
  o.dsn = c.store.dsn;
  o.pool_size = static_cast<int>(c.store.pool_size);
  if (!c.store.password_file.empty()) {
    SANDGATE_ASSIGN_OR_RETURN(o.password, store::ReadPasswordFile(c.store.password_file));
  }
  SANDGATE_ASSIGN_OR_RETURN(auto pg, store::PostgresStore::Open(o));
  *postgres = &pg->database();
  *options = o;
  return std::unique_ptr<store::Store>(std::move(pg));
}

}  // namespace

struct Daemon::Parts {
  // Held from before anything in state_dir is opened until after everything is closed (the
  // first member: destroyed last).
  std::unique_ptr<store::StateDirLock> state_lock;
  core::Config config;
  std::unique_ptr<store::Store> store;
  store::PostgresDatabase* postgres = nullptr;  // store's pool when store.type is postgres
  store::PostgresOptions postgres_options;      // how it was opened
  // Wakes followers of other replicas' runs (PostgreSQL only); outlives the event log.
  std::unique_ptr<store::PostgresNotifier> notifier;
  // The run queue and tenant quotas every replica of the store shares.
  std::unique_ptr<store::AdmissionStore> admission;
  std::unique_ptr<store::ArtifactStore> artifacts;
  std::unique_ptr<store::SnapshotStore> snapshot_records;
  std::unique_ptr<core::EventLog> events;
  std::unique_ptr<sandbox::BwrapProvider> local;
  std::unique_ptr<agent::ReferenceAgent> reference;
  std::unique_ptr<Upstream> openai_upstream, chat_upstream;
  std::unique_ptr<sandbox::OpenAiProvider> openai_provider;
  std::unique_ptr<agent::OpenAiAgent> openai_agent;
  std::unique_ptr<upstream::AgentsClient> agents_client;  // the Agents API, on the openai upstream
  std::unique_ptr<sandbox::AgentsProvider> agents_provider;
  std::unique_ptr<agent::ChatAgent> chat_agent;
  std::unique_ptr<core::Metrics> metrics;
  std::unique_ptr<core::AuditLog> audit;
  std::unique_ptr<server::HttpServer> metrics_http;  // metrics_listen: /metrics alone
  std::unique_ptr<server::HttpServer> http;          // http_listen: REST, events, /metrics
  server::ServiceDeps http_deps;                     // the REST routes' (they outlive it)
  // Sandbox images (docs/images.md): after the local provider, whose sessions they ask about.
  std::unique_ptr<core::MmdebstrapBuilder> image_builder;
  std::unique_ptr<core::ImageStore> images;
  std::unique_ptr<core::ImageApi> image_api;
  std::unique_ptr<core::SandboxBudget> budget;
  std::unique_ptr<core::WarmPool> warm_pool;  // before sessions: they take from it
  std::unique_ptr<core::SessionManager> sessions;
  // After sessions: destroyed first (its processes hold sessions' leases).
  std::unique_ptr<core::ProcessManager> processes;
  // After sessions too (its connections hold leases); the proxy relays them on the REST port
  // and is stopped before it (Drain).
  std::unique_ptr<core::PortManager> ports;
  std::unique_ptr<server::PortProxy> port_proxy;
  std::unique_ptr<core::Snapshots> snapshots;  // after sessions: its calls hold leases
  std::unique_ptr<core::RunManager> runs;
  std::unique_ptr<core::Tenants> tenants;
  std::unique_ptr<core::Executor> io;
  std::unique_ptr<core::FairExecutor> exec;
  std::unique_ptr<core::Api> api;
  std::unique_ptr<server::SandgateService> service;
  std::unique_ptr<server::ImageService> image_service;
  std::unique_ptr<server::GrpcServer> server;
  // This daemon as a replica (core/replica.h): its lease, and the journal as it sees it
  // (providers record through it; the start-up sweep lists only its own entries).
  std::unique_ptr<store::ReplicaStore> leases;
  std::unique_ptr<core::ReplicaJournal> journal;
  std::unique_ptr<core::ReplicaMember> replica;
  // Calls on another replica's runs and sessions go to their owner (server/forwarding.h).
  std::unique_ptr<core::OwnerLookup> owners;
  std::unique_ptr<server::Forwarder> forwarder;
  bool drained = false;
};

Daemon::Daemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Daemon::~Daemon() { Drain(); }

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Create(core::Config config) {
  SANDGATE_RETURN_IF_ERROR(core::ValidateConfig(config));
  server::InstallProtobufLogHandler();
  auto p = std::make_unique<Parts>();
  p->config = std::move(config);
  if (p->config.replica.id.empty()) {
    p->config.replica.id = core::DefaultReplicaId(p->config.state_dir);
  }
  const core::Config& c = p->config;
  SANDGATE_RETURN_IF_ERROR(MakeDir(c.state_dir, 0700));
  // Before the store, the socket, the lease or the sweep: another daemon on this directory
  // would lose all of them to this one.
  SANDGATE_ASSIGN_OR_RETURN(p->state_lock, store::StateDirLock::Acquire(c.state_dir));
  SANDGATE_ASSIGN_OR_RETURN(p->store, OpenStore(c, &p->postgres, &p->postgres_options));
  // Artifacts live with the state: in the shared database when there is one, so any replica
  // serves any run's (store/artifact_store.h says why not a shared directory).
  if (p->postgres != nullptr) {
    SANDGATE_ASSIGN_OR_RETURN(p->artifacts, store::PostgresArtifactStore::Open(p->postgres));
    SANDGATE_ASSIGN_OR_RETURN(p->snapshot_records, store::PostgresSnapshotStore::Open(p->postgres));
  } else {
    SANDGATE_ASSIGN_OR_RETURN(p->artifacts,
                              store::FileArtifactStore::Open(c.state_dir + "/artifacts"));
    SANDGATE_ASSIGN_OR_RETURN(p->snapshot_records,
                              store::SqliteSnapshotStore::Open(c.state_dir + "/state.db"));
  }
  core::FollowOptions follow{nullptr, c.replica.follow_poll};
  if (p->postgres != nullptr) {
    SANDGATE_ASSIGN_OR_RETURN(p->notifier,
                              store::PostgresNotifier::Start(p->postgres_options, p->postgres));
    follow.notifier = p->notifier.get();
  }
  p->events =
      std::make_unique<core::EventLog>(p->store.get(), Clock::Real(), follow, c.sandbox_events);
  if (p->postgres != nullptr) {
    SANDGATE_ASSIGN_OR_RETURN(p->leases, store::PostgresReplicaStore::Create(p->postgres));
  } else {
    SANDGATE_ASSIGN_OR_RETURN(p->leases,
                              store::SqliteReplicaStore::Open(c.state_dir + "/state.db"));
  }
  if (p->postgres != nullptr) {
    SANDGATE_ASSIGN_OR_RETURN(p->admission, store::PostgresAdmissionStore::Create(p->postgres));
  } else {
    SANDGATE_ASSIGN_OR_RETURN(p->admission,
                              store::SqliteAdmissionStore::Open(c.state_dir + "/state.db"));
  }
  p->journal = std::make_unique<core::ReplicaJournal>(p->store.get(), c.replica.id);
  SANDGATE_ASSIGN_OR_RETURN(p->audit,
                            core::AuditLog::Open(c.state_dir + "/audit.log", Clock::Real()));

  sandbox::BwrapOptions local;
  local.bwrap_path = c.bwrap_path;
  local.init_path = FindInit(c);
  local.uid_base = c.uid_base;
  local.uid_pool_size = c.uid_count;
  local.max_open_files = c.max_open_files;
  local.runsc_path = c.runsc_path;
  local.gvisor_platform = c.gvisor_platform;
  local.gvisor_probe_timeout = absl::Seconds(c.gvisor_probe_timeout_seconds);
  absl::StatusOr<std::unique_ptr<sandbox::BwrapProvider>> provider =
      sandbox::BwrapProvider::Create(local, p->journal.get());
  if (!provider.ok()) {
    return absl::Status(provider.status().code(),
                        absl::StrCat("local provider: ", provider.status().message()));
  }
  p->local = std::move(*provider);
  p->reference = std::make_unique<agent::ReferenceAgent>();
  p->metrics = std::make_unique<core::Metrics>();
  std::map<std::string, sandbox::Provider*> providers = {{"local", p->local.get()}};
  std::map<std::string, agent::Agent*> agents = {{"reference", p->reference.get()}};
  if (c.openai.configured()) {
    p->openai_upstream = MakeUpstream(c.openai, "openai", p->metrics.get());
    sandbox::OpenAiProviderOptions options;
    options.memory_limit = c.openai.container_memory_limit;
    options.expires_after_minutes = static_cast<int>(c.openai.container_expires_after_minutes);
    options.keepalive_interval =
        std::min(absl::Minutes(5), absl::Minutes(c.openai.container_expires_after_minutes) / 4);
    options.keepalive_model = c.openai.model;  // runs `true` when listing files is no touch
    options.max_file_bytes = c.max_input_bytes;
    options.create_settle = c.openai.container_create_settle;
    SANDGATE_ASSIGN_OR_RETURN(p->openai_provider,
                              sandbox::OpenAiProvider::Create(p->openai_upstream->client.get(),
                                                              p->journal.get(), options));
    p->openai_agent = std::make_unique<agent::OpenAiAgent>(
        p->openai_upstream->client.get(),
        agent::ModelAgentOptions{c.openai.model, c.openai.max_turns});
    providers["openai"] = p->openai_provider.get();
    agents["openai"] = p->openai_agent.get();
    // The Agents API (beta) on the same upstream, key and retry policy: the openai agent's
    // loop and its sandbox both run there.
    upstream::AgentsOptions agents_options;
    agents_options.http.timeout = c.openai.request_timeout;
    p->agents_client = std::make_unique<upstream::AgentsClient>(
        p->openai_upstream->http.get(), p->openai_upstream->credentials.get(), c.openai.base_url,
        agents_options);
    SANDGATE_ASSIGN_OR_RETURN(p->agents_provider, sandbox::AgentsProvider::Create(
                                                      p->agents_client.get(), p->store.get()));
    providers["openai-agents"] = p->agents_provider.get();
  }
  if (c.chat.configured()) {
    p->chat_upstream = MakeUpstream(c.chat, "chat", p->metrics.get());
    p->chat_agent = std::make_unique<agent::ChatAgent>(
        p->chat_upstream->client.get(), agent::ModelAgentOptions{c.chat.model, c.chat.max_turns});
    agents["chat"] = p->chat_agent.get();
  }

  p->image_builder = std::make_unique<core::MmdebstrapBuilder>(c.mmdebstrap_path);
  core::ImageStoreOptions image_options;
  image_options.dir = core::ImagesDir(c.state_dir);
  image_options.builder = p->image_builder.get();
  image_options.max_builds = c.max_image_builds;
  SANDGATE_ASSIGN_OR_RETURN(p->images, core::ImageStore::Create(std::move(image_options)));
  p->images->SetInUse(
      [local = p->local.get()](const std::string& root) { return local->SessionsOnRoot(root); });
  p->image_api = std::make_unique<core::ImageApi>(p->images.get());

  p->budget = std::make_unique<core::SandboxBudget>(c.max_sandboxes);
  core::SessionManagerDeps session_deps;
  session_deps.budget = p->budget.get();
  session_deps.events = p->events.get();
  session_deps.metrics = p->metrics.get();
  session_deps.config = &p->config;
  session_deps.store = p->store.get();
  session_deps.clock = Clock::Real();
  session_deps.providers = providers;
  session_deps.admission = p->admission.get();
  session_deps.images = p->images.get();
  p->warm_pool = std::make_unique<core::WarmPool>(core::WarmPoolDeps{
      &p->config, p->local.get(), p->budget.get(), Clock::Real(), p->images.get()});
  session_deps.warm_pool = p->warm_pool.get();
  p->images->SetWarmPool(
      [pool = p->warm_pool.get()](const std::string& root) { return pool->HoldRoot(root); },
      [pool = p->warm_pool.get()](const std::string& root) { pool->ResumeRoot(root); });
  p->sessions = std::make_unique<core::SessionManager>(session_deps);
  p->processes = std::make_unique<core::ProcessManager>(
      core::ProcessManager::Deps{&p->config, p->sessions.get(), Clock::Real()});
  SANDGATE_ASSIGN_OR_RETURN(std::string signing_key,
                            core::PortManager::LoadSigningKey(p->config.ports));
  p->ports = std::make_unique<core::PortManager>(
      core::PortManager::Deps{&p->config.ports, p->sessions.get(), Clock::Real(),
                              std::move(signing_key), p->config.ports.public_url});
  p->snapshots = std::make_unique<core::Snapshots>(
      core::Snapshots::Deps{&p->config, p->sessions.get(), p->snapshot_records.get(),
                            p->artifacts.get(), Clock::Real(), c.replica.id});

  core::RunManagerDeps deps;
  deps.config = &p->config;
  deps.store = p->store.get();
  deps.artifacts = p->artifacts.get();
  deps.events = p->events.get();
  deps.clock = Clock::Real();
  deps.providers = providers;
  deps.agents = agents;
  deps.sessions = p->sessions.get();
  deps.budget = p->budget.get();
  deps.metrics = p->metrics.get();
  deps.warm_pool = p->warm_pool.get();
  deps.images = p->images.get();
  deps.journal = p->journal.get();
  core::Snapshots* snapshots = p->snapshots.get();
  deps.purge_snapshots = [snapshots](absl::Time cutoff) { return snapshots->PurgeBefore(cutoff); };
  p->tenants = std::make_unique<core::Tenants>(c.tenants);
  deps.admission = p->admission.get();
  deps.notifier = p->notifier.get();  // null on SQLite: the claim loop polls only
  deps.tenants = p->tenants.get();
  p->runs = std::make_unique<core::RunManager>(std::move(deps));
  p->io = std::make_unique<core::Executor>("io", 4, 4096);
  p->exec = std::make_unique<core::FairExecutor>("exec", c.max_concurrent_execs, 1024);
  core::ApiDeps api;
  api.runs = p->runs.get();
  api.sessions = p->sessions.get();
  api.max_transfer_bytes = c.max_input_bytes;
  // The signal thread in main drains; an operator's Drain takes the same path.
  api.request_drain = [] { kill(getpid(), SIGTERM); };
  api.journal = p->store.get();  // every replica's entries: the cleanup state
  api.processes = p->processes.get();
  api.ports = p->ports.get();
  api.snapshots = p->snapshots.get();
  core::ReplicaDeps replica;
  replica.leases = p->leases.get();
  replica.store = p->store.get();
  replica.journal = p->store.get();
  replica.events = p->events.get();
  replica.clock = Clock::Real();
  for (const auto& [name, provider] : providers) {
    // A local sandbox lives on its own host: only its replica can delete it.
    if (name != "local") replica.remote_providers[name] = provider;
  }
  core::RunManager* runs = p->runs.get();
  replica.admission = p->admission.get();
  replica.metrics = p->metrics.get();
  // Taken over: the runs and sessions still going here were settled by the claimer.
  core::SessionManager* sessions = p->sessions.get();
  const absl::Duration grace = c.drain_grace;
  replica.end_local_work = [runs, sessions, grace](const std::string& why) {
    size_t left = runs->EndAll(why, grace);
    if (left > 0) log::Error("replica.work_not_ended", {{"active_runs", left}});
    sessions->CloseAll(why);
  };
  replica.own_providers = providers;
  replica.own_journal = p->journal.get();
  p->replica = std::make_unique<core::ReplicaMember>(std::move(replica), c.replica);
  core::ReplicaMember* member = p->replica.get();
  api.can_take_work = [member] { return member->CanTakeWork(); };
  // A replica that lost its lease claims no waiting run either: its writes would be refused.
  runs->SetClaimGate([member] { return member->CanTakeWork(); });
  p->api = std::make_unique<core::Api>(std::move(api));
  server::ServiceDeps sd;
  sd.api = p->api.get();
  sd.images = p->image_api.get();
  sd.tenants = p->tenants.get();
  sd.runs = p->runs.get();
  sd.events = p->events.get();
  sd.sessions = p->sessions.get();
  sd.audit = p->audit.get();
  sd.io = p->io.get();
  sd.exec = p->exec.get();
  sd.heartbeat_interval = c.heartbeat_interval;
  core::HeldHere held{[sessions](const std::string& id) { return sessions->Holds(id); },
                      [runs](const std::string& id) { return runs->Holds(id); }};
  p->owners = std::make_unique<core::OwnerLookup>(p->store.get(), p->leases.get(), c.replica.id,
                                                  Clock::Real(), std::move(held));
  p->forwarder = server::Forwarder::FromConfig(p->owners.get(), c);
  sd.forwarder = p->forwarder.get();
  p->http_deps = sd;
  p->service = std::make_unique<server::SandgateService>(sd);
  p->image_service = std::make_unique<server::ImageService>(sd);
  return std::unique_ptr<Daemon>(new Daemon(std::move(p)));
}

// The HTTP ports: metrics_listen (only /metrics, public) and http_listen (the REST API, its
// event streams and /metrics for an operator's token; HTTPS with the tls files, read here and
// re-read every tls.reload_interval_seconds). Each logs and prints the address it serves on
// (port 0 = the one chosen).
absl::Status Daemon::StartHttp(Parts& p) {
  core::Metrics* metrics = p.metrics.get();
  auto render = [metrics] { return metrics->Render(); };
  if (!p.config.metrics_listen.empty()) {
    server::HttpServerOptions o;
    o.address = p.config.metrics_listen;
    o.key_name = "metrics_listen";
    SANDGATE_ASSIGN_OR_RETURN(p.metrics_http,
                              server::HttpServer::Start(o, {server::MetricsRoute(render)}));
    std::string address = absl::StrCat(server::HttpHost(o.address), ":", p.metrics_http->port());
    log::Info("daemon.metrics", {{"address", address}});
    std::fprintf(stdout, "sandgated metrics on http://%s/metrics\n", address.c_str());
  }
  if (!p.config.http_listen.empty()) {
    server::HttpServerOptions o;
    o.address = p.config.http_listen;
    o.max_body_bytes = p.config.max_input_bytes * 2 + (1 << 20);  // base64 of the inputs
    if (p.config.tls.enabled()) {
      SANDGATE_ASSIGN_OR_RETURN(TlsPem pem,
                                ReadTlsFiles({p.config.tls.cert_file, p.config.tls.key_file, ""},
                                             {"tls.cert_file", "tls.key_file", ""}));
      o.tls_cert_pem = pem.cert_chain;
      o.tls_key_pem = pem.private_key;
      o.tls_cert_file = p.config.tls.cert_file;
      o.tls_key_file = p.config.tls.key_file;
      o.tls_reload_interval_seconds = p.config.tls.reload_interval_seconds;
    }
    server::HttpServer::Routes routes = server::RestRoutes(p.http_deps);
    p.port_proxy = std::make_unique<server::PortProxy>(
        server::PortProxy::Deps{p.tenants.get(), p.ports.get(), &p.config.ports, Clock::Real(),
                                p.sessions.get(), p.forwarder.get()});
    for (server::HttpRoute& r : p.port_proxy->Routes()) routes.push_back(std::move(r));
    routes.push_back(server::MetricsRoute(render, p.tenants.get()));
    routes.push_back(server::HealthRoute(p.http_deps, p.local.get()));
    routes.push_back(server::ImageProgressRoute(p.http_deps, p.image_api.get()));
    for (server::HttpRoute& r : server::DashboardRoutes()) routes.push_back(std::move(r));
    SANDGATE_ASSIGN_OR_RETURN(p.http, server::HttpServer::Start(o, std::move(routes)));
    std::string url = absl::StrCat(p.http->tls() ? "https://" : "http://",
                                   server::HttpHost(o.address), ":", p.http->port());
    if (p.config.ports.public_url.empty()) p.ports->set_base_url(url);
    log::Info("daemon.http", {{"url", url}});
    std::fprintf(stdout, "sandgated http on %s\n", url.c_str());
  }
  return absl::OkStatus();
}

absl::Status Daemon::Start() {
  Parts& p = *parts_;
  // Sessions first: a queued run that targets a session the restart ended fails saying so.
  // The lease first: a replica restarted while another cleans up after it waits for that.
  SANDGATE_RETURN_IF_ERROR(p.replica->Join());
  SANDGATE_RETURN_IF_ERROR(p.sessions->Recover());
  SANDGATE_RETURN_IF_ERROR(p.runs->Recover(*p.tenants));
  p.replica->Start();  // renews the lease, and cleans up after replicas whose lease ends
  // After the sweep: a leftover of the previous daemon would share a uid with a new sandbox.
  p.warm_pool->Start();

  SANDGATE_ASSIGN_OR_RETURN(
      p.server,
      server::GrpcServer::Start(p.config.listen, p.config.tls, p.config.state_dir + "/tls",
                                p.service.get(), p.metrics.get(), p.image_service.get()));
  if (!p.config.metrics_listen.empty() || !p.config.http_listen.empty()) {
    core::RunManager* runs = p.runs.get();
    core::SessionManager* sessions = p.sessions.get();
    core::SandboxBudget* budget = p.budget.get();
    p.metrics->AddGauge("sandgate_runs_active", "Runs queued or running.",
                        [runs] { return runs->active_runs(); });
    p.metrics->AddGauge("sandgate_queue_depth", "Runs waiting for admission.",
                        [runs] { return runs->queued_runs(); });
    p.metrics->AddGauge("sandgate_queued_input_bytes",
                        "Input bytes held by waiting runs (max_queued_input_bytes).",
                        [runs] { return static_cast<double>(runs->queued_input_bytes()); });
    p.metrics->AddGauge("sandgate_sessions_live", "Kept sessions alive.",
                        [sessions] { return sessions->live(); });
    p.metrics->AddGauge("sandgate_sandboxes_in_use",
                        "Sandboxes alive (runs' own and kept sessions).",
                        [budget] { return budget->used(); });
    core::ReplicaMember* member = p.replica.get();
    p.metrics->AddGauge("sandgate_replica_clock_skew_seconds",
                        "How far this replica's clock was ahead of the store's at its last look "
                        "(negative: behind). Leases use the store's clock; past 1 s, say so.",
                        [member] { return absl::ToDoubleSeconds(member->clock_skew()); });
  }
  SANDGATE_RETURN_IF_ERROR(StartHttp(p));
  log::Info("daemon.serving", {{"address", p.server->address()},
                               {"state_dir", p.config.state_dir},
                               {"replica", p.config.replica.id},
                               {"tenants", p.config.tenants.size()}});
  return absl::OkStatus();
}

std::string Daemon::address() const { return parts_->server ? parts_->server->address() : ""; }

void Daemon::Drain() {
  Parts& p = *parts_;
  if (p.drained) return;
  p.drained = true;
  log::Info("daemon.draining", {{"active_runs", p.runs->active_runs()}});
  if (p.server) p.server->SetServing(false);
  size_t left = p.runs->Drain(p.config.drain_grace);
  if (left > 0) log::Error("daemon.drain_incomplete", {{"active_runs", left}});
  // Kept sessions end too: their commands are cancelled and their sandboxes deleted.
  p.sessions->CloseAll("the daemon is shutting down");
  p.warm_pool->Drain();
  // What was deleted while the store was away leaves no entry for the next start to sweep.
  p.journal->RetryErases();
  // Only now: a replica that let its lease end while draining would have its runs failed
  // by another. Its runs left queued go to a live replica once the lease ends.
  p.replica->Stop();
  // Every running run has written its terminal event. A stream still waiting for events
  // follows a run left queued: it ends UNAVAILABLE now. Give the others a moment to read
  // what is buffered, then end whatever is still open and stop.
  p.events->Shutdown();
  if (p.server) p.server->Shutdown(absl::Seconds(2));
  // Before the executors: an HTTP answer in flight runs on them.
  // Its relays end first: the HTTP server waits for every answer in flight.
  if (p.port_proxy) p.port_proxy->Stop();
  if (p.http) p.http->Stop();
  if (p.metrics_http) p.metrics_http->Stop();
  p.io->Shutdown();
  p.exec->Shutdown();
  log::Info("daemon.stopped");
}

}  // namespace sandgate::app
