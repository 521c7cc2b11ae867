//! TFRecord indexes (DALI's `tfrecord2idx` format) and random access through them
//! (`IndexedTFRecords`): the index built equals what DALI's tool writes and what TensorFlow's
//! files hold, records read by index equal those read in order, shards cover every record
//! once, the shuffle is a permutation drawn anew per epoch and reproducible per seed, over
//! local files and the in-process S3 server; bad indexes and damaged records are errors naming
//! the file and the record.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::StreamExt;
use streamload::format::{
    Compression, IndexEntry, IndexedTFRecords, TFRecordDataset, TFRecordIndex, TFRecordWriter,
};

#[path = "support/s3.rs"]
mod s3;

fn tensorflow(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tensorflow")
        .join(name)
}

/// The index DALI's tool wrote for `name` (scripts/tfrecord2idx.py).
fn dali(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tfrecord_index")
        .join(format!("{name}.idx"))
}

/// `n` files of `per` records each (payloads `f-r-xxx...` of varied lengths), with their
/// indexes beside them; the payloads in order.
async fn files(dir: &Path, n: usize, per: usize) -> (Vec<PathBuf>, Vec<Bytes>) {
    let mut paths = Vec::new();
    let mut all = Vec::new();
    for f in 0..n {
        let path = dir.join(format!("part-{f}.tfrecord"));
        let mut w = TFRecordWriter::new(
            tokio::fs::File::create(&path).await.unwrap(),
            Compression::None,
        );
        for r in 0..per {
            let payload = format!("{f}-{r}-{}", "x".repeat((r * 37) % 300));
            w.write(payload.as_bytes()).await.unwrap();
            all.push(Bytes::from(payload));
        }
        w.finish().await.unwrap();
        let index = TFRecordIndex::build(&path).await.unwrap();
        index
            .write(dir.join(format!("part-{f}.tfrecord.idx")))
            .await
            .unwrap();
        paths.push(path);
    }
    (paths, all)
}

#[tokio::test]
async fn the_index_built_is_what_dalis_tool_writes_for_tensorflows_files() {
    for name in [
        "plain.tfrecord",
        "examples.tfrecord",
        "sequence_examples.tfrecord",
        "empty.tfrecord",
        // A partial header at the end is the end, for TensorFlow's reader and DALI's tool.
        "trailing_garbage.tfrecord",
        "truncated_header.tfrecord",
    ] {
        let built = TFRecordIndex::build(tensorflow(name)).await.unwrap();
        let expected = std::fs::read_to_string(dali(name)).unwrap();
        assert_eq!(built.to_string(), expected, "{name}");
        let read = TFRecordIndex::read(dali(name)).await.unwrap();
        assert_eq!(read, built, "{name}");
    }
    // And what TensorFlow recorded of plain.tfrecord: each record's offset and length.
    let tf: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tensorflow("tfrecord_files.json")).unwrap())
            .unwrap();
    let offsets: Vec<u64> = tf["files"]["plain.tfrecord"]["record_offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_u64().unwrap())
        .collect();
    let built = TFRecordIndex::build(tensorflow("plain.tfrecord"))
        .await
        .unwrap();
    assert_eq!(
        built.entries().iter().map(|e| e.offset).collect::<Vec<_>>(),
        offsets
    );
    let payloads: Vec<Bytes> = TFRecordDataset::new([tensorflow("plain.tfrecord")])
        .build()
        .collect()
        .await
        .unwrap();
    for (entry, payload) in built.entries().iter().zip(&payloads) {
        assert_eq!(entry.size, payload.len() as u64 + 16);
    }
}

