#include "core/image_api.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::core {
namespace {

bool Unrestricted(const Caller& caller) { return caller.config == nullptr || caller.is_operator; }

}  // namespace

absl::Status ImageApi::CheckMayBuild(const Caller& caller) {
  if (Unrestricted(caller) || caller.config->policy.build_images) return absl::OkStatus();
  return errors::PermissionDenied(absl::StrCat(
      "tenant '", caller.tenant,
      "' may not build or delete images (its policy.build_images is false); ask an operator"));
}

absl::Status ImageApi::CheckMayUse(const Caller& caller, const std::string& name) {
  if (Unrestricted(caller)) return absl::OkStatus();
  const std::vector<std::string>& allowed = caller.config->policy.images;
  if (allowed.empty() || std::find(allowed.begin(), allowed.end(), name) != allowed.end()) {
    return absl::OkStatus();
  }
  return errors::PermissionDenied(
      absl::StrCat("tenant '", caller.tenant, "': image '", name,
                   "' is not allowed (allowed: ", absl::StrJoin(allowed, ", "), ")"));
}

absl::Status ImageApi::StartBuild(const Caller& caller, const v1::BuildImageRequest& request) {
  SANDGATE_RETURN_IF_ERROR(ValidateImageName(request.name()));
  SANDGATE_RETURN_IF_ERROR(CheckMayBuild(caller));
  SANDGATE_RETURN_IF_ERROR(CheckMayUse(caller, request.name()));
  return store_->StartBuild(request.name(), {request.packages().begin(), request.packages().end()},
                            caller.tenant);
}

absl::Status ImageApi::BuildImage(const Caller& caller, const v1::BuildImageRequest& request,
                                  v1::Image* response) {
  SANDGATE_RETURN_IF_ERROR(StartBuild(caller, request));
  v1::GetImageRequest get;
  get.set_name(request.name());
  return GetImage(caller, get, response);
}

absl::Status ImageApi::GetImage(const Caller& caller, const v1::GetImageRequest& request,
                                v1::Image* response) {
  SANDGATE_RETURN_IF_ERROR(ValidateImageName(request.name()));
  SANDGATE_RETURN_IF_ERROR(CheckMayUse(caller, request.name()));
  SANDGATE_ASSIGN_OR_RETURN(*response, store_->Get(request.name()));
  return absl::OkStatus();
}

absl::Status ImageApi::ListImages(const Caller& caller, const v1::ListImagesRequest&,
                                  v1::ListImagesResponse* response) {
  for (v1::Image& image : store_->List()) {
    if (CheckMayUse(caller, image.name()).ok()) *response->add_images() = std::move(image);
  }
  return absl::OkStatus();
}

absl::Status ImageApi::DeleteImage(const Caller& caller, const v1::DeleteImageRequest& request,
                                   v1::Image* response) {
  SANDGATE_RETURN_IF_ERROR(ValidateImageName(request.name()));
  SANDGATE_RETURN_IF_ERROR(CheckMayBuild(caller));
  SANDGATE_RETURN_IF_ERROR(CheckMayUse(caller, request.name()));
  SANDGATE_ASSIGN_OR_RETURN(v1::Image image, store_->Get(request.name()));
  if (!Unrestricted(caller) && image.built_by() != caller.tenant) {
    return errors::PermissionDenied(absl::StrCat("image '", request.name(),
                                                 "' was built by tenant '", image.built_by(),
                                                 "'; only it or an operator may delete it"));
  }
  SANDGATE_ASSIGN_OR_RETURN(*response, store_->Remove(request.name()));
  return absl::OkStatus();
}

}  // namespace sandgate::core
