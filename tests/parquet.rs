//! Parquet: files written by pyarrow (every codec its `compression=` takes) and by Hugging
//! Face `datasets` read back value for value against what pyarrow read
//! (scripts/parquet_conformance.py wrote tests/data/parquet/), projection, sharding by row
//! group, tensors, object storage, and damaged files (clean errors naming the file, row
//! group and column; never a panic).
#![cfg(feature = "parquet")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};
use streamload::format::parquet::arrow_array::cast::AsArray;
use streamload::format::parquet::arrow_array::types::*;
use streamload::format::parquet::arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Int64Array, StringArray,
};
use streamload::format::parquet::arrow_schema::DataType;
use streamload::format::parquet::{ParquetDataset, RecordBatch, column_tensor, column_view};

#[path = "support/s3.rs"]
mod s3;

const CODECS: [&str; 6] = ["none", "snappy", "gzip", "brotli", "lz4", "zstd"];

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/parquet")
        .join(name)
}

fn expected(name: &str) -> Value {
    let text = std::fs::read_to_string(data(name)).expect("expected values");
    serde_json::from_str(&text).expect("json")
}

/// An Arrow value as pyarrow's `to_pylist` shows it (binary as `{"b64": ...}`).
fn to_json(array: &dyn Array, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Int64 => json!(array.as_primitive::<Int64Type>().value(row)),
        DataType::Int32 => json!(array.as_primitive::<Int32Type>().value(row)),
        DataType::Float32 => json!(f64::from(array.as_primitive::<Float32Type>().value(row))),
        DataType::Float64 => json!(array.as_primitive::<Float64Type>().value(row)),
        DataType::Boolean => json!(array.as_boolean().value(row)),
        DataType::Utf8 => json!(array.as_string::<i32>().value(row)),
        DataType::Binary => json!({
            "b64": base64::engine::general_purpose::STANDARD.encode(array.as_binary::<i32>().value(row))
        }),
        DataType::Dictionary(_, _) => {
            let dictionary = array.as_any_dictionary();
            let key = dictionary.normalized_keys()[row];
            to_json(dictionary.values().as_ref(), key)
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>().value(row);
            Value::Array((0..list.len()).map(|i| to_json(list.as_ref(), i)).collect())
        }
        DataType::FixedSizeList(_, _) => {
            let list = array.as_fixed_size_list().value(row);
            Value::Array((0..list.len()).map(|i| to_json(list.as_ref(), i)).collect())
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), to_json(c.as_ref(), row)))
                    .collect(),
            )
        }
        other => panic!("no JSON for {other}"),
    }
}

/// Every column of `batches`, as JSON, by name.
fn columns_json(batches: &[RecordBatch]) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    let Some(first) = batches.first() else {
        return out;
    };
    for (i, field) in first.schema().fields().iter().enumerate() {
        let values: Vec<Value> = batches
            .iter()
            .flat_map(|b| {
                let c = b.column(i).clone();
                (0..c.len()).map(move |r| to_json(c.as_ref(), r))
            })
            .collect();
        out.insert(field.name().clone(), Value::Array(values));
    }
    out
}

/// Every column of `got` equals pyarrow's, row for row (the first difference shown).
fn assert_same(got: &serde_json::Map<String, Value>, want: &Value, what: &str) {
    let want = want.as_object().expect("columns");
    let mut names: Vec<&String> = got.keys().collect();
    names.sort();
    let mut wanted: Vec<&String> = want.keys().collect();
    wanted.sort();
    assert_eq!(names, wanted, "{what}: columns");
    for name in names {
        let (g, w) = (
            got[name].as_array().unwrap(),
            want[name].as_array().unwrap(),
        );
        assert_eq!(g.len(), w.len(), "{what}: column {name}: rows");
        if let Some(row) = (0..g.len()).find(|&r| g[r] != w[r]) {
            panic!(
                "{what}: column {name}, row {row}: read {} where pyarrow read {}",
                g[row], w[row]
            );
        }
    }
}

