#include "common/memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace sandgate {

void ReleaseFreeMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace sandgate
