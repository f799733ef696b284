#include "playbooks/financial_analyst/check_result.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sandgate::playbooks::financial {

std::string Problems(const std::vector<std::string>& problems) {
  std::vector<std::string> shown(problems.begin(),
                                 problems.begin() + std::min(problems.size(), kListed));
  std::string out = absl::StrJoin(shown, "; ");
  if (problems.size() > kListed) absl::StrAppend(&out, "; (", problems.size(), " in all)");
  return out;
}

Check Result(std::string name, const std::vector<std::string>& problems, std::string ok_detail) {
  Check c;
  c.name = std::move(name);
  c.passed = problems.empty();
  c.detail = c.passed ? std::move(ok_detail) : Problems(problems);
  return c;
}

}  // namespace sandgate::playbooks::financial