#[tokio::test]
async fn building_refuses_compressed_and_damaged_files() {
    for name in ["gzip.tfrecord.gz", "zlib.tfrecord.zz"] {
        let e = TFRecordIndex::build(tensorflow(name)).await.unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains(name) && text.contains("no random access"),
            "{text}"
        );
    }
    // A GZIP file whose name does not say so is told apart by its content.
    let dir = tempfile::tempdir().unwrap();
    let hidden = dir.path().join("gzip-inside.tfrecord");
    std::fs::copy(tensorflow("gzip.tfrecord.gz"), &hidden).unwrap();
    let e = TFRecordIndex::build(&hidden).await.unwrap_err();
    assert!(format!("{e:#}").contains("GZIP-compressed"), "{e:#}");
    // Damage is the reader's DataLoss, naming the file and the record.
    for (name, record) in [("corrupt_data_crc.tfrecord", 3), ("truncated.tfrecord", 7)] {
        let e = TFRecordIndex::build(tensorflow(name)).await.unwrap_err();
        match e.downcast_ref::<streamload::Error>() {
            Some(streamload::Error::DataLoss {
                path, record: r, ..
            }) => {
                assert!(path.ends_with(name), "{e:#}");
                assert_eq!(*r, record, "{e:#}");
            }
            _ => panic!("not DataLoss: {e:#}"),
        }
    }
}

#[tokio::test]
async fn parsing_names_the_index_and_the_line() {
    let ok = TFRecordIndex::parse("0 20\n20\t17\n\n  37 16  \n", "x.idx").unwrap();
    assert_eq!(
        ok.entries(),
        [
            IndexEntry {
                offset: 0,
                size: 20
            },
            IndexEntry {
                offset: 20,
                size: 17
            },
            IndexEntry {
                offset: 37,
                size: 16
            }
        ]
    );
    for (text, line, says) in [
        ("0 20\n20 x\n", 2, "expected `offset size`"),
        ("0 20\n20 17 3\n", 2, "expected `offset size`"),
        ("0 -1\n", 1, "expected `offset size`"),
        ("0 20\n\n5 15\n", 3, "smaller than a TFRecord frame"),
        ("18446744073709551615 16\n", 1, "overflows"),
    ] {
        let e = TFRecordIndex::parse(text, "bad.idx")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("bad.idx: line {line}: ")) && e.contains(says),
            "{text:?}: {e}"
        );
    }
}

#[tokio::test]
async fn records_by_index_equal_the_records_read_in_order() {
    // TensorFlow's files, through the indexes DALI's tool wrote for them.
    let names = ["plain.tfrecord", "examples.tfrecord", "empty.tfrecord"];
    let files: Vec<PathBuf> = names.iter().map(|n| tensorflow(n)).collect();
    let mut indexes = Vec::new();
    for name in names {
        indexes.push(TFRecordIndex::read(dali(name)).await.unwrap());
    }
    let indexed = IndexedTFRecords::from_indexes(&files, indexes)
        .await
        .unwrap();
    assert_eq!(indexed.num_records(), 120);
    let records = indexed.records();
    assert_eq!(records.cardinality(), streamload::Cardinality::Finite(120));
    let sequential = TFRecordDataset::new(&files)
        .build()
        .collect()
        .await
        .unwrap();
    assert_eq!(records.collect().await.unwrap(), sequential);
    // Few reads in flight, and one at a time: the same.
    for n in [1, 3] {
        let got = indexed
            .clone()
            .num_parallel_reads(n)
            .records()
            .collect()
            .await
            .unwrap();
        assert_eq!(got, sequential);
    }
    // Shuffled: the same records, in another order.
    let shuffled = indexed
        .shuffle_records(7)
        .records()
        .collect()
        .await
        .unwrap();
    assert_ne!(shuffled, sequential);
    let mut a = shuffled.clone();
    let mut b = sequential.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[tokio::test]
async fn shards_cover_every_record_once_and_are_balanced() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, all) = files(dir.path(), 4, 25).await;
    // A file without records among them.
    let empty = dir.path().join("empty.tfrecord");
    std::fs::write(&empty, b"").unwrap();
    std::fs::write(dir.path().join("empty.tfrecord.idx"), b"").unwrap();
    let mut with_empty = paths.clone();
    with_empty.insert(2, empty);
    let indexed = IndexedTFRecords::open(&with_empty).await.unwrap();
    assert_eq!(indexed.num_records(), 100);
    for n in [1u64, 2, 3, 7, 100, 101, 250] {
        for shuffled in [false, true] {
            let mut seen = Vec::new();
            let mut sizes = Vec::new();
            for i in 0..n {
                let mut shard = indexed.clone().shard(n, i);
                if shuffled {
                    shard = shard.shuffle_records(11);
                }
                let records = shard.records().collect().await.unwrap();
                assert_eq!(records.len() as u64, shard.num_records());
                sizes.push(records.len());
                seen.extend(records);
            }
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(max - min <= 1, "{n} shards: sizes {sizes:?}");
            if !shuffled {
                assert_eq!(seen, all, "{n} shards in order are the records in order");
            }
            seen.sort();
            let mut expected = all.clone();
            expected.sort();
            assert_eq!(seen, expected, "{n} shards (shuffled: {shuffled})");
        }
    }
    // A shard of a shard splits it again; shuffling before or after sharding picks the same set.
    let a: BTreeSet<Bytes> = indexed
        .clone()
        .shard(2, 1)
        .shard(3, 0)
        .records()
        .collect()
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(a.len(), 16, "50 records in 3: 16, 17, 17");
    let b: BTreeSet<Bytes> = indexed
        .clone()
        .shuffle_records(3)
        .shard(4, 2)
        .records()
        .collect()
        .await
        .unwrap()
        .into_iter()
        .collect();
    let c: BTreeSet<Bytes> = indexed
        .clone()
        .shard(4, 2)
        .records()
        .collect()
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(b, c);
}

