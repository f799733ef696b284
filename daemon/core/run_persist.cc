// The persist step: a validated run's record and request go into the store before it is
// admitted, so a restarted daemon knows of it (core/recovery.h) and can queue it again.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/run_manager.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {

absl::StatusOr<std::optional<v1::Run>> RunManager::Persist(ActiveRun& ar,
                                                           const std::string& fingerprint) {
  const v1::Run run = ar.Snapshot();
  absl::Status put = deps_.store->CreateRun(run, fingerprint);
  if (!put.ok()) ReleaseQueuedBytes(ar);
  if (put.code() == absl::StatusCode::kAlreadyExists) {
    // A concurrent request with the same idempotency key won the race: the same
    // request is answered with its run, a different one refused.
    SANDGATE_ASSIGN_OR_RETURN(std::optional<v1::Run> existing,
                              FindKeyed(ar.caller, run.idempotency_key(), fingerprint));
    if (existing) return existing;
  }
  SANDGATE_RETURN_IF_ERROR(put);
  // Kept while the run waits, so a restarted daemon can queue it again.
  absl::Status kept = KeepRequest(ar);
  ar.request_kept.store(kept.ok());
  if (!kept.ok()) {
    log::Error("run.request_not_kept", {{"run", run.id()}, {"error", kept.ToString()}});
  } else {
    ShelveInputs(ar);
  }
  return std::optional<v1::Run>();
}

absl::Status RunManager::KeepRequest(ActiveRun& ar) {
  // The inputs move into the request for the write and back, so keeping it costs no copy.
  for (playbooks::InputFile& in : ar.inputs) {
    v1::InputFile* f = ar.request.add_inputs();
    f->set_name(in.name);
    *f->mutable_content() = std::move(in.content);
  }
  absl::Status kept = deps_.store->PutRunRequest(ar.request_run_id, ar.request);
  for (size_t i = 0; i < ar.inputs.size(); ++i) {
    ar.inputs[i].content =
        std::move(*ar.request.mutable_inputs(static_cast<int>(i))->mutable_content());
  }
  ar.request.clear_inputs();
  return kept;
}

void RunManager::ShelveInputs(ActiveRun& ar) {
  for (playbooks::InputFile& in : ar.inputs) std::string().swap(in.content);
  ar.inputs_shelved.store(true);
}

absl::Status RunManager::UnshelveInputs(ActiveRun& ar) {
  SANDGATE_ASSIGN_OR_RETURN(v1::RunAnalysisRequest kept,
                            deps_.store->GetRunRequest(ar.request_run_id));
  if (static_cast<size_t>(kept.inputs_size()) != ar.inputs.size()) {
    return errors::Internal(absl::StrCat("the kept request has ", kept.inputs_size(),
                                         " inputs, not ", ar.inputs.size()));
  }
  for (size_t i = 0; i < ar.inputs.size(); ++i) {
    v1::InputFile* f = kept.mutable_inputs(static_cast<int>(i));
    if (f->name() != ar.inputs[i].name) {
      return errors::Internal(absl::StrCat("the kept request's input ", i, " is '", f->name(),
                                           "', not '", ar.inputs[i].name, "'"));
    }
    ar.inputs[i].content = std::move(*f->mutable_content());
  }
  ar.inputs_shelved.store(false);
  return absl::OkStatus();
}

void RunManager::PutRun(ActiveRun& ar) {
  const v1::Run copy = ar.Snapshot();
  absl::Status st = deps_.store->PutRun(copy);
  if (!st.ok()) log::Error("run.persist_failed", {{"run", copy.id()}, {"error", st.ToString()}});
  // Fenced (store/store.h): another replica settled this run; its work here stops, not retries.
  if (store::IsFencedWrite(st)) ar.cancel.Cancel(std::string(st.message()));
}

}  // namespace sandgate::core
