#!/usr/bin/env python3
# tf.data's W5, to set beside `cargo run --release --example workloads -- --data DIR --only W5`:
#   python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
#   /tmp/tfenv/bin/python scripts/tf_w5.py DIR   (DIR from `workloads --generate DIR`)
# W5 in tf.data (WORKLOADS.md), tuned as TensorFlow's performance guide teaches (AUTOTUNE).
# `--parallel N` sets both maps' num_parallel_calls to N instead (tf.data's AUTOTUNE does not
# always reach two threads within a pass: its passes are bimodal on a 2-core machine).
import os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
args = sys.argv[1:]
parallel = None
if "--parallel" in args:
    i = args.index("--parallel")
    parallel = int(args[i + 1])
    del args[i : i + 2]
d = args[0]
files = [os.path.join(d, "jpeg", f"{i:05d}.jpg") for i in range(2000)]
labels = [int(l) for l in open(os.path.join(d, "jpeg", "labels.txt"))]
def load(path, label):
    img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    img = tf.image.convert_image_dtype(img, tf.float32)
    img = tf.image.resize(img, [64, 64])
    return img, label
def augment(img, label):
    img = tf.image.random_flip_left_right(img)
    img = tf.image.random_brightness(img, 32.0 / 255)
    img = tf.image.random_saturation(img, 0.5, 1.5)
    return tf.clip_by_value(img, 0.0, 1.0), label
AT = tf.data.AUTOTUNE
P = parallel or AT
ds = (tf.data.Dataset.from_tensor_slices((files, labels)).shuffle(2000, seed=5)
      .map(load, num_parallel_calls=P).map(augment, num_parallel_calls=P)
      .batch(32).prefetch(AT))
def drain(ds):
    n = 0
    for x, y in ds:
        n += int(x.shape[0])
    return n
drain(ds.take(4))  # warm up
best = []
for _ in range(3):
    t = time.perf_counter(); n = drain(ds); s = time.perf_counter() - t
    best.append(n / s)
print(f"tf.data W5{'' if parallel is None else f' (num_parallel_calls={parallel})'} images/s:", " ".join(f"{r:.0f}" for r in best), "median", f"{sorted(best)[1]:.0f}")
# One-core decode ceiling.
raw = [open(f, "rb").read() for f in files[:500]]
t = time.perf_counter()
for b in raw:
    tf.io.decode_jpeg(b, channels=3)
print("tf one-core decode/s:", f"{len(raw)/(time.perf_counter()-t):.0f}")
