// The one catalogue of sandgate's error constructors.
//
// Every fallible function returns absl::Status / absl::StatusOr<T>; the codes are the gRPC
// codes, and the mapping to grpc::Status happens once, in server/. Messages name the thing
// that is wrong (the field, the file, the row) so a caller can fix it without reading logs.
//
//   if (req.inputs().empty()) return errors::InvalidArgument("inputs: at least one file is
//   required");
#ifndef SANDGATE_COMMON_ERRORS_H_
#define SANDGATE_COMMON_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sandgate::errors {

// The caller sent something malformed; `what` names the field and the problem.
absl::Status InvalidArgument(absl::string_view what);
// The thing does not exist, or belongs to another tenant (never say which).
absl::Status NotFound(absl::string_view kind, absl::string_view id);
absl::Status AlreadyExists(absl::string_view kind, absl::string_view id);
absl::Status Unauthenticated(absl::string_view why);
absl::Status PermissionDenied(absl::string_view why);
absl::Status FailedPrecondition(absl::string_view why);
absl::Status ResourceExhausted(absl::string_view limit);
absl::Status Unavailable(absl::string_view why);
absl::Status Cancelled(absl::string_view why);
absl::Status DeadlineExceeded(absl::string_view why);
absl::Status Internal(absl::string_view why);
// A system call failed: "what: strerror(err)", code derived from errno.
absl::Status FromErrno(int err, absl::string_view what);

}  // namespace sandgate::errors

#endif  // SANDGATE_COMMON_ERRORS_H_
