"""The PyTorch peer's ResNets and synthetic data set (imported by pytorch_train_step.py).

ResNet-18 and ResNet-50 as models/resnet.h defines ours, which is torchvision's (written out here:
the GPU machine's PyTorch may come without torchvision): ImageNet mean/std normalization inside
forward; conv1 7x7/2 pad 3 no bias, bn1, relu, maxpool 3x3/2 pad 1; layer1-4 (BasicBlock 2,2,2,2
or Bottleneck 3,4,6,3 with the stride on the 3x3 conv, "V1.5"; downsample = 1x1/stride conv + BN
on the first block when the stride or the width changes); global average pool; fc Linear(512 e ->
D), no L2 normalization (the loss normalizes for metric N/C, as ours). BN eps 1e-5, momentum 0.1.
Initialization as torchvision's (convs kaiming_normal fan_out relu, BN 1/0, fc PyTorch's default)
but from PyTorch's generator, not ours: the benchmark uses random weights on both sides
(model.pretrained must be "", which the bench configs have), so the weights differ, the work not.
ResNet-18 with D = 512 has 11,439,168 parameters: torchvision's 11,689,512 with D = 1000, less its
fc (512 x 1000 + 1000 = 513,000), plus ours (512 x 512 + 512 = 262,656).

The synthetic data set (data/synthetic.h): data.root "channels=C,size=S,classes=K,images=N,seed=s",
labels i % K, as ours. The pixels are NOT ours (ours are splitmix64 of a counter; computing that
in Python for 112 x 150,528 pixels would cost minutes): uniform [0, 1) from torch's generator
seeded with s. Same shapes and labels, which is all the timing depends on.
"""
import torch
import torch.nn.functional as F

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
LAYOUTS = {"resnet18": ("basic", (2, 2, 2, 2)), "resnet50": ("bottleneck", (3, 4, 6, 3))}


def conv(cin, cout, k, stride=1):
    return torch.nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)


class Block(torch.nn.Module):
    def __init__(self, kind, cin, width, stride):
        super().__init__()
        self.kind = kind
        cout = width * (4 if kind == "bottleneck" else 1)
        if kind == "basic":
            self.conv1, self.bn1 = conv(cin, width, 3, stride), torch.nn.BatchNorm2d(width)
            self.conv2, self.bn2 = conv(width, width, 3), torch.nn.BatchNorm2d(width)
        else:
            self.conv1, self.bn1 = conv(cin, width, 1), torch.nn.BatchNorm2d(width)
            self.conv2, self.bn2 = conv(width, width, 3, stride), torch.nn.BatchNorm2d(width)
            self.conv3, self.bn3 = conv(width, cout, 1), torch.nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = torch.nn.Sequential(conv(cin, cout, 1, stride),
                                                  torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        if self.kind == "basic":
            h = self.bn2(self.conv2(h))
        else:
            h = self.bn3(self.conv3(F.relu(self.bn2(self.conv2(h)))))
        return F.relu(h + (x if self.downsample is None else self.downsample(x)))


class ResNet(torch.nn.Module):
    def __init__(self, name, dim):
        super().__init__()
        kind, blocks = LAYOUTS[name]
        expansion = 4 if kind == "bottleneck" else 1
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1))
        self.conv1, self.bn1 = conv(3, 64, 7, 2), torch.nn.BatchNorm2d(64)
        cin, layers = 64, []
        for i, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
            stage = []
            for b in range(count):
                stage.append(Block(kind, cin, width, 2 if (b == 0 and i > 0) else 1))
                cin = width * expansion
            layers.append(torch.nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = torch.nn.Linear(cin, dim)
        for m in self.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        h = (x - self.mean) / self.std
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(h))), 3, 2, 1)
        h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
        return self.fc(h.mean((2, 3)))


SYNTHETIC_KEYS = ("channels", "size", "classes", "images", "seed")


def parse_synthetic(root, usage_error):
    spec = {"channels": 3, "size": 32, "classes": 10, "images": 200, "seed": 0}
    for item in filter(None, root.split(",")):
        key, _, value = item.partition("=")
        if key not in SYNTHETIC_KEYS or not value.isdigit():
            usage_error(f"config key 'data.root': bad synthetic item {item!r} "
                        f"(keys: {', '.join(SYNTHETIC_KEYS)}, integer values)")
        spec[key] = int(value)
    if spec["classes"] < 1 or spec["images"] % spec["classes"] or spec["images"] < 2 * spec["classes"]:
        usage_error("config key 'data.root': synthetic images must be a multiple of classes, "
                    "at least 2 per class")
    return spec


def synthetic_train_split(root, usage_error):
    """(images u8 [N, C, S, S], labels [N]) as load_train_split returns; pixels are bytes so the
    peer's batch path (u8 / 255) is the same as for MNIST."""
    spec = parse_synthetic(root, usage_error)
    generator = torch.Generator().manual_seed(spec["seed"])
    shape = (spec["images"], spec["channels"], spec["size"], spec["size"])
    images = torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
    return images, torch.arange(spec["images"]) % spec["classes"]
