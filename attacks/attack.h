// One adversarial ranking attack on one batch of images, end to end (docs/attacks.md; Zhou et al.
// TPAMI §3, §5, §6.1; MDProp eq. 3, eq. 16; robrank attacks/advrank*.py):
//
//   1. embed the clean batch (eval mode, no tape) and rank it against the gallery;
//   2. choose queries / candidates / targets from the clean ranking (attacks/selection.h);
//   3. measure the attack's quantity on the clean images (attacks/measures.h);
//   4. PGD on the images against the attack's objective (attacks/pgd.h, attacks/objectives.h);
//   5. measure again on the adversarial images with the same selection, and check the
//      perturbation (max|delta|_inf <= eps + 1e-6, no NaN, pixels in [0, 1]).
// Steps 2-5 are generic; what each attack kind selects, minimizes and measures is its definition
// in attacks/attack_kinds.h.
//
// Spec strings follow robrank's advrank.py: KIND[:key=value]..., e.g.
//   CA:pm=+:W=1:eps=0.30196:alpha=0.011764:pgditer=32     SPQA:pm=-:M=1:eps=...
//   TMA:eps=...    ES:...    LTM:...    GTM:...    GTT:...    STAX:...    MTAX:T=5:...
// Keys: pm (+ or -, CA/QA/SPQA only), W (CA), M (QA/SPQA), T (MTAX; STAX is T = 1), G (SP-QA
// references, default 5), zeta (SP-QA's xi schedule; default by dataset, see default_zeta), eps,
// alpha, pgditer (defaults robrank's: 4/255, 1/255, 24), rinit (1 = uniform random start);
// nes (the NES black-box attack's population per step, attacks/nes.h), queries (its budget per
// image: pgditer = queries / nes), sigma (its sampling scale, default 2 eps).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attacks/nes.h"
#include "attacks/pgd.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/distance.h"
#include "models/model.h"

namespace attacks {

enum class AttackKind { CA, QA, SPQA, TMA, ES, LTM, GTM, GTT, STAX, MTAX };

struct AttackSpec {
  AttackKind kind = AttackKind::CA;
  bool raise = true;  // pm: '+' raises the rank (CA+, QA+, SP-QA+), '-' lowers it
  int64_t W = 1, M = 1, T = 1, G = 5;
  double zeta = 0.0;  // 0: not given (the caller fills in default_zeta)
  PgdOptions pgd;
  NesOptions nes;  // population > 0: the NES black-box attack (keys nes, queries, sigma)
};

// Throws engine::Error naming the spec and the offending key/value.
AttackSpec parse_attack_spec(const std::string& text);
// The canonical spec string (every key spelled out), e.g. "CA:pm=+:W=1:eps=0.30196:...".
std::string attack_spec_string(const AttackSpec& spec);
// "CA+", "QA-", "SPQA+", "TMA", "ES", "LTM", "GTM", "GTT", "STAX", "MTAX".
std::string attack_label(const AttackSpec& spec);
// SP-QA's zeta per dataset (Zhou et al. TPAMI §6.1.2): mnist 2e4; fashion-mnist and cub200 4e4;
// cars196 (or "cars") and sop 7e4; anything else 4e4.
double default_zeta(const std::string& dataset);

// The gallery every attack ranks against: the clean embeddings of the whole split, as the metric
// sees them (rows L2-normalized for N and C), on the model's device, with their labels.
struct Gallery {
  engine::Tensor embeddings;  // [NX, D]
  std::vector<int64_t> labels;
  losses::Metric metric = losses::Metric::N;
};
// Embeds `images` [N, C, H, W] with the model in eval mode (models::embed), applies the metric.
Gallery make_gallery(models::Model& model, const engine::Tensor& images,
                     const std::vector<int64_t>& labels, losses::Metric metric,
                     int64_t batch_size = 256);
// The same from the model's raw embeddings [N, D] (any device), computed elsewhere (e.g. a split
// embedded batch by batch as it is decoded); the gallery lives on `device`, the model's.
Gallery gallery_from_embeddings(const engine::Tensor& raw, const std::vector<int64_t>& labels,
                                losses::Metric metric, const engine::Device& device);

// The seed of one attack's random stream (its query/candidate/target draws and random starts, for
// the generator attack_batch is given): `seed` mixed with the FNV-1a hash of attack_label(spec).
// So the attacks of one profile run from one --seed draw independently of each other (CA+'s
// queries are not QA+'s candidates nor TMA's targets), an attack's draws do not depend on which
// attacks ran before it, and one attack at several budgets (the qccurve28 curve) attacks the
// same draws at every eps.
uint64_t attack_stream_seed(uint64_t seed, const AttackSpec& spec);

struct AttackOptions {
  // GTM target index, LTM self mask and SP-QA's batch-wide xi as robrank (§6.2; objectives.h)
  bool robrank_compat = false;
  // > 0: restart r of a worst-case run (attacks/worst_case.h): a random start seeded by
  // restart_pgd_options, drawing nothing from the generator, so the selection is restart 0's.
  int64_t restart = 0;
};

// Named per-image measures, e.g. {"CA+:prank", {...}} (percent for ranks and recalls, the raw
// cosine for TMA, the raw distance for ES:D), in a fixed order per attack; `clean` and
// `adversarial` have the same names.
using Measures = std::vector<std::pair<std::string, std::vector<double>>>;

struct BatchResult {
  Measures clean;
  Measures adversarial;
  PerturbationReport perturbation;
  std::vector<double> objective;  // the objective before each PGD step
  engine::Tensor adversarial_images;
  int64_t queries_per_image = 0;  // NES: model queries per image (0 for a gradient attack)
};

// images [B, C, H, W] in [0, 1] (any device; moved to the model's), labels B,
// self_index[b] = the gallery row of image b's clean copy (-1 if none). Selection draws from gen.
BatchResult attack_batch(models::Model& model, const engine::Tensor& images,
                         const std::vector<int64_t>& labels, const std::vector<int64_t>& self_index,
                         const Gallery& gallery, const AttackSpec& spec, engine::Generator& gen,
                         const AttackOptions& options = {});

// Transfer (docs/attacks.md "Black-box and transfer attacks"): the selection from `target`'s clean
// ranking (as attack_batch on target), the perturbation computed through `source` (its model and
// its gallery: the same split's clean embeddings through source, same rows and labels), the
// measures through `target`. With source == target the result is attack_batch's, bit for bit.
BatchResult transfer_attack_batch(models::Model& source, const Gallery& source_gallery,
                                  models::Model& target, const Gallery& target_gallery,
                                  const engine::Tensor& images, const std::vector<int64_t>& labels,
                                  const std::vector<int64_t>& self_index, const AttackSpec& spec,
                                  engine::Generator& gen, const AttackOptions& options = {});

}  // namespace attacks
