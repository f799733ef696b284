// Playbook: a named task the daemon knows how to run and to check.
//
// A playbook says which inputs it accepts, which artifacts a run must produce, how the
// `reference` agent does the work without a model (files to place, commands to run), what a
// model-driven agent is told, and how the daemon verifies the result. Playbooks are pure:
// no I/O beyond what they are handed.
//
// Thread safe: all methods are const and stateless.
#ifndef SANDGATE_PLAYBOOKS_PLAYBOOK_H_
#define SANDGATE_PLAYBOOKS_PLAYBOOK_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::playbooks {

struct InputFile {
  std::string name;  // a plain file name, no directories
  std::string content;
};

struct Check {
  std::string name;  // stable, e.g. "calculated_metrics.values"
  bool passed = false;
  std::string detail;  // what was found; on failure, what is wrong and where
};

// What the daemon makes of a finished run: every check, and the summary a client shows
// (key figures, flags, counts, where the files are; playbooks/summary.h builds its parts),
// written from the same recomputation the checks compare against, never from what the
// sandbox's files claim.
struct Verdict {
  std::vector<Check> checks;
  v1::RunSummary summary;
};

struct PlacedFile {
  std::string path;  // relative to the workspace
  std::string content;
  int mode = 0644;
};

struct Step {
  std::string name;  // e.g. "analyze", "recompute"
  std::vector<std::string> argv;
  absl::Duration timeout = absl::Minutes(2);
};

// What the reference agent does: place files, then run the steps in order; a failing step
// fails the run.
struct ReferencePlan {
  std::vector<PlacedFile> files;
  std::vector<Step> steps;
};

// Artifact name -> its bytes, as downloaded from the sandbox.
using Artifacts = std::map<std::string, std::string>;

// How the caller set up the run's sandbox, for playbooks whose work or checks depend on it
// (the sandbox probe verifies that the environment, setup and network are as requested).
struct TaskSettings {
  std::map<std::string, std::string> env;
  std::vector<std::string> setup_commands;
  std::string network = "disabled";  // "disabled", "restricted" or "enabled"
  std::vector<std::string> allowed_domains;
  // The local sandbox's isolation level ("namespaces", "gvisor"); empty when not known here
  // (a hosted provider, or a kept session, whose level was chosen when it was made).
  std::string isolation;
};

class Playbook {
 public:
  virtual ~Playbook() = default;
  virtual std::string name() const = 0;
  // Request-level checks on the inputs (count, names, encoding), before any sandbox exists.
  virtual absl::Status ValidateInputs(const std::vector<InputFile>& inputs) const = 0;
  // Files every successful run must produce, relative to the workspace.
  virtual std::vector<std::string> ExpectedArtifacts() const = 0;
  virtual ReferencePlan Reference(const std::vector<InputFile>& inputs, const std::string& workdir,
                                  const TaskSettings& settings) const = 0;
  // The instructions a model-driven agent is given.
  virtual std::string Instructions(const std::vector<InputFile>& inputs, const std::string& workdir,
                                   const TaskSettings& settings) const = 0;
  // Every check the daemon makes on a finished run, and its summary; a run passes when all
  // checks pass. Missing artifacts are absent from the map and must produce failed checks,
  // not errors (and a summary of what could be verified).
  virtual Verdict Verify(const std::vector<InputFile>& inputs, const TaskSettings& settings,
                         const Artifacts& artifacts) const = 0;
};

// The built-in playbooks by name, or NOT_FOUND naming the known ones.
absl::StatusOr<const Playbook*> FindPlaybook(const std::string& name);
std::vector<std::string> PlaybookNames();

}  // namespace sandgate::playbooks

#endif  // SANDGATE_PLAYBOOKS_PLAYBOOK_H_
