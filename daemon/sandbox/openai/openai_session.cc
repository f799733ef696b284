#include "sandbox/openai/openai_session.h"

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
#include "sandbox/openai/openai_containers.h"

namespace sandgate::sandbox {
namespace {

constexpr absl::string_view kWorkdirPrefix = "/mnt/data/";

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

constexpr absl::string_view kKeeping = "the keeper's touch of the held container";

std::string Rfc3339(int64_t unix_seconds) {
  return absl::FormatTime(absl::RFC3339_sec, absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}

}  // namespace

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

}  // namespace sandgate::sandbox
