#include "client/completion.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/grammar.h"

namespace sandgate::cli {
namespace {

// What a command's positional arguments are, by position; "" = nothing to offer (an id, a
// command to run). Words are offered as they are; kCompleteFiles/kCompleteDirs ask the shell.
const std::map<std::string, std::vector<std::string>>& Positionals() {
  static const auto* const kPositionals = new std::map<std::string, std::vector<std::string>>{
      {"run", {kCompleteFiles}},
      {"session upload", {"", kCompleteFiles}},
      {"completion", {"bash zsh"}},
  };
  return *kPositionals;
}

// The values an option takes, when they are known here. The daemon's playbooks, agents and
// providers are not: the CLI knows no daemon names (tests/client/no_playbook_knowledge_test).
std::vector<std::string> OptionValues(const std::string& command, const std::string& option) {
  if (option == "--network") return {"disabled", "restricted", "enabled"};
  if (option == "--isolation") return {"namespaces", "gvisor"};
  if (option == "--image") return {"host"};
  if (option == "--out") return {command == "session download" ? kCompleteFiles : kCompleteDirs};
  if (option == "--token-file" || option == "--tls-ca" || option == "--tls-cert" ||
      option == "--tls-key") {
    return {kCompleteFiles};
  }
  return {};
}

const CommandSpec* Find(const ArgsGrammar& grammar, const std::string& name) {
  for (const CommandSpec& c : grammar.commands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// Keeps the words that start with `prefix`; the shell's markers pass as they are.
std::vector<std::string> Matching(const std::vector<std::string>& words,
                                  const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& w : words) {
    if (w == kCompleteFiles || w == kCompleteDirs || absl::StartsWith(w, prefix)) out.push_back(w);
  }
  return out;
}

bool TakesValue(const ArgsGrammar& grammar, const std::string& option) {
  auto it = grammar.arity.find(option);
  return it != grammar.arity.end() && it->second;
}

}  // namespace

std::vector<std::string> Complete(const ArgsGrammar& grammar,
                                  const std::vector<std::string>& words) {
  if (words.empty()) return {};
  const std::string& current = words.back();
  std::string command;         // the command's full name so far ("session", "session exec")
  size_t positional = 0;       // positional words after the command
  std::string pending_option;  // the previous word, an option still waiting for its value
  bool after_dashes = false;   // past "--": nothing is an option any more
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    const std::string& w = words[i];
    if (!pending_option.empty()) {
      pending_option.clear();
      continue;
    }
    if (!after_dashes && w == "--") {
      after_dashes = true;
      continue;
    }
    if (!after_dashes && absl::StartsWith(w, "-")) {
      if (!absl::StrContains(w, '=') && TakesValue(grammar, w)) pending_option = w;
      continue;
    }
    if (command.empty()) {
      command = w;
    } else if (positional == 0 && Find(grammar, absl::StrCat(command, " ", w)) != nullptr) {
      command = absl::StrCat(command, " ", w);
    } else {
      ++positional;
    }
  }
  const CommandSpec* spec = command.empty() ? nullptr : Find(grammar, command);

