// The agent, collect and verify steps (DESIGN.md "A run, end to end", 4-6), in a sandbox made
// ready by the pipeline (run_pipeline.cc).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/events.h"
#include "common/status_macros.h"
#include "core/run_manager.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {

absl::Status RunManager::RunInSession(ActiveRun& ar, sandbox::Session& session, RunEvents& events) {
  absl::Status agent_status = RunAgent(ar, session, events);
  if (ar.cancel.cancelled()) return agent_status;
  SANDGATE_ASSIGN_OR_RETURN(std::vector<v1::Artifact> stored,
                            Collect(ar, session, events, agent_status));
  if (!agent_status.ok()) return agent_status;
  return Verify(ar, stored, events);
}

absl::Status RunManager::RunAgent(ActiveRun& ar, sandbox::Session& session, RunEvents& events) {
  agent::AgentTask task;
  task.playbook = ar.playbook;
  task.inputs = &ar.inputs;
  task.settings = &ar.settings;
  task.model = ar.request.model();
  task.max_turns = ar.request.max_turns();
  task.command_timeout = ar.command_timeout;
  return ar.agent->Run(task, session, events, ar.cancel);
}

absl::StatusOr<std::vector<v1::Artifact>> RunManager::Collect(ActiveRun& ar,
                                                              sandbox::Session& session,
                                                              RunEvents& events,
                                                              const absl::Status& agent_status) {
  // Collect whatever exists, also after a failed agent: a fatal validation still writes
  // analysis_run.json, and the caller should see why. Each artifact streams from the sandbox
  // into the store in bounded pieces, hashed as they pass; only verification reads them
  // whole, from the store.
  const std::string run_id = events.run_id();
  std::vector<v1::Artifact> stored;
  std::vector<std::string> names = ar.playbook->ExpectedArtifacts();
  for (std::string& own : session.OwnArtifacts()) names.push_back(std::move(own));
  for (const std::string& name : names) {
    SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<store::ArtifactStore::Writer> writer,
                              deps_.artifacts->Create(run_id, name));
    absl::Status store_error;
    absl::Status copied =
        session.ReadFileTo(name, deps_.config->max_artifact_bytes, [&](absl::string_view piece) {
          store_error = writer->Append(piece);
          return store_error;
        });
    if (!store_error.ok()) return store_error;
    if (!copied.ok()) {  // the writer removes what it stored of it
      // The sandbox can no longer be read (a hosted container expired, or it was closed):
      // that, not "artifact missing", is why the run fails.
      if (copied.code() == absl::StatusCode::kFailedPrecondition) {
        return agent_status.ok() ? copied : agent_status;
      }
      if (copied.code() != absl::StatusCode::kNotFound) {
        events.Notice(v1::Notice::SEVERITY_WARNING,
                      absl::StrCat("artifact ", name, " refused: ", copied.message()));
      }
      continue;
    }
    SANDGATE_ASSIGN_OR_RETURN(v1::Artifact artifact, writer->Commit());
    events.Emit(events::ArtifactCollected(artifact));
    {
      absl::MutexLock lock(&ar.mu);
      *ar.run.add_artifacts() = artifact;
    }
    stored.push_back(std::move(artifact));
  }
  return stored;
}

absl::Status RunManager::Verify(ActiveRun& ar, const std::vector<v1::Artifact>& stored,
                                RunEvents& events) {
  const std::string run_id = events.run_id();
  playbooks::Artifacts collected;
  for (const v1::Artifact& a : stored) {
    SANDGATE_ASSIGN_OR_RETURN(collected[a.name()],
                              deps_.artifacts->Read(run_id, a.name(), 0, a.size_bytes()));
  }
  playbooks::Verdict verdict = ar.playbook->Verify(ar.inputs, ar.settings, collected);
  {
    absl::MutexLock lock(&ar.mu);
    *ar.run.mutable_summary() = std::move(verdict.summary);
  }
  for (const playbooks::Check& check : verdict.checks) {
    v1::CheckResult c;
    c.set_name(check.name);
    c.set_passed(check.passed);
    c.set_detail(check.detail);
    {
      absl::MutexLock lock(&ar.mu);
      *ar.run.add_checks() = c;
    }
    events.Emit(events::Check(std::move(c)));
  }
  return absl::OkStatus();
}

}  // namespace sandgate::core