async fn read(ds: ParquetDataset) -> Vec<RecordBatch> {
    ds.build().collect().await.expect("read")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pyarrow_codec_reads_back_what_pyarrow_reads() {
    let want = expected("types.json");
    for codec in CODECS {
        let path = data(&format!("types-{codec}.parquet"));
        // The file is written with the codec named.
        let file = std::fs::File::open(&path).unwrap();
        let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
        use parquet::file::reader::FileReader;
        let written = reader.metadata().row_group(0).column(0).compression();
        let named = format!("{written:?}").to_lowercase();
        let codec_seen = if codec == "none" {
            "uncompressed"
        } else {
            codec
        };
        assert!(named.starts_with(codec_seen), "{codec}: written as {named}");

        let batches = read(ParquetDataset::new([&path]).batch_size(128)).await;
        // Batches of 128 within row groups of 300, 300, 300, 100.
        let rows: Vec<usize> = batches.iter().map(|b| b.num_rows()).collect();
        assert_eq!(
            rows,
            [128, 128, 44, 128, 128, 44, 128, 128, 44, 100],
            "{codec}"
        );
        assert_same(&columns_json(&batches), &want["columns"], codec);
        // The dictionary column stays dictionary-encoded, the fixed-size list fixed.
        let schema = batches[0].schema();
        assert!(matches!(
            schema.field_with_name("category").unwrap().data_type(),
            DataType::Dictionary(_, _)
        ));
        assert!(matches!(
            schema.field_with_name("weights").unwrap().data_type(),
            DataType::FixedSizeList(_, 4)
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hugging_face_dataset_reads_back_with_its_tensors() {
    let want = expected("hf-dataset.json");
    let batches = read(ParquetDataset::new([data("hf-dataset.parquet")])).await;
    assert_same(&columns_json(&batches), &want["columns"], "hf");
    let sizes: Vec<u64> = batches.iter().map(|b| b.num_rows() as u64).collect();
    let groups: Vec<u64> = want["row_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(sizes, groups, "one batch per row group of 64");
    // `Sequence(float32, length=8)`: a [rows, 8] tensor; labels: int64.
    let embedding = column_tensor(&batches[0], "embedding").unwrap();
    assert_eq!(embedding.shape(), [64, 8]);
    let first: Vec<f32> = want["columns"]["embedding"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(&embedding.as_slice::<f32>().unwrap()[..8], &first[..]);
    let label = column_tensor(&batches[0], "label").unwrap();
    assert_eq!(label.shape(), [64]);
    // Ragged token lists are no dense tensor: the error says which row.
    let e = column_tensor(&batches[0], "tokens").unwrap_err();
    let e = format!("{e}");
    assert!(
        e.contains("hf-dataset.parquet: row ") && e.contains(": column `tokens`: "),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projection_reads_the_columns_asked_for_in_that_order() {
    let path = data("types-snappy.parquet");
    let batches = read(ParquetDataset::new([&path]).columns(["weights", "id", "category"])).await;
    let schema = batches[0].schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["weights", "id", "category"]);
    let want = expected("types.json");
    let got = columns_json(&batches);
    for name in names {
        assert_eq!(got[name], want["columns"][name], "{name}");
    }
    // Tensors: ids, weights [rows, 4] (a view and a tensor), dictionary strings.
    let b = &batches[0];
    let ids = column_tensor(b, "id").unwrap();
    assert_eq!(ids.as_slice::<i64>().unwrap()[..3], [0, 1, 2]);
    let view = column_view::<f32>(b, "weights").unwrap();
    assert_eq!(view.shape(), [300, 4]);
    let tensor = column_tensor(b, "weights").unwrap();
    assert_eq!(tensor.shape(), [300, 4]);
    assert_eq!(tensor.as_slice::<f32>().unwrap(), view.as_slice().unwrap());
    let category = column_tensor(b, "category").unwrap();
    let first = want["columns"]["category"][0].as_str().unwrap();
    assert_eq!(
        category.as_slice::<bytes::Bytes>().unwrap()[0],
        first.as_bytes()
    );
    // A column that is not there is an error naming the file and the columns it has.
    let e = ParquetDataset::new([&path])
        .columns(["nope"])
        .build()
        .collect()
        .await
        .unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains("types-snappy.parquet")
            && text.contains("no column `nope`")
            && text.contains("`weights`"),
        "{text}"
    );
}

#[tokio::test]
async fn excluded_columns_are_left_out_and_a_missing_one_is_named() {
    let path = data("types-none.parquet");
    let all = read(ParquetDataset::new([&path])).await;
    let names = |b: &RecordBatch| -> Vec<String> {
        b.schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    };
    let kept = read(ParquetDataset::new([&path]).exclude_columns(["label", "value"])).await;
    assert_eq!(kept.len(), all.len());
    for (k, a) in kept.iter().zip(&all) {
        let want: Vec<String> = names(a)
            .into_iter()
            .filter(|n| n != "label" && n != "value")
            .collect();
        assert_eq!(names(k), want);
        for name in &want {
            assert_eq!(k.column_by_name(name), a.column_by_name(name), "{name}");
        }
    }
    // With `columns`: left out of those.
    let kept = read(
        ParquetDataset::new([&path])
            .columns(["id", "value"])
            .exclude_columns(["value"]),
    )
    .await;
    assert_eq!(names(&kept[0]), ["id"]);
    let e = ParquetDataset::new([&path])
        .exclude_columns(["nope"])
        .build()
        .collect()
        .await
        .unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains("types-none.parquet") && text.contains("exclude_cols: no column `nope`"),
        "{text}"
    );
    assert!(matches!(
        e.downcast_ref::<streamload::Error>(),
        Some(streamload::Error::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn tensors_refuse_nulls_and_types_they_cannot_hold() {
    let batches = read(ParquetDataset::new([data("types-none.parquet")])).await;
    let b = &batches[0];
    let e = column_tensor(b, "label").unwrap_err();
    assert!(
        format!("{e}").contains("types-none.parquet: row ")
            && format!("{e}").contains(": column `label`: a null"),
        "{e}"
    );
    let e = column_view::<i64>(b, "id").map(|v| v.len()).unwrap();
    assert_eq!(e, 300);
    let e = column_view::<f32>(b, "id").unwrap_err();
    assert!(format!("{e}").contains("Int64"), "{e}");
    let e = column_tensor(b, "value").unwrap_err();
    assert!(format!("{e}").contains("column_view"), "{e}");
    let values = column_view::<f64>(b, "value").unwrap();
    assert_eq!(values.len(), 300);
    let e = column_tensor(b, "missing").unwrap_err();
    assert!(format!("{e}").contains("no column `missing`"), "{e}");
}

/// `batch` written to `path` in row groups of `group` rows.
fn write_batch(path: &Path, batch: &RecordBatch, group: usize) {
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(group))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

/// A file of `rows` rows (`id` = `base..`, `w` 2 floats), row groups of `group`.
fn write_file(path: &Path, base: i64, rows: i64, group: usize) {
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(base..base + rows));
    let w: ArrayRef = Arc::new(
        FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
            (base..base + rows).map(|i| Some([Some(i as f32), Some(-(i as f32))])),
            2,
        ),
    );
    let name: ArrayRef = Arc::new(StringArray::from_iter_values(
        (base..base + rows).map(|i| format!("r{i}")),
    ));
    let batch = RecordBatch::try_from_iter([("id", id), ("w", w), ("name", name)]).unwrap();
    write_batch(path, &batch, group);
}

fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            column_tensor(b, "id")
                .unwrap()
                .as_slice::<i64>()
                .unwrap()
                .to_vec()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_groups_interleave_across_files_and_shard() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.parquet");
    let b = dir.path().join("b.parquet");
    write_file(&a, 0, 250, 100); // groups 0..100, 100..200, 200..250
    write_file(&b, 1000, 100, 50); // groups 1000..1050, 1050..1100
    let all = ids(&read(ParquetDataset::new([&a, &b]).batch_size(1000)).await);
    let want: Vec<i64> = (0..100)
        .chain(1000..1050)
        .chain(100..200)
        .chain(1050..1100)
        .chain(200..250)
        .collect();
    assert_eq!(all, want, "row group 0 of each file, then row group 1, ...");
    // Three shards by row group: units 0,3 / 1,4 / 2.
    let mut union = Vec::new();
    for (i, want) in [
        (0..100).chain(1050..1100).collect::<Vec<i64>>(),
        (1000..1050).chain(200..250).collect(),
        (100..200).collect(),
    ]
    .into_iter()
    .enumerate()
    {
        let got = ids(&read(
            ParquetDataset::new([&a, &b])
                .shard(3, i as u64)
                .num_parallel_reads(1),
        )
        .await);
        assert_eq!(got, want, "shard {i}");
        union.extend(got);
    }
    union.sort();
    let mut sorted = all;
    sorted.sort();
    assert_eq!(union, sorted, "the shards cover every row once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_storage_reads_as_local_files_do() {
    let path = data("types-zstd.parquet");
    let bytes = bytes::Bytes::from(std::fs::read(&path).unwrap());
    let server = s3::MemoryS3::default();
    server.insert("pq-bucket", "data/types.parquet", bytes.clone());
    let addr = s3::memory_s3_server(server.clone(), "AKIDPQ", "pq-secret").await;
    streamload::storage::register(
        "s3://pq-bucket",
        s3::s3_store(addr, "pq-bucket", "AKIDPQ", "pq-secret"),
    )
    .unwrap();
    let local = read(ParquetDataset::new([&path]).columns(["id", "tags", "point"])).await;
    let remote = read(
        ParquetDataset::new(["s3://pq-bucket/data/types.parquet"]).columns(["id", "tags", "point"]),
    )
    .await;
    // The same values; each batch names where it was read.
    assert_eq!(columns_json(&local), columns_json(&remote));
    use streamload::format::parquet::BatchOrigin;
    let origin = BatchOrigin::of(&remote[0]).unwrap();
    assert_eq!(origin.file, "s3://pq-bucket/data/types.parquet");
    assert_eq!(origin.first_row, 0);
    // A missing object names its URL.
    let e = ParquetDataset::new(["s3://pq-bucket/data/missing.parquet"])
        .build()
        .collect()
        .await
        .unwrap_err();
    assert!(
        format!("{e:#}").contains("s3://pq-bucket/data/missing.parquet"),
        "{e:#}"
    );
}

/// Reads `bytes` as a Parquet file at `path`: every element, errors included. A panic that
/// reached a worker task (not caught where the `parquet` crate is called) fails the test.
async fn read_damaged(path: &Path, bytes: &[u8]) -> Vec<Result<usize, String>> {
    std::fs::write(path, bytes).unwrap();
    let ds = ParquetDataset::new([path]).batch_size(512).build();
    let mut epoch = ds.iter();
    let mut out = Vec::new();
    use futures::StreamExt;
    while let Some(item) = epoch.next().await {
        if let Err(e) = &item {
            assert!(
                !matches!(
                    e.downcast_ref::<streamload::Error>(),
                    Some(streamload::Error::WorkerPanicked { .. })
                ),
                "a panic reached the worker: {e:#}"
            );
        }
        out.push(item.map(|b| b.num_rows()).map_err(|e| format!("{e:#}")));
    }
    out
}

fn assert_clean(errors: &[String], name: &str, at: &str) {
    for e in errors {
        assert!(
            e.contains(name),
            "{at}: the error does not name the file: {e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_files_are_errors_naming_the_file() {
    let good = std::fs::read(data("types-snappy.parquet")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.parquet");
    let mut points: Vec<usize> = (0..good.len()).step_by(good.len() / 60).collect();
    points.extend([
        0,
        3,
        4,
        8,
        11,
        12,
        good.len() - 1,
        good.len() - 4,
        good.len() - 8,
    ]);
    for cut in points {
        let items = read_damaged(&path, &good[..cut]).await;
        let errors: Vec<String> = items.iter().filter_map(|i| i.clone().err()).collect();
        assert!(!errors.is_empty(), "cut at {cut}: no error");
        assert_clean(&errors, "cut.parquet", &format!("cut at {cut}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipped_bytes_are_clean_errors_naming_row_group_and_column() {
    use futures::StreamExt;
    let good = std::fs::read(data("types-gzip.parquet")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let footer_len =
        u32::from_le_bytes(good[good.len() - 8..good.len() - 4].try_into().unwrap()) as usize;
    let footer_start = good.len() - 8 - footer_len;
    // Bytes of the footer (every one of its last 256, with its length and magic) and
    // across the data, each flipped in a few ways.
    let n = good.len();
    let mut points: Vec<(usize, u8)> = (n - 256..n).map(|at| (at, 0xff)).collect();
    points.extend((n.saturating_sub(2048)..n).step_by(7).map(|at| (at, 0x01)));
    points.extend(
        (4..footer_start)
            .step_by(173)
            .flat_map(|at| [(at, 0xff), (at, 0x80)]),
    );
    // A few files at once (each read decodes on blocking threads).
    let results: Vec<(usize, u8, Vec<String>)> = futures::stream::iter(points)
        .enumerate()
        .map(|(i, (at, flip))| {
            let path = dir.path().join(format!("flipped-{}.parquet", i % 8));
            let mut bytes = good.clone();
            bytes[at] ^= flip;
            async move {
                let items = read_damaged(&path, &bytes).await;
                let errors = items.into_iter().filter_map(Result::err).collect();
                (at, flip, errors)
            }
        })
        .buffered(8)
        .collect()
        .await;
    let (mut chunk_errors, mut caught) = (0, 0);
    for (at, flip, errors) in results {
        assert_clean(&errors, "flipped-", &format!("byte {at} ^ {flip:#x}"));
        caught += errors.iter().filter(|e| e.contains("panicked")).count();
        if at < footer_start {
            for e in &errors {
                assert!(
                    e.contains("row group"),
                    "byte {at}: no row group named: {e}"
                );
                if e.contains("column `") {
                    chunk_errors += 1;
                }
            }
        }
    }
    assert!(chunk_errors > 0, "damage in column chunks names columns");
    eprintln!("{caught} errors were panics of the parquet crate, caught");
}

#[tokio::test]
async fn absurd_lengths_in_the_footer_are_refused_before_reading() {
    let good = std::fs::read(data("types-none.parquet")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absurd.parquet");
    let n = good.len();
    // A footer longer than the file.
    let mut bytes = good.clone();
    bytes[n - 8..n - 4].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    let items = read_damaged(&path, &bytes).await;
    let e = items[0].clone().unwrap_err();
    assert!(
        e.contains("absurd.parquet") && e.contains("its length (4294967280 bytes)"),
        "{e}"
    );
    // Not Parquet at all.
    let items = read_damaged(&path, b"hello, this is not a parquet file at all").await;
    let e = items[0].clone().unwrap_err();
    assert!(e.contains("does not end with the magic PAR1"), "{e}");
    // A damaged file is one error; the dataset goes on with the next file.
    let other = dir.path().join("good.parquet");
    std::fs::write(&other, &good).unwrap();
    let ds = ParquetDataset::new([&path, &other])
        .batch_size(1000)
        .build();
    let items: Vec<_> = {
        use futures::StreamExt;
        ds.iter().collect::<Vec<_>>().await
    };
    assert!(items[0].is_err());
    let rows: usize = items[1..]
        .iter()
        .map(|i| i.as_ref().unwrap().num_rows())
        .sum();
    assert_eq!(rows, 1000);
}

#[test]
fn the_recipe_is_send_sync_and_cloneable() {
    fn check<T: Send + Sync + Clone + std::fmt::Debug>(_: &T) {}
    check(&ParquetDataset::new(["a.parquet"]));
    fn send<T: Send>(_: &T) {}
    send(&ParquetDataset::new(["a.parquet"]).build().iter());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_storage_faults_are_retried_by_the_storage_layer() {
    use std::sync::atomic::Ordering;
    let path = data("types-brotli.parquet");
    let server = s3::MemoryS3::default();
    server.insert(
        "pq-faulty",
        "types.parquet",
        std::fs::read(&path).unwrap().into(),
    );
    let addr = s3::memory_s3_server(server.clone(), "AKIDPQF", "pq-faulty-secret").await;
    // Throttled (503 Slow Down) and cut connections, behind a proxy; object_store's own
    // retries off, so streamload's retries and resumes do all the work.
    let faults = Arc::new(s3::Faults {
        slow_downs: 4.into(),
        cuts: 3.into(),
        cut_after: 5_000,
        ..Default::default()
    });
    let proxy = s3::fault_proxy(addr, Arc::clone(&faults)).await;
    let store = s3::s3_store_retrying(proxy, "pq-faulty", "AKIDPQF", "pq-faulty-secret", 0);
    let options = streamload::storage::ReadOptions::default().backoff(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_millis(50),
    );
    streamload::storage::register_with("s3://pq-faulty", store, options).unwrap();
    let local = read(ParquetDataset::new([&path])).await;
    let remote = read(ParquetDataset::new(["s3://pq-faulty/types.parquet"])).await;
    assert_eq!(columns_json(&local), columns_json(&remote));
    assert_eq!(
        faults.slow_downs.load(Ordering::SeqCst),
        0,
        "every 503 was answered"
    );
    assert!(
        faults.fired.load(Ordering::SeqCst) > 0,
        "connections were cut"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_column_chunk_is_one_error_naming_it_then_the_next_row_groups() {
    use parquet::file::reader::FileReader;
    let path = data("types-snappy.parquet");
    let mut bytes = std::fs::read(&path).unwrap();
    let reader =
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&path).unwrap())
            .unwrap();
    // Row group 1's chunk of `score` (column 2) overwritten with 0xff.
    let chunk = reader.metadata().row_group(1).column(2);
    let (start, len) = chunk.byte_range();
    bytes[start as usize..(start + len) as usize].fill(0xff);
    let dir = tempfile::tempdir().unwrap();
    let damaged = dir.path().join("damaged.parquet");
    let items = read_damaged(&damaged, &bytes).await;
    // Row group 0's batch, one error for row group 1, then row groups 2 and 3.
    assert_eq!(items.len(), 4, "{items:?}");
    assert_eq!(items[0], Ok(300));
    let e = items[1].clone().unwrap_err();
    assert!(
        e.contains("damaged.parquet") && e.contains("row group 1") && e.contains("column `score`"),
        "{e}"
    );
    assert_eq!(items[2..], [Ok(300), Ok(100)]);
    // `ignore_errors` reads around it.
    let rows = ParquetDataset::new([&damaged])
        .build()
        .ignore_errors()
        .map(|b| b.num_rows())
        .collect()
        .await
        .unwrap();
    assert_eq!(rows, [300, 300, 100]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_row_groups_are_fetched_ahead_and_no_further() {
    use futures::StreamExt;
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ahead.parquet");
    write_file(&path, 0, 600, 100); // 6 row groups
    let server = s3::MemoryS3::default();
    server.insert(
        "pq-ahead",
        "f.parquet",
        std::fs::read(&path).unwrap().into(),
    );
    let addr = s3::memory_s3_server(server.clone(), "AKIDPQA", "pq-ahead-secret").await;
    streamload::storage::register(
        "s3://pq-ahead",
        s3::s3_store(addr, "pq-ahead", "AKIDPQA", "pq-ahead-secret"),
    )
    .unwrap();
    // One row group decoding at a time, one more fetched ahead; one column: one GET each.
    let ds = ParquetDataset::new(["s3://pq-ahead/f.parquet"])
        .columns(["id"])
        .batch_size(1000)
        .num_parallel_reads(1)
        .build();
    let mut epoch = ds.iter();
    let gets = || server.gets.load(Ordering::SeqCst);
    let settle = |want: usize| async move {
        // Until the fetches spawned so far have all been served (no assertion on time).
        for _ in 0..1000 {
            if gets() >= want {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        gets()
    };
    let first = epoch.next().await.unwrap().unwrap();
    assert_eq!(first.num_rows(), 100);
    // The footer's read, row group 0's and row group 1's (fetched while the consumer holds
    // row group 0), and not row group 2's.
    assert_eq!(settle(3).await, 3);
    epoch.next().await.unwrap().unwrap();
    assert_eq!(
        settle(4).await,
        4,
        "row group 2 fetched once row group 1 was taken"
    );
    let rest: Vec<_> = epoch.collect().await;
    assert_eq!(rest.len(), 4);
    assert_eq!(gets(), 1 + 6);
}

/// A file of 300 rows in row groups of 100: `id` (`base + row`), `label` (`row`, a null in
/// row `null`) and `tokens` (two values a row, three in row `ragged`).
fn write_bad_file(path: &Path, base: i64, null: Option<i64>, ragged: Option<i64>) {
    use streamload::format::parquet::arrow_array::ListArray;
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(base..base + 300));
    let label: ArrayRef = Arc::new(Int64Array::from_iter(
        (0..300).map(|r| (Some(r) != null).then_some(r)),
    ));
    let tokens: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
        (0..300).map(|r| {
            let n = if Some(r) == ragged { 3 } else { 2 };
            Some((0..n).map(|i| Some(r + i)).collect::<Vec<_>>())
        }),
    ));
    let batch =
        RecordBatch::try_from_iter([("id", id), ("label", label), ("tokens", tokens)]).unwrap();
    write_batch(path, &batch, 100);
}

/// Every batch's origin against its `id`s (`base + row` in each file), and the errors of
/// `column`'s tensors.
fn origins_and_errors(batches: &[RecordBatch], column: &str) -> Vec<String> {
    use streamload::format::parquet::BatchOrigin;
    let mut errors = Vec::new();
    for b in batches {
        let origin = BatchOrigin::of(b).expect("every batch has its origin");
        let base = if origin.file.ends_with("a.parquet") {
            0
        } else {
            1000
        };
        let first_id = column_view::<i64>(b, "id").unwrap()[[0]];
        assert_eq!(origin.first_row as i64, first_id - base, "{origin:?}");
        if let Err(e) = column_tensor(b, column) {
            errors.push(format!("{e}"));
        }
    }
    errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nulls_and_ragged_lists_name_the_file_and_the_row_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    write_bad_file(&a, 0, None, None);
    // Row 37 of the second row group of the second file; row 250 in its third.
    write_bad_file(&b, 1000, Some(137), Some(250));
    let null = format!(
        "{}: row 137: column `label`: a null (a tensor has no nulls)",
        b.display()
    );
    let ragged = format!(
        "{}: row 250: column `tokens`: 3 values where row 232 has 2 (ragged lists: a tensor \
         needs one length)",
        b.display()
    );
    let plain = || ParquetDataset::new([&a, &b]).batch_size(32);
    for (what, ds) in [
        ("all columns", plain()),
        ("columns", plain().columns(["tokens", "label", "id"])),
    ] {
        let batches = read(ds).await;
        assert_eq!(
            origins_and_errors(&batches, "label"),
            std::slice::from_ref(&null),
            "{what}"
        );
        assert_eq!(
            origins_and_errors(&batches, "tokens"),
            std::slice::from_ref(&ragged),
            "{what}"
        );
    }
    let batches = read(plain().exclude_columns(["tokens"])).await;
    assert_eq!(
        origins_and_errors(&batches, "label"),
        std::slice::from_ref(&null)
    );
    // Sharded by row group: the shard holding the row names it, the others nothing.
    let mut errors = Vec::new();
    for shard in 0..3 {
        let batches = read(plain().shard(3, shard)).await;
        errors.extend(origins_and_errors(&batches, "label"));
    }
    assert_eq!(errors, std::slice::from_ref(&null));
    // Distributed over ranks (whole row groups, read by `ParquetShards`): the same.
    use streamload::distribute::{Distribute, ShardPolicy};
    let source = plain().shard_source().await.unwrap();
    let mut errors = Vec::new();
    for rank in 0..2 {
        let plan = Distribute::new(rank, 2)
            .policy(ShardPolicy::RowGroup)
            .plan(source.clone())
            .await
            .unwrap();
        let batches: Vec<RecordBatch> = plan
            .dataset()
            .collect()
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.item)
            .collect();
        errors.extend(origins_and_errors(&batches, "label"));
    }
    // A padded batch is one of the rank's own again.
    errors.sort();
    errors.dedup();
    assert_eq!(errors, [null]);
    // A view names the row in the file too.
    let batches = read(plain()).await;
    let bad = batches
        .iter()
        .find(|b| column_tensor(b, "label").is_err())
        .unwrap();
    let e = column_view::<i64>(bad, "label").unwrap_err();
    assert!(format!("{e}").contains(": row 137: column `label`"), "{e}");
}

#[test]
fn a_batch_made_by_hand_names_the_row_of_the_batch() {
    let w: ArrayRef = Arc::new(
        FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
            (0..4).map(|r| Some([Some(r as f32), (r != 2).then_some(1.0)])),
            2,
        ),
    );
    let batch = RecordBatch::try_from_iter([("w", w)]).unwrap();
    // The null is value 5 of the list's values: row 2.
    let e = column_tensor(&batch, "w").unwrap_err();
    assert_eq!(
        format!("{e}"),
        "column `w`: row 2 of the batch: a null (a tensor has no nulls)"
    );
    let e = column_view::<f32>(&batch, "w").unwrap_err();
    assert!(format!("{e}").contains("row 2 of the batch"), "{e}");
}

/// A file of `docs` documents in a `tokens` column of `list<int32>` (document `d` holds
/// `d % 13 + 1` ids `d * 100 + i`), row groups of 7; row `null` a null, and an id of -1 in
/// row `negative`.
fn write_token_file(path: &Path, docs: i32, null: Option<i32>, negative: Option<i32>) {
    use streamload::format::parquet::arrow_array::ListArray;
    let tokens: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
        (0..docs).map(|d| {
            let ids =
                (0..d % 13 + 1).map(|i| Some(if Some(d) == negative { -1 } else { d * 100 + i }));
            (Some(d) != null).then(|| ids.collect::<Vec<_>>())
        }),
    ));
    let batch = RecordBatch::try_from_iter([("tokens", tokens)]).unwrap();
    write_batch(path, &batch, 7);
}

#[tokio::test]
async fn a_token_column_reads_as_documents_packs_and_resumes() {
    use futures::StreamExt;
    use streamload::format::parquet::column_token_ids;
    use streamload::text::Packing;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.parquet");
    write_token_file(&path, 60, None, None);
    let docs = || {
        ParquetDataset::new([&path])
            .batch_size(4)
            .build()
            .try_map(|b| column_token_ids(&b, "tokens"))
            .unbatch()
    };
    let all = docs().collect().await.unwrap();
    let want: Vec<Vec<u32>> = (0..60u32)
        .map(|d| (0..d % 13 + 1).map(|i| d * 100 + i).collect())
        .collect();
    assert_eq!(all, want);
    // Packed, and resumed from a checkpoint in the middle of a document.
    let packed = || docs().pack(16, Packing::ConcatThenSplit);
    let full = packed().collect().await.unwrap();
    for k in [0, 3, 11, full.len() - 1] {
        let mut epoch = packed().iter();
        let mut seen = Vec::new();
        for _ in 0..k {
            seen.push(epoch.next().await.unwrap().unwrap());
        }
        let bytes = epoch.checkpoint().unwrap().to_bytes();
        drop(epoch);
        let checkpoint = streamload::Checkpoint::from_bytes(&bytes).unwrap();
        let mut resumed = packed().iter_from(&checkpoint).unwrap();
        while let Some(row) = resumed.next().await {
            seen.push(row.unwrap());
        }
        assert_eq!(seen, full, "resumed at {k}");
    }
}

#[tokio::test]
async fn a_token_column_names_the_row_of_a_null_or_an_id_out_of_range() {
    use streamload::format::parquet::column_token_ids;
    let dir = tempfile::tempdir().unwrap();
    for (null, negative, says) in [
        (Some(23), None, "row 23: column `tokens`: a null"),
        (
            None,
            Some(40),
            "row 40: column `tokens`: token id -1 is outside 0..2^32",
        ),
    ] {
        let path = dir
            .path()
            .join(format!("bad-{null:?}-{negative:?}.parquet"));
        write_token_file(&path, 60, null, negative);
        let batches = read(ParquetDataset::new([&path])).await;
        let errors: Vec<String> = batches
            .iter()
            .filter_map(|b| column_token_ids(b, "tokens").err())
            .map(|e| format!("{e:#}"))
            .collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains(says) && errors[0].contains("bad-"),
            "{errors:?}"
        );
    }
    let path = dir.path().join("ids.parquet");
    write_file(&path, 0, 10, 5);
    let batches = read(ParquetDataset::new([&path])).await;
    let e = column_token_ids(&batches[0], "id").unwrap_err();
    assert!(
        format!("{e:#}").contains("Int64 is not a list of integers"),
        "{e:#}"
    );
}
