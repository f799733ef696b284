#include "sandbox/agents/agents_provider.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "upstream/openai_transport.h"

namespace sandgate::sandbox {
namespace {

using nlohmann::json;

constexpr char kProvider[] = "openai-agents";
constexpr char kKind[] = "agent_session";
// The create's metadata key naming the sandgate session: how a session whose id was never
// learned is found again.
constexpr char kSessionMetadata[] = "sandgate_session";

// Whether a create that failed with `status` may still have made a session upstream: its
// answer was lost (a broken stream, a cut connection, a 5xx, a timeout), rather than refused.
bool MayHaveLanded(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:  // a 429 the retries gave up on: not carried out
      return upstream::IsBrokenStream(status);
    default:
      return true;
  }
}

// Cancel first (deleting may abandon a running turn's outputs, and cleanup may finish
// asynchronously upstream: §7), then delete; a session already gone counts as deleted.
absl::Status CancelAndDelete(upstream::AgentsClient* client, const std::string& upstream_id,
                             bool cancel_first) {
  if (cancel_first) {
    absl::Status cancelled = client->SendCancel(upstream_id);
    if (!cancelled.ok() && cancelled.code() != absl::StatusCode::kNotFound) {
      log::Warning("agents.cancel_failed",
                   {{"agent_session", upstream_id}, {"error", cancelled.ToString()}});
    }
  }
  absl::Status deleted = client->DeleteSession(upstream_id);
  if (deleted.code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  return deleted;
}

// Cancels and deletes every session whose create set sandgate_session=`session`: how one
// whose id was never learned is found again. Returns how many there were.
absl::StatusOr<int> DeleteByMetadata(upstream::AgentsClient* client, const std::string& session) {
  absl::StatusOr<std::vector<upstream::AgentSession>> all = client->ListAllSessions();
  if (!all.ok()) {
    return absl::Status(all.status().code(),
                        absl::StrCat("listing Agents API sessions to find ", kSessionMetadata, "=",
                                     session, ": ", all.status().message()));
  }
  int found = 0;
  for (const upstream::AgentSession& s : *all) {
    auto it = s.metadata.find(kSessionMetadata);
    if (it == s.metadata.end() || it->second != session) continue;
    ++found;
    absl::Status gone = CancelAndDelete(client, s.id, /*cancel_first=*/true);
    if (!gone.ok()) {
      return absl::Status(gone.code(), absl::StrCat("deleting Agents API session ", s.id, " of ",
                                                    session, ": ", gone.message()));
    }
    log::Info("agents.session_found_and_deleted", {{"session", session}, {"agent_session", s.id}});
  }
  return found;
}

// An artifact call that failed for a reason other than the artifact itself (an upstream error
// the retries could not get past, a broken connection): the session's outputs cannot be read,
// which is why the run fails (FAILED_PRECONDITION), not a missing artifact. A cancel keeps its
// meaning, and so do a download's NOT_FOUND (that artifact is gone) and RESOURCE_EXHAUSTED
// (above the size cap); a list that fails says nothing about any one artifact.
absl::Status ArtifactsUnreadable(const absl::Status& status, absl::string_view what, bool listing) {
  const absl::StatusCode code = status.code();
  if (code == absl::StatusCode::kCancelled ||
      (!listing &&
       (code == absl::StatusCode::kNotFound || code == absl::StatusCode::kResourceExhausted))) {
    return status;
  }
  return errors::FailedPrecondition(absl::StrCat(
      "the Agents API session's artifacts cannot be read (", what, "): ", status.ToString()));
}

}  // namespace

std::string AgentsSessionJournalId(const std::string& session_id) {
  return absl::StrCat("openai-agents-session:", session_id);
}

void AgentsRunLedger::Started(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  started_.insert(session_id);
}

void AgentsRunLedger::Closed(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  started_.erase(session_id);
}

bool AgentsRunLedger::HasRun(const std::string& session_id) const {
  absl::MutexLock lock(&mu_);
  return started_.contains(session_id);
}

AgentsSession::AgentsSession(upstream::AgentsClient* client, ResourceJournal* journal,
                             std::string id, SessionSpec spec, AgentsProviderOptions options,
                             std::shared_ptr<AgentsRunLedger> ledger)
    : client_(client),
      journal_(journal),
      id_(std::move(id)),
      spec_(std::move(spec)),
      warnings_(AgentsUnenforced(spec_)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      ledger_(std::move(ledger)) {}

AgentsSession::~AgentsSession() { Close().IgnoreError(); }

JournalEntry AgentsSession::Entry(const std::string& upstream_id) const {
  JournalEntry e;
  e.id = AgentsSessionJournalId(id_);
  e.provider = kProvider;
  e.kind = kKind;
  e.details = {{"session", id_}, {"requested_at_ms", absl::ToUnixMillis(clock_->Now())}};
  if (!upstream_id.empty()) e.details["agent_session_id"] = upstream_id;
  e.durable = true;  // an upstream session outlives this host's memory
  return e;
}

absl::StatusOr<ExecResult> AgentsSession::Exec(const ExecRequest&, const OutputCallback&,
                                               const CancelToken*) {
  return absl::UnimplementedError(
      "the openai-agents provider runs commands only inside the Agents API's own agent loop");
}

absl::Status AgentsSession::WriteFile(absl::string_view path, absl::string_view data,
                                      int /*mode*/) {
  if (path.empty() || path.front() == '/' || absl::StrContains(path, "..")) {
    return errors::InvalidArgument(
        absl::StrCat("'", path, "' is not a path relative to ", kAgentsWorkspace));
  }
  absl::MutexLock lock(&mu_);
  if (started_ || closed_) {
    return errors::FailedPrecondition(
        "an Agents API environment's files are placed when it is made; it is made already");
  }
  files_.push_back({std::string(path), std::string(data)});
  return absl::OkStatus();
}

absl::Status AgentsSession::AddSetupCommand(std::string command) {
  absl::MutexLock lock(&mu_);
  if (started_ || closed_) {
    return errors::FailedPrecondition(
        "an Agents API environment runs its setup commands when it is made; it is made already");
  }
  setup_.push_back(std::move(command));
  return absl::OkStatus();
}

void AgentsSession::Keep(const json& raw) {
  std::string line = raw.dump(-1, ' ', false, json::error_handler_t::replace);
  if (events_left_out_ > 0 || events_.size() + line.size() + 1 > options_.max_events_bytes) {
    ++events_left_out_;
    return;
  }
  absl::StrAppend(&events_, line, "\n");
}

absl::Status AgentsSession::Run(const Task& task, const OnEvent& on_event,
                                const CancelToken& cancel) {
  upstream::AgentSessionRequest req;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return errors::FailedPrecondition(absl::StrCat("session ", id_, " is closed"));
    if (started_) {
      return errors::FailedPrecondition(
          "an Agents API session runs one agent task; this one has run");
    }
    started_ = true;
    ledger_->Started(id_);
    req.environment = EnvironmentFor(spec_, files_, setup_);
    files_.clear();  // the request holds them now; inputs may be large
  }
  req.agent.model = task.model;
  req.agent.instructions = task.instructions;
  req.input = task.input;
  req.metadata = {{kSessionMetadata, id_}};
  // Journaled before the create: a daemon killed from here on leaves a record to sweep.
  absl::Status recorded = journal_->Record(Entry(""));
  if (!recorded.ok()) {
    return absl::Status(recorded.code(),
                        absl::StrCat("journaling the Agents API session: ", recorded.message()));
  }
  {
    absl::MutexLock lock(&mu_);
    may_exist_ = true;
  }
  std::optional<absl::Status> outcome;
  upstream::AgentEventStreamState state;
  const upstream::AgentEventCallback relay = [&](const upstream::AgentEvent& e,
                                                 bool* stop) -> absl::Status {
    json raw = e.raw.is_object() ? e.raw : json{{"value", e.raw}};
    if (!raw.contains("type")) raw["type"] = e.type;
    std::string learned;
    {
      absl::MutexLock lock(&mu_);
      Keep(raw);
      if (upstream_id_.empty() && !state.session_id.empty()) {
        upstream_id_ = learned = state.session_id;
      }
    }
    if (!learned.empty()) {
      absl::Status st = journal_->Record(Entry(learned));
      if (!st.ok()) {
        log::Error("agents.journal_failed", {{"session", id_}, {"error", st.ToString()}});
      }
      log::Info("agents.session_created", {{"session", id_}, {"agent_session", learned}});
    }
    outcome = on_event(raw);
    if (outcome.has_value()) *stop = true;
    return absl::OkStatus();
  };
  absl::StatusOr<upstream::AgentSession> created =
      client_->CreateSessionStream(req, &state, relay, &cancel);
  {
    absl::MutexLock lock(&mu_);
    if (upstream_id_.empty() && created.ok()) upstream_id_ = created->id;
    if (upstream_id_.empty() && !created.ok() && !MayHaveLanded(created.status())) {
      may_exist_ = false;  // refused outright: nothing was made
    }
    turn_over_ = outcome.has_value() && outcome->ok();
  }
  if (cancel.cancelled()) return errors::Cancelled(cancel.reason());
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("the Agents API: ", created.status().message()));
  }
  if (!outcome.has_value()) {
    // The create's stream ends once the session rests, which is after its turn (the fake's
    // way; §7 is silent): ending before the turn did is not something to wait out.
    return errors::Unavailable("the Agents API's event stream ended before the turn did");
  }
  return *outcome;
}

