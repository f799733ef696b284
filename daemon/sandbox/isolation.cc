#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "sandbox/sandbox.h"

namespace sandgate::sandbox {

const char* IsolationName(Isolation isolation) {
  return isolation == Isolation::kGvisor ? "gvisor" : "namespaces";
}

absl::StatusOr<Isolation> ParseIsolation(absl::string_view name) {
  if (name == "namespaces") return Isolation::kNamespaces;
  if (name == "gvisor") return Isolation::kGvisor;
  return errors::InvalidArgument(absl::StrCat("isolation: unknown level \"", absl::CHexEscape(name),
                                              "\" (namespaces or gvisor)"));
}

}  // namespace sandgate::sandbox
