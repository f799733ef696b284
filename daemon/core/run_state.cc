#include "core/run_state.h"

#include <utility>

#include "common/events.h"
#include "common/log.h"

namespace sandgate::core {

RunEvents::RunEvents(EventLog* log, ActiveRun* run) : log_(log), run_(run) {
  absl::MutexLock lock(&run->mu);
  run_id_ = run->run.id();
  tenant_ = run->run.tenant();
}

void RunEvents::Emit(v1::Event event) {
  event.set_run_id(run_id_);
  event.set_session_id(session_id_);
  Check(log_->Append(std::move(event)).status());
}

absl::Status RunEvents::Finish(v1::Event terminal, v1::Run record) {
  terminal.set_run_id(run_id_);
  terminal.set_session_id(session_id_);
  absl::Status stored = log_->Finish(std::move(terminal), std::move(record)).status();
  Check(stored);
  return stored;
}

void RunEvents::Check(const absl::Status& appended) {
  if (appended.ok()) return;
  log::Error("event.append_failed",
             {{"run", run_id_}, {"tenant", tenant_}, {"error", appended.ToString()}});
  // Fenced (store/store.h): another replica settled this run; its work here stops.
  if (store::IsFencedWrite(appended)) run_->cancel.Cancel(std::string(appended.message()));
}

void RunEvents::Notice(v1::Notice::Severity severity, std::string message) {
  Emit(events::Notice(severity, std::move(message)));
}

}  // namespace sandgate::core
