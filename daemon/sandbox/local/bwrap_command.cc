#include "sandbox/local/bwrap_command.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "sandbox/local/init_protocol.h"

namespace sandgate::sandbox::local {
namespace {

// Harmless host files the usual tools need; everything else in /etc stays hidden.
constexpr const char* kEtcFiles[] = {
    "/etc/alternatives",  "/etc/ld.so.cache",     "/etc/ld.so.conf",   "/etc/ld.so.conf.d",
    "/etc/ssl",           "/etc/ca-certificates", "/etc/localtime",    "/etc/timezone",
    "/etc/nsswitch.conf", "/etc/mime.types",      "/etc/protocols",    "/etc/services",
    "/etc/host.conf",     "/etc/inputrc",         "/etc/matplotlibrc", "/etc/os-release",
};

std::string Passwd() {
  return "root:x:0:0:root:/root:/usr/sbin/nologin\n"
         "sandbox:x:1000:1000:sandbox:/work:/bin/bash\n"
         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
}
std::string Group() { return "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"; }

// A pipe already holding `data` with its write end closed, so bwrap reads it to EOF.
absl::StatusOr<UniqueFd> DataPipe(const std::string& data) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return errors::FromErrno(errno, "pipe");
  UniqueFd r(p[0]), w(p[1]);
  if (data.size() > 65536) return errors::Internal("bwrap data larger than a pipe buffer");
  if (write(w.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
    return errors::FromErrno(errno, "write bwrap data");
  }
  return r;
}

}  // namespace

std::vector<std::string> HostBinds() { return RootBinds(""); }

std::vector<std::string> RootBinds(const std::string& root) {
  std::vector<std::string> out;
  // Each entry as it is at `root` + path, never through a link: a link becomes the same link
  // in the sandbox (resolved there, against the sandbox's own root: an image's
  // /etc/localtime -> /usr/share/zoneinfo/… names the image's file), a directory or a file
  // is bound. A bind's source is resolved by bubblewrap or gVisor's gofer on the host, so a
  // link there would name a host path ("/etc/shadow", "../../../..") the root never held.
  auto add = [&](const std::string& path, const char* bind) {
    const std::string source = root + path;
    struct stat st;
    if (lstat(source.c_str(), &st) != 0) return;
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = readlink(source.c_str(), target, sizeof(target) - 1);
      if (n > 0) {
        out.insert(out.end(), {"--symlink", std::string(target, static_cast<size_t>(n)), path});
      }
    } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
      out.insert(out.end(), {bind, source, path});
    }
  };
  for (const char* top : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    add(top, "--ro-bind");
  }
  // /etc itself must be the root's own directory, or every entry below would be looked up
  // through its link.
  struct stat etc_dir;
  if (lstat((root + "/etc").c_str(), &etc_dir) != 0 || !S_ISDIR(etc_dir.st_mode)) return out;
  std::vector<std::string> etc(std::begin(kEtcFiles), std::end(kEtcFiles));
  // Debian's python reads /etc/python3.X/sitecustomize.py.
  if (DIR* d = opendir((root + "/etc").c_str())) {
    while (struct dirent* e = readdir(d)) {
      if (absl::StartsWith(e->d_name, "python3")) etc.push_back(absl::StrCat("/etc/", e->d_name));
    }
    closedir(d);
  }
  for (const std::string& path : etc) add(path, "--ro-bind-try");
  return out;
}

uint64_t DevShmBytes(uint64_t workspace_bytes) {
  return std::min<uint64_t>(kDevShmBytes, workspace_bytes);
}

std::vector<int> BwrapInvocation::keep_fds() const {
  std::vector<int> fds;
  for (const UniqueFd& fd : child_fds) fds.push_back(fd.get());
  return fds;
}

