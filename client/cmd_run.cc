// sandgate run FILE ...: starts a run, shows its progress, saves its files and events, and
// prints the daemon's summary of it (client/summary.h).
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/command.h"
#include "client/grammar.h"
#include "client/render.h"
#include "client/summary.h"
#include "client/terminal_text.h"

namespace sandgate::cli {

int CmdRun(Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("run needs exactly one input file");
  const std::string& path = args.positional[0];
  bool json = args.Has("--json");
  v1::RunAnalysisRequest req;
  req.set_playbook(args.Get("--playbook"));
  req.set_agent(args.Get("--agent"));
  req.set_provider(args.Get("--provider"));
  req.set_model(args.Get("--model"));
  req.set_idempotency_key(args.Get("--idempotency-key"));
  int64_t timeout;
  if (int rc = ParseSeconds(args, "--timeout", &timeout)) return rc;
  if (timeout > 0) req.mutable_run_timeout()->set_seconds(timeout);
  if (args.Has("--session")) {
    for (const std::string& flag : SandboxFlags()) {
      if (args.Has(flag))
        return Usage(flag + " does not apply with --session: the run uses that session's sandbox");
    }
    req.set_session_id(args.Get("--session"));
  } else if (int rc = ParseSandbox(args, req.mutable_sandbox())) {
    return rc;
  }
  absl::StatusOr<std::string> content = ReadAll(path);
  if (!content.ok()) return Usage(std::string(content.status().message()));
  auto* in = req.add_inputs();
  in->set_name(BaseName(path));
  in->set_content(*content);

  v1::Run run;
  {
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    grpc::Status st = client.stub().RunAnalysis(&ctx, req, &run);
    if (!st.ok()) return Fail(st);
  }
  FILE* progress = json ? stderr : stdout;
  std::fprintf(progress, "run %s started for %s\n", TerminalSafe(run.id()).c_str(),
               TerminalSafe(in->name()).c_str());
  std::fflush(progress);
  ProgressPrinter printer(progress);
  bool finished = false;
  // What streamed is the whole log (FollowToEnd sees each event once, in order): events.jsonl
  // and the run's end are known from it even if the daemon is gone the moment the run ended,
  // as after a drain.
  std::string jsonl;
  v1::RunFinished ended;
  grpc::Status followed = FollowToEnd(client, run.id(), 0, &finished, [&](const v1::Event& e) {
    if (e.seq() > 0) absl::StrAppend(&jsonl, ToJson(e), "\n");
    if (e.type() == "run.finished") ended = e.run_finished();
    if (json && e.seq() > 0) {
      std::printf("%s\n", ToJson(e).c_str());
      std::fflush(stdout);  // a program reading the pipe sees each event as it happens
    }
    if (!json || e.seq() > 0) printer.Print(e);
  });
  if (!followed.ok()) return Fail(followed);
  if (client.interrupt().fired() && !finished) {
    if (args.Has("--cancel-on-exit")) {
      grpc::ClientContext ctx;
      client.Prepare(&ctx);
      v1::CancelRunRequest creq;
      creq.set_run_id(run.id());
      creq.set_reason("sandgate run interrupted with --cancel-on-exit");
      v1::Run cancelled;
      grpc::Status st = client.stub().CancelRun(&ctx, creq, &cancelled);
      if (!st.ok()) return Fail(st);
      std::fprintf(stderr, "\ncancelled run %s\n", TerminalSafe(run.id()).c_str());
    } else {
      std::fprintf(stderr,
                   "\ndetached; the run goes on. Follow it with: sandgate events %s --follow\n",
                   TerminalSafe(run.id()).c_str());
    }
    return kExitDetached;
  }
  // The run has ended: from here a failing call is a warning, and the exit code follows the
  // run's status (or says that its files are not all there).
  bool saved_all = true;
  auto warn = [&](absl::string_view what, const absl::Status& st) {
    std::fprintf(stderr, "sandgate run: warning: %s: %s\n", std::string(what).c_str(),
                 TerminalSafe(absl::StrCat(absl::StatusCodeToString(st.code()), ": ", st.message()))
                     .c_str());
    saved_all = false;
  };
  {
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    v1::GetRunRequest greq;
    greq.set_run_id(run.id());
    v1::Run record;
    grpc::Status st = client.stub().GetRun(&ctx, greq, &record);
    if (st.ok()) {
      run = std::move(record);
    } else {
      warn("the run ended, but its record could not be read, so its artifacts are not downloaded",
           FromGrpc(st));
      run.set_status(ended.status());
      run.set_status_reason(ended.reason());
      *run.mutable_summary() = ended.summary();
      run.clear_artifacts();
    }
  }
  std::string dir = args.Get("--out", "sandgate-" + run.id());
  if (!MakeDirs(dir)) return Usage("cannot create output directory " + dir);
  if (absl::Status st = WriteFileAtomically(dir + "/events.jsonl", jsonl); !st.ok()) {
    warn("events.jsonl", st);
  }
  if (absl::Status st = DownloadArtifacts(client, run, dir); !st.ok()) {
    if (client.interrupt().fired()) return kExitDetached;
    warn("the artifacts", st);
  }
  if (json) {
    std::printf("%s\n", ToJson(run).c_str());
  } else {
    // Whatever the playbook found, as the daemon summarised it: the CLI knows no playbook.
    std::fputs(RenderSummary(run.summary(), dir).c_str(), stdout);
    std::printf("\n%s: %zu artifacts and events.jsonl in %s/\n", StatusName(run.status()).c_str(),
                static_cast<size_t>(run.artifacts_size()), TerminalSafe(dir).c_str());
    if (!run.status_reason().empty())
      std::printf("reason: %s\n", TerminalSafe(run.status_reason()).c_str());
  }
  return run.status() == v1::RUN_STATUS_SUCCEEDED && saved_all ? 0 : kExitRunFailed;
}

}  // namespace sandgate::cli
