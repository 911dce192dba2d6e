// Attack spec strings and the driver of one attack on one batch (header: attacks/attack.h); the
// attacks themselves are defined in attacks/attack_kinds.h.
#include "attacks/attack.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>

#include "attacks/attack_kinds.h"
#include "attacks/worst_case.h"
#include "engine/autograd.h"
#include "engine/random.h"
#include "kernels/common/check.h"
#include "models/embed.h"

namespace attacks {
namespace {

using engine::Tensor;
using losses::Metric;

const char* kind_name(AttackKind kind) { return attack_definition(kind).name; }

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

// nes=N with queries=Q takes Q / N steps; queries and sigma mean nothing without nes.
void complete_nes_keys(AttackSpec& spec, const std::string& text, int64_t queries,
                       const std::set<std::string>& seen) {
  if (spec.nes.population == 0) {
    ENGINE_CHECK(queries == 0 && seen.count("sigma") == 0, "attack spec '", text,
                 "': queries and sigma apply to the NES attack only (give nes=N)");
    return;
  }
  if (queries == 0) return;
  ENGINE_CHECK(seen.count("pgditer") == 0, "attack spec '", text,
               "': give either pgditer or queries with nes, not both");
  ENGINE_CHECK(queries % spec.nes.population == 0, "attack spec '", text, "': queries=", queries,
               " is not a multiple of nes=", spec.nes.population);
  spec.pgd.steps = queries / spec.nes.population;
}

// "CA:pm=+:W=1" -> {"CA", "pm=+", "W=1"}.
std::vector<std::string> split_at_colons(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = text.find(':', start);
    parts.push_back(
        text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return parts;
}

AttackKind parse_attack_kind(const std::string& name, const std::string& text) {
  for (const AttackDefinition& definition : kAttackDefinitions) {
    if (name == definition.name) return definition.kind;
  }
  engine::fail("attack spec '", text, "': unknown attack '", name,
               "' (known: CA QA SPQA TMA ES LTM GTM GTT STAX MTAX)");
}

// Reads one key=value of the spec `text` into `spec`, whose kind is set; `has_pm` records a pm
// key, `queries` the NES budget (turned into steps once nes is known).
void apply_spec_key(AttackSpec& spec, const std::string& text, const std::string& key,
                    const std::string& value, bool& has_pm, int64_t& queries) {
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
  } else if (key == "nes") {
    spec.nes.population = parse_count(text, key, value, 2);
    ENGINE_CHECK(spec.nes.population % 2 == 0, "attack spec '", text,
                 "': nes must be even (antithetic pairs)");
  } else if (key == "queries") {
    queries = parse_count(text, key, value, 1);
  } else if (key == "sigma") {
    spec.nes.sigma = parse_number(text, key, value);
    ENGINE_CHECK(spec.nes.sigma > 0.0, "attack spec '", text, "': sigma must be > 0");
  } else {
    engine::fail("attack spec '", text, "': unknown key '", key,
                 "' (known: pm W M T G zeta eps alpha pgditer rinit nes queries sigma)");
  }
}

}  // namespace

AttackSpec parse_attack_spec(const std::string& text) {
  const std::vector<std::string> parts = split_at_colons(text);
  AttackSpec spec;
  spec.kind = parse_attack_kind(parts[0], text);
  spec.T = spec.kind == AttackKind::MTAX ? 5 : 1;
  bool has_pm = false;
  int64_t queries = 0;         // the NES budget, turned into steps once nes is known
  std::set<std::string> seen;  // a key given twice is a typo, not a value to overwrite silently
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    ENGINE_CHECK(eq != std::string::npos && eq > 0, "attack spec '", text, "': '", parts[i],
                 "' is not key=value");
    const std::string key = parts[i].substr(0, eq);
    ENGINE_CHECK(seen.insert(key).second, "attack spec '", text, "': key '", key,
                 "' is given twice");
    apply_spec_key(spec, text, key, parts[i].substr(eq + 1), has_pm, queries);
  }
  complete_nes_keys(spec, text, queries, seen);
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
  if (spec.nes.population > 0) {
    out += ":nes=" + std::to_string(spec.nes.population);
    if (spec.nes.sigma > 0.0) {
      std::snprintf(buffer, sizeof(buffer), ":sigma=%.8g", spec.nes.sigma);
      out += buffer;
    }
  }
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

namespace {

// The rows, labels and self indices of a batch agree, each self index is a gallery row or -1,
// and the pixels are in [0, 1].
void check_batch_inputs(const Tensor& images, const std::vector<int64_t>& labels,
                        const std::vector<int64_t>& self_index, const Gallery& gallery) {
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
}

// Perturbs x along the plan's objective on `forward`'s embeddings: white-box PGD, or NES from
// queries alone where nes.population > 0. Fills the result's adversarial images (on x's device),
// its objective per step and, for NES, the queries per image.
void perturb(const AttackPlan& followed, const Tensor& x,
             const std::function<Tensor(const Tensor&)>& forward, const PgdOptions& pgd,
             const NesOptions& nes, engine::Generator& gen, BatchResult& result) {
  if (nes.population > 0) {
    NesTrace trace;
    result.adversarial_images = nes_attack(
        x,
        [&](const Tensor& points, int64_t step) {
          return followed.row_objective(forward(points), step);
        },
        pgd, nes, gen, &trace);
    result.objective = trace.objective;
    result.queries_per_image = trace.queries_per_image;
  } else {
    PgdTrace trace;
    result.adversarial_images = pgd_attack(
        x,
        [&](const Tensor& input, int64_t step) { return followed.objective(forward(input), step); },
        pgd, &trace);
    result.objective = trace.objective_values();
  }
}

}  // namespace

BatchResult attack_batch(models::Model& model, const Tensor& images,
                         const std::vector<int64_t>& labels, const std::vector<int64_t>& self_index,
                         const Gallery& gallery, const AttackSpec& spec, engine::Generator& gen,
                         const AttackOptions& options) {
  return attack_batch_through(model, gallery, nullptr, nullptr, images, labels, self_index, spec,
                              gen, options);
}

BatchResult attack_batch_through(models::Model& model, const Gallery& gallery,
                                 models::Model* source, const Gallery* source_gallery,
                                 const Tensor& images, const std::vector<int64_t>& labels,
                                 const std::vector<int64_t>& self_index, const AttackSpec& spec,
                                 engine::Generator& gen, const AttackOptions& options) {
  const int64_t rows = images.size(0);
  check_batch_inputs(images, labels, self_index, gallery);
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

  // The attack's selection from the clean ranking, its objective and its measure
  // (attacks/attack_kinds.h).
  const AttackBatch batch{spec,       options, label,       gallery, labels,
                          self_index, clean,   clean_table, rows};
  // Transfer: the same selection (the target's clean ranking, the same draws) in the source's
  // embedding space, so the objective the perturbation follows is the source's.
  const bool transfer = source != nullptr;
  engine::Generator target_draws = gen;
  const AttackPlan plan = attack_definition(spec.kind).plan(batch, transfer ? target_draws : gen);
  models::Model& attacked = transfer ? *source : model;
  const Metric attacked_metric = transfer ? source_gallery->metric : metric;
  std::unique_ptr<EvalModeGuard> source_eval;
  if (transfer) source_eval = std::make_unique<EvalModeGuard>(*source);
  const Tensor attacked_x =
      images.detach().to(models::module_device(attacked)).to(models::module_dtype(attacked));
  auto attacked_forward = [&](const Tensor& input) {
    return losses::embed_for_metric(attacked.forward(input), attacked_metric);
  };
  // Lives as long as the plans, which may hold references into their AttackBatch.
  Tensor source_clean;
  AttackPlan source_plan;
  if (transfer) {
    {
      engine::NoGradGuard no_grad;
      source_clean = attacked_forward(attacked_x);
    }
    const AttackBatch source_batch{
        spec, options, label, *source_gallery, labels, self_index, source_clean, clean_table, rows};
    source_plan = attack_definition(spec.kind).plan(source_batch, gen);
  }
  const AttackPlan& followed = transfer ? source_plan : plan;

  BatchResult result;
  result.clean = plan.measure(clean);
  // rinit=1: this batch's random start comes from `gen`, so batches (and --seed values) differ.
  PgdOptions pgd = options.restart > 0 ? restart_pgd_options(spec.pgd, gen, options.restart)
                                       : seeded(spec.pgd, gen);
  pgd.host_objective = followed.host_objective;
  perturb(followed, attacked_x, attacked_forward, pgd, spec.nes, gen, result);
  result.adversarial_images = result.adversarial_images.to(x.device()).to(x.dtype());
  Tensor adversarial;
  {
    engine::NoGradGuard no_grad;
    adversarial = forward(result.adversarial_images);
  }
  result.adversarial = plan.measure(adversarial);
  result.perturbation = measure_perturbation(x, result.adversarial_images);
  check_perturbation(result.perturbation, spec.pgd.eps, label.c_str());
  return result;
}

BatchResult transfer_attack_batch(models::Model& source, const Gallery& source_gallery,
                                  models::Model& target, const Gallery& target_gallery,
                                  const Tensor& images, const std::vector<int64_t>& labels,
                                  const std::vector<int64_t>& self_index, const AttackSpec& spec,
                                  engine::Generator& gen, const AttackOptions& options) {
  ENGINE_CHECK(source_gallery.labels == target_gallery.labels,
               "transfer attack: the source model's gallery (", source_gallery.labels.size(),
               " items) is not the target's (", target_gallery.labels.size(),
               " items): both must embed the same split");
  return attack_batch_through(target, target_gallery, &source, &source_gallery, images, labels,
                              self_index, spec, gen, options);
}

}  // namespace attacks
