#include "core/images.h"

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::core {
namespace {

constexpr size_t kMaxPackageBytes = 100;
constexpr uint64_t kLinesPerRead = 256;

// The name quoted for an error: printable, never longer than a line.
std::string Quoted(absl::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) {
    out += (c >= 0x20 && c < 0x7f) ? std::string(1, c) : absl::StrCat("\\x", absl::Hex(c & 0xff));
  }
  return absl::StrCat("'", out, s.size() > 80 ? "…" : "", "'");
}

bool LowerOrDigit(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// Removes `path` and everything below it, never following a link, never leaving its file
// system; OK when absent.
absl::Status RemoveTree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 && errno == ENOENT) return absl::OkStatus();
  int r = nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int type, struct FTW*) {
        return type == FTW_DP ? rmdir(p) : unlink(p);
      },
      32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  if (r != 0) return errors::FromErrno(errno, absl::StrCat("remove ", path));
  return absl::OkStatus();
}

// Bytes the tree under `path` takes on disk.
uint64_t TreeBytes(const std::string& path) {
  static thread_local uint64_t total;
  total = 0;
  nftw(
      path.c_str(),
      [](const char*, const struct stat* st, int, struct FTW*) {
        total += static_cast<uint64_t>(st->st_blocks) * 512;
        return 0;
      },
      32, FTW_PHYS | FTW_MOUNT);
  return total;
}

absl::Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return errors::FromErrno(errno, absl::StrCat("mkdir ", path));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ImagesDir(const std::string& state_dir) { return state_dir + "/images"; }

std::string ImageRootDir(const std::string& images_dir, const std::string& digest) {
  return absl::StrCat(images_dir, "/", digest, "/root");
}

