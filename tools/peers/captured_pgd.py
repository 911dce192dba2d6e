"""P3 of the PyTorch peer (pytorch_train_step.py): the defense's PGD loop captured, in two
candidates that the peer checks against P1's eager loop and times, keeping the faster."""
import torch


def project_step(x, grad, low, high, step):
    """One PGD update, P1's: x - step sign(grad), into the box [low, high] (eps-ball and [0, 1])."""
    return torch.minimum(torch.maximum(x - step * grad.sign(), low), high)


class GraphPgd:
    """P3 "torch.cuda.graph": one PGD step captured by hand (PyTorch's documented recipe: warm-up
    on a side stream, then capture) over static tensors, once per shape and reused across
    batches; each call copies its batch in, runs step 1 eagerly on the static tensors and
    replays the graph for steps 2..eta. The weights are updated in place by Adam, so the graph
    reads each batch's weights. stand_in (CPU tests only): no graph, a replay runs the step
    eagerly, so the static-tensor bookkeeping and the check run without a GPU."""

    name = "torch.cuda.graph"
    warmup_steps = 3

    def __init__(self, objective, step_size, stand_in=False):
        self.objective = objective
        self.step_size = step_size
        self.stand_in = stand_in
        self.graph = None
        self.shapes = None
        self.static = None  # [x, low, high, aux]; aux None for ACT

    def step(self):
        x, low, high, aux = self.static
        variable = x.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(self.objective(variable, aux), [variable])
        with torch.no_grad():
            x.copy_(project_step(x, grad, low, high, self.step_size))

    def capture(self, tensors):
        self.static = [None if t is None else t.clone() for t in tensors]
        self.graph = None
        if self.stand_in:
            return
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup_steps):  # cuDNN's autotuning and autograd's first use
                self.step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.step()

    def __call__(self, x0, low, high, aux, steps):
        tensors = (x0, low, high, aux)
        shapes = tuple(None if t is None else tuple(t.shape) for t in tensors)
        if shapes != self.shapes:
            self.capture(tensors)
            self.shapes = shapes
        for static, value in zip(self.static, tensors):
            if static is not None:
                static.copy_(value)
        self.step()
        for _ in range(steps - 1):
            if self.stand_in:
                self.step()
            else:
                self.graph.replay()
        return self.static[0].clone()


def cudagraph_mark_step_begin():
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    if mark is not None:
        mark()


class CompiledPgd:
    """P3 "compile reduce-overhead": P1's loop with the objective under
    torch.compile(mode="reduce-overhead"), whose forward and backward replay as CUDA graphs
    (torch.autograd.grad runs the compiled backward), and the update under torch.compile's default
    mode (one fused kernel; not reduce-overhead, whose output buffer the next replay overwrites
    while it is the next step's input)."""

    name = "compile reduce-overhead"

    def __init__(self, objective, step_size):
        self.objective = torch.compile(objective, mode="reduce-overhead")
        self.update = torch.compile(project_step)
        self.step_size = step_size

    def __call__(self, x0, low, high, aux, steps):
        x = x0
        for _ in range(steps):
            cudagraph_mark_step_begin()  # the previous step's loss and gradient are dropped
            x = x.detach().requires_grad_(True)
            (grad,) = torch.autograd.grad(self.objective(x, aux), [x])
            x = self.update(x.detach(), grad, low, high, self.step_size)
        return x


P3_CANDIDATES = {"graph": GraphPgd, "compile": CompiledPgd}


def make_p3_loop(candidate, step, stand_in):
    if candidate == "graph":
        return GraphPgd(step.objective, step.step_size, stand_in=stand_in)
    return CompiledPgd(step.objective, step.step_size)
