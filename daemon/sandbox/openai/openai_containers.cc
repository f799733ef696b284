#include "sandbox/openai/openai_containers.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace sandgate::sandbox {

std::string OpenAiContainerJournalId(const std::string& session_id) {
  return absl::StrCat("openai-container:", session_id);
}

std::string ContainerName(const std::string& session_id) {
  return absl::StrCat("sandgate-", session_id);
}

// Upstream expresses a gone container as 404 after deletion; either way it is deleted.
absl::Status DeleteIgnoringMissing(upstream::OpenAiClient* client, const std::string& id,
                                   const CancelToken* cancel) {
  absl::Status st = client->DeleteContainer(id, cancel);
  if (st.code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  return st;
}

// The ids of every container called `name`.
absl::StatusOr<std::vector<std::string>> ContainersNamed(upstream::OpenAiClient* client,
                                                         const std::string& name) {
  std::vector<std::string> ids;
  upstream::ListParams page;
  page.limit = 100;
  for (int guard = 0; guard < 1000; ++guard) {
    SANDGATE_ASSIGN_OR_RETURN(upstream::ContainerPage p, client->ListContainers(page, nullptr));
    for (const upstream::Container& c : p.data) {
      if (c.name == name) ids.push_back(c.id);
    }
    if (!p.has_more || p.last_id.empty()) break;
    page.after = p.last_id;
  }
  return ids;
}

// Deletes every container called `name` but `keep_id`: what earlier attempts of a create that
// was retried made although their answers were lost (each attempt made one, by the same name).
void DeleteOthersNamed(upstream::OpenAiClient* client, const std::string& name,
                       const std::string& keep_id, const std::string& session_id) {
  absl::StatusOr<std::vector<std::string>> named = ContainersNamed(client, name);
  if (!named.ok()) {
    log::Warning("sandbox.openai_lookup_failed",
                 {{"session", session_id}, {"name", name}, {"error", named.status().ToString()}});
    return;
  }
  for (const std::string& id : *named) {
    if (id == keep_id) continue;
    absl::Status st = DeleteIgnoringMissing(client, id, nullptr);
    if (st.ok()) {
      log::Info("sandbox.openai_extra_container_deleted",
                {{"session", session_id}, {"container", id}});
    } else {  // its name is still journaled: the sweep of the entry looks again
      log::Warning("sandbox.openai_extra_container_delete_failed",
                   {{"session", session_id}, {"container", id}, {"error", st.ToString()}});
    }
  }
}

}  // namespace sandgate::sandbox
