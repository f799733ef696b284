#include "agent/shell_output.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/utf8.h"

namespace sandgate::agent {
namespace {

// Byte offset of the character `chars` characters into valid UTF-8 `text` (or its size).
size_t ByteOffset(absl::string_view text, size_t chars) {
  size_t i = 0;
  while (i < text.size() && chars > 0) {
    ++i;
    while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) ++i;
    --chars;
  }
  return i;
}

}  // namespace

std::string Utf8Clean(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.data() + i, n);
      i += n;
    }
  }
  return out;
}

size_t Utf8Length(absl::string_view text) {
  size_t n = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string HeadTail(absl::string_view text, size_t budget) {
  const size_t len = Utf8Length(text);
  if (len <= budget) return std::string(text);
  std::string marker;
  size_t keep = budget;
  if (budget >= 64) {
    // The omitted count depends on the marker's own length; one fixed point is enough.
    marker = absl::StrCat("\n[… ", len - budget, " characters omitted …]\n");
    size_t m = Utf8Length(marker);
    marker = absl::StrCat("\n[… ", len - (budget - m), " characters omitted …]\n");
    m = Utf8Length(marker);
    keep = budget > m ? budget - m : 0;
  }
  const size_t head = keep / 2;
  const size_t tail = keep - head;
  return absl::StrCat(text.substr(0, ByteOffset(text, head)), marker,
                      text.substr(ByteOffset(text, len - tail)));
}

bool CapCombined(std::string* out, std::string* err, size_t max_chars) {
  const size_t out_len = Utf8Length(*out), err_len = Utf8Length(*err);
  if (out_len + err_len <= max_chars) return false;
  size_t err_budget = std::min(err_len, max_chars / 2);
  const size_t out_budget = std::min(out_len, max_chars - err_budget);
  err_budget = std::min(err_len, max_chars - out_budget);
  *out = HeadTail(*out, out_budget);
  *err = HeadTail(*err, err_budget);
  return true;
}

namespace {

// Passes events through and keeps the output of the command being run.
class CapturingSink : public EventSink {
 public:
  explicit CapturingSink(EventSink& next) : next_(next) {}
  void Emit(v1::Event event) override {
    if (event.has_command_output()) {
      std::string& to =
          event.command_output().stream() == v1::CommandOutput::STREAM_STDERR ? err : out;
      to += event.command_output().data();
    }
    next_.Emit(std::move(event));
  }
  uint32_t NextCommandId() override { return next_.NextCommandId(); }
  std::string out, err;

 private:
  EventSink& next_;
};

}  // namespace

absl::StatusOr<nlohmann::json> RunShellCall(sandbox::Session& session, EventSink& events,
                                            const ShellCall& call, absl::Duration command_timeout,
                                            const CancelToken& cancel) {
  nlohmann::json outputs = nlohmann::json::array();
  for (const std::string& command : call.commands) {
    if (cancel.cancelled()) return errors::Cancelled(cancel.reason());
    sandbox::ExecRequest request;
    request.argv = sandbox::ShellCommand(command);
    request.timeout = command_timeout;
    if (call.timeout_ms.has_value() && *call.timeout_ms > 0) {
      request.timeout = std::min(command_timeout, absl::Milliseconds(*call.timeout_ms));
    }
    CapturingSink sink(events);
    absl::StatusOr<sandbox::ExecResult> result =
        ExecWithEvents(session, sink, "agent", request, cancel);
    if (!result.ok()) {
      return absl::Status(
          result.status().code(),
          absl::StrCat("running a shell command for the model: ", result.status().message()));
    }
    if (result->cancelled || cancel.cancelled()) return errors::Cancelled(cancel.reason());
    std::string out = Utf8Clean(sink.out), err = Utf8Clean(sink.err);
    nlohmann::json outcome;
    if (result->timed_out) {
      outcome = {{"type", "timeout"}};
    } else if (result->term_signal != 0) {
      absl::StrAppend(&err, err.empty() || err.back() == '\n' ? "" : "\n", "[",
                      DescribeExit(*result, request.timeout), "]\n");
      outcome = {{"type", "exit"}, {"exit_code", 128 + result->term_signal}};
    } else {
      outcome = {{"type", "exit"}, {"exit_code", result->exit_code}};
    }
    size_t cap = kDefaultMaxOutputChars;
    if (call.max_output_length.has_value() && *call.max_output_length >= 0) {
      cap = static_cast<size_t>(*call.max_output_length);
    }
    CapCombined(&out, &err, cap);
    outputs.push_back(
        {{"stdout", std::move(out)}, {"stderr", std::move(err)}, {"outcome", outcome}});
  }
  return outputs;
}

}  // namespace sandgate::agent
