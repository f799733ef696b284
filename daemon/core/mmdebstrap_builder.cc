#include "core/mmdebstrap_builder.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/unique_fd.h"

namespace sandgate::core {
namespace {

constexpr absl::Duration kTermGrace = absl::Seconds(10);

// The word after `prefix` in `line`, quotes dropped.
std::string WordAfter(absl::string_view line, absl::string_view prefix) {
  size_t at = line.find(prefix);
  if (at == absl::string_view::npos) return "";
  absl::string_view rest = line.substr(at + prefix.size());
  size_t end = rest.find_first_of(" '\n");
  return std::string(rest.substr(0, end));
}

}  // namespace

std::string MmdebstrapBuilder::MissingPackage(absl::string_view line) {
  if (std::string p = WordAfter(line, "Unable to locate package "); !p.empty()) return p;
  if (absl::StrContains(line, "has no installation candidate")) return WordAfter(line, "Package '");
  return "";
}

std::vector<std::string> MmdebstrapBuilder::Argv(const ImageRecipe& recipe,
                                                 const std::string& dir) const {
  return {path_,
          "--mode=root",
          absl::StrCat("--variant=", recipe.variant),
          absl::StrCat("--include=", absl::StrJoin(recipe.packages, ",")),
          recipe.suite,
          dir};
}

absl::Status MmdebstrapBuilder::Build(const ImageRecipe& recipe, const std::string& dir,
                                      const std::function<void(absl::string_view line)>& progress,
                                      const CancelToken& cancel) {
  if (access(path_.c_str(), X_OK) != 0) {
    return errors::FailedPrecondition(absl::StrCat(
        "cannot build images: ", path_, " is missing (install Debian's mmdebstrap package)"));
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return errors::FromErrno(errno, "pipe");
  UniqueFd out(p[0]), child_out(p[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, child_out.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, child_out.get(), 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  const std::vector<std::string> args = Argv(recipe, dir);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char lang_env[] = "LANG=C.UTF-8";
  char* envp[] = {path_env, lang_env, nullptr};
  pid_t pid = 0;
  int err = posix_spawn(&pid, path_.c_str(), &actions, &attr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  child_out.reset();
  if (err != 0) return errors::FromErrno(err, absl::StrCat("start ", path_));

  progress(absl::StrJoin(args, " "));
  std::string missing, last_error, pending;
  auto line_done = [&](absl::string_view line) {
    if (line.empty()) return;
    if (missing.empty()) missing = MissingPackage(line);
    if (absl::StartsWith(line, "E: ")) last_error = std::string(line);
    progress(line);
  };
  absl::Time term_at = absl::InfiniteFuture();
  bool eof = false;
  while (!eof) {
    struct pollfd fds[2] = {{out.get(), POLLIN, 0}, {cancel.fd(), POLLIN, 0}};
    // Once SIGTERM is sent the token stays readable: only the output is waited for then.
    const bool terminating = term_at != absl::InfiniteFuture();
    int r = poll(fds, terminating ? 1 : 2, terminating ? 1000 : -1);
    if (r < 0 && errno != EINTR) break;
    if (cancel.cancelled() && term_at == absl::InfiniteFuture()) {
      kill(-pid, SIGTERM);
      term_at = absl::Now() + kTermGrace;
    } else if (absl::Now() > term_at) {
      kill(-pid, SIGKILL);
    }
    if (r > 0 && (fds[0].revents & (POLLIN | POLLHUP))) {
      char buf[4096];
      ssize_t n = read(out.get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof = true;
        break;
      }
      pending.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find_first_of("\n\r")) != std::string::npos;) {
        line_done(absl::string_view(pending).substr(0, nl));
        pending.erase(0, nl + 1);
      }
    }
  }
  line_done(pending);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  kill(-pid, SIGKILL);  // anything it left behind in its group
  if (cancel.cancelled()) return errors::Cancelled(absl::StrCat("image build: ", cancel.reason()));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  if (!missing.empty()) {
    return errors::InvalidArgument(absl::StrCat("packages: '", missing, "' is not in Debian's ",
                                                recipe.suite, " archive as configured here"));
  }
  return errors::Internal(
      absl::StrCat("mmdebstrap ",
                   WIFEXITED(status) ? absl::StrCat("exited with ", WEXITSTATUS(status))
                                     : absl::StrCat("was killed by signal ", WTERMSIG(status)),
                   last_error.empty() ? "" : absl::StrCat(": ", last_error)));
}

}  // namespace sandgate::core
