// Builds OpenAPI paths from Route entries and component schemas from RequestSchema tables.
#include "service/http/openapi.h"

#include "service/base/api_error.h"

namespace gpulab::service {

namespace {

OrderedJson field_schema(const FieldSpec& f) {
  OrderedJson j;
  switch (f.type) {
    case FieldType::kString:
      j["type"] = "string";
      break;
    case FieldType::kInteger:
      j["type"] = "integer";
      break;
    case FieldType::kBoolean:
      j["type"] = "boolean";
      break;
    case FieldType::kStringArray:
      j["type"] = "array";
      j["items"] = {{"type", "string"}};
      break;
    case FieldType::kNumberOrString:
      j["oneOf"] = OrderedJson::array({{{"type", "number"}}, {{"type", "string"}}});
      break;
  }
  j["description"] = f.description;
  return j;
}

OrderedJson schema_of(const RequestSchema& s) {
  OrderedJson props = OrderedJson::object();
  OrderedJson required = OrderedJson::array();
  for (const auto& f : s.fields) {
    props[f.name] = field_schema(f);
    if (f.required) required.push_back(f.name);
  }
  OrderedJson j = {{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
  if (!required.empty()) j["required"] = required;
  return j;
}

}  // namespace

OrderedJson openapi_document(const Router& router) {
  OrderedJson doc;
  doc["openapi"] = "3.0.3";
  doc["info"] = {{"title", "gpulab GPU container service"},
                 {"version", "1"},
                 {"description",
                  "GPU containers over REST: the GPU Docker Service API (same paths, fields and "
                  "envelope) plus logs, stats, backup transfer, metrics. Every answer is "
                  "{success, message, data} or {success: false, message, error_code}."}};
  OrderedJson schemas = OrderedJson::object();
  for (const RequestSchema* s : all_schemas()) schemas[s->name] = schema_of(*s);
  for (const auto& r : router.routes())  // schemas kept beside their routes (quota, idle policy)
    if (r.schema && !schemas.contains(r.schema->name))
      schemas[r.schema->name] = schema_of(*r.schema);
  OrderedJson codes = OrderedJson::array();
  for (int c = 0; c <= static_cast<int>(ApiCode::kInternalError); ++c)
    codes.push_back(std::string(api_code_name(static_cast<ApiCode>(c))));
  schemas["Envelope"] = {{"type", "object"},
                         {"properties",
                          {{"success", {{"type", "boolean"}}},
                           {"message", {{"type", "string"}}},
                           {"data", {{"type", "object"}}},
                           {"error_code", {{"type", "string"}, {"enum", codes}}},
                           {"hint", {{"type", "string"}}}}},
                         {"required", {"success", "message"}}};
  doc["components"] = {{"schemas", schemas},
                       {"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}};
  OrderedJson paths = OrderedJson::object();
  for (const auto& r : router.routes()) {
    OrderedJson op;
    op["summary"] = r.summary;
    op["tags"] = {r.tag};
    if (r.authenticated) op["security"] = OrderedJson::array({{{"bearer", OrderedJson::array()}}});
    OrderedJson params = OrderedJson::array();
    for (const auto& q : r.query_params)
      params.push_back({{"name", q}, {"in", "query"}, {"schema", {{"type", "string"}}}});
    if (!params.empty()) op["parameters"] = params;
    if (r.schema) {
      op["requestBody"] = {
          {"required", true},
          {"content",
           {{"application/json",
             {{"schema", {{"$ref", std::string("#/components/schemas/") + r.schema->name}}}}}}}};
    }
    if (r.streamed_upload) {
      op["requestBody"] = {{"required", true},
                           {"content",
                            {{"application/octet-stream",
                              {{"schema", {{"type", "string"}, {"format", "binary"}}}}}}}};
    }
    OrderedJson ok;
    if (r.binary_response) {
      ok = {{"description", "the file"},
            {"content",
             {{"application/x-tar", {{"schema", {{"type", "string"}, {"format", "binary"}}}}}}}};
    } else {
      ok = {{"description", "success envelope"},
            {"content",
             {{"application/json", {{"schema", {{"$ref", "#/components/schemas/Envelope"}}}}}}}};
    }
    op["responses"] = {
        {"200", ok},
        {"default",
         {{"description", "error envelope with error_code"},
          {"content",
           {{"application/json", {{"schema", {{"$ref", "#/components/schemas/Envelope"}}}}}}}}}};
    std::string method = r.method;
    for (auto& ch : method) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    paths[r.path][method] = op;
  }
  doc["paths"] = paths;
  return doc;
}

}  // namespace gpulab::service
