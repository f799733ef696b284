// What every command of the CLI shares: the connection to the daemon, how a failure is
// reported (and with which exit code), following a run's events, downloads, and the sandbox
// options. Each command lives in client/cmd_*.cc and is called by client/main.cc with the
// arguments client/args.h parsed against the grammar of client/grammar.h.
//
//   int CmdGet(Client& client, const Args& args);  // returns the process's exit code
//
// Not thread safe: a command runs on the main thread (Interrupt cancels its calls from its
// own thread, through Watching).
#ifndef SANDGATE_CLIENT_COMMAND_H_
#define SANDGATE_CLIENT_COMMAND_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/args.h"
#include "client/interrupt.h"
#include "client/transfer.h"
#include "common/address.h"
#include "sandgate/v1/sandgate.grpc.pb.h"

namespace sandgate::cli {

constexpr int kExitRunFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitDetached = 130;

// What the user typed ("get", "session exec"), for every message: set once in main before
// any command runs.
std::string& CommandName();

// A usage error on stderr, naming the command typed; returns kExitUsage.
int Usage(const std::string& msg);

absl::Status FromGrpc(const grpc::Status& s);

// One line on stderr naming the command the user typed; the exit code. The daemon says "run
// not found: ID" (common/errors.h); a person reads "sandgate get: no run ID".
int Fail(const absl::Status& s);
int Fail(const grpc::Status& s);

class Client {
 public:
  // `channel` from OpenChannel (client/connection.h).
  static std::unique_ptr<Client> Connect(std::shared_ptr<grpc::Channel> channel, std::string token,
                                         Interrupt* interrupt) {
    return std::unique_ptr<Client>(
        new Client(channel, v1::Sandgate::NewStub(channel), std::move(token), interrupt));
  }
  // For the other services on the same connection (images.proto).
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  void Prepare(grpc::ClientContext* ctx) const {
    if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
  }
  v1::Sandgate::Stub& stub() { return *stub_; }
  Interrupt& interrupt() { return *interrupt_; }

 private:
  Client(std::shared_ptr<grpc::Channel> channel, std::unique_ptr<v1::Sandgate::Stub> stub,
         std::string token, Interrupt* interrupt)
      : channel_(std::move(channel)),
        stub_(std::move(stub)),
        token_(std::move(token)),
        interrupt_(interrupt) {}
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
  std::string token_;
  Interrupt* const interrupt_;  // lives as long as the process
};

// Stops watching the call on every return path.
class Watching {
 public:
  Watching(Interrupt* interrupt, grpc::ClientContext* ctx) : interrupt_(interrupt) {
    if (interrupt_ != nullptr) interrupt_->Watch(ctx);
  }
  ~Watching() {
    if (interrupt_ != nullptr) interrupt_->Watch(nullptr);
  }
  Watching(const Watching&) = delete;
  Watching& operator=(const Watching&) = delete;

 private:
  Interrupt* const interrupt_;
};

bool MakeDirs(const std::string& dir);

// Receives one download stream (ArtifactChunk or FileChunk) into `path` through a
// DownloadSink: nothing appears under `path` unless the stream ended cleanly and the bytes
// match the sha256 its last chunk carries (and `expected_sha256`, when known).
template <typename Chunk>
absl::Status ReceiveFile(grpc::ClientContext& ctx, grpc::ClientReaderInterface<Chunk>& reader,
                         const std::string& path, absl::string_view expected_sha256 = "") {
  absl::StatusOr<std::unique_ptr<DownloadSink>> sink = DownloadSink::Create(path);
  absl::Status written = sink.status();
  Chunk chunk;
  while (written.ok() && reader.Read(&chunk))
    written = (*sink)->Add(chunk.data(), chunk.total_size(), chunk.sha256());
  if (!written.ok()) ctx.TryCancel();
  grpc::Status st = reader.Finish();
  if (!written.ok()) return written;
  if (!st.ok()) return FromGrpc(st);
  return (*sink)->Commit(expected_sha256);
}

// Writes `data` to `path` through a temporary name, so that a half-written file never
// stands under the final name.
absl::Status WriteFileAtomically(const std::string& path, const std::string& data);

// Streams a run's events to `on_event` until the stream ends. Returns the final status.
grpc::Status FollowEvents(Client& client, Interrupt* interrupt, const std::string& run_id,
                          int64_t after, bool follow,
                          const std::function<void(const v1::Event&)>& on_event);

// Follows a run from `after` to its run.finished, reconnecting from the last seq seen when
// the daemon is unavailable or ends the stream (a restarting daemon keeps waiting runs):
// nothing is missed or seen twice. Gives up when nothing came from the daemon for the
// reconnect window ($SANDGATE_RECONNECT_TIMEOUT seconds, default 60). Sets
// *finished when run.finished arrived; otherwise returns why not (OK when interrupted, and
// when the run had ended at or before `after`: the daemon ends such a follow at once).
grpc::Status FollowToEnd(Client& client, const std::string& run_id, int64_t after, bool* finished,
                         const std::function<void(const v1::Event&)>& on_event);

// The run's artifacts, each checked against the sha256 of the run's record and of its
// stream, into `dir`.
absl::Status DownloadArtifacts(Client& client, const v1::Run& run, const std::string& dir);

// The run's artifacts (DownloadArtifacts) and its events as events.jsonl, into `dir`.
absl::Status Download(Client& client, const v1::Run& run, const std::string& dir);

absl::StatusOr<std::string> ReadAll(const std::string& path);
std::string BaseName(const std::string& path);

// The value of `flag` as a positive number of seconds into *seconds (0 when the flag is
// absent); 0, or the exit code of a usage error already reported.
int ParseSeconds(const Args& args, const std::string& flag, int64_t* seconds);

// Every --env NAME=VALUE into *env; 0, or the exit code of a usage error already reported.
int ParseEnv(const Args& args, google::protobuf::Map<std::string, std::string>* env);

// --env, --setup, --network, --allow, --memory-mib, --workspace-mib, --idle, --lifetime,
// --command-timeout
// into *sandbox; 0, or the exit code of a usage error already reported.
int ParseSandbox(const Args& args, v1::SandboxSpec* sandbox);
// `sandgate image build|list|get|rm` (client/cmd_image.cc).
int CmdImage(Client& client, const std::string& sub, const Args& args);

// GetRun into *run; 0, or the exit code of a failure already reported.
int GetRun(Client& client, const std::string& id, v1::Run* run);

// The commands, by file: each returns the process's exit code.
int CmdRun(Client& client, const Args& args);                              // cmd_run.cc
int CmdEvents(Client& client, const Args& args);                           // cmd_runs.cc
int CmdRuns(Client& client, const Args& args);                             // cmd_runs.cc
int CmdGet(Client& client, const Args& args);                              // cmd_runs.cc
int CmdCancel(Client& client, const Args& args);                           // cmd_runs.cc
int CmdDownload(Client& client, const Args& args);                         // cmd_runs.cc
int CmdSession(Client& client, const std::string& sub, const Args& args);  // cmd_session.cc
int CmdAdmin(Client& client, const std::string& sub, const Args& args);    // cmd_admin.cc

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_COMMAND_H_
