// engine/io/file_io: read_whole_file, the one reader of whole files (list files, result JSON,
// logs); remove_abandoned_temporaries, the clean-up of the "<path>.tmp.<pid>" files that killed
// writers leave behind, and AtomicFileWriter calling it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/io/file_io.h"
#include "tests/io/io_test_util.h"

namespace {

void touch(const std::string& path) { test::write_bytes(path, {1, 2, 3}); }

}  // namespace

TEST_CASE("read_whole_file returns every byte, and names the file and what it is when it cannot",
          "[io][file_io]") {
  test::TempDir dir;
  const std::string path = dir.file("images.txt");
  // Bytes a text-mode read would change or stop at: CR LF, a NUL, a byte above 127, no final LF.
  const std::vector<uint8_t> bytes = {'1', ' ', 'a', '\r', '\n', 0, 0xff, '2'};
  test::write_bytes(path, bytes);
  const std::string text = engine::detail::read_whole_file(path, "CUB image list");
  CHECK(std::vector<uint8_t>(text.begin(), text.end()) == bytes);

  test::write_bytes(path, {});
  CHECK(engine::detail::read_whole_file(path, "CUB image list").empty());

  const std::string missing = dir.file("none.txt");
  CHECK_THROWS_WITH(engine::detail::read_whole_file(missing, "CUB image list"),
                    Catch::Contains(missing + ": cannot open CUB image list: No such file"));
  CHECK_THROWS_WITH(engine::detail::read_whole_file(dir.file(""), "result file"),
                    Catch::Contains(": cannot open result file: not a regular file"));

  // Larger than the memory the process may take (here a cap of 4 bytes): refused with both sizes.
  test::write_bytes(path, bytes);
  ::setenv("ENGINE_HOST_MEMORY_LIMIT", "4", 1);
  CHECK_THROWS_WITH(engine::detail::read_whole_file(path, "CUB image list"),
                    Catch::Contains(path + ": cannot read CUB image list: its 8 B do not fit in "
                                           "the 4 B this process may still use "
                                           "(ENGINE_HOST_MEMORY_LIMIT=4)"));
  ::setenv("ENGINE_HOST_MEMORY_LIMIT", "8", 1);
  CHECK(engine::detail::read_whole_file(path, "CUB image list").size() == 8);
  ::unsetenv("ENGINE_HOST_MEMORY_LIMIT");
}

TEST_CASE("remove_abandoned_temporaries removes a killed writer's file and nothing else",
          "[io][file_io]") {
  test::TempDir dir;
  const std::string target = dir.file("model.safetensors");
  const std::string dead = test::dead_process_id();
  REQUIRE_FALSE(dead.empty());
  const std::string own = std::to_string(::getpid());
  touch(target);
  touch(target + ".tmp." + dead);            // a killed writer's: removed
  touch(target + ".tmp." + own);             // a live writer's (this process): kept
  touch(target + ".tmp.notapid");            // not ours to judge: kept
  touch(target + ".tmp.");                   // no id: kept
  touch(dir.file("other.npy.tmp." + dead));  // another file's: kept
  CHECK(engine::detail::remove_abandoned_temporaries(target) == 1);
  CHECK_FALSE(std::filesystem::exists(target + ".tmp." + dead));
  CHECK(std::filesystem::exists(target));
  CHECK(std::filesystem::exists(target + ".tmp." + own));
  CHECK(std::filesystem::exists(target + ".tmp.notapid"));
  CHECK(std::filesystem::exists(target + ".tmp."));
  CHECK(std::filesystem::exists(dir.file("other.npy.tmp." + dead)));
  // A folder that does not exist holds nothing to remove.
  CHECK(engine::detail::remove_abandoned_temporaries(dir.file("no/such/file")) == 0);
}

TEST_CASE("writing a file removes what killed writers of it left", "[io][file_io]") {
  test::TempDir dir;
  const std::string target = dir.file("ers.json");
  const std::string dead = test::dead_process_id();
  REQUIRE_FALSE(dead.empty());
  const std::string abandoned = target + ".tmp." + dead;
  touch(abandoned);
  engine::detail::write_file_atomically(target, "{}\n");
  CHECK_FALSE(std::filesystem::exists(abandoned));
  CHECK(test::read_bytes(target).size() == 3);
}
