#!/usr/bin/env python3
# tf.data's W5r, to set beside `cargo run --release --example workloads -- --data DIR --only W5r`:
#   python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
#   /tmp/tfenv/bin/python scripts/tf_w5r.py DIR [N]   (DIR from `workloads --generate DIR`;
#   N: how many of D2's files, default 2000)
# W5 with the JPEG decoded at 1/4 scale straight to 64x64 (decode_jpeg(ratio=4)), no resize;
# tuned as TensorFlow's performance guide teaches (AUTOTUNE).
import os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
d = sys.argv[1]
labels = [int(l) for l in open(os.path.join(d, "jpeg", "labels.txt"))]
n = int(sys.argv[2]) if len(sys.argv) > 2 else len(labels)
files = [os.path.join(d, "jpeg", f"{i:05d}.jpg") for i in range(n)]
labels = labels[:n]
def load(path, label):
    img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3, ratio=4)
    return tf.image.convert_image_dtype(img, tf.float32), label
def augment(img, label):
    img = tf.image.random_flip_left_right(img)
    img = tf.image.random_brightness(img, 32.0 / 255)
    img = tf.image.random_saturation(img, 0.5, 1.5)
    return tf.clip_by_value(img, 0.0, 1.0), label
AT = tf.data.AUTOTUNE
ds = (tf.data.Dataset.from_tensor_slices((files, labels)).shuffle(2000, seed=5)
      .map(load, num_parallel_calls=AT).map(augment, num_parallel_calls=AT)
      .batch(32).prefetch(AT))
def drain(ds):
    n = 0
    for x, y in ds:
        n += int(x.shape[0])
    return n
drain(ds.take(4))  # warm up
rates = []
for _ in range(3):
    t = time.perf_counter(); k = drain(ds); s = time.perf_counter() - t
    rates.append(k / s)
print("tf.data W5r images/s:", " ".join(f"{r:.0f}" for r in rates), "median", f"{sorted(rates)[1]:.0f}")
# One-core decode rates (no file reads): full and 1/4.
raw = [open(f, "rb").read() for f in files[:500]]
for ratio in (1, 4):
    t = time.perf_counter()
    for b in raw:
        tf.io.decode_jpeg(b, channels=3, ratio=ratio)
    print(f"tf one-core decode ratio={ratio}/s:", f"{len(raw)/(time.perf_counter()-t):.0f}")
