// Config: everything the daemon is told at start, from a JSON file and flags.
//
// Unknown keys and wrong types are errors that name the key ("local.uid_base: expected a
// whole number"), so a typo never silently falls back to a default.
//
//   {"listen": "unix:/run/sandgate/sandgated.sock", "state_dir": "/var/lib/sandgate",
//    "tenants": [{"name": "team-a", "token_sha256": "…", "operator": false}]}
#ifndef SANDGATE_CORE_CONFIG_H_
#define SANDGATE_CORE_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sandgate::core {

// What a tenant may ask for. An empty list allows anything; 0 means no limit.
struct TenantPolicy {
  std::vector<std::string> providers;
  std::vector<std::string> agents;
  std::vector<std::string> models;
  std::vector<std::string> network_modes;  // "disabled", "restricted", "enabled"
  std::vector<std::string> domains;        // allowed in restricted mode: names or "*.suffix"
  uint64_t max_memory_bytes = 0;
  absl::Duration max_run_time = absl::ZeroDuration();
  // Isolation levels the tenant may ask for ("namespaces", "gvisor"; empty = both), and the
  // one its requests get when they name none ("" = the daemon's `isolation`).
  std::vector<std::string> isolation_levels;
  std::string default_isolation;
  // Images the tenant's sandboxes may use ("host" = the host's own root; empty = all), and
  // whether it may build and delete images (docs/images.md).
  std::vector<std::string> images;
  bool build_images = false;
};

// How much a tenant may use at once. 0 means no limit of the tenant's own.
struct TenantQuotas {
  uint32_t concurrent_runs = 0;  // more wait in the fair queue
  uint32_t live_sessions = 0;    // kept sessions; more are refused
  uint32_t runs_per_minute = 0;  // more are refused
};

struct TenantConfig {
  std::string name;
  std::string token_sha256;  // lower-case hex of the bearer token; the token is never stored
  bool is_operator = false;
  TenantPolicy policy;
  TenantQuotas quotas;
};

// An OpenAI-compatible upstream. It exists only when a key source is configured; the key
// itself is read from the file (re-read on each use, so it can be rotated) or the
// environment variable, and never appears in the config, a log line or an event.
struct UpstreamConfig {
  bool configured() const { return !api_key_file.empty() || !api_key_env.empty(); }
  std::string base_url;
  std::string api_key_file;
  std::string api_key_env;
  std::string model;
  uint32_t max_turns = 30;
  // "request_timeout_seconds": one attempt of an upstream request, a streamed response
  // included (the Agents API's event stream has its own bound: it may last a whole turn).
  absl::Duration request_timeout = absl::Seconds(600);
  // The openai provider's containers.
  std::string container_memory_limit = "1g";
  uint32_t container_expires_after_minutes = 20;
  // How long after a create was last in flight the provider keeps looking for its container
  // by name before the journal entry goes (OpenAiProviderOptions::create_settle).
  absl::Duration container_create_settle = absl::Seconds(60);
};

// The machine's ceilings: no request may ask for more, whatever its tenant's
// policy says (a policy only narrows them). They bound what a caller can make
// the daemon hold or wait for.
struct MachineLimits {
  uint64_t memory_bytes = 64ull << 30;
  uint64_t workspace_bytes = 32ull << 30;  // and always below the sandbox's memory_bytes
  uint32_t max_processes = 4096;
  absl::Duration run_timeout = absl::Hours(24);
  absl::Duration command_timeout = absl::Hours(24);
};

// What the code in a sandbox can make the daemon store ("sandbox_events" in the file): the
// events it causes at will (network.decision, command.output) pass, per log (a run's, a kept
// session's), a token bucket and a total; the rest are counted, not stored, and told in an
// events.dropped (core/event_bounds.h). Without them a loop of refused CONNECTs stored 155,270
// events in 20 s.
struct SandboxEventLimits {
  uint32_t per_second = 50;      // sustained
  uint32_t burst = 500;          // at once, after a quiet spell
  uint32_t max_per_log = 10000;  // over the log's whole life
};

// The processes of a kept session (StartProcess; "processes" in the file; core/processes.h).
// Each process keeps its newest output_buffer_bytes of output; a session's processes, running
// or ended, keep at most session_buffer_bytes between them, so a session holds at most
// session_buffer_bytes / output_buffer_bytes processes: to make room, the oldest ended ones
// are forgotten; with only running ones left, StartProcess is RESOURCE_EXHAUSTED.
struct ProcessLimits {
  uint32_t max_running_per_session = 16;
  uint64_t output_buffer_bytes = 1ull << 20;
  uint64_t session_buffer_bytes = 16ull << 20;
  // The longest wait of a ReadProcessOutput for more output.
  absl::Duration max_read_wait = absl::Seconds(30);
};

