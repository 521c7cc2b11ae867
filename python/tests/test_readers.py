"""The file readers from Python: CSV (against TensorFlow's outputs), JSON lines, WebDataset
(against webdataset's), Parquet (against pyarrow's), HDF5 (against h5py's), each from local
paths, lists, datasets of names and http:// URLs (object storage's code path)."""

import base64
import gzip
import json
import pathlib

import numpy as np
import pytest

import streamload as sl
from conftest import REPO_DATA, TF_DATA, decode_tf, same, tf_json, to_plain

CSV_CASES = tf_json("formats_more.json")["csv"]
CSV_DIR = TF_DATA / "formats_more"


def _csv_defaults(columns):
    out = []
    for c in columns:
        dtype = getattr(sl, c["dtype"])
        if c["default"] is None:
            out.append(dtype)
        else:
            out.append(np.array([c["default"]], dtype=object if c["dtype"] == "string" else c["dtype"]))
    return out


@pytest.mark.parametrize("case", CSV_CASES, ids=[c["name"] for c in CSV_CASES])
def test_csv_dataset_gives_tensorflows_records_and_errors(case):
    kwargs = dict(
        compression_type=case["compression_type"],
        buffer_size=case["buffer_size"],
        header=case["header"],
        field_delim=case["field_delim"],
        use_quote_delim=case["use_quote_delim"],
        na_value=case["na_value"],
        select_cols=case["select_cols"],
    )
    files = [str(CSV_DIR / f) for f in case["files"]]
    error = case.get("error")
    if error and error["stage"] == "construction":
        with pytest.raises(sl.InvalidArgumentError, match=error["core_message"]):
            sl.experimental.CsvDataset(files, _csv_defaults(case["columns"]), **kwargs)
        return
    ds = sl.experimental.CsvDataset(files, _csv_defaults(case["columns"]), **kwargs)
    it = iter(ds)
    got = []
    expected = decode_tf(case["output"])
    if error:
        with pytest.raises(getattr(sl.errors, error["class"])) as raised:
            for element in it:
                got.append(to_plain(element))
        # TensorFlow's key phrases (its messages embed its own separators).
        for phrase in error["core_message"].replace("{dir}", str(CSV_DIR)).split("; "):
            assert phrase in str(raised.value)
    else:
        got = [to_plain(e) for e in it]
    assert same(got, expected), (got, expected)
    # The types are the columns': int32 stays int32, float64 stays float64.
    for element in ds.take(1) if not error else []:
        for value, column in zip(element, case["columns"]):
            want = "bytes" if column["dtype"] == "string" else column["dtype"]
            assert type(value).__name__ in (want, "bytes"), (value, column)


