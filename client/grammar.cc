#include "client/grammar.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sandgate::cli {
namespace {

constexpr char kUsageText[] = R"(usage: sandgate [--addr ADDR[,ADDR]...] [--token-file FILE]
                [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] COMMAND ...

commands:
  run FILE [--out DIR] [--json] [--playbook NAME] [--agent NAME] [--provider NAME]
           [--model NAME] [--timeout SECONDS] [--idempotency-key KEY] [--cancel-on-exit]
           [--env NAME=VALUE]... [--setup COMMAND]... [--network disabled|restricted|enabled]
           [--allow DOMAIN]... [--memory-mib N] [--workspace-mib N] [--session ID]
           [--isolation namespaces|gvisor] [--image NAME]
      start a run, show its progress, download its artifacts and events.jsonl into DIR
      (default ./sandgate-<run id>), print a summary; exit 0 only if the run succeeded.
      --playbook NAME picks the daemon's task (default: its default; a name it does not
      know is answered with the ones it knows).
      Ctrl-C detaches (the run goes on) unless --cancel-on-exit.
  events RUN [--follow] [--after N] [--json]   show a run's events
  runs [--limit N] [--json]                    list your runs, newest first
  get RUN [--json]                             show one run
  cancel RUN [--reason TEXT]                   cancel a run
  download RUN [--out DIR]                     download a run's artifacts and events.jsonl

  session create [--idle S] [--lifetime S] [--command-timeout S] [--env K=V]... [--setup CMD]...
                 [--network MODE] [--memory-mib N] [--workspace-mib N] [--idempotency-key K]
                 [--isolation namespaces|gvisor] [--image NAME] [--from-snapshot ID] [--json]
                 prints the id
  session list [--all] | get ID | keepalive ID | close ID [--reason TEXT]
  session usage ID [--json]     memory, CPU time and processes the session uses now
  session exec ID [--timeout S] [--env K=V]... [--stdin] [--tty] [--background] [--]
               COMMAND [ARG]...
      one COMMAND word runs as `sh -c COMMAND`; exits with the command's status; piped
      stdin goes to the command (`echo hi | sandgate session exec ID -- cat` prints hi);
      --background prints a process id at once
  session ps ID | output ID PROC [--offset N] [--follow] | input ID PROC [--eof]
          | kill ID PROC [--signal SIG]      the session's processes
  session shell ID [--] [COMMAND [ARG]...]   an interactive terminal in the session
  session expose ID PORT [--signed [--ttl 10m]] | unexpose ID PORT | ports ID
      a port the session listens on, reached through the daemon's REST port (prints the URL)
  session upload ID LOCAL_FILE [WORKSPACE_PATH] | download ID WORKSPACE_PATH [--out FILE]
  session ls ID [DIR] | stat ID PATH | rm ID PATH [--recursive] | mv ID FROM TO [--force]
          | mkdir ID PATH [--parents]
  session snapshot ID [--close] | pause ID | resume SNAPSHOT   save and restore a workspace
  snapshot list [--session ID] | get ID | rm ID...             your snapshots
  run ... --session ID     runs in that session; its workspace stays for the next run

  completion bash|zsh                          print the shell's completion script
  man                                          print the manual page (sandgate man | man -l -)

  image build NAME --packages P1,P2,... [--detach] [--json]
      build a sandbox image from Debian packages, showing mmdebstrap's progress
      (Ctrl-C cancels the build unless --detach)
  image list [--json] | get NAME [--json] | rm NAME   your images; rm cancels a build
  admin drain                                  operators: drain and stop the daemon
  admin purge --older-than-hours N             operators: delete old runs and ended sessions

Every command answers --help. --version prints the version.
ADDR: unix:PATH, tcp:HOST:PORT (as sandgated prints it) or HOST:PORT. Several replicas'
      tcp: IP addresses, comma separated, share the calls; one that is down is skipped.
TLS (tcp: only): --tls-ca FILE verifies the daemon's certificate (default: the system's
      roots); --tls-cert FILE --tls-key FILE present a client certificate (mutual TLS).
environment: SANDGATE_ADDR (default unix:/run/sandgate/sandgated.sock), SANDGATE_TOKEN,
             SANDGATE_TLS_CA, SANDGATE_TLS_CERT, SANDGATE_TLS_KEY,
             SANDGATE_RECONNECT_TIMEOUT (seconds a broken event stream is retried, default 60)
exit codes: 0 success, 1 the run did not succeed (or a download did not match its sha256, or
            `run` could not save all of a finished run's files), 2 usage or connection error,
            130 detached
)";

