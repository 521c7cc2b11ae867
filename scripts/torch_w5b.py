#!/usr/bin/env python3
"""torchvision's W5b (WORKLOADS.md), to set beside `workloads --data DIR --only W5b`:

    /work/venv/bin/python scripts/torch_w5b.py DIR [N]   (DIR/imagenet/*.jpg from
    `workloads --generate DIR` with D6; N: how many of D6's files, default all)

The torchvision ImageNet training transform (`RandomResizedCrop(224)` with area 0.08..1 and
aspect 3/4..4/3, which draws 10 attempts and falls back to the centre crop as tf's
`sample_distorted_bounding_box` does; `RandomHorizontalFlip`; `ToTensor`; `Normalize` by
ImageNet's mean and std) over PIL-decoded files, shuffled, in a `DataLoader` with 2 workers,
batch 64. Prints images/s of 3 passes after one warm-up pass, and their median, as JSON lines.
torch 2.15 and torchvision 0.29 when WORKLOADS.md's reference figures were taken.
"""

import json
import os
import statistics
import sys
import time

import torch
from PIL import Image
from torchvision import transforms


class Files(torch.utils.data.Dataset):
    def __init__(self, files, labels, transform):
        self.files, self.labels, self.transform = files, labels, transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            img = Image.open(f).convert("RGB")
        return self.transform(img), self.labels[i]


def main():
    d = sys.argv[1]
    labels = [int(l) for l in open(os.path.join(d, "imagenet", "labels.txt"))]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else len(labels)
    files = [os.path.join(d, "imagenet", f"{i:05d}.jpg") for i in range(n)]
    transform = transforms.Compose([
        transforms.RandomResizedCrop(224, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    ds = Files(files, labels[:n], transform)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=2,
                                         persistent_workers=True)

    def drain():
        k = 0
        for x, _ in loader:
            k += x.shape[0]
        return k

    drain()  # warm-up: page cache, workers
    rates = []
    for _ in range(3):
        t = time.perf_counter()
        k = drain()
        rates.append(k / (time.perf_counter() - t))
    print(json.dumps({"workload": "W5b/torchvision-2-workers", "images": k,
                      "images_per_s": round(statistics.median(rates)),
                      "passes": [round(r) for r in rates]}), flush=True)


if __name__ == "__main__":
    main()
