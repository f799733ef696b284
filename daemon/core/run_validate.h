// The run's first step (DESIGN.md "A run, end to end", 1): a RunAnalysisRequest, already
// checked field by field (core/request_validation.h), checked against this daemon and the
// caller's policy, and built into the run it asks for.
//
//   SANDGATE_RETURN_IF_ERROR(ValidateRunRequest(request, config));
//   SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<ActiveRun> run,
//                             ValidateRun(deps, caller, std::move(request)));
//
// Thread safe (reads `deps` only).
#ifndef SANDGATE_CORE_RUN_VALIDATE_H_
#define SANDGATE_CORE_RUN_VALIDATE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/run_state.h"

namespace sandgate::core {

// Fills the defaults in (playbook, agent, provider: a kept session's), resolves the playbook,
// provider and agent, checks the inputs (plain, distinct names; max_input_bytes in all; the
// playbook's own rules) and the tenant's policy. Returns a new QUEUED run, not stored, that
// holds the only copy of the inputs' contents. INVALID_ARGUMENT names the field;
// FAILED_PRECONDITION when the kept session has ended.
absl::StatusOr<std::shared_ptr<ActiveRun>> ValidateRun(const RunManagerDeps& deps,
                                                       const Caller& caller,
                                                       v1::RunAnalysisRequest request);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_RUN_VALIDATE_H_
