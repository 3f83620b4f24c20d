// docs/ops.md is generated from the op table: it must not drift from the code.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "ops/op_table.h"

TEST_CASE("docs/ops.md matches the op table (regenerate: qkgrad-gradcheck --markdown > docs/ops.md)", "[docs]") {
  std::ifstream file(std::string(QKGRAD_SOURCE_DIR) + "/docs/ops.md");
  REQUIRE(file.good());
  std::stringstream content;
  content << file.rdbuf();
  CHECK(content.str() == qkgrad::op_table_markdown());
}
