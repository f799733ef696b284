// ProcessManager: processes of kept sessions that a caller talks to over time — started in
// the background, their output read later from any offset, their stdin written, signalled,
// waited for (StartProcess, ReadProcessOutput, WriteProcessInput, ListProcesses).
//
//   v1::Process p;
//   processes.Start(caller, start_request, &p);               // returns at once: p.id()
//   v1::ProcessOutput out;
//   read.set_offset(0); *read.mutable_wait() = ToProto(absl::Seconds(10));
//   processes.Read(caller, read, &out);                       // waits for output or the end
//   processes.Write(caller, write_request, &written);         // stdin, EOF, a signal, a resize
//
// Each process runs Session::Exec on a thread of its own with an ExecChannel, holding a
// lease on its session while it runs: a running process keeps its session from idling, and
// the session's end kills it (it ends cancelled). Its output goes to an OutputRing of
// processes.output_buffer_bytes; reads say how much was dropped before what they return.
// Limits per session (core/config.h ProcessLimits): running processes, and the output
// buffers of all processes kept (ended ones are forgotten, oldest first, to make room).
//
// Thread safe. Waits of Read go through the injected clock. The destructor kills every
// running process and waits for their threads; destroy it before the SessionManager.
#ifndef SANDGATE_CORE_PROCESSES_H_
#define SANDGATE_CORE_PROCESSES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "core/config.h"
#include "core/session_manager.h"
#include "core/tenants.h"
#include "sandbox/sandbox.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

// The newest `capacity` bytes of a process's output, addressed by their offset in everything
// it wrote (stdout and stderr interleaved as produced). Not thread safe (a value).
class OutputRing {
 public:
  explicit OutputRing(uint64_t capacity) : capacity_(capacity) {}
  void Append(sandbox::OutputStream stream, absl::string_view data);
  // Up to `max_bytes` from `offset` (clamped up to what is still held) into `out`'s chunks,
  // offset, next_offset and dropped_bytes. INVALID_ARGUMENT when `offset` is past the end.
  absl::Status Read(uint64_t offset, uint64_t max_bytes, v1::ProcessOutput* out) const;
  uint64_t start() const { return end_ - held_; }  // the oldest byte still held
  uint64_t end() const { return end_; }            // everything written so far

 private:
  struct Chunk {
    uint64_t offset;
    sandbox::OutputStream stream;
    std::string data;
  };
  const uint64_t capacity_;
  std::deque<Chunk> chunks_;
  uint64_t held_ = 0;
  uint64_t end_ = 0;
};

class ProcessManager {
 public:
  struct Deps {
    const Config* config = nullptr;  // all not owned; outlive the manager
    SessionManager* sessions = nullptr;
    Clock* clock = nullptr;
  };
  explicit ProcessManager(Deps deps) : deps_(deps) {}
  ~ProcessManager();

  // INVALID_ARGUMENT for a bad request, FAILED_PRECONDITION when the session's provider cannot
  // talk to commands or the session ended, RESOURCE_EXHAUSTED at a limit.
  absl::Status Start(const Caller& caller, const v1::StartProcessRequest& request,
                     v1::Process* response);
  absl::Status Read(const Caller& caller, const v1::ReadProcessOutputRequest& request,
                    v1::ProcessOutput* response);
  absl::Status Write(const Caller& caller, const v1::WriteProcessInputRequest& request,
                     v1::WriteProcessInputResponse* response);
  absl::Status List(const Caller& caller, const v1::ListProcessesRequest& request,
                    v1::ListProcessesResponse* response);

  // How long Write waits for a process to take its input (and to start).
  static constexpr absl::Duration kInputWait = absl::Seconds(5);
  static constexpr size_t kMaxInputBytes = 1 << 20;
  static constexpr uint64_t kDefaultReadBytes = 64 << 10;
  static constexpr uint64_t kMaxReadBytes = 1 << 20;

 private:
  struct Proc;
  struct Table;
  // The processes of session `id` when the caller may see it (NOT_FOUND otherwise); made
  // empty on first use.
  absl::StatusOr<std::shared_ptr<Table>> TableOf(const Caller& caller, const std::string& id);
  absl::StatusOr<std::shared_ptr<Proc>> Find(const Caller& caller, const std::string& session_id,
                                             const std::string& process_id);
  // Forgets the tables of sessions that ended and whose processes all ended.
  void ForgetEnded();

  const Deps deps_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Table>> tables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_PROCESSES_H_
