#include "core/snapshots.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cancel.h"
#include "common/errors.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "core/request_validation.h"
#include "core/sandbox_spec.h"
#include "core/tar_reader.h"

namespace sandgate::core {
namespace {

constexpr uint64_t kReadPiece = 1 << 20;     // of the stored tar, per artifact read
constexpr size_t kBatchArgBytes = 64 << 10;  // of one `ln` or `chmod` command's arguments
constexpr size_t kStderrBytes = 4096;        // kept of tar's stderr for an error
// How long tar and the restore's commands may take: a workspace is at most
// snapshots.max_bytes, and a sandbox writes hundreds of MiB/s to its own tmpfs.
constexpr absl::Duration kCommandTimeout = absl::Minutes(10);

// The workspace in the sandbox as a tar on stdout: links stored as links (tar follows none
// without -h), every hard link as a file of its own, GNU long names, numeric ids.
const std::vector<std::string> kTarArgv = {
    "tar", "--create", "--file=-", "--format=gnu", "--hard-dereference", "--numeric-owner", "."};

// Keeps the start of a command's stderr, up to kStderrBytes, for an error.
void KeepStderr(std::string* err, absl::string_view chunk) {
  chunk = chunk.substr(0, kStderrBytes - std::min(err->size(), kStderrBytes));
  err->append(chunk.data(), chunk.size());
}

// `script` (which takes its operands in pairs, "$1" "$2") over `pairs`, as few commands as
// the argument bound allows, in the session's workspace.
absl::Status RunPairs(sandbox::Session& session, const std::string& what, const std::string& script,
                      const std::vector<std::pair<std::string, std::string>>& pairs) {
  for (size_t at = 0; at < pairs.size();) {
    sandbox::ExecRequest req;
    req.argv = {"/bin/sh", "-c", script, "sh"};
    size_t bytes = 0;
    for (; at < pairs.size() && (bytes < kBatchArgBytes || req.argv.size() == 4); ++at) {
      req.argv.push_back(pairs[at].first);
      req.argv.push_back(pairs[at].second);
      bytes += pairs[at].first.size() + pairs[at].second.size() + 2;
    }
    req.timeout = kCommandTimeout;
    req.output_cap_bytes = kStderrBytes;
    std::string err;
    SANDGATE_ASSIGN_OR_RETURN(
        sandbox::ExecResult r,
        session.Exec(
            req,
            [&err](sandbox::OutputStream, absl::string_view chunk) { KeepStderr(&err, chunk); },
            nullptr));
    if (!r.ok()) {
      return errors::FailedPrecondition(absl::StrCat("restoring the snapshot's ", what,
                                                     " in the sandbox failed (exit ", r.exit_code,
                                                     r.timed_out ? ", timed out" : "", "): ", err));
    }
  }
  return absl::OkStatus();
}

// Writes the entries a TarReader gives into a session, with its file calls.
class Restorer {
 public:
  explicit Restorer(sandbox::Session& session) : session_(session) {}

  TarSink Sink() {
    return {[this](const TarEntry& e) { return Entry(e); },
            [this](absl::string_view piece) {
              data_.append(piece.data(), piece.size());
              return absl::OkStatus();
            },
            [this] { return End(); }};
  }

  // What the daemon cannot make with its file calls: the links, then the directories' modes
  // (deepest first, so that a directory made read-only does not stop its children).
  absl::Status Finish() {
    SANDGATE_RETURN_IF_ERROR(
        RunPairs(session_, "symbolic links",
                 "while [ $# -gt 1 ]; do ln -s -- \"$1\" \"$2\" || exit 1; shift 2; done", links_));
    std::reverse(modes_.begin(), modes_.end());
    return RunPairs(session_, "directory modes",
                    "while [ $# -gt 1 ]; do chmod -- \"$1\" \"$2\" || exit 1; shift 2; done",
                    modes_);
  }

 private:
  absl::Status Entry(const TarEntry& e) {
    current_ = e;
    data_.clear();
    if (e.type == TarEntry::Type::kFile) data_.reserve(e.size);
    return absl::OkStatus();
  }

