// FileJournal: a ResourceJournal of one fsynced JSON file per entry in a directory, so that a
// process that is SIGKILLed leaves its records for the next one (tests of crash cleanup).
//
// Thread safe (each call is one file operation; ids are hex-encoded into file names).
#ifndef SANDGATE_TESTS_SECURITY_FILE_JOURNAL_H_
#define SANDGATE_TESTS_SECURITY_FILE_JOURNAL_H_

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/journal.h"

namespace sandgate::testing {

class FileJournal : public ResourceJournal {
 public:
  explicit FileJournal(std::string dir) : dir_(std::move(dir)) {}

  absl::Status Record(const JournalEntry& e) override {
    nlohmann::json j = {
        {"id", e.id}, {"provider", e.provider}, {"kind", e.kind}, {"details", e.details}};
    const std::string text = j.dump();
    const std::string tmp = Path(e.id) + ".tmp";
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return absl::InternalError(absl::StrCat("open ", tmp, ": errno ", errno));
    bool ok =
        write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp.c_str(), Path(e.id).c_str()) != 0) {
      return absl::InternalError(absl::StrCat("write ", tmp));
    }
    return absl::OkStatus();
  }

  absl::Status Erase(const std::string& id) override {
    if (unlink(Path(id).c_str()) != 0 && errno != ENOENT) {
      return absl::InternalError(absl::StrCat("unlink ", Path(id)));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<JournalEntry>> List() override {
    std::vector<JournalEntry> out;
    DIR* d = opendir(dir_.c_str());
    if (d == nullptr) return absl::InternalError(absl::StrCat("opendir ", dir_));
    while (struct dirent* e = readdir(d)) {
      if (!absl::EndsWith(e->d_name, ".json")) continue;
      std::ifstream in(absl::StrCat(dir_, "/", e->d_name));
      std::stringstream ss;
      ss << in.rdbuf();
      nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
      if (j.is_discarded() || !j.is_object()) continue;
      JournalEntry entry;
      entry.id = j.value("id", "");
      entry.provider = j.value("provider", "");
      entry.kind = j.value("kind", "");
      entry.details = j.value("details", nlohmann::json::object());
      out.push_back(std::move(entry));
    }
    closedir(d);
    return out;
  }

 private:
  std::string Path(const std::string& id) const {
    return absl::StrCat(dir_, "/", absl::BytesToHexString(id), ".json");
  }
  const std::string dir_;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_SECURITY_FILE_JOURNAL_H_
