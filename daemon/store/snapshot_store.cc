#include "store/snapshot_store.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::store {

absl::StatusOr<v1::Snapshot> ParseSnapshotRecord(const std::string& id, const std::string& bytes) {
  v1::Snapshot s;
  if (!s.ParseFromString(bytes)) {
    return errors::Internal(absl::StrCat("snapshot ", id, ": its stored record is corrupt"));
  }
  return s;
}

int64_t SnapshotCreatedNs(const v1::Snapshot& snapshot) {
  return google::protobuf::util::TimeUtil::TimestampToNanoseconds(snapshot.created_at());
}

}  // namespace sandgate::store