// Exposed ports (docs/sessions.md "Exposed ports"): a session's port reached through the
// REST port's /v1/sessions/{id}/ports/{port}/..., and its signed URLs.
struct PortLimits {
  uint32_t max_exposed_per_session = 8;
  uint32_t max_connections_per_session = 32;        // proxied connections open at once
  uint32_t max_connections = 256;                   // all sessions' together, on this daemon
  uint64_t max_body_bytes = 16ull << 20;            // a proxied request's body
  uint64_t max_header_bytes = 64ull << 10;          // the sandbox's answer head
  uint64_t max_connection_bytes = 1ull << 30;       // both ways, one connection (a WebSocket's too)
  absl::Duration idle_timeout = absl::Seconds(60);  // no byte either way: the connection ends
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration max_signed_ttl = absl::Hours(24);
  absl::Duration default_signed_ttl = absl::Hours(1);
  // The HMAC-SHA256 key of signed URLs: a file of at least 32 bytes (replicas that share one
  // accept each other's URLs). Empty: a random key made at start (URLs die with the daemon).
  std::string signing_key_file;
  // What ExposedPort.url starts with ("https://preview.example.com"); empty: the REST
  // port's own address (http_listen, https with TLS).
  std::string public_url;
};

// Workspace snapshots (SnapshotSession; "snapshots" in the file; core/snapshots.h).
struct SnapshotLimits {
  // The largest tar a snapshot stores, and the most its files may hold when restored:
  // beyond it, SnapshotSession (or the restore of a foreign archive) is RESOURCE_EXHAUSTED.
  uint64_t max_bytes = 1ull << 30;
  uint64_t max_entries = 100000;  // files, directories and links in one snapshot
};

// One sandbox shape the warm pool keeps ready (core/warm_pool.h): the fields that decide
// how a sandbox is started. A CreateSession whose sandbox, with the daemon's defaults
// applied, has exactly these (and no env) takes a ready one; its files and setup commands
// are placed after it is taken. 0 means the daemon default, as in a request.
struct WarmPoolShape {
  uint32_t size = 1;  // sandboxes kept ready
  uint64_t memory_bytes = 0;
  uint32_t max_processes = 0;
  uint64_t workspace_bytes = 0;
  std::string network_mode = "disabled";     // "disabled", "restricted", "enabled"
  std::vector<std::string> allowed_domains;  // restricted only
  std::string isolation;                     // "" = the daemon's `isolation`
  // "" or "host" = the host's root; else an image's name (core/images.h), resolved to its
  // digest each time the pool makes a sandbox of the shape.
  std::string image;
};

// This daemon as one replica among several sharing a store (docs/replicas.md).
struct ReplicaConfig {
  // Stable across restarts; "" = derived from the host name and state_dir (DefaultReplicaId in
  // core/replica.h). Letters, digits, '.', '_', '-'; at most 128.
  std::string id;
  std::string advertise_address;  // where other replicas reach it, e.g. "tcp:10.0.0.5:7443"
  // A replica that has not renewed its lease for lease_period is cleaned up after by another.
  absl::Duration lease_period = absl::Seconds(15);
  absl::Duration renew_interval = absl::Seconds(5);  // at most half of lease_period
  // follow_poll_ms: how often a follower of another replica's run reads the store when no
  // notification came; the longest a lost one delays it (core/event_log.h).
  absl::Duration follow_poll = absl::Milliseconds(500);
  // claim_poll_ms: how often a replica of a shared queue looks for a run to claim when no
  // notification came; the longest a lost one delays a waiting run (core/admission.h).
  absl::Duration claim_poll = absl::Seconds(1);
};

// Where the daemon keeps its state ("store" in the file). SQLite (one daemon, no database
// server) is the default; PostgreSQL is for several replicas sharing one database.
struct StoreConfig {
  std::string type = "sqlite";  // "sqlite": state_dir/state.db; "postgres"
  // postgres: a libpq connection string without a password, e.g.
  // "host=/run/postgresql dbname=sandgate user=sandgate".
  std::string dsn;
  // postgres: the file holding the password (no group or other access); "" = none (peer or
  // trust authentication). The password never appears in the config or the DSN.
  std::string password_file;
  uint32_t pool_size = 8;  // postgres connections kept open
};

// TLS on a TCP listener ("tls" in the file). The files are re-read every
// reload_interval_seconds, so a renewed certificate is served without a restart (replace the
// key and the certificate by renaming new files over them); files that fail the checks are
// refused and the last good ones kept (server/tls_mirror.h). With client_ca_file, a client
// certificate that is offered is verified against it; require_client_cert refuses clients
// without one (mutual TLS), and then a verified certificate is how a caller proves who it is.
struct TlsConfig {
  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  bool require_client_cert = false;
  uint32_t reload_interval_seconds = 10;
};

struct Config {
  // "unix:/path" or "tcp:host:port" (e.g. "tcp:127.0.0.1:7443", port 0 = any free port).
  std::string listen = "unix:/run/sandgate/sandgated.sock";
  std::string state_dir = "/var/lib/sandgate";
  StoreConfig store;
  std::string log_level = "info";
  std::string metrics_listen;  // "127.0.0.1:9464" serves GET /metrics; "" = off
  // "127.0.0.1:8080": the REST/JSON API, its event streams and /metrics over HTTP (HTTPS with
  // `tls`); "" = off. Callers authenticate with tenants' bearer tokens only.
  std::string http_listen;
  std::vector<TenantConfig> tenants;  // empty = one "local" tenant, Unix socket only
  // TCP needs callers to prove who they are (tenants' bearer tokens, or client
  // certificates under tls.require_client_cert) unless allow_unauthenticated_tcp; bearer
  // tokens over TCP need TLS unless allow_plaintext_tokens.
  bool allow_unauthenticated_tcp = false;
  TlsConfig tls;
  bool allow_plaintext_tokens = false;

