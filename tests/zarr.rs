//! Zarr: stores written by zarr-python (v2 and v3; every numeric width, float16, bool,
//! big-endian; blosc, zstd, gzip, crc32c, transpose and Fortran order, sharding, `/` chunk
//! keys; chunks never written) read back value for value against what zarr-python read
//! (scripts/zarr_conformance.py wrote tests/data/zarr/), rows, slices, chunks and patches,
//! labels, sharding across ranks, object storage (with faults), resume (mid-epoch and
//! through a shuffle buffer), a changed store refused, and bad input (clean errors naming the
//! store, array and chunk; never a panic, never a fill value for a damaged chunk).
#![cfg(feature = "zarr")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use streamload::Dataset;
use streamload::format::zarr::{ArrayD, Element, ZarrDataset, f16};

#[path = "support/s3.rs"]
mod s3;

#[path = "support/with_errors.rs"]
mod with_errors;

#[path = "support/arrays.rs"]
mod arrays;
use arrays::{flat, float, floats, int, same, take_then_resume};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/zarr")
        .join(name)
}

/// What zarr-python read back, by `store:array`.
fn expected(key: &str) -> Value {
    let text = std::fs::read_to_string(data("expected.json")).expect("expected values");
    let all: Value = serde_json::from_str(&text).expect("json");
    all["arrays"][key].clone()
}

