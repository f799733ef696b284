// Sessions from an image against sessions on the host's root, through the gRPC API from this
// client process (issue 22), under both isolation levels: CreateSession → first Exec(true)
// done, cold (no warm pool). The four kinds alternate within each round, so each figure has
// its same-run baseline (the host's root, same level) beside it.
//
// The image is built once through the Images API (busybox on mmdebstrap's essential set, from
// Debian's archive; about 20-60 s) into the benchmark daemon's own state directory, which
// stays 0700 as a real daemon's does.
//
//   build/bin/bench_image_sessions [--runs 15]   (as root, with mmdebstrap, and runsc for gVisor)
//
// Prints medians in ms and the ratios. Not a test: nothing asserts timing.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sandgate/v1/images.grpc.pb.h"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"

namespace sandgate::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr uint32_t kUidBase = 361000;  // this bench's pool
constexpr uint32_t kUidCount = 8;
constexpr char kImage[] = "bench";

double MsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "bench_image_sessions: %s\n", what.c_str());
  std::exit(1);
}

// Builds the image; returns the seconds it took.
double BuildImage(v1::Images::Stub& images) {
  grpc::ClientContext ctx;
  v1::BuildImageRequest req;
  req.set_name(kImage);
  req.add_packages("busybox");
  const SteadyClock::time_point start = SteadyClock::now();
  auto reader = images.BuildImage(&ctx, req);
  v1::ImageBuildProgress p;
  while (reader->Read(&p)) {
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) Fail("BuildImage: " + st.error_message());
  return MsSince(start) / 1000;
}

// CreateSession → first Exec(true) done, then CloseSession (untimed); ms.
double CreateAndExec(v1::Sandgate::Stub& stub, const std::string& isolation,
                     const std::string& image) {
  const SteadyClock::time_point start = SteadyClock::now();
  v1::Session s;
  {
    grpc::ClientContext ctx;
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->set_isolation(isolation);
    req.mutable_sandbox()->set_image(image);
    grpc::Status st = stub.CreateSession(&ctx, req, &s);
    if (!st.ok()) Fail("CreateSession: " + st.error_message());
  }
  {
    grpc::ClientContext ctx;
    v1::ExecRequest req;
    req.set_session_id(s.id());
    req.add_argv("true");
    auto reader = stub.Exec(&ctx, req);
    v1::ExecResponse r;
    int code = -1;
    while (reader->Read(&r)) {
      if (r.has_finished()) code = r.finished().exit_code();
    }
    grpc::Status st = reader->Finish();
    if (!st.ok() || code != 0) Fail("Exec: " + st.error_message());
  }
  const double ms = MsSince(start);
  grpc::ClientContext ctx;
  v1::CloseSessionRequest req;
  req.set_session_id(s.id());
  v1::Session closed;
  stub.CloseSession(&ctx, req, &closed);
  return ms;
}

int Main(int argc, char** argv) {
  int runs = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--runs") runs = std::atoi(argv[i + 1]);
  }
  if (access("/usr/bin/mmdebstrap", X_OK) != 0) Fail("mmdebstrap is not installed");
  std::vector<std::string> levels = {"namespaces"};
  if (access("/usr/bin/runsc", X_OK) == 0) {
    levels.push_back("gvisor");
  } else {
    std::fprintf(stderr, "bench_image_sessions: runsc is not installed: namespaces only\n");
  }
  Daemon d = Daemon::Start(
      absl::StrCat(R"({"local": {"uid_base": )", kUidBase, R"(, "uid_count": )", kUidCount, "}}"));
  auto stub = d.Stub();
  auto images = v1::Images::NewStub(
      grpc::CreateChannel("unix:" + d.socket(), grpc::InsecureChannelCredentials()));
  const double build_s = BuildImage(*images);
  // kinds[level][0] = the host's root, [1] = the image
  std::vector<std::vector<std::vector<double>>> ms(levels.size(),
                                                   std::vector<std::vector<double>>(2));
  for (size_t l = 0; l < levels.size(); ++l) {  // warm-up: page cache, first sandboxes
    CreateAndExec(*stub, levels[l], "");
    CreateAndExec(*stub, levels[l], kImage);
  }
  for (int i = 0; i < runs; ++i) {
    for (size_t l = 0; l < levels.size(); ++l) {
      // Alternating which goes first, so neither always follows the other.
      for (int k = 0; k < 2; ++k) {
        const int kind = (i + k) % 2;
        ms[l][kind].push_back(CreateAndExec(*stub, levels[l], kind == 1 ? kImage : ""));
      }
    }
  }
  std::printf("image %s (busybox, essential): built through the API in %.1f s\n", kImage, build_s);
  std::printf("create -> first Exec(true) done, median of %d, ms:\n", runs);
  for (size_t l = 0; l < levels.size(); ++l) {
    const double host = Median(ms[l][0]), image = Median(ms[l][1]);
    std::printf("  %-10s  from the image %8.2f   host root %8.2f   %.2fx\n", levels[l].c_str(),
                image, host, host > 0 ? image / host : 0.0);
  }
  return 0;
}

}  // namespace
}  // namespace sandgate::bench

int main(int argc, char** argv) { return sandgate::bench::Main(argc, argv); }
