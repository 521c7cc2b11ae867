#!/usr/bin/env python3
"""W10's and W10d's peer on D4 (WORKLOADS.md): the `webdataset` Python package in its best form,
`WebDataset(urls)` in a torch `DataLoader` with 2 workers (each worker reads its own shards), and
the same pipeline in process. Prints one JSON line per figure, as examples/workloads.rs does.

    /work/venv/bin/python scripts/peers_w10.py DIR        # DIR/wds/train-*.tar

W10: samples grouped by key, `cls` parsed, batches of 64; count samples.
W10d: W10 plus the JPEG decoded with PIL, converted to float [0, 1] and resized to 64x64
(bilinear), as W5's image work.

Write D4 with `cargo run --release --example workloads -- --generate DIR --only D4`. Each
figure is the median of 3 passes after one untimed warm-up pass (page cache). webdataset 1.0.2,
torch 2.15 when WORKLOADS.md's reference figures were taken.
"""

import glob
import io
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import webdataset as wds
from PIL import Image

BATCH = 64


def parse_cls(sample):
    return int(sample["cls"]), sample["__key__"]


def decode(sample):
    img = Image.open(io.BytesIO(sample["jpg"])).convert("RGB")
    # PIL resizes float images per channel ("F" mode); resizing the u8 image and converting
    # after is PIL's usual (and faster) form, the one a PyTorch user writes.
    small = np.asarray(img.resize((64, 64), Image.BILINEAR), dtype=np.float32) / 255.0
    return small, int(sample["cls"])


def pipeline(urls, image):
    ds = wds.WebDataset(urls, shardshuffle=False, empty_check=False)
    ds = ds.map(decode if image else parse_cls)
    return ds.batched(BATCH)


def count(loader):
    n = 0
    for batch in loader:
        n += len(batch[0]) if isinstance(batch, (list, tuple)) else len(batch)
    return n


def run(name, urls, image, workers):
    ds = pipeline(urls, image)
    if workers:
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
    else:
        loader = ds
    count(loader)  # warm-up: page cache, worker start-up paths
    rates = []
    for _ in range(3):
        t = time.perf_counter()
        n = count(loader)
        rates.append(n / (time.perf_counter() - t))
    print(json.dumps({
        "workload": name,
        "samples": n,
        "samples_per_s": round(statistics.median(rates)),
        "passes": [round(r) for r in rates],
    }), flush=True)


def main():
    d = sys.argv[1]
    urls = sorted(glob.glob(os.path.join(d, "wds", "*.tar")))
    if not urls:
        sys.exit(f"no shards under {d}/wds (write D4 with workloads --generate)")
    only = sys.argv[2].split(",") if len(sys.argv) > 2 else ["W10", "W10d"]
    for workload in only:
        image = workload == "W10d"
        run(f"{workload}/webdataset-2-workers", urls, image, 2)
        run(f"{workload}/webdataset-in-process", urls, image, 0)


if __name__ == "__main__":
    main()
