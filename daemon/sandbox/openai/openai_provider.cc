#include "sandbox/openai/openai_provider.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace sandgate::sandbox {
namespace {

constexpr absl::string_view kWorkdirPrefix = "/mnt/data/";

struct MemoryLimit {
  const char* name;
  uint64_t bytes;
};
constexpr MemoryLimit kMemoryLimits[] = {
    {"1g", 1ull << 30}, {"4g", 4ull << 30}, {"16g", 16ull << 30}, {"64g", 64ull << 30}};

std::string ContainerName(const std::string& session_id) {
  return absl::StrCat("sandgate-", session_id);
}

bool ValidSessionId(absl::string_view id) {
  if (id.empty() || id.size() > 40) return false;
  for (char c : id) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return true;
}

// A workspace-relative path: not empty, not absolute, no "." or ".." component.
absl::Status CheckRelative(absl::string_view path) {
  if (path.empty()) return errors::InvalidArgument("path: empty");
  if (path.front() == '/') {
    return errors::InvalidArgument(
        absl::StrCat("path '", path, "': must be relative to /mnt/data"));
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return errors::InvalidArgument(
          absl::StrCat("path '", path, "': '", part, "' components are not allowed"));
    }
  }
  return absl::OkStatus();
}

std::string MiB(uint64_t bytes) {
  if (bytes % (1ull << 30) == 0) return absl::StrCat(bytes >> 30, " GiB");
  return absl::StrCat(bytes >> 20, " MiB");
}

// Upstream expresses a gone container as 404 after deletion; either way it is deleted.
absl::Status DeleteIgnoringMissing(upstream::OpenAiClient* client, const std::string& id,
                                   const CancelToken* cancel) {
  absl::Status st = client->DeleteContainer(id, cancel);
  if (st.code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  return st;
}

// The ids of every container called `name`.
absl::StatusOr<std::vector<std::string>> ContainersNamed(upstream::OpenAiClient* client,
                                                         const std::string& name) {
  std::vector<std::string> ids;
  upstream::ListParams page;
  page.limit = 100;
  for (int guard = 0; guard < 1000; ++guard) {
    SANDGATE_ASSIGN_OR_RETURN(upstream::ContainerPage p, client->ListContainers(page, nullptr));
    for (const upstream::Container& c : p.data) {
      if (c.name == name) ids.push_back(c.id);
    }
    if (!p.has_more || p.last_id.empty()) break;
    page.after = p.last_id;
  }
  return ids;
}

// Deletes every container called `name` but `keep_id`: what earlier attempts of a create that
// was retried made although their answers were lost (each attempt made one, by the same name).
void DeleteOthersNamed(upstream::OpenAiClient* client, const std::string& name,
                       const std::string& keep_id, const std::string& session_id) {
  absl::StatusOr<std::vector<std::string>> named = ContainersNamed(client, name);
  if (!named.ok()) {
    log::Warning("sandbox.openai_lookup_failed",
                 {{"session", session_id}, {"name", name}, {"error", named.status().ToString()}});
    return;
  }
  for (const std::string& id : *named) {
    if (id == keep_id) continue;
    absl::Status st = DeleteIgnoringMissing(client, id, nullptr);
    if (st.ok()) {
      log::Info("sandbox.openai_extra_container_deleted",
                {{"session", session_id}, {"container", id}});
    } else {  // its name is still journaled: the sweep of the entry looks again
      log::Warning("sandbox.openai_extra_container_delete_failed",
                   {{"session", session_id}, {"container", id}, {"error", st.ToString()}});
    }
  }
}

}  // namespace

std::string OpenAiContainerJournalId(const std::string& session_id) {
  return absl::StrCat("openai-container:", session_id);
}