#[tokio::test]
#[should_panic(expected = "is not below num_shards")]
async fn a_shard_index_out_of_range_panics() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, _) = files(dir.path(), 1, 3).await;
    let _ = IndexedTFRecords::open(&paths).await.unwrap().shard(2, 2);
}

#[tokio::test]
async fn the_shuffle_is_a_permutation_reshuffled_each_epoch_and_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, all) = files(dir.path(), 3, 40).await;
    let indexed = IndexedTFRecords::open(&paths).await.unwrap();
    let sorted = |mut v: Vec<Bytes>| {
        v.sort();
        v
    };
    let mut expected = all.clone();
    expected.sort();
    let records = indexed.clone().shuffle_records(1).records();
    let epoch0 = records.collect().await.unwrap();
    let epoch1 = records.collect().await.unwrap();
    assert_ne!(epoch0, all);
    assert_ne!(epoch0, epoch1, "each epoch draws a new order");
    assert_eq!(sorted(epoch0.clone()), expected);
    assert_eq!(sorted(epoch1.clone()), expected);
    // Records from every file are mixed from the start (a global shuffle, not file by file).
    let files_in_first_10: BTreeSet<u8> = epoch0[..10].iter().map(|r| r[0]).collect();
    assert!(files_in_first_10.len() > 1, "{files_in_first_10:?}");
    // The same seed and epoch give the same order, in a recipe built again.
    let again = indexed.clone().shuffle_records(1).records();
    assert_eq!(again.collect().await.unwrap(), epoch0);
    assert_eq!(again.collect().await.unwrap(), epoch1);
    // Another seed, another order; `repeat` numbers its repetitions as epochs.
    let other = indexed.clone().shuffle_records(2).records();
    assert_ne!(other.collect().await.unwrap(), epoch0);
    let repeated = indexed
        .clone()
        .shuffle_records(1)
        .records()
        .repeat_n(2)
        .collect()
        .await
        .unwrap();
    assert_eq!(repeated.len(), 240);
    assert_ne!(repeated[..120], repeated[120..]);
    assert_eq!(sorted(repeated[120..].to_vec()), expected);
}

