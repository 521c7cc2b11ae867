//! Object storage: `memory://` stores and a real S3 server (s3s + s3s-fs, in process, on
//! 127.0.0.1, checking SigV4 signatures) serving TFRecord shards; listing with globs, reading
//! every record exactly once and in order, clear errors naming the URL without secrets; an
//! in-memory S3 server (s3s, SigV4 checked) counting the requests each read costs.

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use bytes::Bytes;
use futures::StreamExt;
use object_store::memory::InMemory;
use object_store::path::Path as StorePath;
use object_store::{ObjectStoreExt, PutPayload};
use streamload::format::{
    Column, Compression, CsvDataset, Field, FixedLengthRecordDataset, TFRecordDataset,
    TFRecordWriter, TextLineDataset,
};
use streamload::storage::{self, Location, ReadOptions};

#[path = "support/s3.rs"]
mod s3;
use s3::{
    Faults, HttpFiles, HttpObject, MemoryS3, fault_proxy, http_server, memory_s3_server, s3_server,
    s3_store, s3_store_retrying,
};

/// `shards` TFRecord files of `records` payloads each; payload = "shard/record" padded.
async fn shards(shards: usize, records: usize, compression: Compression) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for s in 0..shards {
        let mut w = TFRecordWriter::new(Vec::new(), compression);
        for r in 0..records {
            w.write(format!("{s}/{r}/{}", "x".repeat(r % 97)).as_bytes())
                .await
                .expect("write");
        }
        let ext = if compression == Compression::Gzip {
            ".gz"
        } else {
            ""
        };
        out.push((
            format!("train-{s:05}.tfrecord{ext}"),
            w.finish().await.expect("finish"),
        ));
    }
    out
}

