// The sandbox provider interface: where agent code runs.
//
// A Provider creates Sessions; a Session is one live, isolated workspace with a shell. The
// daemon talks to sessions only through this interface, so core/ does not know whether a
// session is a bubblewrap sandbox on this machine (sandbox/local) or a hosted container
// (sandbox/openai, later).
//
//   absl::StatusOr<std::unique_ptr<Session>> s = provider->Create(spec, cancel);
//   SANDGATE_RETURN_IF_ERROR((*s)->WriteFile("input.csv", csv));
//   auto r = (*s)->Exec({.argv = {"python3", "analyze.py"}, .timeout = absl::Minutes(2)},
//                       [](OutputStream, absl::string_view chunk) { ... }, &cancel);
//   (*s)->Close();
#ifndef SANDGATE_SANDBOX_SANDBOX_H_
#define SANDGATE_SANDBOX_SANDBOX_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "common/journal.h"

namespace sandgate::sandbox {

enum class NetworkMode { kDisabled, kRestricted, kEnabled };

struct NetworkPolicy {
  NetworkMode mode = NetworkMode::kDisabled;
  // kRestricted: exact host names and "*.suffix" patterns.
  std::vector<std::string> allowed_domains;
};

struct SessionSpec {
  // Unique, [a-z0-9-], at most 40 chars; names every host resource ("sandgate-<id>").
  std::string id;
  uint64_t memory_bytes = 1ull << 30;
  uint32_t max_processes = 256;
  uint64_t workspace_bytes = 256ull << 20;
  uint64_t workspace_inodes = 16384;
  NetworkPolicy network;
  // Environment given to every command (merged under ExecRequest::env). Nothing of the
  // daemon's own environment ever reaches a sandbox.
  std::map<std::string, std::string> env;
};

enum class OutputStream { kStdout, kStderr };
// Called as output is produced, from the thread that called Exec.
using OutputCallback = std::function<void(OutputStream, absl::string_view)>;

struct ExecRequest {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // over SessionSpec::env
  std::string cwd;                         // relative to the workspace; "" = workspace root
  absl::Duration timeout = absl::Minutes(5);
  uint64_t output_cap_bytes = 4ull << 20;  // per stream; beyond it output is dropped, not buffered
};

struct ExecResult {
  int exit_code = -1;    // valid when term_signal == 0
  int term_signal = 0;   // the signal that ended the command, if any
  bool timed_out = false;
  bool cancelled = false;
  bool oom_killed = false;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  absl::Duration duration;
  bool ok() const { return term_signal == 0 && exit_code == 0 && !timed_out && !cancelled; }
};

enum class FileType { kRegular, kDirectory, kSymlink, kOther };

struct FileEntry {
  std::string path;  // relative to the workspace
  FileType type = FileType::kOther;
  uint64_t size = 0;
};

// One live sandbox. Thread safe: Exec may run concurrently with Exec and file calls; Close
// may be called from any thread, also while an Exec is running (which then ends cancelled).
class Session {
 public:
  virtual ~Session() = default;  // Closes the session if Close was not called.
  virtual const std::string& id() const = 0;
  // The workspace as commands see it, e.g. "/work".
  virtual std::string workdir() const = 0;
  // Runs a command to completion. Errors are infrastructure failures (session gone); a
  // command that fails, times out or is cancelled is an OK result describing that.
  virtual absl::StatusOr<ExecResult> Exec(const ExecRequest& request,
                                          const OutputCallback& on_output,
                                          const CancelToken* cancel) = 0;
  // Paths are relative to the workspace; "..", absolute paths and symlinks are refused.
  virtual absl::Status WriteFile(absl::string_view path, absl::string_view data,
                                 int mode = 0644) = 0;
  // Regular files only (not links, fifos, devices, hard-linked files); fails with
  // RESOURCE_EXHAUSTED when the file is larger than max_bytes.
  virtual absl::StatusOr<std::string> ReadFile(absl::string_view path, uint64_t max_bytes) = 0;
  // Recursive listing below `dir` ("" = workspace); links are listed, never followed.
  virtual absl::StatusOr<std::vector<FileEntry>> ListFiles(absl::string_view dir) = 0;
  // Human-readable notes about promises this session cannot keep on this host, e.g.
  // "memory limit not enforced: no memory cgroup controller available".
  virtual std::vector<std::string> Warnings() const = 0;
  // Kills every process, releases every host resource and erases the journal record.
  // Idempotent.
  virtual absl::Status Close() = 0;
};

// Thread safe.
class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string name() const = 0;
  // Journals the session before creating anything. `cancel` may abort a slow creation.
  virtual absl::StatusOr<std::unique_ptr<Session>> Create(const SessionSpec& spec,
                                                          const CancelToken* cancel) = 0;
  // Deletes whatever a previous daemon left for one of this provider's journal entries,
  // then erases the entry. OK when nothing was left.
  virtual absl::Status Sweep(const JournalEntry& entry) = 0;
};

}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_SANDBOX_H_
