// The `openai-agents` sandbox provider: a session is an OpenAI Agents API (beta) session on an
// openai_hosted environment, where upstream runs both the sandbox and the agent loop
// (openai-api.md §7). Only the `openai` agent works on it, through Session::hosted_agent().
//
// What a session does with each Session call:
//  - Create (the provider's): checks the spec (CheckAgentsSpec) and makes nothing upstream. The
//    Agents API makes the environment, with its files and setup commands, and starts the agent
//    in one request, so the upstream session is created when the agent calls HostedAgent::Run.
//  - WriteFile / HostedAgent::AddSetupCommand: kept for that request (files inline at
//    /workspace/<path>, setup commands with cwd /workspace); FAILED_PRECONDITION once it is
//    sent. File modes are not kept.
//  - HostedAgent::Run: journals the session ("openai-agents-session:<session id>", kind
//    "agent_session", durable) before the create, creates it streaming (metadata
//    sandgate_session=<session id>), records the upstream id in the journal as soon as the
//    first event names it, and hands every event to the agent until it says the run is over.
//    Every event is also kept as it arrived, one JSON object per line, for the artifact
//    agents-events.jsonl (OwnArtifacts).
//  - Exec: UNIMPLEMENTED (commands run only inside the Agents API's agent loop).
//  - ReadFile / ListFiles: the session's published artifacts: files the agent left under
//    /workspace/outputs when its turn completed; paths are relative to /workspace/outputs.
//    Contents are downloaded with the size cap enforced as bytes arrive. "agents-events.jsonl"
//    reads the kept events.
//  - ReadFile / ListFiles failing upstream for a reason other than the artifact (an HTTP 500
//    the retries could not get past, a broken connection): FAILED_PRECONDITION naming what
//    failed, so a run fails saying its outputs could not be read, not that they are missing.
//  - Close (and the destructor): sends the API's cancel event unless the turn is known to be
//    over, then deletes the session (a session already gone counts as deleted) and erases the
//    journal entry. A create whose answer was lost before it named the session (a stream cut
//    before its first event, a 5xx) may have made one: Close lists the key's sessions and
//    cancels and deletes those whose metadata is sandgate_session=<session id>, then erases
//    the entry. When the delete fails, or no such session is listed yet (a create still
//    landing, a list that lags), the entry stays for the Sweep.
//
// Thread safe. The AgentsClient and the journal are not owned and outlive the provider and
// every session it made.
//
//   auto provider = AgentsProvider::Create(&agents_client, &journal);
//   auto session = (*provider)->Create(spec, &cancel);
//   (*session)->WriteFile("input.csv", csv);
//   (*session)->hosted_agent()->Run({model, instructions, input}, on_event, cancel);
//   auto memo = (*session)->ReadFile("investment_analysis.md", 1 << 20);
//   (*session)->Close();
#ifndef SANDGATE_SANDBOX_AGENTS_AGENTS_PROVIDER_H_
#define SANDGATE_SANDBOX_AGENTS_AGENTS_PROVIDER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/journal.h"
#include "sandbox/agents/agents_environment.h"
#include "sandbox/sandbox.h"
#include "upstream/agents_client.h"

namespace sandgate::sandbox {

// The artifact that holds a session's raw Agents API events, one JSON object per line.
inline constexpr char kAgentsEventsArtifact[] = "agents-events.jsonl";

// The journal entry id of a session's upstream Agents API session.
std::string AgentsSessionJournalId(const std::string& session_id);

struct AgentsProviderOptions {
  // At most this much of the raw events is kept for agents-events.jsonl; past it the file
  // ends with a line saying how many events were left out.
  uint64_t max_events_bytes = 16ull << 20;
  // The time of journaled requests. Null: Clock::Real(). Not owned; outlives the provider.
  Clock* clock = nullptr;
};

class AgentsProvider;

// The sessions of one provider whose agent task has started (each takes one). Thread safe.
class AgentsRunLedger {
 public:
  void Started(const std::string& session_id) ABSL_LOCKS_EXCLUDED(mu_);
  void Closed(const std::string& session_id) ABSL_LOCKS_EXCLUDED(mu_);
  bool HasRun(const std::string& session_id) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_set<std::string> started_ ABSL_GUARDED_BY(mu_);
};

// A session on an Agents API openai_hosted environment (see the file comment). Thread safe.
class AgentsSession : public Session, public HostedAgent {
 public:
  ~AgentsSession() override;

