// `gpulab data get`: downloads a data set's published archive or files (libcurl; resumes a
// partial download with an HTTP Range request), checks the published MD5, and unpacks tar.gz.
// Compiled with libcurl when CMake finds it (GPULAB_HAVE_CURL); otherwise fetching reports that
// downloading is unavailable, so the train module still builds from libtorch alone.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::train {

struct FetchOptions {
  std::string dir = "data";  // where archives are saved and unpacked
  std::string url;           // overrides the published URL (base URL for multi-file sets)
  std::string md5;           // overrides the published MD5 (single-archive sets)
  bool progress = true;      // progress bar when stderr is a terminal
  bool keep_archive = true;  // leave the .tar.gz next to the unpacked folder, as the seed does
};

struct FetchReport {
  std::vector<std::string> files;  // downloaded (or already present and verified) files
  std::string data_path;           // the folder open_dataset will find
  bool downloaded = false;         // false when everything was already there
  int64_t resumed_from = 0;        // bytes kept from a partial download
};

bool download_available();
// Names `gpulab data get` accepts: cifar10, cifar100, fashion-mnist.
const std::vector<std::string>& fetchable_datasets();

// Fetches `name` into opts.dir. Errors: kInvalidArgument (unknown name), kUnavailable (no
// libcurl, network failure), kDataError (MD5 mismatch or a bad archive, which is deleted).
Result<FetchReport> fetch_dataset(const std::string& name, const FetchOptions& opts);

}  // namespace gpulab::train
