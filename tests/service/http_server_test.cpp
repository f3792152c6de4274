// The HTTP layer on real sockets, without an engine: keep-alive, the error envelope for bad
// requests, body size limit (a 100 MB body), tokens, streamed upload, and the read timeout.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/files.h"
#include "http_client.h"
#include "service/base/api_error.h"
#include "service/base/crypto.h"
#include "service/base/metrics.h"
#include "service/domain/validation.h"
#include "service/http/http_server.h"
#include "service/http/router.h"
#include "service/store/store.h"

namespace gpulab::service {
namespace {

using testing::HttpClient;

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("gpulab-http-" + random_secret(8));
    std::filesystem::create_directories(dir_);
    config_.listen_port = 0;
    config_.backup_dir = dir_.string();
    config_.request_timeout_seconds = 2;
    config_.idle_timeout_seconds = 5;
    config_.worker_threads = 4;
    store_ = std::move(Store::open((dir_ / "t.db").string()).value());
    auth_ = std::make_unique<Auth>(*store_, true);
    token_ = auth_->issue_token("alice", false);
    router_ = std::make_unique<Router>(*auth_, &metrics_);
    router_->add({.method = "POST",
                  .path = "/echo",
                  .handler =
                      [](const ApiRequest& r, const Principal& p) {
                        Json j = parse_request(r.body, name_schema());
                        return ApiReply::ok("echo", {{"name", j["name"]}, {"user", p.user}});
                      },
                  .summary = "echo",
                  .tag = "test",
                  .schema = &name_schema()});
    router_->add({.method = "PUT",
                  .path = "/upload",
                  .handler =
                      [](const ApiRequest& r, const Principal&) {
                        std::string data = read_file(r.upload_file).value();
                        return ApiReply::ok("stored",
                                            {{"bytes", data.size()}, {"sha256", sha256_hex(data)}});
                      },
                  .summary = "upload",
                  .tag = "test",
                  .streamed_upload = true});
    server_ = std::make_unique<HttpServer>(config_, *router_);
    ASSERT_TRUE(server_->listen().ok());
    thread_ = std::thread([this] { server_->run(false); });
    base_ = "http://127.0.0.1:" + std::to_string(server_->port());
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  ServiceConfig config_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Auth> auth_;
  Metrics metrics_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::string base_, token_;
};

TEST_F(HttpServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  HttpClient c(base_, token_);
  for (int i = 0; i < 5; ++i) {
    auto r = c.post("/echo", R"({"name":"box)" + std::to_string(i) + R"("})");
    ASSERT_EQ(r.status, 200) << r.body << r.error;
    EXPECT_EQ(r.json()["data"]["user"], "alice");
    EXPECT_EQ(r.json()["success"], true);
    if (i > 0) {
      EXPECT_EQ(c.connections_opened(), 0) << "request " << i << " opened a new connection";
    }
  }
  EXPECT_NE(metrics_.render().find("route=\"/echo\",status=\"200\"} 5"), std::string::npos);
}

TEST_F(HttpServerTest, HistogramBoundsPrintAsWritten) {
  HttpClient c(base_, token_);
  ASSERT_EQ(c.post("/echo", R"({"name":"a"})").status, 200);
  std::string text = metrics_.render();
  EXPECT_NE(text.find(R"(route="/echo",le="0.005"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(route="/echo",le="2.5"})"), std::string::npos) << text;
  EXPECT_EQ(text.find("0000000"), std::string::npos) << text;
}

TEST_F(HttpServerTest, BadRequestsGetTheErrorEnvelope) {
  HttpClient c(base_, token_);
  auto malformed = c.post("/echo", "{\"name\": ");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(malformed.json()["error_code"], "INVALID_REQUEST");
  EXPECT_EQ(malformed.json()["success"], false);
  auto unknown = c.post("/echo", R"({"name":"a","privileged":true})");
  EXPECT_EQ(unknown.json()["error_code"], "INVALID_REQUEST");
  EXPECT_EQ(c.get("/nowhere").json()["error_code"], "NOT_FOUND");
  EXPECT_EQ(c.get("/echo").json()["error_code"], "METHOD_NOT_ALLOWED");
  HttpClient anon(base_);
  auto missing = anon.post("/echo", R"({"name":"a"})");
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.json()["error_code"], "UNAUTHORIZED");
  HttpClient wrong(base_, "glt_not-a-token");
  EXPECT_EQ(wrong.post("/echo", R"({"name":"a"})").json()["error_code"], "UNAUTHORIZED");
}

