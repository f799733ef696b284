#include "sandbox/local/runsc_command.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "sandbox/local/bridge_protocol.h"
#include "sandbox/local/init_protocol.h"

namespace sandgate::sandbox::local {
namespace {

constexpr const char* kContainerPrefix = "sandgate-";

absl::Status MakeDirs(const std::string& path, mode_t mode) {
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    const std::string part = path.substr(0, pos);
    if (mkdir(part.c_str(), mode) != 0 && errno != EEXIST) {
      return errors::FromErrno(errno, absl::StrCat("mkdir ", part));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteText(const std::string& path, const std::string& text, mode_t mode) {
  {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out.good()) return errors::Internal(absl::StrCat("cannot write ", path));
  }
  if (chmod(path.c_str(), mode) != 0) return errors::FromErrno(errno, absl::StrCat("chmod ", path));
  return absl::OkStatus();
}

// A mount point for `source` at `root` + `dest`: a directory, or an empty file for a file.
absl::Status MountPoint(const std::string& root, const std::string& dest, bool directory) {
  const std::string path = root + dest;
  SANDGATE_RETURN_IF_ERROR(MakeDirs(path.substr(0, path.rfind('/')), 0755));
  if (directory) {
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return errors::FromErrno(errno, absl::StrCat("mkdir ", path));
    }
    return absl::OkStatus();
  }
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0) return errors::FromErrno(errno, absl::StrCat("create ", path));
  close(fd);
  return absl::OkStatus();
}

nlohmann::json Bind(const std::string& source, const std::string& dest, bool writable) {
  return {{"destination", dest},
          {"type", "bind"},
          {"source", source},
          {"options", {"rbind", writable ? "rw" : "ro", "nosuid", "nodev"}}};
}

}  // namespace

std::string GvisorPlatform(const std::string& wanted, const std::string& kvm_device) {
  if (wanted != "kvm") return wanted;
  return access(kvm_device.c_str(), R_OK | W_OK) == 0 ? "kvm" : "ptrace";
}

RunscSandbox RunscSandbox::Plan(const RunscConfig& config, const std::string& session_id) {
  RunscSandbox s;
  s.container_id = absl::StrCat(kContainerPrefix, session_id);
  s.dir = absl::StrCat(config.gvisor_dir, "/", s.container_id);
  return s;
}