#[tokio::test]
async fn bad_indexes_are_errors_naming_the_file_and_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, _) = files(dir.path(), 2, 10).await;
    // No index.
    let lone = dir.path().join("lone.tfrecord");
    std::fs::copy(&paths[0], &lone).unwrap();
    let e = IndexedTFRecords::open([&lone]).await.unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains("lone.tfrecord.idx") && text.contains("tfrecord index"),
        "{text}"
    );
    // A malformed index names itself and the line.
    std::fs::write(dir.path().join("lone.tfrecord.idx"), "0 20\nnot a line\n").unwrap();
    let e = IndexedTFRecords::open([&lone]).await.unwrap_err();
    let text = format!("{e:#}");
    assert!(text.contains("lone.tfrecord.idx: line 2"), "{text}");
    // An entry past the end of the file: refused at open, naming both and the record.
    let size = std::fs::metadata(&lone).unwrap().len();
    std::fs::write(
        dir.path().join("lone.tfrecord.idx"),
        format!("0 20\n{} 20\n", size - 10),
    )
    .unwrap();
    let e = IndexedTFRecords::open([&lone]).await.unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains("lone.tfrecord")
            && text.contains("record 1 ")
            && text.contains("past the end"),
        "{text}"
    );
    // The index of another file (13 records of 4 bytes) over one of 10 records of 10 bytes,
    // both 260 bytes long: every frame the index names is DataLoss, by record.
    let (a, b) = (dir.path().join("a.tfrecord"), dir.path().join("b.tfrecord"));
    for (path, n, len) in [(&a, 10, 10), (&b, 13, 4)] {
        let mut w = TFRecordWriter::new(
            tokio::fs::File::create(path).await.unwrap(),
            Compression::None,
        );
        for _ in 0..n {
            w.write(&vec![7u8; len]).await.unwrap();
        }
        w.finish().await.unwrap();
    }
    let other = TFRecordIndex::build(&b).await.unwrap();
    let indexed = IndexedTFRecords::from_indexes([&a], vec![other])
        .await
        .unwrap();
    let results: Vec<anyhow::Result<Bytes>> = indexed.records().iter().collect().await;
    assert_eq!(results.len(), 13);
    for (i, result) in results.iter().enumerate() {
        let e = result.as_ref().unwrap_err();
        match e.downcast_ref::<streamload::Error>() {
            Some(streamload::Error::DataLoss { path, record, .. }) => {
                assert!(path.ends_with("a.tfrecord"), "{e:#}");
                assert_eq!(*record, i as u64);
            }
            _ => panic!("not DataLoss: {e:#}"),
        }
    }
    // Record 0 starts where the index says, but its length is not the index's.
    let first = results[0].as_ref().unwrap_err().to_string();
    assert!(first.contains("the index 20"), "{first}");
    // Entries that no reader would accept as a frame are refused when opening.
    for entry in [
        IndexEntry {
            offset: 0,
            size: 15,
        },
        IndexEntry {
            offset: 0,
            size: (1 << 30) + 17,
        },
    ] {
        let e = IndexedTFRecords::from_indexes([&a], vec![TFRecordIndex::new(vec![entry])])
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("record 0 at offset 0 has a size of"),
            "{e}"
        );
    }
    // As many indexes as files; compressed files refused.
    let e = IndexedTFRecords::from_indexes(&paths, vec![])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("2 files but 0 indexes"), "{e}");
    let e = IndexedTFRecords::from_indexes(
        [tensorflow("gzip.tfrecord.gz")],
        vec![TFRecordIndex::default()],
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("no random access"), "{e}");
}

#[tokio::test]
async fn damaged_records_read_by_index_are_data_loss_and_the_others_follow() {
    // DALI's tool checks no CRC: its index of the damaged file has all 100 records. Record 3
    // fails its CRC, the other 99 read; ignore_errors keeps exactly them.
    let file = tensorflow("corrupt_data_crc.tfrecord");
    let index = TFRecordIndex::read(dali("corrupt_data_crc.tfrecord"))
        .await
        .unwrap();
    let indexed = IndexedTFRecords::from_indexes([&file], vec![index])
        .await
        .unwrap();
    let results: Vec<anyhow::Result<Bytes>> = indexed.records().iter().collect().await;
    assert_eq!(results.len(), 100);
    let plain = TFRecordDataset::new([tensorflow("plain.tfrecord")])
        .build()
        .collect()
        .await
        .unwrap();
    for (i, result) in results.iter().enumerate() {
        match result {
            Ok(record) => assert_eq!(record, &plain[i], "record {i}"),
            Err(e) => {
                assert_eq!(i, 3, "{e:#}");
                let text = e.to_string();
                assert!(
                    text.contains("corrupt_data_crc.tfrecord")
                        && text.contains("corrupted record")
                        && text.contains("(record 3)"),
                    "{text}"
                );
            }
        }
    }
    assert!(results[3].is_err());
    let kept = indexed.records().ignore_errors().count().await.unwrap();
    assert_eq!(kept, 99);
    // DALI's index of a file cut inside record 7 has an entry for the partial record, which
    // fits the file but not the record's header: DataLoss naming record 7.
    let file = tensorflow("truncated.tfrecord");
    let index = TFRecordIndex::read(dali("truncated.tfrecord"))
        .await
        .unwrap();
    let indexed = IndexedTFRecords::from_indexes([&file], vec![index])
        .await
        .unwrap();
    let results: Vec<anyhow::Result<Bytes>> = indexed.records().iter().collect().await;
    assert!(results[..7].iter().all(|r| r.is_ok()));
    let e = results[7].as_ref().unwrap_err();
    assert!(
        e.to_string().contains("the index") && e.to_string().contains("(record 7)"),
        "{e}"
    );
}

