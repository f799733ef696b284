#include "client/terminal_text.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace sandgate::cli {
namespace {

// The length of the valid UTF-8 sequence at the start of `s` and its code point, or 0 when
// the first byte does not start one (overlong forms, surrogates and values past U+10FFFF
// are not valid).
size_t DecodeUtf8(absl::string_view s, uint32_t* cp) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  uint8_t c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  if (c >= 0xC2 && c <= 0xDF && cont(1)) {
    *cp = ((c & 0x1Fu) << 6) | (b(1) & 0x3Fu);
    return 2;
  }
  if (c >= 0xE0 && c <= 0xEF && cont(1) && cont(2)) {
    *cp = ((c & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    if (*cp < 0x800 || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4 && cont(1) && cont(2) && cont(3)) {
    *cp = ((c & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    if (*cp < 0x10000 || *cp > 0x10FFFF) return 0;
    return 4;
  }
  return 0;
}

// A code point at or above DEL that a terminal acts on or that reorders the line.
bool IsActiveAboveAscii(uint32_t cp) {
  return cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) ||  // DEL, C1 (0x9b is CSI)
         cp == 0x2028 || cp == 0x2029 ||              // line and paragraph separators
         (cp >= 0x202A && cp <= 0x202E) ||            // bidi embeddings and overrides
         (cp >= 0x2066 && cp <= 0x2069);              // bidi isolates
}

// Rewrites `text` one character at a time: `escape(cp, &out)` appends a replacement for a
// valid UTF-8 character and returns true, or returns false to keep its bytes;
// `invalid(byte, &out)` replaces a byte that starts no valid sequence.
template <typename Escape, typename Invalid>
std::string Rewrite(absl::string_view text, Escape escape, Invalid invalid) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t n = DecodeUtf8(text.substr(i), &cp);
    if (n == 0) {
      invalid(static_cast<uint8_t>(text[i]), &out);
      n = 1;
    } else if (!escape(cp, &out)) {
      out.append(text.data() + i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace

std::string TerminalSafe(absl::string_view text) {
  return Rewrite(
      text,
      [](uint32_t cp, std::string* out) {
        if (cp == '\n') {
          *out += "\\n";
        } else if (cp == '\r') {
          *out += "\\r";
        } else if (cp == '\t') {
          *out += "\\t";
        } else if (cp < 0x20 || cp == 0x7F) {
          absl::StrAppendFormat(out, "\\x%02x", cp);
        } else if (IsActiveAboveAscii(cp)) {
          absl::StrAppendFormat(out, "\\u%04x", cp);
        } else {
          return false;
        }
        return true;
      },
      [](uint8_t byte, std::string* out) { absl::StrAppendFormat(out, "\\x%02x", byte); });
}

std::string TerminalSafeJson(absl::string_view json) {
  return Rewrite(
      json,
      [](uint32_t cp, std::string* out) {
        // Tab, newline and return can only be whitespace between tokens here (a serializer
        // escapes them inside strings), where \uXXXX would not be JSON.
        bool whitespace = cp == '\t' || cp == '\n' || cp == '\r';
        if ((cp >= 0x20 || whitespace) && !IsActiveAboveAscii(cp)) return false;
        absl::StrAppendFormat(out, "\\u%04x", cp);
        return true;
      },
      // Not from a JSON serializer (which writes valid UTF-8): shown as the replacement
      // character, never passed on raw.
      [](uint8_t, std::string* out) { *out += "\\ufffd"; });
}

}  // namespace sandgate::cli
