// Random identifiers for runs and sessions: lower-case hex from the kernel's CSPRNG, so ids
// are unguessable (a tenant cannot probe for another's runs) and safe in paths and names.
#ifndef SANDGATE_COMMON_IDS_H_
#define SANDGATE_COMMON_IDS_H_

#include <string>

namespace sandgate {

// 2 * bytes hex digits.
std::string RandomHex(size_t bytes);

}  // namespace sandgate

#endif  // SANDGATE_COMMON_IDS_H_
