// The `openai` sandbox provider: a session is an OpenAI-hosted container (Containers API).
//
// What a session does with each Session call:
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
//  - Keeping it alive: a keeper thread touches the container every keepalive_interval (well
//    within expires_after) for as long as the session is held, and checks its own effect by
//    reading the container's last_active_at afterwards. Listing its files is the cheap touch,
//    but that it counts as activity is unconfirmed (openai-api.md §3); when last_active_at did
//    not move, the keeper runs `true` through the hosted shell (a Responses call with
//    keepalive_model: tool execution certainly counts, a few tokens each time) and, once that
//    worked where the listing did not, uses only that from then on. When neither moved it,
//    Health() says when the container will really expire (its last_active_at + expires_after)
//    and why, and the keeper tries again next interval.
//  - WriteFile: uploads the bytes straight to the container (POST /containers/{id}/files,
//    multipart); no Files API object is made, so nothing but the container needs deleting.
//    Container-file uploads take no destination path, so only plain names ("input.csv") are
//    accepted: they land at /mnt/data/<name>. File modes are not kept.
//  - Exec: UNIMPLEMENTED. A hosted container runs only the commands the model chooses, inside
//    a Responses API call; the `openai` agent drives that. A run's setup_commands therefore
//    fail clearly on this provider.
//  - ListFiles / ReadFile: the container-file listing (regular files under /mnt/data; there
//    are no directory, link or mode entries), contents downloaded with the size cap enforced
//    as bytes arrive.
//  - Close (and the destructor): stops the keeper, deletes the container (and with it every
//    file in it) and erases the journal entry; a container that is already gone counts as
//    deleted. If the delete fails the entry stays for the next daemon's Sweep.
//  - Expiry: once the container has expired (the keeper saw it, or an upstream call said
//    "Container is expired."), every later call fails with FAILED_PRECONDITION
//    "container cntr_… expired: …", saying what the API said, when, during what, and how old
//    the container was (never a guessed cause such as idleness); it is never silently
//    replaced.
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
#include <optional>
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
#include "sandbox/sandbox.h"
#include "upstream/openai_client.h"

namespace sandgate::sandbox {

struct OpenAiProviderOptions {
  // The smallest container memory_limit asked for ("1g", "4g", "16g" or "64g").
  std::string memory_limit = "1g";
  // The container's idle expiry (anchor last_active_at).
  int expires_after_minutes = 20;
  // How often a held session's keeper touches its container; must be below expires_after.
  absl::Duration keepalive_interval = absl::Minutes(5);
  // The model the keeper asks to run `true` in a held container when listing its files does
  // not refresh last_active_at. Empty: no such fallback (the keeper can then only report that
  // it cannot extend the container).
  std::string keepalive_model;
  // Largest file WriteFile uploads.
  uint64_t max_file_bytes = 64ull << 20;
  // How long after a create was last in flight (sent, or given up on) upstream may still
  // carry it out: until then a sweep by name that finds nothing answers UNAVAILABLE (ask
  // again) instead of giving up. A create upstream answered slowly enough for us to give up
  // on may land well after that, so this is a minute, not seconds.
  absl::Duration create_settle = absl::Seconds(60);
  // How often the provider looks again, by name, for the container of a failed create whose
  // create may still land (until create_settle has passed).
  absl::Duration recheck_interval = absl::Seconds(2);
  // The time of journaled requests and of the create_settle check, and the keeper's waits.
  // Null: Clock::Real(). Not owned; outlives the provider.
  Clock* clock = nullptr;
};

// The journal entry id of a session's container.
std::string OpenAiContainerJournalId(const std::string& session_id);

// The memory_limit for `memory_bytes`: the smallest of 1g/4g/16g/64g holding it and at
// least `floor` (one of those four). INVALID_ARGUMENT above 64 GiB or for a bad floor.
absl::StatusOr<std::string> MapMemoryLimit(uint64_t memory_bytes, const std::string& floor);

class OpenAiProvider;

// A session on a hosted container (see the file comment). Thread safe.
class OpenAiSession : public Session, public HostedShell {
 public:
  ~OpenAiSession() override;