fn shape(entry: &Value) -> Vec<usize> {
    entry["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

/// Every row of `array` in `store`, stacked back into one array (read as chunks).
async fn read_all<T: Element>(store: &Path, array: &str) -> anyhow::Result<ArrayD<T>> {
    let chunks = ZarrDataset::new([store], array)
        .chunks()
        .build::<T>()
        .collect()
        .await?;
    let views: Vec<_> = chunks.iter().map(|r| r.view()).collect();
    Ok(ndarray::concatenate(ndarray::Axis(0), &views)?)
}

/// Reads `store:array` as `T` and compares shape and values with zarr-python's, each value
/// turned into JSON by `to_json`.
async fn check<T: Element>(store: &str, array: &str, to_json: impl Fn(&T) -> Value) {
    let entry = expected(&format!("{store}:{array}"));
    assert!(!entry.is_null(), "no expected values for {store}:{array}");
    let read = read_all::<T>(&data(store), array)
        .await
        .unwrap_or_else(|e| panic!("{store}:{array}: {e:#}"));
    assert_eq!(read.shape(), shape(&entry), "{store}:{array}");
    let got: Vec<Value> = read.iter().map(&to_json).collect();
    let want = entry["values"].as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{store}:{array}");
    for (i, (got, want)) in got.iter().zip(want).enumerate() {
        assert!(
            same(got, want),
            "{store}:{array}: element {i} is {got}, zarr-python read {want}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_numeric_type_in_v2_and_v3_reads_as_zarr_python_read_it() {
    for store in ["v3.zarr", "v2.zarr"] {
        check::<i8>(store, "int8", int).await;
        check::<i16>(store, "int16", int).await;
        check::<i32>(store, "int32", int).await;
        check::<i64>(store, "int64", int).await;
        check::<u8>(store, "uint8", int).await;
        check::<u16>(store, "uint16", int).await;
        check::<u32>(store, "uint32", int).await;
        check::<u64>(store, "uint64", int).await;
        check::<f16>(store, "float16", |v| Value::from(v.to_f64())).await;
        check::<f32>(store, "float32", float).await;
        check::<f64>(store, "float64", float).await;
        check::<bool>(store, "bool", |v| Value::from(*v)).await;
    }
    check::<i32>("v2.zarr", "int32be", int).await;
    check::<f64>("v2.zarr", "float64be", float).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_reads_as_zarr_python_read_it() {
    for name in [
        "blosc_lz4",
        "blosc_zstd_bitshuffle",
        "zstd",
        "gzip",
        "gzip_crc32c",
        "big_endian",
        "transpose",
        "raw",
        "sharded",
        "sharded_rows",
        "sharded_zstd_rows",
    ] {
        check::<f32>("v3.zarr", &format!("codecs/{name}"), float).await;
    }
    for name in ["blosc_lz4", "zstd", "gzip", "raw", "fortran", "slash"] {
        check::<f32>("v2.zarr", &format!("codecs/{name}"), float).await;
    }
    // A leading `/` names the same array.
    assert_eq!(
        read_all::<f32>(&data("v3.zarr"), "/codecs/sharded")
            .await
            .unwrap(),
        read_all::<f32>(&data("v3.zarr"), "codecs/sharded")
            .await
            .unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_never_written_is_the_fill_value_as_the_spec_says() {
    for store in ["v3.zarr", "v2.zarr"] {
        // /partial: chunks of 5 rows, rows 5..10 and 15..20 never written, fill value -1.
        check::<f32>(store, "partial", float).await;
        let rows = ZarrDataset::new([data(store)], "partial")
            .build::<f32>()
            .collect()
            .await
            .unwrap();
        assert_eq!(rows.len(), 20);
        assert!(rows[7].iter().all(|&v| v == -1.0), "{store}");
        assert_eq!(rows[10][[0]], 20.0, "{store}");
    }
}

fn scenes() -> [PathBuf; 2] {
    [data("scenes-0.zarr"), data("scenes-1.zarr")]
}

/// zarr-python's rows of `points` and `labels` in `store`: (points, label) per row.
fn scene_rows(store: &str) -> Vec<(Vec<f32>, i64)> {
    let points = expected(&format!("{store}:points"));
    let labels = expected(&format!("{store}:labels"));
    arrays::scene_rows(&points, &labels)
}

fn labeled(parallel: usize) -> Dataset<(ArrayD<f32>, ArrayD<i64>)> {
    ZarrDataset::new(scenes(), "points")
        .with_labels("labels")
        .num_parallel_reads(parallel)
        .build_labeled::<f32, i64>()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_with_labels_are_zarr_python_rows_interleaved_by_block_across_stores() {
    let rows = labeled(2).collect().await.unwrap();
    let got = flat(&rows);
    assert_eq!(got.len(), 50 + 37);
    // Each store fits in one block (under 1 MiB): the first store's rows, then the second's.
    let mut want = scene_rows("scenes-0.zarr");
    want.extend(scene_rows("scenes-1.zarr"));
    assert_eq!(got, want);
    assert_eq!(flat(&labeled(1).collect().await.unwrap()), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_and_slices_interleave_stores_and_shards_split_them() {
    let labels = |ds: ZarrDataset| async move {
        ds.build::<i64>()
            .collect()
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.into_iter().collect::<Vec<i64>>())
            .collect::<Vec<_>>()
    };
    let range = |a: i64, b: i64| (a..b).collect::<Vec<i64>>();
    // `labels` has chunks of 20 rows in both stores.
    let chunks = labels(ZarrDataset::new(scenes(), "labels").chunks()).await;
    assert_eq!(
        chunks,
        [
            range(0, 20),
            range(1000, 1020),
            range(20, 40),
            range(1020, 1037),
            range(40, 50),
        ]
    );
    // Selected rows 5..45: cut at the chunk grid, so the first and last are shorter.
    let selected = labels(
        ZarrDataset::new([data("scenes-0.zarr")], "labels")
            .select_rows(5..45)
            .chunks(),
    )
    .await;
    assert_eq!(selected, [range(5, 20), range(20, 40), range(40, 45)]);
    // Slices of 16 from the first row selected.
    let slices = labels(ZarrDataset::new(scenes(), "labels").slices(16)).await;
    assert_eq!(
        slices,
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
        let part = labels(ZarrDataset::new(scenes(), "labels").slices(16).shard(3, i)).await;
        let want: Vec<Vec<i64>> = slices.iter().skip(i as usize).step_by(3).cloned().collect();
        assert_eq!(part, want, "shard {i} of 3");
        shards.extend(part);
    }
    assert_eq!(shards.len(), slices.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_whole_rows_read_as_zarr_python_read_them_in_every_mode() {
    // Inner chunks of whole rows, (6, 4, 5) in shards of (12, 4, 5) over 40 rows (read
    // inner chunk by inner chunk): blocks on and off the inner chunks' grid, within an inner
    // chunk, across shards, over the partial last inner chunk, over an inner chunk left out
    // of its shard's index and a shard left out of the store (both the fill value, -1.5),
    // and a selection of columns (read by zarrs).
    for name in ["sharded_rows", "sharded_zstd_rows"] {
        let array = format!("codecs/{name}");
        let want = floats(&expected(&format!("v3.zarr:{array}")));
        assert!(want.contains(&-1.5), "{name}: no fill value");
        let ds = || ZarrDataset::new([data("v3.zarr")], array.as_str());
        let row = 20;
        let cases = [
            ("blocks", ds(), 0..40),
            ("rows", ds().rows(), 0..40),
            ("chunks", ds().chunks(), 0..40),
            ("slices of 1", ds().slices(1), 0..40),
            ("slices of 5", ds().slices(5), 0..40),
            ("slices of 6", ds().slices(6), 0..40),
            ("slices of 13", ds().slices(13), 0..40),
            (
                "rows 3..37, slices of 4",
                ds().select_rows(3..37).slices(4),
                3..37,
            ),
            ("rows 7..11", ds().select_rows(7..11), 7..11),
        ];
        for (how, ds, rows) in cases {
            let parts = ds.build::<f32>().collect().await.unwrap();
            let got: Vec<f32> = parts.iter().flat_map(|p| p.iter().copied()).collect();
            assert_eq!(got, want[rows.start * row..rows.end * row], "{name}, {how}");
        }
        let columns = ds()
            .select([3..30, 1..3])
            .slices(9)
            .build::<f32>()
            .collect()
            .await
            .unwrap();
        let got: Vec<f32> = columns.iter().flat_map(|p| p.iter().copied()).collect();
        let want: Vec<f32> = (3..30)
            .flat_map(|i| (1..3).flat_map(move |j| (0..5).map(move |k| i * row + j * 5 + k)))
            .map(|at| want[at])
            .collect();
        assert_eq!(got, want, "{name}, columns 1..3");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hyperslab_and_random_patches_are_zarr_python_values() {
    // codecs/sharded is (40, 4, 5): rows 3..20, columns 1..3 of axis 1, in slices of 6.
    let entry = expected("v3.zarr:codecs/sharded");
    let want = entry["values"].as_array().unwrap();
    let at = |i: usize, j: usize, k: usize| want[i * 20 + j * 5 + k].as_f64().unwrap() as f32;
    let slices = ZarrDataset::new([data("v3.zarr")], "codecs/sharded")
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

    // Patches of 4 rows and 8 of the 16 points, with their rows' labels.
    let make = |seed: u64| {
        ZarrDataset::new(scenes(), "points")
            .with_labels("labels")
            .patches([4, 8], 6, seed)
            .build_labeled::<f32, i64>()
    };
    let rows: Vec<(Vec<f32>, i64)> = scene_rows("scenes-0.zarr")
        .into_iter()
        .chain(scene_rows("scenes-1.zarr"))
        .collect();
    let row_of = |label: i64| rows.iter().find(|(_, l)| *l == label).unwrap().0.clone();
    let patches = make(3).collect().await.unwrap();
    assert_eq!(patches.len(), 12);
    for (n, (points, labels)) in patches.iter().enumerate() {
        assert_eq!(points.shape(), [4, 8, 3]);
        let labels: Vec<i64> = labels.iter().copied().collect();
        assert!(labels.windows(2).all(|w| w[1] == w[0] + 1), "{labels:?}");
        assert_eq!(labels[0] >= 1000, n % 2 == 1, "patch {n}");
        (0..=8)
            .find(|&c| {
                (0..4).all(|i| {
                    let got: Vec<f32> = points
                        .index_axis(ndarray::Axis(0), i)
                        .iter()
                        .copied()
                        .collect();
                    got == row_of(labels[i])[c * 3..(c + 8) * 3]
                })
            })
            .unwrap_or_else(|| panic!("patch {n} is not zarr-python's values at any offset"));
    }
    assert_eq!(make(3).collect().await.unwrap(), patches);
    assert_ne!(make(4).collect().await.unwrap(), patches);
    let dataset = make(3);
    assert_eq!(dataset.collect().await.unwrap(), patches);
    assert_ne!(dataset.collect().await.unwrap(), patches, "another epoch");
    for k in [0, 1, 7, 12] {
        assert_eq!(
            take_then_resume(|| make(3), k).await.unwrap(),
            patches,
            "after {k}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_in_object_storage_read_like_local_ones() {
    use object_store::{ObjectStoreExt, PutPayload, memory::InMemory, path::Path as ObjectPath};
    let store = Arc::new(InMemory::new());
    put_tree(&store, "runs").await;
    streamload::storage::register("memory://zarr-remote", store).unwrap();
    let urls = [
        "memory://zarr-remote/runs/scenes-0.zarr",
        "memory://zarr-remote/runs/scenes-1.zarr",
    ];
    let remote = ZarrDataset::new(urls, "points")
        .with_labels("labels")
        .build_labeled::<f32, i64>()
        .collect()
        .await
        .unwrap();
    assert_eq!(flat(&remote), flat(&labeled(2).collect().await.unwrap()));
    // Sharded arrays through object storage: inner chunks that split rows (read by zarrs),
    // and of whole rows (read inner chunk by inner chunk: shards by ranged GETs, one left out
    // of the store, an inner chunk left out of its index), as chunks and as slices.
    for array in ["codecs/sharded", "codecs/sharded_rows"] {
        let local = read_all::<f32>(&data("v3.zarr"), array).await.unwrap();
        for slices in [None, Some(5)] {
            let ds = ZarrDataset::new(["memory://zarr-remote/runs/v3.zarr"], array);
            let ds = match slices {
                None => ds.chunks(),
                Some(k) => ds.slices(k),
            };
            let parts = ds.build::<f32>().collect().await.unwrap();
            let views: Vec<_> = parts.iter().map(|c| c.view()).collect();
            assert_eq!(
                ndarray::concatenate(ndarray::Axis(0), &views).unwrap(),
                local,
                "{array}, slices {slices:?}"
            );
        }
    }

    async fn put_tree(store: &InMemory, under: &str) {
        for (key, path) in files_under(&data(""), "") {
            store
                .put(
                    &ObjectPath::from(format!("{under}/{key}")),
                    PutPayload::from(std::fs::read(path).unwrap()),
                )
                .await
                .unwrap();
        }
    }
}

/// Every file under `dir`, by its `/`-separated path after `prefix`.
fn files_under(dir: &Path, prefix: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let key = format!("{prefix}{}", entry.file_name().to_str().unwrap());
        if entry.file_type().unwrap().is_dir() {
            out.extend(files_under(&entry.path(), &format!("{key}/")));
        } else {
            out.push((key, entry.path()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_epoch_equals_the_uninterrupted_one() {
    let whole = labeled(2).collect().await.unwrap();
    for k in [0, 1, 30, 50, 51, 86, 87] {
        let resumed = take_then_resume(|| labeled(2), k).await.unwrap();
        assert_eq!(resumed, whole, "resumed after {k} rows");
    }
    let chunked = || ZarrDataset::new(scenes(), "points").chunks().build::<f32>();
    let whole = chunked().collect().await.unwrap();
    for k in [0, 3, whole.len()] {
        assert_eq!(
            take_then_resume(chunked, k).await.unwrap(),
            whole,
            "chunks, after {k}"
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

/// A copy of the test store `name` in `dir`.
fn copy_store(name: &str, dir: &Path) -> PathBuf {
    let to = dir.join(name);
    for (key, from) in files_under(&data(name), "") {
        let path = to.join(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::copy(from, path).unwrap();
    }
    to
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_changed_since_the_checkpoint_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let stores = [
        copy_store("scenes-0.zarr", dir.path()),
        copy_store("scenes-1.zarr", dir.path()),
    ];
    let make = || {
        ZarrDataset::new(stores.clone(), "points")
            .chunks()
            .build::<f32>()
    };
    let mut epoch = make().iter();
    for _ in 0..2 {
        epoch.next().await.unwrap().unwrap();
    }
    let checkpoint = epoch.checkpoint().unwrap();
    drop(epoch);
    // One chunk of the second store, not yet read, rewritten with the same bytes and size:
    // its modification time differs.
    let chunk = stores[1].join("points/3.0.0");
    let bytes = std::fs::read(&chunk).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&chunk, &bytes).unwrap();
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

/// The errors of reading `array` of `stores` as `T` (and how many elements it yielded).
async fn errors<T: Element>(ds: ZarrDataset) -> (Vec<String>, usize) {
    let mut epoch = ds.build::<T>().iter();
    let mut errors = Vec::new();
    let mut elements = 0;
    while let Some(item) = epoch.next().await {
        match item {
            Ok(_) => elements += 1,
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    (errors, elements)
}

async fn one_error<T: Element>(ds: ZarrDataset) -> String {
    let (mut errors, _) = errors::<T>(ds).await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    errors.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_an_error_naming_the_store_array_and_chunk() {
    let v3 = data("v3.zarr");
    let err = one_error::<f32>(ZarrDataset::new([v3.clone()], "no/such")).await;
    assert!(
        err.contains("v3.zarr") && err.contains("array `no/such`"),
        "{err}"
    );

    let err = one_error::<f32>(ZarrDataset::new([v3.clone()], "int16")).await;
    assert!(
        err.contains("v3.zarr") && err.contains("holds int16, not f32"),
        "{err}"
    );

    let err = ZarrDataset::new(scenes(), "points")
        .with_labels("nolabels")
        .build_labeled::<f32, i64>()
        .collect()
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("labels `nolabels`"), "{err:#}");

    // A selection out of bounds, or more ranges than axes.
    let too_many_rows = std::iter::once(0..41).collect();
    for select in [
        too_many_rows,
        vec![0..4, 0..4, 0..5, 0..1],
        vec![0..4, 3..9],
    ] {
        let err =
            one_error::<f32>(ZarrDataset::new([v3.clone()], "codecs/zstd").select(select.clone()))
                .await;
        assert!(
            err.contains("v3.zarr")
                && err.contains("array `codecs/zstd`")
                && err.contains("is outside its shape [40, 4, 5]"),
            "{select:?}: {err}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let err = one_error::<f32>(ZarrDataset::new([dir.path().join("missing.zarr")], "x")).await;
    assert!(
        err.contains("missing.zarr") && err.contains("no array `x`"),
        "{err}"
    );

    // An unsupported codec: named when the array is opened.
    let store = copy_store("v3.zarr", dir.path());
    let meta = store.join("codecs/zstd/zarr.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(&meta, text.replace("\"zstd\"", "\"lzma-9000\"")).unwrap();
    let err = one_error::<f32>(ZarrDataset::new([store.clone()], "codecs/zstd")).await;
    assert!(
        err.contains("array `codecs/zstd` cannot be read") && err.contains("lzma-9000"),
        "{err}"
    );

    // Truncated and damaged chunks: errors naming the chunk, never a fill value; the other
    // chunks read.
    for (array, chunk) in [
        ("codecs/gzip_crc32c", "c/2/0/0"),
        ("codecs/blosc_lz4", "c/2/0/0"),
        ("codecs/raw", "c/2/0/0"),
        ("codecs/sharded", "c/1/0/0"),
        // Read inner chunk by inner chunk (inner chunks of whole rows).
        ("codecs/sharded_rows", "c/2/0/0"),
        ("codecs/sharded_zstd_rows", "c/0/0/0"),
    ] {
        let path = store.join(array).join(chunk);
        let bytes = std::fs::read(&path).unwrap();
        for (how, damaged) in [
            ("truncated", bytes[..bytes.len() / 2].to_vec()),
            ("flipped", {
                // Blosc has no checksum: its header's sizes are damaged instead; elsewhere
                // a checksum at the end (gzip's CRC-32, crc32c, the shard index's crc32c).
                let mut b = bytes.clone();
                let at = if array.contains("blosc") {
                    5
                } else {
                    b.len() - 3
                };
                b[at] ^= 0x5a;
                b
            }),
        ] {
            std::fs::write(&path, &damaged).unwrap();
            let (errors, elements) =
                errors::<f32>(ZarrDataset::new([store.clone()], array).chunks()).await;
            if array == "codecs/raw" && how == "flipped" {
                // Raw bytes have no checksum: a flipped byte is a different value.
                assert!(errors.is_empty(), "{errors:?}");
                continue;
            }
            assert_eq!(errors.len(), 1, "{array} {how}: {errors:?}");
            let err = &errors[0];
            assert!(
                err.contains("v3.zarr")
                    && err.contains(&format!("array `{array}`"))
                    && err.contains(&format!("chunk `{array}/{chunk}`")),
                "{array} {how}: {err}"
            );
            let chunks = match array {
                "codecs/sharded" => 2,
                // Four shards, one of them left out of the store (the fill value).
                "codecs/sharded_rows" | "codecs/sharded_zstd_rows" => 4,
                _ => 7,
            };
            assert_eq!(elements, chunks - 1, "{array} {how}");
        }
        std::fs::write(&path, &bytes).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_bytes_in_chunks_are_errors_never_panics_or_wrong_values() {
    let dir = tempfile::tempdir().unwrap();
    let store = copy_store("v3.zarr", dir.path());
    let original = read_all::<f32>(&store, "codecs/gzip_crc32c").await.unwrap();
    let chunks: Vec<(String, PathBuf)> = files_under(&store.join("codecs/gzip_crc32c/c"), "");
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |bound: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) as usize) % bound
    };
    let mut failed = 0;
    for case in 0..60 {
        let (_, path) = &chunks[next(chunks.len())];
        let bytes = std::fs::read(path).unwrap();
        let mut damaged = bytes.clone();
        for _ in 0..1 + next(3) {
            let at = next(damaged.len());
            damaged[at] ^= 1 << next(8);
        }
        std::fs::write(path, &damaged).unwrap();
        let result = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            read_all::<f32>(&store, "codecs/gzip_crc32c"),
        )
        .await
        .unwrap_or_else(|_| panic!("case {case}: reading hung"));
        match result {
            // gzip's CRC-32 and the crc32c codec: no damage reads as other values.
            Ok(read) => assert_eq!(read, original, "case {case}: other values, no error"),
            Err(e) => {
                failed += 1;
                assert!(
                    !matches!(
                        e.downcast_ref::<streamload::Error>(),
                        Some(streamload::Error::WorkerPanicked { .. })
                    ),
                    "case {case}: the reader panicked: {e:#}"
                );
                assert!(
                    format!("{e:#}").contains("chunk `codecs/gzip_crc32c/c/"),
                    "{e:#}"
                );
            }
        }
        std::fs::write(path, &bytes).unwrap();
    }
    assert!(
        failed > 50,
        "only {failed} of 60 damaged chunks were errors"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_parallel_ranks_take_equal_steps_and_read_every_row_once() {
    use streamload::distribute::{Distribute, Remainder, ShardPolicy};
    let ranks = |policy: ShardPolicy, world: usize, chunks: bool| async move {
        let mut out = Vec::new();
        for rank in 0..world {
            let ds = ZarrDataset::new(scenes(), "labels");
            let ds = if chunks { ds.chunks() } else { ds };
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
                    .collect::<Vec<(i64, bool)>>(),
            );
        }
        out
    };
    let covered = |ranks: &[Vec<(i64, bool)>], what: &str| {
        let mut labels: Vec<i64> = ranks
            .iter()
            .flatten()
            .filter(|(_, p)| !p)
            .map(|(l, _)| *l)
            .collect();
        labels.sort_unstable();
        let want: Vec<i64> = (0..50).chain(1000..1037).collect();
        assert_eq!(labels, want, "{what}: not every row once");
    };
    let by_record = ranks(ShardPolicy::Record, 3, false).await;
    for (rank, rows) in by_record.iter().enumerate() {
        assert_eq!(rows.len(), 29, "rank {rank}");
    }
    assert_eq!(by_record[1][..2], [(29, false), (30, false)]);
    covered(&by_record, "by record");
    let by_file = ranks(ShardPolicy::File, 2, false).await;
    assert_eq!((by_file[0].len(), by_file[1].len()), (50, 50));
    covered(&by_file, "by file");
    // Chunks by record: 3 + 2 chunks of 20 rows over 2 ranks.
    covered(
        &ranks(ShardPolicy::Record, 2, true).await,
        "chunks by record",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_faults_are_retried_and_permanent_faults_fail_fast_naming_the_store() {
    use std::sync::atomic::Ordering;
    let server = s3::MemoryS3::default();
    for name in ["scenes-0.zarr", "scenes-1.zarr"] {
        for (key, path) in files_under(&data(name), "") {
            server.insert(
                "zarr-faulty",
                &format!("{name}/{key}"),
                std::fs::read(path).unwrap().into(),
            );
        }
    }
    let addr = s3::memory_s3_server(server.clone(), "AKIDZARR", "zarr-faulty-secret").await;
    // Throttled (503 Slow Down) and cut connections, behind a proxy; object_store's own
    // retries off, so streamload's retries and resumes do all the work.
    let faults = Arc::new(s3::Faults {
        slow_downs: 4.into(),
        cuts: 3.into(),
        cut_after: 1_500,
        ..Default::default()
    });
    let proxy = s3::fault_proxy(addr, Arc::clone(&faults)).await;
    let store = s3::s3_store_retrying(proxy, "zarr-faulty", "AKIDZARR", "zarr-faulty-secret", 0);
    let options = streamload::storage::ReadOptions::default().backoff(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_millis(50),
    );
    streamload::storage::register_with("s3://zarr-faulty", store, options).unwrap();
    let urls = [
        "s3://zarr-faulty/scenes-0.zarr",
        "s3://zarr-faulty/scenes-1.zarr",
    ];
    let remote = ZarrDataset::new(urls, "points")
        .with_labels("labels")
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

    let fails_fast = |url: String| async move {
        let started = std::time::Instant::now();
        let err = one_error::<f32>(ZarrDataset::new([url.clone()], "points")).await;
        assert!(err.contains(&url), "{err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        err
    };
    // A store that is not there (an empty listing): no array, in seconds.
    let err = fails_fast("s3://zarr-faulty/missing.zarr".into()).await;
    assert!(err.contains("no array `points`"), "{err}");
    // Wrong credentials: 403, not retried.
    let forbidden = s3::s3_store_retrying(addr, "zarr-faulty", "AKIDZARR", "wrong-secret", 0);
    streamload::storage::register("s3://zarr-forbidden", forbidden).unwrap();
    let err = fails_fast("s3://zarr-forbidden/scenes-0.zarr".into()).await;
    assert!(
        err.contains("403") || err.contains("Forbidden") || err.contains("Signature"),
        "{err}"
    );
    // A refused connection.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let refused =
        s3::s3_store_retrying(closed, "zarr-refused", "AKIDZARR", "zarr-faulty-secret", 0);
    streamload::storage::register("s3://zarr-refused", refused).unwrap();
    let err = fails_fast("s3://zarr-refused/scenes-0.zarr".into()).await;
    assert!(err.contains("refused") || err.contains("connect"), "{err}");
}

#[test]
fn public_types_are_send_sync_and_debug() {
    fn check<T: Send + Sync + Clone + std::fmt::Debug>(_: &T) {}
    check(&ZarrDataset::new(["a.zarr"], "x"));
    check(&ZarrDataset::new(["a.zarr"], "x").shard_source::<f32>());
    fn send<T: Send>(_: &T) {}
    send(&ZarrDataset::new(["a.zarr"], "x").build::<f32>().iter());
    send(
        &ZarrDataset::new(["a.zarr"], "x")
            .with_labels("y")
            .build_labeled::<u8, i64>()
            .iter(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_a_store_or_chunk_that_failed_goes_on_past_it() {
    // A store with no such array is an error before every chunk (its plan failed), and a
    // damaged chunk is an error in its place. A resume from after either goes on with the
    // next chunks, as the epoch did (it gave the error again, or read the chunk again).
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("scenes-0.zarr");
    for (key, path) in files_under(&data("scenes-0.zarr"), "") {
        let to = copy.join(key);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(path, to).unwrap();
    }
    std::fs::write(copy.join("labels/c/1"), b"garbage, not a chunk").unwrap();
    let missing = dir.path().join("missing.zarr");
    for parallel in [1, 2] {
        let stores = vec![copy.clone(), missing.clone(), data("scenes-1.zarr")];
        let make = move || {
            ZarrDataset::new(stores.clone(), "labels")
                .chunks()
                .num_parallel_reads(parallel)
                .build::<i64>()
        };
        assert_eq!(
            with_errors::assert_exact_with_errors(make, 0..=1000).await,
            2,
            "{parallel} parallel reads"
        );
    }
}
