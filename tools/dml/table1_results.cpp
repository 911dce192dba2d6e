// Zhou et al. TPAMI Tab. 1's attack cells (header: tools/dml/table1_results.h).
#include "tools/dml/table1_results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "attacks/attack.h"
#include "attacks/profiles.h"

namespace dml {
namespace {

using attacks::kTable1Counts;  // w (CA) or m (SP-QA): Tab. 1's columns
constexpr int kCountColumns = static_cast<int>(kTable1Counts.size());

// The mean of measure `name` over the attacked images, or nullptr when the summary lacks it.
const double* find_measure(const AttackSummary& summary, const std::string& name,
                           const std::vector<double>& values) {
  for (size_t m = 0; m < summary.names.size(); ++m) {
    if (summary.names[m] == name) return &values[m];
  }
  return nullptr;
}

// Tab. 1's row name of an attack, "" for an attack outside its grid.
std::string row_name(const attacks::AttackSpec& spec) {
  const char* sign = spec.raise ? "+" : "-";
  if (spec.kind == attacks::AttackKind::CA) return std::string("CA") + sign;
  if (spec.kind == attacks::AttackKind::SPQA) return std::string("SP-QA") + sign;
  return "";
}

int count_column(const attacks::AttackSpec& spec) {
  const int64_t count = spec.kind == attacks::AttackKind::CA ? spec.W : spec.M;
  for (int c = 0; c < kCountColumns; ++c) {
    if (kTable1Counts[c] == count) return c;
  }
  return -1;
}

struct Row {
  nlohmann::ordered_json clean = nlohmann::ordered_json::array();
  nlohmann::ordered_json adversarial = nlohmann::ordered_json::array();
  nlohmann::ordered_json gt = nlohmann::ordered_json::array();  // SP-QA's reference percentiles
  Row() {
    for (int c = 0; c < kCountColumns; ++c) {
      clean.push_back(nullptr);
      adversarial.push_back(nullptr);
      gt.push_back(nullptr);
    }
  }
};

const char* const kRowOrder[] = {"CA+", "CA-", "SP-QA+", "SP-QA-"};

// The largest of the percentiles (all in [0, 100]), null while any is missing.
nlohmann::ordered_json worst_of(const nlohmann::ordered_json& percentiles) {
  double worst = 0.0;
  for (const auto& value : percentiles) {
    if (value.is_null()) return nullptr;
    worst = std::max(worst, value.get<double>());
  }
  return worst;
}

}  // namespace

nlohmann::ordered_json table1_results_json(const std::vector<AttackSummary>& finished) {
  std::map<int, std::map<std::string, Row>> rows;  // eps_255 -> row name -> row
  for (const AttackSummary& summary : finished) {
    const attacks::AttackSpec spec = attacks::parse_attack_spec(summary.spec);
    const std::string name = row_name(spec);
    const int column = count_column(spec);
    if (name.empty() || column < 0) continue;
    const std::string label = attacks::attack_label(spec);
    const double* clean = find_measure(summary, label + ":prank", summary.clean);
    const double* adversarial = find_measure(summary, label + ":prank", summary.adversarial);
    if (clean == nullptr || adversarial == nullptr) continue;
    Row& row = rows[static_cast<int>(std::lround(spec.pgd.eps * 255.0))][name];
    row.clean[column] = *clean;
    row.adversarial[column] = *adversarial;
    if (const double* gt = find_measure(summary, label + ":GTprank", summary.adversarial)) {
      row.gt[column] = *gt;
    }
  }
  nlohmann::ordered_json table = nlohmann::ordered_json::array();
  for (const auto& [eps_255, by_name] : rows) {
    for (const char* name : kRowOrder) {
      const auto found = by_name.find(name);
      if (found == by_name.end()) continue;
      const Row& row = found->second;
      nlohmann::ordered_json entry;
      entry["eps_255"] = eps_255;
      entry["attack"] = name;
      entry["counts"] = kTable1Counts;
      entry["clean"] = row.clean;
      entry["adversarial"] = row.adversarial;
      if (std::string(name).rfind("SP-QA", 0) == 0) entry["gt_worst"] = worst_of(row.gt);
      table.push_back(entry);
    }
  }
  return table;
}

void print_table1(const nlohmann::ordered_json& table1) {
  std::printf(
      "\nZhou et al. TPAMI Tab. 1 (adversarial rank percentile %%; w for CA, m for SP-QA; "
      "R^_GT: the references' worst percentile over m)\n");
  std::printf("%-9s %-8s %8s %8s %8s %8s %8s\n", "eps*255", "attack", "1", "2", "5", "10", "R^_GT");
  for (const auto& entry : table1) {
    std::printf("%-9d %-8s", entry.at("eps_255").get<int>(),
                entry.at("attack").get<std::string>().c_str());
    for (const auto& value : entry.at("adversarial")) {
      if (value.is_null()) {
        std::printf(" %8s", "-");
      } else {
        std::printf(" %8.2f", value.get<double>());
      }
    }
    const auto gt = entry.find("gt_worst");
    if (gt != entry.end() && !gt->is_null()) std::printf(" %8.2f", gt->get<double>());
    std::printf("\n");
  }
}

}  // namespace dml
