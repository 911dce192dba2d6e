// Small POSIX file helpers shared by every reader and writer of files (engine/io's safetensors and
// .npy, the data sets' list files, dml's result files and logs). Every failure is an engine::Error
// naming the file and the system error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace engine::detail {

// A file opened for reading, with its size known up front so parsers can check every length
// against it *before* allocating (a corrupt length field must never trigger a huge allocation).
class InputFile {
 public:
  // `what` names the file in the errors: "<path>: cannot open <what>: <reason>".
  explicit InputFile(const std::string& path, const std::string& what = "for reading");
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Reads exactly `count` bytes at `offset`, or throws (short read = truncated file).
  void read_at(uint64_t offset, void* destination, std::size_t count) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole content of a file that is read at once (a list file, a result JSON, a log). `what`
// says what the file is in the errors, as InputFile's ("<path>: cannot open CUB image list: No
// such file or directory"); a file larger than the host memory the process may still take is
// refused with both sizes before it is read.
std::string read_whole_file(const std::string& path, const std::string& what);

// Writes a file so that `path` is either its old content or the complete new one, never a half
// file: the bytes go to "<path>.tmp.<pid>", which is fsync'ed, renamed over `path` by commit(),
// and the directory is fsync'ed so the rename itself is durable. Destroying the writer without
// commit() (an exception on the way) removes the temporary file and leaves `path` untouched.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, std::size_t count);
  void commit();
  const std::string& temp_path() const { return temp_path_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// AtomicFileWriter in one call: `path` holds `bytes` afterwards, or its old content on any error.
void write_file_atomically(const std::string& path, const std::string& bytes);

// The temporary name AtomicFileWriter uses for `path` in this process.
std::string atomic_temp_path(const std::string& path);

// Removes the temporary files "<path>.tmp.<pid>" that writers of `path` left behind when they were
// killed before commit(): those whose process no longer runs. A live writer's file (another
// process writing the same path right now) is kept. Returns how many were removed. A killed
// `dml train` or `dml attack --save-adversarial` can leave gigabytes there; every writer calls
// this, so the next run that writes the same path cleans up.
int remove_abandoned_temporaries(const std::string& path);

}  // namespace engine::detail
