// The financial-analyst task as a scripted model for the fake OpenAI server: the model writes
// the playbook's reference program with a heredoc, runs it in its working directory, then
// says it is done. Header-only; reads the program from the source tree.
#ifndef SANDGATE_TESTS_SANDBOX_OPENAI_ANALYST_SCENARIO_H_
#define SANDGATE_TESTS_SANDBOX_OPENAI_ANALYST_SCENARIO_H_

#include <fstream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"

namespace sandgate::testing {

inline std::string ReadSourceFile(const std::string& relative) {
  std::ifstream in(std::string(SANDGATE_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string SampleStatementsCsv() {
  return ReadSourceFile("tests/data/northstar_cloud_financial_statements.csv");
}

// Turns that produce the six verified artifacts from `input` in the working directory.
inline nlohmann::json AnalystTurns(const std::string& input) {
  const std::string program =
      ReadSourceFile("daemon/playbooks/financial_analyst/reference/analyze_financials.py");
  return nlohmann::json::array(
      {{{"shell",
         {"cat > analyze_financials.py <<'SANDGATE_EOF'\n" + program + "\nSANDGATE_EOF",
          "python3 analyze_financials.py " + input + " --out-dir . && ls"}},
        {"timeout_ms", 60000}},
       {{"message", "The six artifacts are written."}}});
}

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_SANDBOX_OPENAI_ANALYST_SCENARIO_H_