absl::Status ValidateImageName(absl::string_view name) {
  if (name.empty()) return errors::InvalidArgument("image name: must not be empty");
  if (!IsValidUtf8(name)) return errors::InvalidArgument("image name: not valid UTF-8");
  if (name.size() > kMaxImageNameBytes) {
    return errors::InvalidArgument(
        absl::StrCat("image name: ", name.size(), " bytes, longer than ", kMaxImageNameBytes));
  }
  if (name == kHostImage) {
    return errors::InvalidArgument(
        "image name: 'host' is the host's own root file system, not a name to build");
  }
  if (!LowerOrDigit(name[0])) {
    return errors::InvalidArgument(absl::StrCat(
        "image name ", Quoted(name), ": must start with a lower-case letter or a digit"));
  }
  for (char c : name) {
    if (!LowerOrDigit(c) && c != '.' && c != '_' && c != '-') {
      return errors::InvalidArgument(
          absl::StrCat("image name ", Quoted(name), ": ", Quoted(absl::string_view(&c, 1)),
                       " is not allowed (lower-case letters, digits, '.', '_', '-')"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> NormalizePackages(
    const std::vector<std::string>& packages) {
  if (packages.empty()) return errors::InvalidArgument("packages: name at least one");
  if (packages.size() > kMaxImagePackages) {
    return errors::InvalidArgument(
        absl::StrCat("packages: ", packages.size(), " named, at most ", kMaxImagePackages));
  }
  std::vector<std::string> out;
  for (const std::string& p : packages) {
    auto bad = [&](absl::string_view why) {
      return errors::InvalidArgument(absl::StrCat(
          "packages: ", IsValidUtf8(p) ? Quoted(p) : "a name that is not valid UTF-8", " ", why));
    };
    if (p.empty()) return bad("is empty");
    if (p.size() > kMaxPackageBytes) {
      return bad(absl::StrCat("is ", p.size(), " bytes, longer than ", kMaxPackageBytes));
    }
    if (p.size() < 2 || !LowerOrDigit(p[0]) || !std::all_of(p.begin(), p.end(), [](char c) {
          return LowerOrDigit(c) || c == '+' || c == '-' || c == '.';
        })) {
      return bad("is not a Debian package name ([a-z0-9][a-z0-9+.-]+)");
    }
    out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string RecipeDigest(const ImageRecipe& recipe) {
  return absl::StrCat("sha256-",
                      Sha256::Hex(absl::StrCat(
                          "sandgate-image-v1\nsuite=", recipe.suite, "\nvariant=", recipe.variant,
                          "\npackages=", absl::StrJoin(recipe.packages, ","), "\n")));
}

ImageStore::ImageStore(ImageStoreOptions options)
    : options_(std::move(options)),
      builds_(std::make_unique<Executor>("image-build", std::max<size_t>(1, options_.max_builds),
                                         options_.max_waiting_builds)) {}

ImageStore::~ImageStore() {
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, build] : builds_by_name_) {
      if (!build->done) build->cancel.Cancel("the daemon is stopping");
    }
  }
  builds_->Shutdown();
}

absl::StatusOr<std::unique_ptr<ImageStore>> ImageStore::Create(ImageStoreOptions options) {
  if (options.builder == nullptr) return errors::Internal("ImageStore: no builder");
  std::unique_ptr<ImageStore> store(new ImageStore(std::move(options)));
  const std::string& dir = store->options_.dir;
  // Root's alone, like the state directory around it: a session's sandbox reaches its image
  // through a bind the daemon makes from a descriptor (tmpfs_limits.h, BindImage), never
  // through this path.
  SANDGATE_RETURN_IF_ERROR(MakeDir(dir, 0700));
  chmod(dir.c_str(), 0700);
  for (const std::string& d : {dir + "/names", dir + "/tmp"}) {
    SANDGATE_RETURN_IF_ERROR(MakeDir(d, 0700));
  }
  // What a stopped daemon was building or removing.
  if (DIR* d = opendir((dir + "/tmp").c_str())) {
    std::vector<std::string> leftovers;
    while (struct dirent* e = readdir(d)) {
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") {
        leftovers.push_back(dir + "/tmp/" + e->d_name);
      }
    }
    closedir(d);
    for (const std::string& path : leftovers) {
      chmod(path.c_str(), 0700);
      if (absl::Status st = RemoveTree(path); !st.ok()) {
        log::Warning("image.tmp_left", {{"path", path}, {"error", st.ToString()}});
      }
    }
  }
  DIR* d = opendir((dir + "/names").c_str());
  if (d == nullptr) return errors::FromErrno(errno, absl::StrCat("open ", dir, "/names"));
  absl::MutexLock lock(&store->mu_);
  while (struct dirent* e = readdir(d)) {
    const std::string file = e->d_name;
    if (!absl::EndsWith(file, ".json")) continue;
    std::ifstream in(absl::StrCat(dir, "/names/", file));
    std::stringstream text;
    text << in.rdbuf();
    v1::Image image;
    if (!google::protobuf::util::JsonStringToMessage(text.str(), &image).ok() ||
        file != image.name() + ".json" || !ValidateImageName(image.name()).ok()) {
      log::Warning("image.bad_record", {{"file", file}});
      continue;
    }
    struct stat st;
    if (stat(store->RootDir(image.digest()).c_str(), &st) != 0) {
      log::Warning("image.root_missing", {{"image", image.name()}, {"digest", image.digest()}});
      continue;
    }
    store->ready_[image.name()] = std::move(image);
  }
  closedir(d);
  return store;
}

void ImageStore::SetInUse(
    std::function<std::vector<std::string>(const std::string& root_dir)> in_use) {
  absl::MutexLock lock(&mu_);
  in_use_ = std::move(in_use);
}

void ImageStore::SetWarmPool(std::function<size_t(const std::string& root_dir)> hold,
                             std::function<void(const std::string& root_dir)> resume) {
  absl::MutexLock lock(&mu_);
  hold_warm_ = std::move(hold);
  resume_warm_ = std::move(resume);
}

std::string ImageStore::RootDir(const std::string& digest) const {
  return ImageRootDir(options_.dir, digest);
}

std::string ImageStore::NamePath(const std::string& name) const {
  return absl::StrCat(options_.dir, "/names/", name, ".json");
}

absl::Status ImageStore::WriteRecord(const v1::Image& image) const {
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(image, &json).ok()) {
    return errors::Internal("image record does not convert to JSON");
  }
  const std::string path = NamePath(image.name());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json << "\n";
    out.flush();
    if (!out.good()) return errors::Internal(absl::StrCat("cannot write ", tmp));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return errors::FromErrno(errno, absl::StrCat("rename ", tmp));
  }
  return absl::OkStatus();
}

absl::Status ImageStore::StartBuild(const std::string& name,
                                    const std::vector<std::string>& packages,
                                    const std::string& tenant) {
  SANDGATE_RETURN_IF_ERROR(ValidateImageName(name));
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> sorted, NormalizePackages(packages));
  auto build = std::make_shared<Build>();
  build->recipe.suite = options_.suite;
  build->recipe.variant = options_.variant;
  build->recipe.packages = std::move(sorted);
  v1::Image& image = build->image;
  image.set_name(name);
  image.set_state(v1::Image::STATE_BUILDING);
  image.set_digest(RecipeDigest(build->recipe));
  for (const std::string& p : build->recipe.packages) image.add_packages(p);
  image.set_suite(build->recipe.suite);
  image.set_variant(build->recipe.variant);
  image.set_built_by(tenant);
  build->started = options_.clock->Now();
  *image.mutable_created() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(build->started));

  absl::MutexLock lock(&mu_);
  if (auto it = builds_by_name_.find(name); it != builds_by_name_.end() && !it->second->done) {
    return errors::AlreadyExists(
        "image",
        absl::StrCat(name, " is being built (started by tenant '", it->second->image.built_by(),
                     "' ", absl::FormatDuration(options_.clock->Now() - it->second->started),
                     " ago); wait for it, or delete the name to cancel that build"));
  }
  if (auto it = ready_.find(name); it != ready_.end()) {
    return errors::AlreadyExists(
        "image", absl::StrCat(name, " exists (", it->second.digest(), "); delete it first"));
  }
  // Another name has this recipe built already: the same directory serves both.
  for (const auto& [other, ready] : ready_) {
    if (ready.digest() != image.digest()) continue;
    image.set_state(v1::Image::STATE_READY);
    image.set_size_bytes(ready.size_bytes());
    SANDGATE_RETURN_IF_ERROR(WriteRecord(image));
    build->done = true;
    AddLine(*build, absl::StrCat("same packages as image '", other, "': sharing ", ready.digest()));
    ready_[name] = image;
    builds_by_name_[name] = build;
    return absl::OkStatus();
  }
  if (waiting_ >= options_.max_waiting_builds) {
    return errors::ResourceExhausted(
        absl::StrCat(waiting_, " image builds are queued or running already (at most ",
                     options_.max_waiting_builds, "); try again when one ends"));
  }
  if (!builds_->Submit([this, build] { RunBuild(build); })) {
    return errors::Unavailable("image builds are not accepted now (the daemon is stopping)");
  }
  ++waiting_;
  builds_by_name_[name] = build;
  AddLine(*build, absl::StrCat("queued: ", absl::StrJoin(build->recipe.packages, ", "), " (",
                               build->recipe.suite, ", ", build->recipe.variant, ")"));
  log::Info("image.build_queued",
            {{"image", name}, {"tenant", tenant}, {"digest", image.digest()}});
  return absl::OkStatus();
}

