// ptxas_report --inc OUT.inc [--markdown OUT.md] REPORT...: reads what `nvcc --resource-usage`
// printed for each compiled .cu (one REPORT file per source and architecture) and the PTX of each
// source (REPORT files ending in .ptx), and writes the table the CUDA emulator checks launches
// against (tests/support/cuda_emulator/launch_resources.h), and optionally the same table as
// Markdown.
//
// A report names each kernel (an "entry function") by its mangled name and architecture, then its
// stack frame and spills, then its registers and static shared memory:
//
//   ptxas info    : Compiling entry function '_ZN6engine...19conv2d_fprop_kernelE...' for 'sm_80'
//   ptxas info    : Function properties for _ZN6engine...19conv2d_fprop_kernelE...
//       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 120 registers, used 1 barriers, 16896 bytes smem, 448 bytes cmem[0]
//
// The PTX gives each kernel's __launch_bounds__ as a directive between its parameters and body:
//
//   .entry _ZN6engine...19conv2d_fprop_kernelE...(
//     .param ...
//   )
//   .maxntid 256, 1, 1
//
// A launch site names a kernel without its namespace or template arguments ("conv2d_fprop_kernel",
// "index_select_forward_kernel<T>"), so each entry is keyed by its unqualified name, and the
// instantiations of a template (or kernels of one name in several files) are merged by taking the
// largest of each number: the check then holds for whichever of them a launch runs.
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Resources {
  int max_threads = 0;  // from __launch_bounds__; 0 when the kernel declares none
  int registers = 0;
  int shared_bytes = 0;  // static shared memory
  int stack_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
};

void merge(Resources& into, const Resources& r) {
  into.registers = std::max(into.registers, r.registers);
  into.shared_bytes = std::max(into.shared_bytes, r.shared_bytes);
  into.stack_bytes = std::max(into.stack_bytes, r.stack_bytes);
  into.spill_store_bytes = std::max(into.spill_store_bytes, r.spill_store_bytes);
  into.spill_load_bytes = std::max(into.spill_load_bytes, r.spill_load_bytes);
}

// "void engine::kernels::(anonymous namespace)::unary_kernel<Relu>(float const*, float*, long)"
// -> "unary_kernel": drop the parameter list and the template arguments (matching brackets from
// the end), then everything up to the last "::".
std::string unqualified_name(const std::string& mangled) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) throw std::runtime_error("cannot demangle " + mangled);
  std::string name(demangled);
  std::free(demangled);
  auto drop_trailing_group = [&name](char open, char close) {
    if (name.empty() || name.back() != close) return;
    int depth = 0;
    for (size_t i = name.size(); i-- > 0;) {
      depth += name[i] == close ? 1 : name[i] == open ? -1 : 0;
      if (depth == 0) {
        name.erase(i);
        return;
      }
    }
  };
  drop_trailing_group('(', ')');
  drop_trailing_group('<', '>');
  const size_t scope = name.rfind("::");
  if (scope != std::string::npos) name.erase(0, scope + 2);
  const size_t space = name.rfind(' ');  // a template's return type: "void name"
  if (space != std::string::npos) name.erase(0, space + 1);
  return name;
}

using Table = std::map<std::pair<std::string, int>, Resources>;  // (kernel, sm) -> resources
using LaunchBounds = std::map<std::string, int>;  // kernel -> most threads per block it allows

void read_ptx(const std::string& path, LaunchBounds& bounds) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  static const std::regex entry_re(R"(\.entry\s+([A-Za-z0-9_$]+))");
  static const std::regex maxntid_re(R"(^\s*\.maxntid\s+(\d+),\s*(\d+),\s*(\d+))");
  std::string line, entry;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry_re)) {
      entry = m[1];
    } else if (!entry.empty() && std::regex_search(line, m, maxntid_re)) {
      const int threads = std::stoi(m[1]) * std::stoi(m[2]) * std::stoi(m[3]);
      const std::string name = unqualified_name(entry);
      const auto known = bounds.find(name);  // instantiations: the strictest bound holds for all
      bounds[name] = known == bounds.end() ? threads : std::min(known->second, threads);
    } else if (!line.empty() && line[0] == '{') {
      entry.clear();  // the body starts: no directive after this
    }
  }
}

