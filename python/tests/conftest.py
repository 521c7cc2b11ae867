"""Shared helpers: the TensorFlow-written test data of the Rust crate (tests/data/tensorflow)."""

import base64
import contextlib
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


REPO_DATA = REPO / "tests" / "data"


class _RangeHandler(__import__("http.server").server.BaseHTTPRequestHandler):
    """GET and HEAD of the files under the server's root, with `Range: bytes=a-b`
    (what object_store's HTTP client sends), Content-Length, Last-Modified and ETag."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _file(self):
        root = self.server.root
        path = (root / self.path.lstrip("/").split("?")[0]).resolve()
        if root not in path.parents or not path.is_file():
            return None
        return path

    def _headers(self, path, status, length, extra=()):
        import email.utils

        stat = path.stat()
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{stat.st_size}-{int(stat.st_mtime)}"')
        self.send_header("Last-Modified", email.utils.formatdate(stat.st_mtime, usegmt=True))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()

    def _empty(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        path = self._file()
        if path is None:
            return self._empty(404)
        self._headers(path, 200, path.stat().st_size)

    def do_GET(self):
        path = self._file()
        if path is None:
            return self._empty(404)
        data = path.read_bytes()
        self.server.gets += 1
        spec = self.headers.get("Range")
        if spec and spec.startswith("bytes="):
            a, _, b = spec[6:].partition("-")
            if a == "":
                start, end = max(0, len(data) - int(b)), len(data)
            else:
                start, end = int(a), (int(b) + 1 if b else len(data))
            end = min(end, len(data))
            if start >= len(data) and len(data) > 0:
                return self._empty(416)
            body = data[start:end]
            self._headers(
                path, 206, len(body), [("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")]
            )
        else:
            body = data
            self._headers(path, 200, len(body))
        self.wfile.write(body)


@contextlib.contextmanager
def _serve(root):
    """An HTTP server of the files under `root` on 127.0.0.1, in a thread: its URL."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    server.root = pathlib.Path(root).resolve()
    server.gets = 0
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def http_data():
    """The Rust crate's tests/data served over http://127.0.0.1 (ranged GETs): the URL
    prefix of that folder, for the readers' object-storage path."""
    with _serve(REPO_DATA) as url:
        yield url


@pytest.fixture(scope="session")
def http_tmp(tmp_path_factory):
    """A temporary folder served over http://127.0.0.1: (folder, its URL prefix)."""
    root = tmp_path_factory.mktemp("served")
    with _serve(root) as url:
        yield root, url
