// Early-return helpers for absl::Status / absl::StatusOr.
//
//   SANDGATE_RETURN_IF_ERROR(store->Append(event));
//   SANDGATE_ASSIGN_OR_RETURN(auto run, store->GetRun(id));
#ifndef SANDGATE_COMMON_STATUS_MACROS_H_
#define SANDGATE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SANDGATE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::absl::Status sandgate_status_ = (expr);            \
    if (!sandgate_status_.ok()) return sandgate_status_; \
  } while (0)

#define SANDGATE_CONCAT_INNER_(a, b) a##b
#define SANDGATE_CONCAT_(a, b) SANDGATE_CONCAT_INNER_(a, b)
#define SANDGATE_ASSIGN_OR_RETURN(lhs, expr) \
  SANDGATE_ASSIGN_OR_RETURN_IMPL_(SANDGATE_CONCAT_(sandgate_statusor_, __LINE__), lhs, expr)
#define SANDGATE_ASSIGN_OR_RETURN_IMPL_(var, lhs, expr) \
  auto var = (expr);                                    \
  if (!var.ok()) return var.status();                   \
  lhs = std::move(var).value()

#endif  // SANDGATE_COMMON_STATUS_MACROS_H_
