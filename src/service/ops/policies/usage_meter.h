// GPU metering: every GPU a container (or a ddp lease) holds is charged to its owner and container
// from one meter tick to the next, into hour buckets of the book, so GPU-hours over a rolling
// period is one sum, and the totals survive restarts. Held GPUs count, running or stopped: a
// stopped container still keeps them from everyone else.
#pragma once

#include <optional>
#include <string>

#include "service/store/store.h"

namespace gpulab::service {

// Charges GPU-seconds held since the last tick up to `now` (unix seconds); the first tick only
// starts the meter. Runs in its own transaction (or the caller's).
void meter_tick(Store& store, double now);

// GPU-seconds `user` was charged in hour buckets that end after `since` (hour granularity: the
// bucket holding `since` counts in full).
double gpu_seconds_since(Store& store, const std::string& user, double since);

// Prometheus lines: gpulab_gpu_seconds_total by user, gpulab_container_gpu_seconds_total by user
// and container (containers in the book); only `only_user`'s when given (a user's own view).
std::string usage_metrics(Store& store, const std::optional<std::string>& only_user);

}  // namespace gpulab::service
