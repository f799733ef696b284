// SseParser: an incremental Server-Sent Events (text/event-stream) decoder.
//
// Bytes may arrive split anywhere (inside a field name, inside "\r\n", inside a UTF-8
// sequence); the events produced do not depend on where. Follows the WHATWG event-stream
// grammar: lines end in CRLF, LF or CR; "field: value" strips one space after the colon;
// lines starting with ':' are comments; several data: lines join with '\n'; a blank line
// dispatches. `id` is the last event id seen so far, as in the browser API.
//
//   SseParser parser;
//   std::vector<SseEvent> events;
//   SANDGATE_RETURN_IF_ERROR(parser.Feed(chunk, &events));   // for each chunk
//   SANDGATE_RETURN_IF_ERROR(parser.Finish(&events));         // at end of stream
//   for (const SseEvent& e : events) if (!e.IsDone()) Handle(e.event, e.data);
#ifndef SANDGATE_UPSTREAM_SSE_H_
#define SANDGATE_UPSTREAM_SSE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sandgate::upstream {

struct SseEvent {
  std::string event;  // the event: field; empty when none was sent
  std::string data;   // data: lines joined by '\n'
  std::string id;     // the last id: seen on this stream, possibly from an earlier event

  // The OpenAI end-of-stream sentinel `data: [DONE]`.
  bool IsDone() const { return data == "[DONE]"; }
  bool operator==(const SseEvent& o) const {
    return event == o.event && data == o.data && id == o.id;
  }
};

// Not thread safe: one parser per stream, fed from one thread at a time.
class SseParser {
 public:
  // An event or line larger than `max_event_bytes` fails Feed with RESOURCE_EXHAUSTED, so a
  // misbehaving server cannot grow memory without bound.
  explicit SseParser(size_t max_event_bytes = 64 << 20) : max_event_bytes_(max_event_bytes) {}

  // Consumes `chunk` and appends every event it completes to `*out`.
  absl::Status Feed(absl::string_view chunk, std::vector<SseEvent>* out);
  // End of stream: dispatches an event left without its trailing blank line. The parser may
  // be reused afterwards for a new stream.
  absl::Status Finish(std::vector<SseEvent>* out);

 private:
  absl::Status ProcessLine(absl::string_view line, std::vector<SseEvent>* out);
  void Dispatch(std::vector<SseEvent>* out);

  const size_t max_event_bytes_;
  std::string line_;             // the current, unterminated line
  bool last_was_cr_ = false;     // the previous byte ended a line with CR; skip one LF
  bool at_stream_start_ = true;  // a UTF-8 BOM may open the stream
  bool have_fields_ = false;     // the pending event has at least one event:/data: field
  bool have_data_ = false;
  std::string event_;
  std::string data_;
  std::string last_id_;
};

}  // namespace sandgate::upstream

#endif  // SANDGATE_UPSTREAM_SSE_H_
