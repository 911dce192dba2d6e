#!/usr/bin/env python3
"""The PyTorch peer of `dml bench --train`: the same training step, timed the same way.

    python3 tools/peers/pytorch_train_step.py --config configs/fashion/est.json \
        [--set KEY=VALUE]... [--device cpu|cuda] [--steps 10] [--warmup 2] \
        [--variants p0,p1] [--precision fp32|pytorch-default|tf32|bf16] [--threads N] \
        [--data-root DIR] --out peer.json
    build/dml bench --train configs/fashion/est.json --device cpu --peer peer.json

This is a benchmark peer, not part of the product (which has no Python): it reads a `dml train`
config, builds the same network, loss and defense in PyTorch, and times whole training steps in
these styles (shared/research/performance-anchors.md section 8):

  P0 "robrank as-is"  the authors' code paths (cdluminate/robrank): the PGD loop calls
                      loss.backward() (computing weight gradients it then discards), makes two
                      throw-away SGD optimizers per step, reads loss.item() every step, and the
                      random triplet miner loops over anchors in Python.
  P1 "best eager"     the same math with input-only gradients (torch.autograd.grad), no host
                      synchronization inside the loop, a vectorized miner and a precomputed
                      projection box.
  P2 "compiled"       P1 with the model under torch.compile (PyTorch 2 only; on request).
  P3 "captured"       P1 with the defense's PGD loop captured, in two candidates timed one after
                      the other, the faster reported (its name in the variant, both in "p3"):
                      "torch.cuda.graph": one PGD step (forward, input gradient, update) captured
                      by hand over static input, box and reference tensors after 3 warm-up steps
                      on a side stream, once per shape; step 1 runs eagerly on the static
                      tensors, steps 2..eta replay the graph (as dml's captured loop);
                      "compile reduce-overhead": the PGD objective under
                      torch.compile(mode="reduce-overhead") (forward and backward as CUDA graphs)
                      and the update under torch.compile (one fused kernel).
                      Each candidate is first checked against P1's eager loop on 2 batches from
                      the same weights (check_p3). The loops are in captured_pgd.py. CUDA only
                      (on request; the CPU has a stand-in for tests, --p3-stand-in); defense est
                      or act.

Supported configs: C2F2 on Fashion-MNIST or MNIST, or ResNet-18/50 (random init, model.pretrained
"") on those or on the synthetic data set (peer_models.py: same shapes and labels as ours, other
pixels), SPC-2 batches, the triplet loss with the random
miner (metrics N, E, C), Adam, and defense none, est or act (Zhou et al. TPAMI section 4; robrank
defenses/est.py and defenses/pnp.py). Anything else exits with code 2 and says which key.

One step = the batch copied to the device, the defense's PGD steps, the training forward and
backward and the optimizer step, with the device synchronized at both ends; the median of --steps
after --warmup is reported. cuDNN autotuning on. --precision (default: the config's key
`precision`, else fp32), recorded in the output file:
  fp32             strict FP32: cudnn.allow_tf32 and cuda.matmul.allow_tf32 off (our default)
  pytorch-default  PyTorch's defaults: TF32 convolutions (cudnn.allow_tf32 on), FP32 matmuls
  tf32             both on
  bf16             both off, the network's forward passes under torch.autocast(bfloat16); the
                   embeddings cast back to FP32, so losses, the PGD update and the images are FP32
The output file's format is documented in tools/dml/bench_peers.h.
"""
import argparse
import gzip
import json
import os
import random
import statistics
import struct
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("pytorch_train_step.py: PyTorch is not installed for this python "
          f"({sys.executable}); on Debian: apt-get install python3-torch", file=sys.stderr)
    sys.exit(3)

from captured_pgd import P3_CANDIDATES, make_p3_loop  # noqa: E402 (P3's loops, beside this file)
from peer_models import ResNet, synthetic_train_split  # noqa: E402 (ResNets, synthetic data)


def usage_error(message):
    print(f"pytorch_train_step.py: {message}", file=sys.stderr)
    sys.exit(2)


