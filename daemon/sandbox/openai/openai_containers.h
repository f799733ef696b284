// The containers sandgate makes for a session, by name: how a provider's create and sweep and a
// session's close find and delete every container made for one session, including those a
// retried create made although its answers were lost (each attempt makes one, by the same
// name). Shared by openai_provider.cc and openai_session.cc; not an API of the provider.
//
// Free functions; thread safe as the OpenAiClient is. `client` is not owned.
#ifndef SANDGATE_SANDBOX_OPENAI_OPENAI_CONTAINERS_H_
#define SANDGATE_SANDBOX_OPENAI_OPENAI_CONTAINERS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cancel.h"
#include "upstream/openai_client.h"

namespace sandgate::sandbox {

// The journal entry id of a session's container.
std::string OpenAiContainerJournalId(const std::string& session_id);

// The name every container made for session `session_id` has ("sandgate-<session id>").
std::string ContainerName(const std::string& session_id);

// Deletes container `id`; one already gone (404) counts as deleted.
absl::Status DeleteIgnoringMissing(upstream::OpenAiClient* client, const std::string& id,
                                   const CancelToken* cancel);

// The ids of every container called `name`.
absl::StatusOr<std::vector<std::string>> ContainersNamed(upstream::OpenAiClient* client,
                                                         const std::string& name);

// Deletes every container called `name` but `keep_id`, logging (for `session_id`) what it
// deleted and what it could not; the journal entry that names them is the sweep's to retry.
void DeleteOthersNamed(upstream::OpenAiClient* client, const std::string& name,
                       const std::string& keep_id, const std::string& session_id);

}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_OPENAI_OPENAI_CONTAINERS_H_
