// Output paths of the dml commands, checked before the work starts (output_files.h).
#include "tools/dml/output_files.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "engine/io/file_io.h"

namespace dml {

namespace {

namespace fs = std::filesystem;

// The folder a file path lands in ("." for a bare file name).
fs::path folder_of(const std::string& path) {
  const fs::path folder = fs::path(path).parent_path();
  return folder.empty() ? fs::path(".") : folder;
}

void require_writable_folder(const fs::path& folder, const std::string& what) {
  std::error_code error;
  if (!fs::exists(folder, error)) {
    throw UsageError(what + ": the folder " + folder.string() + " does not exist");
  }
  if (!fs::is_directory(folder, error)) {
    throw UsageError(what + ": " + folder.string() + " is not a folder");
  }
  // access() answers for this process's user; root passes it everywhere but on a read-only mount.
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    throw UsageError(what + ": the folder " + folder.string() + " cannot be written");
  }
}

void require_file_path(const std::string& path, const std::string& option) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    throw UsageError(option + " " + path + " is a folder; give a file name");
  }
  require_writable_folder(folder_of(path), option + " " + path);
}

}  // namespace

ExistingResult take_existing_result_flags(Args& args, bool can_resume) {
  const bool overwrite = args.take_flag("--overwrite");
  const bool resume = can_resume && args.take_flag("--resume");
  if (resume && overwrite) throw UsageError("--resume and --overwrite exclude each other");
  if (resume) return ExistingResult::kResume;
  return overwrite ? ExistingResult::kOverwrite : ExistingResult::kRefuse;
}

void check_result_file(const std::string& path, const std::string& option, ExistingResult policy) {
  if (path.empty()) return;
  require_file_path(path, option);
  std::error_code error;
  if (policy == ExistingResult::kRefuse && fs::exists(path, error)) {
    throw UsageError(option + " " + path +
                     " already holds a result; pass --overwrite to replace it" +
                     " (or --resume, where the command can continue it)");
  }
  engine::detail::remove_abandoned_temporaries(path);
}

void check_replaceable_file(const std::string& path, const std::string& option) {
  if (path.empty()) return;
  require_file_path(path, option);
}

void prepare_output_folder(const std::string& folder, const std::string& option) {
  if (folder.empty()) return;
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) {
    throw UsageError(option + " " + folder + ": cannot create the folder: " + error.message());
  }
  require_writable_folder(folder, option);
}

}  // namespace dml
