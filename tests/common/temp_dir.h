// A fresh directory under /tmp for one test, removed with everything in it when the object
// goes. Not thread safe; tests own one each.
//
//   ScopedTempDir tmp("sandgate-cred");
//   ASSERT_TRUE(tmp.ok());
//   std::ofstream(tmp.path() + "/key") << "k";
#ifndef SANDGATE_TESTS_COMMON_TEMP_DIR_H_
#define SANDGATE_TESTS_COMMON_TEMP_DIR_H_

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace sandgate::testing {

class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix) {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes `key` and a newline to `dir`/openai.key, mode 0600 as the daemon wants its
// credentials file, and returns the path.
inline std::string WriteKeyFile(const std::string& dir, const std::string& key) {
  const std::string path = dir + "/openai.key";
  std::ofstream(path) << key << "\n";
  chmod(path.c_str(), 0600);
  return path;
}

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_COMMON_TEMP_DIR_H_