absl::StatusOr<upstream::AgentArtifact> AgentsSession::FindArtifact(absl::string_view path) {
  std::string upstream_id;
  {
    absl::MutexLock lock(&mu_);
    upstream_id = upstream_id_;
  }
  if (upstream_id.empty()) return errors::NotFound("artifact", path);
  absl::StatusOr<std::vector<upstream::AgentArtifact>> all = client_->ListAllArtifacts(upstream_id);
  if (!all.ok()) return ArtifactsUnreadable(all.status(), "listing them", /*listing=*/true);
  const std::string want = absl::StrCat(kAgentsOutputs, "/", path);
  // Artifacts are immutable, published at each turn's end: the latest of a path wins.
  std::optional<upstream::AgentArtifact> found;
  for (upstream::AgentArtifact& a : *all) {
    if (a.path != want) continue;
    if (!found || a.created_at >= found->created_at) found = std::move(a);
  }
  if (!found) return errors::NotFound("artifact", want);
  return *found;
}

absl::StatusOr<std::string> AgentsSession::ReadFile(absl::string_view path, uint64_t max_bytes) {
  if (path == kAgentsEventsArtifact) {
    absl::MutexLock lock(&mu_);
    std::string out = events_;
    if (events_left_out_ > 0) {
      absl::StrAppend(&out,
                      json{{"type", "sandgate.events_left_out"},
                           {"count", events_left_out_},
                           {"cap_bytes", options_.max_events_bytes}}
                          .dump(),
                      "\n");
    }
    if (out.size() > max_bytes) {
      return errors::ResourceExhausted(
          absl::StrCat(kAgentsEventsArtifact, " is ", out.size(), " bytes, above ", max_bytes));
    }
    return out;
  }
  absl::StatusOr<upstream::AgentArtifact> a = FindArtifact(path);
  if (!a.ok()) return a.status();
  std::string upstream_id;
  {
    absl::MutexLock lock(&mu_);
    upstream_id = upstream_id_;
  }
  absl::StatusOr<std::string> content = client_->ArtifactContent(upstream_id, a->id, max_bytes);
  if (!content.ok()) {
    return ArtifactsUnreadable(content.status(), absl::StrCat("downloading ", path),
                               /*listing=*/false);
  }
  return content;
}

