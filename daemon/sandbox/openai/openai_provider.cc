#include "sandbox/openai/openai_provider.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "sandbox/openai/openai_containers.h"

namespace sandgate::sandbox {
namespace {

struct MemoryLimit {
  const char* name;
  uint64_t bytes;
};
constexpr MemoryLimit kMemoryLimits[] = {
    {"1g", 1ull << 30}, {"4g", 4ull << 30}, {"16g", 16ull << 30}, {"64g", 64ull << 30}};

bool ValidSessionId(absl::string_view id) {
  if (id.empty() || id.size() > 40) return false;
  for (char c : id) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return true;
}

std::string MiB(uint64_t bytes) {
  if (bytes % (1ull << 30) == 0) return absl::StrCat(bytes >> 30, " GiB");
  return absl::StrCat(bytes >> 20, " MiB");
}

}  // namespace

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
  // On the injected clock, like the create_settle it waits out.
  while (!clock_->SleepFor(options_.recheck_interval, &stop_)) {
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