  const std::string& id() const override { return id_; }
  std::string workdir() const override { return kAgentsWorkspace; }
  absl::StatusOr<ExecResult> Exec(const ExecRequest& request, const OutputCallback& on_output,
                                  const CancelToken* cancel) override;
  absl::Status WriteFile(absl::string_view path, absl::string_view data, int mode) override;
  absl::StatusOr<std::string> ReadFile(absl::string_view path, uint64_t max_bytes) override;
  absl::StatusOr<FileListing> ListFiles(absl::string_view dir) override;
  std::vector<std::string> Warnings() const override { return warnings_; }
  HostedAgent* hosted_agent() override { return this; }
  std::vector<std::string> OwnArtifacts() const override { return {kAgentsEventsArtifact}; }
  absl::Status Close() override;

  absl::Status AddSetupCommand(std::string command) override;
  absl::Status Run(const Task& task, const OnEvent& on_event, const CancelToken& cancel) override;

 private:
  friend class AgentsProvider;
  AgentsSession(upstream::AgentsClient* client, ResourceJournal* journal, std::string id,
                SessionSpec spec, AgentsProviderOptions options,
                std::shared_ptr<AgentsRunLedger> ledger);

  JournalEntry Entry(const std::string& upstream_id) const;
  // Keeps one raw event for agents-events.jsonl.
  void Keep(const nlohmann::json& raw) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The published artifact at /workspace/outputs/<path>; NOT_FOUND when there is none.
  absl::StatusOr<upstream::AgentArtifact> FindArtifact(absl::string_view path);

  upstream::AgentsClient* const client_;
  ResourceJournal* const journal_;
  const std::string id_;
  const SessionSpec spec_;
  const std::vector<std::string> warnings_;
  const AgentsProviderOptions options_;
  Clock* const clock_;
  const std::shared_ptr<AgentsRunLedger> ledger_;  // shared with the provider

  mutable absl::Mutex mu_;
  std::vector<EnvironmentFile> files_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> setup_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // Run was called: the create is sent
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::string upstream_id_ ABSL_GUARDED_BY(mu_);  // once the first event named it
  // A create whose answer was lost (a broken stream, a 5xx, our give-up) may still have made a
  // session upstream; one refused outright (a 4xx) made none.
  bool may_exist_ ABSL_GUARDED_BY(mu_) = false;
  bool turn_over_ ABSL_GUARDED_BY(mu_) = false;  // no cancel needed before the delete
  std::string events_ ABSL_GUARDED_BY(mu_);      // agents-events.jsonl
  uint64_t events_left_out_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Mutex close_mu_;  // serialises Close
};

// Thread safe.
class AgentsProvider : public Provider {
 public:
  // `client` and `journal` are not owned and must outlive the provider and its sessions.
  static absl::StatusOr<std::unique_ptr<AgentsProvider>> Create(upstream::AgentsClient* client,
                                                                ResourceJournal* journal,
                                                                AgentsProviderOptions options = {});

  std::string name() const override { return "openai-agents"; }
  bool runs_commands() const override { return false; }
  bool runs_setup_commands() const override { return true; }  // the environment's own
  absl::Status CheckSpec(const SessionSpec& spec) const override { return CheckAgentsSpec(spec); }
  // An Agents API session runs one agent task: a kept session whose task has started on this
  // daemon takes no other run, refused before it is accepted.
  absl::Status CheckRunIn(const std::string& session_id) const override;
  absl::StatusOr<std::unique_ptr<Session>> Create(const SessionSpec& spec,
                                                  const CancelToken* cancel) override;
  // kind "agent_session": sends the cancel event and deletes the session by its recorded id
  // (already gone counts as deleted), then erases the entry. An entry without an id (the
  // daemon stopped while the create was in flight) is looked for among the listed sessions by
  // the metadata sandgate_session=<session id> its create set; each found is cancelled and
  // deleted. When none is found, the entry is kept (UNAVAILABLE, so it is asked again) until
  // kCreateSettle after its request, then erased.
  absl::Status Sweep(const JournalEntry& entry) override;

  // How long after its request a create may still land unseen by a list (see Sweep).
  static constexpr absl::Duration kCreateSettle = absl::Minutes(1);

 private:
  AgentsProvider(upstream::AgentsClient* client, ResourceJournal* journal,
                 AgentsProviderOptions options)
      : client_(client),
        journal_(journal),
        options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
        ledger_(std::make_shared<AgentsRunLedger>()) {}

  // Sweep of an entry whose upstream id was never learned.
  absl::Status SweepUnnamed(const JournalEntry& entry);

  upstream::AgentsClient* const client_;
  ResourceJournal* const journal_;
  const AgentsProviderOptions options_;
  Clock* const clock_;
  const std::shared_ptr<AgentsRunLedger> ledger_;  // a session may outlive the provider
};

}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_AGENTS_AGENTS_PROVIDER_H_