  absl::Status End() {
    switch (current_.type) {
      case TarEntry::Type::kFile: {
        absl::Status st = session_.WriteFile(current_.path, data_, static_cast<int>(current_.mode));
        data_ = std::string();
        return Annotate(st);
      }
      case TarEntry::Type::kDirectory:
        SANDGATE_RETURN_IF_ERROR(Annotate(session_.MakeDirectory(current_.path, true)));
        if (current_.mode != 0755) modes_.emplace_back(Octal(current_.mode), current_.path);
        return absl::OkStatus();
      case TarEntry::Type::kSymlink:
        links_.emplace_back(current_.link_target, current_.path);
        return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  static std::string Octal(uint32_t mode) {
    std::string out;
    for (int shift = 6; shift >= 0; shift -= 3) {
      out.push_back(static_cast<char>('0' + ((mode >> shift) & 7)));
    }
    return out;
  }

  absl::Status Annotate(const absl::Status& st) const {
    if (st.ok()) return st;
    return absl::Status(st.code(), absl::StrCat("restoring '", current_.path, "': ", st.message()));
  }

  sandbox::Session& session_;
  TarEntry current_;
  std::string data_;  // the file being read, written whole at its end
  std::vector<std::pair<std::string, std::string>> links_;  // target, path
  std::vector<std::pair<std::string, std::string>> modes_;  // octal mode, directory
};

bool Visible(const Caller& caller, const v1::Snapshot& s) {
  return s.tenant() == caller.tenant || caller.is_operator;
}

}  // namespace

absl::StatusOr<uint64_t> RestoreArchive(const ArchiveSource& source, sandbox::Session& session,
                                        const SnapshotLimits& limits) {
  TarReader reader({limits.max_entries, limits.max_bytes});
  Restorer restorer(session);
  const TarSink sink = restorer.Sink();
  uint64_t read = 0;
  for (;;) {
    SANDGATE_ASSIGN_OR_RETURN(std::string piece, source());
    if (piece.empty()) break;
    read += piece.size();
    if (read > limits.max_bytes + 2 * 512 * 10) {  // the files, their headers and the end
      return errors::ResourceExhausted(absl::StrCat(
          "snapshots.max_bytes: the snapshot archive is larger than ", limits.max_bytes, " bytes"));
    }
    SANDGATE_RETURN_IF_ERROR(reader.Feed(piece, sink));
  }
  SANDGATE_RETURN_IF_ERROR(reader.Finish());
  SANDGATE_RETURN_IF_ERROR(restorer.Finish());
  return reader.entries();
}

absl::Status Snapshots::Archive(SessionManager::Lease& lease, store::ArtifactStore::Writer& writer,
                                v1::Snapshot* record) {
  const SnapshotLimits& limits = deps_.config->snapshots;
  TarReader reader({limits.max_entries, limits.max_bytes});
  const TarSink check{[](const TarEntry&) { return absl::OkStatus(); },
                      [](absl::string_view) { return absl::OkStatus(); },
                      [] { return absl::OkStatus(); }};
  CancelToken stop;
  absl::Status failed;
  uint64_t size = 0;
  std::string err;
  sandbox::ExecRequest req;
  req.argv = kTarArgv;
  req.timeout = kCommandTimeout;
  req.output_cap_bytes = limits.max_bytes + (1 << 20);
  auto on_output = [&](sandbox::OutputStream stream, absl::string_view chunk) {
    if (stream == sandbox::OutputStream::kStderr) {
      KeepStderr(&err, chunk);
      return;
    }
    if (!failed.ok()) return;
    size += chunk.size();
    if (size > limits.max_bytes) {
      failed = errors::ResourceExhausted(
          absl::StrCat("snapshots.max_bytes: the workspace's archive is larger than ",
                       limits.max_bytes, " bytes"));
    }
    if (failed.ok()) failed = reader.Feed(chunk, check);
    if (failed.ok()) failed = writer.Append(chunk);
    if (!failed.ok()) stop.Cancel(std::string(failed.message()));
  };
  SANDGATE_ASSIGN_OR_RETURN(sandbox::ExecResult r, lease.session().Exec(req, on_output, &stop));
  SANDGATE_RETURN_IF_ERROR(failed);
  // tar's 1: a file changed while it was read (the copy is of some moment during the call).
  if (r.term_signal != 0 || r.timed_out || r.cancelled || (r.exit_code != 0 && r.exit_code != 1)) {
    return errors::FailedPrecondition(
        absl::StrCat("snapshot: tar in the sandbox failed (exit ", r.exit_code,
                     r.term_signal ? absl::StrCat(", signal ", r.term_signal) : "",
                     r.timed_out ? ", timed out" : "", "): ", err.empty() ? "no message" : err));
  }
  SANDGATE_RETURN_IF_ERROR(reader.Finish());
  record->set_files(reader.entries());
  record->set_content_bytes(reader.content_bytes());
  return absl::OkStatus();
}

absl::StatusOr<v1::Snapshot> Snapshots::Take(const Caller& caller,
                                             const v1::SnapshotSessionRequest& request) {
  SANDGATE_RETURN_IF_ERROR(ValidateId(request.session_id(), "session_id"));
  SANDGATE_RETURN_IF_ERROR(ValidateLabels(request.labels()));
  SANDGATE_ASSIGN_OR_RETURN(v1::Session session, deps_.sessions->Get(caller, request.session_id()));
  if (session.provider() != "local") {
    return errors::FailedPrecondition(
        absl::StrCat("snapshot: provider '", session.provider(),
                     "' keeps its workspace upstream; snapshots are of local sessions only"));
  }
  SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<SessionManager::Lease> lease,
                            deps_.sessions->Acquire(caller, request.session_id()));
  v1::Snapshot record;
  record.set_id(absl::StrCat("snap-", RandomHex(16)));
  record.set_tenant(session.tenant());
  record.set_session_id(session.id());
  record.set_provider(session.provider());
  *record.mutable_sandbox() = session.sandbox();
  *record.mutable_labels() = request.labels();
  record.set_replica(deps_.replica);
  SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<store::ArtifactStore::Writer> writer,
                            deps_.artifacts->Create(record.id(), kSnapshotArtifact));
  const absl::Status archived = Archive(*lease, *writer, &record);
  absl::StatusOr<v1::Artifact> stored = archived.ok() ? writer->Commit() : archived;
  if (!stored.ok()) {
    writer.reset();  // what it wrote goes first, then whatever the store keeps for the id
    (void)deps_.artifacts->RemoveRun(record.id());
    return stored.status();
  }
  record.set_size_bytes(stored->size_bytes());
  record.set_sha256(stored->sha256());
  *record.mutable_created_at() = ToProto(deps_.clock->Now());
  absl::Status st = deps_.store->Create(record);
  if (!st.ok()) {
    (void)deps_.artifacts->RemoveRun(record.id());
    return st;
  }
  log::Info("snapshot.taken",
            {{"snapshot", record.id()}, {"session", session.id()}, {"bytes", record.size_bytes()}});
  lease.reset();
  if (request.close()) {
    SANDGATE_RETURN_IF_ERROR(
        deps_.sessions
            ->Close(caller, session.id(), absl::StrCat("paused into snapshot ", record.id()))
            .status());
  }
  return record;
}

absl::StatusOr<v1::Session> Snapshots::CreateSession(const Caller& caller,
                                                     v1::CreateSessionRequest request,
                                                     const CancelToken* cancel) {
  SANDGATE_ASSIGN_OR_RETURN(v1::Snapshot snapshot, Get(caller, request.from_snapshot()));
  if (!request.has_sandbox()) {
    *request.mutable_sandbox() = snapshot.sandbox();
    request.mutable_sandbox()->clear_files();
    request.mutable_sandbox()->clear_setup_commands();
  }
  if (request.provider().empty()) request.set_provider(snapshot.provider());
  SANDGATE_ASSIGN_OR_RETURN(v1::Session session, deps_.sessions->Create(caller, request, cancel));
  absl::Status st = [&]() -> absl::Status {
    SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<SessionManager::Lease> lease,
                              deps_.sessions->Acquire(caller, session.id()));
    uint64_t offset = 0;
    ArchiveSource source = [&]() -> absl::StatusOr<std::string> {
      SANDGATE_ASSIGN_OR_RETURN(
          std::string piece,
          deps_.artifacts->Read(snapshot.id(), kSnapshotArtifact, offset, kReadPiece));
      offset += piece.size();
      return piece;
    };
    return RestoreArchive(source, lease->session(), deps_.config->snapshots).status();
  }();
  if (!st.ok()) {
    const std::string why = absl::StrCat("restoring snapshot ", snapshot.id(), ": ", st.message());
    (void)deps_.sessions->Close(caller, session.id(), why);
    return absl::Status(st.code(), why);
  }
  log::Info("snapshot.restored", {{"snapshot", snapshot.id()}, {"session", session.id()}});
  return deps_.sessions->Get(caller, session.id());
}

