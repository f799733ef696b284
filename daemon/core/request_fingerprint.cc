#include "core/request_fingerprint.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/sha256.h"
#include "google/protobuf/descriptor.h"

namespace sandgate::core {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Every value goes in as a type tag, its length and its bytes, so no two
// different requests hash alike. A message value goes in as its own digest (a
// hash tree): its length is known before it is read, and large contents
// (inputs) are hashed in place, never copied.
void Put(Sha256& h, char tag, absl::string_view bytes) {
  char head[9] = {tag};
  const uint64_t n = bytes.size();
  for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
  h.Update(absl::string_view(head, sizeof(head)));
  h.Update(bytes);
}

std::string Digest(const Message& m, bool top);

// One value of `f` (element `index` of a repeated field, or -1).
void PutValue(Sha256& h, const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      Put(h, 'i', absl::StrCat(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f)));
      return;
    case FieldDescriptor::CPPTYPE_INT64:
      Put(h, 'i', absl::StrCat(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f)));
      return;
    case FieldDescriptor::CPPTYPE_UINT32:
      Put(h, 'u', absl::StrCat(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f)));
      return;
    case FieldDescriptor::CPPTYPE_UINT64:
      Put(h, 'u', absl::StrCat(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f)));
      return;
    case FieldDescriptor::CPPTYPE_BOOL:
      Put(h, 'b', (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "1" : "0");
      return;
    case FieldDescriptor::CPPTYPE_ENUM:
      Put(h, 'e', absl::StrCat(rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f)));
      return;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      Put(h, 'd', absl::StrCat(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f)));
      return;
    case FieldDescriptor::CPPTYPE_FLOAT:
      Put(h, 'f', absl::StrCat(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f)));
      return;
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;  // used only for cord fields; a plain field is read in place
      Put(h, 's',
          rep ? r->GetRepeatedStringReference(m, f, index, &scratch)
              : r->GetStringReference(m, f, &scratch));
      return;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      Put(h, 'm',
          Digest(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f),
                 /*top=*/false));
      return;
  }
}

std::string Digest(const Message& m, bool top) {
  Sha256 h;
  Put(h, 'T', m.GetDescriptor()->full_name());
  std::vector<const FieldDescriptor*> fields;
  const Reflection* r = m.GetReflection();
  r->ListFields(m, &fields);  // the set fields, by number
  for (const FieldDescriptor* f : fields) {
    if (top && f->name() == "idempotency_key") continue;
    Put(h, 'F', absl::StrCat(f->number()));
    if (!f->is_repeated()) {
      PutValue(h, m, f, -1);
    } else if (!f->is_map()) {
      Put(h, 'n', absl::StrCat(r->FieldSize(m, f)));
      for (int i = 0; i < r->FieldSize(m, f); ++i) PutValue(h, m, f, i);
    } else {
      // A map's order on the wire means nothing: its entries' digests, sorted.
      std::vector<std::string> entries;
      for (int i = 0; i < r->FieldSize(m, f); ++i)
        entries.push_back(Digest(r->GetRepeatedMessage(m, f, i), false));
      std::sort(entries.begin(), entries.end());
      Put(h, 'n', absl::StrCat(entries.size()));
      for (const std::string& e : entries) Put(h, 'm', e);
    }
  }
  return h.HexDigest();
}

}  // namespace

std::string RequestFingerprint(const Message& request) { return Digest(request, /*top=*/true); }

absl::Status CheckSameRequest(const store::KeyedRecord& found, absl::string_view key,
                              absl::string_view fingerprint) {
  if (found.request_sha256 == fingerprint) return absl::OkStatus();
  if (found.request_sha256.empty()) {
    log::Warning("idempotency.unverified",
                 {{"id", found.id}, {"why", "stored before request fingerprints"}});
    return absl::OkStatus();
  }
  return errors::FailedPrecondition(absl::StrCat("idempotency_key '", key,
                                                 "' was used for a different request (", found.id,
                                                 "); use a new key for a new request"));
}

}  // namespace sandgate::core
