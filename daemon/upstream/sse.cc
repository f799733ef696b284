#include "upstream/sse.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::upstream {

absl::Status SseParser::Feed(absl::string_view chunk, std::vector<SseEvent>* out) {
  size_t start = 0;
  for (size_t i = 0; i < chunk.size(); ++i) {
    const char c = chunk[i];
    if (c != '\r' && c != '\n') continue;
    const bool lf_after_cr = c == '\n' && last_was_cr_ && i == start && line_.empty();
    last_was_cr_ = c == '\r';
    if (lf_after_cr) {
      // The LF of a CRLF whose CR ended the previous line (possibly in the previous chunk).
      start = i + 1;
      continue;
    }
    line_.append(chunk.data() + start, i - start);
    start = i + 1;
    std::string line = std::move(line_);
    line_.clear();
    SANDGATE_RETURN_IF_ERROR(ProcessLine(line, out));
  }
  if (start < chunk.size()) {
    last_was_cr_ = false;
    line_.append(chunk.data() + start, chunk.size() - start);
    if (line_.size() > max_event_bytes_) {
      return errors::ResourceExhausted(
          absl::StrCat("event-stream line longer than ", max_event_bytes_, " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::Status SseParser::Finish(std::vector<SseEvent>* out) {
  if (!line_.empty()) {
    std::string line = std::move(line_);
    line_.clear();
    SANDGATE_RETURN_IF_ERROR(ProcessLine(line, out));
  }
  Dispatch(out);
  last_was_cr_ = false;
  at_stream_start_ = true;
  last_id_.clear();
  return absl::OkStatus();
}

absl::Status SseParser::ProcessLine(absl::string_view line, std::vector<SseEvent>* out) {
  if (at_stream_start_) {
    at_stream_start_ = false;
    absl::ConsumePrefix(&line, "\xEF\xBB\xBF");
  }
  if (line.empty()) {
    Dispatch(out);
    return absl::OkStatus();
  }
  if (line.front() == ':') return absl::OkStatus();  // comment (keep-alives are sent as these)

  absl::string_view field = line;
  absl::string_view value;
  if (size_t colon = line.find(':'); colon != absl::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    absl::ConsumePrefix(&value, " ");
  }
  if (field == "event") {
    event_ = std::string(value);
    have_fields_ = true;
  } else if (field == "data") {
    if (have_data_) data_.push_back('\n');
    data_.append(value.data(), value.size());
    have_data_ = true;
    have_fields_ = true;
    if (data_.size() > max_event_bytes_) {
      return errors::ResourceExhausted(
          absl::StrCat("event-stream event larger than ", max_event_bytes_, " bytes"));
    }
  } else if (field == "id") {
    // A NUL in the id is ignored by the WHATWG grammar.
    if (!absl::StrContains(value, '\0')) last_id_ = std::string(value);
  }
  // "retry" and unknown fields are ignored: reconnection is the caller's business.
  return absl::OkStatus();
}

void SseParser::Dispatch(std::vector<SseEvent>* out) {
  if (have_fields_) {
    out->push_back(SseEvent{std::move(event_), std::move(data_), last_id_});
  }
  event_.clear();
  data_.clear();
  have_fields_ = false;
  have_data_ = false;
}

}  // namespace sandgate::upstream
