// One attack on one batch (header: attacks/attack.h).
#include "attacks/attack.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>

#include "attacks/measures.h"
#include "attacks/objectives.h"
#include "attacks/selection.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "kernels/common/check.h"
#include "models/embed.h"

namespace attacks {
namespace {

using engine::Tensor;
using losses::Metric;

struct KindName {
  AttackKind kind;
  const char* name;
};
const KindName kKinds[] = {{AttackKind::CA, "CA"},     {AttackKind::QA, "QA"},
                           {AttackKind::SPQA, "SPQA"}, {AttackKind::TMA, "TMA"},
                           {AttackKind::ES, "ES"},     {AttackKind::LTM, "LTM"},
                           {AttackKind::GTM, "GTM"},   {AttackKind::GTT, "GTT"},
                           {AttackKind::STAX, "STAX"}, {AttackKind::MTAX, "MTAX"}};

const char* kind_name(AttackKind kind) {
  for (const KindName& k : kKinds) {
    if (k.kind == kind) return k.name;
  }
  return "?";
}

bool ranks_candidates(AttackKind kind) {
  return kind == AttackKind::CA || kind == AttackKind::QA || kind == AttackKind::SPQA;
}

double parse_number(const std::string& spec, const std::string& key, const std::string& value) {
  size_t used = 0;
  double result = 0.0;
  try {
    result = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ENGINE_CHECK(used == value.size() && !value.empty() && std::isfinite(result), "attack spec '",
               spec, "': ", key, "=", value, " is not a finite number");
  return result;
}

int64_t parse_count(const std::string& spec, const std::string& key, const std::string& value,
                    int64_t low) {
  const double number = parse_number(spec, key, value);
  ENGINE_CHECK(number == std::floor(number) && number >= static_cast<double>(low) && number < 1e9,
               "attack spec '", spec, "': ", key, "=", value, " must be an integer >= ", low);
  return static_cast<int64_t>(number);
}

// Gallery rows picked by a row-major index list, reshaped to [B, per_row, D] (or [B, D] when
// per_row is 0).
Tensor gallery_rows(const Gallery& gallery, const std::vector<int64_t>& indices, int64_t rows,
                    int64_t per_row) {
  const Tensor index = Tensor::from_indices(indices, {static_cast<int64_t>(indices.size())},
                                            gallery.embeddings.device());
  const Tensor picked = engine::index_select(gallery.embeddings, index);
  const int64_t d = gallery.embeddings.size(1);
  return per_row == 0 ? picked.reshape({rows, d}) : picked.reshape({rows, per_row, d});
}

DistanceTable distance_table(const Tensor& embeddings, const Gallery& gallery,
                             const std::vector<int64_t>& self_index) {
  engine::NoGradGuard no_grad;
  const Tensor d = gallery_distance(embeddings, gallery.embeddings, gallery.metric);
  DistanceTable table;
  table.rows = d.size(0);
  table.gallery = d.size(1);
  const std::vector<double> values = d.to_vector();
  table.distances.assign(values.begin(), values.end());
  table.self_index = self_index;
  return table;
}

// The metric's distance between matching rows of a and b [R, D], exactly (no epsilon): robrank's
// `(Q - c).norm(2)` for N and E, 1 - cos for C.
std::vector<double> row_metric_distance(const Tensor& a, const Tensor& b, Metric metric) {
  engine::NoGradGuard no_grad;
  if (metric == Metric::C) {
    const Tensor dot = engine::sum(a * b, {1});
    const Tensor norms = engine::sqrt(engine::sum(a * a, {1}) * engine::sum(b * b, {1}));
    return ((dot / norms) * -1.0 + 1.0).to_vector();
  }
  const Tensor diff = a - b;
  return engine::sqrt(engine::sum(diff * diff, {1})).to_vector();
}

std::vector<double> row_cosine(const Tensor& a, const Tensor& b) {
  engine::NoGradGuard no_grad;
  const Tensor dot = engine::sum(a * b, {1});
  const Tensor norms = engine::sqrt(engine::sum(a * a, {1}) * engine::sum(b * b, {1}));
  return (dot / norms).to_vector();
}

std::vector<double> percent(const std::vector<double>& fractions) {
  std::vector<double> out(fractions.size());
  for (size_t i = 0; i < fractions.size(); ++i) out[i] = 100.0 * fractions[i];
  return out;
}

std::vector<double> percent(const std::vector<bool>& hits) {
  std::vector<double> out(hits.size());
  for (size_t i = 0; i < hits.size(); ++i) out[i] = hits[i] ? 100.0 : 0.0;
  return out;
}

// [B, D] repeated per_row times along a new axis and flattened: row b*per_row + w = a[b].
Tensor repeat_rows(const Tensor& a, int64_t per_row) {
  const int64_t rows = a.size(0), d = a.size(1);
  return a.unsqueeze(1).expand({rows, per_row, d}).reshape({rows * per_row, d});
}

}  // namespace

AttackSpec parse_attack_spec(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = text.find(':', start);
    parts.push_back(
        text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  AttackSpec spec;
  bool known = false;
  for (const KindName& k : kKinds) {
    if (parts[0] == k.name) {
      spec.kind = k.kind;
      known = true;
    }
  }
  ENGINE_CHECK(known, "attack spec '", text, "': unknown attack '", parts[0],
               "' (known: CA QA SPQA TMA ES LTM GTM GTT STAX MTAX)");
  spec.T = spec.kind == AttackKind::MTAX ? 5 : 1;
  bool has_pm = false;
  std::set<std::string> seen;  // a key given twice is a typo, not a value to overwrite silently
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    ENGINE_CHECK(eq != std::string::npos && eq > 0, "attack spec '", text, "': '", parts[i],
                 "' is not key=value");
    const std::string key = parts[i].substr(0, eq);
    const std::string value = parts[i].substr(eq + 1);
    ENGINE_CHECK(seen.insert(key).second, "attack spec '", text, "': key '", key,
                 "' is given twice");
    auto only_for = [&](bool allowed, const char* which) {
      ENGINE_CHECK(allowed, "attack spec '", text, "': key '", key, "' applies to ", which,
                   " only, not ", kind_name(spec.kind));
    };
    if (key == "pm") {
      only_for(ranks_candidates(spec.kind), "CA, QA and SPQA");
      ENGINE_CHECK(value == "+" || value == "-", "attack spec '", text, "': pm must be + or -");
      spec.raise = value == "+";
      has_pm = true;
    } else if (key == "W") {
      only_for(spec.kind == AttackKind::CA, "CA");
      spec.W = parse_count(text, key, value, 1);
    } else if (key == "M") {
      only_for(spec.kind == AttackKind::QA || spec.kind == AttackKind::SPQA, "QA and SPQA");
      spec.M = parse_count(text, key, value, 1);
    } else if (key == "T") {
      only_for(spec.kind == AttackKind::MTAX, "MTAX");
      spec.T = parse_count(text, key, value, 1);
    } else if (key == "G") {
      only_for(spec.kind == AttackKind::SPQA, "SPQA");
      spec.G = parse_count(text, key, value, 1);
    } else if (key == "zeta") {
      only_for(spec.kind == AttackKind::SPQA, "SPQA");
      spec.zeta = parse_number(text, key, value);
      ENGINE_CHECK(spec.zeta > 0.0, "attack spec '", text, "': zeta must be > 0");
    } else if (key == "eps") {
      spec.pgd.eps = parse_number(text, key, value);
      ENGINE_CHECK(spec.pgd.eps >= 0.0 && spec.pgd.eps <= 1.0, "attack spec '", text,
                   "': eps must be in [0, 1] (pixels are in [0, 1])");
    } else if (key == "alpha") {
      spec.pgd.alpha = parse_number(text, key, value);
      ENGINE_CHECK(spec.pgd.alpha >= 0.0, "attack spec '", text, "': alpha must be >= 0");
    } else if (key == "pgditer") {
      spec.pgd.steps = parse_count(text, key, value, 1);
    } else if (key == "rinit") {
      const int64_t rinit = parse_count(text, key, value, 0);
      ENGINE_CHECK(rinit <= 1, "attack spec '", text, "': rinit must be 0 or 1");
      spec.pgd.random_start = rinit == 1;
    } else {
      engine::fail("attack spec '", text, "': unknown key '", key,
                   "' (known: pm W M T G zeta eps alpha pgditer rinit)");
    }
  }
  ENGINE_CHECK(has_pm || !ranks_candidates(spec.kind), "attack spec '", text,
               "': ", kind_name(spec.kind), " needs pm=+ or pm=-");
  // With several steps alpha is the step size, so 0 would leave every image as it is and report
  // clean == adversarial as if the model were robust (pgditer=1 steps by eps and ignores alpha).
  ENGINE_CHECK(spec.pgd.alpha > 0.0 || spec.pgd.steps == 1 || spec.pgd.eps == 0.0, "attack spec '",
               text, "': alpha must be > 0 when pgditer > 1 and eps > 0");
  return spec;
}

std::string attack_spec_string(const AttackSpec& spec) {
  std::string out = kind_name(spec.kind);
  char buffer[64];
  if (ranks_candidates(spec.kind)) out += spec.raise ? ":pm=+" : ":pm=-";
  if (spec.kind == AttackKind::CA) out += ":W=" + std::to_string(spec.W);
  if (spec.kind == AttackKind::QA || spec.kind == AttackKind::SPQA) {
    out += ":M=" + std::to_string(spec.M);
  }
  if (spec.kind == AttackKind::SPQA) {
    out += ":G=" + std::to_string(spec.G);
    // zeta 0 means "not given" (the dataset's default is filled in later) and is not a valid
    // value to parse back, so it is left out rather than printed.
    if (spec.zeta > 0.0) {
      std::snprintf(buffer, sizeof(buffer), ":zeta=%.8g", spec.zeta);
      out += buffer;
    }
  }
  if (spec.kind == AttackKind::MTAX) out += ":T=" + std::to_string(spec.T);
  std::snprintf(buffer, sizeof(buffer), ":eps=%.8g:alpha=%.8g:pgditer=%lld", spec.pgd.eps,
                spec.pgd.alpha, static_cast<long long>(spec.pgd.steps));
  out += buffer;
  if (spec.pgd.random_start) out += ":rinit=1";
  return out;
}

std::string attack_label(const AttackSpec& spec) {
  std::string label = kind_name(spec.kind);
  if (ranks_candidates(spec.kind)) label += spec.raise ? "+" : "-";
  return label;
}

uint64_t attack_stream_seed(uint64_t seed, const AttackSpec& spec) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (const char c : attack_label(spec)) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  }
  // SplitMix64's finalizer over the sum, so nearby seeds give unrelated streams.
  return engine::splitmix64_finalize(seed + engine::kGoldenGamma * (hash | 1));
}

