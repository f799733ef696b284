// The verifier's checks of analysis_run.json (the analysis_run.* checks listed in
// verifier.h): its keys and types, the input's name, row count and year range, the
// validation results against the daemon's own, and the generated file names.
//
//   CheckManifest("northstar.csv", manifest_bytes, report, &checks);
//
// Thread safe: a pure function. Never crashes on arbitrary bytes.
#ifndef SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_MANIFEST_CHECK_H_
#define SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_MANIFEST_CHECK_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "playbooks/financial_analyst/statements.h"
#include "playbooks/playbook.h"

namespace sandgate::playbooks::financial {

// Appends the analysis_run.* checks of the manifest `text` to *out; `report` is the daemon's
// validation of the input.
void CheckManifest(absl::string_view input_filename, absl::string_view text,
                   const ValidationReport& report, std::vector<Check>* out);

}  // namespace sandgate::playbooks::financial

#endif  // SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_MANIFEST_CHECK_H_