// Issue 13: a body whose first byte is >= 0x80 made the parse error quote raw bytes, and
// serializing that envelope threw outside every try: the process aborted. Paths and query
// strings carry the same bytes into "No such endpoint" and name checks.
TEST_F(HttpServerTest, InvalidUtf8NeverEscapesARequest) {
  HttpClient c(base_, token_);
  auto expect_clean_400 = [](const testing::HttpResult& r, long status) {
    EXPECT_EQ(r.status, status) << r.error;
    Json j = r.json();
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_EQ(j["success"], false);
    EXPECT_TRUE(j["error_code"].is_string());
    // The answer is valid UTF-8 (a strict parse succeeded) and quotes no raw 0xA1 byte.
    EXPECT_EQ(r.body.find('\xa1'), std::string::npos);
  };
  expect_clean_400(c.post("/echo",
                          "\xa1\x36\x0b"
                          "c"),
                   400);
  expect_clean_400(c.post("/echo", R"({"name":")"
                                   "\xff\xfe"
                                   R"("})"),
                   400);
  expect_clean_400(c.get("/no%A1where"), 404);
  expect_clean_400(c.get("/no\xa1where"), 404);
  // Still serving, on the same connection.
  EXPECT_EQ(c.post("/echo", R"({"name":"after"})").status, 200);
}

TEST_F(HttpServerTest, HundredMegabyteBodyIsRefusedEarly) {
  HttpClient c(base_, token_);
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.post_zeros("/echo", 100ll << 20);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 413) << r.error;
  EXPECT_EQ(r.json()["error_code"], "PAYLOAD_TOO_LARGE");
  EXPECT_LT(secs, 10.0);
  // The server is still fine afterwards.
  HttpClient again(base_, token_);
  EXPECT_EQ(again.post("/echo", R"({"name":"ok"})").status, 200);
}

TEST_F(HttpServerTest, UploadIsStreamedToDiskAndNeedsAToken) {
  std::string payload = random_secret(3 << 20);  // larger than the JSON body limit
  auto file = (dir_ / "payload.bin").string();
  std::ofstream(file, std::ios::binary) << payload;
  HttpClient c(base_, token_);
  auto r = c.put_file("/upload", file);
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  EXPECT_EQ(r.json()["data"]["bytes"], payload.size());
  EXPECT_EQ(r.json()["data"]["sha256"], sha256_hex(payload));
  HttpClient anon(base_);
  EXPECT_EQ(anon.put_file("/upload", file).status, 401);
  // Nothing of either upload stays behind in the backup dir.
  int leftovers = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    if (e.path().filename().string().rfind(".upload-", 0) == 0) ++leftovers;
  EXPECT_EQ(leftovers, 0);
}

TEST_F(HttpServerTest, SlowClientIsCutOffAfterTheReadTimeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(server_->port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  std::string partial = "POST /echo HTTP/1.1\r\nHost: x\r\n";  // never finishes the header
  ASSERT_GT(::write(fd, partial.data(), partial.size()), 0);
  auto t0 = std::chrono::steady_clock::now();
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof buf);  // returns 0 when the server closes
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LE(n, 0);
  EXPECT_GE(secs, 1.5);
  EXPECT_LT(secs, 10.0);
  ::close(fd);
}

}  // namespace
}  // namespace gpulab::service
