#include "core/processes.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "common/cancel.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/exec_stream.h"
#include "core/request_validation.h"
#include "core/sandbox_spec.h"
#include "sandbox/exec_channel.h"

namespace sandgate::core {

namespace {

// Consecutive output of one stream is kept in chunks of up to this, so a chatty process does
// not cost a chunk per write.
constexpr size_t kChunkBytes = 16 << 10;
constexpr uint32_t kMaxTerminalSide = 1000;

absl::StatusOr<sandbox::TerminalSize> ToTerminalSize(const v1::TerminalSize& size,
                                                     absl::string_view field) {
  if (size.rows() < 1 || size.rows() > kMaxTerminalSide || size.cols() < 1 ||
      size.cols() > kMaxTerminalSide) {
    return errors::InvalidArgument(absl::StrCat(field, ": rows and cols must be 1..",
                                                kMaxTerminalSide, " (got ", size.rows(), "x",
                                                size.cols(), ")"));
  }
  return sandbox::TerminalSize{static_cast<uint16_t>(size.rows()),
                               static_cast<uint16_t>(size.cols())};
}

// Process ids are "p" and a number: anything else names no process.
absl::Status ValidateProcessId(absl::string_view id) {
  const bool digits = id.size() >= 2 && id.size() <= 20 && id[0] == 'p' &&
                      std::all_of(id.begin() + 1, id.end(), absl::ascii_isdigit);
  if (!digits) {
    return errors::InvalidArgument("process_id: \"p\" and a number, as StartProcess returned it");
  }
  return absl::OkStatus();
}

}  // namespace

void OutputRing::Append(sandbox::OutputStream stream, absl::string_view data) {
  if (data.empty()) return;
  end_ += data.size();
  if (data.size() >= capacity_) {
    // Only its tail fits: everything before goes.
    chunks_.clear();
    held_ = 0;
    data.remove_prefix(data.size() - capacity_);
  }
  uint64_t offset = end_ - data.size();
  while (!data.empty()) {
    if (chunks_.empty() || chunks_.back().stream != stream ||
        chunks_.back().data.size() >= kChunkBytes) {
      chunks_.push_back(Chunk{offset, stream, std::string()});
    }
    std::string& last = chunks_.back().data;
    const size_t take = std::min(data.size(), kChunkBytes - last.size());
    last.append(data.data(), take);
    data.remove_prefix(take);
    offset += take;
    held_ += take;
  }
  while (held_ > capacity_) {
    Chunk& first = chunks_.front();
    const uint64_t over = held_ - capacity_;
    if (first.data.size() <= over) {
      held_ -= first.data.size();
      chunks_.pop_front();
      continue;
    }
    first.data.erase(0, over);
    first.offset += over;
    held_ -= over;
  }
}

absl::Status OutputRing::Read(uint64_t offset, uint64_t max_bytes, v1::ProcessOutput* out) const {
  if (offset > end_) {
    return errors::InvalidArgument(
        absl::StrCat("offset: ", offset, " is past the end of the output (", end_, " bytes)"));
  }
  const uint64_t from = std::max(offset, start());
  out->set_offset(from);
  out->set_dropped_bytes(from - offset);
  uint64_t next = from;
  for (const Chunk& c : chunks_) {
    const uint64_t chunk_end = c.offset + c.data.size();
    if (chunk_end <= next) continue;
    if (next - from >= max_bytes) break;
    const uint64_t skip = next - c.offset;
    const uint64_t take = std::min<uint64_t>(c.data.size() - skip, max_bytes - (next - from));
    v1::CommandOutput* chunk = out->add_chunks();
    chunk->set_stream(agent::ToProto(c.stream));
    chunk->set_data(c.data.substr(skip, take));
    next += take;
  }
  out->set_next_offset(next);
  return absl::OkStatus();
}

struct ProcessManager::Proc {
  Proc(std::string session, uint64_t ring_bytes)
      : session_id(std::move(session)), ring(ring_bytes) {}
  // Constant once Start placed it in its table.
  std::string id;
  const std::string session_id;
  std::vector<std::string> argv;
  bool pty = false;
  const std::shared_ptr<sandbox::ExecChannel> channel = std::make_shared<sandbox::ExecChannel>();
  CancelToken cancel;  // the session's end (the lease's watch) and the manager's
  std::thread thread;  // joined by whoever forgets the process, or the destructor

