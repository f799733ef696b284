#include "agent/chat_agent.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/model_events.h"
#include "agent/shell_output.h"
#include "common/errors.h"

namespace sandgate::agent {

const char kShellToolJson[] = R"json({"type":"function","function":{"name":"shell",
"description":"Run shell commands in the task's working directory, one after another, each with /bin/sh -c. Returns each command's stdout, stderr and exit code (or timed_out).",
"parameters":{"type":"object","properties":{
"commands":{"type":"array","items":{"type":"string"},"description":"The commands to run, in order."},
"timeout_ms":{"type":"integer","description":"Per-command time limit in milliseconds (optional)."},
"max_output_length":{"type":"integer","description":"Most characters of stdout+stderr returned per command (optional)."}},
"required":["commands"]}}})json";

namespace {

using nlohmann::json;

// Only a stream that broke mid-way (upstream::IsBrokenStream) is retried here, as a whole turn;
// an HTTP error was already retried by the one policy in upstream/retry.h.
constexpr int kStreamRetries = 2;

// The shell call in `arguments`, or the error to tell the model.
absl::StatusOr<ShellCall> ParseShellArguments(const std::string& arguments) {
  json args = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (args.is_discarded()) {
    return errors::InvalidArgument(
        "the arguments are not valid JSON; expected {\"commands\": [\"...\"]}");
  }
  if (!args.is_object()) return errors::InvalidArgument("the arguments must be a JSON object");
  auto cmds = args.find("commands");
  if (cmds == args.end() || !cmds->is_array() || cmds->empty()) {
    return errors::InvalidArgument("\"commands\" must be a non-empty array of strings");
  }
  ShellCall call;
  for (const json& c : *cmds) {
    if (!c.is_string()) {
      return errors::InvalidArgument("\"commands\" must be a non-empty array of strings");
    }
    call.commands.push_back(c.get<std::string>());
  }
  for (const char* key : {"timeout_ms", "max_output_length"}) {
    auto it = args.find(key);
    if (it == args.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return errors::InvalidArgument(absl::StrCat("\"", key, "\" must be a non-negative integer"));
    }
    (std::string(key) == "timeout_ms" ? call.timeout_ms : call.max_output_length) =
        it->get<int64_t>();
  }
  return call;
}

class ChatRun : public ModelRun {
 public:
  using ModelRun::ModelRun;

  absl::Status Run() {
    const std::string workdir = session_.workdir();
    json messages = json::array(
        {{{"role", "system"},
          {"content", task_.playbook->Instructions(*task_.inputs, workdir, *task_.settings)}},
         {{"role", "user"},
          {"content", absl::StrCat("Do the task now, working in ", workdir,
                                   " with the shell tool. When every file is written, reply "
                                   "with a short summary.")}}});
    const json tools = json::array({json::parse(kShellToolJson)});
    absl::Status result = errors::FailedPrecondition(
        absl::StrCat("the model did not finish within ", max_turns_, " turns"));
    for (uint32_t turn = 1; turn <= max_turns_; ++turn) {
      if (cancel_.cancelled()) return errors::Cancelled(cancel_.reason());
      json request = {{"model", model_},
                      {"messages", messages},
                      {"tools", tools},
                      {"tool_choice", "auto"},
                      {"stream_options", {{"include_usage", true}}}};
      absl::StatusOr<upstream::ChatCompletionResult> completion = Turn(request);
      if (!completion.ok()) {
        result = completion.status();
        break;
      }
      EmitAssistantMessage(events_, completion->content.value_or(""));
      if (completion->finish_reason == "length") {
        result = errors::FailedPrecondition("the model's answer was cut off at its token limit");
        break;
      }
      if (completion->finish_reason == "content_filter") {
        result = errors::FailedPrecondition("the model's answer was withheld by a content filter");
        break;
      }
      if (completion->tool_calls.empty()) {
        result = absl::OkStatus();
        break;
      }
      messages.push_back(completion->MessageJson());
      absl::Status answered = AnswerToolCalls(completion->tool_calls, &messages);
      if (!answered.ok()) {
        result = answered;
        break;
      }
    }
    tally_.Finish(events_, model_, "completions");
    return result;
  }