constexpr char kGlobalUsage[] = R"(
global options: --addr ADDR[,ADDR]... (unix:PATH, tcp:HOST:PORT or HOST:PORT), --token-file FILE,
                --tls-ca FILE, --tls-cert FILE, --tls-key FILE (see sandgate --help)
)";

constexpr char kSandboxOptions[] = R"(
sandbox:  --env NAME=VALUE   (repeatable)  set in every command's environment
          --setup COMMAND    (repeatable)  run before anything else, in order
          --network disabled|restricted|enabled   --allow DOMAIN (repeatable, restricted)
          --memory-mib N     memory limit (at least 16)
          --workspace-mib N  size of /work (and of /tmp), held in that memory: below it
                             (default: a quarter of the memory, at most the daemon's default)
          --idle S  --lifetime S  --command-timeout S   the session's clocks, in seconds
          --isolation namespaces|gvisor   gvisor: the code runs on gVisor's kernel, not the
                             host's (default: your tenant's, else the daemon's; see
                             docs/isolation-levels.md)
          --image NAME       the sandbox's software: an image built with `sandgate image
                             build` (default: host, the host's own /usr; docs/images.md)
)";

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

const char* UsageText() { return kUsageText; }

const std::vector<std::string>& SandboxFlags() {
  static const auto* const kFlags = new std::vector<std::string>{
      "--env",  "--setup",    "--network",         "--allow",     "--memory-mib", "--workspace-mib",
      "--idle", "--lifetime", "--command-timeout", "--isolation", "--image"};
  return *kFlags;
}

const ArgsGrammar& Grammar() {
  static const ArgsGrammar* const grammar = new ArgsGrammar{
      // clang-format off
      {{"--out", true},           {"--json", false},        {"--playbook", true},  {"--agent", true},
       {"--provider", true},      {"--timeout", true},      {"--idempotency-key", true},
       {"--cancel-on-exit", false}, {"--follow", false},    {"--after", true},     {"--limit", true},
       {"--reason", true},        {"--addr", true},         {"--token-file", true}, {"--env", true},
       {"--setup", true},         {"--network", true},      {"--allow", true},     {"--memory-mib", true},
       {"--session", true},       {"--idle", true},         {"--lifetime", true},  {"--all", false},
       {"--command-timeout", true}, {"--older-than-hours", true}, {"--model", true},
       {"--tls-ca", true},        {"--tls-cert", true},     {"--tls-key", true},
       {"--workspace-mib", true}, {"--isolation", true},

       {"--background", false}, {"--stdin", false},
       {"--tty", false},          {"--signal", true},       {"--offset", true},    {"--eof", false},
       {"--recursive", false},    {"--force", false},       {"--parents", false},
       {"--signed", false},       {"--ttl", true},          {"--image", true},     {"--packages", true},
       {"--detach", false},       {"--from-snapshot", true}, {"--close", false}},
      // clang-format on
      {"--addr", "--token-file", "--tls-ca", "--tls-cert", "--tls-key"},
      {
          {"run",
           absl::StrCat(
               "usage: sandgate run FILE [--out DIR] [--json] [--playbook NAME] [--agent NAME]\n"
               "                         [--provider NAME] [--model NAME] [--timeout SECONDS]\n"
               "                         [--idempotency-key KEY] [--cancel-on-exit] [--session "
               "ID]\n"
               "                         [sandbox options]\n"
               "Starts a run on FILE, shows its progress as it happens, downloads its artifacts "
               "and\n"
               "events.jsonl into DIR (default ./sandgate-<run id>), checking each one's sha256, "
               "and\n"
               "prints a summary. Exit 0 only if the run succeeded, 1 if not (or if its files "
               "could\n"
               "not all be saved). A run that ended is reported as ended, with the events it "
               "streamed\n"
               "saved, even when the daemon goes away right after (a drain): the rest is a "
               "warning.\n"
               "--model NAME picks the model of a model-driven agent (default: the provider's).\n"
               "--playbook NAME picks the daemon's task (default: its default; a name it does not\n"
               "know is answered with the ones it knows). The summary is the daemon's account of\n"
               "what the run's verification found.\n"
               "--json prints each event as a JSON line on stdout, then the run; progress goes to\n"
               "stderr. --session ID runs in a kept session (no sandbox options then).\n"
               "Ctrl-C detaches (exit 130; the run goes on); with --cancel-on-exit it cancels the "
               "run.\n",
               kSandboxOptions, kGlobalUsage),
           With({"--out", "--json", "--playbook", "--agent", "--provider", "--model", "--timeout",
                 "--idempotency-key", "--cancel-on-exit", "--session"},
                SandboxFlags())},
          {"events",
           absl::StrCat(
               "usage: sandgate events RUN [--follow] [--after N] [--json]\n"
               "Shows a run's events: from the start, or after event N; --follow keeps going "
               "until\n"
               "the run finishes (and rides out a daemon restart). Ctrl-C stops (exit 130).\n",
               kGlobalUsage),
           {"--follow", "--after", "--json"}},
          {"runs",
           absl::StrCat("usage: sandgate runs [--limit N] [--json]\nLists your runs, newest first "
                        "(default 20).\n",
                        kGlobalUsage),
           {"--limit", "--json"}},
          {"get",
           absl::StrCat("usage: sandgate get RUN [--json]\nShows one run.\n", kGlobalUsage),
           {"--json"}},
          {"cancel",
           absl::StrCat("usage: sandgate cancel RUN [--reason TEXT]\nCancels a run.\n",
                        kGlobalUsage),
           {"--reason"}},
          {"download",
           absl::StrCat("usage: sandgate download RUN [--out DIR]\n"
                        "Downloads a run's artifacts (each checked against its sha256) and "
                        "events.jsonl into\n"
                        "DIR (default ./sandgate-<run id>).\n",
                        kGlobalUsage),
           {"--out"}},
          {"session",
           absl::StrCat(
               "usage: sandgate session "
               "create|list|get|exec|ps|output|input|kill|shell|upload|download|ls|stat|rm|mv|"
               "mkdir|expose|unexpose|ports|usage|keepalive|close|snapshot|pause|resume ...\n"
               "Drives a kept sandbox session; `sandgate session SUBCOMMAND --help` for each.\n",
               kGlobalUsage),
           {}},
          {"session create",
           absl::StrCat(
               "usage: sandgate session create [--provider NAME] [--idempotency-key KEY] [--json]\n"
               "                               [--from-snapshot ID] [sandbox options]\n"
               "Creates a kept session and prints its id (or the session as JSON).\n"
               "--from-snapshot ID restores that snapshot's workspace into it (with no sandbox\n"
               "options, in the snapshot's sandbox).\n",
               kSandboxOptions, kGlobalUsage),
           With({"--provider", "--idempotency-key", "--from-snapshot", "--json"}, SandboxFlags())},
          {"session snapshot",
           absl::StrCat("usage: sandgate session snapshot ID [--close] [--json]\n"
                        "Saves the session's workspace (files, directories, links, modes) as a\n"
                        "snapshot any replica restores, and prints its id. --close closes the\n"
                        "session once the snapshot is stored (as `session pause`).\n",
                        kGlobalUsage),
           {"--close", "--json"}},
          {"session pause",
           absl::StrCat("usage: sandgate session pause ID [--json]\n"
                        "Snapshots the session, then closes it; prints the snapshot's id, which\n"
                        "`session resume` takes.\n",
                        kGlobalUsage),
           {"--json"}},
          {"session resume",
           absl::StrCat("usage: sandgate session resume SNAPSHOT [--json]\n"
                        "A new session with the snapshot's sandbox and workspace; prints its id.\n",
                        kGlobalUsage),
           {"--json"}},
          {"snapshot",
           absl::StrCat(
               "usage: sandgate snapshot list|get|rm ...\n"
               "Your sessions' snapshots; `sandgate snapshot SUBCOMMAND --help` for each.\n",
               kGlobalUsage),
           {}},
          {"snapshot list",
           absl::StrCat("usage: sandgate snapshot list [--session ID] [--json]\n"
                        "Lists your snapshots, newest first (of one session with --session).\n",
                        kGlobalUsage),
           {"--session", "--json"}},
          {"snapshot get",
           absl::StrCat("usage: sandgate snapshot get ID [--json]\nShows one snapshot.\n",
                        kGlobalUsage),
           {"--json"}},
          {"snapshot rm",
           absl::StrCat("usage: sandgate snapshot rm ID...\nDeletes snapshots.\n", kGlobalUsage),
           {}},
          {"session list",
           absl::StrCat("usage: sandgate session list [--all] [--json]\n"
                        "Lists your live sessions; --all includes closed and expired ones.\n",
                        kGlobalUsage),
           {"--all", "--json"}},
          {"session get",
           absl::StrCat("usage: sandgate session get ID [--json]\nShows one session.\n",
                        kGlobalUsage),
           {"--json"}},
          {"session keepalive",
           absl::StrCat("usage: sandgate session keepalive ID [--json]\n"
                        "Restarts the session's idle clock (never past its lifetime).\n",
                        kGlobalUsage),
           {"--json"}},
          {"session close",
           absl::StrCat("usage: sandgate session close ID [--reason TEXT] [--json]\n"
                        "Closes the session and deletes its sandbox and workspace.\n",
                        kGlobalUsage),
           {"--reason", "--json"}},
          {"session exec",
           absl::StrCat(
               "usage: sandgate session exec ID [--timeout S] [--env K=V]... [--] COMMAND "
               "[ARG]...\n"
               "Runs a command in the session; one COMMAND word runs as `sh -c COMMAND`. Its "
               "stdout\n"
               "and stderr are passed through unchanged, as they arrive; how it ended (timeout,\n"
               "signal, out of memory) goes to stderr. Exits with the command's status (124 timed\n"
               "out, 128+N killed by signal N). Put -- before a command that has options.\n"
               "Piped or redirected stdin (or --stdin) goes to the command, EOF at its end.\n"
               "--tty runs it on a terminal of this one's size. --background starts it as a\n"
               "process of the session and prints its id at once (stdin only with --stdin):\n"
               "see `session ps|output|input|kill`. Ctrl-C kills the command.\n",
               kGlobalUsage),
           {"--timeout", "--env", "--stdin", "--tty", "--background", "--json"}},
          {"session ps",
           absl::StrCat("usage: sandgate session ps ID [--json]\n"
                        "Lists the session's processes (running, and ended ones still kept).\n",
                        kGlobalUsage),
           {"--json"}},
          {"session output",
           absl::StrCat(
               "usage: sandgate session output ID PROCESS [--offset N] [--follow]\n"
               "Prints a process's output from byte N (default 0) as far as it goes, and the\n"
               "next offset on stderr; --follow keeps printing until it ends and exits with its\n"
               "status. Output older than the process's buffer holds is dropped, and said so.\n",
               kGlobalUsage),
           {"--offset", "--follow"}},
          {"session input",
           absl::StrCat("usage: sandgate session input ID PROCESS [--eof]\n"
                        "Sends this command's stdin to a process started with --stdin; --eof\n"
                        "then closes its stdin.\n",
                        kGlobalUsage),
           {"--eof"}},
          {"session expose",
           absl::StrCat(
               "usage: sandgate session expose ID PORT [--signed [--ttl 10m]] [--json]\n"
               "Makes PORT, which the session's code listens on at 127.0.0.1 inside the\n"
               "sandbox, reachable through the daemon's REST port (HTTP and WebSocket) with\n"
               "your token, and prints its URL. --signed prints a URL that needs no token\n"
               "instead, valid for --ttl (default 1h; 10m, 2h, or seconds).\n",
               kGlobalUsage),
           {"--signed", "--ttl", "--json"}},
          {"session unexpose",
           absl::StrCat("usage: sandgate session unexpose ID PORT\n"
                        "Closes an exposed port: its URLs and open connections end.\n",
                        kGlobalUsage),
           {}},
          {"session ports",
           absl::StrCat("usage: sandgate session ports ID [--json]\n"
                        "Lists the session's exposed ports, their open connections and URLs.\n",
                        kGlobalUsage),
           {"--json"}},
          {"session usage",
           absl::StrCat("usage: sandgate session usage ID [--json]\n"
                        "Shows what the session uses now, from its cgroups: memory (and its "
                        "limit),\nCPU time since it started, processes; figures this host cannot "
                        "give are named.\n",
                        kGlobalUsage),
           {"--json"}},
          {"session kill",
           absl::StrCat("usage: sandgate session kill ID PROCESS [--signal SIG]\n"
                        "Sends SIG (default SIGTERM; SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1,\n"
                        "SIGUSR2) to the process's group.\n",
                        kGlobalUsage),
           {"--signal"}},
          {"session shell",
           absl::StrCat(
               "usage: sandgate session shell ID [--env K=V]... [--] [COMMAND [ARG]...]\n"
               "An interactive terminal in the session (bash, else sh; or COMMAND), like\n"
               "`docker exec -it`: this terminal is in raw mode, every key (Ctrl-C too) goes to\n"
               "the sandbox, a resize follows this terminal's. Exits with the shell's status.\n",
               kGlobalUsage),
           {"--env"}},
          {"session upload",
           absl::StrCat("usage: sandgate session upload ID LOCAL_FILE [WORKSPACE_PATH]\n"
                        "Uploads a file into the workspace (default: under its own name). The "
                        "daemon checks\n"
                        "its size and sha256 before the file appears.\n",
                        kGlobalUsage),
           {}},
          {"session download",
           absl::StrCat(
               "usage: sandgate session download ID WORKSPACE_PATH [--out FILE]\n"
               "Downloads a workspace file (default: under its own name here), checked against "
               "the\n"
               "sha256 the daemon sends; nothing is left under FILE when the check fails.\n",
               kGlobalUsage),
           {"--out"}},
          {"session ls",
           absl::StrCat(
               "usage: sandgate session ls ID [DIR]\nLists the workspace (or DIR in it).\n",
               kGlobalUsage),
           {}},
          {"session stat",
           absl::StrCat("usage: sandgate session stat ID PATH [--json]\n"
                        "Shows what PATH in the workspace is (. for the workspace); a link is\n"
                        "shown as a link, never followed.\n",
                        kGlobalUsage),
           {"--json"}},
          {"session rm",
           absl::StrCat("usage: sandgate session rm ID PATH [--recursive]\n"
                        "Deletes a file, a link or an empty directory; --recursive deletes a\n"
                        "directory with everything in it.\n",
                        kGlobalUsage),
           {"--recursive"}},
          {"session mv",
           absl::StrCat("usage: sandgate session mv ID FROM TO [--force] [--json]\n"
                        "Renames FROM to TO in the workspace (missing parents of TO are made);\n"
                        "--force replaces an existing TO.\n",
                        kGlobalUsage),
           {"--force", "--json"}},
          {"session mkdir",
           absl::StrCat("usage: sandgate session mkdir ID PATH [--parents] [--json]\n"
                        "Makes a directory; --parents makes missing parents too, and an\n"
                        "existing directory is then fine.\n",
                        kGlobalUsage),
           {"--parents", "--json"}},
          {"completion",
           "usage: sandgate completion bash|zsh\n"
           "Prints the shell's completion script for sandgate: commands, subcommands, options\n"
           "and their values, file names where a file goes. Install with\n"
           "  sandgate completion bash > /etc/bash_completion.d/sandgate\n"
           "  sandgate completion zsh > \"${fpath[1]}/_sandgate\"\n"
           "or load it in the current shell: source <(sandgate completion bash).\n",
           {}},
          {"man",
           "usage: sandgate man\n"
           "Prints this manual page, sandgate(1), in roff: sandgate man | man -l -\n"
           "It is generated from the same text as --help.\n",
           {}},
          {"image",
           absl::StrCat(
               "usage: sandgate image build NAME --packages P1,P2,... [--detach] [--json]\n"
               "       sandgate image list [--json] | get NAME [--json] | rm NAME\n"
               "Sandbox images: root file systems built from Debian packages, used with\n"
               "--image NAME on run and session create (docs/images.md).\n",
               kGlobalUsage),
           {}},
          {"image build",
           absl::StrCat(
               "usage: sandgate image build NAME --packages P1,P2,... [--detach] [--json]\n"
               "Builds image NAME with mmdebstrap from the Debian packages named (and\n"
               "what they depend on), printing its progress; prints the image at the end.\n"
               "Ctrl-C cancels the build, unless --detach (then it goes on).\n",
               kGlobalUsage),
           {"--packages", "--detach", "--json"}},
          {"image list",
           absl::StrCat("usage: sandgate image list [--json]\nLists the images you may use, "
                        "built and building.\n",
                        kGlobalUsage),
           {"--json"}},
          {"image get",
           absl::StrCat("usage: sandgate image get NAME [--json]\nShows one image.\n",
                        kGlobalUsage),
           {"--json"}},
          {"image rm",
           absl::StrCat("usage: sandgate image rm NAME\nDeletes an image no live session uses, "
                        "or cancels its build.\n",
                        kGlobalUsage),
           {}},
          {"admin",
           absl::StrCat(
               "usage: sandgate admin drain | purge --older-than-hours N\n"
               "Operators only. drain: refuse new runs, cancel the active ones, stop the daemon.\n"
               "purge: delete runs and ended sessions older than N hours.\n",
               kGlobalUsage),
           {}},
          {"admin drain",
           absl::StrCat("usage: sandgate admin drain\nDrains and stops the daemon.\n",
                        kGlobalUsage),
           {}},
          {"admin purge",
           absl::StrCat("usage: sandgate admin purge --older-than-hours N\n"
                        "Deletes runs and ended sessions older than N hours (0 or more).\n",
                        kGlobalUsage),
           {"--older-than-hours"}},
      }};
  return *grammar;
}

std::vector<std::string> CommandNames(const std::string& group) {
  std::vector<std::string> names;
  for (const CommandSpec& c : Grammar().commands) {
    if (group.empty() && !absl::StrContains(c.name, ' ')) names.push_back(c.name);
    if (!group.empty() && absl::StartsWith(c.name, group + " "))
      names.push_back(c.name.substr(group.size() + 1));
  }
  return names;
}

}  // namespace sandgate::cli
