// The dashboard's server pieces on their own: the GPU ring buffer (wraps, keeps order, since),
// the event log (numbering, gap), cookie sessions (CSRF, sign-out, revoked token, expiry), and
// the embedded page.
#include <gtest/gtest.h>

#include <thread>

#include "service/base/api_error.h"
#include "service/base/crypto.h"
#include "service/base/event_hub.h"
#include "service/base/gpu_history.h"
#include "service/http/auth.h"
#include "service/http/web_session.h"
#include "service/static_assets.h"
#include "service/store/store.h"

namespace gpulab::service {
namespace {

TEST(GpuHistory, KeepsTheLastCapacitySamplesOldestFirst) {
  GpuHistory h(3);
  for (int i = 1; i <= 5; ++i) {
    GpuPoint p;
    p.t_ms = i * 1000;
    p.held = i % 2 == 0;
    p.utilization_percent = i * 10.0;
    h.add("GPU-a", p);
  }
  EXPECT_EQ(h.size("GPU-a"), 3u);
  Json c = h.columns("GPU-a");
  EXPECT_EQ(c["t"], Json({3.0, 4.0, 5.0}));
  EXPECT_EQ(c["utilization_percent"], Json({30.0, 40.0, 50.0}));
  EXPECT_EQ(c["held"], Json({0, 1, 0}));
  EXPECT_TRUE(c["temperature_c"][0].is_null());  // not measured: null, not 0
  EXPECT_EQ(h.columns("GPU-a", 4000)["t"], Json({5.0}));
  EXPECT_TRUE(h.columns("GPU-unknown")["t"].empty());
}

TEST(EventHub, NumbersEventsAndReportsAGap) {
  EventHub hub(2);
  EXPECT_EQ(hub.latest(), 0u);
  hub.publish("containers", Json::object());
  hub.publish("gpus", {{"n", 1}});
  bool gap = true;
  auto all = hub.since(0, gap);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_FALSE(gap);
  EXPECT_EQ(all[1].topic, "gpus");
  EXPECT_EQ(all[1].data, "{\"n\":1}");
  hub.publish("images", Json::object());  // the first event is dropped now
  auto after = hub.since(0, gap);
  EXPECT_TRUE(gap);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].seq, 2u);
  EXPECT_TRUE(hub.since(3, gap).empty());
  EXPECT_FALSE(gap);
}

class Sessions : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::open(":memory:");
    ASSERT_TRUE(s.ok());
    store_ = std::move(*s);
    auth_ = std::make_unique<Auth>(*store_, true);
    token_ = auth_->issue_token("alice", false);
  }
  std::unique_ptr<Store> store_;
  std::unique_ptr<Auth> auth_;
  std::string token_;
};

ApiCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.api_code();
  }
  return ApiCode::kInternalError;
}

TEST_F(Sessions, CookieWorksChangesNeedTheCsrfToken) {
  WebSessions ws(*store_);
  auto c = ws.create(Principal{"alice", false}, sha256_hex(token_));
  std::string cookie = "theme=dark; " + std::string(kSessionCookie) + "=" + c.id;
  auto who = ws.authenticate(cookie, false, "");
  ASSERT_TRUE(who);
  EXPECT_EQ(who->user, "alice");
  EXPECT_TRUE(ws.authenticate(cookie, true, c.csrf));
  EXPECT_EQ(code_of([&] { ws.authenticate(cookie, true, ""); }), ApiCode::kForbidden);
  EXPECT_EQ(code_of([&] { ws.authenticate(cookie, true, c.csrf + "x"); }), ApiCode::kForbidden);
  EXPECT_EQ(ws.csrf_for(cookie), c.csrf);
  EXPECT_FALSE(ws.authenticate("theme=dark", false, ""));  // no session cookie: not ours
  EXPECT_EQ(code_of([&] { ws.authenticate(std::string(kSessionCookie) + "=forged", false, ""); }),
            ApiCode::kUnauthorized);
  EXPECT_TRUE(ws.end(cookie));
  EXPECT_FALSE(ws.alive(cookie));
  EXPECT_EQ(code_of([&] { ws.authenticate(cookie, false, ""); }), ApiCode::kUnauthorized);
}

TEST_F(Sessions, RevokingTheTokenEndsItsSessions) {
  WebSessions ws(*store_);
  auto c = ws.create(Principal{"alice", false}, sha256_hex(token_));
  std::string cookie = std::string(kSessionCookie) + "=" + c.id;
  EXPECT_TRUE(ws.alive(cookie));
  auth_->revoke_token(token_);
  EXPECT_FALSE(ws.alive(cookie));
  EXPECT_EQ(code_of([&] { ws.authenticate(cookie, false, ""); }), ApiCode::kUnauthorized);
}

TEST_F(Sessions, IdleSessionsExpire) {
  WebSessions ws(*store_, std::chrono::seconds(0));
  auto c = ws.create(Principal{"alice", false}, sha256_hex(token_));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(ws.alive(std::string(kSessionCookie) + "=" + c.id));
}

TEST(WebSessionsCookie, ParsesAndSetsCookies) {
  EXPECT_EQ(WebSessions::cookie_value("a=1; gpulab_session=xyz;b=2", "gpulab_session"), "xyz");
  EXPECT_EQ(WebSessions::cookie_value("a=1", "gpulab_session"), "");
  EXPECT_EQ(WebSessions::cookie_value("", "a"), "");
  std::string set = WebSessions::set_cookie("id1", false);
  EXPECT_NE(set.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set.find("SameSite=Strict"), std::string::npos);
  EXPECT_NE(WebSessions::clear_cookie(false).find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(set.find("Secure"), std::string::npos);  // plain HTTP: a Secure cookie would be lost
  EXPECT_NE(WebSessions::set_cookie("id1", true).find("; Secure"), std::string::npos);
  EXPECT_NE(WebSessions::clear_cookie(true).find("; Secure"), std::string::npos);
}

TEST(StaticAssets, ThePageAndItsLibrariesAreInTheBinary) {
  const WebAsset* index = find_web_asset("index.html");
  ASSERT_NE(index, nullptr);
  std::string html(reinterpret_cast<const char*>(index->data), index->size);
  EXPECT_NE(html.find("/ui/app.js"), std::string::npos);
  EXPECT_NE(html.find("/ui/vendor/uPlot.iife.min.js"), std::string::npos);
  for (const char* f : {"app.js", "api.js", "overview.js", "containers.js", "images.js", "admin.js",
                        "hosts.js", "style.css", "vendor/htm-preact-standalone.mjs",
                        "vendor/uPlot.iife.min.js", "vendor/uPlot.min.css"})
    EXPECT_NE(find_web_asset(f), nullptr) << f;
  EXPECT_EQ(find_web_asset("package.json"), nullptr);  // dev files stay out
  EXPECT_EQ(find_web_asset("../CMakeLists.txt"), nullptr);
  EXPECT_EQ(web_content_type("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(web_content_type("x.css"), "text/css; charset=utf-8");
}

}  // namespace
}  // namespace gpulab::service
