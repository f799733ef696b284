#include "agent/openai_agent.h"

#include <array>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/agents_run.h"
#include "agent/model_events.h"
#include "agent/shell_output.h"
#include "common/errors.h"
#include "common/events.h"
#include "common/log.h"
#include "google/protobuf/util/time_util.h"
#include "sandbox/sandbox.h"

namespace sandgate::agent {
namespace {

using google::protobuf::util::TimeUtil;
using nlohmann::json;

// A stream that broke mid-way (upstream::IsBrokenStream) is retried as a whole turn this many
// times on a local session (where nothing ran yet), and resumed this many times on a hosted
// one (where commands may have run). Nothing else is retried here: an HTTP error was already
// retried by the one policy in upstream/retry.h, as the server's headers allowed.
constexpr int kStreamRetries = 2;
constexpr int kStreamResumes = 3;

std::string Str(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::optional<int64_t> Int(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

const json& Obj(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::vector<std::string> Commands(const json& shell_call) {
  std::vector<std::string> out;
  const json& cmds = Obj(Obj(shell_call, "action"), "commands");
  if (cmds.is_array()) {
    for (const json& c : cmds) {
      if (c.is_string()) out.push_back(c.get<std::string>());
    }
  }
  return out;
}

// The text of a `message` output item.
std::string MessageText(const json& item) {
  std::string text;
  const json& content = Obj(item, "content");
  if (!content.is_array()) return text;
  for (const json& part : content) {
    const std::string type = Str(part, "type");
    if (type == "output_text") absl::StrAppend(&text, Str(part, "text"));
    if (type == "refusal") absl::StrAppend(&text, Str(part, "refusal"));
  }
  return text;
}

// The combined stdout+stderr cap a hosted command gets when the model names none: 1000
// characters per the schema's published default (openai-api.md §5.3, not confirmed for
// OpenAI); used only to tell that output which reached it may have been cut.
constexpr int64_t kHostedDefaultMaxOutput = 1000;

// Number of leading bytes `a` and `b` share.
size_t CommonPrefix(absl::string_view a, absl::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Relays the commands OpenAI runs in a hosted container, as the response streams, into
// command.* events. Commands of one call run in order: command i+1 starts when i finishes.
// The API streams the head of a command's output and gives its final output (head and tail,
// capped at max_output_length, stderr too) only with the result; what the deltas lacked is
// relayed from there, and a cut is flagged, as on the local path.
class HostedRelay {
 public:
  explicit HostedRelay(EventSink& events) : events_(events) {}
  ~HostedRelay() { AbortOpen(false); }

  void CallKnown(const json& shell_call) {
    const std::string call_id = Str(shell_call, "call_id");
    if (call_id.empty() || calls_.count(call_id)) return;
    Call& c = calls_[call_id];
    c.commands = Commands(shell_call);
    c.max_output =
        Int(Obj(shell_call, "action"), "max_output_length").value_or(kHostedDefaultMaxOutput);
    c.ids.assign(c.commands.size(), 0);
    c.state.assign(c.commands.size(), kPending);
    c.start.assign(c.commands.size(), absl::Time());
    c.seen.assign(c.commands.size(), std::array<std::string, 2>());
    if (!c.commands.empty()) Start(c, 0);
  }
  void OutputItemAdded(const json& item) {
    const std::string id = Str(item, "id");
    if (!id.empty()) output_item_call_[id] = Str(item, "call_id");
  }
  void Delta(const json& ev) {
    Call* c = Find(ev);
    std::optional<int64_t> i = Int(ev, "command_index");
    if (c == nullptr || !i || *i < 0 || static_cast<size_t>(*i) >= c->commands.size()) return;
    StartThrough(*c, static_cast<size_t>(*i));
    const json& delta = Obj(ev, "delta");
    for (int s = 0; s < 2; ++s) {
      const std::string data = Str(delta, kStreams[s].key);
      c->seen[*i][s] += data;
      Output(*c, static_cast<size_t>(*i), kStreams[s].stream, data);
    }
  }
  void CommandDone(const json& ev) {
    Call* c = Find(ev);
    std::optional<int64_t> i = Int(ev, "command_index");
    if (c == nullptr || !i || *i < 0 || static_cast<size_t>(*i) >= c->commands.size()) return;
    const json& output = Obj(ev, "output");
    const json& outcome =
        output.is_array() && !output.empty() ? Obj(output[0], "outcome") : Obj(ev, "outcome");
    StartThrough(*c, static_cast<size_t>(*i));
    const bool cut =
        output.is_array() && !output.empty() && Reconcile(*c, static_cast<size_t>(*i), output[0]);
    Finish(*c, static_cast<size_t>(*i), outcome, false, cut);
    if (static_cast<size_t>(*i) + 1 < c->commands.size()) Start(*c, *i + 1);
  }
  void OutputItemDone(const json& item) {
    auto it = calls_.find(Str(item, "call_id"));
    if (it == calls_.end()) return;
    Call& c = it->second;
    const json& output = Obj(item, "output");
    for (size_t i = 0; i < c.commands.size(); ++i) {
      if (c.state[i] == kFinished) continue;
      const json& outcome =
          output.is_array() && i < output.size() ? Obj(output[i], "outcome") : json();
      if (c.state[i] == kPending) Start(c, i);
      const bool cut = output.is_array() && i < output.size() && Reconcile(c, i, output[i]);
      Finish(c, i, outcome, false, cut);
    }
  }
  // The stream ended or broke: every command still open ends without an exit code.
  void AbortOpen(bool cancelled) {
    for (auto& [id, c] : calls_) {
      for (size_t i = 0; i < c.commands.size(); ++i) {
        if (c.state[i] == kRunning) Finish(c, i, json(), cancelled, false);
      }
    }
  }

 private:
  enum State { kPending, kRunning, kFinished };
  struct StreamName {
    const char* key;
    v1::CommandOutput::Stream stream;
  };
  static constexpr StreamName kStreams[2] = {{"stdout", v1::CommandOutput::STREAM_STDOUT},
                                             {"stderr", v1::CommandOutput::STREAM_STDERR}};
  struct Call {
    std::vector<std::string> commands;
    int64_t max_output = kHostedDefaultMaxOutput;  // characters of stdout+stderr per command
    std::vector<uint32_t> ids;
    std::vector<State> state;
    std::vector<absl::Time> start;
    std::vector<std::array<std::string, 2>> seen;  // stdout, stderr relayed from deltas
  };

  void Output(Call& c, size_t i, v1::CommandOutput::Stream stream, std::string data) {
    if (data.empty()) return;
    events_.Emit(events::CommandOutput(c.ids[i], stream, std::move(data)));
  }
  // Relays what of command i's final output (`result`) the deltas did not carry: all of it
  // when none came, the rest when they were its head, its tail and stderr when the API cut it.
  // Returns whether the output was (or, having reached the cap, may have been) cut.
  bool Reconcile(Call& c, size_t i, const json& result) {
    bool cut = false;
    size_t final_chars = 0;
    for (int s = 0; s < 2; ++s) {
      const std::string text = Str(result, kStreams[s].key);
      const std::string& seen = c.seen[i][s];
      final_chars += Utf8Length(Utf8Clean(text));
      const size_t same = CommonPrefix(seen, text);
      if (same < seen.size()) cut = true;  // the deltas said more than the result kept
      Output(c, i, kStreams[s].stream, text.substr(same));
      c.seen[i][s] = text;
    }
    return cut || (c.max_output > 0 && final_chars >= static_cast<size_t>(c.max_output));
  }

  Call* Find(const json& ev) {
    auto it = output_item_call_.find(Str(ev, "item_id"));
    if (it == output_item_call_.end()) return nullptr;
    auto c = calls_.find(it->second);
    return c == calls_.end() ? nullptr : &c->second;
  }
  void StartThrough(Call& c, size_t i) {
    for (size_t k = 0; k <= i; ++k) {
      if (c.state[k] == kPending) Start(c, k);
    }
  }
  void Start(Call& c, size_t i) {
    if (c.state[i] != kPending) return;
    c.state[i] = kRunning;
    c.ids[i] = events_.NextCommandId();
    c.start[i] = absl::Now();
    events_.Emit(events::CommandStarted(c.ids[i], "agent", sandbox::ShellCommand(c.commands[i])));
  }
  void Finish(Call& c, size_t i, const json& outcome, bool cancelled, bool output_cut) {
    if (c.state[i] != kRunning) return;
    c.state[i] = kFinished;
    v1::CommandFinished finished;
    v1::CommandFinished* f = &finished;
    f->set_command_id(c.ids[i]);
    f->set_output_truncated(output_cut);
    const std::string type = Str(outcome, "type");
    if (type == "exit") {
      f->set_exit_code(static_cast<int32_t>(Int(outcome, "exit_code").value_or(-1)));
    } else {
      f->set_exit_code(-1);
      f->set_timed_out(type == "timeout");
      f->set_cancelled(cancelled);
    }
    *f->mutable_duration() =
        TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(absl::Now() - c.start[i]));
    events_.Emit(events::CommandFinished(std::move(finished)));
  }

  EventSink& events_;
  std::map<std::string, Call> calls_;                    // by call_id
  std::map<std::string, std::string> output_item_call_;  // output item id -> call_id
};

// One run of the agent.
class OpenAiRun : public ModelRun {
 public:
  OpenAiRun(upstream::OpenAiClient* client, const AgentTask& task, sandbox::Session& session,
            EventSink& events, const CancelToken& cancel, ModelChoice choice,
            absl::Duration stop_timeout)
      : ModelRun(client, task, session, events, cancel, std::move(choice)),
        hosted_(session.hosted_shell()),
        stop_timeout_(stop_timeout) {}

  absl::Status Run() {
    const std::string workdir = session_.workdir();
    const std::string instructions =
        task_.playbook->Instructions(*task_.inputs, workdir, *task_.settings);
    json tool = {{"type", "shell"}};
    if (hosted_ != nullptr) {
      tool["environment"] = {{"type", "container_reference"},
                             {"container_id", hosted_->container_id()}};
    } else {
      tool["environment"] = {{"type", "local"}};
    }
    json input =
        json::array({{{"role", "user"},
                      {"content", absl::StrCat("Do the task now, working in ", workdir,
                                               " with the shell tool. When every file "
                                               "is written, reply with a short summary.")}}});
    std::string previous_id;
    absl::Status result = errors::FailedPrecondition(
        absl::StrCat("the model did not finish within ", max_turns_, " turns"));
    for (uint32_t turn = 1; turn <= max_turns_; ++turn) {
      if (cancel_.cancelled()) return errors::Cancelled(cancel_.reason());
      if (hosted_ != nullptr) {
        absl::Status usable = hosted_->CheckUsable();
        if (!usable.ok()) return usable;
      }
      json request = {{"model", model_},
                      {"instructions", instructions},
                      {"tools", json::array({tool})},
                      {"tool_choice", turn == 1 ? "required" : "auto"},
                      {"parallel_tool_calls", false},
                      {"input", input}};
      if (!previous_id.empty()) request["previous_response_id"] = previous_id;
      absl::StatusOr<json> response = Turn(request);
      if (!response.ok()) {
        result = response.status();
        break;
      }
      previous_id = Str(*response, "id");
      absl::StatusOr<std::optional<json>> next = NextInput(*response);
      if (!next.ok()) {
        result = next.status();
        break;
      }
      if (!next->has_value()) {
        result = absl::OkStatus();
        break;
      }
      input = std::move(**next);
    }
    tally_.Finish(events_, model_, "responses");
    return result;
  }

 private:
  // One streamed response. On a hosted container the commands run upstream, inside the
  // response, so a response whose stream broke is never created again (its commands would run
  // twice): it is created in the background and its stream is picked up after the last event
  // that arrived. A local shell call runs here, after the response ends, so there a broken
  // stream ran nothing and the turn is simply sent again.
  absl::StatusOr<json> Turn(const json& request) {
    if (hosted_ != nullptr) return HostedTurn(request);
    for (int attempt = 0;; ++attempt) {
      HostedRelay relay(events_);
      Position pos;
      absl::StatusOr<json> response =
          client_->CreateResponseStream(request, Relay(relay, pos), &cancel_);
      relay.AbortOpen(cancel_.cancelled());
      if (cancel_.cancelled()) return errors::Cancelled(cancel_.reason());
      if (response.ok()) {
        CountUsage(Obj(*response, "usage"));
        return Check(*response);
      }
      const absl::Status& st = response.status();
      if (upstream::IsBrokenStream(st) && attempt < kStreamRetries) {
        EmitNotice(
            events_, v1::Notice::SEVERITY_WARNING,
            absl::StrCat("the model's response stream broke (", st.message(),
                         "); retrying the turn (attempt ", attempt + 2, " of ", kStreamRetries + 1,
                         "): no command ran, the daemon runs them after the response"));
        continue;
      }
      return absl::Status(st.code(), absl::StrCat("the OpenAI Responses API: ", st.message()));
    }
  }

  absl::StatusOr<json> HostedTurn(json request) {
    // A background response outlives its stream and can be streamed again from a sequence
    // number (GET /responses/{id}?stream=true&starting_after=N); it must be stored for that.
    request["background"] = true;
    request["store"] = true;
    HostedRelay relay(events_);
    Position pos;
    const upstream::JsonEventCallback on_event = Relay(relay, pos);
    absl::StatusOr<json> response = client_->CreateResponseStream(request, on_event, &cancel_);
    int resumes = 0;
    for (; !response.ok() && upstream::IsBrokenStream(response.status()) &&
           !pos.response_id.empty() && resumes < kStreamResumes && !cancel_.cancelled();
         ++resumes) {
      EmitNotice(events_, v1::Notice::SEVERITY_WARNING,
                 absl::StrCat("the model's response stream broke (", response.status().message(),
                              "); resuming response ", pos.response_id, " after event ",
                              pos.last_sequence, " (resume ", resumes + 1, " of ", kStreamResumes,
                              "); nothing is sent again"));
      response =
          client_->ResumeResponseStream(pos.response_id, pos.last_sequence, on_event, &cancel_);
    }
    relay.AbortOpen(cancel_.cancelled());
    if (!response.ok() && !pos.response_id.empty()) {
      // Stop what runs upstream without us: cancelled, or a stream we could not pick up. The
      // run's token cannot bound this wait (it may be what fired), so stop_timeout_ does.
      absl::StatusOr<json> stopped =
          client_->CancelResponse(pos.response_id, nullptr, stop_timeout_);
      if (!stopped.ok()) {
        log::Warning("agent.openai_cancel_failed",
                     {{"response", pos.response_id}, {"error", stopped.status().ToString()}});
      }
    }
    if (cancel_.cancelled()) return errors::Cancelled(cancel_.reason());
    if (response.ok()) {
      CountUsage(Obj(*response, "usage"));
      return Check(*response);
    }
    const absl::Status& st = response.status();
    if (hosted_->SaysExpired(st)) {
      return hosted_->MarkExpired(st.message(), "a Responses API request");
    }
    if (upstream::IsBrokenStream(st) || resumes > 0) {
      return absl::Status(
          st.code(),
          absl::StrCat("the model's response stream broke after its hosted commands may have "
                       "run, and could not be resumed",
                       pos.response_id.empty() ? " (no response id had arrived)" : "", ": ",
                       st.message(),
                       "; the turn is not sent again, so that no command runs twice"));
    }
    return absl::Status(st.code(), absl::StrCat("the OpenAI Responses API: ", st.message()));
  }

  // Where a response's stream got to: its id and the last sequence_number seen (-1: none).
  struct Position {
    std::string response_id;
    int64_t last_sequence = -1;
  };

  // Relays a response's events into `relay` and the run's events, once each: an event a
  // resumed stream repeats (numbered at or below pos.last_sequence) is skipped.
  upstream::JsonEventCallback Relay(HostedRelay& relay, Position& pos) {
    return [this, &relay, &pos](const json& ev) -> absl::Status {
      if (std::optional<int64_t> seq = Int(ev, "sequence_number")) {
        if (*seq <= pos.last_sequence) return absl::OkStatus();
        pos.last_sequence = *seq;
      }
      if (pos.response_id.empty()) pos.response_id = Str(Obj(ev, "response"), "id");
      const std::string type = Str(ev, "type");
      if (type == "response.output_item.added") {
        if (hosted_ != nullptr && Str(Obj(ev, "item"), "type") == "shell_call_output") {
          relay.OutputItemAdded(Obj(ev, "item"));
        }
      } else if (type == "response.output_item.done") {
        const json& item = Obj(ev, "item");
        const std::string item_type = Str(item, "type");
        if (item_type == "message") {
          EmitAssistantMessage(events_, MessageText(item));
        } else if (hosted_ != nullptr && item_type == "shell_call") {
          relay.CallKnown(item);
        } else if (hosted_ != nullptr && item_type == "shell_call_output") {
          relay.OutputItemDone(item);
        }
      } else if (hosted_ != nullptr && type == "response.shell_call_output_content.delta") {
        relay.Delta(ev);
      } else if (hosted_ != nullptr && type == "response.shell_call_output_content.done") {
        relay.CommandDone(ev);
      }
      return absl::OkStatus();
    };
  }

  absl::StatusOr<json> Check(json response) {
    const std::string status = Str(response, "status");
    if (status == "completed") return response;
    if (status == "failed") {
      const json& error = Obj(response, "error");
      const std::string message = Str(error, "message");
      if (hosted_ != nullptr && hosted_->SaysExpired(errors::FailedPrecondition(message))) {
        return hosted_->MarkExpired(absl::StrCat("response failed: ", message),
                                    "the model's response");
      }
      return errors::FailedPrecondition(
          absl::StrCat("the model's response failed: ", Str(error, "code"), ": ", message));
    }
    if (status == "incomplete") {
      std::string reason = Str(Obj(response, "incomplete_details"), "reason");
      if (reason.empty()) reason = "no reason given";
      return errors::FailedPrecondition(
          absl::StrCat("the model's response was cut off (incomplete: ", reason, ")"));
    }
    return errors::FailedPrecondition(
        absl::StrCat("the model's response ended with status '", status, "'"));
  }

  // What the next turn sends, or nullopt when the model is done.
  absl::StatusOr<std::optional<json>> NextInput(const json& response) {
    const json& output = Obj(response, "output");
    json next = json::array();
    bool said_something = false;
    std::map<std::string, bool> answered;  // hosted calls come with their outputs
    if (output.is_array()) {
      for (const json& item : output) {
        if (Str(item, "type") == "shell_call_output") answered[Str(item, "call_id")] = true;
      }
      for (const json& item : output) {
        const std::string type = Str(item, "type");
        if (type == "message") said_something = true;
        if (type == "shell_call" && !answered[Str(item, "call_id")]) {
          if (hosted_ != nullptr) {
            return errors::FailedPrecondition(
                "the model's hosted shell call came back without its output");
          }
          absl::StatusOr<json> out = RunLocal(item);
          if (!out.ok()) return out.status();
          next.push_back(std::move(*out));
        } else if (type == "function_call") {
          next.push_back({{"type", "function_call_output"},
                          {"call_id", Str(item, "call_id")},
                          {"output", absl::StrCat("error: there is no function '",
                                                  Str(item, "name"), "'; use the shell tool")}});
        }
      }
    }
    if (!next.empty()) return std::optional<json>(std::move(next));
    if (said_something) return std::optional<json>();
    // Neither a call to answer nor a final word (e.g. the hosted tool-call cap was hit).
    return std::optional<json>(json::array(
        {{{"role", "user"},
          {"content", "Continue the task; reply with a short summary when it is done."}}}));
  }

  absl::StatusOr<json> RunLocal(const json& shell_call) {
    ShellCall call;
    call.commands = Commands(shell_call);
    const json& action = Obj(shell_call, "action");
    call.timeout_ms = Int(action, "timeout_ms");
    call.max_output_length = Int(action, "max_output_length");
    absl::StatusOr<json> outputs =
        RunShellCall(session_, events_, call, task_.command_timeout, cancel_);
    if (!outputs.ok()) return outputs.status();
    json item = {{"type", "shell_call_output"},
                 {"call_id", Str(shell_call, "call_id")},
                 {"output", std::move(*outputs)}};
    item["max_output_length"] =
        call.max_output_length ? json(*call.max_output_length) : json(nullptr);
    return item;
  }

  void CountUsage(const json& usage) {
    const uint64_t in = static_cast<uint64_t>(Int(usage, "input_tokens").value_or(0));
    const uint64_t out = static_cast<uint64_t>(Int(usage, "output_tokens").value_or(0));
    tally_.Add(events_, in, out,
               static_cast<uint64_t>(Int(usage, "total_tokens").value_or(in + out)));
  }

  sandbox::HostedShell* const hosted_;  // the session's; null on a non-hosted session
  const absl::Duration stop_timeout_;   // ModelAgentOptions::stop_timeout
};

}  // namespace

OpenAiAgent::OpenAiAgent(upstream::OpenAiClient* client, ModelAgentOptions options)
    : client_(client), options_(std::move(options)) {}

absl::Status OpenAiAgent::Run(const AgentTask& task, sandbox::Session& session, EventSink& events,
                              const CancelToken& cancel) {
  absl::StatusOr<ModelChoice> choice =
      ChooseModel(task, options_.default_model, options_.max_turns, "openai");
  if (!choice.ok()) return choice.status();
  // On the openai-agents provider the Agents API runs the model's loop itself.
  if (sandbox::HostedAgent* hosted = session.hosted_agent()) {
    return RunHostedAgent(*hosted, task, choice->model, events, cancel);
  }
  OpenAiRun run(client_, task, session, events, cancel, std::move(*choice), options_.stop_timeout);
  return run.Run();
}

}  // namespace sandgate::agent
