//! WebDataset tar shards: conformance with the `webdataset` Python package and GNU tar (shards
//! and what the package read from them, made by scripts/wds_conformance.py), round trips
//! through `ShardWriter` that the package reads back, hostile shards, and mutation fuzzing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use streamload::Error;
use streamload::format::{Compression, Sample, ShardWriter, WebDataset, webdataset_samples};

#[path = "support/s3.rs"]
mod s3;

fn data_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wds"))
}

/// What the Python package read: shard name -> [(key, {ext: bytes})].
type Read = BTreeMap<String, Vec<(String, BTreeMap<String, Vec<u8>>)>>;

fn expected() -> Read {
    let text = std::fs::read_to_string(data_dir().join("expected.json")).expect("expected.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let b64 = base64::engine::general_purpose::STANDARD;
    json.as_object()
        .expect("an object")
        .iter()
        .map(|(shard, samples)| {
            let samples = samples
                .as_array()
                .expect("samples")
                .iter()
                .map(|s| {
                    let fields = s["fields"]
                        .as_object()
                        .expect("fields")
                        .iter()
                        .map(|(k, v)| (k.clone(), b64.decode(v.as_str().unwrap()).unwrap()))
                        .collect();
                    (s["__key__"].as_str().unwrap().to_string(), fields)
                })
                .collect();
            (shard.clone(), samples)
        })
        .collect()
}

fn as_read(samples: &[Sample]) -> Vec<(String, BTreeMap<String, Vec<u8>>)> {
    samples
        .iter()
        .map(|s| {
            let fields = s
                .fields()
                .map(|(e, b)| (e.to_string(), b.to_vec()))
                .collect();
            (s.key().to_string(), fields)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_shards_as_the_python_package_does() {
    let expected = expected();
    let written_by_others: Vec<_> = expected
        .keys()
        .filter(|name| !name.starts_with("rust-"))
        .collect();
    assert!(written_by_others.len() >= 7, "{written_by_others:?}");
    for name in written_by_others {
        let path = data_dir().join(name);
        for memory_map in [true, false] {
            let samples = WebDataset::new([&path])
                .memory_map(memory_map)
                .buffer_size(700) // members and headers across blocks
                .build()
                .collect()
                .await
                .unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(as_read(&samples), expected[name], "{name}");
            assert!(
                samples
                    .iter()
                    .all(|s| s.url() == path.display().to_string())
            );
        }
    }
    // Typed accessors on what Python's TarWriter wrote.
    let samples = WebDataset::new([data_dir().join("py-ustar.tar")])
        .build()
        .collect()
        .await
        .unwrap();
    assert_eq!(samples[3].cls().unwrap(), 3);
    assert_eq!(samples[3].txt().unwrap(), "caption 3: h\u{e9}llo");
    assert_eq!(samples[4].json().unwrap()["tags"][0], "a");
    assert_eq!(samples[4].json().unwrap()["i"], 4);
    assert_eq!(samples[6].key(), "empty");
    assert_eq!(
        samples[6].cls().unwrap(),
        12,
        "whitespace around an integer"
    );
    assert_eq!(samples[6].txt().unwrap(), "");
    let err = samples[5].json().unwrap_err().to_string();
    assert!(err.contains("has no `json` field"), "{err}");
}

/// The samples of the round trip: long, non-ASCII and nested keys, empty and binary fields.
fn rust_samples() -> Vec<Sample> {
    let mut out = Vec::new();
    for i in 0..12u32 {
        let key = match i {
            3 => format!("deep/{}/k{i}", "d".repeat(120)),
            4 => "caf\u{e9}/\u{fc}ber".to_string(),
            _ => format!("r/{i:05}"),
        };
        let mut s = Sample::new(key).with("cls", (i % 5).to_string()).with(
            "bin",
            (0..(i * 173) % 1500)
                .map(|b| (b * i) as u8)
                .collect::<Vec<u8>>(),
        );
        if i % 3 == 0 {
            s.insert("seg.png", vec![0x89u8, b'P', b'N', b'G']);
            s.insert("txt", "");
        }
        out.push(s);
    }
    out
}

async fn write_rust_shards(dir: &Path, gzip: bool) -> Vec<PathBuf> {
    let pattern = dir.join(if gzip {
        "rust-%02d.tar.gz"
    } else {
        "rust-%02d.tar"
    });
    let mut w = ShardWriter::new(pattern.to_str().unwrap())
        .unwrap()
        .max_samples(5);
    for s in rust_samples() {
        w.write(&s).await.unwrap();
    }
    let shards = w.finish().await.unwrap();
    shards
        .iter()
        .map(|s| s.as_path().unwrap().to_path_buf())
        .collect()
}

/// `ShardWriter`'s shards are the committed ones (reproducible bytes), which the Python
/// package read as the samples written (tests/data/wds/expected.json); streamload reads them
/// back the same. `WDS_REGENERATE=1` writes them into tests/data/wds instead (then run the
/// script with `--read-only`).
#[tokio::test]
async fn shard_writer_output_reads_back_in_python_and_here() {
    let want = as_read(&rust_samples());
    if std::env::var_os("WDS_REGENERATE").is_some() {
        write_rust_shards(&data_dir(), false).await;
        write_rust_shards(&data_dir(), true).await;
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plain = write_rust_shards(dir.path(), false).await;
    assert_eq!(plain.len(), 3);
    for shard in &plain {
        let name = shard.file_name().unwrap();
        let committed = std::fs::read(data_dir().join(name)).unwrap();
        assert!(
            std::fs::read(shard).unwrap() == committed,
            "{name:?} differs from the committed shard"
        );
    }
    let gz = write_rust_shards(dir.path(), true).await;
    let expected = expected();
    for shards in [&plain, &gz] {
        let python: Vec<_> = shards
            .iter()
            .flat_map(|s| {
                expected[s.file_name().unwrap().to_str().unwrap()]
                    .iter()
                    .cloned()
            })
            .collect();
        assert_eq!(python, want, "what the Python package read");
        let ours = WebDataset::new(shards).build().collect().await.unwrap();
        assert_eq!(as_read(&ours), want);
    }
}

#[tokio::test]
async fn shard_writer_limits_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    assert!(ShardWriter::new("no-number.tar").is_err());
    assert!(ShardWriter::new("two-%d-%d.tar").is_err());
    let mut w = ShardWriter::new(dir.path().join("s-%d.tar").to_str().unwrap())
        .unwrap()
        .max_bytes(3 * 1024);
    for bad in [
        Sample::new("a.b").with("txt", "dot in key"),
        Sample::new("a").with("TXT", "upper-case"),
        Sample::new("a").with("", "empty extension"),
        Sample::new("a").with("x/y", "slash"),
        Sample::new("").with("txt", "empty key"),
        Sample::new("__meta__").with("", "x"),
        Sample::new("__x__/a").with("txt", "metadata directory"),
        Sample::new("nofields"),
    ] {
        let err = w.write(&bad).await.unwrap_err();
        assert!(
            matches!(err.downcast_ref::<Error>(), Some(Error::InvalidArgument(_))),
            "{bad:?}: {err:#}"
        );
    }
    assert!(w.shards().is_empty());
    // 512 + 1024 bytes each: one per shard of 3 KiB after the end marker... two fit.
    for i in 0..5 {
        w.write(&Sample::new(format!("k{i}")).with("bin", vec![1u8; 1000]))
            .await
            .unwrap();
    }
    let shards = w.finish().await.unwrap();
    assert_eq!(shards.len(), 3);
    let counts = futures::future::join_all(
        shards
            .iter()
            .map(|s| async move { WebDataset::new([s]).build().count().await.unwrap() }),
    )
    .await;
    assert_eq!(counts, [2, 2, 1]);
    // A sample larger than max_bytes gets a shard of its own.
    let mut w = ShardWriter::new(dir.path().join("big-%d.tar").to_str().unwrap())
        .unwrap()
        .max_bytes(100);
    w.write(&Sample::new("a").with("bin", vec![0u8; 1000]))
        .await
        .unwrap();
    w.write(&Sample::new("b").with("bin", vec![0u8; 1000]))
        .await
        .unwrap();
    assert_eq!(w.finish().await.unwrap().len(), 2);
}

/// Shards as objects of the local S3 server (SigV4 checked), read by URL: the same samples as
/// from the files, several at once; a reader restored mid-shard resumes with a ranged GET; a
/// cut object is data loss naming its URL, and `ignore_errors` goes on with the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_in_object_storage() {
    use streamload::storage::{self, ReadOptions};
    let dir = tempfile::tempdir().unwrap();
    let mut local = write_rust_shards(dir.path(), false).await;
    local.extend(write_rust_shards(dir.path(), true).await);
    let server = s3::MemoryS3::default();
    let mut urls = Vec::new();
    for path in &local {
        let name = format!("wds/{}", path.file_name().unwrap().to_str().unwrap());
        server.insert("wds-bucket", &name, std::fs::read(path).unwrap().into());
        urls.push(format!("s3://wds-bucket/{name}"));
    }
    let addr = s3::memory_s3_server(server.clone(), "AKIDWDS", "wds-secret-key").await;
    let store = s3::s3_store(addr, "wds-bucket", "AKIDWDS", "wds-secret-key");
    storage::register_with(
        "s3://wds-bucket",
        store,
        ReadOptions::default().block_size(1000),
    )
    .unwrap();
    let from_files = WebDataset::new(&local).build().collect().await.unwrap();
    let from_urls = WebDataset::new(&urls)
        .num_parallel_reads(1)
        .build()
        .collect()
        .await
        .unwrap();
    assert_eq!(as_read(&from_urls), as_read(&from_files));
    assert_eq!(from_urls[0].url(), urls[0]);
    let parallel = WebDataset::new(&urls)
        .num_parallel_reads(3)
        .build()
        .count()
        .await
        .unwrap();
    assert_eq!(parallel as usize, from_files.len());

    // Resumed after 3 of an object's 5 samples: the rest, read from their offset on.
    let one = vec![urls[0].clone()];
    let ds = move || WebDataset::new(one.clone()).build();
    let mut epoch = ds().iter();
    for _ in 0..3 {
        epoch.next().await.unwrap().unwrap();
    }
    let cp = epoch.checkpoint().unwrap();
    drop(epoch);
    let rest: Vec<Sample> = ds()
        .iter_from(&cp)
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(as_read(&rest), as_read(&from_files[3..5]));

    // ShardWriter uploads shards to a URL pattern, plain or compressed.
    for pattern in [
        "s3://wds-bucket/out/part-%03d.tar",
        "s3://wds-bucket/out/part-%03d.tar.gz",
    ] {
        let mut w = ShardWriter::new(pattern).unwrap().max_samples(5);
        for s in rust_samples() {
            w.write(&s).await.unwrap();
        }
        let uploaded = w.finish().await.unwrap();
        assert_eq!(uploaded.len(), 3);
        assert_eq!(
            uploaded[2].to_string(),
            pattern.replace("%03d", "002"),
            "named by the pattern"
        );
        let read = WebDataset::new(&uploaded).build().collect().await.unwrap();
        assert_eq!(as_read(&read), as_read(&rust_samples()));
    }

    // A cut object.
    let bytes = std::fs::read(&local[1]).unwrap();
    server.insert(
        "wds-bucket",
        "wds/cut.tar",
        bytes[..bytes.len() / 2].to_vec().into(),
    );
    let cut = vec![
        urls[0].clone(),
        "s3://wds-bucket/wds/cut.tar".to_string(),
        urls[2].clone(),
    ];
    let items: Vec<_> = WebDataset::new(&cut).build().iter().collect().await;
    let err = items
        .iter()
        .find_map(|i| i.as_ref().err())
        .expect("an error");
    assert!(
        matches!(err.downcast_ref::<Error>(), Some(Error::DataLoss { path, .. }) if path == "s3://wds-bucket/wds/cut.tar"),
        "{err:#}"
    );
    let kept = WebDataset::new(&cut)
        .build()
        .ignore_errors()
        .count()
        .await
        .unwrap();
    assert_eq!(kept as usize, items.len() - 1);
    assert!(kept >= 5 + 2);
}

// ---- hostile shards -------------------------------------------------------------------------

/// A ustar header.
fn header(name: &str, size: u64, kind: u8) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = kind;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    fix_checksum(&mut h);
    h
}

fn fix_checksum(h: &mut [u8; 512]) {
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

fn member(out: &mut Vec<u8>, name: &str, data: &[u8]) {
    out.extend_from_slice(&header(name, data.len() as u64, b'0'));
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

fn pax(out: &mut Vec<u8>, records: &str) {
    out.extend_from_slice(&header("././@PaxHeader", records.len() as u64, b'x'));
    out.extend_from_slice(records.as_bytes());
    out.resize(out.len().div_ceil(512) * 512, 0);
}

fn end(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0u8; 1024]);
}

async fn read(bytes: Vec<u8>) -> Vec<anyhow::Result<Sample>> {
    webdataset_samples(&bytes[..], "hostile.tar")
        .collect()
        .await
}

/// The samples read before the error, and the error's (record, offset, message).
async fn read_err(bytes: Vec<u8>) -> (Vec<String>, u64, u64, String) {
    let items = read(bytes).await;
    let mut keys = Vec::new();
    for item in items {
        match item {
            Ok(s) => keys.push(s.key().to_string()),
            Err(e) => {
                let shown = e.to_string();
                let Some(Error::DataLoss {
                    record,
                    offset,
                    path,
                    ..
                }) = e.downcast_ref::<Error>()
                else {
                    panic!("not data loss: {e:#}");
                };
                assert_eq!(path, "hostile.tar");
                return (keys, *record, *offset, shown);
            }
        }
    }
    panic!("no error; read {keys:?}");
}

fn two_samples() -> Vec<u8> {
    let mut t = Vec::new();
    member(&mut t, "a.txt", b"hello");
    member(&mut t, "a.cls", b"1");
    member(&mut t, "b.txt", &[7u8; 700]);
    t
}

#[tokio::test]
async fn hostile_shards_are_data_loss_naming_shard_sample_and_offset() {
    // Well-formed first.
    let mut ok = two_samples();
    end(&mut ok);
    let samples: Vec<Sample> = read(ok.clone())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(samples.len(), 2);
    // Without the end-of-archive blocks: the end of the stream at a header boundary.
    let samples = read(two_samples()).await;
    assert_eq!(samples.len(), 2);
    assert!(samples.iter().all(Result::is_ok));

    // A bad checksum in b.txt's header (offset 2048).
    let mut t = ok.clone();
    t[2048 + 10] ^= 0x20;
    let (keys, record, offset, shown) = read_err(t).await;
    assert_eq!((keys.len(), record, offset), (0, 0, 2048), "{shown}");
    assert!(shown.contains("bad tar header checksum"), "{shown}");
    assert!(shown.contains("sample key `a`"), "{shown}");

    // Truncated inside b.txt's data: sample a was complete, b is record 1.
    let mut t = two_samples();
    t.truncate(2048 + 512 + 300);
    let (keys, record, offset, shown) = read_err(t).await;
    assert_eq!(keys, ["a"]);
    assert_eq!((record, offset), (1, 2048));
    assert!(
        shown.contains("truncated tar member (300 of 700 bytes)"),
        "{shown}"
    );
    assert!(shown.contains("member `b.txt`, sample key `b`"), "{shown}");
    assert!(shown.starts_with("hostile.tar: "), "{shown}");

    // Truncated in the padding, and inside a header.
    let mut t = two_samples();
    t.truncate(t.len() - 10);
    let (keys, _, _, shown) = read_err(t).await;
    // b's data is whole, but b may have had more members: it is not passed on.
    assert_eq!(keys, ["a"]);
    assert!(shown.contains("truncated tar archive"), "{shown}");
    let mut t = two_samples();
    t.truncate(1024 + 100);
    let (_, _, offset, shown) = read_err(t).await;
    assert_eq!(offset, 1024);
    assert!(
        shown.contains("truncated tar header (100 of 512 bytes)"),
        "{shown}"
    );

    // A PAX size that disagrees with the header's.
    let mut t = Vec::new();
    pax(&mut t, "12 size=100\n");
    member(&mut t, "a.txt", b"hello");
    end(&mut t);
    let (_, _, offset, shown) = read_err(t).await;
    assert_eq!(offset, 1024, "the ustar header whose size disagrees");
    assert!(
        shown.contains("PAX size 100 disagrees with the header's size 5"),
        "{shown}"
    );

    // Huge declared sizes (octal 8 GiB - 1, base-256 2^62, PAX 2^40): refused before reading.
    let mut h = header("a.bin", 0, b'0');
    h[124..136].copy_from_slice(b"77777777777\0");
    fix_checksum(&mut h);
    let (_, _, _, shown) = read_err(h.to_vec()).await;
    assert!(
        shown.contains("a member of 8589934591 bytes, larger than the limit of 2147483648"),
        "{shown}"
    );
    let mut h = header("a.bin", 0, b'0');
    h[124..136].copy_from_slice(&[0x80, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0]);
    fix_checksum(&mut h);
    let (_, _, _, shown) = read_err(h.to_vec()).await;
    assert!(shown.contains("larger than the limit"), "{shown}");
    let mut t = Vec::new();
    pax(&mut t, "22 size=1099511627776\n");
    t.extend_from_slice(&header("a.bin", 0, b'0'));
    let (_, _, _, shown) = read_err(t).await;
    assert!(
        shown.contains("1099511627776 bytes (PAX size), larger than the limit"),
        "{shown}"
    );
    // A lower limit.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.tar");
    std::fs::write(&path, &ok).unwrap();
    let err = WebDataset::new([&path])
        .max_member_size(100)
        .build()
        .collect()
        .await
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("a member of 700 bytes, larger than the limit of 100"),
        "{err:#}"
    );

    // A huge extended header and a huge GNU long name.
    let mut h = header("././@LongLink", 1 << 30, b'L');
    fix_checksum(&mut h);
    let (_, _, _, shown) = read_err(h.to_vec()).await;
    assert!(
        shown.contains("an extended header of 1073741824 bytes"),
        "{shown}"
    );

    // Symbolic links, hard links and directories are skipped; with data they are refused.
    let mut t = Vec::new();
    t.extend_from_slice(&header("a.lnk", 0, b'2'));
    t.extend_from_slice(&header("dir/", 0, b'5'));
    t.extend_from_slice(&header("old-dir/", 0, 0));
    t.extend_from_slice(&header("a.hard", 0, b'1'));
    member(&mut t, "a.txt", b"x");
    end(&mut t);
    let samples: Vec<Sample> = read(t).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].extensions().collect::<Vec<_>>(), ["txt"]);
    let mut t = Vec::new();
    member(&mut t, "a.txt", b"x");
    t.extend_from_slice(&header("a.lnk", 5, b'2'));
    t.extend_from_slice(b"../..");
    let (_, _, offset, shown) = read_err(t).await;
    assert_eq!(offset, 1024);
    assert!(
        shown.contains("a symbolic link member with 5 bytes of data"),
        "{shown}"
    );

    // Unsupported types: GNU sparse, unknown.
    for kind in [b'S', b'Z'] {
        let mut t = Vec::new();
        t.extend_from_slice(&header("a.bin", 0, kind));
        end(&mut t);
        let (_, _, _, shown) = read_err(t).await;
        assert!(shown.contains("unsupported tar member type"), "{shown}");
    }
    let mut t = Vec::new();
    pax(&mut t, "22 GNU.sparse.major=1\n");
    member(&mut t, "a.bin", b"x");
    let (_, _, _, shown) = read_err(t).await;
    assert!(shown.contains("GNU sparse"), "{shown}");

    // Malformed PAX records.
    for records in [
        "5 a=b\n",
        "99 path=x\n",
        "x path=y\n",
        "9 pathx\n\n",
        "12 size=1x3\n",
    ] {
        let mut t = Vec::new();
        pax(&mut t, records);
        member(&mut t, "a.bin", b"x");
        let (_, _, _, shown) = read_err(t).await;
        assert!(shown.contains("PAX"), "{records:?}: {shown}");
    }

    // A duplicate extension within a sample (as the Python package's ValueError).
    let mut t = Vec::new();
    member(&mut t, "a.txt", b"1");
    member(&mut t, "a.TXT", b"2");
    end(&mut t);
    let (_, record, offset, shown) = read_err(t).await;
    assert_eq!((record, offset), (0, 1024));
    assert!(
        shown.contains("duplicate file name in tar file: extension `txt` twice in sample key `a`"),
        "{shown}"
    );

    // A non-UTF-8 name, a non-octal size.
    let mut t = Vec::new();
    let mut h = header("a.txt", 0, b'0');
    h[0] = 0xff;
    fix_checksum(&mut h);
    t.extend_from_slice(&h);
    let (_, _, _, shown) = read_err(t).await;
    assert!(shown.contains("not UTF-8"), "{shown}");
    let mut h = header("a.txt", 0, b'0');
    h[124..136].copy_from_slice(b"00000000009\0");
    fix_checksum(&mut h);
    let (_, _, _, shown) = read_err(h.to_vec()).await;
    assert!(shown.contains("not octal"), "{shown}");

    // A PAX header then the end of the archive.
    let mut t = Vec::new();
    pax(&mut t, "10 path=a\n");
    end(&mut t);
    let (_, _, _, shown) = read_err(t).await;
    assert!(
        shown.contains("extended header without its member"),
        "{shown}"
    );
}