# ---- config --------------------------------------------------------------------------------------

def apply_override(config, assignment):
    """"defense.pgd.steps=1" sets config["defense"]["pgd"]["steps"] = 1 (value parsed as JSON
    when it is JSON, else kept as a string, as `dml --set` does)."""
    if "=" not in assignment:
        usage_error(f"--set {assignment}: expected KEY=VALUE")
    key, text = assignment.split("=", 1)
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = text
    node = config
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def get(config, key, default):
    node = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def require(config, key, allowed, default):
    value = get(config, key, default)
    if value not in allowed:
        usage_error(f"config key '{key}' is {value!r}; this peer supports {sorted(allowed)}")
    return value


# ---- data ------------------------------------------------------------------------------------------

def read_idx(path):
    """An IDX file (plain or gzip) as (bytes, dims)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 8:
        usage_error(f"{path}: not an unsigned-byte IDX file")
    rank = data[3]
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return data[4 + 4 * rank:], dims


def load_train_split(name, root):
    if not root:
        if name != "fashion-mnist":
            usage_error("data.root is required for mnist")
        root = "/usr/share/datasets/fashion-mnist"
    paths = []
    for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"):
        candidates = [os.path.join(root, stem + ext) for ext in (".gz", "")]
        found = [p for p in candidates if os.path.exists(p)]
        if not found:
            usage_error(f"no {stem}[.gz] in {root} (data.root, or --data-root)")
        paths.append(found[0])
    pixels, dims = read_idx(paths[0])
    labels, _ = read_idx(paths[1])
    images = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).view(dims[0], 1, dims[1], dims[2])
    return images, torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()


class Spc2Batches:
    """SPC-2 batches [a0, p0, a1, p1, ...]: anchors in a shuffled order, each positive drawn from
    the anchor's class (robrank datasets/mnist.py). Timing does not depend on which images."""

    def __init__(self, labels, pairs, seed):
        self.labels = labels
        self.pairs = pairs
        self.rng = random.Random(seed)
        self.by_class = {}
        for i, y in enumerate(labels.tolist()):
            self.by_class.setdefault(y, []).append(i)
        self.order = list(range(len(labels)))
        self.rng.shuffle(self.order)
        self.cursor = 0

    def next(self):
        indices = []
        for _ in range(self.pairs):
            if self.cursor == len(self.order):
                self.rng.shuffle(self.order)
                self.cursor = 0
            anchor = self.order[self.cursor]
            self.cursor += 1
            indices += [anchor, self.rng.choice(self.by_class[int(self.labels[anchor])])]
        return torch.tensor(indices)


# ---- model and loss ----------------------------------------------------------------------------------

class C2F2(torch.nn.Module):
    """C2F2: conv 1->32 k5 p2, ReLU, maxpool 2; conv 32->64 k5 p2, ReLU, maxpool 2;
    flatten; linear 3136->1024, ReLU; linear 1024->D."""

    def __init__(self, dim):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = torch.nn.Linear(3136, 1024)
        self.fc2 = torch.nn.Linear(1024, dim)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def metric_embed(e, metric):
    return F.normalize(e, dim=-1) if metric in ("N", "C") else e


def distance(a, b, metric):
    """Row-wise distance of already metric_embed'ed rows."""
    if metric == "C":
        return 1.0 - (a * b).sum(-1)
    return (a - b + 1e-6).norm(dim=-1)


