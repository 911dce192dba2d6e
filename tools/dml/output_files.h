// The rules every `dml` command follows for the files it writes, so that a result is never lost:
// a finished result is replaced only when asked (--overwrite) or continued (--resume), and every
// output path is checked before the work starts, not after an hour of attacks.
#pragma once

#include <string>

#include "tools/dml/args.h"

namespace dml {

// What a command does when its result file already exists.
enum class ExistingResult {
  kRefuse,     // the default: a usage error that names --resume / --overwrite
  kResume,     // --resume: the command reads the file and continues it
  kOverwrite,  // --overwrite: the file is replaced when the new result is written
};

// Takes --overwrite, and --resume where the command can resume (`can_resume`); both together are
// a usage error.
ExistingResult take_existing_result_flags(Args& args, bool can_resume);

// Checks, before any work, that `path` (the value of `option`) can receive a result: not a folder,
// in a folder that exists and can be written, and, if the file exists already, only with
// --resume or --overwrite. Removes what killed writers of `path` left behind (engine/io's
// remove_abandoned_temporaries). Throws UsageError naming the option. An empty path is no output.
void check_result_file(const std::string& path, const std::string& option, ExistingResult policy);

// The same for a file that is simply replaced (a figure redrawn from results in seconds): not a
// folder, its folder exists and can be written.
void check_replaceable_file(const std::string& path, const std::string& option);

// An output folder (-X DIR): created if missing, then it must be a folder this process can write.
void prepare_output_folder(const std::string& folder, const std::string& option);

}  // namespace dml
