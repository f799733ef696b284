// Text helpers for messages built from untrusted bytes (input cells, artifact contents).
//
// Check details and error messages travel in protobuf strings and JSON log lines, which must
// be valid UTF-8; Excerpt makes any bytes safe to put there.
//
// Thread safe: pure functions.
#ifndef SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_TEXT_H_
#define SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace sandgate::playbooks::financial {

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points past
// U+10FFFF).
bool IsValidUtf8(absl::string_view text);

// At most `max_bytes` of `text` (then "..."), cut on a character boundary, with invalid UTF-8
// bytes replaced by U+FFFD and control characters written as \n, \t or \xNN.
std::string Excerpt(absl::string_view text, size_t max_bytes = 60);

}  // namespace sandgate::playbooks::financial

#endif  // SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_TEXT_H_