absl::Status WriteRunscBundle(const RunscConfig& config, const RunscSandbox& sandbox,
                              const SessionMounts& mounts, const RunscBundleOptions& options) {
  SANDGATE_RETURN_IF_ERROR(MakeDirs(config.gvisor_dir, 0700));
  if (mkdir(sandbox.dir.c_str(), 0700) != 0) {
    return errors::FromErrno(errno, absl::StrCat("mkdir ", sandbox.dir));
  }
  for (const std::string& d : {sandbox.state_dir(), sandbox.socket_dir()}) {
    if (mkdir(d.c_str(), 0700) != 0) return errors::FromErrno(errno, absl::StrCat("mkdir ", d));
  }

  const std::string root = mounts.path("root");
  nlohmann::json binds = nlohmann::json::array();
  for (size_t i = 0; i + 2 < config.host_binds.size(); i += 3) {
    const std::string& kind = config.host_binds[i];
    const std::string& a = config.host_binds[i + 1];
    const std::string& b = config.host_binds[i + 2];
    if (kind == "--symlink") {
      SANDGATE_RETURN_IF_ERROR(MakeDirs(root + b.substr(0, b.rfind('/')), 0755));
      if (symlink(a.c_str(), (root + b).c_str()) != 0 && errno != EEXIST) {
        return errors::FromErrno(errno, absl::StrCat("symlink ", b));
      }
      continue;
    }
    // The gofer resolves a source on the host: one that is a link (RootBinds makes none) is
    // left out rather than followed there. Absent: --ro-bind-try of a missing file.
    struct stat st;
    if (lstat(a.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    SANDGATE_RETURN_IF_ERROR(MountPoint(root, b, S_ISDIR(st.st_mode)));
    binds.push_back(Bind(a, b, false));
  }
  for (const char* dir : {"/proc", "/dev", "/tmp", "/work", "/.sandgate/sock"}) {
    SANDGATE_RETURN_IF_ERROR(MountPoint(root, dir, true));
  }
  for (const char* file : {initproto::kInitPathInSandbox, bridgeproto::kBridgePathInSandbox}) {
    SANDGATE_RETURN_IF_ERROR(MountPoint(root, file, false));
  }
  const std::string& host = config.hostname;
  SANDGATE_RETURN_IF_ERROR(MakeDirs(root + "/etc", 0755));
  for (const auto& [path, text] :
       {std::pair<const char*, std::string>{
            "/etc/passwd",
            absl::StrCat("root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:", options.uid, ":",
                         options.uid, ":sandbox:/work:/bin/bash\n",
                         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")},
        {"/etc/group", absl::StrCat("root:x:0:\nsandbox:x:", options.uid, ":\n")},
        {"/etc/hostname", host + "\n"},
        {"/etc/hosts", absl::StrCat("127.0.0.1 localhost ", host, "\n::1 localhost\n")}}) {
    SANDGATE_RETURN_IF_ERROR(WriteText(root + path, text, 0444));
  }
  nlohmann::json mounts_json = {
      {{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
      {{"destination", "/dev"},
       {"type", "tmpfs"},
       {"source", "tmpfs"},
       {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}},
      {{"destination", "/dev/pts"},
       {"type", "devpts"},
       {"source", "devpts"},
       {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}},
      {{"destination", "/dev/shm"},
       {"type", "tmpfs"},
       {"source", "shm"},
       {"options", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}}},
      Bind(mounts.path("work"), "/work", true),
      Bind(mounts.path("tmp"), "/tmp", true),
      // Read-only: the sandbox may connect to the sockets there but create nothing.
      Bind(sandbox.socket_dir(), bridgeproto::kSocketDirInSandbox, false),
      Bind(config.init_path, initproto::kInitPathInSandbox, false),
      Bind(config.bridge_path, bridgeproto::kBridgePathInSandbox, false),
  };
  for (nlohmann::json& b : binds) mounts_json.push_back(std::move(b));
  std::vector<std::string> args = {bridgeproto::kBridgePathInSandbox, absl::StrCat(options.uid)};
  if (options.proxy_port != 0) args.push_back(absl::StrCat(options.proxy_port));
  const nlohmann::json empty = nlohmann::json::array();
  const nlohmann::json setid = {"CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_SETPCAP"};
  nlohmann::json spec = {
      {"ociVersion", "1.0.2"},
      {"process",
       // Root inside gVisor for the bridge and the init only; sandgate-init drops every
       // command to options.uid, with an empty bounding set. No capability but these four
       // (CAP_KILL: the init kills the commands, which run as another uid; CAP_SETPCAP: it
       // empties their bounding set), no new privileges.
       {{"user", {{"uid", 0}, {"gid", 0}}},
        {"args", args},
        {"env", empty},
        {"cwd", "/"},
        {"noNewPrivileges", true},
        {"capabilities",
         {{"bounding", setid},
          {"effective", setid},
          {"inheritable", empty},
          {"permitted", setid},
          {"ambient", empty}}},
        {"rlimits",
         {{{"type", "RLIMIT_NOFILE"},
           {"hard", options.max_open_files},
           {"soft", options.max_open_files}},
          {{"type", "RLIMIT_NPROC"},
           {"hard", options.max_processes},
           {"soft", options.max_processes}}}}}},
      {"root", {{"path", root}, {"readonly", true}}},
      {"hostname", host},
      {"mounts", mounts_json},
      {"linux",
       {{"namespaces",
         {{{"type", "pid"}},
          {{"type", "network"}},
          {{"type", "ipc"}},
          {{"type", "uts"}},
          {{"type", "mount"}}}}}}};
  return WriteText(sandbox.dir + "/config.json", spec.dump(2), 0600);
}

std::vector<std::string> RunscRunArgv(const RunscConfig& config, const RunscSandbox& sandbox) {
  return {config.runsc_path,
          absl::StrCat("--root=", sandbox.state_dir()),
          absl::StrCat("--platform=", config.platform),
          "--network=none",
          "--host-uds=open",
          "--ignore-cgroups",
          "run",
          "--bundle",
          sandbox.dir,
          sandbox.container_id};
}

std::vector<std::string> RunscDeleteArgv(const RunscConfig& config, const RunscSandbox& sandbox) {
  return {config.runsc_path, absl::StrCat("--root=", sandbox.state_dir()), "delete", "-force",
          sandbox.container_id};
}

absl::Status RemoveRunscDir(const RunscSandbox& sandbox) {
  if (sandbox.dir.empty()) return absl::OkStatus();
  struct stat st;
  if (lstat(sandbox.dir.c_str(), &st) != 0 && errno == ENOENT) return absl::OkStatus();
  // Depth first, never following a link, never crossing into another file system.
  int r = nftw(
      sandbox.dir.c_str(),
      [](const char* path, const struct stat*, int type, struct FTW*) {
        return type == FTW_DP ? rmdir(path) : unlink(path);
      },
      16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  if (r != 0) return errors::FromErrno(errno, absl::StrCat("remove ", sandbox.dir));
  return absl::OkStatus();
}

std::vector<std::string> ListRunscDirs(const RunscConfig& config) {
  std::vector<std::string> out;
  DIR* d = opendir(config.gvisor_dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    if (absl::StartsWith(e->d_name, kContainerPrefix)) out.push_back(e->d_name);
  }
  closedir(d);
  return out;
}

}  // namespace sandgate::sandbox::local