void ImageStore::AddLine(Build& build, absl::string_view line) {
  build.lines.emplace_back(line);
  if (build.lines.size() > options_.progress_lines) {
    build.lines.erase(build.lines.begin());
    ++build.first_line;
  }
  build.image.set_progress(std::string(line));
  WakeAll(build);
}

void ImageStore::WakeAll(const Build& build) {
  for (const auto& [id, wake] : build.watchers) wake();
}

void ImageStore::RunBuild(std::shared_ptr<Build> build) {
  const std::string name = build->image.name();
  const std::string digest = build->image.digest();
  std::string tmp;
  {
    absl::MutexLock lock(&mu_);
    tmp = absl::StrCat(options_.dir, "/tmp/", digest, "-", next_tmp_++);
  }
  auto progress = [this, build](absl::string_view line) {
    absl::MutexLock lock(&mu_);
    AddLine(*build, line);
  };
  absl::Status st;
  const std::string final_dir = absl::StrCat(options_.dir, "/", digest);
  struct stat existing;
  if (build->cancel.cancelled()) {
    st = errors::Cancelled(build->cancel.reason());
  } else if (stat(final_dir.c_str(), &existing) == 0) {
    progress(absl::StrCat(digest, " is built already"));  // a name built meanwhile
  } else {
    st = MakeDir(tmp, 0700);
    if (st.ok())
      st = options_.builder->Build(build->recipe, tmp + "/root", progress, build->cancel);
    if (st.ok() && build->cancel.cancelled()) st = errors::Cancelled(build->cancel.reason());
    if (st.ok() && rename(tmp.c_str(), final_dir.c_str()) != 0) {
      st = errors::FromErrno(errno, absl::StrCat("rename to ", final_dir));
    }
    if (st.ok()) chmod(final_dir.c_str(), 0555);
    if (!st.ok()) RemoveTree(tmp).IgnoreError();
  }
  uint64_t size = 0;
  if (st.ok()) size = TreeBytes(RootDir(digest));
  absl::MutexLock lock(&mu_);
  --waiting_;
  const absl::Duration took = options_.clock->Now() - build->started;
  build->image.mutable_build_duration()->set_seconds(absl::ToInt64Seconds(took));
  build->image.mutable_build_duration()->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(took - absl::Seconds(absl::ToInt64Seconds(took)))));
  if (st.ok()) {
    build->image.set_state(v1::Image::STATE_READY);
    build->image.set_size_bytes(size);
    build->image.clear_progress();
    st = WriteRecord(build->image);
  }
  if (st.ok()) {
    ready_[name] = build->image;
    log::Info("image.built", {{"image", name},
                              {"digest", digest},
                              {"bytes", absl::StrCat(size)},
                              {"seconds", absl::StrCat(absl::ToDoubleSeconds(took))}});
  } else {
    log::Warning("image.build_failed", {{"image", name}, {"error", st.ToString()}});
  }
  build->status = st;
  build->done = true;
  AddLine(*build,
          st.ok() ? absl::StrCat("built ", digest, ": ", size >> 20, " MiB in ",
                                 absl::FormatDuration(absl::Trunc(took, absl::Milliseconds(100))))
                  : absl::StrCat("failed: ", st.message()));
  if (st.ok()) build->image.clear_progress();
}

