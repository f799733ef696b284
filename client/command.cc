#include "client/command.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/connection.h"
#include "client/grammar.h"
#include "client/render.h"
#include "client/terminal_text.h"
#include "common/sha256.h"

namespace sandgate::cli {

std::string& CommandName() {
  static std::string* const name = new std::string("sandgate");
  return *name;
}

int Usage(const std::string& msg) {
  std::string where = CommandName() == "sandgate" ? "sandgate" : "sandgate " + CommandName();
  std::fprintf(stderr, "%s: %s\n(see %s --help)\n", where.c_str(), TerminalSafe(msg).c_str(),
               where.c_str());
  return kExitUsage;
}

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

int Fail(const absl::Status& status) {
  const absl::Status s = ExplainConnectionFailure(status, LastChannelKind(), LastHandshakeError());
  std::string msg(s.message());
  std::vector<std::string> not_found = absl::StrSplit(msg, absl::MaxSplits(" not found: ", 1));
  if (s.code() == absl::StatusCode::kNotFound && not_found.size() == 2) {
    msg = absl::StrCat("NOT_FOUND: no ", not_found[0], " ", not_found[1]);
  } else if (s.code() != absl::StatusCode::kDataLoss) {
    msg = absl::StrCat(absl::StatusCodeToString(s.code()), ": ", msg);
  }
  std::fprintf(stderr, "sandgate %s: %s\n", CommandName().c_str(), TerminalSafe(msg).c_str());
  // A download that does not match its hash is not a usage problem: the files are not good.
  return s.code() == absl::StatusCode::kDataLoss ? kExitRunFailed : kExitUsage;
}
int Fail(const grpc::Status& s) { return Fail(FromGrpc(s)); }

bool MakeDirs(const std::string& dir) {
  std::string partial;
  for (const auto& part : absl::StrSplit(dir, '/')) {
    partial += std::string(part) + "/";
    if (part.empty() || part == ".") continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& data) {
  absl::StatusOr<std::unique_ptr<DownloadSink>> sink = DownloadSink::Create(path);
  if (!sink.ok()) return sink.status();
  if (absl::Status st = (*sink)->Add(data, data.size(), Sha256::Hex(data)); !st.ok()) return st;
  return (*sink)->Commit();
}

grpc::Status FollowEvents(Client& client, Interrupt* interrupt, const std::string& run_id,
                          int64_t after, bool follow,
                          const std::function<void(const v1::Event&)>& on_event) {
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  Watching watching(interrupt, &ctx);
  v1::StreamEventsRequest req;
  req.set_run_id(run_id);
  req.set_after_seq(after);
  req.set_follow(follow);
  auto reader = client.stub().StreamEvents(&ctx, req);
  v1::Event e;
  while (reader->Read(&e)) on_event(e);
  return reader->Finish();
}

absl::Duration ReconnectWindow() {
  const char* text = std::getenv("SANDGATE_RECONNECT_TIMEOUT");
  double seconds = 0;
  if (text != nullptr && absl::SimpleAtod(text, &seconds) && seconds > 0) {
    return absl::Seconds(seconds);
  }
  return absl::Seconds(60);
}

grpc::Status FollowToEnd(Client& client, const std::string& run_id, int64_t after, bool* finished,
                         const std::function<void(const v1::Event&)>& on_event) {
  // docs/client-contract.md, "Resume after a broken stream": reopen from the last seq until
  // nothing has come from the daemon for the reconnect window, pausing 0.1 s doubling to 1 s.
  const absl::Duration window = ReconnectWindow();
  int64_t last = after;
  *finished = false;
  absl::Time heard = absl::Now();
  absl::Duration pause = absl::Milliseconds(100);
  bool said = false;
  for (;;) {
    grpc::Status st =
        FollowEvents(client, &client.interrupt(), run_id, last, true, [&](const v1::Event& e) {
          heard = absl::Now();
          pause = absl::Milliseconds(100);
          said = false;
          if (e.seq() > 0 && e.seq() <= last) return;  // delivered before the stream broke
          if (e.seq() > 0) last = e.seq();
          if (e.type() == "run.finished") *finished = true;
          on_event(e);
        });
    if (client.interrupt().fired()) return grpc::Status::OK;
    // The daemon ends a follow with OK only at the log's end: after its terminal event, or at
    // once when `last` is already at or past it (the run ended before the follow began).
    if (st.ok() || *finished) return grpc::Status::OK;
    // Not interrupted here, so a CANCELLED came from a server shutting down.
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE &&
        st.error_code() != grpc::StatusCode::CANCELLED) {
      return st;
    }
    if (absl::Now() - heard >= window) {
      return grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("run ", run_id, ": the event stream broke (", st.error_message(),
                       ") and did not resume within ", absl::FormatDuration(window)));
    }
    if (!said) {
      std::fprintf(stderr, "sandgate: the daemon is unavailable (%s); reconnecting…\n",
                   TerminalSafe(st.error_message()).c_str());
      said = true;
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Seconds(1));
  }
}

