// ImageStore: sandbox images, root file systems built from Debian packages, kept under the
// state directory (docs/images.md).
//
// Layout under `dir` (<state_dir>/images, 0700, root):
//   sha256-<hex>/root/   a root file system, addressed by the SHA-256 of its recipe (suite,
//                        variant, sorted packages): two names with the same recipe share it.
//                        sha256-<hex> is made 0555 once built; sandboxes bind root/ read-only.
//   names/<name>.json    a name's record (v1::Image as JSON): digest, packages, size, when,
//                        by whom.
//   tmp/                 builds in progress and removals; emptied at Create.
//
// Building is long (tens of seconds) and runs on the store's own `max_builds` threads, never
// on the caller's: StartBuild returns at once, and the caller follows the progress lines
// with ReadProgress (woken by the `wake` it gave). A second build of a name while one runs is
// ALREADY_EXISTS naming who started it. Remove cancels a running build, and refuses to remove
// an image that a live session uses (FAILED_PRECONDITION naming the sessions), asked through
// `in_use` once the warm pool closed its ready sandboxes of it.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto store, ImageStore::Create({dir, &builder, clock}));
//   SANDGATE_RETURN_IF_ERROR(store->StartBuild("py", {"python3"}, "tenant-a"));
//   ImageStore::Progress p = store->ReadProgress("py", 0);  // lines, done, status, image
//   absl::StatusOr<v1::Image> image = store->Get("py");     // READY: RootDir(image->digest())
//
// Thread safe.
#ifndef SANDGATE_CORE_IMAGES_H_
#define SANDGATE_CORE_IMAGES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "common/clock.h"
#include "core/executor.h"
#include "sandgate/v1/images.pb.h"

namespace sandgate::core {

// The name of the host's own root (no image): never a stored image.
inline constexpr const char* kHostImage = "host";
inline constexpr size_t kMaxImageNameBytes = 63;
inline constexpr size_t kMaxImagePackages = 200;

// Where a daemon keeps its images, and the root file system of a digest there.
std::string ImagesDir(const std::string& state_dir);
std::string ImageRootDir(const std::string& images_dir, const std::string& digest);

// INVALID_ARGUMENT naming the problem unless `name` is [a-z0-9][a-z0-9._-]*, at most 63
// bytes, and not "host" (so never a path: no '/', no "..", no NUL, valid UTF-8).
absl::Status ValidateImageName(absl::string_view name);
// The package list of a recipe: each a Debian package name ([a-z0-9][a-z0-9+.-]+, at most
// 100 bytes), at least one, at most kMaxImagePackages; sorted, duplicates dropped.
absl::StatusOr<std::vector<std::string>> NormalizePackages(
    const std::vector<std::string>& packages);

// What an image is built from.
struct ImageRecipe {
  std::string suite = "bookworm";
  std::string variant = "essential";
  std::vector<std::string> packages;  // NormalizePackages
};
// "sha256-<hex>" of the recipe's canonical text.
std::string RecipeDigest(const ImageRecipe& recipe);

// Builds a root file system. Implementations: MmdebstrapBuilder (core/mmdebstrap_builder.h),
// a fake in tests/fakes/.
class ImageBuilder {
 public:
  virtual ~ImageBuilder() = default;
  // Builds `recipe` into `dir` (absent; its parent exists). Calls `progress` with each line
  // of output, from the calling thread. Returns CANCELLED soon after `cancel` is cancelled,
  // INVALID_ARGUMENT naming a package the archive does not have, else what failed. Leaves
  // `dir` to the caller to remove on failure.
  virtual absl::Status Build(const ImageRecipe& recipe, const std::string& dir,
                             const std::function<void(absl::string_view line)>& progress,
                             const CancelToken& cancel) = 0;
};

struct ImageStoreOptions {
  std::string dir;                  // <state_dir>/images
  ImageBuilder* builder = nullptr;  // not owned; outlives the store
  Clock* clock = Clock::Real();
  size_t max_builds = 1;          // builds at once; more wait in line
  size_t max_waiting_builds = 8;  // beyond: RESOURCE_EXHAUSTED
  size_t progress_lines = 2000;   // kept per build; older ones are dropped
  std::string suite = "bookworm";
  std::string variant = "essential";
};

class ImageStore {
 public:
  // Makes the layout, empties tmp/ and loads the names. Does not start a build.
  static absl::StatusOr<std::unique_ptr<ImageStore>> Create(ImageStoreOptions options);
  ~ImageStore();  // cancels running builds and waits for them