absl::StatusOr<ImageStore::Progress> ImageStore::ReadProgress(const std::string& name,
                                                              uint64_t from) const {
  absl::MutexLock lock(&mu_);
  auto it = builds_by_name_.find(name);
  if (it == builds_by_name_.end()) return errors::NotFound("image build", name);
  const Build& b = *it->second;
  Progress p;
  const uint64_t end = b.first_line + b.lines.size();
  uint64_t i = std::max(from, b.first_line);
  for (; i < end && p.lines.size() < kLinesPerRead; ++i)
    p.lines.push_back(b.lines[i - b.first_line]);
  p.next = i;
  p.done = b.done && i == end;
  if (p.done) {
    p.status = b.status;
    p.image = b.image;
  }
  return p;
}

absl::StatusOr<uint64_t> ImageStore::Watch(const std::string& name, std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  auto it = builds_by_name_.find(name);
  if (it == builds_by_name_.end()) return errors::NotFound("image build", name);
  const uint64_t id = next_watch_++;
  it->second->watchers[id] = std::move(wake);
  return id;
}

void ImageStore::Unwatch(const std::string& name, uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = builds_by_name_.find(name);
  if (it != builds_by_name_.end()) it->second->watchers.erase(id);
}

void ImageStore::CancelBuild(const std::string& name, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = builds_by_name_.find(name);
  if (it != builds_by_name_.end() && !it->second->done) it->second->cancel.Cancel(reason);
}

