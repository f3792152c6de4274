// One text/event-stream response per dashboard: "id/event/data" blocks from the EventHub.
#include "service/http/sse_stream.h"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <memory>

#include "core/log.h"

namespace gpulab::service {

namespace {

namespace beast = boost::beast;
namespace net = boost::asio;

constexpr auto kPoll = std::chrono::seconds(1);
constexpr int kKeepAliveTicks = 15;  // a comment line every 15 s keeps proxies from timing out
constexpr auto kWriteTimeout = std::chrono::seconds(30);

// Stream: beast::tcp_stream, or an ssl_stream over one (HTTPS).
template <typename Stream>
class EventStream : public std::enable_shared_from_this<EventStream<Stream>> {
 public:
  EventStream(Stream stream, const EventHub& hub, std::function<bool()> allowed)
      : stream_(std::move(stream)),
        hub_(hub),
        allowed_(std::move(allowed)),
        timer_(stream_.get_executor()) {}

  void start() {
    // No Content-Length: the body ends when the connection closes.
    out_ =
        "HTTP/1.1 200 OK\r\nServer: gpulab\r\nContent-Type: text/event-stream\r\n"
        "Cache-Control: no-store\r\nConnection: close\r\nX-Accel-Buffering: no\r\n\r\n"
        "retry: 3000\n\n";
    seq_ = hub_.latest();
    // The page may have missed changes while it connected: tell it to refresh once.
    out_ += "event: hello\ndata: {}\n\n";
    send();
  }

 private:
  using std::enable_shared_from_this<EventStream<Stream>>::shared_from_this;

  auto& tcp() { return beast::get_lowest_layer(stream_); }

  void send() {
    tcp().expires_after(kWriteTimeout);
    net::async_write(stream_, net::buffer(out_),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) {
                         spdlog::debug("event stream: {}", ec.message());
                         return self->close();
                       }
                       self->out_.clear();
                       self->tcp().expires_never();
                       self->wait();
                     });
  }

  void wait() {
    timer_.expires_after(kPoll);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->close();
      self->poll();
    });
  }

  void poll() {
    if (allowed_ && !allowed_()) {
      out_ = "event: signed-out\ndata: {}\n\n";
      allowed_ = [] { return false; };
      tcp().expires_after(kWriteTimeout);
      net::async_write(
          stream_, net::buffer(out_),
          [self = shared_from_this()](beast::error_code, std::size_t) { self->close(); });
      return;
    }
    bool gap = false;
    for (const auto& e : hub_.since(seq_, gap)) {
      out_ += "id: " + std::to_string(e.seq) + "\nevent: " + e.topic + "\ndata: " + e.data + "\n\n";
      seq_ = e.seq;
    }
    if (gap) out_ += "event: hello\ndata: {}\n\n";  // too slow: refresh everything
    if (out_.empty() && ++idle_ticks_ >= kKeepAliveTicks) out_ = ": keep-alive\n\n";
    if (out_.empty()) return wait();
    idle_ticks_ = 0;
    send();
  }

  void close() {
    beast::error_code ec;
    timer_.cancel();
    tcp().socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
    tcp().socket().close(ec);
  }

  Stream stream_;
  const EventHub& hub_;
  std::function<bool()> allowed_;
  net::steady_timer timer_;
  std::string out_;
  std::uint64_t seq_ = 0;
  int idle_ticks_ = 0;
};

}  // namespace

void start_event_stream(beast::tcp_stream stream, const EventHub& hub,
                        std::function<bool()> allowed) {
  std::make_shared<EventStream<beast::tcp_stream>>(std::move(stream), hub, std::move(allowed))
      ->start();
}

void start_event_stream(beast::ssl_stream<beast::tcp_stream> stream, const EventHub& hub,
                        std::function<bool()> allowed) {
  std::make_shared<EventStream<beast::ssl_stream<beast::tcp_stream>>>(std::move(stream), hub,
                                                                      std::move(allowed))
      ->start();
}

}  // namespace gpulab::service
