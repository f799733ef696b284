// ResourceJournal: the durable record of every external resource sandgate creates.
//
// A resource is recorded *before* it is created and erased only *after* it is gone, so a
// daemon that is killed at any point leaves a record of everything it may have left behind;
// the next daemon sweeps those records at start (see core/ and each provider's Sweep).
//
// Thread safe. The real implementation is store/SqliteStore; tests use tests/fakes.
#ifndef SANDGATE_COMMON_JOURNAL_H_
#define SANDGATE_COMMON_JOURNAL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sandgate {

struct JournalEntry {
  std::string id;                                     // unique, e.g. "local-session:3f2a…"
  std::string provider;                               // who can sweep it: "local", "openai"
  std::string kind;                                   // "session", "file", "container", …
  nlohmann::json details = nlohmann::json::object();  // what Sweep needs to delete it
  // Whether the resource outlives the host's memory. A local sandbox does not: its
  // processes, cgroups and tmpfs mounts (under /run) all end with a power loss or reboot,
  // so its record only has to survive the daemon being killed, which a committed write
  // always does; Record then need not wait for the disk (an fsync costs 1-20 ms here, on
  // every sandbox create). A remote container does outlive it: durable.
  bool durable = true;
};

class ResourceJournal {
 public:
  virtual ~ResourceJournal() = default;
  // When it returns OK the record survives the daemon being killed, and, if entry.durable,
  // the host losing power (fsynced). Recording an existing id replaces its details.
  virtual absl::Status Record(const JournalEntry& entry) = 0;
  // Erasing an unknown id is OK.
  virtual absl::Status Erase(const std::string& id) = 0;
  virtual absl::StatusOr<std::vector<JournalEntry>> List() = 0;
};

}  // namespace sandgate

#endif  // SANDGATE_COMMON_JOURNAL_H_