  mutable absl::Mutex mu;
  OutputRing ring ABSL_GUARDED_BY(mu);
  v1::Process::State state ABSL_GUARDED_BY(mu) = v1::Process::STATE_RUNNING;
  v1::CommandFinished finished ABSL_GUARDED_BY(mu);
  std::string error ABSL_GUARDED_BY(mu);
  absl::Time started ABSL_GUARDED_BY(mu);
  absl::Time ended ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  bool stdin_open ABSL_GUARDED_BY(mu) = false;

  bool running() const {
    absl::MutexLock lock(&mu);
    return state == v1::Process::STATE_RUNNING;
  }
  void Fill(v1::Process* p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    p->set_id(id);
    p->set_session_id(session_id);
    for (const std::string& a : argv) p->add_argv(a);
    p->set_state(state);
    if (state == v1::Process::STATE_EXITED) *p->mutable_finished() = finished;
    p->set_error(error);
    *p->mutable_started_at() = ToProto(started);
    if (state != v1::Process::STATE_RUNNING) *p->mutable_ended_at() = ToProto(ended);
    p->set_pty(pty);
    p->set_stdin_open(stdin_open && state == v1::Process::STATE_RUNNING);
    p->set_output_bytes(ring.end());
    p->set_dropped_bytes(ring.start());
  }
};

struct ProcessManager::Table {
  absl::Mutex mu;
  std::vector<std::shared_ptr<Proc>> procs ABSL_GUARDED_BY(mu);  // oldest first
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
};

ProcessManager::~ProcessManager() {
  std::vector<std::shared_ptr<Proc>> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, table] : tables_) {
      absl::MutexLock l(&table->mu);
      all.insert(all.end(), table->procs.begin(), table->procs.end());
    }
    tables_.clear();
  }
  for (const auto& p : all) p->cancel.Cancel("the daemon is shutting down");
  for (const auto& p : all) {
    if (p->thread.joinable()) p->thread.join();
  }
}

absl::StatusOr<std::shared_ptr<ProcessManager::Table>> ProcessManager::TableOf(
    const Caller& caller, const std::string& id) {
  // NOT_FOUND for another tenant's session, as everywhere.
  SANDGATE_RETURN_IF_ERROR(deps_.sessions->Get(caller, id).status());
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Table>& table = tables_[id];
  if (table == nullptr) table = std::make_shared<Table>();
  return table;
}

absl::StatusOr<std::shared_ptr<ProcessManager::Proc>> ProcessManager::Find(
    const Caller& caller, const std::string& session_id, const std::string& process_id) {
  SANDGATE_RETURN_IF_ERROR(ValidateId(session_id, "session_id"));
  SANDGATE_RETURN_IF_ERROR(ValidateProcessId(process_id));
  SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, TableOf(caller, session_id));
  absl::MutexLock lock(&table->mu);
  for (const auto& p : table->procs) {
    if (p->id == process_id) return p;
  }
  return errors::NotFound("process", process_id);
}

void ProcessManager::ForgetEnded() {
  std::vector<std::shared_ptr<Table>> gone;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = tables_.begin(); it != tables_.end();) {
      bool idle = !deps_.sessions->Holds(it->first);
      if (idle) {
        absl::MutexLock l(&it->second->mu);
        for (const auto& p : it->second->procs) idle = idle && !p->running();
      }
      if (!idle) {
        ++it;
        continue;
      }
      gone.push_back(it->second);
      it = tables_.erase(it);
    }
  }
  for (const auto& table : gone) {
    absl::MutexLock l(&table->mu);
    for (const auto& p : table->procs) {
      if (p->thread.joinable()) p->thread.join();
    }
  }
}

