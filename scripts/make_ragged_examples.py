#!/usr/bin/env python3
# Ground truth for streamload's tf.io.RaggedFeature parsing, from real TensorFlow: writes
# tests/data/tensorflow/ragged_examples.tfrecord (tf.train.Examples serialized by TensorFlow's
# protobuf, written by tf.io.TFRecordWriter) and ragged_examples.expected.json: what
# tf.io.parse_single_example (each record) and tf.io.parse_example (the batch of all records)
# return under a spec of RaggedFeatures (values and row_splits), and edge cases (each with its
# serialized records, spec and TensorFlow's output or error). Nothing in the JSON is written by
# hand.
#   python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
#   /tmp/tfenv/bin/python scripts/make_ragged_examples.py
#
# Encodings (as examples.expected.json): int64 exact; floats widened exactly, or "NaN",
# "Infinity", "-Infinity"; strings as UTF-8 text, or {"b64": ...} when not valid UTF-8.
import base64, json, math, os, re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

ROOT = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tensorflow")
)
RECORDS = os.path.join(ROOT, "ragged_examples.tfrecord")
OUT = os.path.join(ROOT, "ragged_examples.expected.json")

NONE = object()  # a Feature with no list set


def feature(values, kind):
    if values is NONE:
        return tf.train.Feature()
    if kind == "bytes":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


KINDS = {"ints": "int64", "floats": "float", "tokens": "bytes", "other_ids": "int64"}


def example(**features):
    ex = tf.train.Example()
    for name, values in features.items():
        ex.features.feature[name].CopyFrom(feature(values, KINDS[name]))
    return ex.SerializeToString()


RECORDS_LIST = [
    example(ints=[1, 2, 3], floats=[0.5, -1.25], tokens=[b"a", b"bc"], other_ids=[10]),
    example(ints=[], floats=[], tokens=[], other_ids=[]),  # empty lists
    example(),  # every feature missing
    example(ints=[-(2**63), 2**63 - 1, 0], tokens=[b"", "\u00e9t\u00e9".encode(), b"\xff\x00"]),
    example(ints=NONE, floats=NONE, tokens=NONE, other_ids=NONE),  # no list set
    example(floats=[float("nan"), -0.0, float("inf"), float("-inf"), 1e-45, 3.4e38]),
    example(ints=[7], other_ids=list(range(12))),
    example(tokens=[b"x"] * 5, other_ids=[-1, -2]),
]

SPEC_JSON = {
    "ints": {"class": "RaggedFeature", "dtype": "int64", "value_key": None},
    "floats": {"class": "RaggedFeature", "dtype": "float32", "value_key": None},
    "tokens": {"class": "RaggedFeature", "dtype": "string", "value_key": None},
    "ids": {"class": "RaggedFeature", "dtype": "int64", "value_key": "other_ids"},
}

DTYPES = {"int64": tf.int64, "int32": tf.int32, "float32": tf.float32, "string": tf.string}


def make_spec(spec_json):
    out = {}
    for name, f in spec_json.items():
        dtype = DTYPES[f["dtype"]]
        if f["class"] == "RaggedFeature":
            out[name] = tf.io.RaggedFeature(
                dtype,
                value_key=f.get("value_key"),
                row_splits_dtype=DTYPES[f.get("row_splits_dtype", "int32")],
            )
        elif f["class"] == "VarLenFeature":
            out[name] = tf.io.VarLenFeature(dtype)
        elif f["class"] == "FixedLenFeature":
            out[name] = tf.io.FixedLenFeature(f["shape"], dtype, default_value=f.get("default_value"))
        else:
            raise ValueError(f["class"])
    return out


def value(x):
    if isinstance(x, bytes):
        try:
            return x.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(x).decode()}
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return x
    return int(x)


def values(t):
    return [value(x) for x in t.numpy().reshape(-1).tolist()]


def output(t):
    if isinstance(t, tf.RaggedTensor):
        assert t.ragged_rank == 1, t
        return {
            "type": "RaggedTensor",
            "dtype": t.dtype.name,
            "values": values(t.values),
            "row_splits": [int(s) for s in t.row_splits.numpy()],
            "row_splits_dtype": t.row_splits.dtype.name,
        }
    if isinstance(t, tf.SparseTensor):
        return {
            "type": "SparseTensor",
            "dtype": t.dtype.name,
            "indices": t.indices.numpy().tolist(),
            "values": values(t.values),
            "dense_shape": t.dense_shape.numpy().tolist(),
        }
    return {"type": "Tensor", "dtype": t.dtype.name, "shape": list(t.shape), "values": values(t)}


def error(e):
    message = str(e)
    core = re.sub(r"^\{\{function_node [^}]*\}\} ", "", message)
    core = re.sub(r" \[Op:[A-Za-z0-9]+\]( name: )?$", "", core).strip()
    return {"class": type(e).__name__, "message": message, "core_message": core}


