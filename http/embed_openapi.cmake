# Writes a C++ source that defines api::openapi_document() (http/openapi.hpp) as the bytes of the
# OpenAPI document, in a raw string literal.
# Inputs: INPUT (docs/openapi.json), OUTPUT (the .cpp to write).
file(READ ${INPUT} document)
set(delimiter "wallet_openapi")
string(FIND "${document}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains )${delimiter}\", which would end the raw string literal early")
endif()
set(body "#include \"http/openapi.hpp\"\n\nnamespace api {\n\nstd::string_view openapi_document() {\n")
# An array, its length from sizeof: a string_view made from the literal alone would count its
# characters in a constant expression, which GCC stops at 262,144 steps.
string(APPEND body "  static constexpr char document[] = R\"${delimiter}(${document})${delimiter}\";\n")
string(APPEND body "  return std::string_view(document, sizeof(document) - 1);\n}\n\n}  // namespace api\n")
file(WRITE ${OUTPUT}.tmp "${body}")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
