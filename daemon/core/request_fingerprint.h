// Request fingerprints: what an idempotency key is bound to.
//
// A fingerprint is a sha256 (hex) over a canonical encoding of a request
// message: every set field except `idempotency_key` itself, in field-number
// order, map entries sorted by key, tagged and length-prefixed so no two
// different requests encode alike (a nested message counts by its own digest).
// It is computed by reflection, so a field added to the request later is
// covered without touching this code (nothing that can change the outcome is
// left out). Inputs and inline files count with their content. The same request
// gives the same fingerprint in every daemon version that has the same fields
// (protobuf's own serialization is not promised to be stable; this is).
//
//   std::string fp = RequestFingerprint(request);
//   SANDGATE_RETURN_IF_ERROR(CheckSameRequest(*found,
//   request.idempotency_key(), fp));
//
// Thread safe (pure).
#ifndef SANDGATE_CORE_REQUEST_FINGERPRINT_H_
#define SANDGATE_CORE_REQUEST_FINGERPRINT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "store/store.h"

namespace sandgate::core {

std::string RequestFingerprint(const google::protobuf::Message& request);

// OK when `found` (the record stored under `key`) was made by a request with
// `fingerprint`; FAILED_PRECONDITION "idempotency_key 'k' was used for a
// different request (run-…)" when not. A record stored before fingerprints were
// kept (empty request_sha256) cannot be compared and counts as the same
// request, as it did then (logged).
absl::Status CheckSameRequest(const store::KeyedRecord& found, absl::string_view key,
                              absl::string_view fingerprint);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_REQUEST_FINGERPRINT_H_