def mine_random_loop(labels):
    """robrank's spc2-random: a Python loop over anchors, one host sync per anchor."""
    negatives = []
    for i in range(labels.numel() // 2):
        mask = labels != labels[2 * i]
        if mask.sum() > 0:
            negatives.append(random.choice(torch.where(mask)[0]).item())
        else:
            negatives.append(random.randrange(labels.numel()))
    n = labels.numel()
    return (torch.arange(0, n, 2, device=labels.device), torch.arange(1, n, 2, device=labels.device),
            torch.tensor(negatives, device=labels.device))


def mine_random_vectorized(labels, generator):
    """The same distribution in one multinomial draw (weight 1 on every other-label item)."""
    anchors = labels[0::2]
    weights = (labels.view(1, -1) != anchors.view(-1, 1)).float()
    weights[weights.sum(1) == 0] = 1.0  # a batch of one class: any item, as robrank falls back
    negatives = torch.multinomial(weights, 1, generator=generator).view(-1)
    n = labels.numel()
    return torch.arange(0, n, 2, device=labels.device), torch.arange(1, n, 2, device=labels.device), negatives


def triplet_loss(e, triplets, metric, margin):
    e = metric_embed(e, metric)
    a, p, n = (e[i] for i in triplets)
    return F.relu(distance(a, p, metric) - distance(a, n, metric) + margin).mean()


# ---- precision ---------------------------------------------------------------------------------------

PRECISIONS = ("fp32", "pytorch-default", "tf32", "bf16")


def set_precision_flags(precision):
    """The TF32 switches of a --precision mode (process-wide, as PyTorch's own)."""
    torch.backends.cudnn.allow_tf32 = precision in ("pytorch-default", "tf32")
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"


def precision_forward(network, precision, device):
    """The network's forward pass in a --precision mode: itself, or for bf16 under autocast with
    the embeddings cast back to FP32 (losses and the PGD update stay FP32). The autocast cache is
    off: a captured graph must cast the weights again at every replay (they change every step)."""
    if precision != "bf16":
        return network

    def forward(x):
        with torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False):
            e = network(x)
        return e.float()

    return forward


# ---- the step, in each style ---------------------------------------------------------------------------

