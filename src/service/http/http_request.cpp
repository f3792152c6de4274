// Header fields into an ApiRequest; any byte sequence Beast accepted is taken as it is (the
// replies escape or replace what is not UTF-8).
#include "service/http/http_request.h"

#include "service/http/web_session.h"

namespace gpulab::service {

ApiRequest request_from_header(const boost::beast::http::request_header<>& h) {
  ApiRequest req;
  req.method = std::string(h.method_string());
  std::string_view target(h.target().data(), h.target().size());
  auto qm = target.find('?');
  req.path = std::string(target.substr(0, qm));
  if (qm != std::string_view::npos) req.query = parse_query(target.substr(qm + 1));
  auto auth = h[boost::beast::http::field::authorization];
  req.authorization = std::string(auth.data(), auth.size());
  auto cookie = h[boost::beast::http::field::cookie];
  req.cookie = std::string(cookie.data(), cookie.size());
  auto csrf = h[kCsrfHeader];
  req.csrf_token = std::string(csrf.data(), csrf.size());
  return req;
}

}  // namespace gpulab::service