/// Serves each `(name, file)` of `objects` from `server` as `s3://<bucket>/shards/<name>` (a
/// server of its own, registered for `s3://<bucket>`); returns their URLs, in order.
async fn serve_shards(
    server: &s3::MemoryS3,
    bucket: &str,
    objects: &[(String, PathBuf)],
) -> Vec<String> {
    for (name, file) in objects {
        let bytes = std::fs::read(file).unwrap();
        server.insert(bucket, &format!("shards/{name}"), bytes.into());
    }
    let (key, secret) = (format!("AKID{bucket}"), format!("{bucket}-secret-key"));
    let addr = s3::memory_s3_server(server.clone(), &key, &secret).await;
    let store = s3::s3_store(addr, bucket, &key, &secret);
    streamload::storage::register(&format!("s3://{bucket}"), store).unwrap();
    objects
        .iter()
        .map(|(name, _)| format!("s3://{bucket}/shards/{name}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_object_storage_with_ranged_gets_coalesced() {
    use std::sync::atomic::Ordering::SeqCst;
    let server = s3::MemoryS3::default();
    let dir = tempfile::tempdir().unwrap();
    let (paths, all) = files(dir.path(), 3, 60).await;
    let mut objects = Vec::new();
    for path in &paths {
        let name = path.file_name().unwrap().to_str().unwrap();
        objects.push((name.to_string(), path.clone()));
        let index = format!("{name}.idx");
        objects.push((index.clone(), dir.path().join(index)));
    }
    let urls = serve_shards(&server, "indexed", &objects).await;
    // The shards, not their indexes.
    let urls: Vec<String> = urls.into_iter().step_by(2).collect();

    let indexed = IndexedTFRecords::open(&urls).await.unwrap();
    assert_eq!(indexed.num_records(), 180);
    server.gets.store(0, SeqCst);
    assert_eq!(indexed.records().collect().await.unwrap(), all);
    // In order, each file's records coalesce: a GET or so per file and window, not per record.
    let gets = server.gets.load(SeqCst);
    assert!(gets <= 6, "{gets} GETs for 180 records in order");
    let shuffled = indexed
        .clone()
        .shuffle_records(9)
        .shard(2, 0)
        .records()
        .collect()
        .await
        .unwrap();
    assert_eq!(shuffled.len(), 90);
    let mut expected = all[..90].to_vec();
    let mut got = shuffled.clone();
    expected.sort();
    got.sort();
    assert_eq!(got, expected);
    assert_ne!(shuffled, all[..90]);
    // A missing index object is named.
    let e = IndexedTFRecords::open(["s3://indexed/shards/none.tfrecord"])
        .await
        .unwrap_err();
    assert!(format!("{e:#}").contains("none.tfrecord.idx"), "{e:#}");
}

#[test]
fn public_types_are_send_sync_and_debug() {
    fn send_sync_debug<T: Send + Sync + std::fmt::Debug + Clone>() {}
    send_sync_debug::<TFRecordIndex>();
    send_sync_debug::<IndexEntry>();
    send_sync_debug::<IndexedTFRecords>();
    send_sync_debug::<streamload::format::IndexTarget>();
    send_sync_debug::<streamload::format::JsonLinesDataset>();
}

/// Dropping an epoch aborts the tasks reading its windows: past the reads in flight when it
/// was dropped, no GET reaches the server (behind a proxy delaying each response).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_epoch_stops_its_reads() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering::SeqCst;
    use std::time::Duration;
    let server = s3::MemoryS3::default();
    let dir = tempfile::tempdir().unwrap();
    // 3,000 records of 6 KB: the 256 of a shuffled window lie about 70 KB apart, mostly
    // farther than reads coalesce over, so about a GET per record or two.
    let mut urls = Vec::new();
    for f in 0..2 {
        let mut w = TFRecordWriter::new(Vec::new(), Compression::None);
        for r in 0..1500u32 {
            w.write(&vec![r as u8; 6_000]).await.unwrap();
        }
        let bytes = w.finish().await.unwrap();
        let name = format!("big-{f}.tfrecord");
        let path = dir.path().join(&name);
        std::fs::write(&path, &bytes).unwrap();
        let index = TFRecordIndex::build(&path).await.unwrap();
        server.insert("dropped", &name, bytes.into());
        server.insert("dropped", &format!("{name}.idx"), index.to_string().into());
        urls.push(format!("s3://dropped/{name}"));
    }
    let upstream = s3::memory_s3_server(server.clone(), "AKIDDROP", "drop-secret").await;
    let faults = Arc::new(s3::Faults {
        first_byte_delay: Duration::from_millis(30),
        ..Default::default()
    });
    let proxy = s3::fault_proxy(upstream, faults).await;
    let store = s3::s3_store(proxy, "dropped", "AKIDDROP", "drop-secret");
    streamload::storage::register("s3://dropped", store).unwrap();
    let records = IndexedTFRecords::open(&urls)
        .await
        .unwrap()
        .shuffle_records(3)
        .num_parallel_reads(4)
        .records();
    // Two windows are being read, each about a hundred GETs, 4 at a time.
    let mut epoch = records.iter();
    let first = tokio::time::timeout(Duration::from_millis(200), epoch.next()).await;
    assert!(
        first.is_err(),
        "a hundred delayed GETs, 4 at a time, take longer: {:?}",
        first.map(|r| r.map(|r| r.map(|b| b.len())))
    );
    drop(epoch);
    let at_drop = server.gets.load(SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = server.gets.load(SeqCst);
    // At most the 8 reads in flight arrive; tasks left running would make a hundred more.
    assert!(
        after - at_drop <= 8,
        "{} GETs after the epoch was dropped",
        after - at_drop
    );
}

// ---- Indexes written while reading (`TFRecordDataset::write_index`) ----

/// The index file of `path` beside it.
fn idx_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".idx");
    PathBuf::from(name)
}

