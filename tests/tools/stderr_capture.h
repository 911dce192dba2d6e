// What a piece of code writes to the process's standard error or output, for the tests of
// warnings (report_test.cpp, report_robustness_test.cpp) and of printed lines (precision_test.cpp).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace test {

// What `body` writes to file descriptor `fd` (1 = stdout, 2 = stderr, as fprintf writes them),
// through the file `capture_file`.
template <typename Body>
std::string output_of(int fd, const std::string& capture_file, Body body) {
  std::fflush(fd == 1 ? stdout : stderr);
  const int saved = ::dup(fd);
  const int file = ::open(capture_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE((saved >= 0 && file >= 0));
  ::dup2(file, fd);
  ::close(file);
  body();
  std::fflush(fd == 1 ? stdout : stderr);
  ::dup2(saved, fd);
  ::close(saved);
  std::ifstream in(capture_file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What `body` writes to the standard error.
template <typename Body>
std::string standard_error_of(const std::string& capture_file, Body body) {
  return output_of(2, capture_file, body);
}

}  // namespace test
