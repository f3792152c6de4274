// The dashboard's files (web/), compiled into the binary by cmake/EmbedWeb.cmake so that
// `gpulab serve` needs nothing beside it and works with no network.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpulab::service {

struct WebAsset {
  const char* path;  // relative to web/, e.g. "index.html", "vendor/uPlot.min.css"
  const unsigned char* data;
  std::size_t size;
};

// The generated table (web_assets.cpp in the build tree).
extern const WebAsset kWebAssets[];
extern const std::size_t kWebAssetCount;

// The asset at `path` (relative to web/), or nullptr.
const WebAsset* find_web_asset(std::string_view path);
// "text/html; charset=utf-8", "text/javascript; charset=utf-8", ... by file extension.
std::string web_content_type(std::string_view path);

}  // namespace gpulab::service