absl::StatusOr<std::string> MapMemoryLimit(uint64_t memory_bytes, const std::string& floor) {
  uint64_t floor_bytes = 0;
  for (const MemoryLimit& m : kMemoryLimits) {
    if (floor == m.name) floor_bytes = m.bytes;
  }
  if (floor_bytes == 0) {
    return errors::InvalidArgument(
        absl::StrCat("memory_limit '", floor, "': expected 1g, 4g, 16g or 64g"));
  }
  for (const MemoryLimit& m : kMemoryLimits) {
    if (m.bytes >= memory_bytes && m.bytes >= floor_bytes) return std::string(m.name);
  }
  return errors::InvalidArgument(absl::StrCat("memory_bytes: ", MiB(memory_bytes),
                                              " is above the largest hosted container (64g)"));
}

// ---------------------------------------------------------------------------------------------
// OpenAiSession

OpenAiSession::OpenAiSession(upstream::OpenAiClient* client, ResourceJournal* journal,
                             std::string id, std::string container_id, int64_t last_active_at,
                             std::vector<std::string> warnings, OpenAiProviderOptions options)
    : client_(client),
      journal_(journal),
      id_(std::move(id)),
      container_id_(std::move(container_id)),
      warnings_(std::move(warnings)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      created_at_(clock_->Now()),
      last_active_seen_(last_active_at) {}

OpenAiSession::~OpenAiSession() {
  absl::Status st = Close();
  if (!st.ok()) {
    log::Error("sandbox.openai_close_failed",
               {{"session", id_}, {"container", container_id_}, {"error", st.ToString()}});
  }
}

void OpenAiSession::StartKeeper() {
  keeper_ = std::thread([this] { KeeperLoop(); });
}

void OpenAiSession::KeeperLoop() {
  while (!clock_->SleepFor(options_.keepalive_interval, &stop_)) {
    if (!CheckUsable().ok() || !Keep()) return;
  }
}

namespace {
constexpr absl::string_view kKeeping = "the keeper's touch of the held container";

std::string Rfc3339(int64_t unix_seconds) {
  return absl::FormatTime(absl::RFC3339_sec, absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}
}  // namespace

bool OpenAiSession::Keep() {
  std::vector<std::string> tried;
  std::optional<upstream::Container> c;
  if (listing_counts_) {
    absl::StatusOr<std::vector<upstream::ContainerFile>> files =
        client_->ListContainerFiles(container_id_, &stop_);
    if (stop_.cancelled()) return false;
    if (IsExpiredError(files.status())) {
      MarkExpired(files.status().message(), kKeeping).IgnoreError();
      return false;
    }
    c = ReadContainer();
    if (!c.has_value()) return CheckUsable().ok();  // unreadable for now: next interval
    if (Moved(*c)) return true;
    tried.push_back("listing its files");
  }
  if (!options_.keepalive_model.empty()) {
    // Tool execution is the activity known to count (openai-api.md §3).
    const nlohmann::json request = {
        {"model", options_.keepalive_model},
        {"input", "Run exactly this shell command, nothing else: `true`"},
        {"tools", nlohmann::json::array(
                      {{{"type", "shell"},
                        {"environment",
                         {{"type", "container_reference"}, {"container_id", container_id_}}}}})},
        {"tool_choice", {{"type", "shell"}}},
        {"max_tool_calls", 1},
        {"store", false}};
    absl::StatusOr<nlohmann::json> ran = client_->CreateResponse(request, &stop_);
    if (stop_.cancelled()) return false;
    if (IsExpiredError(ran.status())) {
      MarkExpired(ran.status().message(), kKeeping).IgnoreError();
      return false;
    }
    if (!ran.ok()) {
      log::Warning(
          "sandbox.openai_keepalive_failed",
          {{"session", id_}, {"container", container_id_}, {"error", ran.status().ToString()}});
    }
    c = ReadContainer();
    if (!c.has_value()) return CheckUsable().ok();
    if (Moved(*c)) {
      if (listing_counts_) {
        listing_counts_ = false;
        log::Info(
            "sandbox.openai_keepalive_by_command",
            {{"session", id_},
             {"container", container_id_},
             {"why", "listing its files did not refresh last_active_at; running `true` did"}});
      }
      return true;
    }
    tried.push_back(absl::StrCat("running `true` through the hosted shell (",
                                 ran.ok() ? "it answered" : ran.status().message(), ")"));
  } else {
    tried.push_back(
        "(no keepalive model is configured to run a command, the touch known to count)");
  }
  CannotExtend(*c, tried);
  return true;  // a run may still touch it, and the next round checks again
}

std::optional<upstream::Container> OpenAiSession::ReadContainer() {
  absl::StatusOr<upstream::Container> c = client_->RetrieveContainer(container_id_, &stop_);
  if (!c.ok()) {
    if (IsExpiredError(c.status())) {
      MarkExpired(c.status().message(), kKeeping).IgnoreError();
    } else if (!stop_.cancelled()) {
      // Transient (the retrying client already retried): the next interval tries again.
      log::Warning(
          "sandbox.openai_keepalive_failed",
          {{"session", id_}, {"container", container_id_}, {"error", c.status().ToString()}});
    }
    return std::nullopt;
  }
  if (c->status == "expired") {
    std::string said = "status \"expired\"";
    if (c->last_active_at > 0)
      absl::StrAppend(&said, ", last active at ", Rfc3339(c->last_active_at));
    if (c->expires_after_minutes > 0) {
      absl::StrAppend(&said, ", expires_after ", c->expires_after_minutes, " minutes");
    }
    MarkExpired(said, kKeeping).IgnoreError();
    return std::nullopt;
  }
  return *std::move(c);
}

bool OpenAiSession::Moved(const upstream::Container& c) {
  // A server that does not report last_active_at cannot be checked: trust the touch.
  if (c.last_active_at == 0 || c.last_active_at > last_active_seen_) {
    last_active_seen_ = std::max(last_active_seen_, c.last_active_at);
    absl::MutexLock l(&mu_);
    expires_at_ = absl::InfiniteFuture();
    cannot_extend_.clear();
    return true;
  }
  return false;
}

void OpenAiSession::CannotExtend(const upstream::Container& c,
                                 const std::vector<std::string>& tried) {
  const int minutes =
      c.expires_after_minutes > 0 ? c.expires_after_minutes : options_.expires_after_minutes;
  const absl::Time at = absl::FromUnixSeconds(c.last_active_at) + absl::Minutes(minutes);
  const std::string why = absl::StrCat(
      "the daemon cannot keep container ", container_id_, " alive: ", absl::StrJoin(tried, "; "),
      " left its last_active_at at ", Rfc3339(c.last_active_at), ", so it expires at ",
      absl::FormatTime(absl::RFC3339_sec, at, absl::UTCTimeZone()), " (expires_after ", minutes,
      " minutes) unless a run uses it");
  absl::MutexLock l(&mu_);
  if (expires_at_ == at) return;
  expires_at_ = at;
  cannot_extend_ = why;
  log::Warning("sandbox.openai_keepalive_ineffective",
               {{"session", id_}, {"container", container_id_}, {"why", why}});
}

SessionHealth OpenAiSession::Health() const {
  absl::MutexLock l(&mu_);
  SessionHealth h;
  if (expired_) {
    h.expired = true;
    h.reason = std::string(ExpiredError().message());
  } else {
    h.expires_at = expires_at_;
    h.reason = cannot_extend_;
  }
  return h;
}

bool OpenAiSession::IsExpiredError(const absl::Status& status) {
  if (status.ok()) return false;
  // Upstream says "Container is expired." (spec §3); an expired API key must not count.
  const std::string m = absl::AsciiStrToLower(status.message());
  return absl::StrContains(m, "container") && absl::StrContains(m, "expired");
}

absl::Status OpenAiSession::ExpiredError() const {
  // Only what was observed: the API's words, when, during what, and the container's age. Its
  // idle limit is not the cause to assume (a container can be reported expired at any age).
  return errors::FailedPrecondition(absl::StrCat(
      "container ", container_id_, " expired: during ", expired_during_, " at ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", expired_at_, absl::UTCTimeZone()), " (",
      absl::FormatDuration(absl::Trunc(expired_at_ - created_at_, absl::Milliseconds(100))),
      " after it was created) the API said: ", expired_said_, "; its files are lost"));
}

absl::Status OpenAiSession::MarkExpired(absl::string_view said, absl::string_view during) {
  absl::MutexLock l(&mu_);
  if (!expired_) {
    expired_ = true;
    expired_said_ = std::string(said);
    expired_during_ = std::string(during);
    expired_at_ = clock_->Now();
    log::Warning("sandbox.openai_container_expired", {{"session", id_},
                                                      {"container", container_id_},
                                                      {"during", expired_during_},
                                                      {"said", expired_said_}});
  }
  return ExpiredError();
}

absl::Status OpenAiSession::CheckUsable() const {
  absl::MutexLock l(&mu_);
  if (closed_) return errors::FailedPrecondition(absl::StrCat("session ", id_, " is closed"));
  if (expired_) return ExpiredError();
  return absl::OkStatus();
}

absl::Status OpenAiSession::Upstream(absl::Status status, absl::string_view what) {
  if (IsExpiredError(status)) return MarkExpired(status.message(), what);
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

absl::StatusOr<ExecResult> OpenAiSession::Exec(const ExecRequest&, const OutputCallback&,
                                               const CancelToken*) {
  return absl::UnimplementedError(
      "the openai provider runs commands only through the openai agent");
}

absl::Status OpenAiSession::WriteFile(absl::string_view path, absl::string_view data, int) {
  SANDGATE_RETURN_IF_ERROR(CheckRelative(path));
  if (absl::StrContains(path, '/')) {
    return errors::InvalidArgument(absl::StrCat(
        "path '", path,
        "': the openai provider places files only directly in /mnt/data (container file "
        "uploads take no directory)"));
  }
  if (data.size() > options_.max_file_bytes) {
    return errors::ResourceExhausted(absl::StrCat("file ", path, ": ", data.size(),
                                                  " bytes, above the ", options_.max_file_bytes,
                                                  "-byte upload limit"));
  }
  SANDGATE_RETURN_IF_ERROR(CheckUsable());
  absl::StatusOr<upstream::ContainerFile> f =
      client_->UploadContainerFile(container_id_, path, data, &stop_);
  if (!f.ok()) return Upstream(f.status(), absl::StrCat("uploading ", path));
  if (f->path != absl::StrCat(kWorkdirPrefix, path)) {
    // Upstream may rename uploads; the model is told the names it was given.
    log::Warning("sandbox.openai_upload_renamed", {{"session", id_},
                                                   {"container", container_id_},
                                                   {"path", std::string(path)},
                                                   {"container_path", f->path}});
  }
  return absl::OkStatus();
}

absl::StatusOr<FileListing> OpenAiSession::ListFiles(absl::string_view dir) {
  std::string prefix(kWorkdirPrefix);
  if (!dir.empty()) {
    SANDGATE_RETURN_IF_ERROR(CheckRelative(dir));
    absl::StrAppend(&prefix, dir, "/");
  }
  SANDGATE_RETURN_IF_ERROR(CheckUsable());
  absl::StatusOr<std::vector<upstream::ContainerFile>> files =
      client_->ListContainerFiles(container_id_, &stop_);
  if (!files.ok()) return Upstream(files.status(), "listing container files");
  FileListing out;
  for (const upstream::ContainerFile& f : *files) {
    if (!absl::StartsWith(f.path, prefix)) continue;
    FileEntry e;
    e.path = f.path.substr(kWorkdirPrefix.size());
    e.type = FileType::kRegular;
    e.size = f.bytes < 0 ? 0 : static_cast<uint64_t>(f.bytes);
    out.entries.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<std::string> OpenAiSession::ReadFile(absl::string_view path, uint64_t max_bytes) {
  SANDGATE_RETURN_IF_ERROR(CheckRelative(path));
  SANDGATE_RETURN_IF_ERROR(CheckUsable());
  absl::StatusOr<std::vector<upstream::ContainerFile>> files =
      client_->ListContainerFiles(container_id_, &stop_);
  if (!files.ok()) return Upstream(files.status(), absl::StrCat("reading ", path));
  const std::string want = absl::StrCat(kWorkdirPrefix, path);
  for (const upstream::ContainerFile& f : *files) {
    if (f.path != want) continue;
    if (f.bytes >= 0 && static_cast<uint64_t>(f.bytes) > max_bytes) {
      return errors::ResourceExhausted(absl::StrCat(
          "file ", path, ": ", f.bytes, " bytes, above the ", max_bytes, "-byte limit"));
    }
    absl::StatusOr<std::string> data =
        client_->ContainerFileContent(container_id_, f.id, max_bytes, &stop_);
    if (!data.ok()) {
      if (data.status().code() == absl::StatusCode::kResourceExhausted) {
        return errors::ResourceExhausted(
            absl::StrCat("file ", path, ": above the ", max_bytes, "-byte limit"));
      }
      return Upstream(data.status(), absl::StrCat("reading ", path));
    }
    return data;
  }
  return errors::NotFound("file", path);
}

absl::Status OpenAiSession::Close() {
  absl::MutexLock close_lock(&close_mu_);
  {
    absl::MutexLock l(&mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
  }
  stop_.Cancel("session closed");
  if (keeper_.joinable()) keeper_.join();
  // Not cancellable: the container must go whatever happened to the run.
  absl::Status st = DeleteIgnoringMissing(client_, container_id_, nullptr);
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat("deleting container ", container_id_, ": ",
                                                st.message(), " (left for the journal sweep)"));
  }
  log::Info("sandbox.openai_container_deleted", {{"session", id_}, {"container", container_id_}});
  // An earlier attempt of a retried create may have landed while this session lived.
  DeleteOthersNamed(client_, ContainerName(id_), container_id_, id_);
  return journal_->Erase(OpenAiContainerJournalId(id_));
}

// ---------------------------------------------------------------------------------------------
// OpenAiProvider

absl::StatusOr<std::unique_ptr<OpenAiProvider>> OpenAiProvider::Create(
    upstream::OpenAiClient* client, ResourceJournal* journal, OpenAiProviderOptions options) {
  if (client == nullptr) return errors::InvalidArgument("openai client: required");
  if (journal == nullptr) return errors::InvalidArgument("journal: required");
  SANDGATE_RETURN_IF_ERROR(MapMemoryLimit(0, options.memory_limit).status());
  if (options.expires_after_minutes < 1) {
    return errors::InvalidArgument("container_expires_after_minutes: at least 1");
  }
  if (options.keepalive_interval <= absl::ZeroDuration() ||
      options.keepalive_interval >= absl::Minutes(options.expires_after_minutes) / 2) {
    return errors::InvalidArgument(
        absl::StrCat("keepalive_interval ", absl::FormatDuration(options.keepalive_interval),
                     ": must be positive and under half of expires_after (",
                     options.expires_after_minutes, " minutes)"));
  }
  return std::unique_ptr<OpenAiProvider>(new OpenAiProvider(client, journal, std::move(options)));
}

absl::StatusOr<std::unique_ptr<Session>> OpenAiProvider::Create(const SessionSpec& spec,
                                                                const CancelToken* cancel) {
  if (!ValidSessionId(spec.id)) {
    return errors::InvalidArgument(
        absl::StrCat("session id '", spec.id, "': expected [a-z0-9-]{1,40}"));
  }
  std::vector<std::string> warnings;
  upstream::ContainerSpec cs;
  cs.name = ContainerName(spec.id);
  cs.expires_after_minutes = options_.expires_after_minutes;
  SANDGATE_ASSIGN_OR_RETURN(cs.memory_limit,
                            MapMemoryLimit(spec.memory_bytes, options_.memory_limit));
  warnings.push_back(absl::StrCat("memory ", MiB(spec.memory_bytes),
                                  " mapped to the hosted container size ", cs.memory_limit,
                                  " (1g, 4g, 16g or 64g, rounded up)"));
  upstream::NetworkPolicy np;
  switch (spec.network.mode) {
    case NetworkMode::kDisabled:
      np.type = upstream::NetworkPolicy::Type::kDisabled;
      break;
    case NetworkMode::kRestricted:
      if (spec.network.allowed_domains.empty()) {
        np.type = upstream::NetworkPolicy::Type::kDisabled;
        warnings.push_back("network restricted with no allowed domains: the container has none");
      } else {
        np.type = upstream::NetworkPolicy::Type::kAllowlist;
        np.allowed_domains = spec.network.allowed_domains;
      }
      warnings.push_back(
          "network ports and connection/byte caps are not enforced by hosted containers, and "
          "no per-connection decisions are reported; OpenAI's egress proxy applies the domain "
          "allowlist");
      break;
    case NetworkMode::kEnabled:
      return errors::InvalidArgument(
          "sandbox.network: 'enabled' is not available on the openai provider (hosted "
          "containers take 'disabled' or an allowlist; use 'restricted' with allowed_domains)");
  }
  cs.network_policy = np;
  if (!spec.env.empty()) {
    warnings.push_back("environment variables not applied: hosted containers take none");
  }
  warnings.push_back(
      "process count, workspace size/inodes, CPU time and CPU share are the hosted container's "
      "own (OpenAI's), not sandgate's limits");

  JournalEntry entry;
  entry.id = OpenAiContainerJournalId(spec.id);
  entry.provider = "openai";
  entry.kind = "container";
  entry.details = {{"name", cs.name},
                   {"session", spec.id},
                   {"requested_at_ms", absl::ToUnixMillis(clock_->Now())}};
  SANDGATE_RETURN_IF_ERROR(journal_->Record(entry));

  // Not cancellable (see the file comment): aborting the request would not stop upstream
  // from making the container, only keep its id from us.
  absl::StatusOr<upstream::Container> created = client_->CreateContainer(cs, nullptr);
  if (!created.ok()) {
    // The request may have reached OpenAI and still be carried out: the entry stays until a
    // look by name settles it. It records when we gave up, so a restarted daemon knows how
    // long its sweep must keep looking.
    entry.details["gave_up_at_ms"] = absl::ToUnixMillis(clock_->Now());
    absl::Status recorded = journal_->Record(entry);
    if (!recorded.ok()) {
      log::Error("sandbox.openai_journal_failed",
                 {{"session", spec.id}, {"error", recorded.ToString()}});
    }
    // Whatever stopped the look (nothing there yet, or the listing failed), look again.
    if (!Sweep(entry).ok()) KeepLooking(entry);
    return absl::Status(created.status().code(),
                        absl::StrCat("creating container: ", created.status().message()));
  }
  entry.details["container_id"] = created->id;
  absl::Status recorded = journal_->Record(entry);
  const bool cancelled = cancel != nullptr && cancel->cancelled();
  if (!recorded.ok() || cancelled) {
    // Cancelled while upstream made it, or its id is not journaled (the name-only entry
    // still lets a sweep find it): delete it now.
    absl::Status st = DeleteIgnoringMissing(client_, created->id, nullptr);
    if (st.ok()) journal_->Erase(entry.id).IgnoreError();
    if (!recorded.ok()) return recorded;
    return errors::Cancelled(cancel->reason());
  }
  // The create may have been retried (retry.h) after an attempt whose answer was lost but
  // which upstream carried out: that container has our name too, and nothing else owns it.
  DeleteOthersNamed(client_, cs.name, created->id, spec.id);
  log::Info("sandbox.openai_container_created",
            {{"session", spec.id}, {"container", created->id}, {"memory_limit", cs.memory_limit}});
  std::unique_ptr<OpenAiSession> session(
      new OpenAiSession(client_, journal_, spec.id, created->id,
                        created->last_active_at > 0 ? created->last_active_at : created->created_at,
                        std::move(warnings), options_));
  session->StartKeeper();
  return std::unique_ptr<Session>(std::move(session));
}

absl::Status OpenAiProvider::Sweep(const JournalEntry& entry) {
  if (entry.provider != "openai" || entry.kind != "container") {
    return errors::InvalidArgument(
        absl::StrCat("journal entry ", entry.id, " is not an openai container"));
  }
  const nlohmann::json& d = entry.details;
  if (d.is_object() && d.contains("container_id") && d["container_id"].is_string()) {
    const std::string id = d["container_id"].get<std::string>();
    SANDGATE_RETURN_IF_ERROR(DeleteIgnoringMissing(client_, id, nullptr));
    log::Info("sandbox.openai_swept", {{"entry", entry.id}, {"container", id}});
    if (d.contains("name") && d["name"].is_string()) {
      DeleteOthersNamed(client_, d["name"].get<std::string>(), id, entry.id);
    }
    return journal_->Erase(entry.id);
  }
  // The create failed, or the daemon died between asking for the container and learning its
  // id: find it by name. The request may still be carried out after that, so until
  // create_settle has passed since it was last in flight (sent, or given up on), finding
  // nothing proves nothing. (Entries without either time are from before they were
  // journaled.)
  absl::Time last_in_flight = absl::InfinitePast();
  for (const char* key : {"requested_at_ms", "gave_up_at_ms"}) {
    if (d.is_object() && d.contains(key) && d[key].is_number_integer()) {
      last_in_flight = std::max(last_in_flight, absl::FromUnixMillis(d[key].get<int64_t>()));
    }
  }
  return SweepByName(entry, last_in_flight + options_.create_settle);
}

OpenAiProvider::~OpenAiProvider() {
  stop_.Cancel("provider destroyed");
  std::thread looker;
  {
    absl::MutexLock l(&looker_mu_);
    looker = std::move(looker_);
  }
  if (looker.joinable()) looker.join();
}

void OpenAiProvider::KeepLooking(JournalEntry entry) {
  log::Info("sandbox.openai_create_unsettled",
            {{"entry", entry.id}, {"why", "no container found yet; its create may still land"}});
  absl::MutexLock l(&looker_mu_);
  unsettled_.push_back(std::move(entry));
  if (!looker_.joinable()) looker_ = std::thread([this] { LookerLoop(); });
}

void OpenAiProvider::LookerLoop() {
  while (!stop_.WaitFor(options_.recheck_interval)) {
    std::vector<JournalEntry> entries;
    {
      absl::MutexLock l(&looker_mu_);
      entries.swap(unsettled_);
    }
    std::vector<JournalEntry> still;
    for (JournalEntry& entry : entries) {
      absl::Status st = Sweep(entry);
      if (st.code() == absl::StatusCode::kUnavailable) {
        still.push_back(std::move(entry));
      } else if (!st.ok()) {
        // The entry stays in the journal for the next daemon's sweep.
        log::Error("sandbox.openai_create_cleanup_failed",
                   {{"entry", entry.id}, {"error", st.ToString()}});
      }
    }
    absl::MutexLock l(&looker_mu_);
    for (JournalEntry& entry : still) unsettled_.push_back(std::move(entry));
  }
}

absl::Status OpenAiProvider::SweepByName(const JournalEntry& entry, absl::Time settle_until) {
  const nlohmann::json& d = entry.details;
  if (!d.is_object() || !d.contains("name") || !d["name"].is_string()) {
    return errors::InvalidArgument(absl::StrCat("journal entry ", entry.id, ": no container name"));
  }
  const std::string name = d["name"].get<std::string>();
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> doomed, ContainersNamed(client_, name));
  for (const std::string& id : doomed) {
    SANDGATE_RETURN_IF_ERROR(DeleteIgnoringMissing(client_, id, nullptr));
    log::Info("sandbox.openai_swept", {{"entry", entry.id}, {"container", id}});
  }
  // A create retried after a failed attempt may land once more: only past settle_until is
  // the name known to be gone for good.
  if (clock_->Now() < settle_until) {
    return errors::Unavailable(absl::StrCat(
        doomed.empty() ? "no container" : absl::StrCat("deleted ", doomed.size(), " container(s)"),
        " named ", name, " so far, and its create may still land until ",
        absl::FormatTime(settle_until, absl::UTCTimeZone()), ": look again"));
  }
  return journal_->Erase(entry.id);
}

}  // namespace sandgate::sandbox
