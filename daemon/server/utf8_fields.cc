#include "server/utf8_fields.h"

#include <google/protobuf/descriptor.h>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/utf8.h"

namespace sandgate::server {

using google::protobuf::FieldDescriptor;

bool EscapeStringFields(google::protobuf::Message* message) {
  const google::protobuf::Reflection* r = message->GetReflection();
  std::vector<const FieldDescriptor*> set;
  r->ListFields(*message, &set);
  bool changed = false;
  for (const FieldDescriptor* f : set) {
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*message, f); ++i) {
          const std::string& v = r->GetRepeatedStringReference(*message, f, i, nullptr);
          if (IsValidUtf8(v)) continue;
          r->SetRepeatedString(message, f, i, EscapeInvalidUtf8(v));
          changed = true;
        }
      } else {
        const std::string& v = r->GetStringReference(*message, f, nullptr);
        if (IsValidUtf8(v)) continue;
        r->SetString(message, f, EscapeInvalidUtf8(v));
        changed = true;
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      // Maps (labels, env) come from requests, which gRPC parsed as valid UTF-8; their
      // entries cannot be rewritten through reflection without breaking the map.
      if (f->is_map()) continue;
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*message, f); ++i) {
          changed |= EscapeStringFields(r->MutableRepeatedMessage(message, f, i));
        }
      } else {
        changed |= EscapeStringFields(r->MutableMessage(message, f));
      }
    }
  }
  return changed;
}

absl::Status CheckNoNul(const google::protobuf::Message& request) {
  const google::protobuf::Reflection* r = request.GetReflection();
  std::vector<const FieldDescriptor*> set;
  r->ListFields(request, &set);
  for (const FieldDescriptor* f : set) {
    if (f->type() != FieldDescriptor::TYPE_STRING || f->is_repeated()) continue;
    if (r->GetStringReference(request, f, nullptr).find('\0') != std::string::npos) {
      return errors::InvalidArgument(absl::StrCat(f->name(), ": contains a NUL byte"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sandgate::server
