// Boost.Beast sessions: read a header, decide (route, auth, size) before taking the body, read
// it into memory or a file, run the handler on the worker pool, write the reply, keep alive.
#include "service/http/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <filesystem>
#include <limits>
#include <optional>
#include <thread>

#include "core/disk_space.h"
#include "core/log.h"
#include "service/base/api_error.h"
#include "service/base/crypto.h"
#include "service/http/http_request.h"
#include "service/http/sse_stream.h"
#include "service/http/web_session.h"

namespace gpulab::service {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
namespace ssl = net::ssl;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

struct HttpServer::Impl {
  const ServiceConfig& config;
  const Router& router;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::thread_pool workers;
  std::optional<net::signal_set> signals;
  std::optional<ssl::context> tls;  // set: every connection is HTTPS
  uint16_t port = 0;

  Impl(const ServiceConfig& c, const Router& r)
      : config(c), router(r), workers(static_cast<size_t>(c.worker_threads)) {}
  void accept();
  Status load_tls();
};

namespace {

// Stream: beast::tcp_stream (HTTP) or TlsStream (HTTPS).
template <typename Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  // (socket) for HTTP, (socket, tls context) for HTTPS.
  template <typename... StreamArgs>
  explicit Session(HttpServer::Impl& srv, StreamArgs&&... args)
      : srv_(srv), stream_(std::forward<StreamArgs>(args)...) {}

  void start() {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      net::dispatch(stream_.get_executor(),
                    beast::bind_front_handler(&Session::handshake, shared_from_this()));
    } else {
      net::dispatch(stream_.get_executor(),
                    beast::bind_front_handler(&Session::read_header, shared_from_this()));
    }
  }

