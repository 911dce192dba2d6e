// A test image for image-folder data sets: a w x h RGB PNG whose pixels all differ from their
// neighbours, so any crop or flip shows; `seed` shifts the values so that images differ. The
// file's folder is created.
#pragma once

#include <stb/stb_image_write.h>
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace test {

inline void write_gradient_png(const std::string& path, int w, int h, int seed = 0) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::vector<uint8_t> pixels(static_cast<std::size_t>(w * h * 3));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) {
        pixels[static_cast<std::size_t>((y * w + x) * 3 + c)] =
            static_cast<uint8_t>((x * 11 + y * 5 + c * 60 + seed * 37) % 256);
      }
    }
  }
  REQUIRE(stbi_write_png(path.c_str(), w, h, 3, pixels.data(), w * 3) != 0);
}

}  // namespace test