def run(records, spec_json, batched):
    try:
        spec = make_spec(spec_json)
        if batched:
            got = tf.io.parse_example(tf.constant(records, dtype=tf.string), spec)
        else:
            (record,) = records
            got = tf.io.parse_single_example(tf.constant(record), spec)
        return {"ok": True, "output": {k: output(v) for k, v in sorted(got.items())}}
    except (tf.errors.OpError, ValueError, TypeError) as e:
        return {"ok": False, "error": error(e)}


def b64(record):
    return base64.b64encode(record).decode()


def case(name, description, records, spec_json, batched):
    return {
        "name": name,
        "description": description,
        "serialized_b64": [b64(r) for r in records],
        "spec": spec_json,
        "batched": batched,
        **run(records, spec_json, batched),
    }


def main():
    with tf.io.TFRecordWriter(RECORDS) as w:
        for r in RECORDS_LIST:
            w.write(r)
    # What TensorFlow reads back from the file (the same bytes).
    read = [r.numpy() for r in tf.data.TFRecordDataset(RECORDS)]
    assert read == RECORDS_LIST

    singles = []
    for i, r in enumerate(RECORDS_LIST):
        result = run([r], SPEC_JSON, batched=False)
        assert result["ok"], result
        singles.append({"index": i, "serialized_b64": b64(r), "parse_single_example": result["output"]})
    batch = run(RECORDS_LIST, SPEC_JSON, batched=True)
    assert batch["ok"], batch

    floats_record = example(floats=[1.0, 2.0])
    ints_record = example(ints=[1, 2])
    # Two map entries for "ints": a list, then a Feature with no list set (two Examples
    # concatenated merge their maps; TensorFlow's fast parser sees both entries).
    kindless_last = ints_record + example(ints=NONE)
    ints = {"ints": SPEC_JSON["ints"]}
    cases = [
        case("type_mismatch_single", "a float list parsed as an int64 RaggedFeature, alone",
             [floats_record], {"floats": {"class": "RaggedFeature", "dtype": "int64", "value_key": None}}, False),
        case("type_mismatch_batch", "the same in a batch, in record 2",
             [example(), ints_record, floats_record, floats_record],
             {"floats": {"class": "RaggedFeature", "dtype": "int64", "value_key": None}}, True),
        case("value_key_type_mismatch_batch", "value_key names a feature of another type",
             [example(tokens=[b"a"])],
             {"t": {"class": "RaggedFeature", "dtype": "float32", "value_key": "tokens"}}, True),
        case("kindless_last_entry_single", "a list, then an entry with no list, alone",
             [kindless_last], ints, False),
        case("kindless_last_entry_batch", "a list, then an entry with no list, in a batch",
             [kindless_last, ints_record], ints, True),
        case("empty_batch", "a batch of no records", [], ints, True),
        case("one_record_batch", "a batch of one record", [ints_record], ints, True),
        case("mixed_spec_single", "RaggedFeature beside FixedLenFeature and VarLenFeature, alone",
             [RECORDS_LIST[0]],
             {
                 "ints": SPEC_JSON["ints"],
                 "tokens": {"class": "VarLenFeature", "dtype": "string"},
                 "other_ids": {"class": "FixedLenFeature", "dtype": "int64", "shape": [], "default_value": -1},
                 "f": {"class": "RaggedFeature", "dtype": "float32", "value_key": "floats"},
             }, False),
        case("mixed_spec_batch_2", "the same, batched",
             [RECORDS_LIST[2], RECORDS_LIST[6], RECORDS_LIST[0]],
             {
                 "ints": SPEC_JSON["ints"],
                 "tokens": {"class": "VarLenFeature", "dtype": "string"},
                 "f": {"class": "RaggedFeature", "dtype": "float32", "value_key": "floats"},
             }, True),
        case("row_splits_int64", "row_splits_dtype=tf.int64 (TensorFlow's default is int32)",
             RECORDS_LIST[:4],
             {"ints": {**SPEC_JSON["ints"], "row_splits_dtype": "int64"}}, True),
        case("value_key_shared_with_varlen", "a RaggedFeature's value_key is a VarLenFeature's key",
             [RECORDS_LIST[0]],
             {"ints": {"class": "VarLenFeature", "dtype": "int64"},
              "r": {"class": "RaggedFeature", "dtype": "int64", "value_key": "ints"}}, True),
        case("value_key_shared_by_two_ragged", "two RaggedFeatures read one key",
             [RECORDS_LIST[0]],
             {"a": {"class": "RaggedFeature", "dtype": "int64", "value_key": "ints"},
              "b": {"class": "RaggedFeature", "dtype": "int64", "value_key": "ints"}}, True),
    ]

    out = {
        "tf_version": tf.__version__,
        "file": "ragged_examples.tfrecord",
        "encoding": "int64 exact; floats widened exactly or NaN/Infinity/-Infinity; strings UTF-8 or {b64}",
        "spec": SPEC_JSON,
        "records": singles,
        "parse_example_batch": batch["output"],
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {RECORDS} ({len(RECORDS_LIST)} records) and {OUT}")


if __name__ == "__main__":
    main()
