// The ETA format on `dml train` progress lines.
#include <catch2/catch.hpp>

#include <cmath>

#include "tools/dml/trainer.h"

TEST_CASE("format duration: seconds, then minutes and seconds, then hours and minutes", "[tools]") {
  CHECK(dml::format_duration(0.0) == "0s");
  CHECK(dml::format_duration(-3.0) == "0s");  // never a negative ETA
  CHECK(dml::format_duration(44.6) == "45s");
  CHECK(dml::format_duration(59.4) == "59s");
  CHECK(dml::format_duration(59.6) == "1m00s");
  CHECK(dml::format_duration(725.0) == "12m05s");
  CHECK(dml::format_duration(3599.0) == "59m59s");
  CHECK(dml::format_duration(3600.0) == "1h00m");
  CHECK(dml::format_duration(4 * 3600 + 7 * 60 + 59) == "4h07m");
  CHECK(dml::format_duration(50 * 3600.0) == "50h00m");
  CHECK(dml::format_duration(std::nan("")) == "0s");
  CHECK(dml::format_duration(1e300) == "1000000h00m");  // capped, not undefined
}
