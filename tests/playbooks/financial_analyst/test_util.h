// Shared helpers for the financial-analyst tests: the sample input and a correct artifact set
// built independently of the verifier's own formatting.
#ifndef SANDGATE_TESTS_PLAYBOOKS_FINANCIAL_ANALYST_TEST_UTIL_H_
#define SANDGATE_TESTS_PLAYBOOKS_FINANCIAL_ANALYST_TEST_UTIL_H_

#include <string>
#include <vector>

#include "playbooks/playbook.h"

namespace sandgate::playbooks::financial::testing {

inline constexpr char kSampleName[] = "northstar_cloud_financial_statements.csv";

// The whole file at `path` (relative to the source tree); fails the test if unreadable.
std::string ReadSourceFile(const std::string& path);
std::string SampleCsv();

// A correct artifact set for `csv`: metrics and hits formatted with "%.17g", a memo with every
// heading that names `input_name`, a four-panel SVG and a manifest.
Artifacts GoodArtifacts(const std::string& input_name, const std::string& csv);

// The checks that failed, by name.
std::vector<std::string> FailedChecks(const std::vector<Check>& checks);
// The check called `name`; fails the test and returns an empty Check if there is none.
Check FindCheck(const std::vector<Check>& checks, const std::string& name);

}  // namespace sandgate::playbooks::financial::testing

#endif  // SANDGATE_TESTS_PLAYBOOKS_FINANCIAL_ANALYST_TEST_UTIL_H_
