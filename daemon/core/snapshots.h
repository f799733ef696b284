// Snapshots: a kept session's workspace saved into the artifact store, so that any replica
// restores it into a new session (docs/sessions.md, "Snapshots").
//
// Taking one runs `tar` in the session's sandbox over its workspace (modes kept, links stored
// as links, never followed, hard links stored as files) and streams its output through a
// TarReader (core/tar_reader.h) into the artifact store under the snapshot's id: what the
// sandbox wrote is untrusted, so it is checked as it arrives, bounded by
// snapshots.max_bytes (RESOURCE_EXHAUSTED naming the key, and nothing is kept).
//
// Restoring reads the tar back from the artifact store through a TarReader again and writes
// it with the daemon's own file calls, whose path rules are UploadFile's (relative, no "..",
// no link on the way, never following one): regular files with their permission bits
// (never setuid, setgid or sticky), directories, then, inside the sandbox, the links
// (`ln -s`) and the directories' modes (`chmod`). An archive the rules refuse fails the
// restore with INVALID_ARGUMENT naming the entry; the session made for it is closed.
//
// Records: store::SnapshotStore; a snapshot belongs to its tenant (another tenant's is
// NOT_FOUND, as a run is), and is purged with the runs (retention).
//
//   Snapshots snapshots({&config, &sessions, &snapshot_store, &artifacts, clock, replica});
//   SANDGATE_ASSIGN_OR_RETURN(v1::Snapshot s, snapshots.Take(caller, request));
//   SANDGATE_ASSIGN_OR_RETURN(v1::Session copy, snapshots.CreateSession(caller, create));
//
// Thread safe; the calls block (sandbox, store).
#ifndef SANDGATE_CORE_SNAPSHOTS_H_
#define SANDGATE_CORE_SNAPSHOTS_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "core/config.h"
#include "core/session_manager.h"
#include "core/tenants.h"
#include "sandbox/sandbox.h"
#include "sandgate/v1/sandgate.pb.h"
#include "store/artifact_store.h"
#include "store/snapshot_store.h"

namespace sandgate::core {

// The artifact a snapshot's tar is stored as, under the snapshot's id.
inline constexpr const char kSnapshotArtifact[] = "workspace.tar";

// Gives the archive in order, one piece per call; an empty piece at its end.
using ArchiveSource = std::function<absl::StatusOr<std::string>()>;

// Writes the archive `source` gives into `session`'s workspace, with the rules above.
// Returns the entries restored.
absl::StatusOr<uint64_t> RestoreArchive(const ArchiveSource& source, sandbox::Session& session,
                                        const SnapshotLimits& limits);

// One page of a tenant's snapshots (ListSnapshots). `all` is the listing, newest first.
// page_size 0 is every one (what callers got before paging; the dashboard and the clients
// still ask so), else 1 to 500; page_token is the previous page's next_page_token ("" = the
// first page), empty in the answer after the last page. The token is a cursor (the last
// snapshot's creation time and id), so a page is the same whether snapshots were taken or
// deleted meanwhile: newer ones are not repeated, and a cursor whose snapshot was deleted
// goes on from its time. INVALID_ARGUMENT naming the field for anything else.
struct SnapshotPage {
  std::vector<v1::Snapshot> snapshots;
  std::string next_page_token;
};
absl::StatusOr<SnapshotPage> PageOfSnapshots(std::vector<v1::Snapshot> all, uint32_t page_size,
                                             const std::string& page_token);

class Snapshots {
 public:
  struct Deps {
    const Config* config = nullptr;  // all not owned; outlive the Snapshots
    SessionManager* sessions = nullptr;
    store::SnapshotStore* store = nullptr;
    store::ArtifactStore* artifacts = nullptr;
    Clock* clock = nullptr;
    std::string replica;  // this daemon's replica.id, recorded in each snapshot
  };
  explicit Snapshots(Deps deps) : deps_(std::move(deps)) {}

  // SnapshotSession: the session's workspace saved; with request.close(), the session is
  // then closed (a pause).
  absl::StatusOr<v1::Snapshot> Take(const Caller& caller,
                                    const v1::SnapshotSessionRequest& request);
  // CreateSession with from_snapshot: a new session, then the snapshot's workspace restored
  // into it. When the restore fails, the new session is closed and the error returned.
  absl::StatusOr<v1::Session> CreateSession(const Caller& caller, v1::CreateSessionRequest request,
                                            const CancelToken* cancel);
  absl::StatusOr<v1::Snapshot> Get(const Caller& caller, const std::string& id);
  absl::StatusOr<std::vector<v1::Snapshot>> List(const Caller& caller,
                                                 const std::string& session_id);
  absl::Status Delete(const Caller& caller, const std::string& id);
  // Retention: every tenant's snapshots taken before `cutoff`, with their tars. Returns how
  // many went.
  absl::StatusOr<size_t> PurgeBefore(absl::Time cutoff);

 private:
  // Runs tar in the session and streams its checked output into `writer`.
  absl::Status Archive(SessionManager::Lease& lease, store::ArtifactStore::Writer& writer,
                       v1::Snapshot* record);
  absl::Status Remove(const std::string& id);

  const Deps deps_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_SNAPSHOTS_H_
