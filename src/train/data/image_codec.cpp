// JPEG and PNG decoding for ImageFolder (see image_codec.h).
#include "train/data/image_codec.h"

#include <cstring>

#if GPULAB_HAVE_TURBOJPEG
#include <turbojpeg.h>
#endif
#if GPULAB_HAVE_PNG
#include <png.h>
#endif

namespace gpulab::train {

namespace {

bool is_jpeg(std::string_view b) {
  return b.size() > 3 && static_cast<unsigned char>(b[0]) == 0xFF &&
         static_cast<unsigned char>(b[1]) == 0xD8;
}
bool is_png(std::string_view b) {
  return b.size() > 8 && b.substr(0, 8) == "\x89PNG\r\n\x1a\n";
}

// Interleaved H×W×3 buffer -> 3×H×W tensor.
torch::Tensor planar(const std::vector<unsigned char>& hwc, int64_t h, int64_t w) {
  auto t = torch::from_blob(const_cast<unsigned char*>(hwc.data()), {h, w, 3}, torch::kUInt8);
  return t.permute({2, 0, 1}).contiguous();
}

#if GPULAB_HAVE_TURBOJPEG
Result<torch::Tensor> decode_jpeg(std::string_view b) {
  // One handle per thread: decoding runs in loader workers.
  struct Handle {
    tjhandle h = tjInitDecompress();
    ~Handle() {
      if (h) tjDestroy(h);
    }
  };
  thread_local Handle handle;
  if (!handle.h) return Result<torch::Tensor>(Code::kInternal, "turbojpeg failed to initialize");
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  auto* src = reinterpret_cast<const unsigned char*>(b.data());
  if (tjDecompressHeader3(handle.h, src, b.size(), &w, &h, &subsamp, &colorspace) != 0)
    return Result<torch::Tensor>(Code::kDataError,
                                 std::string("bad JPEG header: ") + tjGetErrorStr2(handle.h));
  std::vector<unsigned char> rgb(static_cast<size_t>(w) * h * 3);
  if (tjDecompress2(handle.h, src, b.size(), rgb.data(), w, 0, h, TJPF_RGB, TJFLAG_ACCURATEDCT) !=
          0 &&
      tjGetErrorCode(handle.h) == TJERR_FATAL)
    return Result<torch::Tensor>(Code::kDataError,
                                 std::string("bad JPEG data: ") + tjGetErrorStr2(handle.h));
  return planar(rgb, h, w);
}
#endif

#if GPULAB_HAVE_PNG
Result<torch::Tensor> decode_png(std::string_view b) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, b.data(), b.size()))
    return Result<torch::Tensor>(Code::kDataError, std::string("bad PNG: ") + img.message);
  img.format = PNG_FORMAT_RGB;
  std::vector<unsigned char> rgb(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, rgb.data(), 0, nullptr)) {
    std::string msg = img.message;
    png_image_free(&img);
    return Result<torch::Tensor>(Code::kDataError, "bad PNG data: " + msg);
  }
  return planar(rgb, img.height, img.width);
}
#endif

}  // namespace

bool jpeg_supported() {
#if GPULAB_HAVE_TURBOJPEG
  return true;
#else
  return false;
#endif
}

bool png_supported() {
#if GPULAB_HAVE_PNG
  return true;
#else
  return false;
#endif
}

Result<torch::Tensor> decode_image(std::string_view bytes) {
  if (is_jpeg(bytes)) {
#if GPULAB_HAVE_TURBOJPEG
    return decode_jpeg(bytes);
#else
    return Result<torch::Tensor>(Code::kUnsupported, "gpulab was built without libturbojpeg");
#endif
  }
  if (is_png(bytes)) {
#if GPULAB_HAVE_PNG
    return decode_png(bytes);
#else
    return Result<torch::Tensor>(Code::kUnsupported, "gpulab was built without libpng");
#endif
  }
  return Result<torch::Tensor>(Code::kDataError, "not a JPEG or PNG file");
}

void resize_uint8(const torch::Tensor& image, int64_t size, torch::Tensor out) {
  if (image.size(1) == size && image.size(2) == size) {
    out.copy_(image);
    return;
  }
  namespace F = torch::nn::functional;
  auto f = F::interpolate(image.unsqueeze(0).to(torch::kFloat32),
                          F::InterpolateFuncOptions()
                              .size(std::vector<int64_t>{size, size})
                              .mode(torch::kBilinear)
                              .align_corners(false));
  out.copy_(f.squeeze(0).round().clamp(0, 255).to(torch::kUInt8));
}

}  // namespace gpulab::train