  uint32_t max_concurrent_runs = 4;
  uint32_t max_queued_runs = 1024;  // beyond it RunAnalysis is RESOURCE_EXHAUSTED
  // Input bytes held by waiting runs (in memory and in the state database); beyond it
  // RunAnalysis is RESOURCE_EXHAUSTED. One run is always let in, whatever its size.
  uint64_t max_queued_input_bytes = 1ull << 30;
  // The machine's budget: sandboxes alive at once (running runs' own plus kept sessions).
  uint32_t max_sandboxes = 64;
  uint32_t max_concurrent_execs = 32;  // Exec RPCs running at once (each holds a thread)
  uint64_t max_input_bytes = 64ull << 20;
  uint64_t max_artifact_bytes = 32ull << 20;
  SandboxEventLimits sandbox_events;  // "sandbox_events" in the file
  ProcessLimits processes;            // "processes" in the file
  PortLimits ports;                   // "ports" in the file
  SnapshotLimits snapshots;           // "snapshots" in the file

  MachineLimits limits;  // "limits" in the file
  // Sandbox defaults, used where a request leaves a field 0.
  uint64_t memory_bytes = 1ull << 30;
  uint32_t max_processes = 256;
  uint64_t workspace_bytes = 256ull << 20;  // capped by memory (DefaultWorkspaceBytes)
  absl::Duration command_timeout = absl::Minutes(5);
  absl::Duration run_timeout = absl::Minutes(30);
  absl::Duration heartbeat_interval = absl::Seconds(15);
  // Kept sessions (CreateSession): defaults, and the longest lifetime a caller may ask for.
  absl::Duration session_idle_timeout = absl::Minutes(10);
  absl::Duration session_max_lifetime = absl::Hours(2);
  absl::Duration session_max_lifetime_limit = absl::Hours(24);
  // How long before max_lifetime a session's open streams are warned (at most half of it).
  absl::Duration session_expiry_warning = absl::Seconds(60);
  absl::Duration drain_grace = absl::Seconds(20);
  // Runs (events, artifacts) and ended sessions older than this are deleted; 0 = kept forever.
  absl::Duration retention = absl::ZeroDuration();

  // The `openai` provider and agent, and the `chat` agent (any OpenAI-compatible endpoint).
  UpstreamConfig openai = [] {
    UpstreamConfig u;
    u.base_url = "https://api.openai.com/v1";
    return u;
  }();
  UpstreamConfig chat;

  // Local sandboxes started ahead of demand, per shape; they count in max_sandboxes.
  std::vector<WarmPoolShape> warm_pool;

  ReplicaConfig replica;  // "replica" in the file

  // Local provider.
  std::string bwrap_path = "/usr/bin/bwrap";
  std::string init_path;  // "" = sandgate-init beside the daemon, then libexec
  uint32_t uid_base = 100000;
  uint32_t uid_count = 1000;
  // RLIMIT_NOFILE (soft and hard) of every sandbox process (BwrapOptions::max_open_files).
  uint32_t max_open_files = 1024;
  // The isolation level of a local session whose request and tenant name none.
  std::string isolation = "namespaces";
  std::string runsc_path = "/usr/bin/runsc";
  std::string gvisor_platform = "ptrace";  // "kvm" where /dev/kvm exists
  // With kvm: the start-up probe sandbox's time limit (sandbox/local/gvisor_probe.h).
  uint64_t gvisor_probe_timeout_seconds = 10;
  // Sandbox images (docs/images.md): the builder, and how many builds run at once.
  std::string mmdebstrap_path = "/usr/bin/mmdebstrap";
  uint32_t max_image_builds = 1;
};

// The workspace a sandbox of `memory_bytes` gets when its request leaves workspace_bytes 0:
// `config.workspace_bytes`, but at most a quarter of the memory (whole MiB), since /work,
// /tmp and /dev/shm, each as large as the workspace, live in the sandbox's memory. So the
// smallest sandbox (16 MiB) gets a 4 MiB workspace, and the 1 GiB default the 256 MiB one.
uint64_t DefaultWorkspaceBytes(const Config& config, uint64_t memory_bytes);

// Parses a config file's text; `origin` names it in errors.
absl::StatusOr<Config> ParseConfig(const std::string& text, const std::string& origin);
absl::StatusOr<Config> LoadConfigFile(const std::string& path);
// Checks cross-field rules (e.g. TCP without tenants), then reads the TLS files (each
// readable, parsed, the key the certificate's; common/tls.h).
absl::Status ValidateConfig(const Config& config);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_CONFIG_H_