 private:
  using std::enable_shared_from_this<Session<Stream>>::shared_from_this;

  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }

  // HTTPS: the TLS handshake first, under the read timeout (a client that never speaks TLS, or
  // speaks plain HTTP to the HTTPS port, is dropped).
  void handshake() {
    tcp().expires_after(request_timeout());
    stream_.async_handshake(ssl::stream_base::server,
                            [self = shared_from_this()](beast::error_code ec) {
                              if (ec) {
                                spdlog::debug("TLS handshake: {}", ec.message());
                                return self->close();
                              }
                              self->read_header();
                            });
  }

  std::chrono::seconds request_timeout() const {
    return std::chrono::seconds(srv_.config.request_timeout_seconds);
  }

  void read_header() {
    header_.emplace();
    // Checked by us once the route is known. (Not boost::none: Boost 1.74 compares an empty
    // limit as smaller than any length.)
    header_->body_limit(std::numeric_limits<std::uint64_t>::max());
    header_->header_limit(64 * 1024);
    // The first request gets the read timeout; a kept-alive connection may idle longer.
    tcp().expires_after(first_ ? request_timeout()
                               : std::chrono::seconds(srv_.config.idle_timeout_seconds));
    first_ = false;
    http::async_read_header(stream_, buffer_, *header_,
                            beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  // Bytes that are not HTTP get the error envelope (then the connection closes); end of stream
  // and timeouts have no one to answer.
  bool answer_malformed(beast::error_code ec) {
    if (ec.category() != beast::http::make_error_code(http::error::bad_target).category() ||
        ec == http::error::end_of_stream || ec == http::error::partial_message)
      return false;
    if (ec == http::error::header_limit) {
      reject(Router::error(ApiCode::kPayloadTooLarge, "Request header larger than 64 KiB"));
    } else {
      reject(Router::error(ApiCode::kInvalidRequest, "Malformed HTTP request: " + ec.message(),
                           "send an HTTP/1.1 request; the API is described at "
                           "/api/v1/openapi.json"));
    }
    return true;
  }

  void on_header(beast::error_code ec, std::size_t) {
    if (ec) {
      spdlog::debug("reading a request header: {}", ec.message());
      if (answer_malformed(ec)) return;
      return close();
    }
    auto& h = header_->get();
    keep_alive_ = h.keep_alive();
    req_ = request_from_header(h);
    beast::error_code rec;
    auto ep = tcp().socket().remote_endpoint(rec);
    if (!rec) req_.remote = ep.address().to_string();

    std::map<std::string, std::string> params;
    bool known = false;
    const Route* route = srv_.router.match(req_.method, req_.path, params, known);
    auto length = header_->content_length();
    expect_continue_ = beast::iequals(h[http::field::expect], "100-continue");

    if (route && route->streamed_upload) {
      // Refuse before a byte of the body is stored: who asks, and how much.
      try {
        srv_.router.authenticate(*route, req_);
      } catch (const Exception& e) {
        return reject(Router::refusal(e));
      }
      if (length && *length > srv_.config.max_upload_bytes)
        return reject(Router::error(ApiCode::kPayloadTooLarge,
                                    "Upload larger than the limit of " +
                                        std::to_string(srv_.config.max_upload_bytes) + " bytes"));
      // A declared size the backup folder's disk cannot hold is refused before it is stored.
      if (auto free = free_bytes(srv_.config.backup_dir); length && free && *length > *free)
        return reject(Router::error(ApiCode::kPayloadTooLarge,
                                    no_space_error(srv_.config.backup_dir, *length).message,
                                    "free space in the backup folder, or upload a smaller file"));
      return read_upload();
    }
    if (length && *length > srv_.config.max_body_bytes)
      return reject(Router::error(
          ApiCode::kPayloadTooLarge,
          "Request body of " + std::to_string(*length) + " bytes exceeds the limit of " +
              std::to_string(srv_.config.max_body_bytes) + " bytes",
          "JSON requests are small; backups go through /api/v1/gpu-docker/backups/upload"));
    string_parser_.emplace(std::move(*header_));
    string_parser_->body_limit(srv_.config.max_body_bytes);
    send_continue([self = shared_from_this()] {
      self->tcp().expires_after(self->request_timeout());
      http::async_read(self->stream_, self->buffer_, *self->string_parser_,
                       beast::bind_front_handler(&Session::on_body, self));
    });
  }

  // "Expect: 100-continue" (curl sends it for large bodies): tell the client to go on.
  template <typename Next>
  void send_continue(Next next) {
    if (!expect_continue_) return next();
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(stream_, net::buffer(kContinue),
                     [self = shared_from_this(), next](beast::error_code ec, std::size_t) {
                       if (ec) return self->close();
                       next();
                     });
  }

  void on_body(beast::error_code ec, std::size_t) {
    if (ec == http::error::body_limit)
      return reject(Router::error(ApiCode::kPayloadTooLarge,
                                  "Request body exceeds the limit of " +
                                      std::to_string(srv_.config.max_body_bytes) + " bytes"));
    if (ec) {
      spdlog::debug("reading a request body: {}", ec.message());
      if (answer_malformed(ec)) return;
      return close();
    }
    req_.body = std::move(string_parser_->get().body());
    dispatch();
  }

  void read_upload() {
    std::error_code fec;
    std::filesystem::create_directories(srv_.config.backup_dir, fec);
    upload_path_ = (std::filesystem::path(srv_.config.backup_dir) /
                    (".upload-" + random_secret(12) + ".partial"))
                       .string();
    file_parser_.emplace(std::move(*header_));
    file_parser_->body_limit(srv_.config.max_upload_bytes);
    beast::error_code ec;
    file_parser_->get().body().open(upload_path_.c_str(), beast::file_mode::write, ec);
    if (ec)
      return reject(Router::error(ApiCode::kInternalError,
                                  "Cannot write to the backup dir: " + ec.message()));
    send_continue([self = shared_from_this()] { self->read_upload_some(); });
  }

  // Reads the upload piece by piece so the timeout counts inactivity, not total time.
  void read_upload_some() {
    if (file_parser_->is_done()) {
      file_parser_->get().body().close();
      req_.upload_file = upload_path_;
      return dispatch();
    }
    tcp().expires_after(request_timeout());
    http::async_read_some(stream_, buffer_, *file_parser_,
                          [self = shared_from_this()](beast::error_code ec, std::size_t) {
                            if (ec) {
                              self->file_parser_->get().body().close();
                              std::error_code rm;
                              std::filesystem::remove(self->upload_path_, rm);
                              if (ec == http::error::body_limit)
                                return self->reject(Router::error(ApiCode::kPayloadTooLarge,
                                                                  "Upload larger than the limit"));
                              return self->close();
                            }
                            self->read_upload_some();
                          });
  }

  void dispatch() {
    spdlog::debug("{} {} ({} body bytes)", req_.method, req_.path, req_.body.size());
    tcp().expires_never();
    net::post(srv_.workers, [self = shared_from_this()] {
      // A throw here would end the worker thread and the process; dropping `self` instead
      // closes this connection only.
      try {
        ApiReply reply = self->srv_.router.dispatch(self->req_);
        if (!self->req_.upload_file.empty()) {
          std::error_code ec;
          std::filesystem::remove(self->req_.upload_file, ec);  // the handler moved what it kept
        }
        net::post(self->stream_.get_executor(), [self, reply = std::move(reply)]() mutable {
          self->write(std::move(reply), false);
        });
      } catch (const std::exception& e) {
        spdlog::error("{} {}: dropped the connection: {}", self->req_.method, self->req_.path,
                      e.what());
      }
    });
  }

  // Answers and closes without reading the rest of the request.
  void reject(ApiReply reply) {
    keep_alive_ = false;
    write(std::move(reply), true);
  }

  void write(ApiReply reply, bool drain_after) {
    if (reply.events) {  // the connection becomes an event stream, owned by the stream from here
      return start_event_stream(std::move(stream_), *reply.events, std::move(reply.stream_allowed));
    }
    if (!reply.file.empty()) {
      auto res = std::make_shared<http::response<http::file_body>>();
      beast::error_code ec;
      res->body().open(reply.file.c_str(), beast::file_mode::scan, ec);
      if (!ec) {
        res->result(reply.status);
        res->set(http::field::content_type, reply.content_type);
        for (const auto& [k, v] : reply.headers) res->set(k, v);
        res->keep_alive(keep_alive_);
        res->prepare_payload();
        return send(res, drain_after);
      }
      reply = Router::error(ApiCode::kBackupNotFound,
                            "Cannot open " + reply.file + ": " + ec.message());
    }
    auto res = std::make_shared<http::response<http::string_body>>();
    res->result(reply.status);
    res->set(http::field::content_type, reply.content_type);
    res->set(http::field::server, "gpulab");
    for (const auto& [k, v] : reply.headers) res->set(k, v);
    res->body() = std::move(reply.body);
    res->keep_alive(keep_alive_);
    res->prepare_payload();
    send(res, drain_after);
  }

  // Serializes piece by piece: a large download keeps going as long as the client reads.
  template <typename Body>
  void send(std::shared_ptr<http::response<Body>> res, bool drain_after) {
    auto sr = std::make_shared<http::response_serializer<Body>>(*res);
    write_some(res, sr, drain_after);
  }

  template <typename Body>
  void write_some(std::shared_ptr<http::response<Body>> res,
                  std::shared_ptr<http::response_serializer<Body>> sr, bool drain_after) {
    tcp().expires_after(request_timeout());
    http::async_write_some(
        stream_, *sr,
        [self = shared_from_this(), res, sr, drain_after](beast::error_code ec, std::size_t) {
          if (ec) {
            spdlog::debug("writing a response: {}", ec.message());
            return self->close();
          }
          if (!sr->is_done()) return self->write_some(res, sr, drain_after);
          if (drain_after) return self->drain();
          if (!self->keep_alive_) return self->close();
          self->buffer_.consume(0);
          self->read_header();
        });
  }

  // After an early answer (413, 401) the client may still be sending: half-close, then read and
  // discard for a moment so the answer is not lost to a connection reset.
  void drain() {
    beast::error_code ec;
    tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
    drain_buf_.resize(64 * 1024);
    tcp().expires_after(std::chrono::seconds(2));
    stream_.async_read_some(net::buffer(drain_buf_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->close();
                              self->drain();
                            });
  }

  void close() {
    beast::error_code ec;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp().socket().close(ec);
  }

  HttpServer::Impl& srv_;
  Stream stream_;
  beast::flat_buffer buffer_;
  bool first_ = true;
  bool keep_alive_ = true;
  bool expect_continue_ = false;
  std::optional<http::request_parser<http::empty_body>> header_;
  std::optional<http::request_parser<http::string_body>> string_parser_;
  std::optional<http::request_parser<http::file_body>> file_parser_;
  ApiRequest req_;
  std::string upload_path_;
  std::vector<char> drain_buf_;
};

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted) return;
      spdlog::warn("accept: {}", ec.message());
    } else {
      if (tls)
        std::make_shared<Session<TlsStream>>(*this, std::move(socket), *tls)->start();
      else
        std::make_shared<Session<beast::tcp_stream>>(*this, std::move(socket))->start();
    }
    accept();
  });
}

