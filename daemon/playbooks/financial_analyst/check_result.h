// How a verifier check reports what it found: passed with a short detail, or failed listing
// the first problems and counting the rest.
//
//   out->push_back(Result("memo.headings", problems, "every heading in order"));
//
// Thread safe: pure functions.
#ifndef SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_CHECK_RESULT_H_
#define SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_CHECK_RESULT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "playbooks/playbook.h"

namespace sandgate::playbooks::financial {

// How many problems a failed check lists before it only counts them.
inline constexpr size_t kListed = 5;

// Lists the first kListed problems and counts the rest.
std::string Problems(const std::vector<std::string>& problems);

// Passed (with `ok_detail`) when `problems` is empty, failed listing them otherwise.
Check Result(std::string name, const std::vector<std::string>& problems, std::string ok_detail);

}  // namespace sandgate::playbooks::financial

#endif  // SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_CHECK_RESULT_H_
