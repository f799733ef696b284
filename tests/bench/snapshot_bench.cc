// Snapshots of a 100 MiB workspace through the gRPC API (issue 23, BENCHMARKS.md): starts
// sandgated on a temporary Unix socket and, in one run, alternating each round:
//
//   snapshot   SnapshotSession of a session whose workspace holds --mib MiB of random bytes
//              in files of 5 MiB (tar in the sandbox, streamed into the artifact store);
//   restore    CreateSession(from_snapshot): a new session with those files written back;
//   baselines  UploadFile of the same --mib MiB as one file into a live session, and a bare
//              CreateSession (the restore's session without its files).
//
//   build/bin/bench_snapshots [--runs 5] [--mib 100]   (as root)
//
// Prints each figure's median in ms and MiB/s. Not a test: nothing asserts timing; exit 0
// when every call succeeded.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"

namespace sandgate::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

double MsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

void Check(const grpc::Status& st, const char* what) {
  if (st.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, st.error_message().c_str());
  std::exit(1);
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
  return ctx;
}

v1::CreateSessionRequest SessionRequest() {
  v1::CreateSessionRequest req;
  req.mutable_sandbox()->set_memory_bytes(2ull << 30);
  req.mutable_sandbox()->set_workspace_bytes(1ull << 30);
  req.mutable_sandbox()->mutable_idle_timeout()->set_seconds(600);
  return req;
}

void Close(v1::Sandgate::Stub& stub, const std::string& id) {
  v1::CloseSessionRequest req;
  req.set_session_id(id);
  v1::Session s;
  Check(stub.CloseSession(Context().get(), req, &s), "CloseSession");
}

void Exec(v1::Sandgate::Stub& stub, const std::string& id, const std::string& command) {
  v1::ExecRequest req;
  req.set_session_id(id);
  req.set_command(command);
  auto ctx = Context();
  auto reader = stub.Exec(ctx.get(), req);
  v1::ExecResponse m;
  int code = -1;
  while (reader->Read(&m)) {
    if (m.has_finished()) code = m.finished().exit_code();
  }
  Check(reader->Finish(), "Exec");
  if (code != 0) {
    std::fprintf(stderr, "`%s` exited %d\n", command.c_str(), code);
    std::exit(1);
  }
}

void Upload(v1::Sandgate::Stub& stub, const std::string& id, const std::string& data) {
  auto ctx = Context();
  v1::FileInfo info;
  auto writer = stub.UploadFile(ctx.get(), &info);
  v1::UploadFileRequest m;
  m.mutable_header()->set_session_id(id);
  m.mutable_header()->set_path("upload.bin");
  writer->Write(m);
  for (size_t at = 0; at < data.size(); at += 1 << 20) {
    v1::UploadFileRequest d;
    d.set_data(data.substr(at, 1 << 20));
    if (!writer->Write(d)) break;
  }
  writer->WritesDone();
  Check(writer->Finish(), "UploadFile");
}

int Main(int argc, char** argv) {
  int runs = 5, mib = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--runs") runs = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--mib") mib = std::atoi(argv[i + 1]);
  }
  Daemon daemon =
      Daemon::Start(absl::StrCat(R"({"max_input_bytes": )", (static_cast<uint64_t>(mib) + 8) << 20,
                                 R"(, "local": {"uid_base": 191000, "uid_count": 64}})"));
  auto stub = daemon.Stub();
  std::string data(static_cast<size_t>(mib) << 20, '\0');
  std::mt19937_64 random(42);
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    const uint64_t r = random();
    std::memcpy(&data[i], &r, 8);
  }

  v1::Session source;
  Check(stub->CreateSession(Context().get(), SessionRequest(), &source), "CreateSession");
  Exec(
      *stub, source.id(),
      absl::StrCat("for i in $(seq 1 ", mib / 5, "); do head -c 5242880 /dev/urandom > f$i; done"));

  std::vector<double> snapshot, restore, upload, bare;
  uint64_t size = 0;
  for (int r = 0; r < runs; ++r) {
    v1::SnapshotSessionRequest take;
    take.set_session_id(source.id());
    v1::Snapshot snap;
    auto t0 = SteadyClock::now();
    Check(stub->SnapshotSession(Context().get(), take, &snap), "SnapshotSession");
    snapshot.push_back(MsSince(t0));
    size = snap.size_bytes();

    v1::CreateSessionRequest from = SessionRequest();
    from.set_from_snapshot(snap.id());
    v1::Session restored;
    t0 = SteadyClock::now();
    Check(stub->CreateSession(Context().get(), from, &restored), "CreateSession from_snapshot");
    restore.push_back(MsSince(t0));

    v1::Session plain;
    t0 = SteadyClock::now();
    Check(stub->CreateSession(Context().get(), SessionRequest(), &plain), "CreateSession");
    bare.push_back(MsSince(t0));
    t0 = SteadyClock::now();
    Upload(*stub, plain.id(), data);
    upload.push_back(MsSince(t0));

    Close(*stub, restored.id());
    Close(*stub, plain.id());
    v1::DeleteSnapshotRequest del;
    del.set_snapshot_id(snap.id());
    v1::DeleteSnapshotResponse gone;
    Check(stub->DeleteSnapshot(Context().get(), del, &gone), "DeleteSnapshot");
  }
  Close(*stub, source.id());
  auto rate = [&](double ms) { return static_cast<double>(mib) / (ms / 1000.0); };
  std::printf("workspace %d MiB in %d files, tar %.1f MiB, %d runs (medians)\n", mib, mib / 5,
              static_cast<double>(size) / 1048576.0, runs);
  std::printf("snapshot (SnapshotSession)              %8.0f ms  %6.0f MiB/s\n", Median(snapshot),
              rate(Median(snapshot)));
  std::printf("restore (CreateSession from_snapshot)   %8.0f ms  %6.0f MiB/s\n", Median(restore),
              rate(Median(restore)));
  std::printf("  baseline: CreateSession, no snapshot  %8.0f ms\n", Median(bare));
  std::printf("  baseline: UploadFile of %3d MiB       %8.0f ms  %6.0f MiB/s\n", mib,
              Median(upload), rate(Median(upload)));
  return 0;
}

}  // namespace
}  // namespace sandgate::bench

int main(int argc, char** argv) { return sandgate::bench::Main(argc, argv); }
