// UTF-8 checks for text that leaves the daemon in a proto3 `string` field or a gRPC status
// message. Such text must be valid UTF-8 (a peer's parser refuses the whole message
// otherwise), but names chosen by sandbox code are arbitrary bytes.
//
//   bool escaped = false;
//   info.set_path(EscapeInvalidUtf8(entry.path, &escaped));
//   info.set_path_escaped(escaped);
//
// Thread safe (pure functions).
#ifndef SANDGATE_COMMON_UTF8_H_
#define SANDGATE_COMMON_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace sandgate {

// Length of the valid UTF-8 sequence starting at text[i] (i < text.size()), or 0 when the
// bytes there are not one (overlong forms and surrogates included).
size_t Utf8SequenceLength(absl::string_view text, size_t i);

bool IsValidUtf8(absl::string_view text);

// `text` with each byte that is not part of a valid UTF-8 sequence written as \xNN (upper-
// case hex); valid text is returned unchanged. `escaped`, if given, is set when a byte was.
// The result is for people: it does not round-trip (a literal "\x41" is left as it is).
std::string EscapeInvalidUtf8(absl::string_view text, bool* escaped = nullptr);

}  // namespace sandgate

#endif  // SANDGATE_COMMON_UTF8_H_
