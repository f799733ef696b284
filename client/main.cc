// sandgate: the command-line client of sandgated. Thin: flags, rendering, file transfer.
//
//   sandgate run examples/northstar_cloud_financial_statements.csv --out results/
//   sandgate events RUN --follow
//
// Address: --addr, else $SANDGATE_ADDR, else unix:/run/sandgate/sandgated.sock, in the
// daemon's own syntax (common/address.h), or several replicas' comma separated
// (client/connection.h). TLS files: --tls-ca/--tls-cert/--tls-key, else $SANDGATE_TLS_CA/
// _CERT/_KEY. Token: --token-file, else $SANDGATE_TOKEN (never a
// flag: it would show in `ps`). Everything shown to a person from the daemon or a sandbox
// goes through TerminalSafe (client/terminal_text.h); `session exec` passes the command's
// output through as bytes.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/args.h"
#include "client/cmd_snapshot.h"
#include "client/command.h"
#include "client/completion.h"
#include "client/connection.h"
#include "client/grammar.h"
#include "client/interrupt.h"
#include "common/address.h"
#include "common/tls.h"

#ifndef SANDGATE_VERSION
#define SANDGATE_VERSION "unknown"
#endif

namespace sandgate::cli {
namespace {

int Main(int argc, char** argv) {
  // The completion scripts' call (client/completion.h): before the parser, which would
  // refuse the half-typed words it is asked about.
  if (argc >= 2 && std::string(argv[1]) == "__complete") {
    for (const std::string& c :
         Complete(Grammar(), std::vector<std::string>(argv + 2, argv + argc))) {
      std::printf("%s\n", c.c_str());
    }
    return 0;
  }
  // Before anything else, while this is the only thread: every thread gRPC starts later
  // inherits the blocked signals, and the one waiting thread takes them (client/interrupt.h).
  Interrupt& interrupt = Interrupt::Install(kExitDetached);
  Args args;
  absl::Status parsed = ParseArgs(std::vector<std::string>(argv, argv + argc), Grammar(), &args);
  if (args.spec) CommandName() = args.command;
  if (!parsed.ok()) return Usage(std::string(parsed.message()));
  if (args.version) {
    std::printf("sandgate %s\n", SANDGATE_VERSION);
    return 0;
  }
  if (args.command.empty()) {
    std::fputs(UsageText(), args.help ? stdout : stderr);
    return args.help ? 0 : kExitUsage;
  }
  if (!args.spec) {
    std::string near = Nearest(args.command, CommandNames(""));
    return Usage(absl::StrCat("unknown command '", args.command, "'",
                              near.empty() ? "" : absl::StrCat("; did you mean '", near, "'?")));
  }
  if (args.help) {
    std::fputs(args.spec->usage.c_str(), stdout);
    return 0;
  }
  if (args.command == "completion") {
    std::string script = args.positional.size() == 1 ? CompletionScript(args.positional[0]) : "";
    if (script.empty()) return Usage("needs the shell: bash or zsh");
    std::fputs(script.c_str(), stdout);
    return 0;
  }
  if (args.command == "man") {
    if (!args.positional.empty()) return Usage("takes no arguments");
    std::fputs(ManPage(Grammar(), UsageText(), SANDGATE_VERSION).c_str(), stdout);
    return 0;
  }
  // "session" or "admin" without a subcommand it knows.
  std::vector<std::string> subcommands = CommandNames(args.command);
  if (!subcommands.empty()) {
    if (args.positional.empty()) {
      return Usage(absl::StrCat("needs a subcommand: ", absl::StrJoin(subcommands, ", ")));
    }
    std::string near = Nearest(args.positional[0], subcommands);
    return Usage(absl::StrCat("unknown subcommand '", args.positional[0], "'",
                              near.empty() ? "" : absl::StrCat("; did you mean '", near, "'?")));
  }

  // A flag, else its environment variable, else `def`; *from names where it came from.
  auto setting = [&](const std::string& flag, const char* env, const std::string& def,
                     std::string* from) {
    *from = flag;
    if (args.Has(flag)) return args.Get(flag);
    *from = env;
    const char* value = std::getenv(env);
    return value ? std::string(value) : def;
  };
  std::string addr_from;
  std::string addr_text =
      setting("--addr", "SANDGATE_ADDR", "unix:/run/sandgate/sandgated.sock", &addr_from);
  absl::StatusOr<std::vector<Address>> addrs = ParseAddresses(addr_text);
  if (!addrs.ok()) return Usage(absl::StrCat(addr_from, ": ", addrs.status().message()));
  std::string ignored;
  TlsFiles tls{setting("--tls-cert", "SANDGATE_TLS_CERT", "", &ignored),
               setting("--tls-key", "SANDGATE_TLS_KEY", "", &ignored),
               setting("--tls-ca", "SANDGATE_TLS_CA", "", &ignored)};
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = OpenChannel(*addrs, tls);
  if (!channel.ok()) return Usage(std::string(channel.status().message()));
  std::string token;
  if (args.Has("--token-file")) {
    auto t = ReadAll(args.Get("--token-file"));
    if (!t.ok()) return Usage(std::string(t.status().message()));
    token = std::string(absl::StripAsciiWhitespace(*t));
  } else if (const char* env_token = std::getenv("SANDGATE_TOKEN")) {
    token = env_token;
  }
  auto client = Client::Connect(*std::move(channel), token, &interrupt);
  const std::string& c = args.command;
  if (c == "run") return CmdRun(*client, args);
  if (c == "events") return CmdEvents(*client, args);
  if (c == "runs") return CmdRuns(*client, args);
  if (c == "get") return CmdGet(*client, args);
  if (c == "cancel") return CmdCancel(*client, args);
  if (c == "download") return CmdDownload(*client, args);
  if (absl::StartsWith(c, "session ")) return CmdSession(*client, c.substr(8), args);
  if (absl::StartsWith(c, "admin ")) return CmdAdmin(*client, c.substr(6), args);
  if (absl::StartsWith(c, "image ")) return CmdImage(*client, c.substr(6), args);
  if (absl::StartsWith(c, "snapshot ")) return CmdSnapshot(*client, c.substr(9), args);
  return Usage("unknown command");
}

}  // namespace
}  // namespace sandgate::cli

int main(int argc, char** argv) { return sandgate::cli::Main(argc, argv); }
