// Server-Sent Events over a connection the HTTP server hands over: the dashboard's live updates.
// Each stream polls the EventHub once a second on its own strand (no thread per client), sends
// what is new, a comment line as keep-alive, and closes when its session ends or the client goes.
#pragma once

#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <functional>

#include "service/base/event_hub.h"

namespace gpulab::service {

// Takes the connection: writes the response header, then events until the client goes away or
// allowed() turns false (checked every poll).
void start_event_stream(boost::beast::tcp_stream stream, const EventHub& hub,
                        std::function<bool()> allowed);
// The same over HTTPS.
void start_event_stream(boost::beast::ssl_stream<boost::beast::tcp_stream> stream,
                        const EventHub& hub, std::function<bool()> allowed);

}  // namespace gpulab::service
