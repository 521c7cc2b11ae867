//! Text lines as tf.data's `TextLineDataset` reads them, and `list_files`.

use bytes::Bytes;
use streamload::format::{Compression, TextLineDataset, list_files};

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
    assert_eq!(
        names,
        [
            "train-00000.tfrecord",
            "train-00001.tfrecord",
            "train-00002.tfrecord"
        ]
    );
    let none =
        list_files(&format!("{}/test-*", dir.path().display())).expect_err("nothing matches");
    assert!(
        none.to_string().contains("no files matched pattern"),
        "{none}"
    );
    assert!(list_files("[").is_err(), "an invalid pattern is an error");
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
