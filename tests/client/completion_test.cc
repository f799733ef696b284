#include "client/completion.h"

#include <gtest/gtest.h>

#include "client/grammar.h"
#include "gmock/gmock.h"

namespace sandgate::cli {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::IsSupersetOf;
using ::testing::Not;

std::vector<std::string> C(std::vector<std::string> words) { return Complete(Grammar(), words); }

TEST(CompleteTest, OffersTheCommandsFirstAndFiltersByWhatIsTyped) {
  EXPECT_THAT(C({""}), IsSupersetOf({"run", "events", "session", "admin", "completion", "man"}));
  EXPECT_THAT(C({""}), Not(Contains("session exec")));
  EXPECT_THAT(C({"ru"}), ElementsAre("run", "runs"));
  EXPECT_THAT(C({"zz"}), IsEmpty());
}

TEST(CompleteTest, OffersASubcommandAfterItsGroup) {
  EXPECT_THAT(C({"session", ""}), IsSupersetOf({"create", "exec", "upload", "close"}));
  EXPECT_THAT(C({"session", "ex"}), ElementsAre("exec", "expose"));
  EXPECT_THAT(C({"session", "exe"}), ElementsAre("exec"));
  EXPECT_THAT(C({"admin", ""}), ElementsAre("drain", "purge"));
}

TEST(CompleteTest, OffersTheOptionsOfTheCommandTypedAndTheGlobalOnes) {
  EXPECT_THAT(C({"run", "--netw"}), ElementsAre("--network"));
  EXPECT_THAT(C({"session", "exec", "x", "--"}),
              IsSupersetOf({"--timeout", "--env", "--addr", "--help"}));
  // An option of another command is not offered.
  EXPECT_THAT(C({"runs", "--"}), Not(Contains("--network")));
  EXPECT_THAT(C({"--ver"}), ElementsAre("--version"));
}

TEST(CompleteTest, OffersTheValuesOfAnOptionItKnows) {
  EXPECT_THAT(C({"run", "--network", ""}), ElementsAre("disabled", "restricted", "enabled"));
  EXPECT_THAT(C({"run", "--network", "re"}), ElementsAre("restricted"));
  EXPECT_THAT(C({"run", "--network=e"}), ElementsAre("--network=enabled"));
  EXPECT_THAT(C({"run", "--out", ""}), ElementsAre(kCompleteDirs));
  EXPECT_THAT(C({"session", "download", "s", "f", "--out", ""}), ElementsAre(kCompleteFiles));
  EXPECT_THAT(C({"--tls-ca", ""}), ElementsAre(kCompleteFiles));
  // The daemon's names are not the CLI's to know.
  EXPECT_THAT(C({"run", "--playbook", ""}), IsEmpty());
}

TEST(CompleteTest, CountsPositionalsPastOptionsAndTheirValues) {
  EXPECT_THAT(C({"run", ""}), ElementsAre(kCompleteFiles));
  EXPECT_THAT(C({"--addr", "unix:/s", "run", "--timeout", "5", ""}), ElementsAre(kCompleteFiles));
  EXPECT_THAT(C({"run", "a.csv", ""}), IsEmpty());
  EXPECT_THAT(C({"session", "upload", ""}), IsEmpty());  // the session id: not known here
  EXPECT_THAT(C({"session", "upload", "s", ""}), ElementsAre(kCompleteFiles));
  EXPECT_THAT(C({"completion", ""}), ElementsAre("bash", "zsh"));
  // Past "--", the words are the command to run, not options.
  EXPECT_THAT(C({"session", "exec", "s", "--", "-"}), IsEmpty());
}

TEST(CompletionScriptTest, ExistsForBashAndZshOnly) {
  EXPECT_THAT(CompletionScript("bash"), testing::HasSubstr("complete -F _sandgate sandgate"));
  EXPECT_THAT(CompletionScript("zsh"), testing::StartsWith("#compdef sandgate"));
  EXPECT_EQ(CompletionScript("fish"), "");
}

TEST(ManPageTest, HoldsEveryCommandsHelpEscapedForRoff) {
  ArgsGrammar grammar;
  grammar.commands = {{"odd", "usage: sandgate odd\n.TH not a request\n'also not\na\\b -x\n", {}}};
  std::string page = ManPage(grammar, "usage: sandgate COMMAND\n", "9.9");
  EXPECT_THAT(page, testing::HasSubstr(".TH SANDGATE 1 \"\" \"sandgate 9.9\""));
  EXPECT_THAT(page, testing::HasSubstr(".SS odd\n.nf\nusage: sandgate odd\n\\&.TH not a request\n"
                                       "\\&'also not\na\\eb \\-x\n.fi\n"));
  std::string real = ManPage(Grammar(), UsageText(), "1");
  for (const CommandSpec& c : Grammar().commands) {
    EXPECT_THAT(real, testing::HasSubstr(".SS " + c.name + "\n")) << c.name;
  }
  // The global options every --help repeats are said once, in the synopsis.
  EXPECT_THAT(real, Not(testing::HasSubstr("global options:")));
}

}  // namespace
}  // namespace sandgate::cli