absl::Status DownloadArtifacts(Client& client, const v1::Run& run, const std::string& dir) {
  for (const v1::Artifact& a : run.artifacts()) {
    if (a.name().empty() || a.name() == "." || a.name() == ".." ||
        absl::StrContains(a.name(), '/')) {
      return absl::DataLossError(
          absl::StrCat("the daemon named an artifact '", a.name(), "'; not a file name"));
    }
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    Watching watching(&client.interrupt(), &ctx);
    v1::DownloadArtifactRequest req;
    req.set_run_id(run.id());
    req.set_name(a.name());
    auto reader = client.stub().DownloadArtifact(&ctx, req);
    if (absl::Status st = ReceiveFile(ctx, *reader, dir + "/" + a.name(), a.sha256()); !st.ok())
      return st;
  }
  return absl::OkStatus();
}

absl::Status Download(Client& client, const v1::Run& run, const std::string& dir) {
  if (absl::Status st = DownloadArtifacts(client, run, dir); !st.ok()) return st;
  std::string jsonl;
  grpc::Status st =
      FollowEvents(client, &client.interrupt(), run.id(), 0, false,
                   [&](const v1::Event& e) { absl::StrAppend(&jsonl, ToJson(e), "\n"); });
  if (!st.ok()) return FromGrpc(st);
  return WriteFileAtomically(dir + "/events.jsonl", jsonl);
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::string data;
  absl::Status st = ReadFileChunks(path, 1 << 20, [&](absl::string_view chunk) {
    data.append(chunk.data(), chunk.size());
    return true;
  });
  if (!st.ok()) return st;
  return data;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int ParseSeconds(const Args& args, const std::string& flag, int64_t* seconds) {
  *seconds = 0;
  if (!args.Has(flag)) return 0;
  if (!absl::SimpleAtoi(args.Get(flag), seconds) || *seconds <= 0) {
    return Usage(flag + " needs a positive number of seconds");
  }
  return 0;
}

int ParseEnv(const Args& args, google::protobuf::Map<std::string, std::string>* env) {
  for (const std::string& kv : args.All("--env")) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Usage("--env needs NAME=VALUE, got '" + kv + "'");
    }
    (*env)[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return 0;
}

int ParseSandbox(const Args& args, v1::SandboxSpec* sandbox) {
  if (int rc = ParseEnv(args, sandbox->mutable_env())) return rc;
  for (const std::string& cmd : args.All("--setup")) sandbox->add_setup_commands(cmd);
  if (args.Has("--network")) {
    std::string mode = args.Get("--network");
    v1::NetworkPolicy::Mode m;
    if (mode == "disabled") {
      m = v1::NetworkPolicy::MODE_DISABLED;
    } else if (mode == "restricted") {
      m = v1::NetworkPolicy::MODE_RESTRICTED;
    } else if (mode == "enabled") {
      m = v1::NetworkPolicy::MODE_ENABLED;
    } else {
      return Usage("--network takes disabled, restricted or enabled, got '" + mode + "'");
    }
    sandbox->mutable_network()->set_mode(m);
  }
  for (const std::string& d : args.All("--allow"))
    sandbox->mutable_network()->add_allowed_domains(d);
  if (args.Has("--isolation")) {
    const std::string level = args.Get("--isolation");
    if (level != "namespaces" && level != "gvisor") {
      return Usage("--isolation takes namespaces or gvisor, got '" + level + "'");
    }
    sandbox->set_isolation(level);
  }
  if (args.Has("--image")) sandbox->set_image(args.Get("--image"));
  struct MibFlag {
    const char* flag;
    void (v1::SandboxSpec::*set)(uint64_t);
  };
  for (const MibFlag& m : {MibFlag{"--memory-mib", &v1::SandboxSpec::set_memory_bytes},
                           MibFlag{"--workspace-mib", &v1::SandboxSpec::set_workspace_bytes}}) {
    if (!args.Has(m.flag)) continue;
    uint64_t mib;
    if (!absl::SimpleAtoi(args.Get(m.flag), &mib) || mib == 0 || mib > (1ull << 40))
      return Usage(std::string(m.flag) + " needs a positive number");
    (sandbox->*m.set)(mib << 20);
  }
  struct DurationFlag {
    const char* flag;
    google::protobuf::Duration* (v1::SandboxSpec::*field)();
  };
  for (const DurationFlag& d :
       {DurationFlag{"--idle", &v1::SandboxSpec::mutable_idle_timeout},
        DurationFlag{"--lifetime", &v1::SandboxSpec::mutable_max_lifetime},
        DurationFlag{"--command-timeout", &v1::SandboxSpec::mutable_command_timeout}}) {
    int64_t seconds;
    if (int rc = ParseSeconds(args, d.flag, &seconds)) return rc;
    if (seconds > 0) (sandbox->*d.field)()->set_seconds(seconds);
  }
  return 0;
}

int GetRun(Client& client, const std::string& id, v1::Run* run) {
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  v1::GetRunRequest req;
  req.set_run_id(id);
  grpc::Status st = client.stub().GetRun(&ctx, req, run);
  return st.ok() ? 0 : Fail(st);
}

}  // namespace sandgate::cli