absl::StatusOr<BwrapInvocation> PrepareBwrap(const BwrapConfig& config, const SessionMounts& mounts,
                                             const std::vector<std::string>& command) {
  BwrapInvocation inv;
  auto data_fd = [&](const std::string& data) -> absl::StatusOr<std::string> {
    absl::StatusOr<UniqueFd> fd = DataPipe(data);
    if (!fd.ok()) return fd.status();
    inv.child_fds.push_back(std::move(*fd));
    return absl::StrCat(inv.child_fds.back().get());
  };
  std::vector<std::string>& a = inv.argv;
  a = {config.bwrap_path, "--unshare-all", "--unshare-user", "--disable-userns",
       "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--as-pid-1", "--uid", "1000",
       "--gid", "1000", "--hostname", config.hostname,
       // First: the daemon's tmpfs replaces bwrap's own root, whose options would name the
       // session's host uid and show no size (tmpfs_limits.h).
       "--bind", mounts.path("root"), "/"};
  a.insert(a.end(), config.host_binds.begin(), config.host_binds.end());
  for (const auto& [path, data] :
       {std::pair<const char*, std::string>{"/etc/passwd", Passwd()},
        {"/etc/group", Group()},
        {"/etc/hostname", config.hostname + "\n"},
        {"/etc/hosts", absl::StrCat("127.0.0.1 localhost ", config.hostname,
                                    "\n::1 localhost ip6-localhost\n")}}) {
    absl::StatusOr<std::string> fd = data_fd(data);
    if (!fd.ok()) return fd.status();
    // Copied into the root (read-only below) rather than bind-mounted: one mount fewer in
    // the sandbox's mountinfo.
    a.insert(a.end(), {"--perms", "0444", "--file", *fd, path});
  }
  // Every tmpfs and the devpts are the daemon's mounts (tmpfs_limits.h), not bwrap's --dev
  // and --tmpfs: no mount option names the host uid or the host's RAM. /dev is read-only
  // (the daemon's mount is: bwrap's --remount-ro would add nodev); /dev/shm, /tmp and /work
  // are writable with their own byte and inode caps.
  a.insert(a.end(), {"--proc", "/proc", "--dev-bind", config.device_dir, "/dev", "--bind",
                     mounts.path("shm"), "/dev/shm", "--dev-bind", mounts.path("pts"), "/dev/pts",
                     "--bind", mounts.path("tmp"), "/tmp", "--bind", mounts.path("work"), "/work",
                     "--chdir", "/work"});
  // Only /work, /tmp and /dev/shm (own mounts) stay writable.
  if (!config.init_path.empty()) {
    // Opened here by the daemon (root) and copied in by bwrap from the descriptor, so the
    // sandbox uid needs no access to the host path (the clone may sit in a 0700 directory),
    // and no mount names that path in the sandbox's mountinfo.
    UniqueFd init(open(config.init_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!init.valid()) return errors::FromErrno(errno, absl::StrCat("open ", config.init_path));
    inv.child_fds.push_back(std::move(init));
    a.insert(a.end(), {"--perms", "0555", "--file", absl::StrCat(inv.child_fds.back().get()),
                       initproto::kInitPathInSandbox});
  }
  a.insert(a.end(), {"--remount-ro", "/"});
  if (!config.seccomp_bpf.empty()) {
    absl::StatusOr<std::string> fd = data_fd(config.seccomp_bpf);
    if (!fd.ok()) return fd.status();
    a.insert(a.end(), {"--seccomp", *fd});
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return errors::FromErrno(errno, "pipe");
  inv.info.reset(p[0]);
  inv.child_fds.emplace_back(p[1]);
  a.insert(a.end(), {"--info-fd", absl::StrCat(p[1]), "--"});
  a.insert(a.end(), command.begin(), command.end());
  return inv;
}

absl::StatusOr<pid_t> ReadChildPid(int fd) {
  std::string text;
  char buf[512];
  while (text.size() < 4096) {
    struct pollfd pfd = {fd, POLLIN, 0};
    int r = poll(&pfd, 1, 5000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return errors::Unavailable("bwrap did not report the sandbox pid");
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (absl::StrContains(text, "}")) break;
  }
  // {\n    "child-pid": 1234\n}
  size_t key = text.find("\"child-pid\"");
  if (key != std::string::npos) {
    size_t start = text.find_first_of("0123456789", key);
    size_t end = text.find_first_not_of("0123456789", start);
    int pid = 0;
    if (start != std::string::npos && absl::SimpleAtoi(text.substr(start, end - start), &pid) &&
        pid > 0) {
      return pid;
    }
  }
  return errors::Internal(absl::StrCat("unexpected bwrap --info-fd output: ", text));
}

}  // namespace sandgate::sandbox::local
