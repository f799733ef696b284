// sandgate admin ...: the operators' commands.
#include <cstdio>

#include "absl/strings/numbers.h"
#include "client/command.h"

namespace sandgate::cli {

// sandgate admin drain | purge --older-than-hours N   (operator tokens only)
int CmdAdmin(Client& client, const std::string& sub, const Args& args) {
  if (!args.positional.empty()) return Usage("takes no arguments");
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  if (sub == "drain") {
    v1::DrainResponse resp;
    grpc::Status st = client.stub().Drain(&ctx, v1::DrainRequest(), &resp);
    if (!st.ok()) return Fail(st);
    std::printf("draining: %u active runs are being cancelled; the daemon exits when done\n",
                resp.active_runs());
    return 0;
  }
  double hours;
  if (!absl::SimpleAtod(args.Get("--older-than-hours", ""), &hours) || hours < 0) {
    return Usage("purge needs --older-than-hours N (0 or more)");
  }
  v1::PurgeRequest req;
  req.mutable_older_than()->set_seconds(static_cast<int64_t>(hours * 3600));
  v1::PurgeResponse resp;
  grpc::Status st = client.stub().Purge(&ctx, req, &resp);
  if (!st.ok()) return Fail(st);
  std::printf("purged %u runs\n", resp.runs_deleted());
  return 0;
}

}  // namespace sandgate::cli
