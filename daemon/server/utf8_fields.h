// EscapeStringFields: the last guard before a message leaves the daemon. Every proto3
// `string` field must be valid UTF-8 or the peer cannot parse the message at all (a C++
// client reports "UNIMPLEMENTED: No message returned"); text that sandbox code shaped (check
// details quoting its output, reasons quoting its file names, network hosts it asked for)
// reaches many fields through core/. This walks a message and escapes each string field's
// invalid bytes as \xNN (common/utf8.h); `bytes` fields are left alone.
//
// Thread safe (touches only `message`, which the caller owns).
#ifndef SANDGATE_SERVER_UTF8_FIELDS_H_
#define SANDGATE_SERVER_UTF8_FIELDS_H_

#include <google/protobuf/message.h>

namespace sandgate::server {

// Returns true when something was escaped.
bool EscapeStringFields(google::protobuf::Message* message);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_UTF8_FIELDS_H_
