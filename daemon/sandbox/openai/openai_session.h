// A session of the `openai` provider: one OpenAI-hosted container, from the moment upstream
// answered its create (openai_provider.h says how it is made, journaled and swept) until Close.
//
// What a session does with each Session call once its container exists:
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
//
// Thread safe. The OpenAiClient and the journal are not owned and outlive the session.
#ifndef SANDGATE_SANDBOX_OPENAI_OPENAI_SESSION_H_
#define SANDGATE_SANDBOX_OPENAI_OPENAI_SESSION_H_

#include <cstdint>
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
#include "sandbox/openai/openai_options.h"
#include "sandbox/sandbox.h"
#include "upstream/openai_client.h"

namespace sandgate::sandbox {

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

}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_OPENAI_OPENAI_SESSION_H_
