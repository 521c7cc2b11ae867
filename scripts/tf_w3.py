#!/usr/bin/env python3
# tf.data's W3, to set beside `workloads --data DIR --only W3` and
# `scripts/py_workloads.py DIR --only W3`:
#   python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
#   /tmp/tfenv/bin/python scripts/tf_w3.py DIR
# Two forms: WORKLOADS.md's (parse each record in a parallel map, then batch) and tf.data's
# best (batch, then one vectorised parse_example), both tuned with AUTOTUNE and reading 4
# files at once, nondeterministic. Prints records/s of 3 passes after an untimed one, and
# the median, as JSON lines.
import glob, json, os, statistics, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

d = sys.argv[1]
files = sorted(glob.glob(os.path.join(d, "tfrecord", "*.tfrecord")))
spec = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
    "weights": tf.io.FixedLenFeature([16], tf.float32),
}
AT = tf.data.AUTOTUNE
options = tf.data.Options()
options.deterministic = False
read = tf.data.TFRecordDataset(files, num_parallel_reads=4).with_options(options)
forms = {
    "per-record": read.shuffle(10_000).map(lambda r: tf.io.parse_single_example(r, spec),
                                           num_parallel_calls=AT).batch(256).prefetch(AT),
    "best": read.shuffle(10_000).batch(256).map(lambda r: tf.io.parse_example(r, spec),
                                                num_parallel_calls=AT).prefetch(AT),
}


def count(ds):
    n = 0
    for batch in ds:
        n += int(batch["label"].shape[0])
    return n


for name, ds in forms.items():
    count(ds)
    rates = []
    for _ in range(3):
        t = time.perf_counter()
        n = count(ds)
        rates.append(n / (time.perf_counter() - t))
    print(json.dumps({"system": "tf.data", "workload": f"W3/{name}",
                      "figure": round(statistics.median(rates), 1), "unit": "records/s",
                      "passes": [round(r, 1) for r in rates]}), flush=True)
