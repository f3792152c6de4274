// The OpenAPI 3 document, generated from the route table and the request schemas (so it cannot
// drift from what the server accepts); served at /api/v1/openapi.json.
#pragma once

#include "core/json.h"
#include "service/http/router.h"

namespace gpulab::service {

OrderedJson openapi_document(const Router& router);

}  // namespace gpulab::service