/// Every element of `ds`, errors included.
async fn all_results(ds: streamload::Dataset<Bytes>) -> Vec<anyhow::Result<Bytes>> {
    ds.iter().collect().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_written_while_reading_is_the_one_built_and_dalis() {
    use streamload::format::IndexTarget;
    let dir = tempfile::tempdir().unwrap();
    let names = [
        "plain.tfrecord",
        "examples.tfrecord",
        "sequence_examples.tfrecord",
        "empty.tfrecord",
        "trailing_garbage.tfrecord",
        "truncated_header.tfrecord",
    ];
    let mut paths = Vec::new();
    for name in names {
        let path = dir.path().join(name);
        std::fs::copy(tensorflow(name), &path).unwrap();
        paths.push(path);
    }
    // Small blocks: records span blocks, and the sizes still add up.
    let records = TFRecordDataset::new(&paths)
        .buffer_size(100)
        .write_index(IndexTarget::Beside)
        .build()
        .collect()
        .await
        .unwrap();
    for (name, path) in names.iter().zip(&paths) {
        let written = std::fs::read_to_string(idx_of(path)).unwrap();
        assert_eq!(
            written,
            std::fs::read_to_string(dali(name)).unwrap(),
            "{name}"
        );
        let built = TFRecordIndex::build(path).await.unwrap();
        assert_eq!(written, built.to_string(), "{name}");
    }
    // No temporary file is left beside them.
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left.len(), 2 * names.len(), "{left:?}");
    // And the indexes give random access to the same records.
    let indexed = IndexedTFRecords::open(&paths).await.unwrap();
    assert_eq!(indexed.records().collect().await.unwrap(), records);

    // Into a directory, files read several at once (readers from their start each).
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let (paths, all) = files(&data, 4, 90).await;
    for path in &paths {
        std::fs::remove_file(idx_of(path)).unwrap();
    }
    let out = dir.path().join("indexes");
    std::fs::create_dir(&out).unwrap();
    let read = TFRecordDataset::new(&paths)
        .num_parallel_reads(2)
        .buffer_size(1000)
        .write_index(IndexTarget::Dir(out.as_path().into()))
        .build()
        .collect()
        .await
        .unwrap();
    assert_eq!(read.len(), all.len());
    for path in &paths {
        let name = path.file_name().unwrap().to_str().unwrap();
        let written = TFRecordIndex::read(out.join(format!("{name}.idx")))
            .await
            .unwrap();
        assert_eq!(written, TFRecordIndex::build(path).await.unwrap(), "{name}");
        assert!(!idx_of(path).exists(), "nothing beside the file");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_read_in_part_or_damaged_writes_no_index() {
    use streamload::ErrorBudget;
    use streamload::format::IndexTarget;
    let dir = tempfile::tempdir().unwrap();
    let (paths, _) = files(dir.path(), 2, 50).await;
    for path in &paths {
        std::fs::remove_file(idx_of(path)).unwrap();
    }
    let reader = || {
        TFRecordDataset::new(&paths)
            .buffer_size(500)
            .write_index(IndexTarget::Beside)
    };
    // `take` stopping inside the first file, then exactly at its last record (the reader
    // never finds the end).
    for n in [3, 50] {
        assert_eq!(
            reader().build().take(n).collect().await.unwrap().len(),
            n as usize
        );
        assert!(!idx_of(&paths[0]).exists(), "take({n})");
    }
    // `take` into the second file: the first was read whole.
    reader().build().take(60).collect().await.unwrap();
    assert!(idx_of(&paths[0]).exists());
    assert!(!idx_of(&paths[1]).exists());
    std::fs::remove_file(idx_of(&paths[0])).unwrap();
    // A dropped epoch.
    let ds = reader().build();
    let mut epoch = ds.iter();
    for _ in 0..10 {
        epoch.next().await.unwrap().unwrap();
    }
    drop(epoch);
    assert!(!idx_of(&paths[0]).exists());

    // A damaged file: its records up to the damage are read, no index; the next file's is.
    let mut bytes = std::fs::read(&paths[0]).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&paths[0], &bytes).unwrap();
    let results = all_results(reader().build()).await;
    assert_eq!(results.iter().filter(|r| r.is_err()).count(), 1);
    assert!(!idx_of(&paths[0]).exists(), "damaged file");
    assert!(idx_of(&paths[1]).exists());
    // Resynchronised past the damage: still no index (bytes were skipped).
    let records = reader()
        .resync(true)
        .build()
        .ignore_errors_within(ErrorBudget::count(1))
        .collect()
        .await
        .unwrap();
    assert!(records.len() >= 98, "{}", records.len());
    assert!(!idx_of(&paths[0]).exists(), "resynchronised file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_files_are_not_indexed() {
    use streamload::format::IndexTarget;
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("gzip.tfrecord.gz");
    std::fs::copy(tensorflow("gzip.tfrecord.gz"), &gz).unwrap();
    let plain = dir.path().join("plain.tfrecord");
    std::fs::copy(tensorflow("plain.tfrecord"), &plain).unwrap();
    let records = TFRecordDataset::new([&gz, &plain])
        .compression(Compression::Auto)
        .write_index(IndexTarget::Beside)
        .build()
        .collect()
        .await
        .unwrap();
    assert!(!records.is_empty());
    assert!(
        !idx_of(&gz).exists(),
        "a compressed file is read, not indexed"
    );
    assert!(idx_of(&plain).exists());
    // Read without decompression, a GZIP file is a DataLoss: no index either.
    let hidden = dir.path().join("gzip-inside.tfrecord");
    std::fs::copy(tensorflow("gzip.tfrecord.gz"), &hidden).unwrap();
    let results = all_results(
        TFRecordDataset::new([&hidden])
            .write_index(IndexTarget::Beside)
            .build(),
    )
    .await;
    assert!(results[0].is_err());
    assert!(!idx_of(&hidden).exists());
}

#[test]
#[should_panic(expected = "compressed files are not indexed")]
fn writing_indexes_of_files_declared_compressed_panics_at_build() {
    let _ = TFRecordDataset::new(["a.tfrecord"])
        .compression(Compression::Gzip)
        .write_index(streamload::format::IndexTarget::Beside)
        .build();
}

#[test]
#[should_panic(expected = "would both write the index")]
fn two_files_writing_one_index_panic_at_build() {
    let _ = TFRecordDataset::new(["a/train.tfrecord", "b/train.tfrecord"])
        .write_index(streamload::format::IndexTarget::Dir("indexes".into()))
        .build();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_already_there_is_kept_when_equal_and_replaced_when_not() {
    use std::os::unix::fs::MetadataExt;
    use streamload::format::IndexTarget;
    let dir = tempfile::tempdir().unwrap();
    let (paths, _) = files(dir.path(), 1, 30).await;
    let idx = idx_of(&paths[0]);
    let built = std::fs::read_to_string(&idx).unwrap();
    let ds = TFRecordDataset::new(&paths)
        .write_index(IndexTarget::Beside)
        .build();
    let inode = std::fs::metadata(&idx).unwrap().ino();
    ds.collect().await.unwrap();
    assert_eq!(
        std::fs::metadata(&idx).unwrap().ino(),
        inode,
        "not rewritten"
    );
    // A stale index (same length, other numbers; then a longer one) is replaced.
    for stale in [built.replacen('0', "1", 1), format!("{built}9 9\n")] {
        std::fs::write(&idx, &stale).unwrap();
        ds.collect().await.unwrap();
        assert_eq!(std::fs::read_to_string(&idx).unwrap(), built);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_index_write_is_an_error_naming_the_index() {
    use streamload::format::IndexTarget;
    let dir = tempfile::tempdir().unwrap();
    let (paths, all) = files(dir.path(), 2, 20).await;
    let missing = dir.path().join("no-such-dir");
    let results = all_results(
        TFRecordDataset::new(&paths)
            .write_index(IndexTarget::Dir(missing.as_path().into()))
            .build(),
    )
    .await;
    // Each file's records, then the error of its index; the next file is read.
    assert_eq!(results.len(), all.len() + 2);
    for (i, r) in results.iter().enumerate() {
        if i == 20 || i == 41 {
            let e = format!("{:#}", r.as_ref().unwrap_err());
            let name = if i == 20 { "part-0" } else { "part-1" };
            let index = missing.join(format!("{name}.tfrecord.idx"));
            assert!(
                e.contains(&index.display().to_string()) && e.contains("writing the index"),
                "{e}"
            );
        } else {
            assert!(r.is_ok(), "{i}: {r:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_object_storage_the_index_objects_are_put() {
    use streamload::format::IndexTarget;
    let server = s3::MemoryS3::default();
    let dir = tempfile::tempdir().unwrap();
    let (paths, all) = files(dir.path(), 3, 40).await;
    let objects: Vec<(String, PathBuf)> = paths
        .iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                p.clone(),
            )
        })
        .collect();
    let urls = serve_shards(&server, "onread", &objects).await;
    assert!(IndexedTFRecords::open(&urls).await.is_err(), "no index yet");

    let read = TFRecordDataset::new(&urls)
        .write_index(IndexTarget::Beside)
        .build()
        .collect()
        .await
        .unwrap();
    assert_eq!(read, all);
    for (url, path) in urls.iter().zip(&paths) {
        let put = TFRecordIndex::read(format!("{url}.idx")).await.unwrap();
        assert_eq!(put, TFRecordIndex::build(path).await.unwrap(), "{url}");
    }
    let indexed = IndexedTFRecords::open(&urls).await.unwrap();
    assert_eq!(indexed.records().collect().await.unwrap(), all);
    // Under another prefix.
    TFRecordDataset::new(&urls)
        .write_index(IndexTarget::Dir("s3://onread/indexes/".into()))
        .build()
        .collect()
        .await
        .unwrap();
    let put = TFRecordIndex::read("s3://onread/indexes/part-2.tfrecord.idx")
        .await
        .unwrap();
    assert_eq!(put, TFRecordIndex::build(&paths[2]).await.unwrap());
}
