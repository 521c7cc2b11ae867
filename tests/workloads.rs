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

/// W5r and W5b run on small D2 and D6 and print their figures and one-core decode rates.
#[cfg(feature = "image")]
#[test]
fn image_workloads_w5r_w5b_run_on_small_data() {
    let dir = tempfile::tempdir().expect("temp dir");
    generate(dir.path(), "D2,D6", "200");
    let d6 = files(&dir.path().join("imagenet"));
    assert_eq!(d6.len(), 6, "5 JPEGs and labels.txt: {d6:?}");
    let (h, w) = streamload::image::extract_jpeg_shape(&std::fs::read(&d6[0]).expect("jpeg"))
        .expect("a JPEG");
    assert_eq!((h, w), (375, 500));
    let out = Command::new(workloads())
        .args(["--data", dir.path().to_str().expect("utf-8 path")])
        .args(["--only", "W5r,W5b"])
        .output()
        .expect("run examples/workloads");
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    for name in [
        "W5r",
        "W5b",
        "W5r/decode1-1/4",
        "W5b/decode1-full",
        "W5b/decode1-crop",
        "W5b/decode1-1/2",
    ] {
        let line = lines
            .iter()
            .find(|l| l["workload"] == name)
            .unwrap_or_else(|| panic!("no {name} in {lines:?}"));
        assert!(line["figure"].as_f64().is_some_and(|f| f > 0.0), "{line}");
    }
}

/// `--generate --only D2,D4 --scale-down 100`: D4 keeps its 16 WebDataset shards with 10
/// samples each, made from D2's 20 JPEGs (sample i holds image i mod 20 and its label).
#[cfg(feature = "image")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_writes_d4_from_d2() {
    use streamload::format::WebDataset;
    let dir = tempfile::tempdir().expect("tempdir");
    generate(dir.path(), "D2,D4", "100");
    let shards = files(&dir.path().join("wds"));
    assert_eq!(shards.len(), 16);
    assert!(shards[15].ends_with("wds/train-000015.tar"), "{shards:?}");
    let labels = std::fs::read_to_string(dir.path().join("jpeg/labels.txt")).expect("labels");
    let labels: Vec<i64> = labels
        .lines()
        .map(|l| l.parse().expect("a label"))
        .collect();
    assert_eq!(labels.len(), 20);
    let samples = WebDataset::new(&shards)
        .build()
        .collect()
        .await
        .expect("readable");
    assert_eq!(samples.len(), 160);
    for (i, sample) in samples.iter().enumerate() {
        assert_eq!(sample.key(), format!("s{i:06}"));
        assert_eq!(
            sample.extensions().collect::<Vec<_>>(),
            ["cls", "jpg", "json"]
        );
        assert_eq!(sample.cls().expect("cls"), labels[i % 20]);
        assert_eq!(sample.json().expect("json")["i"], i);
        let jpeg = std::fs::read(dir.path().join(format!("jpeg/{:05}.jpg", i % 20))).expect("D2");
        assert_eq!(sample.get("jpg").expect("jpg")[..], jpeg[..]);
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