double default_zeta(const std::string& dataset) {
  // Seed 004 §6.1.2: 2e4 for MNIST, 4e4 for Fashion and CUB, 7e4 for CARS and SOP. The names are
  // those the data layer accepts, robrank's short "cars" included.
  if (dataset == "mnist") return 2e4;
  if (dataset == "cars196" || dataset == "cars" || dataset == "sop") return 7e4;
  return 4e4;
}

Gallery make_gallery(models::Model& model, const Tensor& images, const std::vector<int64_t>& labels,
                     Metric metric, int64_t batch_size) {
  ENGINE_CHECK(static_cast<int64_t>(labels.size()) == images.size(0),
               "make_gallery: ", images.size(0), " images but ", labels.size(), " labels");
  models::EmbedOptions options;
  options.batch_size = batch_size;
  return gallery_from_embeddings(models::embed(model, images, options), labels, metric,
                                 models::module_device(model));
}

Gallery gallery_from_embeddings(const Tensor& raw, const std::vector<int64_t>& labels,
                                Metric metric, const engine::Device& device) {
  ENGINE_CHECK(raw.dim() == 2 && static_cast<int64_t>(labels.size()) == raw.size(0),
               "gallery_from_embeddings: embeddings ", engine::shape_str(raw.shape()), " but ",
               labels.size(), " labels");
  engine::NoGradGuard no_grad;
  Gallery gallery;
  gallery.embeddings = losses::embed_for_metric(raw, metric).to(device);
  gallery.labels = labels;
  gallery.metric = metric;
  return gallery;
}