void read_report(const std::string& path, Table& table) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  static const std::regex entry_re(R"(Compiling entry function '([^']+)' for 'sm_(\d+)a?')");
  static const std::regex spill_re(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used_re(R"(Used (\d+) registers)");
  static const std::regex shared_re(R"((\d+) bytes smem)");
  static const std::regex properties_re(R"(Function properties for (\S+))");
  std::string line, entry, properties_of;
  int sm = 0;
  Resources current;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry_re)) {
      entry = m[1];
      sm = std::stoi(m[2]);
      current = Resources();
    } else if (std::regex_search(line, m, properties_re)) {
      properties_of = m[1];  // the entry itself, or a device function it calls
    } else if (!entry.empty() && properties_of == entry && std::regex_search(line, m, spill_re)) {
      current.stack_bytes = std::stoi(m[1]);
      current.spill_store_bytes = std::stoi(m[2]);
      current.spill_load_bytes = std::stoi(m[3]);
    } else if (!entry.empty() && std::regex_search(line, m, used_re)) {
      current.registers = std::stoi(m[1]);
      if (std::regex_search(line, m, shared_re)) current.shared_bytes = std::stoi(m[1]);
      merge(table[{unqualified_name(entry), sm}], current);
      entry.clear();  // the "Used" line closes the entry
    }
  }
}

void write_inc(const std::string& path, const Table& table) {
  std::ofstream out(path);
  out << "// Generated by ptxas_report from nvcc --resource-usage and the PTX; do not edit.\n"
         "// {kernel, sm, launch bound (0: none), registers, static shared bytes, stack bytes,\n"
         "//  spill stores, spill loads}\n";
  for (const auto& [key, r] : table)
    out << "{\"" << key.first << "\", " << key.second << ", " << r.max_threads << ", "
        << r.registers << ", " << r.shared_bytes << ", " << r.stack_bytes << ", "
        << r.spill_store_bytes << ", " << r.spill_load_bytes << "},\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

void write_markdown(const std::string& path, const Table& table) {
  std::ofstream out(path);
  out << "| kernel | sm | launch bound | registers | static shared bytes | stack bytes | spill "
         "stores | spill loads |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& [key, r] : table)
    out << "| `" << key.first << "` | " << key.second << " | "
        << (r.max_threads > 0 ? std::to_string(r.max_threads) : "") << " | " << r.registers << " | "
        << r.shared_bytes << " | " << r.stack_bytes << " | " << r.spill_store_bytes << " | "
        << r.spill_load_bytes << " |\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  std::string inc, markdown;
  std::vector<std::string> reports;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--inc" || arg == "--markdown") && i + 1 < argc) {
      (arg == "--inc" ? inc : markdown) = argv[++i];
    } else {
      reports.push_back(arg);
    }
  }
  if (inc.empty()) {
    std::cerr << "usage: ptxas_report --inc OUT.inc [--markdown OUT.md] REPORT...\n";
    return 2;
  }
  try {
    Table table;
    LaunchBounds bounds;
    for (const std::string& report : reports) {
      const bool ptx = report.size() > 4 && report.compare(report.size() - 4, 4, ".ptx") == 0;
      ptx ? read_ptx(report, bounds) : read_report(report, table);
    }
    for (auto& [key, r] : table) {
      const auto bound = bounds.find(key.first);
      if (bound != bounds.end()) r.max_threads = bound->second;
    }
    write_inc(inc, table);
    if (!markdown.empty()) write_markdown(markdown, table);
  } catch (const std::exception& e) {
    std::cerr << "ptxas_report: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
