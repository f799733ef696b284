// sandgate session ...: drives a kept sandbox session (create, list, get, exec, upload,
// download, ls, usage, keepalive, close; the processes' commands are in cmd_process.cc).
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cmd_ports.h"
#include "client/cmd_process.h"
#include "client/cmd_snapshot.h"
#include "client/command.h"
#include "client/grammar.h"
#include "client/render.h"
#include "client/terminal_text.h"
#include "google/protobuf/util/time_util.h"
#include "sandgate/v1/labels.h"

namespace sandgate::cli {
namespace {

constexpr size_t kUploadChunkBytes = 1 << 20;

void PrintSession(const v1::Session& s, bool json) {
  if (json) {
    std::printf("%s\n", ToJson(s).c_str());
    return;
  }
  using google::protobuf::util::TimeUtil;
  std::printf("session    %s\n", TerminalSafe(s.id()).c_str());
  std::printf(
      "status     %s%s\n", v1::SessionStatusLabel(s.status()).c_str(),
      s.status_reason().empty() ? "" : (" (" + TerminalSafe(s.status_reason()) + ")").c_str());
  std::printf("provider   %s  workdir %s  in flight %u\n", TerminalSafe(s.provider()).c_str(),
              TerminalSafe(s.workdir()).c_str(), s.in_flight());
  std::printf("clocks     idle_timeout %s, max_lifetime %s\n",
              TimeUtil::ToString(s.idle_timeout()).c_str(),
              TimeUtil::ToString(s.max_lifetime()).c_str());
  if (s.has_expires_at())
    std::printf("expires    %s unless used\n", TimeUtil::ToString(s.expires_at()).c_str());
  for (const auto& u : s.unenforced()) std::printf("! not enforced: %s\n", TerminalSafe(u).c_str());
}

// `session usage ID`: what the session's cgroups say it uses, as the daemon read them now.
int SessionUsage(Client& client, grpc::ClientContext& ctx, const Args& args) {
  if (args.positional.size() != 1) return Usage("needs exactly one session id");
  v1::GetSessionUsageRequest req;
  req.set_session_id(args.positional[0]);
  v1::SessionUsage u;
  grpc::Status st = client.stub().GetSessionUsage(&ctx, req, &u);
  if (!st.ok()) return Fail(st);
  if (args.Has("--json")) {
    std::printf("%s\n", ToJson(u).c_str());
    return 0;
  }
  using google::protobuf::util::TimeUtil;
  std::printf("session    %s\n", TerminalSafe(u.session_id()).c_str());
  std::printf("memory     %s%s\n", HumanBytes(u.memory_bytes()).c_str(),
              u.memory_limit_bytes() == 0
                  ? " (no limit)"
                  : absl::StrCat(" of ", HumanBytes(u.memory_limit_bytes())).c_str());
  std::printf("cpu time   %s\n", TimeUtil::ToString(u.cpu_time()).c_str());
  std::printf("processes  %llu\n", static_cast<unsigned long long>(u.processes()));
  std::printf("sampled    %s\n", TimeUtil::ToString(u.sampled_at()).c_str());
  for (const auto& why : u.unmeasured()) {
    std::printf("! not measured: %s\n", TerminalSafe(why).c_str());
  }
  return 0;
}

int SessionExec(Client& client, grpc::ClientContext& ctx, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  if (p.size() < 2) return Usage("needs a session id and a command: ID [--] COMMAND [ARG]...");
  v1::ExecRequest req;
  req.set_session_id(p[0]);
  if (p.size() == 2) {
    req.set_command(p[1]);  // one word: a shell command line
  } else {
    for (size_t i = 1; i < p.size(); ++i) req.add_argv(p[i]);
  }
  int64_t timeout;
  if (int rc = ParseSeconds(args, "--timeout", &timeout)) return rc;
  if (timeout > 0) req.mutable_timeout()->set_seconds(timeout);
  if (int rc = ParseEnv(args, req.mutable_env())) return rc;
  Watching watching(&client.interrupt(), &ctx);
  auto reader = client.stub().Exec(&ctx, req);
  v1::ExecResponse r;
  int exit_code = 0;
  while (reader->Read(&r)) {
    if (r.has_output()) {
      // The command's own bytes, unescaped: what it prints is what the user asked to see.
      FILE* f = r.output().stream() == v1::CommandOutput::STREAM_STDERR ? stderr : stdout;
      std::fwrite(r.output().data().data(), 1, r.output().data().size(), f);
      std::fflush(f);
    } else if (r.has_expiring()) {
      std::fprintf(stderr, "sandgate: session %s %s at %s; the command is killed then\n",
                   TerminalSafe(r.expiring().session_id()).c_str(),
                   TerminalSafe(r.expiring().reason()).c_str(),
                   google::protobuf::util::TimeUtil::ToString(r.expiring().expires_at()).c_str());
    } else if (r.has_finished()) {
      const auto& fin = r.finished();
      exit_code = ExecStatus(fin);
      if (std::string how = HowItEnded(fin); !how.empty()) {
        std::fprintf(stderr, "sandgate session exec: %s\n", how.c_str());
      }
      if (fin.output_truncated())
        std::fprintf(stderr, "sandgate session exec: output truncated at the cap\n");
    }
  }
  grpc::Status st = reader->Finish();
  if (client.interrupt().fired()) {
    std::fprintf(stderr, "\nsandgate session exec: interrupted\n");
    return kExitDetached;
  }
  if (!st.ok()) return Fail(st);
  return exit_code;  // the command's own exit status
}

int SessionUpload(Client& client, grpc::ClientContext& ctx, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  if (p.size() != 2 && p.size() != 3) return Usage("needs ID LOCAL_FILE [WORKSPACE_PATH]");
  const std::string& local = p[1];
  // Size and hash first, so the daemon can refuse a file that did not arrive whole; the
  // file is then read a second time, in chunks (a file changed in between is refused too).
  absl::StatusOr<FileDigest> digest = DigestFile(local);
  if (!digest.ok()) return Usage(std::string(digest.status().message()));
  v1::FileInfo info;
  Watching watching(&client.interrupt(), &ctx);
  auto writer = client.stub().UploadFile(&ctx, &info);
  v1::UploadFileRequest m;
  m.mutable_header()->set_session_id(p[0]);
  m.mutable_header()->set_path(p.size() == 3 ? p[2] : BaseName(local));
  m.mutable_header()->set_size_bytes(digest->size_bytes);
  m.mutable_header()->set_sha256(digest->sha256);
  bool ok = writer->Write(m);
  absl::Status read = ReadFileChunks(local, kUploadChunkBytes, [&](absl::string_view chunk) {
    m.Clear();
    m.set_data(chunk.data(), chunk.size());
    return ok = ok && writer->Write(m);
  });
  // A file that could not be read whole must not be committed: cancel instead of ending.
  if (!read.ok()) ctx.TryCancel();
  if (read.ok() && ok) writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (!read.ok()) return Usage(std::string(read.message()));
  if (client.interrupt().fired()) {
    std::fprintf(stderr, "\nsandgate session upload: interrupted; nothing was uploaded\n");
    return kExitDetached;
  }
  if (!st.ok()) return Fail(st);
  std::printf("uploaded %s (%s, sha256 %s)\n", TerminalSafe(info.path()).c_str(),
              HumanBytes(info.size_bytes()).c_str(), TerminalSafe(info.sha256()).c_str());
  return 0;
}

int SessionDownload(Client& client, grpc::ClientContext& ctx, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  if (p.size() != 2) return Usage("needs ID WORKSPACE_PATH");
  v1::DownloadFileRequest req;
  req.set_session_id(p[0]);
  req.set_path(p[1]);
  std::string out = args.Get("--out", BaseName(p[1]));
  Watching watching(&client.interrupt(), &ctx);
  auto reader = client.stub().DownloadFile(&ctx, req);
  absl::Status st = ReceiveFile(ctx, *reader, out);
  if (client.interrupt().fired()) {
    std::fprintf(stderr, "\nsandgate session download: interrupted; nothing was saved\n");
    return kExitDetached;
  }
  if (!st.ok()) return Fail(st);
  struct stat sb;
  uint64_t size = stat(out.c_str(), &sb) == 0 ? static_cast<uint64_t>(sb.st_size) : 0;
  std::printf("downloaded %s to %s (%s)\n", TerminalSafe(p[1]).c_str(), TerminalSafe(out).c_str(),
              HumanBytes(size).c_str());
  return 0;
}

int SessionLs(Client& client, grpc::ClientContext& ctx, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  if (p.empty() || p.size() > 2) return Usage("needs ID [DIR]");
  v1::ListFilesRequest req;
  req.set_session_id(p[0]);
  if (p.size() > 1) req.set_dir(p[1]);
  v1::ListFilesResponse resp;
  grpc::Status st = client.stub().ListFiles(&ctx, req, &resp);
  if (!st.ok()) return Fail(st);
  for (const auto& f : resp.files()) {
    const char* kind = f.type() == v1::FileInfo::TYPE_DIRECTORY ? "dir "
                       : f.type() == v1::FileInfo::TYPE_SYMLINK ? "link"
                       : f.type() == v1::FileInfo::TYPE_REGULAR ? "file"
                                                                : "other";
    std::printf("%s %10s  %s%s\n", kind, HumanBytes(f.size_bytes()).c_str(),
                TerminalSafe(f.path()).c_str(),
                f.not_listed().empty()
                    ? ""
                    : absl::StrCat("  (not listed: ", TerminalSafe(f.not_listed()), ")").c_str());
  }
  if (resp.truncated())
    std::fprintf(stderr, "sandgate session ls: the listing stopped early (a cap on entries)\n");
  return 0;
}

void PrintFile(const v1::FileInfo& f, bool json) {
  if (json) {
    std::printf("%s\n", ToJson(f).c_str());
    return;
  }
  const char* kind = f.type() == v1::FileInfo::TYPE_DIRECTORY ? "dir "
                     : f.type() == v1::FileInfo::TYPE_SYMLINK ? "link"
                     : f.type() == v1::FileInfo::TYPE_REGULAR ? "file"
                                                              : "other";
  std::printf("%s %10s  %s\n", kind, HumanBytes(f.size_bytes()).c_str(),
              TerminalSafe(f.path().empty() ? "." : f.path()).c_str());
}

// session stat|rm|mv|mkdir: one file call each.
int SessionFileCall(Client& client, grpc::ClientContext& ctx, const std::string& sub,
                    const Args& args) {
  const std::vector<std::string>& p = args.positional;
  const bool json = args.Has("--json");
  v1::FileInfo info;
  grpc::Status st;
  if (sub == "stat") {
    if (p.size() != 2) return Usage("needs ID PATH");
    v1::StatFileRequest req;
    req.set_session_id(p[0]);
    req.set_path(p[1] == "." ? "" : p[1]);
    st = client.stub().StatFile(&ctx, req, &info);
  } else if (sub == "rm") {
    if (p.size() != 2) return Usage("needs ID PATH");
    v1::DeleteFileRequest req;
    req.set_session_id(p[0]);
    req.set_path(p[1]);
    req.set_recursive(args.Has("--recursive"));
    v1::DeleteFileResponse resp;
    st = client.stub().DeleteFile(&ctx, req, &resp);
    if (st.ok()) return 0;
  } else if (sub == "mv") {
    if (p.size() != 3) return Usage("needs ID FROM TO");
    v1::RenameFileRequest req;
    req.set_session_id(p[0]);
    req.set_from(p[1]);
    req.set_to(p[2]);
    req.set_overwrite(args.Has("--force"));
    st = client.stub().RenameFile(&ctx, req, &info);
  } else {
    if (p.size() != 2) return Usage("needs ID PATH");
    v1::MakeDirectoryRequest req;
    req.set_session_id(p[0]);
    req.set_path(p[1]);
    req.set_parents(args.Has("--parents"));
    st = client.stub().MakeDirectory(&ctx, req, &info);
  }
  if (!st.ok()) return Fail(st);
  PrintFile(info, json);
  return 0;
}

}  // namespace

// sandgate session create|list|get|exec|upload|download|ls|keepalive|close ...
// args.positional starts after the subcommand: the session id first.
int CmdSession(Client& client, const std::string& sub, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  bool json = args.Has("--json");
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  if (sub == "create") {
    if (!p.empty()) return Usage("create takes no arguments, only options");
    v1::CreateSessionRequest req;
    req.set_provider(args.Get("--provider"));
    req.set_idempotency_key(args.Get("--idempotency-key"));
    req.set_from_snapshot(args.Get("--from-snapshot"));
    // From a snapshot with no sandbox options: the snapshot's sandbox.
    bool sandbox_given = req.from_snapshot().empty();
    for (const std::string& flag : SandboxFlags()) sandbox_given |= args.Has(flag);
    if (sandbox_given) {
      if (int rc = ParseSandbox(args, req.mutable_sandbox())) return rc;
    }
    v1::Session s;
    grpc::Status st = client.stub().CreateSession(&ctx, req, &s);
    if (!st.ok()) return Fail(st);
    if (json) {
      PrintSession(s, true);
    } else {
      std::printf("%s\n", TerminalSafe(s.id()).c_str());
    }
    return 0;
  }
  if (sub == "list") {
    if (!p.empty()) return Usage("list takes no arguments");
    v1::ListSessionsRequest req;
    req.set_include_closed(args.Has("--all"));
    v1::ListSessionsResponse resp;
    grpc::Status st = client.stub().ListSessions(&ctx, req, &resp);
    if (!st.ok()) return Fail(st);
    if (json) {
      for (const auto& s : resp.sessions()) PrintSession(s, true);
    } else {
      std::fputs(RenderSessionList(resp, args.Has("--all")).c_str(), stdout);
    }
    return 0;
  }
  if (sub == "exec") {
    // With input to give, in the background or on a terminal: a process you talk to.
    if (args.Has("--background") || args.Has("--stdin") || args.Has("--tty") || StdinIsData()) {
      return SessionExecProcess(client, args);
    }
    return SessionExec(client, ctx, args);
  }
  if (sub == "stat" || sub == "rm" || sub == "mv" || sub == "mkdir") {
    return SessionFileCall(client, ctx, sub, args);
  }
  if (sub == "expose") return SessionExpose(client, args);
  if (sub == "unexpose") return SessionUnexpose(client, args);
  if (sub == "ports") return SessionPorts(client, args);
  if (sub == "usage") return SessionUsage(client, ctx, args);
  if (sub == "snapshot" || sub == "pause" || sub == "resume") {
    return SessionSnapshot(client, sub, args);
  }
  if (sub == "ps") return SessionPs(client, args);
  if (sub == "output") return SessionOutput(client, args);
  if (sub == "input") return SessionInput(client, args);
  if (sub == "kill") return SessionKill(client, args);
  if (sub == "shell") return SessionShell(client, args);
  if (sub == "upload") return SessionUpload(client, ctx, args);
  if (sub == "download") return SessionDownload(client, ctx, args);
  if (sub == "ls") return SessionLs(client, ctx, args);
  if (p.size() != 1) return Usage("needs exactly one session id");
  const std::string& id = p[0];
  v1::Session s;
  grpc::Status st;
  if (sub == "get") {
    v1::GetSessionRequest req;
    req.set_session_id(id);
    st = client.stub().GetSession(&ctx, req, &s);
  } else if (sub == "keepalive") {
    v1::KeepAliveRequest req;
    req.set_session_id(id);
    st = client.stub().KeepAlive(&ctx, req, &s);
  } else {
    v1::CloseSessionRequest req;
    req.set_session_id(id);
    req.set_reason(args.Get("--reason"));
    st = client.stub().CloseSession(&ctx, req, &s);
  }
  if (!st.ok()) return Fail(st);
  PrintSession(s, json);
  return 0;
}

}  // namespace sandgate::cli
