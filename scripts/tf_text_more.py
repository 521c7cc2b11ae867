#!/usr/bin/env python3
# Ground truth for streamload's text ops (src/text.rs, StringList::split*), from real TensorFlow:
# runs tf.strings.split, tf.lookup.StaticVocabularyTable (KeyValueTensorInitializer and
# TextFileInitializer), tf.strings.to_hash_bucket_fast and tf.keras.layers.StringLookup on the
# inputs below and writes what TensorFlow returned or raised to
# tests/data/tensorflow/text_more.json. Nothing in the JSON is written by hand.
#   python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
#   /tmp/tfenv/bin/python scripts/tf_text_more.py
import base64, json, os, tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tensorflow"))
OUT = os.path.join(ROOT, "text_more.json")


def b64(b):
    return base64.b64encode(bytes(b)).decode()


def error(e):
    return {"class": type(e).__name__, "message": str(e).split("[Op:")[0].split("}} ")[-1].strip()}


TEXTS = [
    b"", b" ", b"   ", b"\t\n\r\x0b\x0c ", b"a", b" a", b"a ", b"  the  quick\tbrown\nfox  ",
    b"a\x0bb", b"a\x0cb", b"a\rb", b"a\r\nb", b"\ta\t\tb\t", b"a,b", b",", b",,", b"a,,b,",
    b",a", b"x y,z", b"caf\xc3\xa9 na\xc3\xafve", b"\xff\xfe a \x80", b"a\x00b c",
    b"a\xc2\xa0b", b"a\xe3\x80\x80b", b"a\x1cb\x1fc", b"a\x85b", b"one  two   three",
]
SEPS = [None, " ", ",", "\t", "\x00", ", ", "ab"]


def splits():
    cases = []
    for sep in SEPS:
        for text in TEXTS:
            if sep is not None and sep.encode() == b"\x00":
                text = text.replace(b" ", b"\x00")
            out = tf.strings.split(tf.constant([text]), sep=sep).to_list()[0]
            cases.append({"text_b64": b64(text), "sep_b64": None if sep is None else b64(sep.encode()),
                          "words_b64": [b64(w) for w in out]})
    return cases


VOCAB = [b"the", b"cat", b"sat", b"caf\xc3\xa9", b"\xff\xfe", b"a b", b"x\ty", b"THE", b"1"]
PROBES = [b"the", b"cat", b"sat", b"caf\xc3\xa9", b"\xff\xfe", b"a b", b"x\ty", b"THE", b"1", b"",
          b" ", b"dog", b"The", b"cafe", b"\xff", b"\x00", b"the ", b"\xf0\x9f\x98\x80", b"2",
          b"Hello", b"TensorFlow", b"2.x", b"a\x00b", b"x" * 300]


def kv_table(keys, buckets):
    init = tf.lookup.KeyValueTensorInitializer(tf.constant(keys, tf.string),
                                               tf.range(len(keys), dtype=tf.int64))
    return tf.lookup.StaticVocabularyTable(init, buckets)


def lookups():
    cases = []
    for keys in [VOCAB, [], [b"only"], VOCAB + [b""]]:
        for buckets in [1, 3, 100]:
            hashed = tf.strings.to_hash_bucket_fast(tf.constant(PROBES, tf.string), buckets).numpy().tolist()
            case = {"initializer": "KeyValueTensorInitializer", "vocab_b64": [b64(k) for k in keys],
                    "num_oov_buckets": buckets, "tokens_b64": [b64(p) for p in PROBES],
                    "to_hash_bucket_fast": hashed}
            try:
                table = kv_table(keys, buckets)
                case["ids"] = table.lookup(tf.constant(PROBES, tf.string)).numpy().tolist()
                case["size"] = int(table.size().numpy())
            except Exception as e:  # noqa: BLE001 -- TensorFlow's error is the expected output
                case["error"] = error(e)
            cases.append(case)
    return cases


def files():
    cases = []
    contents = [
        b"the\ncat\nsat\n", b"the\r\ncat\r\nsat", b"the\ncat\nsat", b"a\rb\nc\n", b"x\ty\na b\n",
        b"caf\xc3\xa9\n\xff\xfe\n", b"the\n\ncat\n", b"\n", b"the\ncat\nthe\n", b"", b" \nthe\n",
        b"the\n\n", b"the\ncat\r", b"a\r\r\nb\n", b"x\n\r\ny\n", b"\ra\n", b"p\rq\r\n", b"the\n\r",
        b"the\ncat\nsat\ncat\n",
    ]
    with tempfile.TemporaryDirectory() as d:
        for i, content in enumerate(contents):
            # A new name per file: TensorFlow shares a table initialised from the same path.
            path = os.path.join(d, f"vocab{i}.txt")
            with open(path, "wb") as f:
                f.write(content)
            case = {"initializer": "TextFileInitializer", "file_b64": b64(content), "num_oov_buckets": 3,
                    "tokens_b64": [b64(p) for p in PROBES + [b"a\rb", b"ab", b"c", b"x", b"y", b"a", b"a\r", b"b",
                                                         b"\ra", b"p\rq", b"pq", b"cat\r", b"\r", b"the\r"]]}
            try:
                init = tf.lookup.TextFileInitializer(path, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
                                                     tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER)
                table = tf.lookup.StaticVocabularyTable(init, 3)
                case["ids"] = table.lookup(tf.constant([base64.b64decode(t) for t in case["tokens_b64"]])).numpy().tolist()
                case["size"] = int(table.size().numpy())
            except Exception as e:  # noqa: BLE001 -- TensorFlow's error is the expected output
                case["error"] = error(e).copy()
                case["error"]["message"] = case["error"]["message"].replace(path, "{file}")
            cases.append(case)
    return cases


def duplicates():
    cases = []
    for keys in [[b"a", b"b", b"a"], [b"x", b"x"]]:
        case = {"vocab_b64": [b64(k) for k in keys]}
        try:
            kv_table(keys, 1).lookup(tf.constant([b"a"])).numpy()
            case["static_vocabulary_table"] = "ok"
        except Exception as e:  # noqa: BLE001
            case["static_vocabulary_table"] = error(e)
        try:
            tf.keras.layers.StringLookup(vocabulary=[k.decode() for k in keys])
            case["string_lookup"] = "ok"
        except Exception as e:  # noqa: BLE001
            case["string_lookup"] = error(e)
        cases.append(case)
    return cases


def string_lookup():
    # StringLookup(mask_token="", num_oov_indices=k): id 0 is the mask token, 1..=k the OOV
    # indices (to_hash_bucket_fast(token, k) + 1), then the vocabulary.
    cases = []
    vocab = ["the", "cat", "sat"]
    probes = ["the", "cat", "sat", "", "dog", "The", "Hello", "TensorFlow", "2.x", "caf\u00e9"]
    for k in [1, 3, 100]:
        layer = tf.keras.layers.StringLookup(vocabulary=vocab, mask_token="", num_oov_indices=k)
        cases.append({"vocab": vocab, "mask_token": "", "num_oov_indices": k, "tokens": probes,
                      "ids": layer(tf.constant(probes)).numpy().tolist(),
                      "vocabulary_size": int(layer.vocabulary_size()),
                      "get_vocabulary": layer.get_vocabulary()})
    return cases


out = {
    "tensorflow": tf.__version__,
    "split": splits(),
    "lookup": lookups(),
    "text_file": files(),
    "duplicates": duplicates(),
    "string_lookup": string_lookup(),
}
with open(OUT, "w") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
    f.write("\n")
print("wrote", OUT)
