// Shell completion and the man page, generated from the same grammar as --help
// (client/grammar.h), so the three cannot disagree.
//
// Completion is computed here, not in shell code: the scripts that `sandgate completion bash`
// and `sandgate completion zsh` print only pass the words typed so far to the hidden command
// `sandgate __complete WORD...` and hand its answer to the shell. One implementation, tested
// in C++, serves both shells (the approach of cobra's and clap's dynamic completions).
//
//   Complete(Grammar(), {"session", "ex"})  -> {"exec"}
//   Complete(Grammar(), {"run", "--netw"})  -> {"--network"}
//   Complete(Grammar(), {"run", ""})        -> {":file"}   (the shell completes file names)
//
// Plain functions; thread safe.
#ifndef SANDGATE_CLIENT_COMPLETION_H_
#define SANDGATE_CLIENT_COMPLETION_H_

#include <string>
#include <vector>

#include "client/args.h"

namespace sandgate::cli {

// Answers of Complete that are not words: the shell completes file or directory names.
inline constexpr char kCompleteFiles[] = ":file";
inline constexpr char kCompleteDirs[] = ":dir";

// The candidates for the last of `words` (the words after "sandgate", the last one being
// the word under the cursor, possibly empty), filtered by it as a prefix, in grammar order.
// Nothing is fetched from the daemon: run and session ids are not completed.
std::vector<std::string> Complete(const ArgsGrammar& grammar,
                                  const std::vector<std::string>& words);

// The scripts `sandgate completion bash|zsh` prints; empty for another shell.
std::string CompletionScript(const std::string& shell);

// sandgate(1) in roff (man -l): the top-level usage, every command's --help, the
// environment and the exit codes.
std::string ManPage(const ArgsGrammar& grammar, const std::string& usage,
                    const std::string& version);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_COMPLETION_H_
