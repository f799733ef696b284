// MmdebstrapBuilder: builds an image's root file system with Debian's `mmdebstrap`, from the
// apt sources the host has configured (docs/images.md).
//
//   mmdebstrap --mode=root --variant=<variant> --include=<p1,p2,…> <suite> <dir>
//
// run in a process group of its own with an environment of PATH and LANG only (nothing of
// the daemon's reaches it), its output (both streams) passed on line by line. Cancelling
// sends SIGTERM to the group (mmdebstrap then unmounts what it mounted in the root), and
// SIGKILL 10 s later. A package the archive does not have ("Unable to locate package X",
// "Package 'X' has no installation candidate") is INVALID_ARGUMENT naming it.
//
// Thread safe (no state but the path).
#ifndef SANDGATE_CORE_MMDEBSTRAP_BUILDER_H_
#define SANDGATE_CORE_MMDEBSTRAP_BUILDER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/images.h"

namespace sandgate::core {

class MmdebstrapBuilder : public ImageBuilder {
 public:
  explicit MmdebstrapBuilder(std::string mmdebstrap_path = "/usr/bin/mmdebstrap")
      : path_(std::move(mmdebstrap_path)) {}

  absl::Status Build(const ImageRecipe& recipe, const std::string& dir,
                     const std::function<void(absl::string_view line)>& progress,
                     const CancelToken& cancel) override;

  // The argv of a build (argv[0] = the path).
  std::vector<std::string> Argv(const ImageRecipe& recipe, const std::string& dir) const;
  // The package an error line of apt names as missing from the archive, or "".
  static std::string MissingPackage(absl::string_view line);

 private:
  const std::string path_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_MMDEBSTRAP_BUILDER_H_
