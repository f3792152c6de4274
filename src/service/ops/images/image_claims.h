// Internal images a request is making before a book row owns them (a recreate's or a snapshot's
// commit): the orphan sweep counts them as owned, so a host that comes back while the request is
// between its commit and its booking keeps the image.
#pragma once

#include <mutex>
#include <set>
#include <string>

namespace gpulab::service {

class ImageClaims {
 public:
  // Held from before the engine's commit until the row that owns the image is written (or the
  // request removed the image itself).
  class Claim {
   public:
    Claim(ImageClaims& owner, std::string image);
    ~Claim();
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;

   private:
    ImageClaims& owner_;
    std::string image_;
  };

  Claim claim(std::string image) { return Claim(*this, std::move(image)); }
  std::set<std::string> claimed() const;

 private:
  mutable std::mutex mu_;
  std::multiset<std::string> images_;
};

}  // namespace gpulab::service
