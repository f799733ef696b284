#include "client/args.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace sandgate::cli {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions, and swaps of
// two neighbours ("tiemout" -> "timeout") each count one.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

const CommandSpec* FindCommand(const ArgsGrammar& g, const std::string& name) {
  for (const CommandSpec& c : g.commands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace

std::string Args::Get(const std::string& name, const std::string& def) const {
  auto range = options.equal_range(name);
  return range.first == range.second ? def : std::prev(range.second)->second;
}

std::vector<std::string> Args::All(const std::string& name) const {
  std::vector<std::string> values;
  for (auto [it, end] = options.equal_range(name); it != end; ++it) values.push_back(it->second);
  return values;
}

std::string Nearest(absl::string_view typed, const std::vector<std::string>& candidates) {
  absl::string_view bare = absl::StripPrefix(typed, "--");
  // Short names differ by little: "--out" and "--all" are two edits apart and unrelated.
  size_t limit = bare.size() <= 4 ? 1 : bare.size() <= 8 ? 2 : 3;
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(bare, absl::StripPrefix(c, "--"));
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

absl::Status ParseArgs(const std::vector<std::string>& argv, const ArgsGrammar& grammar,
                       Args* out) {
  *out = Args();
  Args& args = *out;
  std::vector<std::string> words;
  std::vector<std::string> unknown;
  std::string first_error;
  bool options_done = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (options_done || (!absl::StartsWith(a, "--") && a != "-h")) {  // "-la" is a word
      words.push_back(a);
    } else if (a == "--") {
      options_done = true;
    } else if (a == "--help" || a == "-h") {
      args.help = true;
    } else if (a == "--version") {
      args.version = true;
    } else {
      size_t eq = a.find('=');
      std::string name = a.substr(0, eq);
      auto it = grammar.arity.find(name);
      if (it == grammar.arity.end()) {
        unknown.push_back(name);
      } else if (!it->second) {
        if (eq != std::string::npos && first_error.empty()) first_error = name + " takes no value";
        args.options.emplace(name, "");
      } else if (eq != std::string::npos) {
        args.options.emplace(name, a.substr(eq + 1));
      } else if (i + 1 < argv.size()) {
        args.options.emplace(name, argv[++i]);
      } else if (first_error.empty()) {
        first_error = name + " needs a value";
      }
    }
  }
  size_t used = 0;
  if (words.size() >= 2 && (args.spec = FindCommand(grammar, words[0] + " " + words[1]))) {
    used = 2;
  } else if (!words.empty()) {
    args.spec = FindCommand(grammar, words[0]);
    used = 1;
  }
  if (used > 0) args.command = args.spec ? args.spec->name : words[0];
  args.positional.assign(words.begin() + static_cast<std::ptrdiff_t>(used), words.end());
  if (args.help || args.version) return absl::OkStatus();

  std::vector<std::string> allowed = grammar.global_options;
  if (args.spec)
    allowed.insert(allowed.end(), args.spec->options.begin(), args.spec->options.end());
  for (const std::string& name : unknown) {
    std::vector<std::string> candidates = allowed;
    if (!args.spec) {
      for (const auto& [option, takes_value] : grammar.arity) candidates.push_back(option);
    }
    std::string near = Nearest(name, candidates);
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown option ", name, near.empty() ? "" : absl::StrCat("; did you mean ", near, "?")));
  }
  if (!first_error.empty()) return absl::InvalidArgumentError(first_error);
  if (args.spec) {
    for (const auto& [name, value] : args.options) {
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        // The caller names the command and where its options are (Usage in command.cc).
        return absl::InvalidArgumentError(absl::StrCat("does not take ", name));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace sandgate::cli