  const std::string& id() const override { return id_; }
  std::string workdir() const override { return "/mnt/data"; }
  absl::StatusOr<ExecResult> Exec(const ExecRequest& request, const OutputCallback& on_output,
                                  const CancelToken* cancel) override;
  absl::Status WriteFile(absl::string_view path, absl::string_view data, int mode) override;
  absl::StatusOr<std::string> ReadFile(absl::string_view path, uint64_t max_bytes) override;
  absl::StatusOr<FileListing> ListFiles(absl::string_view dir) override;
  std::vector<std::string> Warnings() const override { return warnings_; }
  // Expired once upstream said so; otherwise, when the keeper found it cannot extend the
  // container, when it will expire.
  SessionHealth Health() const override;
  absl::Status Close() override;

  HostedShell* hosted_shell() override { return this; }

  // HostedShell, for the openai agent, which points the Responses API shell tool at this
  // container.
  const std::string& container_id() const override { return container_id_; }
  // OK while the container is usable; FAILED_PRECONDITION "container cntr_… expired: …" once
  // it has expired, or "session … is closed".
  absl::Status CheckUsable() const override;
  bool SaysExpired(const absl::Status& status) const override { return IsExpiredError(status); }
  // Records that upstream reported the container expired: `said` is what the API answered
  // (e.g. a Responses call's 400 "Container is expired."), `during` what we were doing ("the
  // model's turn"). Returns the FAILED_PRECONDITION every later call gets, which names the
  // container, what the API said, when, during what, and the container's age then; only the
  // first report is kept.
  absl::Status MarkExpired(absl::string_view said, absl::string_view during) override;
  // True when `status` is upstream's way of saying the container expired.
  static bool IsExpiredError(const absl::Status& status);

 private:
  friend class OpenAiProvider;
  OpenAiSession(upstream::OpenAiClient* client, ResourceJournal* journal, std::string id,
                std::string container_id, int64_t last_active_at, std::vector<std::string> warnings,
                OpenAiProviderOptions options);
  void StartKeeper();
  void KeeperLoop();
  // One round of the keeper. False once the container is known to be gone.
  bool Keep();
  // The container as upstream has it now; nullopt when it cannot be read (the session is then
  // marked expired if that is why).
  std::optional<upstream::Container> ReadContainer();
  // Whether `c`'s last_active_at moved past what the keeper saw last; remembers it.
  bool Moved(const upstream::Container& c);
  // Records that `tried` left `c`'s last_active_at where it was: Health() now says when the
  // container expires.
  void CannotExtend(const upstream::Container& c, const std::vector<std::string>& tried);
  absl::Status ExpiredError() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Maps an upstream failure: an expiry marks the session expired.
  absl::Status Upstream(absl::Status status, absl::string_view what);

  upstream::OpenAiClient* const client_;
  ResourceJournal* const journal_;
  const std::string id_;
  const std::string container_id_;
  const std::vector<std::string> warnings_;
  const OpenAiProviderOptions options_;
  Clock* const clock_;
  const absl::Time created_at_;  // when upstream answered the create, by clock_

  CancelToken stop_;  // fired by Close: ends the keeper and aborts its in-flight call
  std::thread keeper_;
  // The keeper thread's own: the last last_active_at it read (upstream seconds), and whether
  // listing files still counts as a touch.
  int64_t last_active_seen_;
  bool listing_counts_ = true;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool expired_ ABSL_GUARDED_BY(mu_) = false;
  // The first expiry report: what the API said, during what, and when (by clock_).
  std::string expired_said_ ABSL_GUARDED_BY(mu_);
  std::string expired_during_ ABSL_GUARDED_BY(mu_);
  absl::Time expired_at_ ABSL_GUARDED_BY(mu_);
  // Set while the keeper cannot move last_active_at: when the container will expire, and why.
  absl::Time expires_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::string cannot_extend_ ABSL_GUARDED_BY(mu_);
  absl::Mutex close_mu_;  // serialises Close
};

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