 private:
  absl::StatusOr<upstream::ChatCompletionResult> Turn(const json& request) {
    for (int attempt = 0;; ++attempt) {
      absl::StatusOr<upstream::ChatCompletionResult> r = client_->CreateChatCompletionStream(
          request, [](const json&) { return absl::OkStatus(); }, &cancel_);
      if (cancel_.cancelled()) return errors::Cancelled(cancel_.reason());
      if (r.ok()) {
        CountUsage(r->usage);
        return r;
      }
      if (upstream::IsBrokenStream(r.status()) && attempt < kStreamRetries) {
        EmitNotice(events_, v1::Notice::SEVERITY_WARNING,
                   absl::StrCat("the model's completion stream broke (", r.status().message(),
                                "); retrying the turn (attempt ", attempt + 2, " of ",
                                kStreamRetries + 1, ")"));
        continue;
      }
      return absl::Status(r.status().code(),
                          absl::StrCat("the chat completions API: ", r.status().message()));
    }
  }

  absl::Status AnswerToolCalls(const std::vector<upstream::ChatToolCall>& calls, json* messages) {
    for (const upstream::ChatToolCall& tc : calls) {
      std::string content;
      absl::StatusOr<ShellCall> call =
          tc.name == "shell" ? ParseShellArguments(tc.arguments)
                             : absl::StatusOr<ShellCall>(errors::InvalidArgument(absl::StrCat(
                                   "there is no tool '", tc.name, "'; the only tool is shell")));
      if (!call.ok()) {
        content = absl::StrCat("error: ", call.status().message());
        EmitNotice(events_, v1::Notice::SEVERITY_WARNING,
                   absl::StrCat("the model's tool call ", tc.id,
                                " was refused: ", call.status().message()));
      } else {
        absl::StatusOr<json> outputs =
            RunShellCall(session_, events_, *call, task_.command_timeout, cancel_);
        if (!outputs.ok()) {
          if (outputs.status().code() == absl::StatusCode::kCancelled) return outputs.status();
          if (outputs.status().code() != absl::StatusCode::kUnimplemented) return outputs.status();
          content = absl::StrCat("error: ", outputs.status().message());
        } else {
          json results = json::array();
          for (size_t i = 0; i < outputs->size(); ++i) {
            const json& o = (*outputs)[i];
            json r = {{"command", Utf8Clean(call->commands[i])},
                      {"stdout", o["stdout"]},
                      {"stderr", o["stderr"]}};
            if (o["outcome"]["type"] == "timeout") {
              r["timed_out"] = true;
            } else {
              r["exit_code"] = o["outcome"]["exit_code"];
            }
            results.push_back(std::move(r));
          }
          content = json({{"results", std::move(results)}}).dump();
        }
      }
      messages->push_back({{"role", "tool"}, {"tool_call_id", tc.id}, {"content", content}});
    }
    return absl::OkStatus();
  }

  void CountUsage(const json& usage) {
    if (!usage.is_object()) return;
    auto get = [&](const char* key) -> uint64_t {
      auto it = usage.find(key);
      return it != usage.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
    };
    const uint64_t in = get("prompt_tokens"), out = get("completion_tokens");
    tally_.Add(events_, in, out, usage.contains("total_tokens") ? get("total_tokens") : in + out);
  }
};

}  // namespace

ChatAgent::ChatAgent(upstream::OpenAiClient* client, ModelAgentOptions options)
    : client_(client), options_(std::move(options)) {}

absl::Status ChatAgent::Run(const AgentTask& task, sandbox::Session& session, EventSink& events,
                            const CancelToken& cancel) {
  return RunModelAgent<ChatRun>(client_, options_.default_model, options_.max_turns, "chat", task,
                                session, events, cancel);
}

}  // namespace sandgate::agent