class Step:
    def __init__(self, config, model, device, style):
        self.model = model
        self.device = device
        self.style = style  # "p0" or "p1"
        self.metric = get(config, "loss.metric", "N")
        margin = get(config, "loss.margin", None)
        self.margin = margin if margin is not None else (1.0 if self.metric == "E" else 0.2)
        self.defense = get(config, "defense.name", "none")
        self.eps = float(get(config, "defense.pgd.eps", 0.0))
        self.alpha = float(get(config, "defense.pgd.alpha", 0.0))
        self.steps = int(get(config, "defense.pgd.steps", 0))
        self.optimizer = torch.optim.Adam(model.parameters(), lr=float(get(config, "optimizer.lr", 1e-3)),
                                          weight_decay=float(get(config, "optimizer.weight_decay", 0.0)))
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(0)
        self.forward = model
        self.step_size = self.eps if self.steps == 1 else self.alpha
        self.attack_loop = None  # P3: a GraphPgd or CompiledPgd running the PGD loop
        self.adversarial_log = None  # check_p3: a list, one entry per PGD loop

    def objective(self, x, aux):
        """What the defense's PGD loop minimizes. EST: -sum_i d(f(x_i), f(x0_i)), aux = the clean
        embeddings f(x0) (metric_embed'ed); ACT: mean_i d(f(p~_i), f(n~_i)), x = the positives
        then the negatives, aux unused."""
        e = metric_embed(self.forward(x), self.metric)
        if self.defense == "est":
            return -distance(e, aux, self.metric).sum()
        b = x.shape[0] // 2
        return distance(e[:b], e[b:], self.metric).mean()

    def mine(self, labels):
        if self.style == "p0":
            return mine_random_loop(labels)
        return mine_random_vectorized(labels, self.generator)

    def pgd(self, images, objective, aux):
        """x <- clip(x - alpha sign(grad objective)) inside the eps-ball and [0, 1], eta steps,
        model in eval mode (eta = 1: one step of size eps). objective(x) in P0/P1/P2; P3's loop
        calls self.objective(x, aux)."""
        step = self.step_size
        x0 = images.detach()
        if self.style == "p0":  # robrank attacks/advrank.py embShift / the ACT loop, as written
            x = x0.clone().requires_grad_(True)
            for _ in range(self.steps):
                optim = torch.optim.SGD(self.model.parameters(), lr=0.0)
                optimx = torch.optim.SGD([x], lr=1.0)
                optim.zero_grad()
                optimx.zero_grad()
                loss = objective(x)
                loss.item()
                loss.backward()
                x.grad.data.copy_(step * torch.sign(x.grad))
                optimx.step()
                x = torch.min(x, x0 + self.eps)
                x = torch.max(x, x0 - self.eps)
                x = torch.clamp(x, min=0.0, max=1.0).clone().detach().requires_grad_(True)
            optim.zero_grad()
            return x.detach()
        low = (x0 - self.eps).clamp_(min=0.0)
        high = (x0 + self.eps).clamp_(max=1.0)
        x = x0.clone()
        # Only the input gradient, as dml's grad(): with the weights not requiring grad, neither
        # eager autograd nor a torch.compile'd backward (which would otherwise return every
        # input's gradient, the weights' included) computes weight gradients.
        params = [p for p in self.model.parameters() if p.requires_grad]
        for p in params:
            p.requires_grad_(False)
        try:
            if self.attack_loop is not None:
                x = self.attack_loop(x0, low, high, aux, self.steps)
            else:
                for _ in range(self.steps):
                    x.requires_grad_(True)
                    (grad,) = torch.autograd.grad(objective(x), [x])
                    x = torch.minimum(torch.maximum(x.detach() - step * grad.sign(), low), high)
        finally:
            for p in params:
                p.requires_grad_(True)
        if self.adversarial_log is not None:
            with torch.no_grad():
                value = float(self.objective(x, aux))
            self.adversarial_log.append({"images": x.detach().clone(), "low": low, "high": high,
                                         "objective": value})
        return x

    def __call__(self, images, labels):
        model, metric = self.model, self.metric
        if self.defense == "none":
            model.train()
            loss = triplet_loss(self.forward(images), self.mine(labels), metric, self.margin)
        elif self.defense == "est":
            model.eval()
            with torch.no_grad():
                clean = metric_embed(self.forward(images), metric)
                clean_loss = triplet_loss(clean, self.mine(labels), metric, self.margin)
            noise = 1e-7 * torch.randint_like(clean, -1, 2) if self.style == "p0" else 0.0
            first = [True]

            def shift(x):  # minimize -sum_i d(f(x_i), f(x0_i)), noise on the reference at step 0
                reference = clean + noise if first[0] else clean
                first[0] = False
                return self.objective(x, reference)

            adversarial = self.pgd(images, shift, clean)
            model.train()
            loss = triplet_loss(self.forward(adversarial), self.mine(labels), metric, self.margin)
            if self.style == "p0":
                clean_loss.item()
        elif self.defense == "act":
            model.eval()
            with torch.no_grad():
                clean = metric_embed(self.forward(images), metric)
            a, p, n = self.mine(labels)
            b = a.numel()
            pn = images[torch.cat([p, n])]

            def collapse(x):  # minimize mean_i d(f(p~_i), f(n~_i))
                return self.objective(x, None)

            adversarial = self.pgd(pn, collapse, None)
            model.train()
            pn_embedded = metric_embed(self.forward(adversarial), metric)
            anchors = metric_embed(self.forward(images[a]), metric)
            loss = F.relu(distance(anchors, pn_embedded[:b], metric) -
                          distance(anchors, pn_embedded[b:], metric) + self.margin).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        if self.style == "p0":
            loss.item()  # robrank logs the loss every step


# ---- timing --------------------------------------------------------------------------------------------

