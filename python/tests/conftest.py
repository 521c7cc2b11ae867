"""Shared helpers: the TensorFlow-written test data of the Rust crate (tests/data/tensorflow)."""

import base64
import json
import math
import pathlib

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TF_DATA = REPO / "tests" / "data" / "tensorflow"


def tf_json(name):
    """A JSON file TensorFlow wrote (Python's json reads int64 exactly)."""
    return json.loads((TF_DATA / name).read_text())


def semantics_case(name, file="semantics.json"):
    for case in tf_json(file)["cases"]:
        if case["name"] == name:
            return case
    raise KeyError(name)


def decode_tf(value):
    """An expected value as the JSON encodes it: non-finite floats as strings, non-UTF-8
    strings as {"b64": ...}."""
    if isinstance(value, list):
        return [decode_tf(v) for v in value]
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, dict):
        return {k: decode_tf(v) for k, v in value.items()}
    if value == "NaN":
        return math.nan
    if value == "Infinity":
        return math.inf
    if value == "-Infinity":
        return -math.inf
    return value


def to_plain(element):
    """An element as plain Python (lists, ints, floats, str for UTF-8 bytes), to compare
    with TensorFlow's JSON."""
    if isinstance(element, dict):
        return {k: to_plain(v) for k, v in element.items()}
    if isinstance(element, tuple):
        return [to_plain(v) for v in element]
    if isinstance(element, np.ndarray):
        return [to_plain(v) for v in element] if element.ndim else to_plain(element[()])
    if isinstance(element, (bytes, np.bytes_)):
        try:
            return bytes(element).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(element)
    if isinstance(element, np.generic):
        return element.item()
    return element


def same(a, b):
    """Equality that holds NaN equal to NaN and tells -0.0 from 0.0."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, (float, int)):
        if math.isnan(a):
            return isinstance(b, float) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, float(b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


@pytest.fixture
def tf_data():
    return TF_DATA
