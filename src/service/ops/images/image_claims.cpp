// Claims on internal images in the making (image_claims.h).
#include "service/ops/images/image_claims.h"

namespace gpulab::service {

ImageClaims::Claim::Claim(ImageClaims& owner, std::string image)
    : owner_(owner), image_(std::move(image)) {
  std::lock_guard<std::mutex> lock(owner_.mu_);
  owner_.images_.insert(image_);
}

ImageClaims::Claim::~Claim() {
  std::lock_guard<std::mutex> lock(owner_.mu_);
  owner_.images_.erase(owner_.images_.find(image_));
}

std::set<std::string> ImageClaims::claimed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {images_.begin(), images_.end()};
}

}  // namespace gpulab::service
