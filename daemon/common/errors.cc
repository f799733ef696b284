#include "common/errors.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sandgate::errors {

absl::Status InvalidArgument(absl::string_view what) { return absl::InvalidArgumentError(what); }
absl::Status NotFound(absl::string_view kind, absl::string_view id) {
  return absl::NotFoundError(absl::StrCat(kind, " not found: ", id));
}
absl::Status AlreadyExists(absl::string_view kind, absl::string_view id) {
  return absl::AlreadyExistsError(absl::StrCat(kind, " already exists: ", id));
}
absl::Status Unauthenticated(absl::string_view why) { return absl::UnauthenticatedError(why); }
absl::Status PermissionDenied(absl::string_view why) { return absl::PermissionDeniedError(why); }
absl::Status FailedPrecondition(absl::string_view why) {
  return absl::FailedPreconditionError(why);
}
absl::Status ResourceExhausted(absl::string_view limit) {
  return absl::ResourceExhaustedError(limit);
}
absl::Status Unavailable(absl::string_view why) { return absl::UnavailableError(why); }
absl::Status Cancelled(absl::string_view why) { return absl::CancelledError(why); }
absl::Status DeadlineExceeded(absl::string_view why) { return absl::DeadlineExceededError(why); }
absl::Status Internal(absl::string_view why) { return absl::InternalError(why); }

absl::Status FromErrno(int err, absl::string_view what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return absl::ResourceExhaustedError(msg);
    case EINVAL:
    case ELOOP:
    case EXDEV:
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
      return absl::InvalidArgumentError(msg);
    case EAGAIN:
    case EINTR:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace sandgate::errors
