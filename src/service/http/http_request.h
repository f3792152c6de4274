// What the router sees of an HTTP request header: method, path, decoded query, token. One
// function, shared by the server's sessions and the request-path fuzz target.
#pragma once

#include <boost/beast/http/message.hpp>

#include "service/http/router.h"

namespace gpulab::service {

// Method, path (target up to '?'), decoded query and Authorization of a parsed header; the
// body, upload file and peer address are left for the caller.
ApiRequest request_from_header(const boost::beast::http::request_header<>& header);

}  // namespace gpulab::service