absl::StatusOr<v1::Snapshot> Snapshots::Get(const Caller& caller, const std::string& id) {
  SANDGATE_RETURN_IF_ERROR(ValidateId(id, "snapshot_id"));
  absl::StatusOr<v1::Snapshot> s = deps_.store->Get(id);
  if (!s.ok()) return s.status();
  // Another tenant's is not there, as its runs are not: its existence is never told.
  if (!Visible(caller, *s)) return errors::NotFound("snapshot", id);
  return s;
}

namespace {

constexpr uint32_t kMaxSnapshotPage = 500;

int64_t CreatedNs(const v1::Snapshot& s) {
  return s.created_at().seconds() * 1000000000 + s.created_at().nanos();
}

// "snap-" and 32 hex digits, as Take names them.
bool IsSnapshotId(const std::string& id) {
  return id.size() == 37 && absl::StartsWith(id, "snap-") &&
         id.find_first_not_of("0123456789abcdef", 5) == std::string::npos;
}

}  // namespace

absl::StatusOr<SnapshotPage> PageOfSnapshots(std::vector<v1::Snapshot> all, uint32_t page_size,
                                             const std::string& page_token) {
  if (page_size > kMaxSnapshotPage) {
    return errors::InvalidArgument(absl::StrCat("page_size: at most ", kMaxSnapshotPage, ", got ",
                                                page_size, " (0 = every snapshot)"));
  }
  size_t start = 0;
  if (!page_token.empty()) {
    // "<creation time in ns>.<snapshot id>"
    const size_t dot = page_token.find('.');
    int64_t ns = -1;
    if (dot == std::string::npos || !absl::SimpleAtoi(page_token.substr(0, dot), &ns) || ns < 0 ||
        !IsSnapshotId(page_token.substr(dot + 1))) {
      std::string shown = EscapeInvalidUtf8(page_token.substr(0, 80));
      if (page_token.size() > 80) shown += "…";
      return errors::InvalidArgument(
          absl::StrCat("page_token: not a token from ListSnapshots: '", shown, "'"));
    }
    const std::string id = page_token.substr(dot + 1);
    auto at =
        std::find_if(all.begin(), all.end(), [&](const v1::Snapshot& s) { return s.id() == id; });
    if (at != all.end()) {
      start = static_cast<size_t>(at - all.begin()) + 1;
    } else {
      // Deleted meanwhile (or never the caller's): on from its time.
      while (start < all.size() && CreatedNs(all[start]) >= ns) ++start;
    }
  }
  SnapshotPage page;
  const size_t end =
      page_size == 0 ? all.size() : std::min(all.size(), start + static_cast<size_t>(page_size));
  for (size_t i = start; i < end; ++i) page.snapshots.push_back(std::move(all[i]));
  if (end < all.size() && !page.snapshots.empty()) {
    const v1::Snapshot& last = page.snapshots.back();
    page.next_page_token = absl::StrCat(CreatedNs(last), ".", last.id());
  }
  return page;
}

