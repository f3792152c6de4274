// The Docker engine of `gpulab image build` and `gpulab ddp`: --docker_host or $DOCKER_HOST,
// pinged once, with the seed's message when it does not answer. Both reach it through the Docker
// engine adapter (docker/lab_engine.h), as the service does.
#pragma once

#include <string>

#include "docker/lab_engine.h"

namespace gpulab::builder {

// Throws kUnavailable ("Docker service is not running. ...") when the engine does not answer.
docker::LabEngine connect_engine(const std::string& docker_host);

}  // namespace gpulab::builder
