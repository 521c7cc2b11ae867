#!/usr/bin/env python3
# tf.data's W5b, to set beside `cargo run --release --example workloads -- --data DIR --only W5b`:
#   python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
#   /tmp/tfenv/bin/python scripts/tf_w5b.py DIR [N]   (DIR from `workloads --generate DIR`
#   with D6; N: how many of D6's files, default all)
# TensorFlow's official ResNet preprocessing (tensorflow/models, imagenet_preprocessing.py:
# extract_jpeg_shape, sample_distorted_bounding_box, decode_and_crop_jpeg, random flip, resize
# bilinear) with WORKLOADS.md's W5b settings (area 0.08..1, aspect 3/4..4/3, 10 attempts) and
# normalisation by ImageNet's mean and std, tuned with AUTOTUNE.
import os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
d = sys.argv[1]
labels = [int(l) for l in open(os.path.join(d, "imagenet", "labels.txt"))]
n = int(sys.argv[2]) if len(sys.argv) > 2 else len(labels)
files = [os.path.join(d, "imagenet", f"{i:05d}.jpg") for i in range(n)]
labels = labels[:n]
MEAN = tf.constant([0.485, 0.456, 0.406]) * 255.0
STD = tf.constant([0.229, 0.224, 0.225]) * 255.0
WHOLE = tf.constant([0.0, 0.0, 1.0, 1.0], dtype=tf.float32, shape=[1, 1, 4])
def train(path, label):
    buf = tf.io.read_file(path)
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        tf.image.extract_jpeg_shape(buf), bounding_boxes=WHOLE, min_object_covered=0.1,
        aspect_ratio_range=[3 / 4, 4 / 3], area_range=[0.08, 1.0], max_attempts=10,
        use_image_if_no_bounding_boxes=True)
    y, x, _ = tf.unstack(begin)
    h, w, _ = tf.unstack(size)
    img = tf.image.decode_and_crop_jpeg(buf, tf.stack([y, x, h, w]), channels=3)
    img = tf.image.random_flip_left_right(img)
    img = tf.image.resize(img, [224, 224])  # bilinear, float32
    return (img - MEAN) / STD, label
AT = tf.data.AUTOTUNE
ds = (tf.data.Dataset.from_tensor_slices((files, labels)).shuffle(1000, seed=5)
      .map(train, num_parallel_calls=AT).batch(64).prefetch(AT))
def drain(ds):
    n = 0
    for x, y in ds:
        n += int(x.shape[0])
    return n
drain(ds.take(2))  # warm up
rates = []
for _ in range(3):
    t = time.perf_counter(); k = drain(ds); s = time.perf_counter() - t
    rates.append(k / s)
print("tf.data W5b images/s:", " ".join(f"{r:.0f}" for r in rates), "median", f"{sorted(rates)[1]:.0f}")
# One-core decode rates (no file reads): full, centre crop of half the area, 1/2, 1/4.
raw = [open(f, "rb").read() for f in files[:300]]
def rate(f):
    t = time.perf_counter()
    for b in raw:
        f(b)
    return len(raw) / (time.perf_counter() - t)
def crop(b):
    h, w, _ = tf.unstack(tf.image.extract_jpeg_shape(b))
    ch, cw = h * 7 // 10, w * 7 // 10
    return tf.io.decode_and_crop_jpeg(b, tf.stack([(h - ch) // 2, (w - cw) // 2, ch, cw]), channels=3)
print("tf one-core decode/s: full", f"{rate(lambda b: tf.io.decode_jpeg(b, channels=3)):.0f}",
      "crop", f"{rate(crop):.0f}",
      "1/2", f"{rate(lambda b: tf.io.decode_jpeg(b, channels=3, ratio=2)):.0f}",
      "1/4", f"{rate(lambda b: tf.io.decode_jpeg(b, channels=3, ratio=4)):.0f}")
