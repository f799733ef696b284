// sandgated: the sandgate daemon. See docs/configuration.md.
//
// Signals are blocked before any thread starts and taken by sigwait in main, which starts
// the drain; no signal handler runs daemon code.
#include <signal.h>
#include <sys/prctl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "app/daemon.h"
#include "common/log.h"
#include "core/config.h"

namespace {

constexpr char kUsage[] =
    "usage: sandgated [--config FILE] [--listen unix:PATH|tcp:HOST:PORT|HOST:PORT] [--state-dir "
    "DIR]\n"
    "                 [--log-level debug|info|warning|error] [--check-config] [--version]\n"
    "Runs the sandgate daemon. Flags override the config file; without a config file the\n"
    "embedded defaults apply (Unix socket, one local tenant).\n"
    "--check-config reads the config as a start would (every key, the cross-field rules, the\n"
    "TLS files), says what is wrong or that it is fine, and exits (0 fine, 2 not) without\n"
    "touching the state directory, the store or any socket.\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "sandgated: %s\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using sandgate::core::Config;
  std::string config_path, listen, state_dir, log_level;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--version") {
      std::printf("sandgated %s\n", SANDGATE_VERSION);
      return 0;
    } else if (arg == "--check-config") {
      check_only = true;
    } else if (arg == "--config") {
      if (!value(&config_path)) return Fail("--config needs a file");
    } else if (arg == "--listen") {
      if (!value(&listen)) return Fail("--listen needs an address");
    } else if (arg == "--state-dir") {
      if (!value(&state_dir)) return Fail("--state-dir needs a directory");
    } else if (arg == "--log-level") {
      if (!value(&log_level)) return Fail("--log-level needs a level");
    } else {
      return Fail("unknown argument '" + arg + "' (see --help)");
    }
  }
  Config config;
  if (!config_path.empty()) {
    absl::StatusOr<Config> loaded = sandgate::core::LoadConfigFile(config_path);
    if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
    config = *loaded;
  }
  if (!listen.empty()) config.listen = listen;
  if (!state_dir.empty()) config.state_dir = state_dir;
  if (!log_level.empty()) config.log_level = log_level;
  if (check_only) {
    absl::Status valid = sandgate::core::ValidateConfig(config);
    if (!valid.ok()) return Fail(std::string(valid.message()));
    std::printf("sandgated: config OK (%s)\n",
                config_path.empty() ? "embedded defaults" : config_path.c_str());
    return 0;
  }
  using sandgate::log::Level;
  sandgate::log::SetMinLevel(config.log_level == "debug"     ? Level::kDebug
                             : config.log_level == "warning" ? Level::kWarning
                             : config.log_level == "error"   ? Level::kError
                                                             : Level::kInfo);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<sandgate::app::Daemon>> daemon =
      sandgate::app::Daemon::Create(config);
  if (!daemon.ok()) return Fail(std::string(daemon.status().message()));
  absl::Status started = (*daemon)->Start();
  if (!started.ok()) return Fail(std::string(started.message()));
  std::fprintf(stdout, "sandgated listening on %s\n", (*daemon)->address().c_str());
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
    sandgate::log::Info("daemon.sighup_ignored");
  }
  sandgate::log::Info("daemon.signal", {{"signal", strsignal(sig)}});
  // A drain that cannot finish (a stuck upstream, a bug) must not keep the process forever:
  // past the grace period and a margin it exits, and the sandboxes die with it (their
  // parent-death signal); the next start sweeps what the journal still names.
  absl::Duration limit = config.drain_grace + absl::Seconds(15);
  std::thread([limit] {
    absl::SleepFor(limit);
    sandgate::log::Error("daemon.drain_timeout", {{"seconds", absl::ToInt64Seconds(limit)}});
    std::_Exit(1);
  }).detach();
  (*daemon)->Drain();
  daemon->reset();
  return 0;
}