absl::Status ProcessManager::Start(const Caller& caller, const v1::StartProcessRequest& request,
                                   v1::Process* response) {
  // The fields an Exec shares are checked as Exec's are.
  v1::ExecRequest exec;
  exec.set_session_id(request.session_id());
  *exec.mutable_argv() = request.argv();
  exec.set_command(request.command());
  *exec.mutable_env() = request.env();
  exec.set_cwd(request.cwd());
  if (request.has_timeout()) *exec.mutable_timeout() = request.timeout();
  SANDGATE_RETURN_IF_ERROR(deps_.sessions->CheckExec(exec));
  std::optional<sandbox::TerminalSize> pty;
  if (request.has_pty()) {
    SANDGATE_ASSIGN_OR_RETURN(pty, ToTerminalSize(request.pty(), "pty"));
  }
  ForgetEnded();
  const ProcessLimits& limits = deps_.config->processes;
  SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, TableOf(caller, request.session_id()));

  auto proc = std::make_shared<Proc>(request.session_id(), limits.output_buffer_bytes);
  LeaseWatch watch;
  watch.cancel = &proc->cancel;
  SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<SessionManager::Lease> lease,
                            deps_.sessions->Acquire(caller, request.session_id(), watch));
  sandbox::ExecRequest sandbox_exec = ToSandboxExec(
      exec, request.command_timeout() ? lease->command_timeout() : absl::InfiniteDuration());
  // The ring bounds what is kept; the sandbox need not cut the output.
  sandbox_exec.output_cap_bytes = std::numeric_limits<uint64_t>::max();
  sandbox_exec.pty = pty;
  if (!lease->session().talks_to_commands()) {
    return errors::FailedPrecondition(
        absl::StrCat("session ", request.session_id(),
                     ": its provider cannot run processes you talk to (use Exec)"));
  }
  if (pty) {
    absl::Status terminals = lease->session().TerminalsAvailable();
    if (!terminals.ok()) {
      return errors::FailedPrecondition(
          absl::StrCat("session ", request.session_id(), ": ", terminals.message()));
    }
  }
  std::vector<std::shared_ptr<Proc>> forgotten;
  {
    absl::MutexLock lock(&table->mu);
    const size_t running = std::count_if(table->procs.begin(), table->procs.end(),
                                         [](const auto& p) { return p->running(); });
    if (running >= limits.max_running_per_session) {
      return errors::ResourceExhausted(absl::StrCat(
          "session ", request.session_id(), " already runs ", running,
          " processes (processes.max_running_per_session); kill or wait for one first"));
    }
    const size_t kept_max = limits.session_buffer_bytes / limits.output_buffer_bytes;
    while (table->procs.size() + 1 > kept_max) {
      auto ended = std::find_if(table->procs.begin(), table->procs.end(),
                                [](const auto& p) { return !p->running(); });
      if (ended == table->procs.end()) {
        return errors::ResourceExhausted(absl::StrCat(
            "session ", request.session_id(), ": the output buffers of its ", table->procs.size(),
            " running processes fill processes.session_buffer_bytes (", limits.session_buffer_bytes,
            " bytes); kill one first"));
      }
      forgotten.push_back(*ended);
      table->procs.erase(ended);
    }
    proc->id = absl::StrCat("p", table->next_id++);
    table->procs.push_back(proc);
  }
  for (const auto& p : forgotten) {
    if (p->thread.joinable()) p->thread.join();
  }
  proc->argv = sandbox_exec.argv;
  proc->pty = sandbox_exec.pty.has_value();
  sandbox_exec.channel = proc->channel;
  const bool keep_stdin = request.stdin() || proc->pty;
  {
    absl::MutexLock lock(&proc->mu);
    proc->started = deps_.clock->Now();
    proc->stdin_open = keep_stdin;
  }
  Clock* clock = deps_.clock;
  proc->thread = std::thread(
      [proc, clock, lease = std::move(lease), sandbox_exec = std::move(sandbox_exec)]() mutable {
        absl::StatusOr<sandbox::ExecResult> result = lease->session().Exec(
            sandbox_exec,
            [&proc](sandbox::OutputStream stream, absl::string_view data) {
              absl::MutexLock lock(&proc->mu);
              proc->ring.Append(stream, data);
            },
            &proc->cancel);
        // The session may idle from here.
        lease.reset();
        absl::MutexLock lock(&proc->mu);
        proc->ended = clock->Now();
        if (result.ok()) {
          proc->state = v1::Process::STATE_EXITED;
          proc->finished = agent::ToCommandFinished(*result);
          if (result->cancelled) proc->error = proc->cancel.reason();
        } else {
          proc->state = v1::Process::STATE_FAILED;
          proc->error = std::string(result.status().message());
        }
        log::Info("process.ended", {{"session", proc->session_id},
                                    {"process", proc->id},
                                    {"state", v1::Process::State_Name(proc->state)}});
      });
  // Without stdin it reads EOF at once, as from /dev/null.
  if (!keep_stdin) proc->channel->CloseStdin(kInputWait).IgnoreError();
  log::Info("process.started", {{"session", proc->session_id}, {"process", proc->id}});
  absl::MutexLock lock(&proc->mu);
  proc->Fill(response);
  return absl::OkStatus();
}

