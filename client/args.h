// The CLI's command line: which options each command takes, --help for every command, and
// a suggestion for a mistyped option.
//
//   const CommandSpec kRun = {"run", "usage: sandgate run FILE ...", {"--out", "--json"}};
//   Args args;
//   absl::Status parsed = ParseArgs(argv_vector, grammar, &args);
//   // "sandgate run --tiemout 5" -> INVALID_ARGUMENT
//   //   "unknown option --tiemout; did you mean --timeout?"
//
// Plain functions and values; thread safe.
#ifndef SANDGATE_CLIENT_ARGS_H_
#define SANDGATE_CLIENT_ARGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sandgate::cli {

// A command ("run") or a command with its subcommand ("session exec").
struct CommandSpec {
  std::string name;
  std::string usage;                 // printed by --help, to stdout
  std::vector<std::string> options;  // the options it takes besides the global ones
};

struct Args {
  std::string command;                  // "run", "session exec"; empty when none was given
  const CommandSpec* spec = nullptr;    // the command's, when it is known
  std::vector<std::string> positional;  // after the command word(s)
  std::multimap<std::string, std::string> options;  // --name -> value ("" for switches)
  bool help = false;                                // --help or -h was given
  bool version = false;                             // --version was given

  bool Has(const std::string& name) const { return options.count(name) > 0; }
  // The last value given for `name`, or `def`.
  std::string Get(const std::string& name, const std::string& def = "") const;
  std::vector<std::string> All(const std::string& name) const;
};

struct ArgsGrammar {
  // Every option any command takes: true when it takes a value (as the next argument or
  // after '='), false for a switch. An option means the same in every command.
  std::map<std::string, bool> arity;
  std::vector<std::string> global_options;  // taken by every command ("--addr")
  // Commands with subcommands ("session") are listed by their full names ("session exec");
  // the parser takes the second word as the subcommand when "first second" is listed.
  std::vector<CommandSpec> commands;
};

// Parses argv[1..] into *args. Everything after "--" is positional. INVALID_ARGUMENT for an
// unknown option (with the nearest one this command takes, when one is close), an option
// this command does not take, or a missing value; *args then still names the command, for
// the message. An unknown command is not an error here: the caller says so with the list of
// commands. With --help or --version the other checks are skipped, so that
// `sandgate run --tiemout --help` still shows help.
absl::Status ParseArgs(const std::vector<std::string>& argv, const ArgsGrammar& grammar,
                       Args* args);

// The candidate nearest to `typed` by edit distance (a swap of two neighbours counts as
// one edit), when it is close enough to be a typo; empty otherwise.
std::string Nearest(absl::string_view typed, const std::vector<std::string>& candidates);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_ARGS_H_