def default_threads():
    """The thread count dml's OpenMP would use: OMP_NUM_THREADS, else the cores this process may
    run on (its affinity mask, as in a container), which `dml bench --train` compares with."""
    text = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_step(config, style, compiled, device, args, p3=None):
    """A fresh model (seed 0) and its step in a style: P2's model compiled, P3's PGD loop the
    candidate p3, the forward in --precision."""
    torch.manual_seed(0)
    random.seed(0)
    name, dim = get(config, "model.name", "c2f2"), int(get(config, "model.embedding_dim", 512))
    model = (C2F2(dim) if name == "c2f2" else ResNet(name, dim)).to(device)
    step = Step(config, model, device, style)
    step.forward = precision_forward(torch.compile(model) if compiled else model, args.precision,
                                     device)
    if p3 is not None:
        step.attack_loop = make_p3_loop(p3, step, stand_in=device.type != "cuda")
    return step


def batch_on_device(batches, images_u8, labels_all, device):
    index = batches.next()
    return images_u8[index].float().div_(255.0).to(device), labels_all[index].to(device)


def time_variant(config, style, compiled, device, images_u8, labels_all, args, p3=None,
                 step=None):
    """Times a fresh step, or `step` (P3's checked one, already compiled and captured)."""
    if step is None:
        step = build_step(config, style, compiled, device, args, p3)
    label = f"{style}{' compiled' if compiled else ''}{f' p3 {p3}' if p3 else ''}"
    batches = Spc2Batches(labels_all, int(get(config, "sampler.pairs_per_batch", 128)), seed=0)
    times = []
    for i in range(args.warmup + args.steps):
        index = batches.next()
        images_cpu = images_u8[index].float().div_(255.0)
        labels_cpu = labels_all[index]
        synchronize(device)
        start = time.perf_counter()
        step(images_cpu.to(device), labels_cpu.to(device))
        synchronize(device)
        if i >= args.warmup:
            times.append(1000.0 * (time.perf_counter() - start))
        print(f"  {label} step {i + 1}/{args.warmup + args.steps}: "
              f"{1000.0 * (time.perf_counter() - start):.1f} ms", file=sys.stderr, flush=True)
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


# P3's check: training steps on this many batches, P1 and the candidate from the same weights.
CHECK_BATCHES = 2
# The largest relative difference of the PGD objective at the final images that passes. Where a
# gradient component is within rounding of 0, sign() may differ between two correct loops whose
# kernels round differently (torch.compile fuses the pointwise ops), moving that pixel by 2 alpha
# and the objective a little; a loop that does not chain its steps, or reads a stale batch's
# tensors, misses the objective by far more.
CHECK_OBJECTIVE_TOLERANCE = 1e-2


def check_p3(config, candidate, device, images_u8, labels_all, args):
    """P3's adversarial images against P1's eager loop: both run CHECK_BATCHES training steps from
    the same weights and batches (the second batch after the first one's capture, so a graph that
    kept the first batch's tensors fails). Passes when every P3 image lies in its eps-box and the
    objective at the final images is P1's within CHECK_OBJECTIVE_TOLERANCE; also reports the
    largest image difference and the fraction of pixels that differ at all (0 for bit-equal).
    Returns the result and the candidate's step, whose compilation and capture the timing reuses
    (a fresh step would compile again: minutes of a GPU window)."""
    logs = []
    for p3 in (None, candidate):
        step = build_step(config, "p1", False, device, args, p3)
        step.adversarial_log = []
        batches = Spc2Batches(labels_all, int(get(config, "sampler.pairs_per_batch", 128)), seed=0)
        for _ in range(CHECK_BATCHES):
            step(*batch_on_device(batches, images_u8, labels_all, device))
        logs.append(step.adversarial_log)
        step.adversarial_log = None
    result = {"against": "P1 best eager", "batches": CHECK_BATCHES, "max_abs_difference": 0.0,
              "differing_fraction": 0.0, "objective_relative_difference": 0.0, "in_box": True}
    for eager, captured in zip(*logs):
        x1, x3 = eager["images"], captured["images"]
        result["max_abs_difference"] = max(result["max_abs_difference"],
                                           float((x3 - x1).abs().max()))
        result["differing_fraction"] = max(result["differing_fraction"],
                                           float((x3 != x1).float().mean()))
        relative = abs(captured["objective"] - eager["objective"]) / max(abs(eager["objective"]),
                                                                          1e-12)
        result["objective_relative_difference"] = max(result["objective_relative_difference"],
                                                      relative)
        low, high = captured["low"], captured["high"]
        result["in_box"] = result["in_box"] and bool(((x3 >= low) & (x3 <= high)).all())
    result["passed"] = (result["in_box"] and
                        result["objective_relative_difference"] <= CHECK_OBJECTIVE_TOLERANCE)
    return result, step