absl::StatusOr<FileListing> AgentsSession::ListFiles(absl::string_view dir) {
  std::string upstream_id;
  {
    absl::MutexLock lock(&mu_);
    upstream_id = upstream_id_;
  }
  FileListing listing;
  if (upstream_id.empty()) return listing;
  absl::StatusOr<std::vector<upstream::AgentArtifact>> all = client_->ListAllArtifacts(upstream_id);
  if (!all.ok()) return ArtifactsUnreadable(all.status(), "listing them", /*listing=*/true);
  const std::string prefix =
      dir.empty() ? absl::StrCat(kAgentsOutputs, "/") : absl::StrCat(kAgentsOutputs, "/", dir, "/");
  for (const upstream::AgentArtifact& a : *all) {
    absl::string_view rel = a.path;
    if (!absl::ConsumePrefix(&rel, prefix)) continue;
    listing.entries.push_back({std::string(rel), FileType::kRegular,
                               static_cast<uint64_t>(a.size_bytes > 0 ? a.size_bytes : 0), ""});
  }
  std::sort(listing.entries.begin(), listing.entries.end(),
            [](const FileEntry& x, const FileEntry& y) { return x.path < y.path; });
  return listing;
}

absl::Status AgentsSession::Close() {
  absl::MutexLock serial(&close_mu_);
  std::string upstream_id;
  bool may_exist, turn_over;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
    ledger_->Closed(id_);
    if (!started_) return absl::OkStatus();  // nothing was made or journaled
    upstream_id = upstream_id_;
    may_exist = may_exist_;
    turn_over = turn_over_;
  }
  if (upstream_id.empty()) {
    if (may_exist) {
      // The create's answer was lost before it named the session: find it by the metadata the
      // create set, now, rather than leave it to the next daemon's sweep.
      absl::StatusOr<int> found = DeleteByMetadata(client_, id_);
      if (!found.ok()) {
        return absl::Status(found.status().code(),
                            absl::StrCat(found.status().message(), "; its journal entry stays"));
      }
      if (*found == 0) {
        // A create still landing, or a list that lags it: the sweep looks again.
        return errors::Unavailable(absl::StrCat(
            "the Agents API session of ", id_,
            " may have been created although its create failed, and no session with metadata ",
            kSessionMetadata, "=", id_, " is listed yet; its journal entry stays"));
      }
    }
    return journal_->Erase(AgentsSessionJournalId(id_));
  }
  absl::Status gone = CancelAndDelete(client_, upstream_id, !turn_over);
  if (!gone.ok()) {
    return absl::Status(gone.code(), absl::StrCat("deleting Agents API session ", upstream_id, ": ",
                                                  gone.message()));
  }
  log::Info("agents.session_deleted", {{"session", id_}, {"agent_session", upstream_id}});
  return journal_->Erase(AgentsSessionJournalId(id_));
}

