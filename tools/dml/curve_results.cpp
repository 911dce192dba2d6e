// The attack-strength curves' JSON and tables (header: tools/dml/curve_results.h).
#include "tools/dml/curve_results.h"

#include <cstdio>
#include <map>

#include "attacks/attack.h"
#include "attacks/curve_profiles.h"
#include "attacks/profiles.h"
#include "metrics/ers.h"
#include "tools/dml/attack_setup.h"

namespace dml {
namespace {

// The normalized value of one ERS column. metrics::ers_normalized maps each column on its own
// (metrics/ers.h's table), so the other columns' values do not matter.
double column_score(size_t column, double raw) {
  metrics::ErsRow row{};
  row[column] = raw;
  return metrics::ers_normalized(row)[column];
}

const AttackSummary* find_summary(const std::vector<AttackSummary>& finished,
                                  const std::string& canonical) {
  for (const AttackSummary& s : finished) {
    if (s.spec == canonical) return &s;
  }
  return nullptr;
}

}  // namespace

nlohmann::ordered_json curve_results_json(const std::string& profile, const std::string& dataset,
                                          const std::vector<AttackSummary>& finished) {
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  const std::vector<attacks::ErsSource>& sources = attacks::ers_sources();
  for (const attacks::CurvePoint& point : attacks::curve_points(profile)) {
    attacks::AttackSpec spec = attacks::parse_attack_spec(point.spec);
    complete_spec(spec, dataset);
    const AttackSummary* summary = find_summary(finished, attacks::attack_spec_string(spec));
    if (summary == nullptr) continue;  // not run yet
    for (size_t c = 0; c < sources.size(); ++c) {
      if (sources[c].attack != summary->label) continue;
      size_t m = 0;
      while (m < summary->names.size() && summary->names[m] != sources[c].measure) ++m;
      if (m == summary->names.size()) continue;  // a summary read back without that measure
      nlohmann::ordered_json entry;
      entry["sweep"] = point.sweep;
      entry["column"] = metrics::ers_column_names()[c];
      entry["eps"] = point.eps_255 / 255.0;
      entry["eps_255"] = point.eps_255;
      entry["alpha"] = point.alpha_255 / 255.0;
      entry["alpha_255"] = point.alpha_255;
      entry["steps"] = point.steps;
      entry["spec"] = summary->spec;
      entry["measure"] = sources[c].measure;
      entry["clean"] = summary->clean[m];
      entry["raw"] = summary->adversarial[m];
      entry["score"] = column_score(c, summary->adversarial[m]);
      points.push_back(entry);
    }
  }
  return points;
}

void print_curve_tables(const nlohmann::ordered_json& curve) {
  for (const char* sweep : {"eps", "steps"}) {
    // row key (eps_255 or steps) -> column -> score
    std::map<int, std::map<std::string, double>> rows;
    for (const auto& point : curve) {
      if (point.at("sweep") != sweep) continue;
      const int key = point.at(std::string(sweep) == "eps" ? "eps_255" : "steps").get<int>();
      rows[key][point.at("column").get<std::string>()] = point.at("score").get<double>();
    }
    if (rows.empty()) continue;
    std::printf("\n%-10s", std::string(sweep) == "eps" ? "eps*255" : "steps");
    for (const std::string& name : metrics::ers_column_names()) std::printf("%7s", name.c_str());
    std::printf("   (ERS-column scores, higher = more robust)\n");
    for (const auto& [key, scores] : rows) {
      std::printf("%-10d", key);
      for (const std::string& name : metrics::ers_column_names()) {
        const auto it = scores.find(name);
        if (it == scores.end()) {
          std::printf("%7s", "-");
        } else {
          std::printf("%7.1f", it->second);
        }
      }
      std::printf("\n");
    }
  }
}

}  // namespace dml
