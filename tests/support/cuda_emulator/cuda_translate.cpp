// cuda_translate IN.cu OUT.cpp: rewrites the pieces of CUDA syntax that a host compiler cannot
// parse, so the CUDA emulator (include/cuda_runtime.h) can compile the file unchanged otherwise.
//
//   kernel<<<grid, block, smem, stream>>>(a, b)
//     -> ::emu::launch_named("kernel", kernel, ::emu::LaunchConfig(grid, block, smem, stream), a,
//     b)
//   __shared__ float x[32], y;
//     -> static float emu_layout_x[32], emu_layout_y; auto& x =
//     *::emu::shared_block(&emu_layout_x);
//        auto& y = *::emu::shared_block(&emu_layout_y);
//   extern __shared__ __align__(16) float z[];
//     -> float* const z = static_cast<float*>(::emu::dynamic_shared_memory(16));
//
// The statics only carry the type and serve as keys: each block gets its own fresh shared memory
// from the emulator, filled with 0xFF bytes, as each block on a GPU has its own. So the race
// checker sees no history from an earlier block there, and AddressSanitizer sees each block's
// arrays as separate allocations.
//
// Comments, string and character literals are copied as they are. The output starts with a #line
// directive, so compiler errors and sanitizer reports name the original .cu file and line.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& text, size_t at,
                       const std::string& why) {
  size_t line = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i) line += text[i] == '\n';
  throw std::runtime_error(path + ":" + std::to_string(line) + ": cuda_translate: " + why);
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Where the comment or literal starting at i ends (one past it), or i when none starts there.
size_t skip_comment_or_literal(const std::string& s, size_t i) {
  if (s.compare(i, 2, "//") == 0) {
    const size_t end = s.find('\n', i);
    return end == std::string::npos ? s.size() : end;
  }
  if (s.compare(i, 2, "/*") == 0) {
    const size_t end = s.find("*/", i + 2);
    return end == std::string::npos ? s.size() : end + 2;
  }
  if (s[i] == '"' || s[i] == '\'') {
    const char quote = s[i];
    size_t j = i + 1;
    while (j < s.size() && s[j] != quote) j += s[j] == '\\' ? 2 : 1;
    return j + 1;
  }
  return i;
}

// Index of the bracket closing the one at `open` (round brackets, skipping literals/comments).
size_t matching_paren(const std::string& path, const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size();) {
    const size_t skipped = skip_comment_or_literal(s, i);
    if (skipped != i) {
      i = skipped;
      continue;
    }
    if (s[i] == '(') ++depth;
    if (s[i] == ')' && --depth == 0) return i;
    ++i;
  }
  fail(path, s, open, "unbalanced parentheses");
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Splits at commas outside (), [], {} and <> nesting.
std::vector<std::string> split_top_level(const std::string& s) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
    if (c == ')' || c == ']' || c == '}' || c == '>') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(s.substr(start));
  return parts;
}

// `out` ends with the kernel expression (name, maybe qualified, maybe with <template args>);
// removes it from `out` and returns it.
std::string take_kernel_expression(const std::string& path, const std::string& text, size_t at,
                                   std::string& out) {
  size_t end = out.size();
  while (end > 0 && std::isspace(static_cast<unsigned char>(out[end - 1]))) --end;
  size_t begin = end;
  if (begin > 0 && out[begin - 1] == '>') {  // template arguments
    int depth = 0;
    do {
      --begin;
      if (out[begin] == '>') ++depth;
      if (out[begin] == '<') --depth;
    } while (begin > 0 && depth > 0);
  }
  while (begin > 0 && (is_identifier_char(out[begin - 1]) || out[begin - 1] == ':')) --begin;
  const std::string kernel = out.substr(begin, end - begin);
  if (kernel.empty() || (!is_identifier_char(kernel[0]) && kernel[0] != ':')) {
    fail(path, text, at, "no kernel name before <<<");
  }
  out.erase(begin);
  return kernel;
}

// Whether `out` ends with the keyword extern (and spaces), which it then loses the spaces of.
bool ends_with_extern(std::string& out) {
  size_t end = out.size();
  while (end > 0 && std::isspace(static_cast<unsigned char>(out[end - 1]))) --end;
  const std::string keyword = "extern";
  if (end < keyword.size() || out.compare(end - keyword.size(), keyword.size(), keyword) != 0) {
    return false;
  }
  if (end > keyword.size() && is_identifier_char(out[end - keyword.size() - 1])) return false;
  out.resize(end);
  return true;
}

