"""Writes tests/data/tensorflow/image_more.json and its inputs under image_more/.

Run with TensorFlow 2.21 (CPU): `python scripts/tf_image_more.py`. Every expected value is
what TensorFlow computed; the inputs are made here (numpy, seeded) and encoded by TensorFlow.
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "tensorflow")
DIR = os.path.join(ROOT, "image_more")
os.makedirs(DIR, exist_ok=True)
rng = np.random.default_rng(2021)


def floats(a):
    """float32 values as exact Python floats (repr of a float32 widened to float64 is exact)."""
    return [float(v) for v in np.asarray(a, dtype=np.float32).reshape(-1)]


def ints(a):
    return [int(v) for v in np.asarray(a).reshape(-1)]


def smooth(h, w, c, seed):
    y, x = np.mgrid[0:h, 0:w]
    chans = [(x * (37 + 11 * k) + y * (53 + 7 * k) + seed * 29 + k * 80) % 256 for k in range(c)]
    return np.stack(chans, axis=-1).astype(np.uint8)


# ---- inputs -------------------------------------------------------------------------------
files = {}


def write(name, data):
    with open(os.path.join(DIR, name), "wb") as f:
        f.write(data)
    files[name] = data


for (h, w) in [(1, 1), (3, 5), (7, 2)]:
    write(f"rgb_{h}x{w}.png", tf.io.encode_png(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).numpy())
write("gray_3x5.png", tf.io.encode_png(rng.integers(0, 256, (3, 5, 1), dtype=np.uint8)).numpy())
write("gray_alpha_3x5.png", tf.io.encode_png(rng.integers(0, 256, (3, 5, 2), dtype=np.uint8)).numpy())
write("rgba_3x5.png", tf.io.encode_png(rng.integers(0, 256, (3, 5, 4), dtype=np.uint8)).numpy())
write("rgb16_3x5.png", tf.io.encode_png(rng.integers(0, 65536, (3, 5, 3), dtype=np.uint16)).numpy())
write("gray16_2x3.png", tf.io.encode_png(rng.integers(0, 65536, (2, 3, 1), dtype=np.uint16)).numpy())
# JPEGs: smooth content (JPEG's use case), 4:2:0 chroma (TensorFlow's default) and 4:4:4, grey.
write("rgb_16x16_q90.jpg", tf.io.encode_jpeg(smooth(16, 16, 3, 1), quality=90).numpy())
write("rgb_17x9_q75_444.jpg", tf.io.encode_jpeg(smooth(9, 17, 3, 2), quality=75, chroma_downsampling=False).numpy())
write("rgb_7x2_q95.jpg", tf.io.encode_jpeg(smooth(2, 7, 3, 3), quality=95).numpy())
write("rgb_1x1.jpg", tf.io.encode_jpeg(smooth(1, 1, 3, 4)).numpy())
write("gray_8x8.jpg", tf.io.encode_jpeg(smooth(8, 8, 1, 5), quality=85).numpy())
write("rgb_32x24_q50.jpg", tf.io.encode_jpeg(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8), quality=50).numpy())

# ---- decode -------------------------------------------------------------------------------
decode = []
for name, data in files.items():
    fn = tf.io.decode_png if name.endswith(".png") else tf.io.decode_jpeg
    for channels in (0, 1, 3):
        out = fn(data, channels=channels).numpy()
        decode.append({"file": name, "op": fn.__name__, "channels": channels,
                       "shape": list(out.shape), "pixels": ints(out)})
    if name.endswith(".jpg"):
        # TensorFlow's default dct_method ("") is libjpeg's INTEGER_FAST; this is the exact one.
        out = fn(data, channels=3, dct_method="INTEGER_ACCURATE").numpy()
        decode.append({"file": name, "op": fn.__name__, "channels": 3,
                       "dct_method": "INTEGER_ACCURATE", "shape": list(out.shape),
                       "pixels": ints(out)})

# ---- float inputs for the float ops ---------------------------------------------------------
def rgb_png(name):
    return tf.io.decode_png(files[name], channels=3)


arrays = {
    "rgb_3x5": rgb_png("rgb_3x5.png"),
    "rgb_7x2": rgb_png("rgb_7x2.png"),
    "rgb_1x1": rgb_png("rgb_1x1.png"),
    "smooth_16x16": tf.constant(smooth(16, 16, 3, 6)),
    "smooth_5x7": tf.constant(smooth(5, 7, 3, 7)),
}
# Grey-ish and edge pixels for saturation: exact greys, near-greys, black, white, primaries.
edge = np.array([[0, 0, 0], [255, 255, 255], [128, 128, 128], [128, 128, 129], [1, 0, 0],
                 [255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [10, 200, 200],
                 [200, 10, 199], [3, 2, 1]], dtype=np.uint8).reshape(3, 4, 3)
arrays["edge_3x4"] = tf.constant(edge)
inputs = {k: {"shape": list(v.shape), "pixels": ints(v.numpy())} for k, v in arrays.items()}
as_float = {k: tf.image.convert_image_dtype(v, tf.float32) for k, v in arrays.items()}

convert = [{"input": k, "output": floats(v.numpy())} for k, v in as_float.items()]

resize = []
for k, (h, w) in [("rgb_3x5", (7, 2)), ("rgb_3x5", (6, 10)), ("rgb_3x5", (2, 3)),
                  ("rgb_7x2", (3, 5)), ("rgb_7x2", (14, 4)), ("rgb_1x1", (3, 3)),
                  ("smooth_16x16", (8, 8)), ("smooth_16x16", (5, 7)), ("smooth_16x16", (3, 16)),
                  ("smooth_16x16", (11, 13)), ("smooth_5x7", (16, 16)), ("smooth_5x7", (9, 12))]:
    for method in ("bilinear", "nearest", "area"):
        out_f = tf.image.resize(as_float[k], (h, w), method=method, antialias=False)
        out_u = tf.image.resize(arrays[k], (h, w), method=method, antialias=False)
        resize.append({"input": k, "size": [h, w], "method": method,
                       "float_output": floats(out_f.numpy()),
                       "uint8_input_output": floats(out_u.numpy())})

flip = [{"input": k, "left_right": ints(tf.image.flip_left_right(v).numpy()),
         "up_down": ints(tf.image.flip_up_down(v).numpy())} for k, v in arrays.items()]

brightness = []
for k in ("rgb_3x5", "edge_3x4"):
    for delta in (0.125, -0.3, 32.0 / 255.0, 0.7):
        brightness.append({"input": k, "delta": float(np.float32(delta)),
                           "output": floats(tf.image.adjust_brightness(as_float[k], delta).numpy())})

saturation = []
for k in ("rgb_3x5", "edge_3x4", "smooth_5x7"):
    for factor in (0.0, 0.5, 1.0, 1.7, 3.0):
        saturation.append({"input": k, "factor": float(np.float32(factor)),
                           "output": floats(tf.image.adjust_saturation(as_float[k], factor).numpy())})
# Out-of-range values (brightness runs before the clip in the usual pipeline).
for delta in (0.3, -0.3):
    x = tf.image.adjust_brightness(as_float["edge_3x4"], delta)
    for factor in (0.5, 2.0):
        saturation.append({"input": "edge_3x4", "brightness_first": float(np.float32(delta)),
                           "factor": float(np.float32(factor)),
                           "output": floats(tf.image.adjust_saturation(x, factor).numpy())})

clip = []
for delta in (0.3, -0.3):
    x = tf.image.adjust_brightness(as_float["edge_3x4"], delta)
    for lo, hi in ((0.0, 1.0), (0.25, 0.5)):
        clip.append({"input": "edge_3x4", "brightness_first": float(np.float32(delta)),
                     "min": lo, "max": hi,
                     "output": floats(tf.clip_by_value(x, lo, hi).numpy())})

# float -> uint8 with saturate (tf.image.convert_image_dtype(x, tf.uint8, saturate=True)).
to_uint8 = []
for delta in (0.0, 0.3, -0.3):
    x = tf.image.adjust_brightness(as_float["edge_3x4"], delta)
    to_uint8.append({"input": "edge_3x4", "brightness_first": float(np.float32(delta)),
                     "output": ints(tf.image.convert_image_dtype(x, tf.uint8, saturate=True).numpy())})

out = {"tensorflow": tf.__version__, "inputs": inputs, "decode": decode, "convert": convert,
       "convert_to_uint8": to_uint8, "resize": resize, "flip": flip, "brightness": brightness,
       "saturation": saturation, "clip": clip}
with open(os.path.join(ROOT, "image_more.json"), "w") as f:
    json.dump(out, f, separators=(",", ":"))
print({k: len(v) for k, v in out.items() if isinstance(v, list)})
