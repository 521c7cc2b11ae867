"""Trains a small torch model for real on TFRecord shards read by streamload, saving the
model, the optimizer and the input pipeline's position together, and resuming exactly
after a kill.

    python python/examples/train_torch.py                 # trains 300 steps
    python python/examples/train_torch.py --kill-at 120   # dies at step 120 (no goodbye)
    python python/examples/train_torch.py                 # goes on from the last save

The shards (linear-regression data as tf.train.Examples: "x" 8 floats, "y" one float) are
written on the first run, by the small TFRecord writer below (TensorFlow's framing:
length, masked CRC32C of the length, data, masked CRC32C of the data).
"""

import argparse
import os
import pathlib
import struct
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader

import streamload as sl
from streamload.torch import IterableDataset

FEATURES = 8
TRUE_W = np.linspace(-1.0, 1.0, FEATURES).astype(np.float32)
TRUE_B = 0.5

# ---- writing TFRecord shards of tf.train.Examples, in plain Python ----------------------

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:  # a length-delimited protobuf field
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _example(features: dict) -> bytes:
    """A tf.train.Example of float features (packed FloatLists)."""
    entries = b""
    for name, values in sorted(features.items()):
        floats = struct.pack(f"<{len(values)}f", *values)
        feature = _field(2, _field(1, floats))  # Feature.float_list.value (packed)
        entries += _field(1, _field(1, name.encode()) + _field(2, feature))
    return _field(1, entries)  # Example.features


def write_shards(directory: pathlib.Path, shards: int = 4, per_shard: int = 2000) -> list:
    rng = np.random.default_rng(0)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(shards):
        path = directory / f"train-{s:02d}-of-{shards:02d}.tfrecord"
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            with open(tmp, "wb") as f:
                for _ in range(per_shard):
                    x = rng.normal(size=FEATURES).astype(np.float32)
                    y = float(x @ TRUE_W + TRUE_B + rng.normal(scale=0.01))
                    record = _example({"x": x.tolist(), "y": [y]})
                    length = struct.pack("<Q", len(record))
                    f.write(length + struct.pack("<I", _masked_crc(length)))
                    f.write(record + struct.pack("<I", _masked_crc(record)))
            tmp.rename(path)
        paths.append(str(path))
    return paths


# ---- training ------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="train_torch_data", help="where the shards are")
    parser.add_argument("--checkpoint", default=None, help="default: DATA/checkpoint.pt")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--save-every", type=int, default=50)
    parser.add_argument("--kill-at", type=int, default=None, help="die at this step")
    parser.add_argument("--log", default=None, help="append 'step label-sum' lines here")
    args = parser.parse_args(argv)

    data = pathlib.Path(args.data)
    files = write_shards(data)
    checkpoint = pathlib.Path(args.checkpoint or data / "checkpoint.pt")

    spec = {
        "x": sl.FixedLenFeature([FEATURES], sl.float32),
        "y": sl.FixedLenFeature([1], sl.float32),
    }
    pipeline = (
        sl.TFRecordDataset(files, num_parallel_reads=4)
        .shuffle(4096, seed=7)
        .repeat()
        .batch(64, drop_remainder=True)
        .parse_example(spec)
        .prefetch(2)
    )
    source = IterableDataset(pipeline)
    loader = DataLoader(source, batch_size=None)

    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    step = 0
    if checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        source.load_state_dict(saved["data"])
        step = saved["step"]
        print(f"resumed at step {step}", flush=True)

    log = open(args.log, "a") if args.log else None
    loss = None
    for batch in loader:
        if step >= args.steps:
            break
        if args.kill_at is not None and step == args.kill_at:
            print(f"killed at step {step}", flush=True)
            os._exit(137)  # as a SIGKILL would: nothing saved, nothing flushed
        prediction = model(batch["x"])
        loss = torch.nn.functional.mse_loss(prediction, batch["y"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if log:
            log.write(f"{step} {float(batch['y'].sum()):.6f}\n")
            log.flush()
        if step % args.save_every == 0 or step == args.steps:
            tmp = checkpoint.with_suffix(".tmp")
            torch.save(
                {
                    "step": step,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "data": source.state_dict(),
                },
                tmp,
            )
            os.replace(tmp, checkpoint)
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.5f}", flush=True)

    w = model.weight.detach().numpy().ravel()
    error = float(np.abs(w - TRUE_W).max())
    print(f"done at step {step}: loss {loss.item() if loss is not None else float('nan'):.5f}, "
          f"largest weight error {error:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
