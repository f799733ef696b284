#include "client/terminal_text.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace sandgate::cli {
namespace {

TEST(TerminalSafeTest, EscapeSequencesAndFakeLinesAreShownNotObeyed) {
  // Retitles the terminal, clears the screen, then fakes a line of the CLI's own.
  EXPECT_EQ(TerminalSafe("evil\x1b]0;pwned\x07\x1b[2J\nrun SUCCEEDED\r"),
            "evil\\x1b]0;pwned\\x07\\x1b[2J\\nrun SUCCEEDED\\r");
  EXPECT_EQ(TerminalSafe(std::string("a\0b\tc\x7f", 6)), "a\\x00b\\tc\\x7f");
}

TEST(TerminalSafeTest, C1ControlsBidiOverridesAndBrokenUtf8) {
  EXPECT_EQ(TerminalSafe("\xc2\x9b"
                         "31m"),
            "\\u009b31m");  // U+009B is CSI
  EXPECT_EQ(TerminalSafe("\x9b"
                         "31m"),
            "\\x9b31m");  // CSI in a legacy encoding
  EXPECT_EQ(TerminalSafe("txt.\xe2\x80\xae"
                         "exe"),
            "txt.\\u202eexe");
  EXPECT_EQ(TerminalSafe("a\xe2\x80\xa8"
                         "b"),
            "a\\u2028b");
  EXPECT_EQ(TerminalSafe("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate is not UTF-8
  EXPECT_EQ(TerminalSafe("\xc0\xaf"), "\\xc0\\xaf");           // nor an overlong '/'
}

TEST(TerminalSafeTest, PrintableTextIsUnchanged) {
  for (const char* text : {"calculated_metrics.csv", "Umsatz für 2025 — 13,8 %", "日本語",
                           "emoji 🙂", "back\\slash", "x\\x1b (already escaped by the daemon)"}) {
    EXPECT_EQ(TerminalSafe(text), text);
  }
}

TEST(TerminalSafeJsonTest, StaysTheSameJsonWithoutActiveCharacters) {
  nlohmann::json doc = {{"name",
                         "a\x7f"
                         "b\xc2\x9b"
                         "c\xe2\x80\xae"
                         "d"},
                        {"n", 1}};
  std::string raw = doc.dump();  // nlohmann leaves DEL, C1 and U+202E raw
  std::string safe = TerminalSafeJson(raw);
  EXPECT_EQ(safe.find('\x7f'), std::string::npos);
  EXPECT_EQ(safe.find("\xc2\x9b"), std::string::npos);
  EXPECT_EQ(safe.find("\xe2\x80\xae"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(safe), doc);
  EXPECT_EQ(TerminalSafeJson("{\"a\": 1}\n"), "{\"a\": 1}\n");
}

}  // namespace
}  // namespace sandgate::cli
