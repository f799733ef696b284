// The CLI's command line: every command with its options and --help text, for ParseArgs
// (client/args.h), and the top-level usage.
//
//   Args args;
//   absl::Status parsed = ParseArgs(argv_vector, Grammar(), &args);
//
// Constant after first use; thread safe.
#ifndef SANDGATE_CLIENT_GRAMMAR_H_
#define SANDGATE_CLIENT_GRAMMAR_H_

#include <string>
#include <vector>

#include "client/args.h"

namespace sandgate::cli {

// `sandgate --help`.
const char* UsageText();

const ArgsGrammar& Grammar();

// The sandbox options ("--env", "--setup", ...) that `run` and `session create` take.
const std::vector<std::string>& SandboxFlags();

// The top-level commands (group empty), or the subcommands of `group` ("session").
std::vector<std::string> CommandNames(const std::string& group);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_GRAMMAR_H_
