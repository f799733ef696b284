// The seccomp denylist local sandboxes ran under until issue 22, as BPF for
// BwrapOptions::seccomp_bpf_for_benchmarks: the "before" of bench_security's filter rows.
// Thread safe (pure function).
#ifndef SANDGATE_TESTS_BENCH_SANDBOX_DENYLIST_FILTER_H_
#define SANDGATE_TESTS_BENCH_SANDBOX_DENYLIST_FILTER_H_

#include <string>

#include "absl/status/statusor.h"

namespace sandgate::bench {

absl::StatusOr<std::string> BuildDenylistFilter();

}  // namespace sandgate::bench

#endif  // SANDGATE_TESTS_BENCH_SANDBOX_DENYLIST_FILTER_H_
