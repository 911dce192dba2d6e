// engine/text: the lists that error and usage messages print.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/text.h"

TEST_CASE("join puts the separator between items only", "[engine][text]") {
  CHECK(engine::join({}) == "");
  CHECK(engine::join({"c2f2"}) == "c2f2");
  CHECK(engine::join({"fashion-mnist", "mnist", "cub"}) == "fashion-mnist, mnist, cub");
  CHECK(engine::join({"a", "", "b"}, "|") == "a||b");  // an empty item keeps its place
}