  if (!pending_option.empty()) return Matching(OptionValues(command, pending_option), current);
  if (!after_dashes && absl::StartsWith(current, "--") && absl::StrContains(current, '=')) {
    // --out=DI: the value of an option written in one word.
    std::vector<std::string> parts = absl::StrSplit(current, absl::MaxSplits('=', 1));
    std::vector<std::string> values;
    for (const std::string& v : OptionValues(command, parts[0])) {
      values.push_back(v == kCompleteFiles || v == kCompleteDirs ? v : parts[0] + "=" + v);
    }
    return Matching(values, current);
  }
  if (!after_dashes && absl::StartsWith(current, "-")) {
    std::vector<std::string> options;
    if (spec != nullptr) options = spec->options;
    options.insert(options.end(), grammar.global_options.begin(), grammar.global_options.end());
    options.push_back("--help");
    if (spec == nullptr) options.push_back("--version");
    return Matching(options, current);
  }
  if (command.empty()) return Matching(CommandNames(""), current);
  if (spec == nullptr) return {};
  std::vector<std::string> subcommands = CommandNames(command);
  if (!subcommands.empty()) return Matching(subcommands, current);
  auto it = Positionals().find(command);
  if (it == Positionals().end() || positional >= it->second.size()) return {};
  return Matching(absl::StrSplit(it->second[positional], ' ', absl::SkipEmpty()), current);
}

std::string CompletionScript(const std::string& shell) {
  // Both scripts call the very binary being completed (the first word), so a build tree's
  // ./build/bin/sandgate completes with its own grammar. bash splits words at ':' and '='
  // (COMP_WORDBREAKS); bash-completion's _get_comp_words_by_ref undoes that when present.
  if (shell == "bash") {
    return R"(# bash completion for sandgate; generated by `sandgate completion bash`.
# Install: sandgate completion bash > /etc/bash_completion.d/sandgate
#      or: source <(sandgate completion bash)
_sandgate() {
  local cur words cword
  if declare -F _get_comp_words_by_ref >/dev/null; then
    _get_comp_words_by_ref -n =: cur words cword
  else
    cur=${COMP_WORDS[COMP_CWORD]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
  fi
  local IFS=$'\n' out
  out=$("${words[0]}" __complete "${words[@]:1:cword}" 2>/dev/null) || return 0
  case "$out" in
    :file) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
    :dir) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")) ;;
    *) COMPREPLY=($out) ;;
  esac
  if declare -F __ltrim_colon_completions >/dev/null; then __ltrim_colon_completions "$cur"; fi
  return 0
}
complete -F _sandgate sandgate
)";
  }
  if (shell == "zsh") {
    return R"(#compdef sandgate
# zsh completion for sandgate; generated by `sandgate completion zsh`.
# Install: sandgate completion zsh > "${fpath[1]}/_sandgate"
#      or: source <(sandgate completion zsh)   (after compinit)
_sandgate() {
  local -a out
  out=("${(@f)$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  case "${out[1]}" in
    :file) _files ;;
    :dir) _files -/ ;;
    *) (( ${#out} )) && [[ -n "${out[1]}" ]] && compadd -Q -- "${out[@]}" ;;
  esac
}
if [[ "${funcstack[1]}" == "_sandgate" ]]; then
  _sandgate "$@"
else
  compdef _sandgate sandgate
fi
)";
  }
  return "";
}

namespace {

// Preformatted text as roff: backslashes and leading control characters escaped, '-' as a
// minus sign so options copy and paste as typed.
std::string RoffBlock(absl::string_view text) {
  std::string out = ".nf\n";
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::string l = absl::StrReplaceAll(line, {{"\\", "\\e"}, {"-", "\\-"}});
    if (!l.empty() && (l[0] == '.' || l[0] == '\'')) l = "\\&" + l;
    absl::StrAppend(&out, l, "\n");
  }
  absl::StrAppend(&out, ".fi\n");
  return out;
}

// A command's --help without the global options every one of them repeats.
absl::string_view WithoutGlobalUsage(absl::string_view usage) {
  size_t at = usage.find("\nglobal options:");
  return absl::StripSuffix(usage.substr(0, at), "\n");
}

}  // namespace

std::string ManPage(const ArgsGrammar& grammar, const std::string& usage,
                    const std::string& version) {
  std::string out = absl::StrCat(
      ".\\\" Generated by `sandgate man` from the CLI's grammar; do not edit.\n",
      ".TH SANDGATE 1 \"\" \"sandgate ", version, "\" \"User Commands\"\n",
      ".SH NAME\nsandgate \\- the command\\-line client of sandgated, the sandbox gateway\n",
      ".SH SYNOPSIS\n", RoffBlock(WithoutGlobalUsage(usage)), ".SH COMMANDS\n",
      "Every command answers \\fB\\-\\-help\\fR with the text below.\n");
  for (const CommandSpec& c : grammar.commands) {
    absl::StrAppend(&out, ".SS ", c.name, "\n", RoffBlock(WithoutGlobalUsage(c.usage)));
  }
  absl::StrAppend(
      &out, ".SH SHELL COMPLETION\n",
      RoffBlock("source <(sandgate completion bash)    # or zsh; see sandgate completion --help"),
      ".SH SEE ALSO\n\\fBsandgated\\fR(8), /usr/share/doc/sandgate/README.md\n");
  return out;
}

}  // namespace sandgate::cli
