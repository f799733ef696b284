// ImageApi: the plain functions behind the Images RPCs and REST routes (images.proto), with
// the tenant's policy applied: `policy.images` names the images a tenant may see and use
// ("host" among them; empty = all), `policy.build_images` whether it may build them and
// delete those it built. Operators may build and delete any. The default local tenant (no
// configured tenants) may do everything.
//
//   ImageApi api(store);
//   SANDGATE_RETURN_IF_ERROR(api.StartBuild(caller, request));  // then follow the progress
//
// Thread safe (the store is).
#ifndef SANDGATE_CORE_IMAGE_API_H_
#define SANDGATE_CORE_IMAGE_API_H_

#include "absl/status/status.h"
#include "core/images.h"
#include "core/tenants.h"
#include "sandgate/v1/images.pb.h"

namespace sandgate::core {

class ImageApi {
 public:
  explicit ImageApi(ImageStore* store) : store_(store) {}  // not owned; outlives the api

  ImageStore* store() const { return store_; }

  // Queues the build (ImageStore::StartBuild) once the caller may build that name.
  absl::Status StartBuild(const Caller& caller, const v1::BuildImageRequest& request);
  // StartBuild, answering the image as it is then (BUILDING, or READY when its packages were
  // built already): the unary form of BuildImage that the REST face serves.
  absl::Status BuildImage(const Caller& caller, const v1::BuildImageRequest& request,
                          v1::Image* response);
  absl::Status GetImage(const Caller& caller, const v1::GetImageRequest& request,
                        v1::Image* response);
  absl::Status ListImages(const Caller& caller, const v1::ListImagesRequest& request,
                          v1::ListImagesResponse* response);
  absl::Status DeleteImage(const Caller& caller, const v1::DeleteImageRequest& request,
                           v1::Image* response);

  // PERMISSION_DENIED naming the policy unless the caller may use (and see) `name`.
  static absl::Status CheckMayUse(const Caller& caller, const std::string& name);
  // PERMISSION_DENIED naming the policy unless the caller may build and delete images.
  static absl::Status CheckMayBuild(const Caller& caller);

 private:
  ImageStore* const store_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_IMAGE_API_H_
