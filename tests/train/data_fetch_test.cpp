// `gpulab data get` against a loopback HTTP server with Range support started by the test: a
// good download unpacks to a set open_dataset reads, a wrong MD5 or a bad archive is refused and
// removed, a partial file is resumed with a Range request; plus MD5 vectors and unsafe tar paths.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>

#include "core/error.h"
#include "core/files.h"
#include "core/subprocess.h"
#include "data_test_util.h"
#include "train/data/datasets.h"
#include "train/data/fetch/download.h"
#include "train/data/fetch/md5.h"
#include "train/data/fetch/tar.h"

namespace gpulab::train {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

// range_http_server.py serving `root` on a free loopback port.
class HttpServer {
 public:
  HttpServer(const fs::path& root, const fs::path& log) {
    const std::string cmd = "echo $$; exec " + testing::reference_python() + " " +
                            testing::fixture("range_http_server.py").string() + " --root " +
                            root.string() + " --log " + log.string();
    pipe_ = ::popen(cmd.c_str(), "r");
    if (!pipe_) return;
    long pid = 0, port = 0;
    if (std::fscanf(pipe_, "%ld %ld", &pid, &port) == 2) {
      pid_ = static_cast<pid_t>(pid);
      port_ = static_cast<int>(port);
    }
  }
  ~HttpServer() {
    if (pid_ > 0) ::kill(pid_, SIGTERM);
    if (pipe_) ::pclose(pipe_);
  }
  int port() const { return port_; }
  std::string url(const std::string& file) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + file;
  }

 private:
  FILE* pipe_ = nullptr;
  pid_t pid_ = -1;
  int port_ = 0;
};

class DataFetch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!download_available()) GTEST_SKIP() << "built without libcurl";
    GPULAB_REQUIRE_PYTHON();
    fs::create_directories(tmp_.path / "srv");
    archive_ = tmp_.path / "srv" / "c10.tar.gz";
    testing::make_cifar(tmp_.path / "src", "cifar10", "py2", 3, archive_.string());
    md5_ = *md5_file(archive_);
    server_ = std::make_unique<HttpServer>(tmp_.path / "srv", tmp_.path / "requests.log");
    ASSERT_GT(server_->port(), 0) << "test HTTP server did not start";
  }
  FetchOptions opts(const std::string& md5) const {
    FetchOptions o;
    o.dir = (tmp_.path / "data").string();
    o.url = server_->url("c10.tar.gz");
    o.md5 = md5;
    o.progress = false;
    return o;
  }
  TempDir tmp_;
  fs::path archive_;
  std::string md5_;
  std::unique_ptr<HttpServer> server_;
};

TEST(DataMd5, KnownVectorsAndMd5sum) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_hex("The quick brown fox jumps over the lazy dog"),
            "9e107d9d372bb6826bd81d3542a419d6");
  TempDir dir;
  std::string big;
  for (uint32_t i = 0; i < 300000; ++i) big += static_cast<char>((i * 7919u) >> 3);
  testing::write_bytes(dir.path / "f", big);
  auto r = run_process({"md5sum", (dir.path / "f").string()});
  ASSERT_TRUE(r && r->success());
  EXPECT_EQ(*md5_file(dir.path / "f"), r->out.substr(0, 32));
}

TEST_F(DataFetch, DownloadsVerifiesAndUnpacks) {
  auto r = fetch_dataset("cifar10", opts(md5_));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->downloaded);
  EXPECT_EQ(r->resumed_from, 0);
  EXPECT_TRUE(fs::exists(tmp_.path / "data" / "cifar-10-python.tar.gz"));
  auto ds = open_dataset("cifar10", (tmp_.path / "data").string(), Split::kTrain);
  EXPECT_EQ(ds->size(), 15);
  EXPECT_EQ(ds->in_memory()->first[4][2][31][31].item<int64_t>(), testing::cifar_pixel(2, 1, 3071));
  // A second run finds the verified archive and downloads nothing.
  auto again = fetch_dataset("cifar10", opts(md5_));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->downloaded);
}

TEST_F(DataFetch, WrongMd5IsRefusedAndRemoved) {
  auto r = fetch_dataset("cifar10", opts("0123456789abcdef0123456789abcdef"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kDataError);
  EXPECT_NE(r.error().message.find("has MD5 " + md5_ + ", expected 0123456789abcdef"),
            std::string::npos)
      << r.error().message;
  EXPECT_FALSE(fs::exists(tmp_.path / "data" / "cifar-10-python.tar.gz.part"));
  EXPECT_FALSE(fs::exists(tmp_.path / "data" / "cifar-10-python.tar.gz"));
  EXPECT_FALSE(fs::exists(tmp_.path / "data" / "cifar-10-batches-py"));
}

TEST_F(DataFetch, ResumesAPartialDownloadWithARangeRequest) {
  const std::string full = testing::read_bytes(archive_);
  const size_t half = full.size() / 2;
  fs::create_directories(tmp_.path / "data");
  testing::write_bytes(tmp_.path / "data" / "cifar-10-python.tar.gz.part", full.substr(0, half));
  auto r = fetch_dataset("cifar10", opts(md5_));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->resumed_from, static_cast<int64_t>(half));
  const std::string log = testing::read_bytes(tmp_.path / "requests.log");
  EXPECT_NE(log.find("/c10.tar.gz bytes=" + std::to_string(half) + "-"), std::string::npos) << log;
  EXPECT_EQ(testing::read_bytes(tmp_.path / "data" / "cifar-10-python.tar.gz"), full);
  EXPECT_EQ(open_dataset("cifar10", (tmp_.path / "data").string(), Split::kTest)->size(), 3);
}

