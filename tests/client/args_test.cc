#include "client/args.h"

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace sandgate::cli {
namespace {

ArgsGrammar TestGrammar() {
  return ArgsGrammar{{{"--timeout", true},
                      {"--json", false},
                      {"--out", true},
                      {"--all", false},
                      {"--addr", true},
                      {"--follow", false}},
                     {"--addr"},
                     {{"run", "usage: run", {"--timeout", "--json", "--out"}},
                      {"runs", "usage: runs", {"--json"}},
                      {"session", "usage: session", {}},
                      {"session list", "usage: session list", {"--all"}}}};
}

// The parsed arguments, or the error.
absl::StatusOr<Args> Parse(std::vector<std::string> argv) {
  argv.insert(argv.begin(), "sandgate");
  Args args;
  absl::Status st = ParseArgs(argv, TestGrammar(), &args);
  if (!st.ok()) return st;
  return args;
}

TEST(ArgsTest, AMistypedOptionSuggestsTheNearestOneOfThatCommand) {
  absl::StatusOr<Args> a = Parse({"run", "x.csv", "--tiemout", "5"});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "unknown option --tiemout; did you mean --timeout?");
  a = Parse({"run", "--jsno"});
  EXPECT_EQ(a.status().message(), "unknown option --jsno; did you mean --json?");
  a = Parse({"run", "--completely-else"});
  EXPECT_EQ(a.status().message(), "unknown option --completely-else");
  Args args;
  EXPECT_FALSE(ParseArgs({"sandgate", "session", "list", "--al"}, TestGrammar(), &args).ok());
  EXPECT_EQ(args.command, "session list") << "the message can name the command";
}

TEST(ArgsTest, AnOptionOfAnotherCommandIsRefusedByName) {
  absl::StatusOr<Args> a = Parse({"runs", "--follow"});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "does not take --follow")
      << "the command and its --help are for Usage to add, once";
}

TEST(ArgsTest, HelpAndVersionWinOverEverythingElse) {
  absl::StatusOr<Args> a = Parse({"run", "--tiemout", "--help"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->help);
  ASSERT_NE(a->spec, nullptr);
  EXPECT_EQ(a->spec->usage, "usage: run");
  a = Parse({"session", "list", "-h"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->command, "session list");
  EXPECT_TRUE(Parse({"--version"})->version);
}

TEST(ArgsTest, ValuesSubcommandsAndTheDoubleDash) {
  absl::StatusOr<Args> a = Parse({"--addr", "tcp:127.0.0.1:1", "run", "--timeout=30", "x.csv",
                                  "--out", "d", "--", "--json", "-la"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, "run");
  EXPECT_EQ(a->Get("--addr"), "tcp:127.0.0.1:1");
  EXPECT_EQ(a->Get("--timeout"), "30");
  EXPECT_EQ(a->Get("--out"), "d");
  EXPECT_FALSE(a->Has("--json"));
  EXPECT_EQ(a->positional, (std::vector<std::string>{"x.csv", "--json", "-la"}));
  a = Parse({"session", "list", "--all"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, "session list");
  EXPECT_TRUE(a->positional.empty());
  EXPECT_EQ(Parse({"run", "--out"}).status().message(), "--out needs a value");
  EXPECT_EQ(Parse({"run", "--json=1"}).status().message(), "--json takes no value");
  a = Parse({"frobnicate"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->command, "frobnicate");
  EXPECT_EQ(a->spec, nullptr);
}

TEST(ArgsTest, NearestIgnoresWhatIsFarAndShort) {
  EXPECT_EQ(Nearest("--tiemout", {"--out", "--timeout", "--json"}), "--timeout");
  EXPECT_EQ(Nearest("--oot", {"--out", "--all"}), "--out");
  EXPECT_EQ(Nearest("--xyz", {"--out", "--all"}), "");
  EXPECT_EQ(Nearest("sesion", {"run", "session", "events"}), "session");
}

}  // namespace
}  // namespace sandgate::cli
