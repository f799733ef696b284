// Text from elsewhere made safe to show on a terminal.
//
// Names from a sandbox (ls, artifacts, uploads), cells of CSV files an agent wrote, and any
// text the daemon relays (reasons, notices, model messages, command output lines shown in
// progress) can carry control characters: ESC sequences retitle or clear the terminal, a
// newline or carriage return fakes a line of the CLI's own. Everything the CLI prints for a
// person goes through TerminalSafe; its JSON output goes through TerminalSafeJson. The one
// place raw bytes are right is `session exec`, whose output is the command's own stdout and
// stderr, passed through as `ssh host cmd` would (and `session download`, which writes a file).
//
//   absl::PrintF("%s\n", TerminalSafe(file.path()));   // "evil\x1b]0;pwned\x07" stays one line
//
// Plain functions; thread safe.
#ifndef SANDGATE_CLIENT_TERMINAL_TEXT_H_
#define SANDGATE_CLIENT_TERMINAL_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace sandgate::cli {

// Escapes what a terminal would act on instead of showing: C0 controls (\n \r \t by name,
// the rest as \xNN, ESC as \x1b), DEL (\x7f), C1 controls U+0080..U+009F (\u009b), the
// Unicode line separators and bidirectional overrides that reorder or split what is shown
// (\u202e), and each byte that is not part of valid UTF-8 (\xNN: a terminal in a legacy
// encoding would take 0x9b for CSI). Everything else, backslashes included, is unchanged:
// the result is for reading, not for naming the file again.
std::string TerminalSafe(absl::string_view text);

// For one line of JSON (a serializer's output, which already escapes C0 inside strings):
// the same characters as TerminalSafe, written as JSON \uXXXX escapes so the line stays
// valid JSON with the same meaning.
std::string TerminalSafeJson(absl::string_view json);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_TERMINAL_TEXT_H_