absl::Status ProcessManager::Read(const Caller& caller, const v1::ReadProcessOutputRequest& request,
                                  v1::ProcessOutput* response) {
  const absl::Duration wait = request.has_wait() ? FromProto(request.wait()) : absl::ZeroDuration();
  const absl::Duration max_wait = deps_.config->processes.max_read_wait;
  if (wait < absl::ZeroDuration() || wait > max_wait) {
    return errors::InvalidArgument(absl::StrCat("wait: must be 0..", absl::FormatDuration(max_wait),
                                                " (processes.max_read_wait_seconds)"));
  }
  if (request.max_bytes() > kMaxReadBytes) {
    return errors::InvalidArgument(absl::StrCat("max_bytes: at most ", kMaxReadBytes));
  }
  SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<Proc> proc,
                            Find(caller, request.session_id(), request.process_id()));
  const uint64_t max_bytes = request.max_bytes() == 0 ? kDefaultReadBytes : request.max_bytes();
  absl::MutexLock lock(&proc->mu);
  const uint64_t offset = request.offset();
  const bool until_exit = request.until_exit();
  auto ready = [&proc, offset, until_exit, max_bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(proc->mu) {
    if (proc->state != v1::Process::STATE_RUNNING) return true;
    const uint64_t waiting = proc->ring.end() > offset ? proc->ring.end() - offset : 0;
    return until_exit ? waiting >= max_bytes : waiting > 0;
  };
  if (wait > absl::ZeroDuration() && !ready()) {
    deps_.clock->AwaitWithDeadline(proc->mu, absl::Condition(&ready), deps_.clock->Now() + wait);
  }
  SANDGATE_RETURN_IF_ERROR(proc->ring.Read(request.offset(), max_bytes, response));
  proc->Fill(response->mutable_process());
  return absl::OkStatus();
}

absl::Status ProcessManager::Write(const Caller& caller,
                                   const v1::WriteProcessInputRequest& request,
                                   v1::WriteProcessInputResponse* response) {
  if (request.data().size() > kMaxInputBytes) {
    return errors::InvalidArgument(absl::StrCat("data: at most ", kMaxInputBytes, " bytes a call"));
  }
  std::optional<int> signal;
  if (!request.signal().empty()) {
    SANDGATE_ASSIGN_OR_RETURN(signal, sandbox::ParseSignal(request.signal()));
  }
  std::optional<sandbox::TerminalSize> size;
  if (request.has_resize()) {
    SANDGATE_ASSIGN_OR_RETURN(size, ToTerminalSize(request.resize(), "resize"));
  }
  SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<Proc> proc,
                            Find(caller, request.session_id(), request.process_id()));
  const bool wants_stdin = !request.data().empty() || request.close_stdin();
  {
    absl::MutexLock lock(&proc->mu);
    if (proc->state != v1::Process::STATE_RUNNING) {
      return errors::FailedPrecondition(absl::StrCat("process ", proc->id, " has ended"));
    }
    if (wants_stdin && !proc->stdin_open) {
      return errors::FailedPrecondition(absl::StrCat("process ", proc->id,
                                                     proc->pty || request.close_stdin()
                                                         ? "'s stdin is closed"
                                                         : " was started without stdin"));
    }
  }
  uint64_t written = 0;
  if (!request.data().empty()) {
    SANDGATE_ASSIGN_OR_RETURN(written, proc->channel->WriteStdin(request.data(), kInputWait));
  }
  if (request.close_stdin()) {
    SANDGATE_RETURN_IF_ERROR(proc->channel->CloseStdin(kInputWait));
    absl::MutexLock lock(&proc->mu);
    proc->stdin_open = false;
  }
  if (size) SANDGATE_RETURN_IF_ERROR(proc->channel->Resize(*size, kInputWait));
  if (signal) SANDGATE_RETURN_IF_ERROR(proc->channel->Signal(*signal, kInputWait));
  response->set_written_bytes(written);
  absl::MutexLock lock(&proc->mu);
  proc->Fill(response->mutable_process());
  return absl::OkStatus();
}

absl::Status ProcessManager::List(const Caller& caller, const v1::ListProcessesRequest& request,
                                  v1::ListProcessesResponse* response) {
  SANDGATE_RETURN_IF_ERROR(ValidateId(request.session_id(), "session_id"));
  SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, TableOf(caller, request.session_id()));
  absl::MutexLock lock(&table->mu);
  for (const auto& p : table->procs) {
    absl::MutexLock l(&p->mu);
    p->Fill(response->add_processes());
  }
  return absl::OkStatus();
}

}  // namespace sandgate::core
