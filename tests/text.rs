//! Text lines as tf.data's `TextLineDataset` reads them, and `list_files`.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use object_store::memory::InMemory;
use object_store::path::Path as StorePath;
use object_store::{ObjectStoreExt, PutPayload};
use streamload::Dataset;
use streamload::format::{Compression, TextLineDataset, list_files};
use streamload::storage::{self, Location};

fn lines(v: &[&str]) -> Vec<Bytes> {
    v.iter()
        .map(|s| Bytes::copy_from_slice(s.as_bytes()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_split_as_tensorflow_splits_them() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cases: [(&str, &[&str]); 6] = [
        ("a\nb\n", &["a", "b"]),             // a final newline adds no empty line
        ("a\nb", &["a", "b"]),               // a last line without newline is kept
        ("a\r\nb\r\n", &["a", "b"]),         // \r\n
        ("a\n\n\nb\n", &["a", "", "", "b"]), // empty lines in between are kept
        ("", &[]),                           // an empty file
        ("\n", &[""]),                       // a file of one empty line
    ];
    for (i, (content, expected)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("{i}.txt"));
        std::fs::write(&path, content).expect("written");
        let got = TextLineDataset::new([&path])
            .build()
            .collect()
            .await
            .expect("readable");
        assert_eq!(got, lines(expected), "{content:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_and_many_files_in_order_or_in_parallel() {
    use async_compression::tokio::write::GzipEncoder;
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let a = dir.path().join("a.txt");
    std::fs::write(&a, "a1\na2\na3\n").expect("written");
    let b = dir.path().join("b.txt.gz");
    let mut gz = GzipEncoder::new(Vec::new());
    gz.write_all(b"b1\nb2\n").await.expect("compressed");
    gz.shutdown().await.expect("finished");
    std::fs::write(&b, gz.into_inner()).expect("written");

    let in_order = TextLineDataset::new([&a, &b])
        .compression(Compression::Auto)
        .build();
    assert_eq!(
        in_order.collect().await.expect("readable"),
        lines(&["a1", "a2", "a3", "b1", "b2"])
    );
    let parallel = TextLineDataset::new([&a, &b])
        .compression(Compression::Auto)
        .num_parallel_reads(2)
        .build();
    assert_eq!(
        parallel.collect().await.expect("readable"),
        lines(&["a1", "b1", "a2", "b2", "a3"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("missing.txt");
    let got: Vec<anyhow::Result<Bytes>> = {
        use futures::StreamExt;
        TextLineDataset::new([&missing])
            .build()
            .iter()
            .collect()
            .await
    };
    assert_eq!(got.len(), 1);
    let err = got[0]
        .as_ref()
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default();
    assert!(err.contains("missing.txt"), "{err}");

    // Plain text read as GZIP.
    let plain = dir.path().join("plain.txt");
    std::fs::write(&plain, "not gzip\n").expect("written");
    let got = TextLineDataset::new([&plain])
        .compression(Compression::Gzip)
        .build()
        .collect()
        .await;
    let err = got.err().map(|e| format!("{e:#}")).unwrap_or_default();
    assert!(err.contains("plain.txt"), "{err}");
}

#[test]
fn list_files_is_sorted_and_fails_on_no_match() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for name in [
        "train-00002.tfrecord",
        "train-00000.tfrecord",
        "train-00001.tfrecord",
        "eval.tfrecord",
    ] {
        std::fs::write(dir.path().join(name), b"").expect("written");
    }
    std::fs::create_dir(dir.path().join("train-dir.tfrecord")).expect("a directory");
    let pattern = format!("{}/train-*.tfrecord", dir.path().display());
    let files = list_files(&pattern).expect("matches");
    let names: Vec<_> = files
        .iter()
        .filter_map(|f| f.file_name()?.to_str())
        .collect();
    // A matching directory is listed too, as TensorFlow lists it.
    assert_eq!(
        names,
        [
            "train-00000.tfrecord",
            "train-00001.tfrecord",
            "train-00002.tfrecord",
            "train-dir.tfrecord"
        ]
    );
    let none =
        list_files(&format!("{}/test-*", dir.path().display())).expect_err("nothing matches");
    assert!(
        none.to_string().contains("No files matched pattern: "),
        "{none}"
    );
    assert!(list_files("[").is_err(), "an invalid pattern is an error");
}

/// Names of the files of one epoch of `ds`.
async fn epoch_names(ds: &Dataset<Location>) -> Vec<String> {
    ds.collect()
        .await
        .expect("listed")
        .iter()
        .map(|f| match f {
            Location::Local(p) => p
                .file_name()
                .and_then(|n| n.to_str())
                .expect("a file name")
                .to_string(),
            Location::Url(u) => u.path().rsplit('/').next().expect("a name").to_string(),
        })
        .collect()
}

fn shard_dir(n: usize) -> (tempfile::TempDir, String, Vec<String>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut names: Vec<String> = (0..n).map(|i| format!("part-{i:03}.txt")).collect();
    for name in &names {
        std::fs::write(dir.path().join(name), b"x\n").expect("written");
    }
    std::fs::write(dir.path().join("other.csv"), b"x\n").expect("written");
    names.sort();
    let pattern = format!("{}/part-*.txt", dir.path().display());
    (dir, pattern, names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dataset_list_files_without_a_seed_is_sorted_every_epoch() {
    let (_dir, pattern, names) = shard_dir(12);
    let ds = Dataset::list_files(&pattern, None);
    assert_eq!(epoch_names(&ds).await, names);
    assert_eq!(epoch_names(&ds).await, names, "the same order in epoch 2");
    // The same files, in the same order, as the synchronous `format::list_files`.
    let sync: Vec<Location> = list_files(&pattern)
        .expect("matches")
        .into_iter()
        .map(Location::Local)
        .collect();
    assert_eq!(ds.collect().await.expect("listed"), sync);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dataset_list_files_with_a_seed_reshuffles_each_epoch_reproducibly() {
    let (_dir, pattern, names) = shard_dir(20);
    let epochs = |seed| {
        let ds = Dataset::list_files(&pattern, Some(seed));
        async move {
            let mut orders = Vec::new();
            for _ in 0..4 {
                orders.push(epoch_names(&ds).await);
            }
            orders
        }
    };
    let first = epochs(7).await;
    for order in &first {
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, names, "every file exactly once: {order:?}");
        assert_ne!(*order, names, "shuffled");
    }
    for (i, a) in first.iter().enumerate() {
        for b in &first[i + 1..] {
            assert_ne!(a, b, "a different order each epoch");
        }
    }
    // A new recipe with the same seed gives the same sequence of orders; another seed does not.
    assert_eq!(epochs(7).await, first);
    assert_ne!(epochs(8).await, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dataset_list_files_lists_urls_and_reads_them() {
    let store = Arc::new(InMemory::new());
    for (name, text) in [
        ("shards/b.txt", "b1\nb2\n"),
        ("shards/a.txt", "a1\n"),
        ("shards/c.csv", "no\n"),
        ("other/d.txt", "no\n"),
    ] {
        store
            .put(&StorePath::from(name), PutPayload::from(text))
            .await
            .expect("put");
    }
    storage::register("memory://list-files-test", store).expect("register");
    let pattern = "memory://list-files-test/shards/*.txt";
    let ds = Dataset::list_files(pattern, None);
    assert_eq!(epoch_names(&ds).await, ["a.txt", "b.txt"]);
    let files = ds.collect().await.expect("listed");
    assert!(files.iter().all(|f| matches!(f, Location::Url(_))));
    let read = ds
        .interleave(2, 1, |f| TextLineDataset::new([f]).build())
        .collect()
        .await
        .expect("read");
    assert_eq!(read, lines(&["a1", "b1", "b2"]));
    let shuffled = Dataset::list_files(pattern, Some(1));
    let mut got = epoch_names(&shuffled).await;
    got.sort();
    assert_eq!(got, ["a.txt", "b.txt"]);
    let none = Dataset::list_files("memory://list-files-test/shards/*.parquet", None)
        .collect()
        .await
        .expect_err("nothing matches");
    assert!(
        format!("{none:#}").contains("memory://list-files-test/shards/*.parquet"),
        "{none:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dataset_list_files_no_match_is_an_error_at_the_first_poll() {
    let (dir, _, _) = shard_dir(2);
    let pattern = format!("{}/test-*", dir.path().display());
    let ds = Dataset::list_files(&pattern, Some(3));
    let mut epoch = ds.iter();
    let first = epoch.next().await.expect("an element");
    let err = first.expect_err("nothing matches");
    assert_eq!(
        err.to_string(),
        format!("No files matched pattern: {pattern}")
    );
    assert!(
        epoch.next().await.is_none(),
        "the epoch ends after the error"
    );
    // An invalid pattern is an error too, naming it.
    let bad = Dataset::list_files("[", None)
        .collect()
        .await
        .expect_err("invalid");
    assert!(format!("{bad:#}").contains('['), "{bad:#}");
}

#[tokio::test]
async fn lines_across_any_block_boundaries_read_the_same() {
    use futures::StreamExt;
    let text = b"first line\r\n\nthe third line is a little longer\r\nlast";
    let expected = lines(&[
        "first line",
        "",
        "the third line is a little longer",
        "last",
    ]);
    for size in [1, 2, 3, 7, 11, 64] {
        let chunks: Vec<std::io::Result<Bytes>> = text
            .chunks(size)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let reader = tokio_util::io::StreamReader::new(futures::stream::iter(chunks));
        let got: Vec<Bytes> = streamload::format::text_lines(reader, "chunked")
            .map(|l| l.expect("readable"))
            .collect()
            .await;
        assert_eq!(got, expected, "blocks of {size}");
    }
}

/// `n` numbered lines of about 50 bytes, every third ending in `\r\n`.
fn numbered(n: usize, prefix: &str) -> (String, Vec<Bytes>) {
    let mut text = String::new();
    let mut expected = Vec::new();
    for i in 0..n {
        let line = format!("{prefix} {i:08} the quick brown fox jumps over it");
        text.push_str(&line);
        text.push_str(if i % 3 == 0 { "\r\n" } else { "\n" });
        expected.push(Bytes::from(line));
    }
    (text, expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_in_order_arrive_whole_across_chunks_and_errors() {
    use async_compression::tokio::write::GzipEncoder;
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    // More lines than one hand-over holds (4,096), lines larger than one (1 MiB), a GZIP
    // file, and a file that is missing.
    let (a_text, mut expected) = numbered(10_000, "a");
    let a = dir.path().join("a.txt");
    std::fs::write(&a, a_text).expect("written");
    let big: Vec<String> = (0..5).map(|i| format!("{i}").repeat(700_000)).collect();
    let b = dir.path().join("b.txt");
    std::fs::write(&b, big.join("\n")).expect("written");
    expected.extend(big.iter().map(|l| Bytes::from(l.clone())));
    let missing = dir.path().join("missing.txt");
    let (c_text, c_lines) = numbered(5_000, "c");
    let c = dir.path().join("c.txt.gz");
    let mut gz = GzipEncoder::new(Vec::new());
    gz.write_all(c_text.as_bytes()).await.expect("compressed");
    gz.shutdown().await.expect("finished");
    std::fs::write(&c, gz.into_inner()).expect("written");
    expected.extend(c_lines);

    let ds = TextLineDataset::new([&a, &b, &missing, &c])
        .compression(Compression::Auto)
        .build();
    let got: Vec<anyhow::Result<Bytes>> = ds.iter().collect().await;
    assert_eq!(got.len(), expected.len() + 1);
    let error = got
        .iter()
        .position(|r| r.is_err())
        .expect("the missing file is an error element");
    assert_eq!(error, 10_005, "in the missing file's place");
    let message = format!("{:#}", got[error].as_ref().expect_err("an error"));
    assert!(message.contains("missing.txt"), "{message}");
    let lines: Vec<Bytes> = got.into_iter().filter_map(Result::ok).collect();
    assert!(lines == expected, "lines differ");
    // ignore_errors drops the error and keeps every line, in order.
    let kept = ds.ignore_errors().collect().await.expect("readable");
    assert!(kept == expected, "lines differ after ignore_errors");
}

#[tokio::test]
async fn files_in_order_read_on_a_current_thread_runtime() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (text, expected) = numbered(9_000, "x");
    let path = dir.path().join("x.txt");
    std::fs::write(&path, text).expect("written");
    let got = TextLineDataset::new([&path])
        .build()
        .collect()
        .await
        .expect("readable");
    assert!(got == expected, "lines differ");
}

#[test]
fn without_a_runtime_the_epoch_yields_an_error() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("x.txt");
    std::fs::write(&path, "a\nb\n").expect("written");
    let mut epoch = TextLineDataset::new([&path]).build().iter();
    let first = futures::executor::block_on(epoch.next());
    let err = first
        .and_then(Result::err)
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("runtime"), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reader_stays_a_few_chunks_ahead_and_stops_with_its_epoch() {
    use futures::StreamExt;
    use std::time::Duration;
    let dir = tempfile::tempdir().expect("a temporary directory");
    // ~16 MB: 300,000 lines of ~54 bytes.
    let (text, expected) = numbered(300_000, "z");
    let path = dir.path().join("z.txt");
    std::fs::write(&path, &text).expect("written");
    let metrics = tokio::runtime::Handle::current().metrics();
    let tasks_before = metrics.num_alive_tasks();

    let mut epoch = TextLineDataset::new([&path]).build().iter();
    let first = epoch.next().await.and_then(Result::ok);
    assert_eq!(first.as_ref(), expected.first());
    // The consumer stops; the reader may run ahead only by what its hand-overs hold (three
    // chunks of 4,096 lines, ~0.7 MB here) plus the block it is cutting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reader = epoch
        .stats()
        .snapshot()
        .into_iter()
        .find(|s| s.name == "text_line")
        .expect("a text_line stage");
    assert!(
        reader.bytes <= 3 << 20,
        "the reader cut {} bytes of {} ahead of a stopped consumer",
        reader.bytes,
        text.len()
    );
    assert!(
        metrics.num_alive_tasks() > tasks_before,
        "a reader task runs"
    );

    drop(epoch);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while metrics.num_alive_tasks() > tasks_before {
        assert!(
            std::time::Instant::now() < deadline,
            "the reader task outlived its epoch"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_file_is_an_error_naming_its_line_then_the_next_file_is_read() {
    use async_compression::tokio::write::GzipEncoder;
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (text, lines) = numbered(20_000, "t");
    let mut gz = GzipEncoder::new(Vec::new());
    gz.write_all(text.as_bytes()).await.expect("compressed");
    gz.shutdown().await.expect("finished");
    let mut compressed = gz.into_inner();
    compressed.truncate(compressed.len() / 2);
    let damaged = dir.path().join("damaged.txt.gz");
    std::fs::write(&damaged, &compressed).expect("written");
    let next = dir.path().join("next.txt");
    std::fs::write(&next, "after\n").expect("written");

    let got: Vec<anyhow::Result<Bytes>> = TextLineDataset::new([&damaged, &next])
        .compression(Compression::Auto)
        .build()
        .iter()
        .collect()
        .await;
    let error = got.iter().position(Result::is_err).expect("an error");
    assert!(error > 0 && error < lines.len(), "{error} lines before it");
    let read: Vec<Bytes> = got[..error]
        .iter()
        .filter_map(|l| l.as_ref().ok().cloned())
        .collect();
    assert!(read[..] == lines[..error], "the lines before the damage");
    // Data loss at the line being read (0-based), naming the file.
    let message = format!("{:#}", got[error].as_ref().expect_err("an error"));
    assert!(
        message.starts_with(&damaged.display().to_string()),
        "{message}"
    );
    assert!(message.contains(&format!("(record {error})")), "{message}");
    assert_eq!(got.len(), error + 2, "the damaged file ends at its error");
    assert_eq!(got[error + 1].as_ref().ok(), Some(&Bytes::from("after")));
}

#[path = "support/formats_more.rs"]
mod formats_more;

/// Cases where streamload deliberately differs from TensorFlow, with the reason.
const TEXT_DIFFERENCES: &[(&str, &str)] = &[(
    "gzip_truncated",
    "TensorFlow ends a truncated GZIP stream silently, yielding the partial last line; \
     streamload yields the whole lines, then an error naming the file (the data is damaged)",
)];

/// `formats_more.json`: line endings (`\n`, `\r\n`, lone `\r`), empty lines and files, UTF-8
/// and invalid UTF-8, GZIP/ZLIB, small buffers, several files, and errors, as TensorFlow
/// 2.21's `TextLineDataset` read them. Elements are compared up to TensorFlow's error, then
/// streamload must fail there too, naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn formats_more_text_cases_match_tensorflow() {
    use futures::StreamExt;
    let cases = formats_more::cases("text_line");
    assert!(cases.len() >= 25);
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        if TEXT_DIFFERENCES.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let files = formats_more::files(case);
        let mut ds = TextLineDataset::new(&files).compression(formats_more::compression(case));
        if let Some(size) = case["buffer_size"].as_u64() {
            ds = ds.buffer_size(size as usize);
        }
        if let Some(n) = case["num_parallel_reads"].as_u64() {
            ds = ds.num_parallel_reads(n as usize);
        }
        let got: Vec<anyhow::Result<Bytes>> = ds.build().iter().collect().await;
        let yielded = formats_more::assert_output_prefix(case, &got);
        match formats_more::error_message(case) {
            None => assert_eq!(got.len(), yielded, "{name}: {:?}", got.last()),
            Some(tf) => {
                let err = got
                    .get(yielded)
                    .and_then(|r| r.as_ref().err())
                    .unwrap_or_else(|| panic!("{name}: no error where TensorFlow raised {tf}"));
                // The file TensorFlow failed on (the last one it opened) is named.
                let file = files
                    .iter()
                    .find(|f| format!("{err:#}").contains(&f.display().to_string()));
                assert!(file.is_some(), "{name}: {err:#} names no file ({tf})");
                // TensorFlow's DataLossError is streamload's DataLoss, with the record and
                // offset; a damaged compressed stream says "inflate() failed" as TensorFlow.
                if case["error"]["class"] == "DataLossError" {
                    assert!(
                        matches!(
                            err.downcast_ref::<streamload::Error>(),
                            Some(streamload::Error::DataLoss { .. })
                        ),
                        "{name}: {err:?}"
                    );
                }
                if tf.contains("inflate() failed") {
                    assert!(
                        err.to_string().contains("inflate() failed"),
                        "{name}: {err}"
                    );
                }
            }
        }
    }
    // The differences are real: each case still differs as described.
    for (name, _) in TEXT_DIFFERENCES {
        let case = cases.iter().find(|c| c["name"] == *name).expect("case");
        let got: Vec<anyhow::Result<Bytes>> = TextLineDataset::new(formats_more::files(case))
            .compression(formats_more::compression(case))
            .build()
            .iter()
            .collect()
            .await;
        assert!(got.last().is_some_and(|r| r.is_err()), "{name}");
    }
}

/// `formats_more.json`: `list_files(pattern, shuffle=False)` as TensorFlow 2.21 listed (hidden
/// files, directories, `?`, `[ab]`, patterns across directories, byte order) or refused.
#[test]
fn formats_more_list_files_cases_match_tensorflow() {
    let cases = formats_more::cases("list_files");
    assert!(cases.len() >= 10);
    let root = formats_more::dir().join("list");
    for case in &cases {
        let pattern = case["pattern"].as_str().expect("pattern");
        let full = format!("{}/{pattern}", root.display());
        match case["output"].as_array() {
            Some(want) => {
                let got: Vec<String> = list_files(&full)
                    .unwrap_or_else(|e| panic!("{pattern}: {e}"))
                    .iter()
                    .map(|p| {
                        p.strip_prefix(&root)
                            .expect("under the root")
                            .display()
                            .to_string()
                    })
                    .collect();
                let want: Vec<&str> = want.iter().map(|w| w.as_str().expect("path")).collect();
                assert_eq!(got, want, "{pattern}");
                // `Dataset::list_files` lists the same, in the same order.
                let listed = tokio_test::block_on(Dataset::list_files(&full, None).collect())
                    .unwrap_or_else(|e| panic!("{pattern}: {e}"));
                let listed: Vec<String> = listed
                    .iter()
                    .map(|f| {
                        f.as_path()
                            .and_then(|p| p.strip_prefix(&root).ok())
                            .expect("a path under the root")
                            .display()
                            .to_string()
                    })
                    .collect();
                assert_eq!(listed, want, "Dataset::list_files({pattern})");
            }
            None => {
                let err = list_files(&full).expect_err(pattern).to_string();
                let listed = tokio_test::block_on(Dataset::list_files(&full, None).collect())
                    .expect_err(pattern);
                assert_eq!(listed.to_string(), err, "Dataset::list_files({pattern})");
                assert_eq!(
                    err,
                    format!("No files matched pattern: {full}"),
                    "{pattern}"
                );
                let tf = formats_more::error_message(case).expect("error");
                assert!(tf.contains(&err), "{tf}");
            }
        }
    }
}

/// A file is read to its end as the reads find it, not to its length when it was opened:
/// lines appended after the first line was read arrive too (TensorFlow reads to EOF).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_grows_while_read_is_read_to_its_new_end() {
    use futures::StreamExt;
    use std::io::Write;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("growing.txt");
    // 50,000 lines (450 KB): far more than the reader may hold ahead of the consumer (its
    // block read-ahead and its bounded line buffer), so after the first line the reads are
    // far from the end when the file grows.
    let first: Vec<String> = (0..50_000).map(|i| format!("line {i:05}")).collect();
    std::fs::write(&path, first.join("\n") + "\n").expect("written");
    let dataset = TextLineDataset::new([&path]).buffer_size(64).build();
    let mut epoch = dataset.iter();
    let line = epoch.next().await.expect("a line").expect("readable");
    assert_eq!(line, "line 00000");
    let more: Vec<String> = (50_000..50_100).map(|i| format!("line {i:05}")).collect();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all((more.join("\n") + "\n").as_bytes()))
        .expect("appended");
    let rest: Vec<Bytes> = epoch.map(|r| r.expect("readable")).collect().await;
    let expected: Vec<String> = first.into_iter().chain(more).skip(1).collect();
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    assert_eq!(
        rest.len(),
        expected.len(),
        "every line, the appended ones too"
    );
    assert!(rest == lines(&expected), "the lines in order");
}

/// `/proc` files report a length of 0 but have lines: they are read to their end.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proc_file_of_length_zero_is_read() {
    let path = "/proc/self/status";
    assert_eq!(std::fs::metadata(path).expect("metadata").len(), 0);
    let got = TextLineDataset::new([path])
        .build()
        .collect()
        .await
        .expect("readable");
    assert!(got.iter().any(|line| line.starts_with(b"Name:")), "{got:?}");
}

/// A truncated GZIP text file: the lines before the damage, then a `DataLoss` naming the
/// file, the line being read (0-based) and its offset in the decompressed text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_gzip_file_is_data_loss_after_its_whole_lines() {
    use futures::StreamExt;
    use std::io::Write;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).expect("compressed");
    let gz = gz.finish().expect("compressed");
    let path = dir.path().join("cut.txt.gz");
    std::fs::write(&path, &gz[..gz.len() / 2]).expect("written");
    for parallel in [false, true] {
        let mut ds = TextLineDataset::new([&path]).compression(Compression::Auto);
        if parallel {
            ds = ds.num_parallel_reads(1);
        }
        let got: Vec<anyhow::Result<Bytes>> = ds.build().iter().collect().await;
        let before = got.len() - 1;
        assert!(before > 0 && before < 20_000, "{before} lines");
        let lines: Vec<&str> = text.lines().take(before).collect();
        let ok: Vec<Bytes> = got[..before]
            .iter()
            .map(|r| r.as_ref().expect("a line").clone())
            .collect();
        assert_eq!(ok, self::lines(&lines));
        let err = got[before].as_ref().expect_err("an error last");
        match err.downcast_ref::<streamload::Error>() {
            Some(streamload::Error::DataLoss {
                path: named,
                record,
                offset,
                message,
                ..
            }) => {
                assert_eq!(*record, before as u64);
                let start: usize = lines.iter().map(|l| l.len() + 1).sum();
                assert_eq!(*offset, start as u64);
                assert!(message.contains("GZIP inflate() failed"), "{message}");
                assert!(named.contains("cut.txt.gz"), "{named}");
            }
            _ => panic!("not DataLoss: {err:?}"),
        }
    }
}