absl::StatusOr<std::vector<v1::Snapshot>> Snapshots::List(const Caller& caller,
                                                          const std::string& session_id) {
  if (!session_id.empty()) SANDGATE_RETURN_IF_ERROR(ValidateId(session_id, "session_id"));
  return deps_.store->List(caller.tenant, session_id);
}

absl::Status Snapshots::Delete(const Caller& caller, const std::string& id) {
  SANDGATE_RETURN_IF_ERROR(Get(caller, id).status());
  return Remove(id);
}

absl::Status Snapshots::Remove(const std::string& id) {
  // The tar first: a record whose tar is gone would restore nothing; a tar without its
  // record is found by nobody and goes with the next purge of its id.
  SANDGATE_RETURN_IF_ERROR(deps_.artifacts->RemoveRun(id));
  return deps_.store->Delete(id).status();
}

absl::StatusOr<size_t> Snapshots::PurgeBefore(absl::Time cutoff) {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> ids, deps_.store->ListCreatedBefore(cutoff));
  size_t purged = 0;
  for (const std::string& id : ids) {
    absl::Status st = Remove(id);
    if (!st.ok()) {
      log::Error("retention.snapshot_failed", {{"snapshot", id}, {"error", st.ToString()}});
      continue;
    }
    ++purged;
  }
  if (purged > 0) log::Info("retention.purged", {{"snapshots", purged}});
  return purged;
}

}  // namespace sandgate::core
