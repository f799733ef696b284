// The `openai` sandbox provider: a session is an OpenAI-hosted container (Containers API).
//
// How a session's container is made:
//  - Create: journals the container ("openai-container:<session id>", kind "container", with
//    the time of the request) before asking for it, then records its id; a create that fails
//    (or times out on our side) may still be carried out upstream, so its entry records when
//    we gave up and stays until a look by name has found and deleted the container, or
//    create_settle has passed with none found (the provider keeps looking meanwhile; a
//    restarted daemon's sweep carries on from the journaled times); creates it named
//    "sandgate-<session id>" with the mapped memory_limit, expires_after {last_active_at,
//    options.expires_after_minutes} and the mapped network_policy. The create request itself
//    is not cancelled: upstream may carry out a create whose caller hung up, after any
//    cleanup by name has looked. A cancel is honoured once the answer is in, by deleting the
//    container by id. A create the retry policy repeated after an attempt whose answer was
//    lost (a connection cut, a 5xx) may have made a container per attempt, all with our
//    name: once one answers, every other container of that name is deleted, and again when
//    the session closes or its entry is swept.
//
// What the session does with its container afterwards (keeping it alive, files, expiry,
// close): openai_session.h.
//
// Mapping of SessionSpec:
//  - memory_bytes → the smallest memory_limit of 1g/4g/16g/64g that holds it (and at least
//    options.memory_limit); above 64 GiB is INVALID_ARGUMENT. Warnings() states the mapping.
//  - network kDisabled → {"type":"disabled"}; kRestricted → {"type":"allowlist",
//    allowed_domains} (an empty list becomes disabled); kEnabled → INVALID_ARGUMENT (a hosted
//    container has no "everything" policy). Ports and byte/connection caps are not enforced.
//  - env (not applied; a warning when set), max_processes, workspace_bytes/inodes,
//    cpu_seconds_per_process, cpu_millicores, on_network_decision: not applicable to hosted
//    containers; Warnings() says so.
//
// Thread safe. The OpenAiClient and the journal are not owned and outlive the provider and
// every session it made.
//
//   auto provider = OpenAiProvider::Create(&openai_client, &journal, {});
//   auto session = (*provider)->Create(spec, &cancel);
//   SANDGATE_RETURN_IF_ERROR((*session)->WriteFile("input.csv", csv));
//   ... the openai agent runs the model against the container ...
//   auto memo = (*session)->ReadFile("investment_analysis.md", 1 << 20);
//   (*session)->Close();
#ifndef SANDGATE_SANDBOX_OPENAI_OPENAI_PROVIDER_H_
#define SANDGATE_SANDBOX_OPENAI_OPENAI_PROVIDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "common/clock.h"
#include "common/journal.h"
#include "sandbox/openai/openai_containers.h"  // OpenAiContainerJournalId
#include "sandbox/openai/openai_options.h"
#include "sandbox/openai/openai_session.h"
#include "sandbox/sandbox.h"
#include "upstream/openai_client.h"

namespace sandgate::sandbox {

// The memory_limit for `memory_bytes`: the smallest of 1g/4g/16g/64g holding it and at
// least `floor` (one of those four). INVALID_ARGUMENT above 64 GiB or for a bad floor.
absl::StatusOr<std::string> MapMemoryLimit(uint64_t memory_bytes, const std::string& floor);

// Thread safe.
class OpenAiProvider : public Provider {
 public:
  // Stops looking for the containers of failed creates; their journal entries stay for the
  // next daemon's sweep.
  ~OpenAiProvider() override;

  // `client` and `journal` are not owned and must outlive the provider and its sessions.
  static absl::StatusOr<std::unique_ptr<OpenAiProvider>> Create(upstream::OpenAiClient* client,
                                                                ResourceJournal* journal,
                                                                OpenAiProviderOptions options);

  std::string name() const override { return "openai"; }
  bool runs_commands() const override { return false; }
  absl::StatusOr<std::unique_ptr<Session>> Create(const SessionSpec& spec,
                                                  const CancelToken* cancel) override;
  // kind "container": deletes the container by id (or, when the daemon died before learning
  // the id, every container named "sandgate-<session id>"), then erases the entry. By name,
  // nothing is final until create_settle has passed since the create was last in flight
  // (journaled requested_at_ms / gave_up_at_ms): until then it deletes what it finds, answers
  // UNAVAILABLE and keeps the entry, to be asked again (Provider::Sweep).
  absl::Status Sweep(const JournalEntry& entry) override;

 private:
  OpenAiProvider(upstream::OpenAiClient* client, ResourceJournal* journal,
                 OpenAiProviderOptions options)
      : client_(client),
        journal_(journal),
        options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : Clock::Real()) {}

  // Deletes every container named like the entry's, then erases the entry; UNAVAILABLE
  // (entry kept) while it is not yet `settle_until`.
  absl::Status SweepByName(const JournalEntry& entry, absl::Time settle_until);
  // Looks for `entry`'s container again every recheck_interval until Sweep settles it.
  void KeepLooking(JournalEntry entry);
  void LookerLoop();

  upstream::OpenAiClient* const client_;
  ResourceJournal* const journal_;
  const OpenAiProviderOptions options_;
  Clock* const clock_;

  CancelToken stop_;  // fired by the destructor: ends the looker
  absl::Mutex looker_mu_;
  std::vector<JournalEntry> unsettled_ ABSL_GUARDED_BY(looker_mu_);
  std::thread looker_ ABSL_GUARDED_BY(looker_mu_);
};

}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_OPENAI_OPENAI_PROVIDER_H_
