"""The built-in transforms (streamload.image, streamload.text) against TensorFlow's outputs
(tests/data/tensorflow/image_more.json, text_more.json), in pipelines and on batches."""

import base64
import json
import threading

import numpy as np
import pytest

import streamload as sl
from conftest import REPO_DATA, TF_DATA, tf_json

IMAGES = tf_json("image_more.json")
INPUTS = {
    name: np.array(v["pixels"], np.uint8).reshape(v["shape"]) for name, v in IMAGES["inputs"].items()
}


def run(transform, element):
    """One element through a pipeline's map (on streamload's threads)."""
    (out,) = list(sl.Dataset.from_tensors(element).map(transform))
    return out


DECODES = [
    c for c in IMAGES["decode"]
    if c["channels"] in (0, 3) and c["shape"][2] == 3 and c.get("dct_method") is None
]


@pytest.mark.parametrize("case", DECODES, ids=[f'{c["op"]}-{c["file"]}-{c["channels"]}' for c in DECODES])
def test_decoding_gives_tensorflows_pixels(case):
    data = (TF_DATA / "image_more" / case["file"]).read_bytes()
    op = getattr(sl.image, case["op"])
    image = run(op(), data)
    assert image.dtype == np.uint8 and list(image.shape) == case["shape"]
    assert image.ravel().tolist() == case["pixels"]
    assert run(sl.image.decode_image(), data).ravel().tolist() == case["pixels"]


def test_float_ops_give_tensorflows_values():
    convert = sl.image.convert_image_dtype()
    for case in IMAGES["convert"]:
        got = run(convert, INPUTS[case["input"]])
        assert got.dtype == np.float32 and got.ravel().tolist() == case["output"]
    for case in IMAGES["flip"]:
        got = run(sl.image.flip_left_right(), INPUTS[case["input"]])
        assert got.ravel().tolist() == case["left_right"]
    for case in IMAGES["brightness"]:
        got = run(sl.image.adjust_brightness(case["delta"]), run(convert, INPUTS[case["input"]]))
        assert got.ravel().tolist() == np.float32(case["output"]).tolist()
    for case in IMAGES["saturation"]:
        image = run(convert, INPUTS[case["input"]])
        if "brightness_first" in case:  # out-of-range values
            image = run(sl.image.adjust_brightness(case["brightness_first"]), image)
        got = run(sl.image.adjust_saturation(case["factor"]), image)
        np.testing.assert_allclose(got.ravel(), case["output"], atol=1e-5)
    for case in IMAGES["clip"]:
        image = run(sl.image.adjust_brightness(case["brightness_first"]), run(convert, INPUTS[case["input"]]))
        got = run(sl.image.clip_by_value(case["min"], case["max"]), image)
        assert got.ravel().tolist() == np.float32(case["output"]).tolist()
    resized = 0
    for case in IMAGES["resize"]:
        if case["method"] == "nearest":  # not offered
            continue
        image = run(convert, INPUTS[case["input"]])
        got = run(sl.image.resize(case["size"], method=case["method"]), image)
        assert list(got.shape) == case["size"] + [3]
        np.testing.assert_allclose(got.ravel(), case["float_output"], atol=1e-5)
        resized += 1
    assert resized >= 20


def test_transforms_pick_components_and_take_batches():
    jpg = (REPO_DATA / "images" / "baseline.jpg").read_bytes()
    ds = sl.Dataset.from_tensor_slices(
        {"jpg": np.array([jpg] * 6, dtype=object), "label": np.arange(6)}
    )
    one = list(ds.map(sl.image.decode_jpeg(key="jpg"), num_parallel_calls=2))
    assert [e["label"] for e in one] == list(range(6))
    assert all(e["jpg"].shape == (60, 80, 3) and e["jpg"].dtype == np.uint8 for e in one)
    # A batch of strings: each decoded, stacked.
    (batch,) = list(ds.batch(6).map(sl.image.decode_jpeg(key="jpg")))
    assert batch["jpg"].shape == (6, 60, 80, 3)
    assert (batch["jpg"][3] == one[3]["jpg"]).all()
    # Tuples by index; image ops on a 4-d batch.
    pairs = sl.Dataset.from_tensor_slices((np.array([jpg] * 4, dtype=object), np.arange(4)))
    images = pairs.map(sl.image.decode_jpeg(key=0)).batch(4).map(sl.image.flip_left_right(key=0))
    ((flipped, labels),) = list(images)
    assert flipped.shape == (4, 60, 80, 3) and labels.tolist() == [0, 1, 2, 3]
    assert (flipped[0] == one[0]["jpg"][:, ::-1]).all()
    with pytest.raises(sl.InvalidArgumentError, match="no key"):
        list(ds.map(sl.image.decode_jpeg(key="png")))
    with pytest.raises(sl.InvalidArgumentError, match="rank"):
        list(sl.Dataset.from_tensors(np.zeros((2, 2))).map(sl.image.flip_left_right()))
    with pytest.raises(sl.Error, match="decode_jpeg"):
        list(sl.Dataset.from_tensors(b"not a jpeg").map(sl.image.decode_jpeg()))
    with pytest.raises(sl.InvalidArgumentError, match="channels=1"):
        sl.image.decode_jpeg(channels=1)