#[tokio::test]
async fn compressed_shards_named_as_plain_and_damaged_gzip() {
    let dir = tempfile::tempdir().unwrap();
    let shards = write_rust_shards(dir.path(), true).await;
    // A .tar.gz renamed .tar: the error says to set the compression.
    let renamed = dir.path().join("looks-plain.tar");
    std::fs::copy(&shards[0], &renamed).unwrap();
    let err = WebDataset::new([&renamed])
        .build()
        .collect()
        .await
        .unwrap_err();
    let shown = format!("{err:#}");
    assert!(shown.contains("bad tar header checksum"), "{shown}");
    assert!(
        shown.contains("set .compression(Compression::Gzip)"),
        "{shown}"
    );
    let n = WebDataset::new([&renamed])
        .compression(Compression::Gzip)
        .build()
        .count()
        .await
        .unwrap();
    assert_eq!(n, 5);
    // A cut GZIP stream: data loss, after the samples before the cut.
    let bytes = std::fs::read(&shards[0]).unwrap();
    let cut = dir.path().join("cut.tar.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let items: Vec<_> = WebDataset::new([&cut]).build().iter().collect().await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert!(
        matches!(err.downcast_ref::<Error>(), Some(Error::DataLoss { .. })),
        "{err:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_errors_goes_on_with_the_next_shard() {
    let dir = tempfile::tempdir().unwrap();
    let shards = write_rust_shards(dir.path(), false).await;
    // The middle shard cut in its third sample's data.
    let mut bytes = std::fs::read(&shards[1]).unwrap();
    let samples_of_0 = 5;
    let full = WebDataset::new(&shards).build().collect().await.unwrap();
    let second: Vec<Sample> = WebDataset::new([&shards[1]])
        .build()
        .collect()
        .await
        .unwrap();
    assert_eq!(second.len(), 5);
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&shards[1], &bytes).unwrap();
    let items: Vec<_> = WebDataset::new(&shards).build().iter().collect().await;
    let errors = items.iter().filter(|i| i.is_err()).count();
    assert_eq!(errors, 1);
    let kept: Vec<Sample> = WebDataset::new(&shards)
        .build()
        .ignore_errors()
        .collect()
        .await
        .unwrap();
    // All of shard 0 and shard 2, and the samples of shard 1 before the cut, in order.
    let before_cut = items
        .iter()
        .skip(samples_of_0)
        .take_while(|i| i.is_ok())
        .count();
    assert!(before_cut < 5);
    let mut want = full[..samples_of_0 + before_cut].to_vec();
    want.extend_from_slice(&full[10..]);
    assert_eq!(kept, want);
    // Parallel reads: the same samples, in the interleaved order.
    let kept = WebDataset::new(&shards)
        .num_parallel_reads(2)
        .build()
        .ignore_errors()
        .collect()
        .await
        .unwrap();
    assert_eq!(kept.len(), want.len());
}