  // The live sessions whose sandbox's root is `root_dir` (asked by Remove). Set once, before
  // serving; empty: nothing is ever in use.
  void SetInUse(std::function<std::vector<std::string>(const std::string& root_dir)> in_use);
  // The warm pool's ready sandboxes of an image are no use of it: Remove has `hold` close
  // those on the image's root (and make none there) before it asks `in_use`, then calls
  // `resume` whatever it decided (WarmPool::HoldRoot, ResumeRoot). Set once, before serving;
  // unset: a ready sandbox counts as a live session.
  void SetWarmPool(std::function<size_t(const std::string& root_dir)> hold,
                   std::function<void(const std::string& root_dir)> resume);

  // The root file system of a built image's digest.
  std::string RootDir(const std::string& digest) const;

  // Queues a build of `name`. INVALID_ARGUMENT for a bad name or package list,
  // ALREADY_EXISTS for a name that exists or is being built, RESOURCE_EXHAUSTED when
  // max_waiting_builds wait already. A recipe that is built already under another name is
  // recorded at once (READY when this returns).
  absl::Status StartBuild(const std::string& name, const std::vector<std::string>& packages,
                          const std::string& tenant);

  struct Progress {
    std::vector<std::string> lines;  // from `from` on (the dropped ones skipped)
    uint64_t next = 0;               // the index after the last line returned
    bool done = false;               // the build ended: `status`, and `image` if OK
    absl::Status status;
    v1::Image image;
  };
  // The lines of `name`'s build from index `from` (up to 256), and whether it ended.
  // NOT_FOUND when no build of the name runs or ended since the last StartBuild.
  absl::StatusOr<Progress> ReadProgress(const std::string& name, uint64_t from) const;
  // Calls `wake` (from the build thread: must not block) after each new line and at the end.
  // Returns an id for Unwatch; NOT_FOUND as ReadProgress.
  absl::StatusOr<uint64_t> Watch(const std::string& name, std::function<void()> wake);
  void Unwatch(const std::string& name, uint64_t id);
  // Cancels a running build of `name`; no-op when none runs.
  void CancelBuild(const std::string& name, const std::string& reason);

  // A built or building image. NOT_FOUND when there is neither.
  absl::StatusOr<v1::Image> Get(const std::string& name) const;
  // Built images and running builds, by name.
  std::vector<v1::Image> List() const;
  // Removes a built image (its directory too, when no other name shares it), or cancels the
  // running build of `name`. The warm pool's ready sandboxes of it are closed first
  // (SetWarmPool); FAILED_PRECONDITION naming the sessions when one uses it still.
  absl::StatusOr<v1::Image> Remove(const std::string& name);

 private:
  struct Build {
    ImageRecipe recipe;
    v1::Image image;  // BUILDING, then the result
    CancelToken cancel;
    absl::Time started;
    std::vector<std::string> lines;  // lines[i] is line first_line + i
    uint64_t first_line = 0;
    bool done = false;
    absl::Status status;
    std::map<uint64_t, std::function<void()>> watchers;
  };

  explicit ImageStore(ImageStoreOptions options);
  void RunBuild(std::shared_ptr<Build> build);
  void AddLine(Build& build, absl::string_view line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WakeAll(const Build& build) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NamePath(const std::string& name) const;
  absl::Status WriteRecord(const v1::Image& image) const;
  bool DigestUsedLocked(const std::string& digest) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const ImageStoreOptions options_;
  std::unique_ptr<Executor> builds_;

  mutable absl::Mutex mu_;
  std::function<std::vector<std::string>(const std::string&)> in_use_ ABSL_GUARDED_BY(mu_);
  std::function<size_t(const std::string&)> hold_warm_ ABSL_GUARDED_BY(mu_);
  std::function<void(const std::string&)> resume_warm_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::Image> ready_ ABSL_GUARDED_BY(mu_);  // by name
  // Running builds and the last finished one of each name, until its next StartBuild.
  std::map<std::string, std::shared_ptr<Build>> builds_by_name_ ABSL_GUARDED_BY(mu_);
  uint64_t next_watch_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_tmp_ ABSL_GUARDED_BY(mu_) = 1;
  size_t waiting_ ABSL_GUARDED_BY(mu_) = 0;  // queued or running
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_IMAGES_H_