BatchResult attack_batch(models::Model& model, const Tensor& images,
                         const std::vector<int64_t>& labels, const std::vector<int64_t>& self_index,
                         const Gallery& gallery, const AttackSpec& spec, engine::Generator& gen,
                         const AttackOptions& options) {
  const int64_t rows = images.size(0);
  ENGINE_CHECK(static_cast<int64_t>(labels.size()) == rows &&
                   static_cast<int64_t>(self_index.size()) == rows,
               "attack_batch: ", rows, " images, ", labels.size(), " labels, ", self_index.size(),
               " self indices");
  for (int64_t b = 0; b < rows; ++b) {
    ENGINE_CHECK(self_index[b] >= -1 && self_index[b] < gallery.embeddings.size(0),
                 "attack_batch: self_index[", b, "] = ", self_index[b], " is not a gallery row (",
                 gallery.embeddings.size(0), " rows) or -1");
  }
  models::check_pixels(images, "attack_batch images");
  const std::string label = attack_label(spec);
  const Metric metric = gallery.metric;
  EvalModeGuard eval_mode(model);
  const Tensor x = images.detach().to(models::module_device(model)).to(models::module_dtype(model));
  auto forward = [&](const Tensor& input) {
    return losses::embed_for_metric(model.forward(input), metric);
  };
  Tensor clean;
  {
    engine::NoGradGuard no_grad;
    clean = forward(x);
  }
  const DistanceTable clean_table = distance_table(clean, gallery, self_index);

  // Per attack: the constants of its objective (chosen from the clean ranking), the objective, and
  // how to measure an embedding batch (clean or adversarial) with the same selection.
  std::function<Tensor(const Tensor&, int64_t)> objective;
  std::function<Measures(const Tensor&)> measure;
  const int64_t nx = clean_table.gallery;
  switch (spec.kind) {
    case AttackKind::CA: {
      const std::vector<int64_t> picked = spec.raise ? select_uniform(clean_table, spec.W, gen)
                                                     : select_from_top(clean_table, spec.W, gen);
      const Tensor queries = gallery_rows(gallery, picked, rows, spec.W);
      Tensor query_gallery;
      {
        engine::NoGradGuard no_grad;
        query_gallery = gallery_distance(queries.reshape({rows * spec.W, queries.size(2)}),
                                         gallery.embeddings, metric)
                            .reshape({rows, spec.W, nx});
      }
      const std::vector<double> qg = query_gallery.to_vector();
      auto qg_float = std::make_shared<std::vector<float>>(qg.begin(), qg.end());
      // The gallery holds the candidate's own clean copy. Its row entry came from the pairwise
      // kernel, while the measure computes d(c~, q) with row_metric_distance, so for the clean
      // candidate (c~ = c) the two are equal up to rounding and "strictly nearer" would be decided
      // by rounding, differently on CPU and GPU. Measure the copy with the same function as the
      // candidate: then the clean copy ties with the clean candidate exactly and is never ahead of
      // it, and it is ahead of a perturbed candidate exactly when d(c, q) < d(c~, q), as robrank.
      const std::vector<double> copy_to_query = row_metric_distance(
          repeat_rows(clean, spec.W), queries.reshape({rows * spec.W, queries.size(2)}), metric);
      for (int64_t b = 0; b < rows; ++b) {
        if (self_index[b] < 0) continue;
        for (int64_t w = 0; w < spec.W; ++w) {
          const int64_t pair = b * spec.W + w;
          (*qg_float)[pair * nx + self_index[b]] = static_cast<float>(copy_to_query[pair]);
        }
      }
      objective = [=](const Tensor& e, int64_t) {
        return candidate_attack_loss(e, queries, query_gallery, metric, spec.raise);
      };
      measure = [=](const Tensor& e) {
        const std::vector<double> to_query = row_metric_distance(
            repeat_rows(e, spec.W), queries.reshape({rows * spec.W, queries.size(2)}), metric);
        const std::vector<float> c2q(to_query.begin(), to_query.end());
        return Measures{
            {label + ":prank", percent(candidate_percentile(*qg_float, c2q, rows, spec.W, nx))}};
      };
      break;
    }
    case AttackKind::QA:
    case AttackKind::SPQA: {
      const std::vector<int64_t> picked = spec.raise
                                              ? select_uniform(clean_table, spec.M, gen)
                                              : select_distinct_from_top(clean_table, spec.M, gen);
      const Tensor candidates = gallery_rows(gallery, picked, rows, spec.M);
      std::vector<int64_t> references;
      Tensor reference_rows;
      if (spec.kind == AttackKind::SPQA) {
        references = select_semantic_references(clean_table, picked, spec.M, spec.G, spec.raise);
        ENGINE_CHECK(static_cast<int64_t>(references.size()) == rows * spec.G, label,
                     ": the gallery is too small for ", spec.G,
                     " semantic-preserving references per query");
        reference_rows = gallery_rows(gallery, references, rows, spec.G);
      }
      ENGINE_CHECK(spec.kind == AttackKind::QA || spec.zeta > 0.0, label,
                   ": zeta is not set (the caller fills in default_zeta)");
      const bool batch_xi = options.robrank_compat;
      objective = [=](const Tensor& e, int64_t) {
        // One query-vs-gallery distance matrix per step serves both QA terms.
        const Tensor to_gallery = gallery_distance(e, gallery.embeddings, metric);
        if (spec.kind == AttackKind::QA) {
          return query_attack_loss_from_distances(e, candidates, to_gallery, metric, spec.raise);
        }
        return semantic_preserving_query_loss(
            query_attack_rows_from_distances(e, candidates, to_gallery, metric, spec.raise),
            query_attack_rows_from_distances(e, reference_rows, to_gallery, metric, true),
            spec.zeta, batch_xi);
      };
      measure = [=](const Tensor& e) {
        const DistanceTable table = distance_table(e, gallery, self_index);
        Measures m{{label + ":prank", percent(query_percentile(table, picked, spec.M))}};
        if (spec.kind == AttackKind::SPQA) {
          m.push_back({label + ":GTprank", percent(query_percentile(table, references, spec.G))});
        }
        return m;
      };
      break;
    }
    case AttackKind::TMA: {
      const Tensor targets = gallery_rows(gallery, select_uniform(clean_table, 1, gen), rows, 0);
      objective = [=](const Tensor& e, int64_t) { return targeted_mismatch_loss(e, targets); };
      measure = [=](const Tensor& e) { return Measures{{"TMA:cosine", row_cosine(e, targets)}}; };
      break;
    }
    case AttackKind::ES: {
      // At q~ = q the shift has no gradient, so the first step measures it from q + 1e-7 in every
      // coordinate, as robrank's evaluation attack (AdvRank, "avoid zero gradient"). Its training
      // adversaries (EST, REST, SES: embShift) use a random 1e-7 * {-1, 0, 1} instead
      // (attacks/defenses/common.cpp).
      const Tensor reference = clean.detach();
      const Tensor first_reference = reference + 1e-7;
      objective = [=](const Tensor& e, int64_t step) {
        return embedding_shift_loss(e, step == 0 ? first_reference : reference, metric);
      };
      measure = [=](const Tensor& e) {
        const DistanceTable table = distance_table(e, gallery, self_index);
        return Measures{{"ES:D", row_metric_distance(e, reference, metric)},
                        {"ES:R", percent(recall_at_1(table, labels, gallery.labels))}};
      };
      break;
    }
    case AttackKind::LTM: {
      const bool include_self = options.robrank_compat;
      objective = [=](const Tensor& e, int64_t) {
        return learning_to_misrank_loss(e, gallery.embeddings, gallery.labels, labels, self_index,
                                        metric, include_self);
      };
      measure = [=](const Tensor& e) {
        const DistanceTable table = distance_table(e, gallery, self_index);
        return Measures{{"LTM:r@1", percent(recall_at_1(table, labels, gallery.labels))}};
      };
      break;
    }
    case AttackKind::GTM: {
      const Tensor targets =
          gallery_rows(gallery,
                       select_greedy_misrank_targets(clean_table, labels, gallery.labels,
                                                     options.robrank_compat),
                       rows, 0);
      objective = [=](const Tensor& e, int64_t) {
        return greedy_top1_misrank_loss(e, targets, metric);
      };
      measure = [=](const Tensor& e) {
        const DistanceTable table = distance_table(e, gallery, self_index);
        return Measures{{"GTM:r@1", percent(recall_at_1(table, labels, gallery.labels))}};
      };
      break;
    }
    case AttackKind::GTT: {
      const std::vector<int64_t> top1 = select_nearest(clean_table);
      const Tensor candidates = gallery_rows(gallery, top1, rows, 1);
      objective = [=](const Tensor& e, int64_t) {
        return query_attack_loss(e, candidates, gallery.embeddings, metric, false);
      };
      measure = [=](const Tensor& e) {
        const DistanceTable table = distance_table(e, gallery, self_index);
        return Measures{{"GTT:retain@4", percent(retained_in_top(table, top1, 4))},
                        {"GTT:retain@1", percent(retained_in_top(table, top1, 1))}};
      };
      break;
    }
    case AttackKind::STAX:
    case AttackKind::MTAX: {
      const int64_t count = spec.kind == AttackKind::STAX ? 1 : spec.T;
      const Tensor targets = gallery_rows(
          gallery, select_feature_targets(labels, gallery.labels, count, gen), rows, count);
      objective = [=](const Tensor& e, int64_t) { return feature_targeted_loss(e, targets); };
      measure = [=](const Tensor& e) {
        const DistanceTable table = distance_table(e, gallery, self_index);
        std::vector<double> squared(static_cast<size_t>(rows), 0.0);
        {
          const std::vector<double> d = row_metric_distance(
              repeat_rows(e, count), targets.reshape({rows * count, targets.size(2)}), Metric::E);
          for (int64_t b = 0; b < rows; ++b) {
            for (int64_t j = 0; j < count; ++j) {
              const double v = d[static_cast<size_t>(b * count + j)];
              squared[static_cast<size_t>(b)] += v * v / static_cast<double>(count);
            }
          }
        }
        return Measures{{label + ":r@1", percent(recall_at_1(table, labels, gallery.labels))},
                        {label + ":sqdist", squared}};
      };
      break;
    }
  }

  BatchResult result;
  result.clean = measure(clean);
  PgdTrace trace;
  // rinit=1: this batch's random start comes from `gen`, so batches (and --seed values) differ.
  result.adversarial_images = pgd_attack(
      x, [&](const Tensor& input, int64_t step) { return objective(forward(input), step); },
      seeded(spec.pgd, gen), &trace);
  Tensor adversarial;
  {
    engine::NoGradGuard no_grad;
    adversarial = forward(result.adversarial_images);
  }
  result.adversarial = measure(adversarial);
  result.objective = trace.objective_values();
  result.perturbation = measure_perturbation(x, result.adversarial_images);
  check_perturbation(result.perturbation, spec.pgd.eps, label.c_str());
  return result;
}

}  // namespace attacks
