#!/usr/bin/env python3
# Ground truth for streamload's tf.train.SequenceExample decoding, from real TensorFlow: writes
# tests/data/tensorflow/sequence_examples.tfrecord (SequenceExamples serialized by TensorFlow's
# protobuf, written by tf.io.TFRecordWriter) and sequence_examples.expected.json (what
# TensorFlow's own proto parser reads back from each record). Nothing in the JSON is written by
# hand.
#   python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
#   /tmp/tfenv/bin/python scripts/tf_sequence_example.py
import base64, json, math, os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

ROOT = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tensorflow")
)
RECORDS = os.path.join(ROOT, "sequence_examples.tfrecord")
OUT = os.path.join(ROOT, "sequence_examples.expected.json")


def feature(kind, values):
    if kind == "bytes":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Feature()  # no list set


def sequence_example(context, lists):
    ex = tf.train.SequenceExample()
    for name, (kind, values) in context.items():
        ex.context.feature[name].CopyFrom(feature(kind, values))
    for name, steps in lists.items():
        fl = ex.feature_lists.feature_list[name]
        for kind, values in steps:
            fl.feature.add().CopyFrom(feature(kind, values))
    return ex


CASES = [
    # A sentence: context (id, length), tokens and labels per step.
    sequence_example(
        {"id": ("bytes", [b"sent-0"]), "length": ("int64", [3])},
        {
            "tokens": [("bytes", [b"the"]), ("bytes", [b"cat"]), ("bytes", [b"sat"])],
            "labels": [("int64", [0]), ("int64", [1]), ("int64", [2])],
        },
    ),
    # Steps of different lengths, floats, an empty step, negative and large ints.
    sequence_example(
        {"weights": ("float", [0.5, -1.25, 3.0e38]), "big": ("int64", [-(2**63), 2**63 - 1])},
        {
            "frames": [("float", [1.0, 2.0]), ("float", []), ("float", [0.125] * 5)],
            "ids": [("int64", [1, 2, 3]), ("int64", [-7])],
        },
    ),
    # Only feature lists; a feature with no list set; non-ASCII keys and bytes.
    sequence_example(
        {},
        {
            "mot_é": [("bytes", ["héllo".encode(), b"\x00\xff"])],
            "unset": [("none", None), ("int64", [4])],
            "empty_list": [],
        },
    ),
    # Only context.
    sequence_example({"label": ("int64", [9])}, {}),
    # Nothing at all.
    tf.train.SequenceExample(),
]


def enc_bytes(b):
    return base64.b64encode(bytes(b)).decode()


def enc_float(x):
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    return x


def decode_feature(f):
    kind = f.WhichOneof("kind")
    if kind is None:
        return {"kind": None, "values": []}
    if kind == "bytes_list":
        return {"kind": kind, "values": [enc_bytes(v) for v in f.bytes_list.value]}
    if kind == "float_list":
        return {"kind": kind, "values": [enc_float(v) for v in f.float_list.value]}
    return {"kind": kind, "values": [int(v) for v in f.int64_list.value]}


def main():
    with tf.io.TFRecordWriter(RECORDS) as w:
        for ex in CASES:
            w.write(ex.SerializeToString())
    expected = []
    for raw in tf.data.TFRecordDataset(RECORDS).as_numpy_iterator():
        ex = tf.train.SequenceExample.FromString(raw)
        expected.append(
            {
                "has_context": ex.HasField("context"),
                "has_feature_lists": ex.HasField("feature_lists"),
                "context": {k: decode_feature(v) for k, v in ex.context.feature.items()},
                "feature_lists": {
                    k: [decode_feature(f) for f in v.feature]
                    for k, v in ex.feature_lists.feature_list.items()
                },
            }
        )
    with open(OUT, "w") as f:
        json.dump({"tf_version": tf.__version__, "records": expected}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(expected)} records -> {RECORDS}, {OUT}")


if __name__ == "__main__":
    main()
