#include "client/render.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace sandgate::cli {
namespace {

v1::Event Output(uint32_t command, const std::string& data) {
  v1::Event e;
  e.set_seq(1);
  e.mutable_command_output()->set_command_id(command);
  e.mutable_command_output()->set_data(data);
  return e;
}

v1::Event Finished(uint32_t command) {
  v1::Event e;
  e.set_seq(2);
  e.mutable_command_finished()->set_command_id(command);
  return e;
}

TEST(ProgressPrinterTest, OutputIsShownLineByLineAsItArrives) {
  ProgressPrinter p(stdout);
  EXPECT_EQ(p.Render(Output(1, "tick-1\n")), "    │ tick-1\n");
  EXPECT_EQ(p.Render(Output(1, "tick-")), "") << "half a line waits for its end";
  EXPECT_EQ(p.Render(Output(1, "2\r\ntick-3\n")), "    │ tick-2\n    │ tick-3\n");
  EXPECT_EQ(p.Render(Output(1, "no newline at the end")), "");
  EXPECT_EQ(p.Render(Finished(1)), "    │ no newline at the end\n    ok exit 0 in 0.00s\n");
}

TEST(ProgressPrinterTest, ALongOutputShowsItsStartLiveAndItsTailAtTheEnd) {
  ProgressPrinter p(stdout);
  std::string all;
  for (int i = 1; i <= 100; ++i) all += p.Render(Output(1, absl::StrCat("line ", i, "\n")));
  EXPECT_TRUE(absl::StrContains(all, "│ line 20\n"));
  EXPECT_FALSE(absl::StrContains(all, "│ line 21\n"));
  std::string end = p.Render(Finished(1));
  EXPECT_TRUE(absl::StartsWith(end, "    │ … 72 more lines\n    │ line 93\n")) << end;
  EXPECT_TRUE(absl::StrContains(end, "│ line 100\n")) << end;
}

TEST(ProgressPrinterTest, TextFromTheSandboxIsEscaped) {
  ProgressPrinter p(stdout);
  EXPECT_EQ(p.Render(Output(1, "\x1b]0;pwned\x07title\n")), "    │ \\x1b]0;pwned\\x07title\n");
  v1::Event artifact;
  artifact.mutable_artifact_collected()->mutable_artifact()->set_name("x\nrun SUCCEEDED");
  EXPECT_TRUE(absl::StrContains(p.Render(artifact), "x\\nrun SUCCEEDED")) << p.Render(artifact);
  v1::Event notice;
  notice.mutable_notice()->set_message("\x1b[2Jcleared");
  EXPECT_EQ(p.Render(notice), "  ! \\x1b[2Jcleared\n");
  v1::Event message;
  message.mutable_agent_message()->set_role("assistant");
  message.mutable_agent_message()->set_text("first\nrun SUCCEEDED");
  EXPECT_EQ(p.Render(message), "  [assistant] first\n    run SUCCEEDED\n")
      << "an indented line, not the CLI's";
}

TEST(ProgressPrinterTest, EventsThatShowNothingRenderNothing) {
  ProgressPrinter p(stdout);
  v1::Event heartbeat;
  heartbeat.mutable_heartbeat();
  EXPECT_EQ(p.Render(heartbeat), "");
  v1::Event step;
  step.mutable_step_finished()->set_ok(true);
  EXPECT_EQ(p.Render(step), "");
}

TEST(ToJsonTest, IsTerminalSafe) {
  v1::Notice n;
  n.set_message("a\x1b[2J\xc2\x9b");
  std::string json = ToJson(n);
  EXPECT_EQ(json.find('\x1b'), std::string::npos) << json;
  EXPECT_EQ(json.find("\xc2\x9b"), std::string::npos) << json;
}

v1::Event Started(std::vector<std::string> argv) {
  v1::Event e;
  e.set_seq(1);
  for (std::string& a : argv) e.mutable_command_started()->add_argv(std::move(a));
  return e;
}

TEST(ProgressPrinterTest, ACommandShowsAsAShellWouldTakeItBack) {
  ProgressPrinter p(stdout);
  // A setup command is one word of `sh -c`: unquoted, "sleep 60" read as two.
  EXPECT_EQ(p.Render(Started({"sh", "-c", "sleep 60"})), "  $ sh -c 'sleep 60'\n");
  EXPECT_EQ(p.Render(Started({"python3", "calc.py", "--out=a/b.csv"})),
            "  $ python3 calc.py --out=a/b.csv\n")
      << "plain words stay bare";
  EXPECT_EQ(p.Render(Started({"sh", "-c", "echo it's $HOME", ""})),
            "  $ sh -c 'echo it'\\''s $HOME' ''\n");
  EXPECT_EQ(p.Render(Started({"sh", "-c", "cat <<EOF\nx\nEOF"})), "  $ sh -c 'cat <<EOF …\n")
      << "a program in a heredoc: its first line";
}

TEST(RenderSessionListTest, AHeaderAndALineASessionOrSaysThereIsNone) {
  v1::ListSessionsResponse list;
  EXPECT_EQ(RenderSessionList(list, false),
            "no active sessions (--all shows closed and expired ones)\n");
  EXPECT_EQ(RenderSessionList(list, true), "no sessions\n");
  v1::Session* s = list.add_sessions();
  s->set_id("s-1");
  s->set_status(v1::SESSION_STATUS_ACTIVE);
  s->set_provider("local");
  s->set_in_flight(2);
  std::string out = RenderSessionList(list, false);
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << out;
  EXPECT_TRUE(absl::StartsWith(lines[0], "SESSION ")) << out;
  EXPECT_TRUE(absl::StrContains(lines[0], "IN FLIGHT")) << out;
  EXPECT_TRUE(absl::StartsWith(lines[1], "s-1 ")) << out;
  EXPECT_TRUE(absl::StrContains(lines[1], "local")) << out;
  EXPECT_TRUE(absl::EndsWith(lines[1], " 2")) << out;
}

}  // namespace
}  // namespace sandgate::cli
