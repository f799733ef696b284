// `sandgate session expose|unexpose|ports` (docs/sessions.md "Exposed ports").
#include "client/cmd_ports.h"

#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/render.h"
#include "client/terminal_text.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::cli {
namespace {

using google::protobuf::util::TimeUtil;

// A port argument: 1..65535, or a usage error naming it.
bool ParsePortArg(const std::string& text, uint32_t* port) {
  return absl::SimpleAtoi(text, port) && *port >= 1 && *port <= 65535 &&
         text.find_first_not_of("0123456789") == std::string::npos;
}

// "10m", "1h30m", "90s" or plain seconds ("600").
bool ParseTtl(const std::string& text, absl::Duration* d) {
  int64_t seconds = 0;
  if (absl::SimpleAtoi(text, &seconds)) {
    *d = absl::Seconds(seconds);
    return seconds > 0;
  }
  return absl::ParseDuration(text, d) && *d > absl::ZeroDuration();
}

void PrintPort(const v1::ExposedPort& p, bool json) {
  if (json) {
    std::printf("%s\n", ToJson(p).c_str());
    return;
  }
  std::printf("%-6u %4u  %s\n", p.port(), p.open_connections(), TerminalSafe(p.url()).c_str());
}

}  // namespace

int SessionExpose(Client& client, const Args& args) {
  uint32_t port = 0;
  if (args.positional.size() != 2) return Usage("needs ID PORT");
  if (!ParsePortArg(args.positional[1], &port)) {
    return Usage(absl::StrCat("PORT: expected a number 1..65535, got '",
                              TerminalSafe(args.positional[1]), "'"));
  }
  v1::ExposePortRequest req;
  req.set_session_id(args.positional[0]);
  req.set_port(port);
  if (std::string ttl = args.Get("--ttl"); !ttl.empty()) {
    if (!args.Has("--signed")) return Usage("--ttl: only with --signed");
    absl::Duration d;
    if (!ParseTtl(ttl, &d)) {
      return Usage(
          absl::StrCat("--ttl: expected a duration (10m, 1h, 600), got '", TerminalSafe(ttl), "'"));
    }
    *req.mutable_signed_ttl() = TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(d));
  }
  req.set_signed_url(args.Has("--signed"));
  v1::ExposedPort resp;
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  grpc::Status st = client.stub().ExposePort(&ctx, req, &resp);
  if (!st.ok()) return Fail(st);
  if (args.Has("--json")) {
    std::printf("%s\n", ToJson(resp).c_str());
    return 0;
  }
  // The signed URL alone when asked for one (it needs no token); else the tenant's URL.
  std::printf("%s\n", TerminalSafe(args.Has("--signed") ? resp.signed_url() : resp.url()).c_str());
  if (args.Has("--signed")) {
    std::fprintf(stderr, "expires %s\n", TimeUtil::ToString(resp.signed_expires_at()).c_str());
  }
  return 0;
}

int SessionUnexpose(Client& client, const Args& args) {
  uint32_t port = 0;
  if (args.positional.size() != 2) return Usage("needs ID PORT");
  if (!ParsePortArg(args.positional[1], &port)) {
    return Usage(absl::StrCat("PORT: expected a number 1..65535, got '",
                              TerminalSafe(args.positional[1]), "'"));
  }
  v1::UnexposePortRequest req;
  req.set_session_id(args.positional[0]);
  req.set_port(port);
  v1::UnexposePortResponse resp;
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  grpc::Status st = client.stub().UnexposePort(&ctx, req, &resp);
  return st.ok() ? 0 : Fail(st);
}

int SessionPorts(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("needs exactly one session id");
  v1::ListPortsRequest req;
  req.set_session_id(args.positional[0]);
  v1::ListPortsResponse resp;
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  grpc::Status st = client.stub().ListPorts(&ctx, req, &resp);
  if (!st.ok()) return Fail(st);
  const bool json = args.Has("--json");
  if (!json) std::printf("%-6s %4s  %s\n", "PORT", "OPEN", "URL");
  for (const auto& p : resp.ports()) PrintPort(p, json);
  return 0;
}

}  // namespace sandgate::cli