// ---- fuzzing --------------------------------------------------------------------------------

fn cases() -> usize {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3_000)
}

fn mutate(rng: &mut StdRng, seed: &[u8]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        if out.is_empty() {
            out.push(rng.random());
            continue;
        }
        let at = rng.random_range(0..out.len());
        match rng.random_range(0..7) {
            0 => out[at] ^= 1 << rng.random_range(0..8),
            1 => out[at] = [0x00, b'0', b'7', 0x80, 0xff][rng.random_range(0..5)],
            2 => out.insert(at, rng.random()),
            3 => {
                out.remove(at);
            }
            4 => out.truncate(at),
            5 => {
                // A header field (size, type, checksum) of a random header overwritten.
                let block = (at / 512) * 512;
                let field = [124, 156, 148, 0, 345][rng.random_range(0..5)];
                let value: &[u8] = [
                    &b"77777777777\0"[..],
                    b"00000001000\0",
                    &[0x80, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                    b"x",
                    b"L",
                    b"2",
                ][rng.random_range(0..6)];
                for (i, &b) in value.iter().enumerate() {
                    if let Some(slot) = out.get_mut(block + field + i) {
                        *slot = b;
                    }
                }
                // Keep the checksum valid half of the time, to reach past it.
                if rng.random_bool(0.5) && out.len() >= block + 512 {
                    let h = &mut out[block..block + 512];
                    h[148..156].fill(b' ');
                    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
                    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
                }
            }
            _ => {
                // A PAX size or path record spliced in.
                let record: &[u8] = [
                    &b"15 size=999999\n"[..],
                    b"9 path=\n\n",
                    b"30 size=99999999999999999999\n",
                ][rng.random_range(0..3)];
                out.splice(at..at, record.iter().copied());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tar_reader_survives_mutations() {
    let mut seeds = Vec::new();
    for name in [
        "gnu.tar",
        "gnu-pax.tar",
        "py-pax.tar",
        "py-gnu.tar",
        "rust-00.tar",
    ] {
        let bytes = std::fs::read(data_dir().join(name)).unwrap();
        // Only the archive: the zero padding to 10 KiB adds nothing.
        let used = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        seeds.push(bytes[..(used + 1024).min(bytes.len())].to_vec());
    }
    let mut rng = StdRng::seed_from_u64(20);
    let (mut ok, mut failed) = (0, 0);
    for case in 0..cases() {
        let seed = &seeds[case % seeds.len()];
        let bytes = mutate(&mut rng, seed);
        let items = tokio::time::timeout(Duration::from_secs(10), read(bytes.clone()))
            .await
            .unwrap_or_else(|_| panic!("case {case} hung"));
        for item in &items[..items.len().saturating_sub(1)] {
            assert!(item.is_ok(), "case {case}: an error before the last item");
        }
        match items.last() {
            Some(Err(e)) => {
                assert!(
                    matches!(e.downcast_ref::<Error>(), Some(Error::DataLoss { .. })),
                    "case {case}: {e:#}"
                );
                failed += 1;
            }
            _ => ok += 1,
        }
    }
    assert!(ok > 0 && failed > 0, "{ok} read, {failed} refused");

    // Through files: mapped, read in small blocks, and compressed.
    let dir = tempfile::tempdir().unwrap();
    for case in 0..cases() / 10 {
        let seed = &seeds[case % seeds.len()];
        let bytes = mutate(&mut rng, seed);
        let plain = dir.path().join("case.tar");
        std::fs::write(&plain, &bytes).unwrap();
        let gz = dir.path().join("case.tar.gz");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut e, &bytes).unwrap();
        std::fs::write(&gz, e.finish().unwrap()).unwrap();
        for (path, memory_map) in [(&plain, true), (&plain, false), (&gz, false)] {
            let ds = WebDataset::new([path])
                .memory_map(memory_map)
                .buffer_size(333)
                .build();
            let read = tokio::time::timeout(Duration::from_secs(10), ds.iter().count())
                .await
                .unwrap_or_else(|_| panic!("file case {case} hung"));
            let _ = read;
        }
    }
}
