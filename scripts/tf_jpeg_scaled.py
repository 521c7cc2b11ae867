#!/usr/bin/env python3
# TensorFlow's scaled and cropped JPEG decoding of tests/data/images/*.jpg, for
# tests/image_hostile.rs (`scaled_and_cropped_decoding_matches_tensorflow`):
#   /work/venv/bin/python scripts/tf_jpeg_scaled.py > tests/data/tensorflow/jpeg_scaled.json
# tf.io.decode_jpeg(channels=3, ratio=r) for r in 1, 2, 4, 8, and
# tf.io.decode_and_crop_jpeg(crop_window=[5, 3, 10, 9], channels=3); pixels flattened (HWC).
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf

out = {"tensorflow": tf.__version__}
for name in ["baseline.jpg", "progressive.jpg", "cmyk.jpg", "grey.jpg"]:
    b = open(os.path.join(os.path.dirname(__file__), "..", "tests", "data", "images", name), "rb").read()
    for r in [1, 2, 4, 8]:
        img = tf.io.decode_jpeg(b, channels=3, ratio=r).numpy()
        out[f"{name}/ratio{r}"] = {"shape": list(img.shape), "pixels": img.flatten().tolist()}
    img = tf.io.decode_and_crop_jpeg(b, [5, 3, 10, 9], channels=3).numpy()
    out[f"{name}/crop"] = {"shape": list(img.shape), "pixels": img.flatten().tolist()}
json.dump(out, sys.stdout, separators=(",", ":"))
