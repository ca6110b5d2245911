#pragma once

// The OpenAPI 3.1 document of the HTTP API (docs/openapi.json), compiled into the server by
// http/embed_openapi.cmake: GET /v1/openapi.json serves these bytes, and the tests check the
// server's answers against the same bytes, so what is published is what is checked.

#include <string_view>

namespace api {

// The document exactly as docs/openapi.json holds it (UTF-8 JSON).
std::string_view openapi_document();

}  // namespace api