def test_csv_record_defaults_as_tensorflow_reads_them(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("1,,x,\n,2.5,,7\n")
    ds = sl.experimental.CsvDataset(str(path), [0, [0.5], "dflt", np.array([], np.int64)])
    with pytest.raises(sl.InvalidArgumentError, match="Field 3 is required"):
        list(ds)
    ds = sl.experimental.CsvDataset(str(path), [0, [0.5], "dflt", np.int64(-1)])
    rows = list(ds)
    assert [to_plain(r) for r in rows] == [[1, 0.5, "x", -1], [0, 2.5, "dflt", 7]]
    # A Python int is int32, a float float32 (tf.constant's types); numpy keeps its own.
    assert [type(v) for v in rows[0]] == [np.int32, np.float32, bytes, np.int64]


def test_csv_exclude_cols_reads_every_other_column_as_tensorflow(tmp_path):
    # TensorFlow's csv_dataset_test cases: the record has as many fields as the defaults
    # and the excluded columns together.
    path = tmp_path / "a.csv"
    path.write_text("1,2,3\n5,6,7\n")
    ds = sl.experimental.CsvDataset(str(path), [sl.string], exclude_cols=[1, 2])
    assert [to_plain(r) for r in ds] == [["1"], ["5"]]
    ds = sl.experimental.CsvDataset(str(path), [sl.int64, sl.int64], exclude_cols=[1])
    assert [to_plain(r) for r in ds] == [[1, 3], [5, 7]]
    with pytest.raises(sl.InvalidArgumentError, match="Expect 1 fields but have more in record"):
        list(sl.experimental.CsvDataset(str(path), [sl.string], exclude_cols=[0]))
    with pytest.raises(sl.InvalidArgumentError, match="Expect 3 fields but have 2 in record"):
        list(sl.experimental.CsvDataset(str(path), [sl.string] * 3, exclude_cols=[1]))


def test_csv_bad_arguments_are_refused_when_the_dataset_is_made(tmp_path):
    with pytest.raises(sl.InvalidArgumentError, match="field_delim"):
        sl.experimental.CsvDataset("x.csv", [sl.int64], field_delim=";;")
    with pytest.raises(sl.InvalidArgumentError, match="Either select_cols or exclude_cols"):
        sl.experimental.CsvDataset("x.csv", [sl.int64], select_cols=[0], exclude_cols=[1])
    with pytest.raises(sl.InvalidArgumentError, match="exclude_cols should be strictly increasing"):
        sl.experimental.CsvDataset("x.csv", [sl.int64], exclude_cols=[2, 1])
    with pytest.raises(sl.InvalidArgumentError, match="exclude_cols should be non-negative"):
        sl.experimental.CsvDataset("x.csv", [sl.int64], exclude_cols=[-1])
    with pytest.raises(sl.InvalidArgumentError, match="must not be empty"):
        sl.experimental.CsvDataset("x.csv", [])
    with pytest.raises(sl.InvalidArgumentError, match="CSV column"):
        sl.experimental.CsvDataset("x.csv", [sl.uint8])


def test_csv_reads_datasets_of_names_in_parallel_and_over_http(http_data):
    files = [str(CSV_DIR / "csv" / "header.csv")] * 3
    one = [to_plain(r) for r in sl.experimental.CsvDataset(files, [sl.int64, sl.string], header=True)]
    assert one == [[1, "x"], [2, "y"]] * 3
    names = sl.Dataset.from_tensor_slices(
        np.array([str(CSV_DIR / "csv" / "header.csv"), str(CSV_DIR / "csv" / "crlf.csv")], dtype=object)
    )
    sequential = sl.experimental.CsvDataset(names, [[0], sl.string], header=True)
    assert [to_plain(r) for r in sequential] == [[1, "x"], [2, "y"], [2, "b"]]
    # With num_parallel_reads, tf.data's order: one record from each file in turn.
    par = sl.experimental.CsvDataset(names, [[0], sl.string], header=True, num_parallel_reads=2)
    assert [to_plain(r) for r in par] == [[1, "x"], [2, "b"], [2, "y"]]
    url = f"{http_data}/tensorflow/formats_more/csv/gz.csv.gz"
    rows = sl.experimental.CsvDataset(url, [sl.int64, sl.string], compression_type="GZIP")
    assert [to_plain(r) for r in rows] == [[1, "a"], [2, "b"]]


def test_make_csv_dataset_infers_names_and_types_and_splits_the_label(tmp_path):
    path = tmp_path / "train.csv"
    lines = ["age,income,city,label"] + [
        f"{20 + i},{1000.5 * i},c{i % 3},{i % 2}" for i in range(10)
    ]
    path.write_text("\n".join(lines) + "\n")
    ds = sl.experimental.make_csv_dataset(
        str(path), batch_size=4, label_name="label", num_epochs=1, shuffle=False
    )
    batches = list(ds)
    assert [len(label) for _, label in batches] == [4, 4, 2]
    features, label = batches[0]
    assert sorted(features) == ["age", "city", "income"]
    assert features["age"].dtype == np.int32 and features["income"].dtype == np.float32
    assert features["city"].tolist() == [b"c0", b"c1", b"c2", b"c0"]
    assert label.tolist() == [0, 1, 0, 1]
    # Shuffled with a seed: the same records, in another order, the same each time.
    shuffled = sl.experimental.make_csv_dataset(
        str(path), batch_size=10, num_epochs=1, shuffle_seed=3, select_columns=["age"]
    )
    (first,) = list(shuffled)
    assert list(first) == ["age"]
    assert sorted(first["age"].tolist()) == list(range(20, 30))
    # A seed makes the order the same from one run (one dataset made again) to the next.
    (again,) = list(
        sl.experimental.make_csv_dataset(
            str(path), batch_size=10, num_epochs=1, shuffle_seed=3, select_columns=["age"]
        )
    )
    assert first["age"].tolist() == again["age"].tolist()
    assert first["age"].tolist() != list(range(20, 30))
    # num_epochs=None repeats forever, as TensorFlow does.
    forever = sl.experimental.make_csv_dataset(str(path), batch_size=4, shuffle=False)
    assert sum(len(b["age"]) for b in forever.take(6)) == 24


# --------------------------------------------------------------------------------------
# JSON lines


def test_json_lines_become_tensors(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(
        '{"text": "hi", "label": 1, "score": 0.5, "ids": [1, 2, 3], "ok": true,'
        ' "box": [[1, 2], [3, 4.5]], "meta": {"lang": "en"}}\n'
        "\n"
        '{"text": "there", "label": 0, "score": 1, "ids": [4, 5, 6], "ok": false,'
        ' "box": [[0, 0], [1, 1]], "meta": {"lang": "fr"}}\n'
    )
    rows = list(sl.JsonLinesDataset(str(path)))
    assert len(rows) == 2
    first = rows[0]
    assert first["text"] == b"hi" and first["label"] == 1 and first["label"].dtype == np.int64
    assert first["score"].dtype == np.float32
    assert first["ok"].dtype == np.bool_ and bool(first["ok"]) is True
    assert first["ids"].tolist() == [1, 2, 3] and first["ids"].dtype == np.int64
    assert first["box"].dtype == np.float32 and first["box"].tolist() == [[1, 2], [3, 4.5]]
    assert first["meta"] == {"lang": b"en"}
    # Batches stack them as any element (an integer score beside a float one is not).
    batch = next(iter(sl.JsonLinesDataset(str(path)).map(lambda d: {"ids": d["ids"], "text": d["text"]}).batch(2)))
    assert batch["ids"].shape == (2, 3) and batch["text"].tolist() == [b"hi", b"there"]


def test_json_lines_errors_name_the_file_the_line_and_the_key(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": null}\n{"a": [1, [2]]}\nnot json\n{"a": 5}\n\n{"b": [[1, null]]}\n')
    it = iter(sl.JsonLinesDataset(str(path)))
    assert next(it) == {"a": 1}
    with pytest.raises(sl.InvalidArgumentError) as e:
        next(it)
    assert "bad.jsonl" in str(e.value) and "line 2" in str(e.value) and '"a"' in str(e.value)
    assert "null" in str(e.value)
    with pytest.raises(sl.InvalidArgumentError) as e:
        next(it)
    assert f"{path}: line 3, column 14: " in str(e.value) and '"a"' in str(e.value) and "ragged" in str(e.value)
    with pytest.raises(sl.InvalidArgumentError, match="line 4"):
        next(it)
    assert next(it) == {"a": 5}
    with pytest.raises(sl.InvalidArgumentError) as e:
        next(it)
    assert f"{path}: line 7, column " in str(e.value) and '"b"' in str(e.value) and "null" in str(e.value)
    assert [r["a"] for r in sl.JsonLinesDataset(str(path)).ignore_errors()] == [1, 5]


def test_json_lines_gzip_by_extension_url_and_resume(tmp_path, http_tmp):
    path = tmp_path / "n.jsonl.gz"
    with gzip.open(path, "wt") as f:
        for i in range(50):
            f.write(json.dumps({"i": i, "s": "x" * (i % 5)}) + "\n")
    ds = sl.JsonLinesDataset([str(path), str(path)])
    assert [int(r["i"]) for r in ds] == list(range(50)) * 2
    it = iter(ds)
    for _ in range(63):
        next(it)
    state = it.checkpoint()
    assert [int(r["i"]) for r in ds.iter_from(state)] == list(range(13, 50))
    root, url = http_tmp
    (root / "n.jsonl.gz").write_bytes(path.read_bytes())
    remote = sl.JsonLinesDataset(f"{url}/n.jsonl.gz", num_parallel_reads=2)
    assert [int(r["i"]) for r in remote] == list(range(50))


# --------------------------------------------------------------------------------------
# WebDataset

WDS = REPO_DATA / "wds"
WDS_EXPECTED = json.loads((WDS / "expected.json").read_text())


@pytest.mark.parametrize("shard", sorted(WDS_EXPECTED))
def test_webdataset_samples_are_webdatasets(shard):
    got = list(sl.WebDataset(str(WDS / shard)))
    want = WDS_EXPECTED[shard]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g["__key__"] == w["__key__"].encode()
        assert g["__url__"] == str(WDS / shard).encode()
        fields = {k: v for k, v in g.items() if not k.startswith("__")}
        assert fields == {k: base64.b64decode(v) for k, v in w["fields"].items()}


def test_webdataset_shards_in_parallel_from_urls(http_data):
    shards = ["rust-00.tar", "rust-01.tar.gz", "rust-02.tar"]
    urls = [f"{http_data}/wds/{s}" for s in shards]
    keys = [s["__key__"] for s in sl.WebDataset(urls, num_parallel_reads=3)]
    per_shard = [[s["__key__"].encode() for s in WDS_EXPECTED[n]] for n in shards]
    # One sample from each shard in turn, then the rest of the longer ones.
    expected = []
    for i in range(max(map(len, per_shard))):
        expected += [p[i] for p in per_shard if i < len(p)]
    assert keys == expected
    with pytest.raises(sl.NotFoundError, match="none.tar"):
        list(sl.WebDataset(f"{http_data}/wds/none.tar"))


# --------------------------------------------------------------------------------------
# Parquet

PARQUET = REPO_DATA / "parquet"
PARQUET_TYPES = json.loads((PARQUET / "types.json").read_text())


@pytest.mark.parametrize("codec", ["none", "snappy", "gzip", "brotli", "lz4", "zstd"])
def test_parquet_columns_are_pyarrows(codec):
    cols = ["id", "value", "weights", "category"]
    batches = list(sl.ParquetDataset(str(PARQUET / f"types-{codec}.parquet"), columns=cols, batch_size=128))
    # Batches never span row groups (300, 300, 300, 100 rows).
    assert [len(b["id"]) for b in batches] == [128, 128, 44] * 3 + [100]
    for name in cols:
        got = np.concatenate([b[name] for b in batches])
        want = PARQUET_TYPES["columns"][name]
        assert to_plain(got) == want, name
    assert batches[0]["weights"].dtype == np.float32 and batches[0]["weights"].shape == (128, 4)
    assert batches[0]["id"].dtype == np.int64


def test_parquet_rows_from_a_url_resume_and_unbatch(http_data):
    url = f"{http_data}/parquet/hf-dataset.parquet"
    expected = json.loads((PARQUET / "hf-dataset.json").read_text())["columns"]
    rows = sl.ParquetDataset(url, columns=["label", "text", "embedding"], batch_size=16).unbatch()
    got = list(rows)
    assert len(got) == 200
    assert [int(r["label"]) for r in got] == expected["label"]
    assert [r["text"].decode() for r in got] == expected["text"]
    assert np.array([r["embedding"] for r in got]).tolist() == expected["embedding"]
    it = iter(rows)
    for _ in range(70):
        next(it)
    state = it.checkpoint()
    assert [int(r["label"]) for r in rows.iter_from(state)] == expected["label"][70:]


def test_parquet_nulls_ragged_lists_and_missing_columns_are_named():
    path = str(PARQUET / "types-none.parquet")
    with pytest.raises(sl.InvalidArgumentError, match="column `score`: a null"):
        list(sl.ParquetDataset(path, columns=["score"]))
    with pytest.raises(sl.InvalidArgumentError, match="column `nested`: ragged"):
        list(sl.ParquetDataset(path, columns=["nested"]))
    with pytest.raises(sl.Error, match="nope"):
        list(sl.ParquetDataset(path, columns=["nope"]))
    with pytest.raises(sl.InvalidArgumentError, match="batch_size"):
        sl.ParquetDataset(path, batch_size=0)


def _parquet_file(path, null=None, ragged=None, nested_null=None):
    """300 rows in row groups of 100: ``id``, ``label`` (a null in row ``null``) and
    ``tokens`` (two values a row: three in row ``ragged``, a null among them in row
    ``nested_null``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def tokens(r):
        if r == ragged:
            return [r, r, r]
        return [r, None] if r == nested_null else [r, r]

    table = pa.table(
        {
            "id": pa.array(range(300), pa.int64()),
            "label": pa.array([None if r == null else r for r in range(300)], pa.int64()),
            "tokens": pa.array([tokens(r) for r in range(300)], pa.list_(pa.int64())),
        }
    )
    pq.write_table(table, path, row_group_size=100)
    return str(path)


def _error(ds):
    with pytest.raises(sl.InvalidArgumentError) as e:
        list(ds)
    return str(e.value)


def test_parquet_errors_name_the_file_the_row_in_it_and_the_column(tmp_path):
    a = _parquet_file(tmp_path / "a.parquet")
    # Row 37 of the second row group of the second file.
    b = _parquet_file(tmp_path / "b.parquet", null=137)
    null = f"{b}: row 137: column `label`: a null"
    for kwargs in [{}, {"columns": ["label"]}, {"columns": ["id", "label"]}, {"exclude_cols": ["id"]}]:
        message = _error(sl.ParquetDataset([a, b], batch_size=32, **kwargs))
        assert null in message, (kwargs, message)
    # Each rank reads whole row groups: the one reading it names the row in the file.
    errors = []
    for rank in range(2):
        ds = sl.ParquetDataset([a, b], columns=["label"], batch_size=32)
        try:
            list(ds.distribute(rank, 2, policy="row_group"))
        except sl.InvalidArgumentError as e:
            errors.append(str(e))
    assert len(errors) == 1 and null in errors[0], errors
    # Resumed in that row group (the rows before skipped): the same row.
    ds = sl.ParquetDataset(b, columns=["label"], batch_size=32)
    it = iter(ds)
    assert [len(next(it)["label"]) for _ in range(5)] == [32, 32, 32, 4, 32]
    assert null in _error(ds.iter_from(it.checkpoint()))


def test_parquet_ragged_lists_nested_nulls_and_types_name_the_row_in_the_file(tmp_path, http_tmp):
    ragged = _parquet_file(tmp_path / "ragged.parquet", ragged=250)
    message = _error(sl.ParquetDataset(ragged, exclude_cols=["label"], batch_size=32))
    assert f"{ragged}: row 250: column `tokens`: ragged lists (3 values where row 232 has 2)" in message
    nested = _parquet_file(tmp_path / "nested.parquet", nested_null=45)
    assert f"{nested}: row 45: column `tokens`: a null" in _error(sl.ParquetDataset(nested))
    # A URL is named as it was given.
    root, url = http_tmp
    _parquet_file(root / "served.parquet", null=201)
    served = f"{url}/served.parquet"
    assert f"{served}: row 201: column `label`: a null" in _error(sl.ParquetDataset(served))
    # A type with no tensor: the file, the batch's rows in it, the column.
    import pyarrow as pa
    import pyarrow.parquet as pq

    points = str(tmp_path / "points.parquet")
    table = pa.table({"point": pa.array([{"x": r} for r in range(150)])})
    pq.write_table(table, points, row_group_size=100)
    message = _error(sl.ParquetDataset(points))
    assert f"{points}: rows 0..100: column `point`: Arrow type" in message, message


# --------------------------------------------------------------------------------------
# HDF5

HDF5 = REPO_DATA / "hdf5"
HDF5_EXPECTED = json.loads((HDF5 / "expected.json").read_text())["datasets"]
NUMERIC = [
    k for k, v in HDF5_EXPECTED.items()
    if k.startswith("types.h5:/c") and v["dtype"] != "compound"
]


@pytest.mark.parametrize("key", NUMERIC)
def test_hdf5_rows_are_h5pys(key):
    file, dataset = key.split(":")
    info = HDF5_EXPECTED[key]
    dtype = info["dtype"].removesuffix("be")
    rows = list(sl.HDF5Dataset(str(HDF5 / file), dataset, dtype))
    got = np.array(rows)
    want = np.array(info["values"]).reshape(info["shape"])
    assert got.shape == tuple(info["shape"])
    assert got.dtype == (np.float32 if dtype == "float16" else np.dtype(dtype))
    # (The JSON holds uint64's largest values as floats.)
    assert got.astype(np.float64).tolist() == want.astype(np.float64).tolist()


def test_hdf5_labels_slices_strings_fields_and_urls(http_data):
    files = [str(HDF5 / "scenes-0.h5"), f"{http_data}/hdf5/scenes-1.h5"]
    pairs = list(sl.HDF5Dataset(files, "/scenes/points", sl.float32, labels="/scenes/labels", labels_dtype=sl.int64))
    assert len(pairs) == 87
    points0 = np.array(HDF5_EXPECTED["scenes-0.h5:/scenes/points"]["values"], np.float32).reshape(50, 16, 3)
    labels0 = HDF5_EXPECTED["scenes-0.h5:/scenes/labels"]["values"]
    first_file = [p for p in pairs if p[0].tolist() in points0.tolist()]
    assert len(first_file) == 50
    assert [int(l) for _, l in first_file] == labels0
    slices = [s.shape[0] for s in sl.HDF5Dataset(files, "/scenes/points", np.float32, slices=16)]
    assert sorted(slices) == sorted([16, 16, 16, 2, 16, 16, 5])
    names = [bytes(s).decode() for s in sl.HDF5Dataset(str(HDF5 / "types.h5"), "/strings/vlen", sl.string)]
    assert names == HDF5_EXPECTED["types.h5:/strings/vlen"]["values"]
    xs = list(sl.HDF5Dataset(str(HDF5 / "types.h5"), "/compound", "float32", field="x"))
    assert [float(x) for x in xs] == HDF5_EXPECTED["types.h5:/compound"]["fields"]["x"]
    with pytest.raises(sl.Error, match="chunk"):
        list(sl.HDF5Dataset(str(HDF5 / "types.h5"), "/partial", sl.float32))
    partial = np.array(list(sl.HDF5Dataset(str(HDF5 / "types.h5"), "/partial", sl.float32, fill_missing_chunks=True)))
    assert partial.ravel().tolist() == HDF5_EXPECTED["types.h5:/partial"]["values"]


def test_hdf5_wrong_types_are_named():
    path = str(HDF5 / "scenes-0.h5")
    with pytest.raises(sl.Error, match="scenes-0.h5"):
        list(sl.HDF5Dataset(path, "/scenes/points", sl.int64))
    with pytest.raises(sl.InvalidArgumentError, match="labels_dtype"):
        sl.HDF5Dataset(path, "/scenes/points", sl.float32, labels="/scenes/labels")
    with pytest.raises(sl.InvalidArgumentError, match="labels_dtype must be"):
        sl.HDF5Dataset(path, "/scenes/points", sl.float32, labels="/scenes/labels", labels_dtype=sl.string)


# --------------------------------------------------------------------------------------
# The readers that were there: object storage URLs too


def test_tfrecord_and_text_lines_over_http(http_data):
    local = list(sl.TFRecordDataset(str(TF_DATA / "plain.tfrecord")))
    remote = list(sl.TFRecordDataset(f"{http_data}/tensorflow/plain.tfrecord", buffer_size=4096))
    assert remote == local and len(local) == 100
    gz = list(sl.TFRecordDataset(f"{http_data}/tensorflow/gzip.tfrecord.gz", compression_type="GZIP"))
    assert gz == local
    auto = list(sl.TFRecordDataset(f"{http_data}/tensorflow/zlib.tfrecord.zz", compression_type="AUTO"))
    assert auto == local
    lines = list(sl.TextLineDataset(f"{http_data}/tensorflow/README.md"))
    assert lines == (TF_DATA / "README.md").read_bytes().replace(b"\r", b"").split(b"\n")[: len(lines)]
    with pytest.raises(sl.NotFoundError):
        list(sl.TextLineDataset(f"{http_data}/tensorflow/none.txt"))
    with pytest.raises(sl.InvalidArgumentError, match="compression_type"):
        sl.TextLineDataset("x", compression_type="BZIP2")


def test_parquet_damaged_files_raise_errors_naming_the_file(tmp_path):
    data = (PARQUET / "types-none.parquet").read_bytes()
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(data[: len(data) // 2])
    not_parquet = tmp_path / "not-parquet.parquet"
    not_parquet.write_bytes(b"id,value\n1,2\n" * 100)
    # The footer intact, the column chunks overwritten: the pages cannot be decoded.
    damaged = tmp_path / "damaged.parquet"
    middle = len(data) // 3
    damaged.write_bytes(data[:8] + bytes(b ^ 0x5A for b in data[8:middle]) + data[middle:])
    for path in (truncated, not_parquet, damaged):
        with pytest.raises(sl.Error) as caught:
            list(sl.ParquetDataset(str(path), columns=["id", "value"]))
        assert path.name in str(caught.value), str(caught.value)
    # A damaged file among good ones: the error names it, not the good ones.
    good = str(PARQUET / "types-none.parquet")
    with pytest.raises(sl.Error) as caught:
        list(sl.ParquetDataset([good, str(truncated)], columns=["id"]))
    assert "truncated.parquet" in str(caught.value) and "types-none" not in str(caught.value)


def test_parquet_exclude_cols_leaves_columns_out():
    path = str(PARQUET / "types-none.parquet")
    everything = list(sl.ParquetDataset(path, columns=["id", "value", "weights", "category"]))
    all_names = set(PARQUET_TYPES["columns"])
    # score (nulls) and nested (ragged) would raise; left out, the rest converts.
    kept = list(sl.ParquetDataset(path, exclude_cols=sorted(all_names - {"id", "value", "weights", "category"})))
    assert [set(b) for b in kept] == [{"id", "value", "weights", "category"}] * len(everything)
    for a, b in zip(kept, everything):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    with pytest.raises(sl.InvalidArgumentError, match="exclude_cols: no column `nope`"):
        list(sl.ParquetDataset(path, exclude_cols="nope"))
    with pytest.raises(sl.InvalidArgumentError, match="mutually exclusive"):
        sl.ParquetDataset(path, columns=["id"], exclude_cols=["value"])


# Megatron-LM indexed datasets (files written by megatron-core's own code,
# scripts/make_megatron.py).
MEGATRON = REPO_DATA / "megatron"


def _megatron_documents(case):
    bounds = case["document_indices"]
    return [
        [t for s in case["sequences"][a:b] for t in s] for a, b in zip(bounds, bounds[1:])
    ]


def test_megatron_reads_what_megatron_wrote():
    expected = json.loads((MEGATRON / "expected.json").read_text())
    for name in ["docs_uint16", "sentences_int32", "multimodal_uint16", "merged_uint16"]:
        want = _megatron_documents(expected[name])
        corpus = sl.MegatronDataset(str(MEGATRON / name))
        assert corpus.num_documents == len(want)
        got = [d.tolist() for d in corpus.documents()]
        assert got == want, name
        doc = corpus.read_document(len(want) - 1)
        assert doc.dtype == np.uint32 and doc.tolist() == want[-1]


def test_megatron_shuffled_shards_and_errors(tmp_path):
    corpus = sl.MegatronDataset([str(MEGATRON / "merged_uint16"), str(MEGATRON / "sentences_int32")])
    every = sorted(d.tolist() for d in corpus.documents())
    shuffled = [d.tolist() for d in corpus.documents(shuffle_seed=3)]
    assert sorted(shuffled) == every and shuffled != sorted(shuffled)
    shards = [d.tolist() for i in range(2) for d in corpus.documents(num_shards=2, index=i)]
    assert sorted(shards) == every
    with pytest.raises(ValueError, match="num_shards"):
        corpus.documents(num_shards=2, index=2)
    (tmp_path / "bad.idx").write_bytes(b"NOTMEGATRON" + bytes(40))
    (tmp_path / "bad.bin").write_bytes(b"")
    with pytest.raises(Exception, match=r"bad\.idx.*MMIDIDX"):
        sl.MegatronDataset(str(tmp_path / "bad"))
    with pytest.raises(Exception, match="past the last"):
        corpus.read_document(corpus.num_documents)


def test_megatron_resumes_from_a_checkpoint():
    corpus = sl.MegatronDataset(str(MEGATRON / "merged_uint16"))
    ds = corpus.documents(shuffle_seed=5)
    whole = [d.tolist() for d in ds]
    it = iter(corpus.documents(shuffle_seed=5))
    first = [next(it).tolist() for _ in range(3)]
    state = it.checkpoint()
    rest = [d.tolist() for d in corpus.documents(shuffle_seed=5).iter_from(state)]
    assert first + rest == whole
