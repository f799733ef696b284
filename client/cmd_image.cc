// `sandgate image build|list|get|rm`: sandbox images (images.proto, docs/images.md).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/command.h"
#include "client/render.h"
#include "client/terminal_text.h"
#include "google/protobuf/util/time_util.h"
#include "sandgate/v1/images.grpc.pb.h"

namespace sandgate::cli {
namespace {

const char* StateName(v1::Image::State s) {
  return s == v1::Image::STATE_READY ? "ready" : s == v1::Image::STATE_BUILDING ? "building" : "?";
}

void PrintImage(const v1::Image& image, bool json) {
  if (json) {
    std::printf("%s\n", ToJson(image).c_str());
    return;
  }
  std::printf("image     %s (%s)\n", TerminalSafe(image.name()).c_str(), StateName(image.state()));
  std::printf("digest    %s\n", TerminalSafe(image.digest()).c_str());
  std::string packages;
  for (const std::string& p : image.packages()) packages += (packages.empty() ? "" : ",") + p;
  std::printf("packages  %s (%s, %s)\n", TerminalSafe(packages).c_str(),
              TerminalSafe(image.suite()).c_str(), TerminalSafe(image.variant()).c_str());
  if (image.state() == v1::Image::STATE_READY) {
    std::printf("size      %.1f MiB, built in %s by %s\n",
                static_cast<double>(image.size_bytes()) / (1 << 20),
                google::protobuf::util::TimeUtil::ToString(image.build_duration()).c_str(),
                TerminalSafe(image.built_by()).c_str());
  } else {
    std::printf("progress  %s\n", TerminalSafe(image.progress()).c_str());
  }
}

int Build(Client& client, const std::string& name, const Args& args) {
  v1::BuildImageRequest req;
  req.set_name(name);
  if (!args.Has("--packages")) return Usage("needs --packages P1,P2,... (Debian package names)");
  for (absl::string_view p : absl::StrSplit(args.Get("--packages"), ',', absl::SkipEmpty())) {
    req.add_packages(std::string(p));
  }
  req.set_detach(args.Has("--detach"));
  const bool json = args.Has("--json");
  auto stub = v1::Images::NewStub(client.channel());
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  Watching watching(&client.interrupt(), &ctx);
  auto reader = stub->BuildImage(&ctx, req);
  v1::ImageBuildProgress progress;
  v1::Image image;
  while (reader->Read(&progress)) {
    if (progress.has_image()) {
      image = progress.image();
    } else {
      std::fprintf(stderr, "%s\n", TerminalSafe(progress.line()).c_str());
    }
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) {
    if (client.interrupt().fired()) {
      std::fprintf(stderr, "sandgate image build: %s\n",
                   req.detach() ? "detached; the build goes on (sandgate image get NAME)"
                                : "cancelled the build");
      return kExitDetached;
    }
    return Fail(st);
  }
  PrintImage(image, json);
  return 0;
}

}  // namespace

int CmdImage(Client& client, const std::string& sub, const Args& args) {
  auto stub = v1::Images::NewStub(client.channel());
  const bool json = args.Has("--json");
  if (sub == "list") {
    if (!args.positional.empty()) return Usage("takes no arguments");
    grpc::ClientContext ctx;
    client.Prepare(&ctx);
    v1::ListImagesResponse resp;
    grpc::Status st = stub->ListImages(&ctx, v1::ListImagesRequest(), &resp);
    if (!st.ok()) return Fail(st);
    if (json) {
      for (const v1::Image& image : resp.images()) std::printf("%s\n", ToJson(image).c_str());
      return 0;
    }
    std::printf("%-24s %-9s %9s  %s\n", "NAME", "STATE", "MIB", "PACKAGES");
    for (const v1::Image& image : resp.images()) {
      std::string packages;
      for (const std::string& p : image.packages()) packages += (packages.empty() ? "" : ",") + p;
      std::printf("%-24s %-9s %9.1f  %s\n", TerminalSafe(image.name()).c_str(),
                  StateName(image.state()), static_cast<double>(image.size_bytes()) / (1 << 20),
                  TerminalSafe(packages).c_str());
    }
    return 0;
  }
  if (args.positional.size() != 1) return Usage("needs one image NAME");
  const std::string& name = args.positional[0];
  if (sub == "build") return Build(client, name, args);
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  v1::Image image;
  grpc::Status st;
  if (sub == "get") {
    v1::GetImageRequest req;
    req.set_name(name);
    st = stub->GetImage(&ctx, req, &image);
  } else {
    v1::DeleteImageRequest req;
    req.set_name(name);
    st = stub->DeleteImage(&ctx, req, &image);
  }
  if (!st.ok()) return Fail(st);
  if (sub == "rm") {
    std::printf("%s %s\n",
                image.state() == v1::Image::STATE_BUILDING ? "cancelling the build of" : "deleted",
                TerminalSafe(name).c_str());
    return 0;
  }
  PrintImage(image, json);
  return 0;
}

}  // namespace sandgate::cli