// `extern __shared__ [__align__(N) or alignas(N)] T name[];` (the text after __shared__ in
// `declaration`) as
// `T* const name = static_cast<T*>(::emu::dynamic_shared_memory(N or alignof(T)));`.
std::string dynamic_shared_declaration(const std::string& path, const std::string& s, size_t at,
                                       const std::string& declaration) {
  std::string text = trim(declaration);
  std::string alignment;
  for (const std::string keyword : {"alignas(", "__align__("}) {
    if (text.compare(0, keyword.size(), keyword) != 0) continue;
    const size_t close = text.find(')');
    if (close == std::string::npos) fail(path, s, at, keyword + " without ')'");
    alignment = text.substr(keyword.size(), close - keyword.size());
    text = trim(text.substr(close + 1));
  }
  const size_t bracket = text.find('[');
  if (bracket == std::string::npos || trim(text.substr(bracket)) != "[]") {
    fail(path, s, at, "extern __shared__ must declare one unsized array: T name[]");
  }
  size_t name_end = bracket;
  while (name_end > 0 && std::isspace(static_cast<unsigned char>(text[name_end - 1]))) --name_end;
  size_t name_begin = name_end;
  while (name_begin > 0 && is_identifier_char(text[name_begin - 1])) --name_begin;
  const std::string name = text.substr(name_begin, name_end - name_begin);
  const std::string type = trim(text.substr(0, name_begin));
  if (name.empty() || type.empty()) fail(path, s, at, "cannot read an extern __shared__ array");
  if (alignment.empty()) alignment = "alignof(" + type + ")";
  return type + "* const " + name + " = static_cast<" + type + "*>(::emu::dynamic_shared_memory(" +
         alignment + "));";
}

std::string translate(const std::string& path, const std::string& s) {
  std::string out = "#line 1 \"" + path + "\"\n";
  size_t i = 0;
  while (i < s.size()) {
    const size_t skipped = skip_comment_or_literal(s, i);
    if (skipped != i) {
      out.append(s, i, skipped - i);
      i = skipped;
      continue;
    }
    if (s.compare(i, 3, "<<<") == 0) {
      const std::string kernel = take_kernel_expression(path, s, i, out);
      const size_t config_end = s.find(">>>", i + 3);
      if (config_end == std::string::npos) fail(path, s, i, "<<< without >>>");
      const std::string config = s.substr(i + 3, config_end - (i + 3));
      size_t open = config_end + 3;
      while (open < s.size() && std::isspace(static_cast<unsigned char>(s[open]))) ++open;
      if (open >= s.size() || s[open] != '(') fail(path, s, i, "no argument list after >>>");
      const size_t close = matching_paren(path, s, open);
      const std::string args = s.substr(open + 1, close - open - 1);
      out += "::emu::launch_named(\"" + kernel + "\", " + kernel + ", ::emu::LaunchConfig(" +
             config + ")";
      if (!trim(args).empty()) out += ", " + args;
      out += ")";
      // Keep the line count: config and arguments keep their newlines; those between >>> and (
      // would otherwise be lost.
      for (size_t k = config_end; k < open; ++k) {
        if (s[k] == '\n') out += '\n';
      }
      i = close + 1;
      continue;
    }
    if (s.compare(i, 10, "__shared__") == 0 && (i == 0 || !is_identifier_char(s[i - 1])) &&
        !is_identifier_char(s[i + 10])) {
      const size_t semicolon = s.find(';', i);
      if (semicolon == std::string::npos) fail(path, s, i, "__shared__ without ';'");
      const std::string declaration = s.substr(i + 10, semicolon - (i + 10));
      if (ends_with_extern(out)) {  // extern __shared__: the launch's dynamic shared memory
        out.resize(out.size() - std::string("extern").size());
        out += dynamic_shared_declaration(path, s, i, declaration);
        i = semicolon + 1;
        continue;
      }
      if (declaration.find("extern") != std::string::npos ||
          declaration.find('=') != std::string::npos) {
        fail(path, s, i, "extern or initialized __shared__ is not supported by the emulator");
      }
      std::string layouts, references;
      for (const std::string& part : split_top_level(declaration)) {
        // The declarator's name: the last identifier before the first '[' of this part.
        size_t name_end = std::min(part.find('['), part.size());
        while (name_end > 0 && std::isspace(static_cast<unsigned char>(part[name_end - 1]))) {
          --name_end;
        }
        size_t name_begin = name_end;
        while (name_begin > 0 && is_identifier_char(part[name_begin - 1])) --name_begin;
        const std::string name = part.substr(name_begin, name_end - name_begin);
        if (name.empty()) fail(path, s, i, "cannot find the name in a __shared__ declaration");
        layouts += (layouts.empty() ? "" : ",") + part.substr(0, name_begin) + "emu_layout_" +
                   part.substr(name_begin);
        references += " auto& " + name + " = *::emu::shared_block(&emu_layout_" + name + ");";
      }
      out += "static" + layouts + ";" + references;
      i = semicolon + 1;
      continue;
    }
    out += s[i++];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cuda_translate IN.cu OUT.cpp\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) throw std::runtime_error(std::string(argv[1]) + ": cannot open");
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string translated = "#include <cuda_runtime.h>\n" + translate(argv[1], buffer.str());
    const std::string temporary = std::string(argv[2]) + ".tmp";
    {
      std::ofstream out(temporary, std::ios::binary);
      out << translated;
      if (!out) throw std::runtime_error(temporary + ": cannot write");
    }
    if (std::rename(temporary.c_str(), argv[2]) != 0) {
      throw std::runtime_error(std::string(argv[2]) + ": cannot rename from " + temporary);
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