def p3_candidates(args, device, defense):
    """The P3 candidates to time, or a reason to skip P3."""
    if defense == "none":
        return [], "defense none has no PGD loop"
    if device.type != "cuda" and not args.p3_stand_in:
        return [], "it captures CUDA graphs: --device cuda (CPU tests: --p3-stand-in)"
    wanted = [c for c in args.p3_candidates.split(",") if c]
    if device.type != "cuda":
        wanted = [c for c in wanted if c == "graph"]  # the stand-in is the graph's
    if "compile" in wanted and not hasattr(torch, "compile"):
        print(f"pytorch_train_step.py: P3 compile skipped: PyTorch {torch.__version__} has no "
              "torch.compile", file=sys.stderr)
        wanted.remove("compile")
    return wanted, "" if wanted else "no candidate left to time"


def time_p3(config, device, images_u8, labels_all, args, defense):
    """Checks and times each P3 candidate; the faster's timings and name, with every candidate's
    outcome, or None when none passed."""
    wanted, reason = p3_candidates(args, device, defense)
    if not wanted:
        print(f"pytorch_train_step.py: P3 skipped: {reason}", file=sys.stderr)
        return None
    outcomes, best = {}, None
    for candidate in wanted:
        name = P3_CANDIDATES[candidate].name
        if device.type != "cuda":
            name += " (CPU stand-in)"
        try:
            check, step = check_p3(config, candidate, device, images_u8, labels_all, args)
            print(f"P3 {name}: check against P1: {json.dumps(check)}", file=sys.stderr, flush=True)
            if not check["passed"]:
                outcomes[name] = {"check": check, "error": "the check against P1 failed"}
                continue
            ms = time_variant(config, "p1", False, device, images_u8, labels_all, args, candidate,
                              step)
        except Exception as e:  # e.g. torch.compile without a working compiler toolchain
            print(f"pytorch_train_step.py: P3 {name} failed, skipped: {type(e).__name__}: {e}",
                  file=sys.stderr)
            outcomes[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        outcomes[name] = {"check": check, "ms": ms}
        if best is None or ms["median"] < outcomes[best]["ms"]["median"]:
            best = name
    if best is None:
        print("pytorch_train_step.py: P3 skipped: no candidate passed", file=sys.stderr)
        return None
    print(f"P3: the faster candidate is {best}", file=sys.stderr)
    return {"variant": f"P3 {best}", "ms": outcomes[best]["ms"],
            "p3": {"chosen": best, "candidates": outcomes}}


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--variants", default="p0,p1", help="comma list of p0, p1, p2, p3")
    parser.add_argument("--precision", choices=PRECISIONS, default=None,
                        help="default: the config's key `precision`, else fp32")
    parser.add_argument("--p3-candidates", default="graph,compile",
                        help="comma list of graph, compile: the P3 candidates timed")
    parser.add_argument("--p3-stand-in", action="store_true",
                        help="tests on the CPU: P3's graph candidate with its replays run eagerly")
    parser.add_argument("--threads", type=int, default=default_threads(),
                        help="CPU threads (default: as dml's OpenMP: OMP_NUM_THREADS, else the "
                             "cores this process may run on)")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0:
        usage_error("--steps must be >= 1 and --warmup >= 0")
    for c in args.p3_candidates.split(","):
        if c and c not in P3_CANDIDATES:
            usage_error(f"--p3-candidates: unknown candidate {c!r} (graph, compile)")
    return args


def main():
    args = parse_arguments()
    try:
        with open(args.config) as f:
            config = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        usage_error(f"{args.config}: {e}")
    for assignment in args.set:
        apply_override(config, assignment)

    data = require(config, "data.name", {"fashion-mnist", "mnist", "synthetic"}, "fashion-mnist")
    require(config, "model.name", {"c2f2", "resnet18", "resnet50"}, "c2f2")
    require(config, "model.bn_branches", {1}, 1)
    require(config, "model.frozen_bn", {False}, False)
    require(config, "model.pretrained", {""}, "")
    require(config, "sampler.name", {"spc2"}, "spc2")
    require(config, "loss.name", {"triplet"}, "triplet")
    require(config, "loss.metric", {"N", "E", "C"}, "N")
    require(config, "loss.miner", {"random"}, "random")
    require(config, "optimizer.name", {"adam"}, "adam")
    defense = require(config, "defense.name", {"none", "est", "act"}, "none")
    if args.precision is None:
        args.precision = require(config, "precision", set(PRECISIONS), "fp32")
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in ("p0", "p1", "p2", "p3"):
            usage_error(f"--variants: unknown variant {v!r} (p0, p1, p2, p3)")

    device = torch.device(args.device)
    set_precision_flags(args.precision)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            print("pytorch_train_step.py: --device cuda but PyTorch sees no GPU", file=sys.stderr)
            sys.exit(1)
        torch.backends.cudnn.benchmark = True
        device_name = torch.cuda.get_device_name(device)
    else:
        torch.set_num_threads(args.threads)
        device_name = f"cpu ({torch.get_num_threads()} threads)"
    root = args.data_root or get(config, "data.root", "")
    if data == "synthetic":
        images_u8, labels_all = synthetic_train_split(root, usage_error)
    else:
        images_u8, labels_all = load_train_split(data, root)

    names = {"p0": "P0 robrank as-is", "p1": "P1 best eager", "p2": "P2 torch.compile"}
    pairs = int(get(config, "sampler.pairs_per_batch", 128))
    pgd_steps = int(get(config, "defense.pgd.steps", 0)) if defense != "none" else 0
    rows = []
    for v in variants:
        print(f"{names.get(v, 'P3 captured PGD loop')}: {args.config} on {device_name}, "
              f"precision {args.precision}", file=sys.stderr, flush=True)
        extra = {}
        if v == "p3":
            timed = time_p3(config, device, images_u8, labels_all, args, defense)
            if timed is None:
                continue
            name, ms, extra = timed["variant"], timed["ms"], {"p3": timed["p3"]}
        elif v == "p2" and not hasattr(torch, "compile"):
            print(f"pytorch_train_step.py: P2 skipped: PyTorch {torch.__version__} has no "
                  "torch.compile", file=sys.stderr)
            continue
        else:
            name = names[v]
            try:
                ms = time_variant(config, "p0" if v == "p0" else "p1", v == "p2", device, images_u8,
                                  labels_all, args)
            except Exception as e:  # e.g. torch.compile without a working compiler toolchain
                if v != "p2":
                    raise
                print(f"pytorch_train_step.py: P2 failed, skipped: {type(e).__name__}: {e}",
                      file=sys.stderr)
                continue
        print(f"{name}: median {ms['median']:.1f} ms/step", file=sys.stderr, flush=True)
        rows.append({"config": os.path.basename(args.config), "variant": name,
                     "images": 2 * pairs, "passes": pgd_steps + 1, "steps": args.steps,
                     "warmup": args.warmup, "ms": ms, **extra})
        write_peer_file(args, device, device_name, rows)  # after each variant: a later one may fail
    write_peer_file(args, device, device_name, rows)
    print(f"wrote {args.out}", file=sys.stderr)


def write_peer_file(args, device, device_name, rows):
    out = {"tool": "tools/peers/pytorch_train_step.py", "peer": "PyTorch",
           "version": torch.__version__, "device": device.type, "device_name": device_name,
           "threads": torch.get_num_threads(), "precision": args.precision,
           "overrides": args.set, "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")

if __name__ == "__main__":
    main()