HttpServer::HttpServer(const ServiceConfig& config, const Router& router)
    : impl_(std::make_unique<Impl>(config, router)) {}

HttpServer::~HttpServer() {
  stop();
  impl_->workers.join();
}

Status HttpServer::Impl::load_tls() {
  if (config.tls_cert.empty()) return ok_status();
  tls.emplace(ssl::context::tls_server);
  // TLS 1.2 and newer only; no compression, fresh keys per session.
  tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::no_compression | ssl::context::single_dh_use);
  beast::error_code ec;
  tls->use_certificate_chain_file(config.tls_cert, ec);
  if (ec)
    return Error{Code::kInvalidArgument,
                 "tls_cert: cannot load " + config.tls_cert + ": " + ec.message(),
                 "give a PEM certificate (chain) file"};
  tls->use_private_key_file(config.tls_key, ssl::context::pem, ec);
  if (ec)
    return Error{Code::kInvalidArgument,
                 "tls_key: cannot load " + config.tls_key + ": " + ec.message(),
                 "give the PEM private key of tls_cert"};
  return ok_status();
}

Status HttpServer::listen() {
  beast::error_code ec;
  if (auto st = impl_->load_tls(); !st) return st;
  std::string host =
      impl_->config.listen_host == "localhost" ? "127.0.0.1" : impl_->config.listen_host;
  auto addr = net::ip::make_address(host, ec);
  if (ec) return Error{Code::kInvalidArgument, "listen address '" + host + "': " + ec.message()};
  tcp::endpoint ep(addr, impl_->config.listen_port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return Error{Code::kConflict,
                 "cannot listen on " + host + ":" + std::to_string(impl_->config.listen_port) +
                     ": " + ec.message(),
                 "pick another --listen port"};
  impl_->port = a.local_endpoint().port();
  return ok_status();
}

uint16_t HttpServer::port() const {
  return impl_->port;
}

void HttpServer::run(bool handle_signals) {
  if (handle_signals) {
    impl_->signals.emplace(impl_->ioc, SIGINT, SIGTERM);
    impl_->signals->async_wait([this](beast::error_code, int sig) {
      spdlog::info("signal {}: stopping", sig);
      stop();
    });
  }
  impl_->accept();
  // A handler that throws leaves run(); its session is dropped (its connection closes) and the
  // thread goes back to serving everyone else.
  auto serve = [this] {
    for (;;) {
      try {
        impl_->ioc.run();
        return;
      } catch (const std::exception& e) {
        spdlog::error("HTTP I/O: dropped a connection: {}", e.what());
      }
    }
  };
  // A few I/O threads are plenty: handlers run on the worker pool.
  std::vector<std::thread> io;
  for (int i = 0; i < 3; ++i) io.emplace_back(serve);
  serve();
  for (auto& t : io) t.join();
}

void HttpServer::stop() {
  net::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    impl_->ioc.stop();
  });
}

}  // namespace gpulab::service
