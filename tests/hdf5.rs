//! HDF5: files written by h5py (every numeric width, float16, big-endian, fixed-length
//! strings, a compound type; contiguous and chunked; gzip, shuffle, fletcher32, LZF) read
//! back value for value against what h5py read (scripts/hdf5_conformance.py wrote
//! tests/data/hdf5/), rows and slices, labels, sharding, object storage, resume (mid-epoch
//! and through a shuffle buffer), a changed file refused, and bad input (clean errors naming
//! the file and dataset; never a panic).
#![cfg(feature = "hdf5")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use streamload::Dataset;
use streamload::format::hdf5::{ArrayD, Element, Hdf5Dataset, f16};

#[path = "support/s3.rs"]
mod s3;

#[path = "support/with_errors.rs"]
mod with_errors;

#[path = "support/arrays.rs"]
mod arrays;
use arrays::{flat, float, int, same, take_then_resume};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hdf5")
        .join(name)
}

/// What h5py read back, by `file:/dataset`.
fn expected(key: &str) -> Value {
    let text = std::fs::read_to_string(data("expected.json")).expect("expected values");
    let all: Value = serde_json::from_str(&text).expect("json");
    all["datasets"][key].clone()
}

fn shape(entry: &Value) -> Vec<usize> {
    entry["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

/// Every row of `dataset` in `file`, stacked back into one array.
async fn read_all<T: Element>(file: &str, dataset: &str) -> anyhow::Result<ArrayD<T>> {
    let rows = Hdf5Dataset::new([data(file)], dataset)
        .build::<T>()
        .collect()
        .await?;
    let views: Vec<_> = rows.iter().map(|r| r.view()).collect();
    Ok(ndarray::stack(ndarray::Axis(0), &views)?)
}

/// Reads `file:dataset` as `T` and compares shape and values with h5py's, each value turned
/// into JSON by `to_json`.
async fn check<T: Element>(file: &str, dataset: &str, to_json: impl Fn(&T) -> Value) {
    let entry = expected(&format!("{file}:{dataset}"));
    assert!(!entry.is_null(), "no expected values for {file}:{dataset}");
    let array = read_all::<T>(file, dataset)
        .await
        .unwrap_or_else(|e| panic!("{file}:{dataset}: {e:#}"));
    assert_eq!(array.shape(), shape(&entry), "{file}:{dataset}");
    let got: Vec<Value> = array.iter().map(&to_json).collect();
    let want = entry["values"].as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{file}:{dataset}");
    for (i, (got, want)) in got.iter().zip(want).enumerate() {
        assert!(
            same(got, want),
            "{file}:{dataset}: element {i} is {got}, h5py read {want}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_numeric_type_in_both_layouts_reads_as_h5py_read_it() {
    for layout in ["contiguous", "chunked"] {
        let path = |name: &str| format!("/{layout}/{name}");
        check::<i8>("types.h5", &path("int8"), int).await;
        check::<i16>("types.h5", &path("int16"), int).await;
        check::<i32>("types.h5", &path("int32"), int).await;
        check::<i64>("types.h5", &path("int64"), int).await;
        check::<u8>("types.h5", &path("uint8"), int).await;
        check::<u16>("types.h5", &path("uint16"), int).await;
        check::<u32>("types.h5", &path("uint32"), int).await;
        check::<u64>("types.h5", &path("uint64"), int).await;
        check::<f16>("types.h5", &path("float16"), |v| Value::from(v.to_f64())).await;
        check::<f32>("types.h5", &path("float32"), float).await;
        check::<f64>("types.h5", &path("float64"), float).await;
        check::<i32>("types.h5", &path("int32be"), int).await;
        check::<f64>("types.h5", &path("float64be"), float).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_filter_pipeline_reads_as_h5py_read_it() {
    for name in [
        "gzip",
        "shuffle_gzip",
        "fletcher32",
        "shuffle_gzip_fletcher32",
        "lzf",
        "shuffle_lzf",
    ] {
        check::<f32>("filters.h5", &format!("/{name}"), float).await;
    }
    check::<i16>("filters.h5", "/shuffle_int16", int).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_length_strings_and_compound_fields_read_as_h5py_read_them() {
    let text = |s: &String| Value::from(s.as_str());
    check::<String>("types.h5", "/strings/ascii", text).await;
    check::<String>("types.h5", "/strings/space", text).await;
    check::<String>("types.h5", "/strings/vlen", text).await;

    let entry = expected("types.h5:/compound");
    let field = |name: &str| {
        Hdf5Dataset::new([data("types.h5")], "/compound")
            .field(name)
            .slices(8)
    };
    let x: Vec<f32> = field("x")
        .build::<f32>()
        .collect()
        .await
        .unwrap()
        .into_iter()
        .flatten()
        .collect();
    let y: Vec<i64> = field("y")
        .build::<i64>()
        .collect()
        .await
        .unwrap()
        .into_iter()
        .flatten()
        .collect();
    let names: Vec<String> = field("name")
        .build::<String>()
        .collect()
        .await
        .unwrap()
        .into_iter()
        .flatten()
        .collect();
    let x: Vec<Value> = x.iter().map(float).collect();
    let y: Vec<Value> = y.iter().map(int).collect();
    let names: Vec<Value> = names.iter().map(text).collect();
    let want_x = entry["fields"]["x"].as_array().unwrap();
    assert!(x.len() == want_x.len() && x.iter().zip(want_x).all(|(a, b)| same(a, b)));
    assert_eq!(&y, entry["fields"]["y"].as_array().unwrap());
    assert_eq!(&names, entry["fields"]["name"].as_array().unwrap());
}

/// Slices of `k` rows of `file:dataset` as `T`, read one block at a time or two at once,
/// each slice's shape checked, their values in order.
async fn slice_values<T: Element>(file: &str, dataset: &str, k: u64, parallel: usize) -> Vec<T> {
    let slices = Hdf5Dataset::new([data(file)], dataset)
        .slices(k as usize)
        .num_parallel_reads(parallel)
        .build::<T>()
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{file}:{dataset}, slices of {k}: {e:#}"));
    let rows = shape(&expected(&format!("{file}:{dataset}")))[0] as u64;
    let sizes: Vec<u64> = slices.iter().map(|s| s.shape()[0] as u64).collect();
    let want: Vec<u64> = (0..rows)
        .step_by(k as usize)
        .map(|r| k.min(rows - r))
        .collect();
    assert_eq!(sizes, want, "{file}:{dataset}, slices of {k}");
    slices.into_iter().flatten().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_on_and_off_the_chunk_grid_read_as_h5py_read_them() {
    // Blocks of whole chunks (chunks holding whole rows: read chunk by chunk) and blocks off
    // the chunk grid (read by `read_slice`), the short last chunk included: filters.h5's
    // datasets are (40, 4, 5) in chunks of 6 rows (the last one 4), /shuffle_int16 is (40, 7)
    // in chunks of 9 (the last one 4).
    let compare = |name: &str, k: u64, got: Vec<Value>| {
        let want = expected(&format!("filters.h5:{name}"));
        let want = want["values"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{name}, slices of {k}");
        for (i, (got, want)) in got.iter().zip(want).enumerate() {
            assert!(
                same(got, want),
                "{name}, slices of {k}: element {i} is {got}, h5py read {want}"
            );
        }
    };
    for name in [
        "/gzip",
        "/shuffle_gzip",
        "/fletcher32",
        "/shuffle_gzip_fletcher32",
        "/lzf",
        "/shuffle_lzf",
    ] {
        // 6, 12, 18, 40: on the grid (18: the last block 4 rows, one short chunk); 7, 4: off it.
        for (k, parallel) in [(6, 1), (12, 2), (18, 2), (40, 1), (7, 2), (4, 1)] {
            let got = slice_values::<f32>("filters.h5", name, k, parallel).await;
            compare(name, k, got.iter().map(float).collect());
        }
    }
    for (k, parallel) in [(9, 2), (27, 1), (10, 2)] {
        let got = slice_values::<i16>("filters.h5", "/shuffle_int16", k, parallel).await;
        compare("/shuffle_int16", k, got.iter().map(int).collect());
    }
    // The scenes with their labels: /scenes/points in chunks of 8 rows of (16, 3), 50 and 37
    // rows (the last chunks 2 and 5 rows).
    for file in ["scenes-0.h5", "scenes-1.h5"] {
        for k in [8, 16, 24, 5] {
            let slices = Hdf5Dataset::new([data(file)], "/scenes/points")
                .with_labels("/scenes/labels")
                .slices(k)
                .build_labeled::<f32, i64>()
                .collect()
                .await
                .unwrap();
            let got: Vec<(Vec<f32>, i64)> = slices
                .iter()
                .flat_map(|(points, labels)| {
                    assert_eq!(points.shape()[1..], [16, 3]);
                    points
                        .outer_iter()
                        .map(|row| row.iter().copied().collect::<Vec<f32>>())
                        .zip(labels.iter().copied())
                        .collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(got, scene_rows(file), "{file}, slices of {k}");
        }
    }
}

fn scenes() -> [PathBuf; 2] {
    [data("scenes-0.h5"), data("scenes-1.h5")]
}

/// h5py's rows of /scenes/points and /scenes/labels in `file`: (points, label) per row.
fn scene_rows(file: &str) -> Vec<(Vec<f32>, i64)> {
    let points = expected(&format!("{file}:/scenes/points"));
    let labels = expected(&format!("{file}:/scenes/labels"));
    arrays::scene_rows(&points, &labels)
}

fn labeled(parallel: usize) -> Dataset<(ArrayD<f32>, ArrayD<i64>)> {
    Hdf5Dataset::new(scenes(), "/scenes/points")
        .with_labels("/scenes/labels")
        .num_parallel_reads(parallel)
        .build_labeled::<f32, i64>()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_with_labels_are_h5py_rows_interleaved_by_block_across_files() {
    let rows = labeled(2).collect().await.unwrap();
    let got = flat(&rows);
    assert_eq!(got.len(), 50 + 37);
    // Each file fits in one block (under 1 MiB): file 0's rows, then file 1's.
    let mut want = scene_rows("scenes-0.h5");
    want.extend(scene_rows("scenes-1.h5"));
    assert_eq!(got, want);
    // The same with one read at a time.
    assert_eq!(flat(&labeled(1).collect().await.unwrap()), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_interleave_files_and_shards_split_them() {
    let slices = |shard: Option<(u64, u64)>| {
        let ds = Hdf5Dataset::new(scenes(), "/scenes/labels").slices(16);
        let ds = match shard {
            Some((n, i)) => ds.shard(n, i),
            None => ds,
        };
        ds.build::<i64>()
    };
    let all: Vec<Vec<i64>> = slices(None)
        .collect()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.into_iter().collect())
        .collect();
    let range = |a: i64, b: i64| (a..b).collect::<Vec<i64>>();
    assert_eq!(
        all,
        [
            range(0, 16),
            range(1000, 1016),
            range(16, 32),
            range(1016, 1032),
            range(32, 48),
            range(1032, 1037),
            range(48, 50),
        ]
    );
    let mut shards = Vec::new();
    for i in 0..3 {
        let part: Vec<Vec<i64>> = slices(Some((3, i)))
            .collect()
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.into_iter().collect())
            .collect();
        let want: Vec<Vec<i64>> = all.iter().skip(i as usize).step_by(3).cloned().collect();
        assert_eq!(part, want, "shard {i} of 3");
        shards.extend(part);
    }
    assert_eq!(shards.len(), all.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_in_object_storage_read_like_local_ones() {
    use object_store::{ObjectStoreExt, PutPayload, memory::InMemory, path::Path as ObjectPath};
    let store = Arc::new(InMemory::new());
    for name in ["scenes-0.h5", "scenes-1.h5"] {
        let bytes = std::fs::read(data(name)).unwrap();
        store
            .put(
                &ObjectPath::from(format!("runs/{name}")),
                PutPayload::from(bytes),
            )
            .await
            .unwrap();
    }
    streamload::storage::register("memory://hdf5-remote", store).unwrap();
    let urls = [
        "memory://hdf5-remote/runs/scenes-0.h5",
        "memory://hdf5-remote/runs/scenes-1.h5",
    ];
    let remote = Hdf5Dataset::new(urls, "/scenes/points")
        .with_labels("/scenes/labels")
        .build_labeled::<f32, i64>()
        .collect()
        .await
        .unwrap();
    assert_eq!(flat(&remote), flat(&labeled(2).collect().await.unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_epoch_equals_the_uninterrupted_one() {
    let whole = labeled(2).collect().await.unwrap();
    for k in [0, 1, 30, 50, 51, 86, 87] {
        let resumed = take_then_resume(|| labeled(2), k).await.unwrap();
        assert_eq!(resumed, whole, "resumed after {k} rows");
    }
    // Slices of 7, and a shuffle buffer over rows (its elements read again by position).
    let sliced = || {
        Hdf5Dataset::new(scenes(), "/scenes/points")
            .slices(7)
            .build::<f32>()
    };
    let whole = sliced().collect().await.unwrap();
    for k in [0, 3, 7, whole.len()] {
        assert_eq!(
            take_then_resume(sliced, k).await.unwrap(),
            whole,
            "slices, after {k}"
        );
    }
    let shuffled = || labeled(2).shuffle(20, Some(7));
    let whole = shuffled().collect().await.unwrap();
    for k in [5, 40, 80] {
        assert_eq!(
            take_then_resume(shuffled, k).await.unwrap(),
            whole,
            "shuffled, after {k}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changed_since_the_checkpoint_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = ["scenes-0.h5", "scenes-1.h5"]
        .iter()
        .map(|name| {
            let to = dir.path().join(name);
            std::fs::copy(data(name), &to).unwrap();
            to
        })
        .collect();
    let make = || Hdf5Dataset::new(files.clone(), "/scenes/labels").build::<i64>();
    let mut epoch = make().iter();
    for _ in 0..10 {
        epoch.next().await.unwrap().unwrap();
    }
    let checkpoint = epoch.checkpoint().unwrap();
    drop(epoch);
    // The second file, not yet read, is replaced by the first (another size and content).
    std::fs::copy(data("scenes-0.h5"), &files[1]).unwrap();
    std::fs::write(
        &files[1],
        [std::fs::read(&files[1]).unwrap(), vec![0; 16]].concat(),
    )
    .unwrap();
    let mut resumed = make().iter_from(&checkpoint).unwrap();
    let err = resumed.next().await.unwrap().unwrap_err();
    assert!(
        matches!(
            err.downcast_ref::<streamload::Error>(),
            Some(streamload::Error::Checkpoint(_))
        ),
        "{err:#}"
    );
    assert!(
        format!("{err:#}").contains("changed since the checkpoint"),
        "{err:#}"
    );
}

/// The single error of reading `dataset` of `file` as `T` (the dataset yields nothing else).
async fn one_error<T: Element>(files: Vec<PathBuf>, dataset: &str) -> String {
    let mut epoch = Hdf5Dataset::new(files, dataset).build::<T>().iter();
    let mut errors = Vec::new();
    while let Some(item) = epoch.next().await {
        if let Err(e) = item {
            errors.push(format!("{e:#}"));
        }
    }
    assert_eq!(errors.len(), 1, "{errors:?}");
    errors.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_an_error_naming_the_file_and_dataset() {
    let types = data("types.h5");
    let err = one_error::<f32>(vec![types.clone()], "/no/such").await;
    assert!(
        err.contains("types.h5") && err.contains("no dataset `/no/such`"),
        "{err}"
    );

    let err = one_error::<f32>(vec![types.clone()], "/chunked/int16").await;
    assert!(
        err.contains("types.h5") && err.contains("holds int16, not f32"),
        "{err}"
    );

    let err = Hdf5Dataset::new([types.clone()], "/compound")
        .field("z")
        .build::<f32>()
        .collect()
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("no field `z`"), "{err:#}");

    let err = Hdf5Dataset::new(scenes(), "/scenes/points")
        .with_labels("/chunked/int8")
        .build_labeled::<f32, i8>()
        .collect()
        .await
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("no labels dataset `/chunked/int8`"),
        "{err:#}"
    );

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.h5");
    let err = one_error::<f32>(vec![missing], "/x").await;
    assert!(err.contains("missing.h5"), "{err}");

    let text = dir.path().join("not.h5");
    std::fs::write(&text, b"not an HDF5 file at all").unwrap();
    let err = one_error::<f32>(vec![text], "/x").await;
    assert!(
        err.contains("not.h5") && err.contains("not a readable HDF5 file"),
        "{err}"
    );

    // Truncated: its metadata is there, its last chunks are not.
    let bytes = std::fs::read(data("filters.h5")).unwrap();
    let cut = dir.path().join("cut.h5");
    std::fs::write(&cut, &bytes[..bytes.len() * 3 / 4]).unwrap();
    let mut errors = Vec::new();
    for name in ["/gzip", "/lzf", "/fletcher32", "/shuffle_gzip_fletcher32"] {
        let mut epoch = Hdf5Dataset::new([cut.clone()], name)
            .slices(6)
            .build::<f32>()
            .iter();
        while let Some(item) = epoch.next().await {
            if let Err(e) = item {
                errors.push(format!("{e:#}"));
            }
        }
    }
    assert!(!errors.is_empty(), "a truncated file read without an error");
    for err in &errors {
        assert!(
            err.contains("cut.h5") && err.contains("the chunk at rows"),
            "{err}"
        );
    }
    // Truncated before its metadata ends.
    let head = dir.path().join("head.h5");
    std::fs::write(&head, &bytes[..600]).unwrap();
    let err = one_error::<f32>(vec![head], "/gzip").await;
    assert!(err.contains("head.h5"), "{err}");

    // A damaged chunk: a byte flipped inside fletcher32's data is a checksum error.
    let damaged = dir.path().join("damaged.h5");
    let mut flipped = bytes.clone();
    let reference = read_all::<f32>("filters.h5", "/fletcher32").await.unwrap();
    let needle: Vec<u8> = reference
        .iter()
        .take(8)
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let at = flipped
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .expect("fletcher32's first chunk, stored as is");
    flipped[at + 3] ^= 0x40;
    std::fs::write(&damaged, &flipped).unwrap();
    let err = one_error::<f32>(vec![damaged], "/fletcher32").await;
    assert!(
        err.contains("damaged.h5")
            && err.contains("dataset `/fletcher32`")
            && err.contains("the chunk at rows 0..6 (chunk 0 along the first axis)")
            && err.contains("checksum"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_bytes_anywhere_are_errors_naming_the_file_never_panics_or_hangs() {
    let bytes = std::fs::read(data("scenes-0.h5")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A fixed sequence of damages (a small LCG): 1 to 4 bytes changed, half of the time in
    // the first 4 KiB, where the superblock and the object headers are.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |bound: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) as usize) % bound
    };
    let original = Hdf5Dataset::new([data("scenes-0.h5")], "/scenes/points")
        .with_labels("/scenes/labels")
        .build_labeled::<f32, i64>()
        .collect()
        .await
        .unwrap();
    let mut failed = 0;
    for case in 0..200 {
        let mut damaged = bytes.clone();
        let span = if case % 2 == 0 { 4096 } else { bytes.len() };
        for _ in 0..1 + next(4) {
            let at = next(span);
            damaged[at] ^= 1 << next(8);
        }
        let name = format!("damaged-{case}.h5");
        let path = dir.path().join(&name);
        std::fs::write(&path, &damaged).unwrap();
        let dataset = Hdf5Dataset::new([path], "/scenes/points")
            .with_labels("/scenes/labels")
            .build_labeled::<f32, i64>();
        let result = tokio::time::timeout(std::time::Duration::from_secs(20), dataset.collect())
            .await
            .unwrap_or_else(|_| panic!("case {case}: reading hung"));
        let points_only_checked = |rows: &[(ArrayD<f32>, ArrayD<i64>)]| {
            rows.len() == original.len() && rows.iter().zip(&original).all(|(a, b)| a.0 == b.0)
        };
        if let Ok(rows) = &result {
            // The points are compressed (deflate's Adler-32) and their chunk index is checked
            // for missing chunks: damage there is an error, never zeros or other values read
            // as data. Only the labels' raw bytes (contiguous, no checksum) change unseen.
            assert!(
                points_only_checked(rows),
                "case {case}: points read differ, no error"
            );
        }
        if let Err(e) = result {
            failed += 1;
            assert!(
                !matches!(
                    e.downcast_ref::<streamload::Error>(),
                    Some(streamload::Error::WorkerPanicked { .. })
                ),
                "case {case}: the reader panicked: {e:#}"
            );
            assert!(format!("{e:#}").contains(&name), "case {case}: {e:#}");
        }
    }
    // Most damage is noticed (checksummed metadata, compressed chunks); some lands in the
    // labels' raw values, which no format check can see.
    assert!(
        failed > 50,
        "only {failed} of 200 damaged files were errors"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_never_written_is_an_error_or_with_fill_missing_chunks_the_fill_value() {
    // /partial: chunks of 5 rows, rows 5..10 and 15..20 never written.
    let err = one_error::<f32>(vec![data("types.h5")], "/partial").await;
    assert!(
        err.contains("types.h5")
            && err.contains("dataset `/partial`")
            && err.contains("the chunk at [5, 0]")
            && err.contains("fill_missing_chunks(true)"),
        "{err}"
    );
    // Slices of 5: the written chunks read, the others are errors naming them.
    let mut epoch = Hdf5Dataset::new([data("types.h5")], "/partial")
        .slices(5)
        .build::<f32>()
        .iter();
    let mut outcomes = Vec::new();
    while let Some(item) = epoch.next().await {
        outcomes.push(item.map(|a| a[[0, 0]]).map_err(|e| format!("{e:#}")));
    }
    assert_eq!(outcomes.len(), 4);
    assert_eq!(outcomes[0], Ok(0.0));
    assert!(
        outcomes[1]
            .as_ref()
            .unwrap_err()
            .contains("the chunk at [5, 0]")
    );
    assert_eq!(outcomes[2], Ok(20.0));
    assert!(
        outcomes[3]
            .as_ref()
            .unwrap_err()
            .contains("the chunk at [15, 0]")
    );

    // As h5py reads it.
    let rows = Hdf5Dataset::new([data("types.h5")], "/partial")
        .fill_missing_chunks(true)
        .build::<f32>()
        .collect()
        .await
        .unwrap();
    let values: Vec<Value> = rows.iter().flatten().map(float).collect();
    assert_eq!(
        &values,
        expected("types.h5:/partial")["values"].as_array().unwrap()
    );
}

/// Each rank's labels (padding marked) of `policy` over the two scene files.
async fn ranks(
    policy: streamload::distribute::ShardPolicy,
    world: usize,
    slices: Option<usize>,
) -> Vec<Vec<(i64, bool)>> {
    use streamload::distribute::{Distribute, Remainder};
    let mut out = Vec::new();
    for rank in 0..world {
        let ds = Hdf5Dataset::new(scenes(), "/scenes/labels");
        let ds = match slices {
            Some(k) => ds.slices(k),
            None => ds,
        };
        let plan = Distribute::new(rank, world)
            .policy(policy)
            .remainder(Remainder::Pad)
            .plan(ds.shard_source::<i64>())
            .await
            .unwrap();
        let items = plan.dataset().collect().await.unwrap();
        out.push(
            items
                .into_iter()
                .flat_map(|d| {
                    let padded = d.padded;
                    d.item
                        .into_iter()
                        .map(move |l| (l, padded))
                        .collect::<Vec<_>>()
                })
                .collect(),
        );
    }
    out
}

/// Every label of the two files once among the ranks' elements that are not padding.
fn assert_covered_once(ranks: &[Vec<(i64, bool)>], what: &str) {
    let mut labels: Vec<i64> = ranks
        .iter()
        .flatten()
        .filter(|(_, padded)| !padded)
        .map(|(l, _)| *l)
        .collect();
    labels.sort_unstable();
    let want: Vec<i64> = (0..50).chain(1000..1037).collect();
    assert_eq!(labels, want, "{what}: not every row once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_parallel_ranks_take_equal_steps_and_read_every_row_once() {
    use streamload::distribute::ShardPolicy;
    // By record: 87 rows over 3 ranks, 29 each, runs crossing the file boundary.
    let by_record = ranks(ShardPolicy::Record, 3, None).await;
    for (rank, rows) in by_record.iter().enumerate() {
        assert_eq!(rows.len(), 29, "rank {rank}");
        assert!(rows.iter().all(|(_, padded)| !padded));
    }
    assert_eq!(by_record[0][..3], [(0, false), (1, false), (2, false)]);
    assert_eq!(by_record[1][..2], [(29, false), (30, false)]);
    assert_eq!(by_record[2][..2], [(1008, false), (1009, false)]);
    assert_covered_once(&by_record, "by record");

    // By file: 50 and 37 rows, the second rank padded to 50.
    let by_file = ranks(ShardPolicy::File, 2, None).await;
    assert_eq!(by_file[0].len(), 50);
    assert_eq!(by_file[1].len(), 50);
    assert_eq!(by_file[1].iter().filter(|(_, p)| *p).count(), 13);
    assert_covered_once(&by_file, "by file");

    // Slices of 16 by record: 4 + 3 slices over 2 ranks (4 steps each, one padded).
    let sliced = ranks(ShardPolicy::Record, 2, Some(16)).await;
    assert_covered_once(&sliced, "slices by record");

    // A selection of rows 10..30 of each file, by record over 2 ranks: 20 rows each.
    let mut selected = Vec::new();
    for rank in 0..2 {
        let source = Hdf5Dataset::new(scenes(), "/scenes/labels")
            .select_rows(10..30)
            .shard_source::<i64>();
        let plan = streamload::distribute::Distribute::new(rank, 2)
            .policy(ShardPolicy::Record)
            .plan(source)
            .await
            .unwrap();
        let labels: Vec<i64> = plan
            .dataset()
            .collect()
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.item[[]])
            .collect();
        assert_eq!(labels.len(), 20, "rank {rank}");
        selected.extend(labels);
    }
    let want: Vec<i64> = (10..30).chain(1010..1030).collect();
    assert_eq!(selected, want);

    // A rank's epoch resumed from a checkpoint equals the uninterrupted one (rank 1's run
    // starts at row 29 of the first file and ends at row 21 of the second).
    let plan = || async {
        streamload::distribute::Distribute::new(1, 3)
            .policy(ShardPolicy::Record)
            .plan(
                Hdf5Dataset::new(scenes(), "/scenes/points")
                    .with_labels("/scenes/labels")
                    .shard_source_labeled::<f32, i64>(),
            )
            .await
            .unwrap()
    };
    let (first, again) = (plan().await, plan().await);
    let whole = first.dataset().collect().await.unwrap();
    for k in [1, 20, 22] {
        let resumed = take_then_resume(|| again.dataset(), k).await.unwrap();
        assert_eq!(resumed, whole, "rank 1 resumed after {k}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hyperslab_reads_the_values_h5py_reads_and_out_of_bounds_is_an_error() {
    // /gzip is (40, 4, 5): rows 3..20, columns 1..3 of axis 1, all of axis 2, in slices of 6.
    let want = expected("filters.h5:/gzip")["values"]
        .as_array()
        .unwrap()
        .clone();
    let at = |i: usize, j: usize, k: usize| want[i * 20 + j * 5 + k].as_f64().unwrap() as f32;
    let slices = Hdf5Dataset::new([data("filters.h5")], "/gzip")
        .select([3..20, 1..3])
        .slices(6)
        .build::<f32>()
        .collect()
        .await
        .unwrap();
    let shapes: Vec<Vec<usize>> = slices.iter().map(|s| s.shape().to_vec()).collect();
    assert_eq!(shapes, [vec![6, 2, 5], vec![6, 2, 5], vec![5, 2, 5]]);
    for (n, slice) in slices.iter().enumerate() {
        for ((i, j, k), v) in slice
            .view()
            .into_dimensionality::<ndarray::Ix3>()
            .unwrap()
            .indexed_iter()
        {
            assert_eq!(
                *v,
                at(3 + n * 6 + i, 1 + j, k),
                "slice {n} at {:?}",
                (i, j, k)
            );
        }
    }

    // With labels: the selected rows' labels.
    let rows = Hdf5Dataset::new([data("scenes-1.h5")], "/scenes/points")
        .with_labels("/scenes/labels")
        .select([10..14, 0..16, 2..3])
        .build_labeled::<f32, i64>()
        .collect()
        .await
        .unwrap();
    let labels: Vec<i64> = rows.iter().map(|(_, l)| l[[]]).collect();
    assert_eq!(labels, [1010, 1011, 1012, 1013]);
    assert_eq!(rows[0].0.shape(), [16, 1]);

    // Out of bounds, or more ranges than axes: an error naming the file, dataset and shape.
    let too_many_rows = std::iter::once(0..41).collect();
    for select in [
        too_many_rows,
        vec![0..4, 0..4, 0..5, 0..1],
        vec![0..4, 3..9],
    ] {
        let mut epoch = Hdf5Dataset::new([data("filters.h5")], "/gzip")
            .select(select.clone())
            .build::<f32>()
            .iter();
        let err = epoch.next().await.unwrap().unwrap_err();
        let err = format!("{err:#}");
        assert!(
            err.contains("filters.h5")
                && err.contains("dataset `/gzip`")
                && err.contains("is outside its shape [40, 4, 5]"),
            "{select:?}: {err}"
        );
        assert!(
            epoch.next().await.is_none(),
            "{select:?}: more than one error"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_patches_are_h5py_values_drawn_again_on_resume_and_anew_each_epoch() {
    // Patches of 4 rows and 8 of the 16 points, with their rows' labels.
    let make = |seed: u64| {
        Hdf5Dataset::new(scenes(), "/scenes/points")
            .with_labels("/scenes/labels")
            .patches([4, 8], 6, seed)
            .build_labeled::<f32, i64>()
    };
    let h5py: Vec<(Vec<f32>, i64)> = scene_rows("scenes-0.h5")
        .into_iter()
        .chain(scene_rows("scenes-1.h5"))
        .collect();
    let row_of = |label: i64| h5py.iter().find(|(_, l)| *l == label).unwrap().0.clone();
    let patches = make(3).collect().await.unwrap();
    assert_eq!(patches.len(), 12);
    let mut origins = Vec::new();
    for (n, (points, labels)) in patches.iter().enumerate() {
        assert_eq!(points.shape(), [4, 8, 3]);
        let labels: Vec<i64> = labels.iter().copied().collect();
        assert!(labels.windows(2).all(|w| w[1] == w[0] + 1), "{labels:?}");
        // Files interleave: patch j of file 0, then of file 1.
        assert_eq!(labels[0] >= 1000, n % 2 == 1, "patch {n}");
        // Its points are h5py's, at one column offset for all its rows.
        let offset = (0..=8)
            .find(|&c| {
                (0..4).all(|i| {
                    let row = row_of(labels[i]);
                    let got: Vec<f32> = points
                        .index_axis(ndarray::Axis(0), i)
                        .iter()
                        .copied()
                        .collect();
                    got == row[c * 3..(c + 8) * 3]
                })
            })
            .unwrap_or_else(|| panic!("patch {n} is not h5py's values at any offset"));
        origins.push((labels[0], offset));
    }
    // Drawn again from the same seed; another seed, or the next epoch, draws others.
    assert_eq!(make(3).collect().await.unwrap(), patches);
    assert_ne!(make(4).collect().await.unwrap(), patches);
    let dataset = make(3);
    let first = dataset.collect().await.unwrap();
    let second = dataset.collect().await.unwrap();
    assert_eq!(first, patches);
    assert_ne!(second, patches, "the second epoch draws other patches");
    assert!(
        origins
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 6
    );

    // Two data-parallel ranks by record read the same patches between them (6 each).
    let mut ranked = Vec::new();
    for rank in 0..2 {
        let source = Hdf5Dataset::new(scenes(), "/scenes/points")
            .with_labels("/scenes/labels")
            .patches([4, 8], 6, 3)
            .shard_source_labeled::<f32, i64>();
        let plan = streamload::distribute::Distribute::new(rank, 2)
            .policy(streamload::distribute::ShardPolicy::Record)
            .plan(source)
            .await
            .unwrap();
        let items = plan.dataset().collect().await.unwrap();
        assert_eq!(items.len(), 6, "rank {rank}");
        ranked.extend(items.into_iter().map(|d| d.item));
    }
    let key = |p: &(ArrayD<f32>, ArrayD<i64>)| {
        (
            p.1.iter().copied().collect::<Vec<_>>(),
            p.0.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        )
    };
    let mut ranked: Vec<_> = ranked.iter().map(key).collect();
    let mut all: Vec<_> = patches.iter().map(key).collect();
    ranked.sort();
    all.sort();
    assert_eq!(ranked, all);

    // Resumed mid-epoch: the same patches.
    for k in [0, 1, 5, 12] {
        assert_eq!(
            take_then_resume(|| make(3), k).await.unwrap(),
            patches,
            "after {k}"
        );
    }

    // A patch larger than a file's dataset: an error naming it.
    let err = Hdf5Dataset::new(scenes(), "/scenes/points")
        .patches([40, 8], 1, 0)
        .build::<f32>()
        .collect()
        .await
        .unwrap_err();
    let err = format!("{err:#}");
    assert!(
        err.contains("scenes-1.h5")
            && err.contains("a patch of shape [40, 8] does not fit in its shape [37, 16, 3]"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_lists_groups_datasets_and_attributes_as_h5py_wrote_them() {
    use streamload::format::hdf5::{AttributeValue, inspect};
    let contents = inspect(data("types.h5")).await.unwrap();
    let groups: Vec<&str> = contents.groups.iter().map(|g| g.path.as_str()).collect();
    assert_eq!(groups, ["/", "/chunked", "/contiguous", "/strings"]);
    let chunked = &contents.groups[1];
    assert_eq!(
        chunked.attributes["note"],
        AttributeValue::Strings(vec!["chunks of (5, 2)".into()])
    );
    assert_eq!(
        chunked.attributes["rows"],
        AttributeValue::Integers(vec![23])
    );
    // Every dataset expected.json describes, with its shape and chunks.
    let text = std::fs::read_to_string(data("expected.json")).unwrap();
    let all: Value = serde_json::from_str(&text).unwrap();
    let mut want: Vec<String> = all["datasets"]
        .as_object()
        .unwrap()
        .keys()
        .filter_map(|k| k.strip_prefix("types.h5:").map(str::to_string))
        .collect();
    want.sort();
    let mut got: Vec<String> = contents.datasets.iter().map(|d| d.path.clone()).collect();
    got.sort();
    assert_eq!(got, want);
    for dataset in &contents.datasets {
        let entry = expected(&format!("types.h5:{}", dataset.path));
        let shape: Vec<u64> = shape(&entry).into_iter().map(|d| d as u64).collect();
        assert_eq!(dataset.shape, shape, "{}", dataset.path);
        let chunks = entry["chunks"]
            .as_array()
            .map(|c| c.iter().map(|d| d.as_u64().unwrap()).collect::<Vec<u64>>());
        assert_eq!(dataset.chunks, chunks, "{}", dataset.path);
    }
    let int16 = contents
        .datasets
        .iter()
        .find(|d| d.path == "/contiguous/int16")
        .unwrap();
    assert_eq!(int16.dtype, "int16");

    let err = inspect(data("no-such.h5")).await.unwrap_err();
    assert!(format!("{err:#}").contains("no-such.h5"), "{err:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_faults_are_retried_and_a_missing_object_fails_fast_naming_it() {
    use std::sync::atomic::Ordering;
    let server = s3::MemoryS3::default();
    for name in ["scenes-0.h5", "scenes-1.h5"] {
        server.insert("h5-faulty", name, std::fs::read(data(name)).unwrap().into());
    }
    let addr = s3::memory_s3_server(server.clone(), "AKIDH5", "h5-faulty-secret").await;
    // Throttled (503 Slow Down) and cut connections, behind a proxy; object_store's own
    // retries off, so streamload's retries and resumes do all the work.
    let faults = Arc::new(s3::Faults {
        slow_downs: 4.into(),
        cuts: 3.into(),
        cut_after: 3_000,
        ..Default::default()
    });
    let proxy = s3::fault_proxy(addr, Arc::clone(&faults)).await;
    let store = s3::s3_store_retrying(proxy, "h5-faulty", "AKIDH5", "h5-faulty-secret", 0);
    let options = streamload::storage::ReadOptions::default().backoff(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_millis(50),
    );
    streamload::storage::register_with("s3://h5-faulty", store, options).unwrap();
    let urls = ["s3://h5-faulty/scenes-0.h5", "s3://h5-faulty/scenes-1.h5"];
    let remote = Hdf5Dataset::new(urls, "/scenes/points")
        .with_labels("/scenes/labels")
        .build_labeled::<f32, i64>()
        .collect()
        .await
        .unwrap();
    assert_eq!(flat(&remote), flat(&labeled(2).collect().await.unwrap()));
    assert_eq!(
        faults.slow_downs.load(Ordering::SeqCst),
        0,
        "every 503 was answered"
    );
    assert!(
        faults.fired.load(Ordering::SeqCst) > 0,
        "connections were cut"
    );

    // An object that is not there: one error naming it, in seconds.
    let started = std::time::Instant::now();
    let mut epoch = Hdf5Dataset::new(["s3://h5-faulty/missing.h5"], "/scenes/points")
        .build::<f32>()
        .iter();
    let err = format!("{:#}", epoch.next().await.unwrap().unwrap_err());
    assert!(err.contains("s3://h5-faulty/missing.h5"), "{err}");
    assert!(epoch.next().await.is_none());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn public_types_are_send_sync_and_debug() {
    fn check<T: Send + Sync + Clone + std::fmt::Debug>(_: &T) {}
    check(&Hdf5Dataset::new(["a.h5"], "/x"));
    check(&Hdf5Dataset::new(["a.h5"], "/x").shard_source::<f32>());
    fn send<T: Send>(_: &T) {}
    send(&Hdf5Dataset::new(["a.h5"], "/x").build::<f32>().iter());
    send(
        &Hdf5Dataset::new(["a.h5"], "/x")
            .with_labels("/y")
            .build_labeled::<String, i64>()
            .iter(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_a_file_that_failed_goes_on_past_it() {
    // A file that is not HDF5 is an error before every row (its plan failed). A resume from
    // after that error goes on with the next rows, as the epoch did (it gave the error again).
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.h5");
    std::fs::write(&bad, b"not an hdf5 file").unwrap();
    for parallel in [1, 2] {
        let files = vec![data("scenes-0.h5"), bad.clone(), data("scenes-1.h5")];
        let make = move || {
            Hdf5Dataset::new(files.clone(), "/scenes/labels")
                .slices(7)
                .num_parallel_reads(parallel)
                .build::<i64>()
        };
        assert_eq!(
            with_errors::assert_exact_with_errors(make, 0..=1000).await,
            1,
            "{parallel} parallel reads"
        );
    }
}
