// ImageService: the gRPC edge of sandbox images (images.proto), beside SandgateService and
// thin like it: the unary RPCs are served by the one unary adapter (grpc_unary.h) by their
// rows of the policy table (rpc_policy.h) and their core::ImageApi functions (unary_rpcs.h);
// BuildImage starts the build on the store's own threads and streams its progress with a
// write reactor that pulls the next lines when the previous write is done (woken by the
// store), so no thread waits on a build. Cancelling BuildImage cancels the build unless the
// request says `detach`.
//
// Thread safe. The service and what it points to must outlive the grpc::Server.
#ifndef SANDGATE_SERVER_IMAGE_SERVICE_H_
#define SANDGATE_SERVER_IMAGE_SERVICE_H_

#include "core/image_api.h"
#include "sandgate/v1/images.grpc.pb.h"
#include "server/service.h"

namespace sandgate::server {

class ImageService final : public v1::Images::CallbackService {
 public:
  // `deps.images`, `deps.tenants`, `deps.io` and `deps.audit` are used.
  explicit ImageService(const ServiceDeps& deps) : deps_(deps) {}

  grpc::ServerWriteReactor<v1::ImageBuildProgress>* BuildImage(
      grpc::CallbackServerContext* ctx, const v1::BuildImageRequest* request) override;
  grpc::ServerUnaryReactor* GetImage(grpc::CallbackServerContext* ctx,
                                     const v1::GetImageRequest* request,
                                     v1::Image* response) override;
  grpc::ServerUnaryReactor* ListImages(grpc::CallbackServerContext* ctx,
                                       const v1::ListImagesRequest* request,
                                       v1::ListImagesResponse* response) override;
  grpc::ServerUnaryReactor* DeleteImage(grpc::CallbackServerContext* ctx,
                                        const v1::DeleteImageRequest* request,
                                        v1::Image* response) override;

 private:
  const ServiceDeps deps_;
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_IMAGE_SERVICE_H_
