#include "upstream/sse.h"

#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandgate::upstream {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<SseEvent> ParseChunks(const std::vector<absl::string_view>& chunks) {
  SseParser parser;
  std::vector<SseEvent> events;
  for (absl::string_view c : chunks) EXPECT_TRUE(parser.Feed(c, &events).ok());
  EXPECT_TRUE(parser.Finish(&events).ok());
  return events;
}

std::vector<SseEvent> ParseWhole(absl::string_view stream) { return ParseChunks({stream}); }

// A Responses-style stream with every feature that can be split badly: comments, a BOM,
// multi-line data, ids, an event without data, an empty data line, [DONE], and a last event
// without its blank line.
constexpr absl::string_view kStream =
    "\xEF\xBB\xBF: keep-alive comment\n"
    "event: response.created\n"
    "id: 1\n"
    "data: {\"type\":\"response.created\",\"sequence_number\":0}\n"
    "\n"
    ":another comment\n"
    "event: response.output_text.delta\n"
    "data: {\"delta\":\"Hel\",\n"
    "data:  \"x\":1}\n"
    "retry: 3000\n"
    "unknown-field: ignored\n"
    "\n"
    "\n"
    "event: ping\n"
    "\n"
    "data\n"
    "\n"
    "id: 7\n"
    "data: [DONE]\n"
    "\n"
    "event: tail\n"
    "data: no trailing blank line";

std::vector<SseEvent> Expected() {
  return {
      {"response.created", "{\"type\":\"response.created\",\"sequence_number\":0}", "1"},
      {"response.output_text.delta", "{\"delta\":\"Hel\",\n \"x\":1}", "1"},
      {"ping", "", "1"},
      {"", "", "1"},
      {"", "[DONE]", "7"},
      {"tail", "no trailing blank line", "7"},
  };
}

std::string WithLineEnds(absl::string_view stream, absl::string_view eol) {
  return absl::StrReplaceAll(stream, {{"\n", eol}});
}

TEST(SseParserTest, ParsesWholeStream) { EXPECT_EQ(ParseWhole(kStream), Expected()); }

TEST(SseParserTest, DoneSentinelIsRecognised) {
  std::vector<SseEvent> events = ParseWhole(kStream);
  ASSERT_EQ(events.size(), 6u);
  EXPECT_FALSE(events[0].IsDone());
  EXPECT_TRUE(events[4].IsDone());
}

class SseSplitTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SseSplitTest, ByteByByteGivesTheSameEvents) {
  const std::string stream = WithLineEnds(kStream, GetParam());
  std::vector<absl::string_view> chunks;
  for (size_t i = 0; i < stream.size(); ++i)
    chunks.push_back(absl::string_view(stream).substr(i, 1));
  EXPECT_EQ(ParseChunks(chunks), Expected());
}

TEST_P(SseSplitTest, EveryTwoWaySplitGivesTheSameEvents) {
  const std::string stream = WithLineEnds(kStream, GetParam());
  const absl::string_view s = stream;
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    ASSERT_EQ(ParseChunks({s.substr(0, cut), s.substr(cut)}), Expected()) << "cut at " << cut;
  }
}

TEST_P(SseSplitTest, EveryThreeWaySplitOfAShortStreamGivesTheSameEvents) {
  const std::string stream =
      WithLineEnds("event: a\ndata: 1\ndata: 2\n\n:c\ndata: [DONE]\n\n", GetParam());
  const std::vector<SseEvent> expected = {{"a", "1\n2", ""}, {"", "[DONE]", ""}};
  const absl::string_view s = stream;
  for (size_t i = 0; i <= s.size(); ++i) {
    for (size_t j = i; j <= s.size(); ++j) {
      ASSERT_EQ(ParseChunks({s.substr(0, i), s.substr(i, j - i), s.substr(j)}), expected)
          << "cuts at " << i << "," << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LineEnds, SseSplitTest, ::testing::Values("\n", "\r\n", "\r"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "\n"     ? std::string("LF")
                                  : std::string(info.param) == "\r\n" ? std::string("CRLF")
                                                                      : std::string("CR");
                         });

TEST(SseParserTest, MixedLineEndsInOneStream) {
  EXPECT_THAT(
      ParseWhole("data: a\r\ndata: b\rdata: c\n\r\nevent: x\r\rdata: y\n\n"),
      ElementsAre(SseEvent{"", "a\nb\nc", ""}, SseEvent{"x", "", ""}, SseEvent{"", "y", ""}));
}

TEST(SseParserTest, CrAtChunkEndFollowedByLfIsOneLineEnd) {
  // "\r" ends a chunk and "\n" starts the next: one line end, not a blank line between.
  EXPECT_THAT(ParseChunks({"data: a\r", "\ndata: b\r", "\n\r", "\n"}),
              ElementsAre(SseEvent{"", "a\nb", ""}));
}

TEST(SseParserTest, FieldValueKeepsAllButOneLeadingSpace) {
  EXPECT_THAT(
      ParseWhole("data:no-space\n\ndata:  two\n\ndata: a:b\n\n"),
      ElementsAre(SseEvent{"", "no-space", ""}, SseEvent{"", " two", ""}, SseEvent{"", "a:b", ""}));
}

TEST(SseParserTest, CommentsAndBlankLinesAloneDispatchNothing) {
  EXPECT_THAT(ParseWhole(": one\n\n\n:two\r\n\r\n"), IsEmpty());
}

TEST(SseParserTest, FinishWithoutPendingEventAddsNothing) {
  SseParser parser;
  std::vector<SseEvent> events;
  ASSERT_TRUE(parser.Feed("data: x\n\n", &events).ok());
  ASSERT_TRUE(parser.Finish(&events).ok());
  EXPECT_THAT(events, ElementsAre(SseEvent{"", "x", ""}));
}

TEST(SseParserTest, FinishDispatchesAnUnterminatedLastLine) {
  EXPECT_THAT(ParseWhole("data: {\"a\":1}"), ElementsAre(SseEvent{"", "{\"a\":1}", ""}));
  EXPECT_THAT(ParseWhole("data: {\"a\":1}\n"), ElementsAre(SseEvent{"", "{\"a\":1}", ""}));
}

TEST(SseParserTest, OversizedEventIsRefused) {
  SseParser parser(/*max_event_bytes=*/16);
  std::vector<SseEvent> events;
  EXPECT_EQ(parser.Feed("data: 0123456789\ndata: 0123456789\n", &events).code(),
            absl::StatusCode::kResourceExhausted);
  SseParser line_parser(/*max_event_bytes=*/16);
  EXPECT_EQ(line_parser.Feed(std::string(32, 'x'), &events).code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace sandgate::upstream
