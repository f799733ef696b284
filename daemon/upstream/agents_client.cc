#include "upstream/agents_client.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sandgate::upstream {

namespace {
absl::Status Wip() { return absl::UnimplementedError("AgentsClient: not implemented yet"); }
}  // namespace

bool AgentTurn::IsFinished() const {
  return status == AgentTurnStatus::kCompleted || status == AgentTurnStatus::kFailed ||
         status == AgentTurnStatus::kCancelled;
}

AgentsClient::AgentsClient(HttpClient* http, const Credentials* credentials, std::string base_url,
                           AgentsOptions options)
    : options_(std::move(options)), transport_(http, credentials, std::move(base_url), [this] {
        OpenAiOptions o = options_.http;
        o.extra_headers.emplace_back(std::string(kAgentsBetaHeader), std::string(kAgentsBetaValue));
        return o;
      }()) {}

absl::StatusOr<AgentSession> AgentsClient::CreateSession(const AgentSessionRequest& request,
                                                         const CancelToken* cancel) {
  return Wip();
}

absl::StatusOr<AgentSession> AgentsClient::CreateSessionStream(const AgentSessionRequest& request,
                                                               AgentEventStreamState* state,
                                                               const AgentEventCallback& on_event,
                                                               const CancelToken* cancel) {
  return Wip();
}

absl::StatusOr<AgentSession> AgentsClient::GetSession(absl::string_view session_id,
                                                      const CancelToken* cancel) {
  return Wip();
}

absl::Status AgentsClient::DeleteSession(absl::string_view session_id, const CancelToken* cancel) {
  return Wip();
}

absl::Status AgentsClient::SendMessage(absl::string_view session_id, absl::string_view text,
                                       absl::string_view idempotency_key,
                                       const CancelToken* cancel) {
  return Wip();
}

absl::Status AgentsClient::SendCancel(absl::string_view session_id,
                                      absl::string_view idempotency_key,
                                      const CancelToken* cancel) {
  return Wip();
}

absl::Status AgentsClient::PostEvents(absl::string_view session_id, const nlohmann::json& events,
                                      absl::string_view idempotency_key,
                                      const CancelToken* cancel) {
  return Wip();
}

absl::Status AgentsClient::StreamEvents(absl::string_view session_id, AgentEventStreamState* state,
                                        const AgentEventCallback& on_event,
                                        const CancelToken* cancel) {
  return Wip();
}

absl::StatusOr<std::vector<AgentTurn>> AgentsClient::ListTurns(absl::string_view session_id,
                                                               const CancelToken* cancel) {
  return Wip();
}

absl::StatusOr<AgentTurn> AgentsClient::GetTurn(absl::string_view session_id,
                                                absl::string_view turn_id,
                                                const CancelToken* cancel) {
  return Wip();
}

absl::StatusOr<AgentArtifactPage> AgentsClient::ListArtifacts(absl::string_view session_id,
                                                              const AgentArtifactListParams& params,
                                                              const CancelToken* cancel) {
  return Wip();
}

absl::StatusOr<std::vector<AgentArtifact>> AgentsClient::ListAllArtifacts(
    absl::string_view session_id, const CancelToken* cancel) {
  return Wip();
}

absl::StatusOr<std::string> AgentsClient::ArtifactContent(absl::string_view session_id,
                                                          absl::string_view artifact_id,
                                                          size_t max_bytes,
                                                          const CancelToken* cancel) {
  return Wip();
}

absl::StatusOr<AgentEnvironment> AgentsClient::GetEnvironment(absl::string_view environment_id,
                                                              const CancelToken* cancel) {
  return Wip();
}

absl::StatusOr<nlohmann::json> AgentSessionRequestJson(const AgentSessionRequest& request) {
  return Wip();
}

absl::StatusOr<AgentSession> ParseAgentSession(const nlohmann::json& j) { return Wip(); }

absl::StatusOr<AgentTurn> ParseAgentTurn(const nlohmann::json& j) { return Wip(); }

absl::StatusOr<AgentArtifact> ParseAgentArtifact(const nlohmann::json& j) { return Wip(); }

absl::StatusOr<AgentEnvironment> ParseAgentEnvironment(const nlohmann::json& j) { return Wip(); }

AgentEvent ParseAgentEvent(const nlohmann::json& j) { return AgentEvent{}; }

}  // namespace sandgate::upstream