def test_random_resized_crop_is_reproducible_and_independent_of_parallelism():
    jpg = (REPO_DATA / "images" / "progressive.jpg").read_bytes()
    ds = sl.Dataset.from_tensor_slices(
        {"jpg": np.array([jpg] * 16, dtype=object), "label": np.arange(16)}
    )
    crop = sl.image.RandomResizedCrop(24, key="jpg", layout="CHW", seed=5)
    serial = [e["jpg"] for e in ds.map(crop)]
    parallel = [e["jpg"] for e in ds.map(crop, num_parallel_calls=4)]
    assert all(a.shape == (3, 24, 24) and a.dtype == np.float32 for a in serial)
    assert all((a == b).all() for a, b in zip(serial, parallel))
    # Different draws for different elements, normalized values around 0.
    assert len({a.tobytes() for a in serial}) > 1
    assert -3 < float(np.mean(serial)) < 3
    # In [0, 1] without normalization; the centre crop of evaluation likewise.
    plain = sl.image.RandomResizedCrop((20, 30), mean=(0, 0, 0), std=(1, 1, 1), seed=1)
    image = run(plain, jpg)
    assert image.shape == (20, 30, 3) and 0 <= image.min() and image.max() <= 1
    centre = run(sl.image.CenterCrop(16, resize_shorter=20), jpg)
    assert centre.shape == (16, 16, 3)
    with pytest.raises(sl.InvalidArgumentError, match="scale"):
        sl.image.RandomResizedCrop(24, scale=(0.5, 0.1))


def test_random_ops_draw_per_element_and_per_epoch():
    images = np.random.default_rng(0).random((8, 4, 4, 3), dtype=np.float32)
    ds = sl.Dataset.from_tensor_slices(images).map(sl.image.random_brightness(0.5, seed=3))
    a, b = [np.stack(list(ds)) for _ in range(2)]
    deltas = (a - images).reshape(8, -1)
    assert np.allclose(deltas, deltas[:, :1], atol=1e-6)  # one delta per image
    assert len(set(np.round(deltas[:, 0], 5))) > 1 and np.abs(deltas).max() <= 0.5
    assert not np.allclose(a, b)  # a fresh draw each epoch
    flips = sl.Dataset.from_tensor_slices(images).map(sl.image.random_flip_left_right(seed=1))
    out = np.stack(list(flips))
    flipped = [bool((o == i[:, ::-1]).all()) for o, i in zip(out, images)]
    kept = [bool((o == i).all()) for o, i in zip(out, images)]
    assert all(f or k for f, k in zip(flipped, kept)) and any(flipped) and any(kept)
    sat = sl.Dataset.from_tensor_slices(images).map(sl.image.random_saturation(0.5, 1.5, seed=1))
    assert np.stack(list(sat)).shape == images.shape


def test_transforms_run_without_the_gil():
    """While a long decode runs on streamload's threads, Python threads keep running."""
    jpg = (REPO_DATA / "images" / "baseline.jpg").read_bytes()
    ds = sl.Dataset.from_tensors(jpg).repeat(3000).map(sl.image.decode_jpeg(), num_parallel_calls=2)
    ticks = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(1)

    t = threading.Thread(target=ticker)
    t.start()
    n = sum(1 for _ in ds)
    done.set()
    t.join()
    assert n == 3000 and len(ticks) > 1000


TEXT = tf_json("text_more.json")


def b64(s):
    return base64.b64decode(s)


LOOKUPS = [c for c in TEXT["lookup"] if "ids" in c]


@pytest.mark.parametrize("case", LOOKUPS, ids=[f"oov{c['num_oov_buckets']}-{i}" for i, c in enumerate(LOOKUPS)])
def test_vocabulary_ids_are_tensorflows(case):
    vocab = sl.text.Vocabulary(
        [b64(t) for t in case["vocab_b64"]], num_oov_buckets=case["num_oov_buckets"]
    )
    tokens = [b64(t) for t in case["tokens_b64"]]
    assert [vocab.lookup(t) for t in tokens] == case["ids"]
    assert vocab.size() == case["size"]


