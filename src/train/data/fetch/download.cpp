// `gpulab data get` (see download.h): the table of published files and digests, a libcurl
// download that resumes from a .part file, the MD5 check, and unpacking.
#include "train/data/fetch/download.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#if GPULAB_HAVE_CURL
#include <curl/curl.h>
#endif

#include "core/strings.h"
#include "train/data/fetch/md5.h"
#include "train/data/fetch/tar.h"

namespace gpulab::train {

namespace fs = std::filesystem;

namespace {

struct Item {
  std::string file;
  std::string md5;
};

struct Source {
  std::string name;
  std::string base_url;  // items are fetched from base_url + file
  std::vector<Item> items;
  bool unpack = false;  // items are tar.gz archives
  std::string folder;   // where open_dataset finds the data, relative to dir
};

const std::vector<Source>& sources() {
  static const std::vector<Source> table = {
      {"cifar10",
       "https://www.cs.toronto.edu/~kriz/",
       {{"cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a"}},
       true,
       "cifar-10-batches-py"},
      {"cifar100",
       "https://www.cs.toronto.edu/~kriz/",
       {{"cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85"}},
       true,
       "cifar-100-python"},
      {"fashion-mnist",
       "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
       {{"train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"},
        {"train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"},
        {"t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"},
        {"t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"}},
       false,
       "fashion-mnist"},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& fetchable_datasets() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& s : sources()) n.push_back(s.name);
    return n;
  }();
  return names;
}

bool download_available() {
#if GPULAB_HAVE_CURL && GPULAB_HAVE_ZLIB
  return true;
#else
  return false;
#endif
}

#if !(GPULAB_HAVE_CURL && GPULAB_HAVE_ZLIB)

Result<FetchReport> fetch_dataset(const std::string& name, const FetchOptions&) {
  return Result<FetchReport>(Code::kUnavailable,
                             "downloading is unavailable: gpulab was built without libcurl/zlib",
                             "download " + name + " by hand into the data folder (see README)");
}

#else

namespace {

// Progress for one transfer, drawn on stderr when it is a terminal.
struct Transfer {
  FILE* out = nullptr;
  std::string label;
  curl_off_t offset = 0;  // bytes already on disk before this transfer
  bool draw = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last{};
};

size_t on_data(char* p, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  return std::fwrite(p, size, n, t->out) * size;
}

int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (!t->draw) return 0;
  const auto tnow = std::chrono::steady_clock::now();
  if (tnow - t->last < std::chrono::milliseconds(200) && (total == 0 || now < total)) return 0;
  t->last = tnow;
  const double secs = std::chrono::duration<double>(tnow - t->start).count();
  const double rate = secs > 0 ? static_cast<double>(now) / secs : 0;
  const double done = static_cast<double>(t->offset + now);
  const double all = static_cast<double>(t->offset + total);
  std::string bar;
  if (total > 0) {
    const int width = 30;
    const int filled = static_cast<int>(width * done / all);
    bar = "[" + std::string(static_cast<size_t>(filled), '#') +
          std::string(static_cast<size_t>(width - filled), ' ') + "] " +
          fmt::format("{:5.1f}% ", 100.0 * done / all);
  }
  std::fprintf(stderr, "\r%s %s%s / %s  %s/s   ", t->label.c_str(), bar.c_str(),
               human_bytes(done).c_str(), total > 0 ? human_bytes(all).c_str() : "?",
               human_bytes(rate).c_str());
  std::fflush(stderr);
  return 0;
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { curl_global_cleanup(); }
};

// Downloads url into `part`, continuing after the bytes already there. Returns the HTTP status.
Result<long> download_to(const std::string& url, const fs::path& part, const std::string& label,
                         bool progress, int64_t& resumed_from) {
  static CurlGlobal global;
  std::error_code ec;
  const auto have = fs::exists(part, ec) ? static_cast<curl_off_t>(fs::file_size(part, ec)) : 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const curl_off_t from = attempt == 0 ? have : 0;
    FILE* f = std::fopen(part.c_str(), from > 0 ? "ab" : "wb");
    if (!f) return Result<long>(Code::kInternal, "cannot write " + part.string());
    Transfer t;
    t.out = f;
    t.label = label;
    t.offset = from;
    t.draw = progress && ::isatty(2);
    CURL* c = curl_easy_init();
    char err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);  // give up on a stalled connection
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gpulab-data-get");
    if (from > 0) curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, from);
    const CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    const bool write_ok = std::fclose(f) == 0;
    if (t.draw) std::fprintf(stderr, "\n");
    if (rc == CURLE_OK) {
      if (!write_ok) return Result<long>(Code::kInternal, "cannot write " + part.string());
      resumed_from = from;
      return status;
    }
    // 416: the partial file is already complete; the MD5 check decides.
    if (from > 0 && status == 416) {
      resumed_from = from;
      return status;
    }
    // The server cannot resume: start again from zero.
    if (from > 0 && rc == CURLE_RANGE_ERROR) continue;
    return Result<long>(
        Code::kUnavailable,
        fmt::format("download of {} failed: {}", url, err[0] ? err : curl_easy_strerror(rc)),
        "check the network or the --url; run the command again to resume");
  }
  return Result<long>(Code::kUnavailable, "download of " + url + " failed");
}