fn payload(s: usize, r: usize) -> Bytes {
    Bytes::from(format!("{s}/{r}/{}", "x".repeat(r % 97)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_glob_and_read_in_tensorflows_order() {
    let store = Arc::new(InMemory::new());
    for (name, bytes) in shards(3, 50, Compression::None).await {
        store
            .put(
                &StorePath::from(format!("data/{name}")),
                PutPayload::from(bytes),
            )
            .await
            .expect("put");
    }
    for (name, bytes) in shards(1, 5, Compression::Gzip).await {
        store
            .put(
                &StorePath::from(format!("gz/{name}")),
                PutPayload::from(bytes),
            )
            .await
            .expect("put");
    }
    store
        .put(
            &StorePath::from("data/README.txt"),
            PutPayload::from("not a shard"),
        )
        .await
        .expect("put");
    store
        .put(
            &StorePath::from("data/nested/train-9.tfrecord"),
            PutPayload::from("nested"),
        )
        .await
        .expect("put");
    store
        .put(&StorePath::from("empty/x.tfrecord"), PutPayload::default())
        .await
        .expect("put");
    storage::register("memory://storage-test", store).expect("register");

    let files = storage::glob("memory://storage-test/data/train-*.tfrecord")
        .await
        .expect("glob");
    let names: Vec<String> = files.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        [
            "memory://storage-test/data/train-00000.tfrecord",
            "memory://storage-test/data/train-00001.tfrecord",
            "memory://storage-test/data/train-00002.tfrecord"
        ]
    );
    let sequential = TFRecordDataset::new(files.clone())
        .build()
        .collect()
        .await
        .expect("read");
    let want: Vec<Bytes> = (0..3)
        .flat_map(|s| (0..50).map(move |r| payload(s, r)))
        .collect();
    assert_eq!(sequential, want);
    let parallel = TFRecordDataset::new(files)
        .num_parallel_reads(3)
        .build()
        .collect()
        .await
        .expect("read");
    let want: Vec<Bytes> = (0..50)
        .flat_map(|r| (0..3).map(move |s| payload(s, r)))
        .collect();
    assert_eq!(
        parallel, want,
        "one record from each shard in turn, as tf.data"
    );

    let gz = TFRecordDataset::new(["memory://storage-test/gz/train-00000.tfrecord.gz"])
        .compression(Compression::Auto)
        .build()
        .collect()
        .await
        .expect("gzip by extension");
    assert_eq!(gz, (0..5).map(|r| payload(0, r)).collect::<Vec<_>>());

    let text = TextLineDataset::new(["memory://storage-test/data/README.txt"])
        .build()
        .collect()
        .await
        .expect("text");
    assert_eq!(text, ["not a shard"]);

    let empty = TFRecordDataset::new(["memory://storage-test/empty/x.tfrecord"])
        .build()
        .collect()
        .await
        .expect("an empty object");
    assert!(empty.is_empty());
}

#[tokio::test]
async fn missing_objects_unregistered_stores_and_empty_globs_are_clear_errors() {
    storage::register("memory://errors-test", Arc::new(InMemory::new())).expect("register");
    let err = TFRecordDataset::new(["memory://errors-test/nope.tfrecord"])
        .build()
        .collect()
        .await
        .expect_err("missing object");
    assert!(
        format!("{err:#}").contains("memory://errors-test/nope.tfrecord"),
        "{err:#}"
    );

    let err = TFRecordDataset::new(["memory://never-registered/x.tfrecord"])
        .build()
        .collect()
        .await
        .expect_err("unregistered");
    assert!(
        format!("{err:#}").contains("no store registered"),
        "{err:#}"
    );

    let err = storage::glob("memory://errors-test/*.tfrecord")
        .await
        .expect_err("no match");
    assert!(err.to_string().contains("no files matched"), "{err}");

    assert_eq!(
        Location::from("file:///tmp/a.txt"),
        Location::Local("/tmp/a.txt".into())
    );
    assert_eq!(
        Location::from("s3://user:secret@bucket/key?X-Amz-Signature=abc").to_string(),
        "s3://bucket/key",
        "credentials never appear when a location is shown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_shards_listed_globbed_and_read_exactly_once_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bucket = dir.path().join("training");
    std::fs::create_dir_all(bucket.join("shards")).expect("bucket");
    for (name, bytes) in shards(4, 200, Compression::None).await {
        std::fs::write(bucket.join("shards").join(name), bytes).expect("write shard");
    }
    std::fs::write(bucket.join("shards/labels.txt"), "a\nb\n").expect("write");
    let addr = s3_server(dir.path(), "AKIDTEST", "s3cr3t-test-key").await;
    storage::register(
        "s3://training",
        s3_store(addr, "training", "AKIDTEST", "s3cr3t-test-key"),
    )
    .expect("register");

    let files = storage::glob("s3://training/shards/train-*.tfrecord")
        .await
        .expect("glob");
    assert_eq!(files.len(), 4);
    assert_eq!(
        files[0].to_string(),
        "s3://training/shards/train-00000.tfrecord"
    );
    for cycle in [1, 4] {
        let records = TFRecordDataset::new(files.clone())
            .num_parallel_reads(cycle)
            .build()
            .collect()
            .await
            .expect("read over S3");
        let want: Vec<Bytes> = if cycle == 1 {
            (0..4)
                .flat_map(|s| (0..200).map(move |r| payload(s, r)))
                .collect()
        } else {
            (0..200)
                .flat_map(|r| (0..4).map(move |s| payload(s, r)))
                .collect()
        };
        assert_eq!(records, want, "cycle {cycle}");
    }

    // Wrong credentials: a clear, fast error naming the URL, never the secret.
    storage::register(
        "s3://training-wrong-key",
        s3_store(addr, "training", "AKIDTEST", "not-the-secret"),
    )
    .expect("register");
    let err = TFRecordDataset::new(["s3://training-wrong-key/shards/train-00000.tfrecord"])
        .build()
        .collect()
        .await
        .expect_err("403");
    let shown = format!("{err:#}");
    assert!(
        shown.contains("s3://training-wrong-key/shards/train-00000.tfrecord"),
        "{shown}"
    );
    assert!(
        !shown.contains("not-the-secret") && !shown.contains("s3cr3t"),
        "{shown}"
    );
}

/// Reads the four shards of `bucket` through `prefix` and checks every record arrives
/// exactly once, in order, for cycle lengths 1 and 4.
async fn read_all_exactly_once(prefix: &str) {
    let files: Vec<String> = (0..4)
        .map(|s| format!("{prefix}/shards/train-{s:05}.tfrecord"))
        .collect();
    for cycle in [1, 4] {
        let records = TFRecordDataset::new(files.clone())
            .num_parallel_reads(cycle)
            .build()
            .collect()
            .await
            .unwrap_or_else(|e| panic!("cycle {cycle} through {prefix}: {e:#}"));
        let want: Vec<Bytes> = if cycle == 1 {
            (0..4)
                .flat_map(|s| (0..RECORDS).map(move |r| payload(s, r)))
                .collect()
        } else {
            (0..RECORDS)
                .flat_map(|r| (0..4).map(move |s| payload(s, r)))
                .collect()
        };
        assert_eq!(records.len(), want.len(), "cycle {cycle}");
        assert!(records == want, "cycle {cycle}: records differ");
    }
}

const RECORDS: usize = 2000;

/// Registers `prefix` as the `faulty` bucket of `server` seen through a proxy with `faults`.
async fn through_proxy(
    server: std::net::SocketAddr,
    prefix: &str,
    faults: Faults,
    options: ReadOptions,
) -> Arc<Faults> {
    let faults = Arc::new(faults);
    let proxy = fault_proxy(server, Arc::clone(&faults)).await;
    // object_store's own retries off: streamload's retries and resumes do all the work.
    let store = s3_store_retrying(proxy, "faulty", "AKIDTEST", "s3cr3t-test-key", 0);
    storage::register_with(prefix, store, options).expect("register");
    faults
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_retried_and_broken_bodies_resume_without_loss_or_duplicates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bucket = dir.path().join("faulty");
    std::fs::create_dir_all(bucket.join("shards")).expect("bucket");
    for (name, bytes) in shards(4, RECORDS, Compression::None).await {
        std::fs::write(bucket.join("shards").join(name), bytes).expect("write shard");
    }
    let server = s3_server(dir.path(), "AKIDTEST", "s3cr3t-test-key").await;
    // Small blocks, so each object is many ranged GETs and cuts land inside records.
    let options = ReadOptions::default()
        .block_size(40_000)
        .read_ahead(3)
        .retry_deadline(std::time::Duration::from_secs(30))
        .backoff(
            std::time::Duration::from_millis(5),
            std::time::Duration::from_millis(50),
        );

    // Throttling: the first connections are answered 503 Slow Down.
    let faults = Faults {
        first_byte_delay: std::time::Duration::from_millis(2),
        slow_downs: 6.into(),
        ..Default::default()
    };
    let faults = through_proxy(server, "s3://faulty-503", faults, options.clone()).await;
    read_all_exactly_once("s3://faulty-503").await;
    assert_eq!(
        faults.slow_downs.load(std::sync::atomic::Ordering::SeqCst),
        0
    );

    // Broken bodies after 25,000 bytes, in the middle of a block: connections closed (FIN),
    // then reset (RST).
    for reset in [false, true] {
        let (cuts, resets, url) = if reset {
            (0, 8, "s3://faulty-reset")
        } else {
            (8, 0, "s3://faulty-cut")
        };
        let faults = Faults {
            cuts: cuts.into(),
            resets: resets.into(),
            cut_after: 25_000,
            ..Default::default()
        };
        let faults = through_proxy(server, url, faults, options.clone()).await;
        read_all_exactly_once(url).await;
        let left = if reset { &faults.resets } else { &faults.cuts };
        assert_eq!(left.load(std::sync::atomic::Ordering::SeqCst), 0, "{url}");
        // Most of the eight connections given a fault carry more than 25,000 bytes.
        let fired = faults.fired.load(std::sync::atomic::Ordering::SeqCst);
        assert!(fired >= 4, "{url}: bodies broken: {fired}");
    }

    // Stalled bodies: connections that go silent mid-body are given up after the read
    // timeout and resumed on a new connection.
    let faults = Faults {
        stalls: 3.into(),
        cut_after: 25_000,
        ..Default::default()
    };
    let stall_options = options
        .clone()
        .read_timeout(std::time::Duration::from_millis(300));
    let faults = through_proxy(server, "s3://faulty-stall", faults, stall_options).await;
    read_all_exactly_once("s3://faulty-stall").await;
    assert_eq!(faults.stalls.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(
        faults.fired.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "no body stalled"
    );

    // A fault that never passes ends in an error naming the URL, after the retry deadline.
    let faults = Faults {
        slow_downs: usize::MAX.into(),
        ..Default::default()
    };
    let options = options.retry_deadline(std::time::Duration::from_millis(300));
    through_proxy(server, "s3://faulty-down", faults, options).await;
    let err = TFRecordDataset::new(["s3://faulty-down/shards/train-00000.tfrecord"])
        .build()
        .collect()
        .await
        .expect_err("always 503");
    let shown = format!("{err:#}");
    assert!(
        shown.contains("s3://faulty-down/shards/train-00000.tfrecord"),
        "{shown}"
    );
    assert!(
        shown.contains("gave up after") && shown.contains("HTTP status 503"),
        "{shown}"
    );
    assert!(!shown.contains("s3cr3t"), "{shown}");
    no_cause_twice(&err);
}

/// Bytes of one TFRecord shard of `records` payloads, as [`shards`] writes shard `s`.
async fn shard_bytes(s: usize, records: usize) -> Bytes {
    let mut w = TFRecordWriter::new(Vec::new(), Compression::None);
    for r in 0..records {
        w.write(&payload(s, r)).await.expect("write");
    }
    w.finish().await.expect("finish").into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_within_a_block_costs_one_get_and_no_head() {
    let server = MemoryS3::default();
    for s in 0..3 {
        let name = format!("shards/train-{s:05}.tfrecord");
        server.insert("mem", &name, shard_bytes(s, 200).await);
    }
    server.insert("mem", "shards/empty.tfrecord", Bytes::new());
    // More keys than one ListObjectsV2 page (1,000) holds.
    for i in 0..1005 {
        server.insert("mem", &format!("many/{i:04}.txt"), Bytes::from("x\n"));
    }
    let addr = memory_s3_server(server.clone(), "AKIDMEM", "mem-secret-key").await;
    let store = s3_store(addr, "mem", "AKIDMEM", "mem-secret-key");
    // A shard written through the S3 API (PutObject) reads back like the others.
    store
        .put(
            &StorePath::from("shards/train-00003.tfrecord"),
            PutPayload::from(shard_bytes(3, 200).await),
        )
        .await
        .expect("PutObject");
    let listed = store
        .list_with_delimiter(None)
        .await
        .expect("ListObjectsV2 with a delimiter");
    assert_eq!(
        listed.common_prefixes,
        [StorePath::from("many"), StorePath::from("shards")]
    );
    assert!(listed.objects.is_empty());
    storage::register("s3://mem", store).expect("register");
    let many = storage::glob("s3://mem/many/*.txt").await.expect("paged");
    assert_eq!(many.len(), 1005);
    assert_eq!(many[1004].to_string(), "s3://mem/many/1004.txt");

    let files = storage::glob("s3://mem/shards/train-*.tfrecord")
        .await
        .expect("glob");
    assert_eq!(files.len(), 4);
    let (gets, heads) = (server.gets.load(SeqCst), server.heads.load(SeqCst));
    let records = TFRecordDataset::new(files)
        .build()
        .collect()
        .await
        .expect("read");
    let want: Vec<Bytes> = (0..4)
        .flat_map(|s| (0..200).map(move |r| payload(s, r)))
        .collect();
    assert_eq!(records, want);
    assert_eq!(server.gets.load(SeqCst) - gets, 4, "one GET per object");
    assert_eq!(server.heads.load(SeqCst) - heads, 0, "no HEAD");

    // An empty object has no byte to range over (416): its size comes from a HEAD.
    let empty = TFRecordDataset::new(["s3://mem/shards/empty.tfrecord"])
        .build()
        .collect()
        .await
        .expect("an empty object is an empty file");
    assert!(empty.is_empty());
    assert_eq!(server.heads.load(SeqCst) - heads, 1);

    // Blocks of 1,000 bytes: one GET per block, the first telling the size; still no HEAD.
    let size = shard_bytes(0, 200).await.len();
    storage::register_with(
        "s3://mem-blocks",
        s3_store(addr, "mem", "AKIDMEM", "mem-secret-key"),
        ReadOptions::default().block_size(1000),
    )
    .expect("register");
    let gets = server.gets.load(SeqCst);
    let records = TFRecordDataset::new(["s3://mem-blocks/shards/train-00000.tfrecord"])
        .build()
        .collect()
        .await
        .expect("read in blocks");
    assert_eq!(records, (0..200).map(|r| payload(0, r)).collect::<Vec<_>>());
    assert_eq!(server.gets.load(SeqCst) - gets, size.div_ceil(1000));
    assert_eq!(
        server.heads.load(SeqCst) - heads,
        1,
        "no HEAD but the empty one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_read_at_once_share_one_connection_without_deadlock() {
    let server = MemoryS3::default();
    for s in 0..4 {
        let name = format!("shards/train-{s:05}.tfrecord");
        server.insert("mem", &name, shard_bytes(s, 200).await);
    }
    let addr = memory_s3_server(server, "AKIDMEM", "mem-secret-key").await;
    // One connection for four shards read at once, each many blocks with read-ahead: the
    // shards take turns, none waits forever for a connection another holds.
    storage::register_with(
        "s3://mem-one-connection",
        s3_store(addr, "mem", "AKIDMEM", "mem-secret-key"),
        ReadOptions::default()
            .block_size(1000)
            .read_ahead(3)
            .max_connections(1),
    )
    .expect("register");
    let files: Vec<String> = (0..4)
        .map(|s| format!("s3://mem-one-connection/shards/train-{s:05}.tfrecord"))
        .collect();
    let dataset = TFRecordDataset::new(files).num_parallel_reads(4).build();
    let records = tokio::time::timeout(std::time::Duration::from_secs(60), dataset.collect())
        .await
        .expect("no deadlock on the connection limit")
        .expect("read through one connection");
    let want: Vec<Bytes> = (0..200)
        .flat_map(|r| (0..4).map(move |s| payload(s, r)))
        .collect();
    assert_eq!(records, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_replaced_while_read_is_an_error_not_a_mix() {
    let server = MemoryS3::default();
    server.insert("mut", "big.tfrecord", shard_bytes(0, 20_000).await);
    let addr = memory_s3_server(server.clone(), "AKIDMUT", "mut-secret-key").await;
    storage::register_with(
        "s3://mut",
        s3_store(addr, "mut", "AKIDMUT", "mut-secret-key"),
        ReadOptions::default().block_size(1000).read_ahead(1),
    )
    .expect("register");
    let mut epoch = TFRecordDataset::new(["s3://mut/big.tfrecord"])
        .build()
        .iter();
    let first = epoch.next().await.expect("a record").expect("read");
    assert_eq!(first, payload(0, 0));
    // The later blocks are conditional on the first block's ETag.
    server.insert("mut", "big.tfrecord", shard_bytes(1, 20_000).await);
    let mut read = 1;
    let err = loop {
        match epoch.next().await {
            Some(Ok(record)) => {
                assert_eq!(record, payload(0, read), "only the old object's records");
                read += 1;
            }
            Some(Err(e)) => break e,
            None => panic!("read all {read} records of a replaced object"),
        }
    };
    let shown = format!("{err:#}");
    assert!(shown.contains("s3://mut/big.tfrecord"), "{shown}");
    assert!(shown.to_lowercase().contains("precondition"), "{shown}");
    assert!(read < 20_000);
}

/// An object served over plain HTTP with an ETag and a Last-Modified date.
fn http_object(data: impl Into<Bytes>) -> HttpObject {
    HttpObject {
        data: data.into(),
        e_tag: Some("v1".to_string()),
        last_modified: Some(std::time::SystemTime::now()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_urls_read_without_registering_a_store() {
    let files = Arc::new(HttpFiles::default());
    files.insert("/data/lines.txt", http_object("one\ntwo\nthree\n"));
    files.insert(
        "/data/train.tfrecord",
        http_object(shard_bytes(0, 300).await),
    );
    let addr = http_server(Arc::clone(&files)).await;

    let lines = TextLineDataset::new([format!("http://{addr}/data/lines.txt")])
        .build()
        .collect()
        .await
        .expect("a text file over http://");
    assert_eq!(lines, ["one", "two", "three"]);
    let records = TFRecordDataset::new([format!("http://{addr}/data/train.tfrecord")])
        .build()
        .collect()
        .await
        .expect("a TFRecord file over http://");
    assert_eq!(records, (0..300).map(|r| payload(0, r)).collect::<Vec<_>>());

    // An empty object: the ranged GET is refused (416), a HEAD tells its size.
    files.insert("/data/empty.txt", http_object(Bytes::new()));
    let lines = TextLineDataset::new([format!("http://{addr}/data/empty.txt")])
        .build()
        .collect()
        .await
        .expect("an empty object over http://");
    assert!(lines.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_4xx_fails_at_once_and_a_failed_head_keeps_the_gets_error() {
    let files = Arc::new(HttpFiles::default());
    files.insert("/data/lines.txt", http_object("one\n"));
    let addr = http_server(Arc::clone(&files)).await;
    let url = format!("http://{addr}/data/lines.txt");

    // 400 Bad Request: one GET, no retry, an error naming the URL.
    files.status.store(400, SeqCst);
    let err = TextLineDataset::new([url.clone()])
        .build()
        .collect()
        .await
        .expect_err("400");
    let shown = format!("{err:#}");
    assert!(shown.contains(&url), "{shown}");
    assert!(shown.contains("400"), "{shown}");
    assert_eq!(files.requests.load(SeqCst), 1, "a 400 is never retried");

    // 503 on every request, object_store's own retries off and a retry deadline of 300 ms:
    // the GET, then HEADs for the size until the deadline; the error tells the GET's failure
    // too.
    register_http(
        addr,
        ReadOptions::default()
            .retry_deadline(std::time::Duration::from_millis(300))
            .backoff(
                std::time::Duration::from_millis(1),
                std::time::Duration::from_millis(20),
            ),
    );
    files.status.store(503, SeqCst);
    files.requests.store(0, SeqCst);
    let err = TextLineDataset::new([url.clone()])
        .build()
        .collect()
        .await
        .expect_err("503");
    let shown = format!("{err:#}");
    assert!(shown.contains(&url), "{shown}");
    assert!(shown.contains("GET failed"), "{shown}");
    assert!(shown.contains("HTTP status 503"), "{shown}");
    assert!(files.requests.load(SeqCst) >= 3, "a GET and HEADs");
    no_cause_twice(&err);

    // A 404 is not retried either.
    files.status.store(0, SeqCst);
    files.requests.store(0, SeqCst);
    let err = TextLineDataset::new([format!("http://{addr}/data/missing.txt")])
        .build()
        .collect()
        .await
        .expect_err("404");
    assert!(format!("{err:#}").contains("/data/missing.txt"), "{err:#}");
    assert_eq!(files.requests.load(SeqCst), 1);
}

#[tokio::test]
async fn credentials_in_urls_never_appear_in_what_is_shown() {
    let secret_url = "s3://user:pw-secret@bucket/key?X-Amz-Signature=sig-value";
    let location = Location::from(secret_url);
    for shown in [
        location.to_string(),
        format!("{location:?}"),
        format!("{location:#?}"),
    ] {
        assert!(
            !shown.contains("pw-secret") && !shown.contains("sig-value"),
            "{shown}"
        );
        assert!(shown.contains("s3://bucket/key"), "{shown}");
    }
    assert_eq!(format!("{location:?}"), r#"Url("s3://bucket/key")"#);

    let store = Arc::new(InMemory::new());
    store
        .put(&StorePath::from("d/a.txt"), PutPayload::from("a\n"))
        .await
        .expect("put");
    store
        .put(&StorePath::from("d/b1.txt"), PutPayload::from("b\n"))
        .await
        .expect("put");
    storage::register("memory://secrets-test", store).expect("register");
    let shown = |err: anyhow::Error| {
        let shown = format!("{err:#} {err:?}");
        for secret in ["pw-secret", "sig-value", "sas-value"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        shown
    };

    // A read of a pre-signed URL or one with a SAS token is refused, without the query.
    for url in [
        "memory://secrets-test/d/a.txt?X-Amz-Signature=sig-value",
        "memory://secrets-test/d/a.txt?sv=2024&sig=sas-value",
        "memory://user:pw-secret@secrets-test/d/a.txt",
    ] {
        let err = TextLineDataset::new([url])
            .build()
            .collect()
            .await
            .expect_err("credentials in the URL");
        let shown = shown(err);
        assert!(shown.contains("query strings"), "{shown}");
        assert!(shown.contains("secrets-test/d/a.txt"), "{shown}");
    }
    // So is a glob; its other messages show the pattern without credentials too.
    let err = storage::glob("memory://secrets-test/d/*.txt?sig=sas-value")
        .await
        .expect_err("a SAS token");
    assert!(shown(err).contains("query strings"));
    let err = storage::glob("memory://user:pw-secret@secrets-test/d/*.txt")
        .await
        .expect_err("a password");
    assert!(shown(err).contains("query strings"));
    let err = storage::glob("s3://user:pw-secret@no-such-bucket/[z")
        .await
        .expect_err("an invalid pattern");
    shown(err);

    // A `?` in a glob is a wildcard, not a query.
    let files = storage::glob("memory://secrets-test/d/b?.txt")
        .await
        .expect("a ? wildcard");
    assert_eq!(files, [Location::from("memory://secrets-test/d/b1.txt")]);
}

/// `n` lines `"{tag} line {i}"`, as one text file.
fn lines(tag: &str, n: usize) -> String {
    (0..n).map(|i| format!("{tag} line {i:04}\n")).collect()
}

/// Reads the text file at `url` until its end or an error: the lines read, and the error.
async fn read_lines(url: &str) -> (Vec<String>, Option<anyhow::Error>) {
    let mut epoch = TextLineDataset::new([url]).build().iter();
    let mut read = Vec::new();
    while let Some(line) = epoch.next().await {
        match line {
            Ok(line) => read.push(String::from_utf8_lossy(&line).into_owned()),
            Err(e) => return (read, Some(e)),
        }
    }
    (read, None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_etag_a_resumed_body_is_validated_by_its_date_or_refused() {
    let files = Arc::new(HttpFiles::cutting_after(5_000));
    let addr = http_server(Arc::clone(&files)).await;
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    let version = |tag: &str, last_modified| HttpObject {
        data: Bytes::from(lines(tag, 1000)),
        e_tag: None,
        last_modified,
    };
    let v1: Vec<String> = lines("v1", 1000).lines().map(String::from).collect();

    // Neither ETag nor Last-Modified; the body is cut, then a new version is served: an
    // error naming the URL, never a mix of the two versions.
    files.insert("/none.txt", version("v1", None));
    files.replace_after_cut("/none.txt", version("v2", None));
    files.cuts.store(1, SeqCst);
    let url = format!("http://{addr}/none.txt");
    let (read, err) = read_lines(&url).await;
    let err = format!("{:#}", err.expect("an error, not a mix"));
    assert!(err.contains(&url), "{err}");
    assert!(
        err.contains("changed or cannot be validated")
            && err.contains("neither ETag nor Last-Modified"),
        "{err}"
    );
    assert!(read.iter().all(|l| l.starts_with("v1")), "only v1 lines");
    assert_eq!(files.fired.load(SeqCst), 1);
    assert_eq!(
        files.requests.load(SeqCst),
        1,
        "no unvalidated resume was sent"
    );

    // Last-Modified only, the object unchanged: the cut body resumes once, in order.
    files.insert("/dated.txt", version("v1", Some(then)));
    files.cuts.store(1, SeqCst);
    files.requests.store(0, SeqCst);
    let (read, err) = read_lines(&format!("http://{addr}/dated.txt")).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(read, v1);
    assert_eq!(files.fired.load(SeqCst), 2);
    assert_eq!(files.requests.load(SeqCst), 2, "the cut GET and one resume");

    // Last-Modified only, a newer version after the cut: the resume is refused (412).
    files.insert("/newer.txt", version("v1", Some(then)));
    files.replace_after_cut(
        "/newer.txt",
        version("v2", Some(std::time::SystemTime::now())),
    );
    files.cuts.store(1, SeqCst);
    let url = format!("http://{addr}/newer.txt");
    let (read, err) = read_lines(&url).await;
    let err = format!("{:#}", err.expect("an error, not a mix"));
    assert!(err.contains(&url), "{err}");
    assert!(err.to_lowercase().contains("precondition"), "{err}");
    assert!(read.iter().all(|l| l.starts_with("v1")), "only v1 lines");

    // Same date, another size (a server that ignores If-Unmodified-Since would serve it):
    // the size is checked too.
    files.insert("/resized.txt", version("v1", Some(then)));
    files.replace_after_cut(
        "/resized.txt",
        HttpObject {
            data: Bytes::from(lines("v2", 900)),
            e_tag: None,
            last_modified: Some(then),
        },
    );
    files.cuts.store(1, SeqCst);
    let url = format!("http://{addr}/resized.txt");
    let (read, err) = read_lines(&url).await;
    let err = format!("{:#}", err.expect("an error, not a mix"));
    assert!(err.contains(&url) && err.contains("changed"), "{err}");
    assert!(read.iter().all(|l| l.starts_with("v1")), "only v1 lines");
}

/// Registers an HTTP store for `addr` with object_store's retries off (so streamload's own
/// retries and resumes do the work) and `options`.
fn register_http(addr: std::net::SocketAddr, options: ReadOptions) {
    let store = object_store::http::HttpBuilder::new()
        .with_url(format!("http://{addr}/"))
        .with_client_options(object_store::ClientOptions::new().with_allow_http(true))
        .with_retry(object_store::RetryConfig {
            max_retries: 0,
            ..Default::default()
        })
        .build()
        .expect("an HTTP store");
    storage::register_with(&format!("http://{addr}/"), Arc::new(store), options).expect("register");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_again_and_again_resumes_as_long_as_bytes_arrive() {
    let files = Arc::new(HttpFiles::cutting_after(2_000));
    files.insert("/long.txt", http_object(lines("v1", 1500)));
    let addr = http_server(Arc::clone(&files)).await;
    // A retry deadline of 50 ms, but every try brings 2,000 bytes before its cut (20 ms
    // after them), which ends the row of faults: ten cuts in a row are ridden out.
    register_http(
        addr,
        ReadOptions::default()
            .retry_deadline(std::time::Duration::from_millis(50))
            .backoff(
                std::time::Duration::from_millis(1),
                std::time::Duration::from_millis(5),
            ),
    );
    files.cuts.store(usize::MAX, SeqCst);
    let (read, err) = read_lines(&format!("http://{addr}/long.txt")).await;
    assert!(err.is_none(), "{err:?}");
    let want: Vec<String> = lines("v1", 1500).lines().map(String::from).collect();
    assert_eq!(read, want);
    let size = lines("v1", 1500).len();
    assert_eq!(files.fired.load(SeqCst), size.div_ceil(2_000) - 1);
    assert_eq!(files.requests.load(SeqCst), size.div_ceil(2_000));
}

#[tokio::test]
async fn file_url_globs_and_keys_with_ampersands_and_pluses_match() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["t-1.txt", "t-2.txt", "u-1.txt"] {
        std::fs::write(dir.path().join(name), "x\n").expect("write");
    }
    let url = url::Url::from_directory_path(dir.path()).expect("a file URL");
    let files = storage::glob(&format!("{url}t-*.txt"))
        .await
        .expect("a file:// glob");
    assert_eq!(
        files,
        [
            Location::Local(dir.path().join("t-1.txt")),
            Location::Local(dir.path().join("t-2.txt")),
        ]
    );
    let files = storage::glob(&format!("{url}?-1.txt"))
        .await
        .expect("a file:// glob with ?");
    assert_eq!(files.len(), 2);

    let store = Arc::new(InMemory::new());
    for key in ["a&b/x-1.txt", "a&b/y-1.txt", "c+d e/x-1.txt"] {
        store
            .put(&StorePath::from(key), PutPayload::from("x\n"))
            .await
            .expect("put");
    }
    storage::register("memory://amp-test", store).expect("register");
    let files = storage::glob("memory://amp-test/a&b/x-*.txt")
        .await
        .expect("a key with &");
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].to_string(), "memory://amp-test/a&b/x-1.txt");
    let files = storage::glob("memory://amp-test/c+d%20e/x-*.txt")
        .await
        .expect("a key with + and a space");
    assert_eq!(files.len(), 1);
    let lines = TextLineDataset::new(files)
        .build()
        .collect()
        .await
        .expect("read it");
    assert_eq!(lines, ["x"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_and_read_range_on_files_s3_and_http() {
    use tokio::io::AsyncReadExt;

    let data: Bytes = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("data.bin");
    std::fs::write(&path, &data).expect("write");
    let server = MemoryS3::default();
    server.insert("ranges", "data.bin", data.clone());
    let addr = memory_s3_server(server.clone(), "AKIDRANGE", "range-secret-key").await;
    // Blocks of 7,000 bytes, so a read spans many ranged GETs.
    storage::register_with(
        "s3://ranges",
        s3_store(addr, "ranges", "AKIDRANGE", "range-secret-key"),
        ReadOptions::default().block_size(7_000).read_ahead(3),
    )
    .expect("register");
    let files = Arc::new(HttpFiles::default());
    files.insert("/data.bin", http_object(data.clone()));
    let http = http_server(Arc::clone(&files)).await;

    let locations = [
        Location::from(path.clone()),
        Location::from("s3://ranges/data.bin"),
        Location::from(format!("http://{http}/data.bin")),
    ];
    for location in locations {
        let mut reader = storage::open(location.clone()).await.expect("open");
        let mut all = Vec::new();
        reader.read_to_end(&mut all).await.expect("read");
        assert!(all == data, "{location}: every byte, in order");

        for range in [0..10, 6_990..7_010, 12_345..54_321, 99_990..100_000] {
            let bytes = storage::read_range(location.clone(), range.clone())
                .await
                .expect("a range");
            let want = &data[range.start as usize..range.end as usize];
            assert!(bytes == want, "{location} {range:?}");
        }
        let tail = storage::read_range(location.clone(), 99_000..200_000)
            .await
            .expect("up to the end");
        assert!(tail == data[99_000..], "{location}");
        // To the end, whatever its size (a whole object: `io.read_file`).
        for start in [0, 99_000] {
            let rest = storage::read_range(location.clone(), start..u64::MAX)
                .await
                .expect("to the end");
            assert!(rest == data[start as usize..], "{location} {start}..");
        }
        let at_end = storage::read_range(location.clone(), 100_000..100_010)
            .await
            .expect("empty at the end");
        assert!(at_end.is_empty(), "{location}");
        let err = storage::read_range(location.clone(), 200_000..200_010)
            .await
            .expect_err("past the end");
        let shown = format!("{err:#}");
        assert!(shown.contains(&location.to_string()), "{shown}");
    }
    let err = match storage::open("s3://ranges/missing.bin").await {
        Ok(_) => panic!("a missing object opened"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("s3://ranges/missing.bin"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_and_fixed_length_records_over_memory_and_s3_urls() {
    // 2,000 CSV rows, a quoted field with a comma in each; 3,000 fixed-length records of 7
    // bytes between a 5-byte header and a 3-byte footer.
    let mut csv = String::from("id,name,score\n");
    for i in 0..2000 {
        csv.push_str(&format!("{i},\"name {i}, the {}\",{}.5\n", i % 7, i % 100));
    }
    let mut fixed = b"HEAD!".to_vec();
    for i in 0..3000u32 {
        fixed.extend_from_slice(&[b'r', (i % 251) as u8, (i / 251) as u8, 0, 1, 2, 3]);
    }
    fixed.extend_from_slice(b"END");
    let memory = Arc::new(InMemory::new());
    for (key, bytes) in [
        ("t/a.csv", csv.clone().into_bytes()),
        ("t/r.bin", fixed.clone()),
    ] {
        memory
            .put(&StorePath::from(key), PutPayload::from(bytes))
            .await
            .expect("put");
    }
    storage::register("memory://formats-test", memory).expect("register");
    let server = MemoryS3::default();
    server.insert("formats", "t/a.csv", Bytes::from(csv.clone()));
    server.insert("formats", "t/r.bin", Bytes::from(fixed.clone()));
    let addr = memory_s3_server(server, "AKIDFMT", "fmt-secret-key").await;
    // Blocks of 1,000 bytes: rows, quoted fields and records cross block boundaries.
    storage::register_with(
        "s3://formats",
        s3_store(addr, "formats", "AKIDFMT", "fmt-secret-key"),
        ReadOptions::default().block_size(1000).read_ahead(2),
    )
    .expect("register");

    for prefix in ["memory://formats-test", "s3://formats"] {
        let rows = CsvDataset::new(
            [format!("{prefix}/t/a.csv")],
            [Column::int64(), Column::string(), Column::float32()],
        )
        .header(true)
        .build()
        .collect()
        .await
        .expect("CSV over a URL");
        assert_eq!(rows.len(), 2000, "{prefix}");
        for (i, row) in rows.iter().enumerate() {
            let want = vec![
                Field::Int64(i as i64),
                Field::String(Bytes::from(format!("name {i}, the {}", i % 7))),
                Field::Float32((i % 100) as f32 + 0.5),
            ];
            assert_eq!(*row, want, "{prefix} row {i}");
        }

        let records = FixedLengthRecordDataset::new([format!("{prefix}/t/r.bin")], 7)
            .header_bytes(5)
            .footer_bytes(3)
            .build()
            .collect()
            .await
            .expect("fixed-length records over a URL");
        let want: Vec<Bytes> = fixed[5..fixed.len() - 3]
            .chunks(7)
            .map(Bytes::copy_from_slice)
            .collect();
        assert_eq!(records.len(), 3000, "{prefix}");
        assert!(records == want, "{prefix}: records differ");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_of_many_blocks_reads_back_byte_exact_and_in_order() {
    // About 2.6 MB in records of 1 to 2,000 bytes, read in 256 KiB blocks, four ahead.
    let mut w = TFRecordWriter::new(Vec::new(), Compression::None);
    let mut want = Vec::new();
    let mut total = 0;
    let mut i = 0u32;
    while total < 2_600_000 {
        let len = 1 + (i as usize * 7919) % 2000;
        let record: Bytes = (0..len).map(|j| (j as u32 ^ i) as u8).collect();
        w.write(&record).await.expect("write");
        total += record.len() + 16;
        want.push(record);
        i += 1;
    }
    let bytes = Bytes::from(w.finish().await.expect("finish"));
    let block = 256 * 1024;
    assert!(bytes.len() > 9 * block, "{} bytes", bytes.len());
    let server = MemoryS3::default();
    server.insert("big", "one.tfrecord", bytes.clone());
    let addr = memory_s3_server(server.clone(), "AKIDBIG", "big-secret-key").await;
    storage::register_with(
        "s3://big",
        s3_store(addr, "big", "AKIDBIG", "big-secret-key"),
        ReadOptions::default()
            .block_size(block as u64)
            .read_ahead(4),
    )
    .expect("register");
    let records = TFRecordDataset::new(["s3://big/one.tfrecord"])
        .build()
        .collect()
        .await
        .expect("read");
    assert_eq!(records.len(), want.len());
    assert!(records == want, "records differ");
    assert_eq!(
        server.gets.load(SeqCst),
        bytes.len().div_ceil(block),
        "a GET per block"
    );
    let mut all = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(
        &mut storage::open("s3://big/one.tfrecord").await.expect("open"),
        &mut all,
    )
    .await
    .expect("read");
    assert!(all == bytes, "byte-exact");
}

/// Asserts that `err` shows each cause once in `{err:#}`: no error of its chain shows a
/// later one's message (as object_store's errors show their sources', so that a chain of
/// them repeats each cause as often as it is nested).
fn no_cause_twice(err: &anyhow::Error) {
    let links: Vec<String> = err.chain().map(|e| e.to_string()).collect();
    for (i, link) in links.iter().enumerate() {
        for later in &links[i + 1..] {
            assert!(
                !link.contains(later.as_str()),
                "{later:?} shown twice in {err:#}"
            );
        }
    }
}

/// A port on 127.0.0.1 that nothing listens on (bound, then let go): connections to it are
/// refused.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Reads `urls` as TFRecord files, `cycle` at once: the error, and how long it took.
async fn read_error(urls: Vec<String>, cycle: usize) -> (anyhow::Error, std::time::Duration) {
    let started = std::time::Instant::now();
    let err = TFRecordDataset::new(urls)
        .num_parallel_reads(cycle)
        .build()
        .collect()
        .await
        .expect_err("a bad URL");
    (err, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_or_an_unknown_host_fails_in_seconds_naming_the_url() {
    // Once these took about a minute each: object_store's ten retries inside streamload's
    // eight, then a HEAD retried as long.
    let url = format!("http://127.0.0.1:{}/x.tfrecord", closed_port());
    let (err, took) = read_error(vec![url.clone()], 1).await;
    let shown = format!("{err:#}");
    assert!(
        took < std::time::Duration::from_secs(5),
        "{took:?}: {shown}"
    );
    assert!(shown.contains(&url), "{shown}");
    assert!(
        shown.contains("cannot connect") && shown.contains("refused"),
        "{shown}"
    );
    assert!(
        !shown.contains("HEAD"),
        "no HEAD after a permanent fault: {shown}"
    );
    no_cause_twice(&err);

    // `.invalid` never resolves (RFC 6761).
    let url = "http://nonexistent.invalid/x.tfrecord".to_string();
    let (err, took) = read_error(vec![url.clone()], 1).await;
    let shown = format!("{err:#}");
    assert!(
        took < std::time::Duration::from_secs(5),
        "{took:?}: {shown}"
    );
    assert!(
        shown.contains(&url) && shown.contains("cannot connect"),
        "{shown}"
    );

    // A failed TLS handshake: https:// to a server speaking plain HTTP.
    let files = Arc::new(HttpFiles::default());
    files.insert("/x.tfrecord", http_object(shard_bytes(0, 10).await));
    let plain = http_server(Arc::clone(&files)).await;
    let url = format!("https://{plain}/x.tfrecord");
    let (err, took) = read_error(vec![url.clone()], 1).await;
    let shown = format!("{err:#}");
    assert!(
        took < std::time::Duration::from_secs(5),
        "{took:?}: {shown}"
    );
    assert!(
        shown.contains(&url) && shown.contains("cannot connect"),
        "{shown}"
    );
    assert_eq!(files.requests.load(SeqCst), 0, "{shown}");

    // Six of them, two read at once: once 107 s.
    let urls: Vec<String> = (0..6)
        .map(|i| format!("http://127.0.0.1:{}/x-{i}.tfrecord", closed_port()))
        .collect();
    let (err, took) = read_error(urls, 2).await;
    let shown = format!("{err:#}");
    assert!(
        took < std::time::Duration::from_secs(5),
        "{took:?}: {shown}"
    );
    assert!(shown.contains("/x-0.tfrecord"), "{shown}");
}

/// The variable that tells a child process which test it runs (see [`run_in_child`]).
const CHILD: &str = "STREAMLOAD_TEST_CHILD";

/// Whether this process is the child [`run_in_child`] started for `test`.
fn is_child(test: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(test)
}

/// Runs this binary's test `test` again in a child process whose environment holds `env`
/// and no other `AWS_*`, `GOOGLE_*`, `GCE_*` or `AZURE_*` variable, so that a store built from the
/// environment sees exactly these and no other test of this binary sees them (the
/// environment is the whole process's); panics, with the child's output, if it failed. In
/// the child, [`is_child`] is true and the test runs its body.
fn run_in_child(test: &str, env: &[(&str, String)]) {
    let mut child = std::process::Command::new(std::env::current_exe().expect("this binary"));
    child
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, test);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if ["AWS_", "GOOGLE_", "AZURE_"]
            .iter()
            .any(|p| key.starts_with(p))
        {
            child.env_remove(key.as_ref());
        }
    }
    child.envs(env.iter().map(|(key, value)| (key, value)));
    let output = child.output().expect("the test in a child process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{test} in a child process: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The `AWS_*` variables of an S3 server at `endpoint` with a key pair.
fn aws_env(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT", endpoint.to_string()),
        ("AWS_ALLOW_HTTP", "true".to_string()),
        ("AWS_ACCESS_KEY_ID", "AKIDENV".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "env-secret-key".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
    ]
}

#[test]
fn an_s3_endpoint_that_refuses_fails_in_seconds_naming_the_url() {
    let test = "an_s3_endpoint_that_refuses_fails_in_seconds_naming_the_url";
    if !is_child(test) {
        let endpoint = format!("http://127.0.0.1:{}", closed_port());
        return run_in_child(test, &aws_env(&endpoint));
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        // Six objects, two read at once: once 61.6 s for one.
        let urls: Vec<String> = (0..6)
            .map(|i| format!("s3://env-bucket/x-{i}.tfrecord"))
            .collect();
        let (err, took) = read_error(urls, 2).await;
        let shown = format!("{err:#}");
        assert!(
            took < std::time::Duration::from_secs(5),
            "{took:?}: {shown}"
        );
        assert!(shown.contains("s3://env-bucket/x-0.tfrecord"), "{shown}");
        assert!(shown.contains("Connection refused"), "{shown}");
        assert!(!shown.contains("env-secret-key"), "{shown}");
        no_cause_twice(&err);

        // A listing: once its cause was shown three times.
        let started = std::time::Instant::now();
        let err = storage::glob("s3://env-bucket/x-*.tfrecord")
            .await
            .expect_err("a refused listing");
        let shown = format!("{err:#}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{shown}"
        );
        assert!(shown.contains("s3://env-bucket/x-*.tfrecord"), "{shown}");
        assert_eq!(shown.matches("Connection refused").count(), 1, "{shown}");
        no_cause_twice(&err);
    });
}

/// A listener on 127.0.0.1 that takes connections and never answers, counting them, until
/// the flag it returns is set.
fn silent_server() -> (
    std::net::SocketAddr,
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    let (count, stop) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let (counted, stopped) = (Arc::clone(&count), Arc::clone(&stop));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while !stopped.load(SeqCst) {
            match listener.accept() {
                Ok((socket, _)) => {
                    counted.fetch_add(1, SeqCst);
                    held.push(socket);
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
            }
        }
    });
    (addr, count, stop)
}

#[test]
fn s3_without_credentials_names_the_variables_within_seconds() {
    let test = "s3_without_credentials_names_the_variables_within_seconds";
    if !is_child(test) {
        // The metadata service is a silent server on 127.0.0.1 (the worst case: it takes
        // the connection and never answers), never 169.254.169.254.
        let (metadata, asked, stop) = silent_server();
        let mut env = aws_env(&format!("http://127.0.0.1:{}", closed_port()));
        env.retain(|(key, _)| !key.starts_with("AWS_ACCESS") && !key.starts_with("AWS_SECRET"));
        env.push(("AWS_METADATA_ENDPOINT", format!("http://{metadata}")));
        run_in_child(test, &env);
        stop.store(true, SeqCst);
        // The child asked it once (and was not answered).
        assert_eq!(asked.load(SeqCst), 1);
        return;
    }
    let metadata = std::env::var("AWS_METADATA_ENDPOINT").expect("set by the parent");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let (err, took) = read_error(vec!["s3://env-bucket/x.tfrecord".to_string()], 1).await;
        let shown = format!("{err:#}");
        assert!(
            took < std::time::Duration::from_secs(5),
            "{took:?}: {shown}"
        );
        assert!(shown.contains("s3://env-bucket/x.tfrecord"), "{shown}");
        for variable in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_REGION",
            "AWS_ENDPOINT",
            "AWS_SKIP_SIGNATURE=true",
        ] {
            assert!(shown.contains(variable), "{variable}: {shown}");
        }
        assert!(shown.contains(&metadata), "{shown}");
        assert!(!shown.contains("169.254.169.254"), "{shown}");
        no_cause_twice(&err);
    });
}

#[test]
fn s3_without_credentials_and_no_metadata_service_fails_at_once() {
    let test = "s3_without_credentials_and_no_metadata_service_fails_at_once";
    if !is_child(test) {
        let (metadata, asked, stop) = silent_server();
        let mut env = aws_env(&format!("http://127.0.0.1:{}", closed_port()));
        env.retain(|(key, _)| !key.starts_with("AWS_ACCESS") && !key.starts_with("AWS_SECRET"));
        env.push(("AWS_METADATA_ENDPOINT", format!("http://{metadata}")));
        env.push(("AWS_EC2_METADATA_DISABLED", "true".to_string()));
        env.push(("AWS_PROFILE", "laptop".to_string()));
        run_in_child(test, &env);
        stop.store(true, SeqCst);
        assert_eq!(asked.load(SeqCst), 0, "the metadata service was not asked");
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let (err, took) = read_error(vec!["s3://env-bucket/x.tfrecord".to_string()], 1).await;
        let shown = format!("{err:#}");
        assert!(
            took < std::time::Duration::from_secs(1),
            "{took:?}: {shown}"
        );
        assert!(shown.contains("s3://env-bucket/x.tfrecord"), "{shown}");
        assert!(
            shown.contains("AWS_ACCESS_KEY_ID") && shown.contains("AWS_EC2_METADATA_DISABLED"),
            "{shown}"
        );
        assert!(shown.contains("AWS_PROFILE is set"), "{shown}");
        no_cause_twice(&err);
    });
}

#[test]
fn azure_without_an_account_names_the_variable_once() {
    let test = "azure_without_an_account_names_the_variable_once";
    if !is_child(test) {
        return run_in_child(test, &[]);
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let err = storage::glob("az://container/train-*.tfrecord")
            .await
            .expect_err("no account");
        let shown = format!("{err:#}");
        assert_eq!(
            shown.matches("Account must be specified").count(),
            1,
            "{shown}"
        );
        assert!(shown.contains("AZURE_STORAGE_ACCOUNT_NAME"), "{shown}");
        no_cause_twice(&err);
    });
}

/// Reads the TFRecord files `urls`, `cycle` at once; after `after` records calls `start` and,
/// `storm` later, `end` (a storm of `storm`): the records read, and the error if one ended
/// the read.
async fn read_through_storm(
    urls: Vec<String>,
    cycle: usize,
    after: usize,
    storm: std::time::Duration,
    start: impl FnOnce(),
    end: impl FnOnce() + Send + 'static,
) -> (Vec<Bytes>, Option<anyhow::Error>) {
    let mut epoch = TFRecordDataset::new(urls)
        .num_parallel_reads(cycle)
        .build()
        .iter();
    let mut read = Vec::new();
    let (mut start, mut end) = (Some(start), Some(end));
    while let Some(record) = epoch.next().await {
        match record {
            Ok(record) => read.push(record),
            Err(e) => return (read, Some(e)),
        }
        if read.len() == after
            && let (Some(start), Some(end)) = (start.take(), end.take())
        {
            start();
            tokio::spawn(async move {
                tokio::time::sleep(storm).await;
                end();
            });
        }
    }
    (read, None)
}

/// Options for the storm tests: small blocks (many GETs, so the storm meets many), backoff
/// from 10 ms up to 200 ms, and `deadline`.
fn storm_options(deadline: std::time::Duration) -> ReadOptions {
    ReadOptions::default()
        .block_size(10_000)
        .read_ahead(2)
        .backoff(
            std::time::Duration::from_millis(10),
            std::time::Duration::from_millis(200),
        )
        .retry_deadline(deadline)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_503s_is_ridden_out_until_the_retry_deadline_over_s3() {
    use std::time::Duration;
    let dir = tempfile::tempdir().expect("tempdir");
    let bucket = dir.path().join("faulty");
    std::fs::create_dir_all(bucket.join("shards")).expect("bucket");
    for (name, bytes) in shards(4, RECORDS, Compression::None).await {
        std::fs::write(bucket.join("shards").join(name), bytes).expect("write shard");
    }
    let server = s3_server(dir.path(), "AKIDTEST", "s3cr3t-test-key").await;
    let urls = |prefix: &str| -> Vec<String> {
        (0..4)
            .map(|s| format!("{prefix}/shards/train-{s:05}.tfrecord"))
            .collect()
    };
    let want: Vec<Bytes> = (0..RECORDS)
        .flat_map(|r| (0..4).map(move |s| payload(s, r)))
        .collect();

    // Every connection answered 503 for 3 s from the 2,000th record on (every open one cut):
    // far more than the eight retries once allowed, well within a deadline of 10 s. Every
    // record arrives once, in order.
    let options = storm_options(Duration::from_secs(10));
    let faults = through_proxy(server, "s3://storm-held", Faults::default(), options).await;
    // A listing is retried too (object_store's retries are off in this store).
    faults.slow_downs.store(3, SeqCst);
    let listed = storage::glob("s3://storm-held/shards/train-*.tfrecord")
        .await
        .expect("a listing through three 503s");
    assert_eq!(listed.len(), 4);
    assert_eq!(faults.slow_downs.load(SeqCst), 0);
    let (on, off) = (Arc::clone(&faults), Arc::clone(&faults));
    let (read, err) = read_through_storm(
        urls("s3://storm-held"),
        4,
        2_000,
        Duration::from_secs(3),
        move || on.start_storm(),
        move || off.end_storm(),
    )
    .await;
    assert!(err.is_none(), "{:#}", err.expect("an error"));
    assert_eq!(read.len(), want.len());
    assert!(read == want, "every record once, in order");
    let answered = faults.storm_answers.load(SeqCst);
    assert!(answered > 8, "503s answered: {answered}");

    // A storm past the deadline: an error naming the URL, how long it retried and the last
    // status; the records before it are the first ones, in order.
    let options = storm_options(Duration::from_secs(1));
    let faults = through_proxy(server, "s3://storm-lost", Faults::default(), options).await;
    let on = Arc::clone(&faults);
    let started = std::time::Instant::now();
    let (read, err) = read_through_storm(
        urls("s3://storm-lost"),
        4,
        2_000,
        Duration::from_secs(3600),
        move || on.start_storm(),
        || {},
    )
    .await;
    let err = err.expect("a storm past the deadline");
    let shown = format!("{err:#}");
    assert!(started.elapsed() < Duration::from_secs(30), "{shown}");
    assert!(shown.contains("s3://storm-lost/shards/train-"), "{shown}");
    assert!(
        shown.contains("gave up after") && shown.contains("retry deadline 1s"),
        "{shown}"
    );
    assert!(shown.contains("HTTP status 503"), "{shown}");
    assert!(!shown.contains("s3cr3t"), "{shown}");
    assert!(read.len() >= 2_000 && read[..] == want[..read.len()]);
    no_cause_twice(&err);
    faults.end_storm();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_503s_is_ridden_out_until_the_retry_deadline_over_http() {
    use std::time::Duration;
    let records = 8_000;
    let want: Vec<Bytes> = (0..records).map(|r| payload(0, r)).collect();
    let shard = shard_bytes(0, records).await;
    let storm = |files: &Arc<HttpFiles>, status: u16| {
        let files = Arc::clone(files);
        move || files.status.store(status, SeqCst)
    };

    // Every request answered 503 for 3 s from the 2,000th record on, object_store's retries
    // off: every record once, in order.
    let files = Arc::new(HttpFiles::default());
    files.insert("/train.tfrecord", http_object(shard.clone()));
    let addr = http_server(Arc::clone(&files)).await;
    register_http(addr, storm_options(Duration::from_secs(10)));
    let url = format!("http://{addr}/train.tfrecord");
    let counted = Arc::clone(&files);
    let (read, err) = read_through_storm(
        vec![url.clone()],
        1,
        2_000,
        Duration::from_secs(3),
        move || {
            counted.status.store(503, SeqCst);
            counted.requests.store(0, SeqCst);
        },
        storm(&files, 0),
    )
    .await;
    assert!(err.is_none(), "{:#}", err.expect("an error"));
    assert!(read == want, "every record once, in order");
    // Requests after the storm are few: the object's blocks left, a handful.
    let tried = files.requests.load(SeqCst);
    assert!(tried > 8 + 6, "requests since the storm began: {tried}");

    // The same with a store built from the URL, with the default options (backoff up to
    // 10 s, a deadline of 5 minutes).
    let files = Arc::new(HttpFiles::default());
    files.insert("/train.tfrecord", http_object(shard.clone()));
    let addr = http_server(Arc::clone(&files)).await;
    let (read, err) = read_through_storm(
        vec![format!("http://{addr}/train.tfrecord")],
        1,
        2_000,
        Duration::from_secs(3),
        storm(&files, 503),
        storm(&files, 0),
    )
    .await;
    assert!(err.is_none(), "{:#}", err.expect("an error"));
    assert!(read == want, "every record once, in order");

    // A storm past the deadline: an error naming the URL, how long it retried and the last
    // status.
    let files = Arc::new(HttpFiles::default());
    files.insert("/train.tfrecord", http_object(shard));
    let addr = http_server(Arc::clone(&files)).await;
    register_http(addr, storm_options(Duration::from_secs(1)));
    let url = format!("http://{addr}/train.tfrecord");
    let started = std::time::Instant::now();
    let (read, err) = read_through_storm(
        vec![url.clone()],
        1,
        2_000,
        Duration::from_secs(3600),
        storm(&files, 503),
        || {},
    )
    .await;
    let err = err.expect("a storm past the deadline");
    let shown = format!("{err:#}");
    assert!(started.elapsed() < Duration::from_secs(30), "{shown}");
    assert!(shown.contains(&url), "{shown}");
    assert!(
        shown.contains("gave up after") && shown.contains("retry deadline 1s"),
        "{shown}"
    );
    assert!(shown.contains("HTTP status 503"), "{shown}");
    assert!(read.len() >= 2_000 && read[..] == want[..read.len()]);
    no_cause_twice(&err);
}

/// In a child process with `env(metadata)` (the cloud's metadata service at `metadata`, a
/// silent server on 127.0.0.1, never 169.254.169.254): reading `url` fails within seconds,
/// naming it and each of `variables`.
fn without_credentials(
    test: &str,
    env: impl Fn(std::net::SocketAddr) -> Vec<(&'static str, String)>,
    url: &str,
    variables: &[&str],
) {
    if !is_child(test) {
        let (metadata, asked, stop) = silent_server();
        let home = tempfile::tempdir().expect("an empty HOME");
        let mut env = env(metadata);
        env.push(("HOME", home.path().display().to_string()));
        run_in_child(test, &env);
        stop.store(true, SeqCst);
        assert!(asked.load(SeqCst) >= 1, "the metadata service was asked");
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let (err, took) = read_error(vec![url.to_string()], 1).await;
        let shown = format!("{err:#}");
        assert!(
            took < std::time::Duration::from_secs(5),
            "{took:?}: {shown}"
        );
        assert!(shown.contains(url), "{shown}");
        for variable in variables {
            assert!(shown.contains(variable), "{variable}: {shown}");
        }
        no_cause_twice(&err);
    });
}

#[test]
fn gcs_without_credentials_names_the_variables_within_seconds() {
    without_credentials(
        "gcs_without_credentials_names_the_variables_within_seconds",
        |metadata| {
            vec![
                (
                    "GOOGLE_BASE_URL",
                    format!("http://127.0.0.1:{}", closed_port()),
                ),
                ("GCE_METADATA_HOST", metadata.to_string()),
                ("GCE_METADATA_IP", metadata.to_string()),
            ]
        },
        "gs://env-bucket/x.tfrecord",
        &[
            "GOOGLE_SERVICE_ACCOUNT",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_SKIP_SIGNATURE=true",
        ],
    );
}

#[test]
fn azure_without_credentials_names_the_variables_within_seconds() {
    without_credentials(
        "azure_without_credentials_names_the_variables_within_seconds",
        |metadata| {
            vec![
                ("AZURE_STORAGE_ACCOUNT_NAME", "streamload".to_string()),
                (
                    "AZURE_STORAGE_ENDPOINT",
                    format!("http://127.0.0.1:{}", closed_port()),
                ),
                ("AZURE_ALLOW_HTTP", "true".to_string()),
                (
                    "AZURE_MSI_ENDPOINT",
                    format!("http://{metadata}/metadata/identity/oauth2/token"),
                ),
            ]
        },
        "az://container/x.tfrecord",
        &[
            "AZURE_STORAGE_ACCOUNT_KEY",
            "AZURE_STORAGE_SAS_KEY",
            "AZURE_SKIP_SIGNATURE=true",
        ],
    );
}
