#include "common/ids.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace sandgate {

std::string RandomHex(size_t bytes) {
  std::vector<char> buf(bytes);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();  // no entropy source: an invariant of any supported kernel is broken
    }
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(buf.data(), buf.size()));
}

}  // namespace sandgate