// `final_path` with MD5 `want`: kept when it is there and whole, else downloaded from `url`
// (resuming a .part), checked and moved into place; counted into report.
Status ensure_item(const std::string& url, const fs::path& final_path, const std::string& want,
                   const std::string& file, const FetchOptions& opts, FetchReport& report) {
  std::error_code ec;
  if (fs::is_regular_file(final_path, ec)) {
    auto sum = md5_file(final_path);
    if (sum && *sum == want) return ok_status();
    fs::remove(final_path, ec);  // stale or corrupt: fetch again
  }
  const fs::path part = final_path.string() + ".part";
  int64_t resumed = 0;
  auto st = download_to(url, part, file, opts.progress, resumed);
  if (!st) return st.error();
  report.resumed_from += resumed;
  auto sum = md5_file(part);
  if (!sum) return sum.error();
  if (*sum != want) {
    fs::remove(part, ec);
    return Error(Code::kDataError,
                 fmt::format("{} from {} has MD5 {}, expected {}: the download is corrupt or the "
                             "server sent another file; it was deleted",
                             file, url, *sum, want),
                 "run the command again; if it repeats, check the --url");
  }
  fs::rename(part, final_path, ec);
  if (ec) return Error(Code::kInternal, "cannot rename " + part.string());
  report.downloaded = true;
  return ok_status();
}

}  // namespace

Result<FetchReport> fetch_dataset(const std::string& name, const FetchOptions& opts) {
  std::string key = to_lower(name);
  for (char& ch : key)
    if (ch == '_') ch = '-';
  const Source* src = nullptr;
  for (const auto& s : sources())
    if (s.name == key) src = &s;
  if (!src)
    return Result<FetchReport>(Code::kInvalidArgument, "cannot download '" + name + "'",
                               "gpulab data get knows: " + join(fetchable_datasets(), ", "));
  if (!opts.md5.empty() && src->items.size() != 1)
    return Result<FetchReport>(Code::kInvalidArgument, "--md5 applies to single-archive sets");
  std::error_code ec;
  const fs::path dir = opts.dir.empty() ? fs::path("data") : fs::path(opts.dir);
  // Multi-file sets go into their folder; archives unpack their own folder.
  const fs::path save_dir = src->unpack ? dir : dir / src->folder;
  fs::create_directories(save_dir, ec);
  if (ec)
    return Result<FetchReport>(Code::kInvalidArgument, "cannot create " + save_dir.string(),
                               ec.message());
  FetchReport report;
  report.data_path = (dir / src->folder).string();
  for (const auto& item : src->items) {
    std::string url;
    if (opts.url.empty())
      url = src->base_url + item.file;
    else if (src->items.size() == 1)
      url = opts.url;
    else
      url = opts.url + (opts.url.back() == '/' ? "" : "/") + item.file;
    const std::string want = opts.md5.empty() ? item.md5 : to_lower(opts.md5);
    const fs::path final_path = save_dir / item.file;
    if (auto st = ensure_item(url, final_path, want, item.file, opts, report); !st)
      return st.error();
    report.files.push_back(final_path.string());
    if (src->unpack) {
      auto placed = extract_tar_gz(final_path, dir);
      if (!placed) {
        fs::remove(final_path, ec);
        return Result<FetchReport>(
            placed.error().code,
            final_path.string() + ": " + placed.error().message + "; the archive was deleted",
            "run the command again");
      }
      if (!fs::is_directory(dir / src->folder, ec)) {
        fs::remove(final_path, ec);
        return Result<FetchReport>(
            Code::kDataError,
            final_path.string() + " holds no " + src->folder + "/ folder; the archive was deleted",
            "check the --url: it must serve the published archive");
      }
      if (!opts.keep_archive) fs::remove(final_path, ec);
    }
  }
  return report;
}

#endif

}  // namespace gpulab::train
