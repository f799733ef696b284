// The openai provider's options, shared by the provider (openai_provider.h) and the sessions it
// makes (openai_session.h). A plain struct; OpenAiProvider::Create checks it.
#ifndef SANDGATE_SANDBOX_OPENAI_OPENAI_OPTIONS_H_
#define SANDGATE_SANDBOX_OPENAI_OPENAI_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"

namespace sandgate::sandbox {

struct OpenAiProviderOptions {
  // The smallest container memory_limit asked for ("1g", "4g", "16g" or "64g").
  std::string memory_limit = "1g";
  // The container's idle expiry (anchor last_active_at).
  int expires_after_minutes = 20;
  // How often a held session's keeper touches its container; must be below expires_after.
  absl::Duration keepalive_interval = absl::Minutes(5);
  // The model the keeper asks to run `true` in a held container when listing its files does
  // not refresh last_active_at. Empty: no such fallback (the keeper can then only report that
  // it cannot extend the container).
  std::string keepalive_model;
  // Largest file WriteFile uploads.
  uint64_t max_file_bytes = 64ull << 20;
  // How long after a create was last in flight (sent, or given up on) upstream may still
  // carry it out: until then a sweep by name that finds nothing answers UNAVAILABLE (ask
  // again) instead of giving up. A create upstream answered slowly enough for us to give up
  // on may land well after that, so this is a minute, not seconds.
  absl::Duration create_settle = absl::Seconds(60);
  // How often the provider looks again, by name, for the container of a failed create whose
  // create may still land (until create_settle has passed).
  absl::Duration recheck_interval = absl::Seconds(2);
  // The time of journaled requests and of the create_settle check, and the waits of the keeper
  // and of the look for a failed create's container.
  // Null: Clock::Real(). Not owned; outlives the provider.
  Clock* clock = nullptr;
};
}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_OPENAI_OPENAI_OPTIONS_H_
