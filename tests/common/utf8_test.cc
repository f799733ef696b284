#include "common/utf8.h"

#include "gtest/gtest.h"

namespace sandgate {
namespace {

TEST(Utf8Test, ValidTextIsLeftAlone) {
  bool escaped = true;
  EXPECT_EQ(EscapeInvalidUtf8("caf\xC3\xA9 \xF0\x9F\x98\x80", &escaped),
            "caf\xC3\xA9 \xF0\x9F\x98\x80");
  EXPECT_FALSE(escaped);
  EXPECT_TRUE(IsValidUtf8(""));
}

TEST(Utf8Test, EachBadByteBecomesHex) {
  bool escaped = false;
  EXPECT_EQ(EscapeInvalidUtf8("caf\xE9-\xFF", &escaped), "caf\\xE9-\\xFF");
  EXPECT_TRUE(escaped);
  // Overlong, surrogate and truncated sequences are not UTF-8 either.
  EXPECT_EQ(EscapeInvalidUtf8("\xC0\xAF"), "\\xC0\\xAF");
  EXPECT_EQ(EscapeInvalidUtf8("\xED\xA0\x80"), "\\xED\\xA0\\x80");
  EXPECT_EQ(EscapeInvalidUtf8("ok\xE2\x82"), "ok\\xE2\\x82");
  EXPECT_TRUE(IsValidUtf8(EscapeInvalidUtf8("\x80\x81\xFE")));
}

}  // namespace
}  // namespace sandgate
