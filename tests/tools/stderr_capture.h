// What a piece of code writes to the process's standard error, for the tests of warnings
// (report_test.cpp, report_robustness_test.cpp).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace test {

// What `body` writes to fd 2 (as fprintf(stderr) writes it), through the file `capture_file`.
template <typename Body>
std::string standard_error_of(const std::string& capture_file, Body body) {
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int file = ::open(capture_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE((saved >= 0 && file >= 0));
  ::dup2(file, 2);
  ::close(file);
  body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(capture_file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace test
