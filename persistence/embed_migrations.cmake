# Writes a C++ source holding every migration as a raw string literal.
# Inputs: OUTPUT (the .cpp to write), SOURCE_DIR, FILES (a comma-separated list of .sql file names).
string(REPLACE "," ";" FILES "${FILES}")
set(body "#include \"persistence/migrations.hpp\"\n\nnamespace persistence {\n\nconst std::vector<migration>& migrations() {\n  static const std::vector<migration> all = {\n")
foreach(file ${FILES})
  file(READ ${SOURCE_DIR}/${file} sql)
  string(REGEX REPLACE "\\.sql$" "" version ${file})
  string(APPEND body "      {\"${version}\", R\"wallet_sql(${sql})wallet_sql\"},\n")
endforeach()
string(APPEND body "  };\n  return all;\n}\n\n}  // namespace persistence\n")
file(WRITE ${OUTPUT}.tmp "${body}")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