TEST_F(DataFetch, BadArchiveAndMissingUrlAreRefused) {
  // Garbage whose MD5 is "right": the archive check refuses it and deletes it.
  testing::write_bytes(tmp_.path / "srv" / "junk.tar.gz", std::string(5000, 'x'));
  auto o = opts(md5_hex(std::string(5000, 'x')));
  o.url = server_->url("junk.tar.gz");
  auto r = fetch_dataset("cifar10", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kDataError);
  EXPECT_NE(r.error().message.find("bad archive"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(tmp_.path / "data" / "cifar-10-python.tar.gz"));
  // A truncated tar.gz (cut in the middle of the gzip stream).
  const std::string full = testing::read_bytes(archive_);
  testing::write_bytes(tmp_.path / "srv" / "cut.tar.gz", full.substr(0, full.size() - 200));
  o = opts(md5_hex(full.substr(0, full.size() - 200)));
  o.url = server_->url("cut.tar.gz");
  r = fetch_dataset("cifar10", o);
  ASSERT_FALSE(r.ok());
  // core's tar codec names the archive and what is wrong with it.
  EXPECT_NE(r.error().message.find("is damaged"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(tmp_.path / "data" / "cifar-10-batches-py"));
  // 404.
  o.url = server_->url("absent.tar.gz");
  r = fetch_dataset("cifar10", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kUnavailable);
  EXPECT_NE(r.error().message.find("404"), std::string::npos) << r.error().message;
  // Unknown set.
  EXPECT_EQ(fetch_dataset("imagenet", o).error().code, Code::kInvalidArgument);
}

TEST_F(DataFetch, CommandLine) {
  if (!fs::exists(GPULAB_BINARY)) GTEST_SKIP() << "gpulab binary not built";
  const auto o = opts(md5_);
  auto r = run_process(
      {GPULAB_BINARY, "data", "get", "cifar10", "--dir", o.dir, "--url", o.url, "--md5", md5_});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_NE(r->out.find("cifar10: downloaded and verified in " + o.dir + "/cifar-10-batches-py"),
            std::string::npos)
      << r->out;
  // On a terminal (script(1) gives it one) the download draws a progress bar.
  if (auto script = which("script")) {
    const std::string cmd = std::string(GPULAB_BINARY) + " data get cifar10 --dir " +
                            (tmp_.path / "tty").string() + " --url " + o.url + " --md5 " + md5_;
    r = run_process({script->string(), "-qec", cmd, "/dev/null"});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit_code, 0) << r->out;
    EXPECT_NE(r->out.find("100.0%"), std::string::npos) << r->out;
  }
  r = run_process({GPULAB_BINARY, "data", "info", "cifar10", "--data_dir", o.dir});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_NE(r->out.find("images: 15, 3x32x32"), std::string::npos) << r->out;
  r = run_process({GPULAB_BINARY, "data", "get", "cifar10", "--dir", (tmp_.path / "d2").string(),
                   "--url", o.url, "--md5", "00000000000000000000000000000000"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, exit_code_for(Code::kDataError));
  EXPECT_NE(r->err.find("error: cifar-10-python.tar.gz from"), std::string::npos) << r->err;
  r = run_process(
      {GPULAB_BINARY, "data", "info", "cifar100", "--data_dir", (tmp_.path / "none").string()});
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0);
  EXPECT_NE(r->err.find("Training data not found in"), std::string::npos) << r->err;
  EXPECT_NE(r->err.find("hint: download it with: gpulab data get cifar100"), std::string::npos);
}

TEST(DataTar, UnsafePathsAreRefusedAndNothingIsWritten) {
  GPULAB_REQUIRE_PYTHON();
  TempDir dir;
  testing::run_python({"-c", R"(
import io, sys, tarfile
with tarfile.open(sys.argv[1], 'w:gz') as t:
    for name in ('ok/a.txt', '../evil.txt'):
        data = b'hello'
        info = tarfile.TarInfo(name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
)",
                       (dir.path / "bad.tar.gz").string()});
  fs::create_directories(dir.path / "out");
  auto r = extract_tar_gz(dir.path / "bad.tar.gz", dir.path / "out");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unsafe path '../evil.txt'"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.path / "evil.txt"));
  EXPECT_FALSE(fs::exists(dir.path / "out" / "ok"));
}

}  // namespace
}  // namespace gpulab::train
