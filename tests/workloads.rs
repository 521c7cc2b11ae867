//! The benchmark driver (`examples/workloads.rs`) run as a process: `--generate` with
//! `--scale-down` writes every data set that many times smaller.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The example binary `cargo test` built beside this test (target/<profile>/examples).
fn workloads() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    profile_dir.join("examples").join("workloads")
}

fn generate(dir: &Path, only: &str, scale_down: &str) {
    let out = Command::new(workloads())
        .args(["--generate", dir.to_str().expect("utf-8 path")])
        .args(["--only", only, "--scale-down", scale_down])
        .output()
        .expect("run examples/workloads (built by cargo test)");
    assert!(out.status.success(), "{out:?}");
}

/// The files of `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("a directory")
        .map(|e| e.expect("an entry").path())
        .collect();
    files.sort();
    files
}

/// `--generate --scale-down 64`: D1 keeps its 16 shards with 8,192 / 64 = 128 records each
/// (plain and GZIP), D3 has 2,000,000 / 64 = 31,250 lines; D2 at 400 has 5 JPEGs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_scales_every_data_set_down() {
    use streamload::format::{Compression, TFRecordDataset};
    let dir = tempfile::tempdir().expect("tempdir");
    generate(dir.path(), "D1,D3", "64");
    for (sub, compression) in [
        ("tfrecord", Compression::None),
        ("tfrecord-gz", Compression::Gzip),
    ] {
        let shards = files(&dir.path().join(sub));
        assert_eq!(shards.len(), 16, "{sub}");
        for shard in shards {
            let records = TFRecordDataset::new([&shard])
                .compression(compression)
                .build()
                .count()
                .await
                .expect("readable");
            assert_eq!(records, 128, "{}", shard.display());
        }
    }
    let text = std::fs::read_to_string(dir.path().join("text/lines.txt")).expect("D3");
    assert_eq!(text.lines().count(), 31_250);
    assert!(!dir.path().join("jpeg").exists(), "--only D1,D3");

    if cfg!(feature = "image") {
        generate(dir.path(), "D2", "400");
        let jpegs = files(&dir.path().join("jpeg"));
        let names: Vec<String> = jpegs
            .iter()
            .map(|p| {
                p.file_name()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "00000.jpg",
                "00001.jpg",
                "00002.jpg",
                "00003.jpg",
                "00004.jpg",
                "labels.txt"
            ]
        );
        let labels = std::fs::read_to_string(dir.path().join("jpeg/labels.txt")).expect("labels");
        assert_eq!(labels.lines().count(), 5);
    }
}

/// `--generate --only D1,D5 --scale-down 64`: D5 holds D1's 16 x 128 Examples as columns, in
/// shard order (label and weights equal), as one row group.
#[cfg(feature = "parquet")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d5_holds_d1s_examples_as_columns() {
    use streamload::format::parquet::{ParquetDataset, column_tensor};
    use streamload::format::{FeatureSpec, ParseSpec, TFRecordDataset, parse_single_example_view};
    use streamload::tensor::DType;
    let dir = tempfile::tempdir().expect("tempdir");
    generate(dir.path(), "D1,D5", "64");
    let spec = ParseSpec::new([
        ("label", FeatureSpec::fixed_len([], DType::Int64)),
        ("weights", FeatureSpec::fixed_len([16], DType::Float32)),
    ])
    .expect("spec");
    let (mut labels, mut weights) = (Vec::new(), Vec::new());
    for shard in files(&dir.path().join("tfrecord")) {
        let records = TFRecordDataset::new([&shard])
            .build()
            .collect()
            .await
            .expect("D1");
        for record in records {
            let example = parse_single_example_view(&record, &spec).expect("an Example");
            labels.push(example.int64("label").expect("label").next().expect("one"));
            weights.extend(example.floats("weights").expect("weights"));
        }
    }
    let batches = ParquetDataset::new([dir.path().join("parquet/train.parquet")])
        .columns(["label", "weights"])
        .batch_size(100_000)
        .build()
        .collect()
        .await
        .expect("D5");
    assert_eq!(batches.len(), 1, "one row group of 2,048 rows");
    let label = column_tensor(&batches[0], "label").expect("label");
    let w = column_tensor(&batches[0], "weights").expect("weights");
    assert_eq!(label.shape(), [2048]);
    assert_eq!(w.shape(), [2048, 16]);
    assert_eq!(label.as_slice::<i64>().expect("int64"), &labels[..]);
    assert_eq!(w.as_slice::<f32>().expect("float"), &weights[..]);
}
