// The Docker engine of `gpulab image build` and `gpulab ddp`: --docker_host or $DOCKER_HOST,
// pinged once, with the seed's message when it does not answer.
#pragma once

#include <string>

#include "docker/client.h"

namespace gpulab::builder {

// Throws kUnavailable ("Docker service is not running. ...") when the engine does not answer.
docker::Client connect_engine(const std::string& docker_host);

}  // namespace gpulab::builder
