// The built-in playbooks, by name.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "playbooks/financial_analyst/playbook.h"
#include "playbooks/financial_analyst/text.h"
#include "playbooks/playbook.h"
#include "playbooks/sandbox_probe/playbook.h"

namespace sandgate::playbooks {
namespace {

// Built once, never destroyed (playbooks are stateless and may be used until exit).
const std::vector<std::unique_ptr<Playbook>>& All() {
  static const auto* const kAll = [] {
    auto* all = new std::vector<std::unique_ptr<Playbook>>();
    all->push_back(std::make_unique<FinancialAnalystPlaybook>());
    all->push_back(std::make_unique<SandboxProbePlaybook>());
    return all;
  }();
  return *kAll;
}

}  // namespace

absl::StatusOr<const Playbook*> FindPlaybook(const std::string& name) {
  for (const auto& playbook : All()) {
    if (playbook->name() == name) return playbook.get();
  }
  return errors::NotFound(
      "playbook", absl::StrCat("\"", financial::Excerpt(name, 80),
                               "\" (known playbooks: ", absl::StrJoin(PlaybookNames(), ", "), ")"));
}

std::vector<std::string> PlaybookNames() {
  std::vector<std::string> names;
  for (const auto& playbook : All()) names.push_back(playbook->name());
  return names;
}

}  // namespace sandgate::playbooks
