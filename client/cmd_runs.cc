// The commands about runs that exist: events, runs, get, cancel, download.
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/command.h"
#include "client/render.h"
#include "client/terminal_text.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::cli {

int CmdEvents(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("events needs a run id");
  int64_t after = 0;
  if (args.Has("--after") && (!absl::SimpleAtoi(args.Get("--after"), &after) || after < 0)) {
    return Usage("--after needs a whole number");
  }
  bool json = args.Has("--json");
  ProgressPrinter printer(stdout);
  auto print = [&](const v1::Event& e) {
    if (e.seq() == 0) return;  // heartbeats
    std::string text = json ? ToJson(e) + "\n" : printer.Render(e);
    if (text.empty()) return;  // nothing to show: no number either
    if (!json) {
      // The seq on the event's first line; its further lines (a command's output, a
      // model's paragraphs) indented under it.
      text = absl::StrCat(absl::StrFormat("%4d ", e.seq()),
                          absl::StrReplaceAll(text, {{"\n", "\n     "}}));
      text.resize(text.size() - 5);
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  bool finished = false;
  // --follow rides out a daemon restart as `run` does.
  grpc::Status st =
      args.Has("--follow")
          ? FollowToEnd(client, args.positional[0], after, &finished, print)
          : FollowEvents(client, &client.interrupt(), args.positional[0], after, false, print);
  if (client.interrupt().fired()) return kExitDetached;
  return st.ok() ? 0 : Fail(st);
}

int CmdRuns(Client& client, const Args& args) {
  uint32_t limit = 20;
  if (args.Has("--limit") && !absl::SimpleAtoi(args.Get("--limit"), &limit))
    return Usage("--limit needs a number");
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  v1::ListRunsRequest req;
  req.set_page_size(limit);
  v1::ListRunsResponse resp;
  grpc::Status st = client.stub().ListRuns(&ctx, req, &resp);
  if (!st.ok()) return Fail(st);
  if (args.Has("--json")) {
    for (const auto& r : resp.runs()) std::printf("%s\n", ToJson(r).c_str());
    return 0;
  }
  std::printf("%-22s %-10s %-18s %-24s %s\n", "RUN", "STATUS", "PLAYBOOK", "CREATED", "INPUTS");
  for (const auto& r : resp.runs()) {
    std::printf("%-22s %-10s %-18s %-24s %s\n", TerminalSafe(r.id()).c_str(),
                StatusName(r.status()).c_str(), TerminalSafe(r.playbook()).c_str(),
                google::protobuf::util::TimeUtil::ToString(r.created_at()).substr(0, 19).c_str(),
                TerminalSafe(absl::StrJoin(r.input_names(), ",")).c_str());
  }
  return 0;
}

int CmdGet(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("get needs a run id");
  v1::Run run;
  if (int rc = GetRun(client, args.positional[0], &run)) return rc;
  if (args.Has("--json")) {
    std::printf("%s\n", ToJson(run).c_str());
  } else {
    PrintRun(stdout, run);
  }
  return 0;
}

int CmdCancel(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("cancel needs a run id");
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  v1::CancelRunRequest req;
  req.set_run_id(args.positional[0]);
  req.set_reason(args.Get("--reason"));
  v1::Run run;
  grpc::Status st = client.stub().CancelRun(&ctx, req, &run);
  if (!st.ok()) return Fail(st);
  std::printf("run %s: %s\n", TerminalSafe(run.id()).c_str(), StatusName(run.status()).c_str());
  return 0;
}

int CmdDownload(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("download needs a run id");
  v1::Run run;
  if (int rc = GetRun(client, args.positional[0], &run)) return rc;
  std::string dir = args.Get("--out", "sandgate-" + run.id());
  if (!MakeDirs(dir)) return Usage("cannot create output directory " + dir);
  if (absl::Status st = Download(client, run, dir); !st.ok()) return Fail(st);
  std::printf("%d artifacts and events.jsonl in %s/\n", run.artifacts_size(),
              TerminalSafe(dir).c_str());
  return 0;
}

}  // namespace sandgate::cli
