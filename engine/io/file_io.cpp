// POSIX implementation of the engine/io file helpers (open/pread/write/fsync/rename).
#include "engine/io/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "engine/host_memory.h"
#include "kernels/common/check.h"

namespace engine::detail {
namespace {

std::string system_error() { return std::strerror(errno); }

std::string parent_directory(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

InputFile::InputFile(const std::string& path, const std::string& what) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path, ": cannot open ", what, ": ", system_error());
  struct stat info;
  if (::fstat(fd_, &info) != 0) {
    const std::string reason = system_error();
    ::close(fd_);
    fail(path, ": cannot stat: ", reason);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd_);
    fail(path, ": cannot open ", what, ": not a regular file");
  }
  size_ = static_cast<uint64_t>(info.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, void* destination, std::size_t count) const {
  ENGINE_CHECK(offset <= size_ && count <= size_ - offset, path_, ": truncated file: wanted ",
               count, " bytes at offset ", offset, " but the file has ", size_, " bytes");
  auto* out = static_cast<unsigned char*>(destination);
  std::size_t done = 0;
  while (done < count) {
    const ssize_t got = ::pread(fd_, out + done, count - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path_, ": read error at offset ", offset + done, ": ", system_error());
    if (got == 0) fail(path_, ": truncated file: unexpected end at offset ", offset + done);
    done += static_cast<std::size_t>(got);
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFileWriter writer(path);
  writer.write(bytes.data(), bytes.size());
  writer.commit();
}

std::string atomic_temp_path(const std::string& path) {
  return path + ".tmp." + std::to_string(static_cast<long long>(::getpid()));
}

// True for the decimal process id of a process that no longer exists. kill(pid, 0) sends nothing;
// EPERM means the process exists but belongs to another user, so only ESRCH counts as gone.
bool is_dead_process_id(const std::string& digits) {
  if (digits.empty() || digits.size() > 9) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  const long pid = std::stol(digits);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

int remove_abandoned_temporaries(const std::string& path) {
  const std::filesystem::path target(path);
  const std::string prefix = target.filename().string() + ".tmp.";
  std::filesystem::path folder = target.parent_path();
  if (folder.empty()) folder = ".";
  std::error_code error;
  std::filesystem::directory_iterator entries(folder, error);
  if (error) return 0;  // no folder yet: nothing left behind
  int removed = 0;
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !is_dead_process_id(name.substr(prefix.size()))) continue;
    if (std::filesystem::remove(entry.path(), error)) ++removed;
    ENGINE_CHECK(!error, entry.path().string(),
                 ": cannot remove an abandoned temporary file: ", error.message());
  }
  return removed;
}

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), temp_path_(atomic_temp_path(path)) {
  remove_abandoned_temporaries(path);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path_, ": cannot create temporary file ", temp_path_, ": ", system_error());
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, std::size_t count) {
  ENGINE_CHECK(!committed_ && fd_ >= 0, path_, ": write after commit");
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::size_t done = 0;
  while (done < count) {
    const ssize_t wrote = ::write(fd_, bytes + done, count - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) fail(path_, ": write error on ", temp_path_, ": ", system_error());
    done += static_cast<std::size_t>(wrote);
  }
}

void AtomicFileWriter::commit() {
  ENGINE_CHECK(!committed_ && fd_ >= 0, path_, ": commit called twice");
  if (::fsync(fd_) != 0) fail(path_, ": fsync of ", temp_path_, " failed: ", system_error());
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(path_, ": close of ", temp_path_, " failed: ", system_error());
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    fail(path_, ": cannot rename ", temp_path_, " over it: ", system_error());
  }
  committed_ = true;
  // Make the rename durable too. Failure here does not undo the (already visible) new file, and
  // some file systems refuse fsync on directories, so it is best effort.
  const int directory = ::open(parent_directory(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory >= 0) {
    ::fsync(directory);
    ::close(directory);
  }
}

std::string read_whole_file(const std::string& path, const std::string& what) {
  const InputFile file(path, what);
  // Refused before a byte is read when it cannot fit (engine/host_memory.h): an overcommitting
  // kernel would hand out the pages and kill the process as they fill. (The budget's own cap is
  // taken whole here, not less the tensors in use as the allocator takes it.)
  const std::optional<HostMemoryBudget> budget = host_memory_budget(0);
  ENGINE_CHECK(!budget || file.size() <= budget->bytes, path, ": cannot read ", what, ": its ",
               format_bytes(file.size()), " do not fit in the ", format_bytes(budget->bytes),
               " this process may still use (", budget->limit, ")");
  std::string bytes(static_cast<std::size_t>(file.size()), '\0');
  file.read_at(0, bytes.data(), bytes.size());
  return bytes;
}

}  // namespace engine::detail