absl::StatusOr<std::unique_ptr<AgentsProvider>> AgentsProvider::Create(
    upstream::AgentsClient* client, ResourceJournal* journal, AgentsProviderOptions options) {
  if (client == nullptr || journal == nullptr) {
    return errors::InvalidArgument("openai-agents provider: a client and a journal are required");
  }
  return std::unique_ptr<AgentsProvider>(new AgentsProvider(client, journal, std::move(options)));
}

absl::StatusOr<std::unique_ptr<Session>> AgentsProvider::Create(const SessionSpec& spec,
                                                                const CancelToken* /*cancel*/) {
  absl::Status ok = CheckAgentsSpec(spec);
  if (!ok.ok()) return ok;
  SessionSpec kept = spec;
  kept.on_network_decision = nullptr;  // there is no proxy of ours to report
  return std::unique_ptr<Session>(
      new AgentsSession(client_, journal_, spec.id, std::move(kept), options_, ledger_));
}

absl::Status AgentsProvider::CheckRunIn(const std::string& session_id) const {
  if (!ledger_->HasRun(session_id)) return absl::OkStatus();
  return errors::FailedPrecondition(absl::StrCat(
      "session_id: session ", session_id,
      " has run its agent task already, and an Agents API session (provider openai-agents) "
      "runs one; start this run without session_id, which makes a new session"));
}

absl::Status AgentsProvider::Sweep(const JournalEntry& entry) {
  const std::string upstream_id = entry.details.value("agent_session_id", "");
  if (upstream_id.empty()) return SweepUnnamed(entry);
  absl::Status gone = CancelAndDelete(client_, upstream_id, /*cancel_first=*/true);
  if (!gone.ok()) return gone;
  return journal_->Erase(entry.id);
}

absl::Status AgentsProvider::SweepUnnamed(const JournalEntry& entry) {
  const std::string session = entry.details.value("session", "");
  if (session.empty()) {
    return errors::InvalidArgument(
        absl::StrCat("journal entry ", entry.id, " names no session to look for"));
  }
  absl::StatusOr<int> found = DeleteByMetadata(client_, session);
  if (!found.ok()) return found.status();
  if (*found == 0) {
    // The entry is from a dead daemon, so any create it sent has either made a session or
    // failed; but a create still in flight upstream when the daemon died, or a list that lags
    // a fresh create, may not show it yet. So an entry younger than kCreateSettle is kept:
    // UNAVAILABLE makes the start-up sweep ask again in the background (every 250 ms for a
    // minute), and an entry older than that with nothing found made nothing.
    const absl::Time requested =
        absl::FromUnixMillis(entry.details.value("requested_at_ms", int64_t{0}));
    if (clock_->Now() - requested < kCreateSettle) {
      return errors::Unavailable(
          absl::StrCat("no Agents API session has metadata ", kSessionMetadata, "=", session,
                       " yet; its create was sent less than ", absl::FormatDuration(kCreateSettle),
                       " ago and may still land"));
    }
    log::Info("agents.session_never_made", {{"session", session}});
  }
  return journal_->Erase(entry.id);
}

}  // namespace sandgate::sandbox
