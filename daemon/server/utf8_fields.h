// EscapeStringFields: the last guard before a message leaves the daemon. Every proto3
// `string` field must be valid UTF-8 or the peer cannot parse the message at all (a C++
// client reports "UNIMPLEMENTED: No message returned"); text that sandbox code shaped (check
// details quoting its output, reasons quoting its file names, network hosts it asked for)
// reaches many fields through core/. This walks a message and escapes each string field's
// invalid bytes as \xNN (common/utf8.h); `bytes` fields are left alone.
//
// CheckNoNul is the first guard on the way in, the same on both faces: a NUL in a request's
// own string fields (its ids, paths, names, page tokens) is INVALID_ARGUMENT naming the field,
// as the REST face refuses a %00 in its path or query (server/http_request.h) before any
// lookup could answer NOT_FOUND or quote it.
//
// Thread safe (touches only `message`, which the caller owns).
#ifndef SANDGATE_SERVER_UTF8_FIELDS_H_
#define SANDGATE_SERVER_UTF8_FIELDS_H_

#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace sandgate::server {

// Returns true when something was escaped.
bool EscapeStringFields(google::protobuf::Message* message);

// OK, or INVALID_ARGUMENT "<field>: contains a NUL byte" for the first singular string field
// of `request` (not of its nested messages: core/ names those in its own words) that has one.
absl::Status CheckNoNul(const google::protobuf::Message& request);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_UTF8_FIELDS_H_