def test_tokenize_splits_and_looks_up_in_the_pipeline(tmp_path):
    for case in TEXT["split"]:
        if case["sep_b64"] is not None:
            continue
        vocab = sl.text.Vocabulary([b"a"])
        words = [b64(w) for w in case["words_b64"]]
        (ids,) = list(sl.Dataset.from_tensors(b64(case["text_b64"])).map(vocab.tokenize()))
        assert ids.dtype == np.int64 and ids.tolist() == [vocab.lookup(w) for w in words]
    path = tmp_path / "vocab.txt"
    path.write_text("the\ncat\nsat\n")
    vocab = sl.text.Vocabulary(vocabulary_file=str(path), reserve_padding_id=True)
    lines = sl.Dataset.from_tensor_slices(np.array([b"the cat sat", b"the dog"], dtype=object))
    (batch,) = list(lines.map(vocab.tokenize(), num_parallel_calls=2).padded_batch(2))
    assert batch.tolist() == [[1, 2, 3], [1, 4, 0]]
    pairs = sl.Dataset.zip((lines, sl.Dataset.range(2))).map(vocab.tokenize(key=0))
    assert [p[0].tolist() for p in pairs] == [[1, 2, 3], [1, 4]]


def test_vocabulary_errors():
    # TensorFlow's errors: an empty vocabulary, a token twice (naming it).
    for case in TEXT["lookup"]:
        if "error" in case:
            with pytest.raises(sl.InvalidArgumentError):
                sl.text.Vocabulary([b64(t) for t in case["vocab_b64"]], num_oov_buckets=case["num_oov_buckets"])
    for case in TEXT["duplicates"]:
        with pytest.raises(sl.InvalidArgumentError) as e:
            sl.text.Vocabulary([b64(t) for t in case["vocab_b64"]])
        key = b64(case["vocab_b64"][0]).decode()
        assert f'duplicate token "{key}"' in str(e.value)
    with pytest.raises(sl.InvalidArgumentError, match="either"):
        sl.text.Vocabulary()
    with pytest.raises(sl.NotFoundError):
        sl.text.Vocabulary(vocabulary_file="/nonexistent/vocab.txt")


def test_read_file_then_decode_local_and_over_http(http_data):
    local = str(REPO_DATA / "images" / "grey.jpg")
    url = f"{http_data}/images/grey.jpg"
    pairs = sl.Dataset.from_tensor_slices((np.array([local, url], dtype=object), np.arange(2)))
    images = list(pairs.map(sl.io.read_file(key=0), num_parallel_calls=2).map(sl.image.decode_jpeg(key=0)))
    assert (images[0][0] == images[1][0]).all() and images[0][0].shape[2] == 3
    with pytest.raises(sl.NotFoundError, match="nope.jpg"):
        list(sl.Dataset.from_tensors(str(REPO_DATA / "nope.jpg")).map(sl.io.read_file()))


TOKENIZER = REPO_DATA / "tokenizer"


@pytest.mark.parametrize("name", ["byte_level", "wordpiece"])
def test_tokenizer_ids_are_the_tokenizers_package_s(name):
    # Written by scripts/make_tokenizer_cases.py with `tokenizers` 0.23.3.
    cases = json.loads((TOKENIZER / "cases.json").read_text(encoding="utf-8"))[name]
    tok = sl.text.Tokenizer(str(TOKENIZER / f"{name}.json"))
    texts = np.array([c["text"].encode() for c in cases], dtype=object)
    got = list(sl.Dataset.from_tensor_slices(texts).map(tok.encode(), num_parallel_calls=2))
    assert len(got) == len(cases)
    for ids, case in zip(got, cases):
        assert ids.dtype == np.uint32 and ids.tolist() == case["ids"], case["text"]


def test_tokenizer_end_token_bounds_and_errors(tmp_path):
    path = str(TOKENIZER / "byte_level.json")
    plain = sl.text.Tokenizer(path)
    ended = sl.text.Tokenizer(path, end_token="<|endoftext|>")
    assert plain.token_to_id("<|endoftext|>") == 0 and plain.vocab_size() == 600
    text = b"some words of the corpus and a few more"
    ids = plain.encode()(text).tolist()
    assert ended.encode()(text).tolist() == ids + [0]
    assert plain.decode(ids) == text.decode()
    cut = sl.text.Tokenizer(path, end_token="<|endoftext|>", truncate=5)
    assert cut.encode()(text).tolist() == ids[:4] + [0]
    bounded = sl.text.Tokenizer(path, end_token="<|endoftext|>", max_ids=len(ids))
    ds = sl.Dataset.from_tensors(text).map(bounded.encode())
    with pytest.raises(sl.InvalidArgumentError, match=f"{len(ids) + 1} ids.*max_ids {len(ids)}"):
        list(ds)
    with pytest.raises(sl.InvalidArgumentError, match="no token"):
        sl.text.Tokenizer(path, end_token="</s>")
    with pytest.raises(sl.InvalidArgumentError, match="not both"):
        sl.text.Tokenizer(path, truncate=3, max_ids=3)
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": 3}')
    with pytest.raises(sl.InvalidArgumentError, match="tokenizer.json"):
        sl.text.Tokenizer(str(bad))
    with pytest.raises(sl.NotFoundError):
        sl.text.Tokenizer(str(tmp_path / "missing.json"))
