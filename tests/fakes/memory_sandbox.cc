#include "tests/fakes/memory_sandbox.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/errors.h"

namespace sandgate::testing {
namespace {

class MemorySession : public sandbox::Session {
 public:
  explicit MemorySession(std::string id) : id_(std::move(id)) {}
  const std::string& id() const override { return id_; }
  std::string workdir() const override { return "/work"; }
  absl::StatusOr<sandbox::ExecResult> Exec(const sandbox::ExecRequest&,
                                           const sandbox::OutputCallback&,
                                           const CancelToken*) override {
    return errors::FailedPrecondition("a memory session runs no command");
  }
  absl::Status WriteFile(absl::string_view path, absl::string_view data, int) override {
    absl::MutexLock lock(&mu_);
    files_[std::string(path)] = std::string(data);
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ReadFile(absl::string_view path, uint64_t max_bytes) override {
    absl::MutexLock lock(&mu_);
    auto it = files_.find(std::string(path));
    if (it == files_.end()) return errors::NotFound("file", path);
    if (it->second.size() > max_bytes) {
      return errors::ResourceExhausted(absl::StrCat(path, ": larger than ", max_bytes, " bytes"));
    }
    return it->second;
  }
  absl::StatusOr<sandbox::FileListing> ListFiles(absl::string_view dir) override {
    absl::MutexLock lock(&mu_);
    sandbox::FileListing listing;
    const std::string prefix = dir.empty() ? "" : absl::StrCat(dir, "/");
    for (const auto& [path, data] : files_) {
      if (!absl::StartsWith(path, prefix)) continue;
      listing.entries.push_back({path, sandbox::FileType::kRegular, data.size(), ""});
    }
    return listing;
  }
  std::vector<std::string> Warnings() const override { return {}; }
  absl::Status Close() override { return absl::OkStatus(); }

 private:
  const std::string id_;
  absl::Mutex mu_;
  std::map<std::string, std::string> files_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<sandbox::Session>> MemoryProvider::Create(
    const sandbox::SessionSpec& spec, const CancelToken*) {
  return std::unique_ptr<sandbox::Session>(new MemorySession(spec.id));
}

}  // namespace sandgate::testing