absl::StatusOr<v1::Image> ImageStore::Get(const std::string& name) const {
  SANDGATE_RETURN_IF_ERROR(ValidateImageName(name));
  absl::MutexLock lock(&mu_);
  if (auto it = ready_.find(name); it != ready_.end()) return it->second;
  if (auto it = builds_by_name_.find(name); it != builds_by_name_.end() && !it->second->done) {
    return it->second->image;
  }
  return errors::NotFound("image", name);
}

std::vector<v1::Image> ImageStore::List() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, v1::Image> all = ready_;
  for (const auto& [name, build] : builds_by_name_) {
    if (!build->done) all[name] = build->image;
  }
  std::vector<v1::Image> out;
  for (auto& [name, image] : all) out.push_back(std::move(image));
  return out;
}

bool ImageStore::DigestUsedLocked(const std::string& digest) const {
  for (const auto& [name, image] : ready_) {
    if (image.digest() == digest) return true;
  }
  for (const auto& [name, build] : builds_by_name_) {
    if (!build->done && build->image.digest() == digest) return true;
  }
  return false;
}

absl::StatusOr<v1::Image> ImageStore::Remove(const std::string& name) {
  SANDGATE_RETURN_IF_ERROR(ValidateImageName(name));
  std::string doomed;
  v1::Image removed;
  std::string root;
  std::function<size_t(const std::string&)> hold;
  std::function<void(const std::string&)> resume;
  {
    absl::MutexLock lock(&mu_);
    auto it = ready_.find(name);
    if (it == ready_.end()) {
      auto b = builds_by_name_.find(name);
      if (b == builds_by_name_.end() || b->second->done) return errors::NotFound("image", name);
      b->second->cancel.Cancel("the image was deleted while it was being built");
      return b->second->image;
    }
    root = RootDir(it->second.digest());
    hold = hold_warm_;
    resume = resume_warm_;
  }
  // Outside the lock: closing sandboxes blocks, and the pool resolves names through this
  // store. Held until the image is gone or refused, so that none is made on it meanwhile.
  const size_t warm_closed = hold ? hold(root) : 0;
  absl::Cleanup resume_warm = [&resume, &root] {
    if (resume) resume(root);
  };
  {
    absl::MutexLock lock(&mu_);
    auto it = ready_.find(name);
    // Removed (or rebuilt from other packages) by another call while the pool closed its own.
    if (it == ready_.end() || RootDir(it->second.digest()) != root) {
      return errors::NotFound("image", name);
    }
    removed = it->second;
    std::vector<std::string> users = in_use_ ? in_use_(root) : std::vector<std::string>{};
    if (!users.empty()) {
      std::sort(users.begin(), users.end());
      return errors::FailedPrecondition(absl::StrCat(
          "image '", name, "' is in use by ", users.size(), " live session",
          users.size() == 1 ? "" : "s", " (", absl::StrJoin(users, ", "), "); close them first"));
    }
    if (unlink(NamePath(name).c_str()) != 0 && errno != ENOENT) {
      return errors::FromErrno(errno, absl::StrCat("remove the record of image ", name));
    }
    ready_.erase(it);
    builds_by_name_.erase(name);
    if (!DigestUsedLocked(removed.digest())) {
      // Renamed away first, under the lock: a session that resolved the name before this
      // finds no root and fails to start, saying so, instead of getting a half-deleted one.
      doomed = absl::StrCat(options_.dir, "/tmp/removing-", removed.digest(), "-", next_tmp_++);
      const std::string dir = absl::StrCat(options_.dir, "/", removed.digest());
      if (rename(dir.c_str(), doomed.c_str()) != 0) {
        log::Warning("image.remove_failed", {{"image", name}, {"error", strerror(errno)}});
        doomed.clear();
      }
    }
  }
  if (!doomed.empty()) {
    chmod(doomed.c_str(), 0700);
    if (absl::Status st = RemoveTree(doomed); !st.ok()) {
      log::Warning("image.remove_failed", {{"image", name}, {"error", st.ToString()}});
    }
  }
  log::Info("image.removed",
            {{"image", name}, {"digest", removed.digest()}, {"warm_closed", warm_closed}});
  return removed;
}

}  // namespace sandgate::core
