//! TFRecord compatibility with TensorFlow: the files in `tests/data/tensorflow/` were written
//! by TensorFlow 2.21, and the expected payloads, offsets and damage behaviours are what
//! TensorFlow reads from them (see that folder's README).

use std::path::PathBuf;

use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;
use streamload::Error;
use streamload::format::{Compression, TFRecordDataset, TFRecordWriter, tfrecord_records};

fn data(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tensorflow"
    ))
    .join(name)
}

/// The 100 payloads TensorFlow read from `plain.tfrecord`.
fn expected_payloads() -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(data("plain.expected.jsonl")).expect("expected payloads");
    text.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("a JSON line");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v["b64"].as_str().expect("b64"))
                .expect("base64");
            assert_eq!(bytes.len() as u64, v["length"].as_u64().expect("length"));
            bytes
        })
        .collect()
}

fn files_json() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(data("tfrecord_files.json")).expect("tfrecord_files.json"),
    )
    .expect("JSON")
}

/// Every element of one epoch: payloads, or the error's rendering.
async fn read(ds: streamload::Dataset<Bytes>) -> Vec<Result<Vec<u8>, anyhow::Error>> {
    ds.iter().map(|r| r.map(|b| b.to_vec())).collect().await
}

fn data_loss(e: &anyhow::Error) -> Option<(u64, u64, String)> {
    match e.downcast_ref::<Error>() {
        Some(Error::DataLoss {
            record,
            offset,
            message,
            ..
        }) => Some((*record, *offset, message.clone())),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_the_payloads_tensorflow_wrote_plain_gzip_and_zlib() {
    let expected = expected_payloads();
    assert_eq!(expected.len(), 100);
    for (file, compression) in [
        ("plain.tfrecord", Compression::None),
        ("plain.tfrecord", Compression::Auto),
        ("gzip.tfrecord.gz", Compression::Gzip),
        ("gzip.tfrecord.gz", Compression::Auto),
        ("zlib.tfrecord.zz", Compression::Zlib),
        ("zlib.tfrecord.zz", Compression::Auto),
    ] {
        // Blocks of 4,099 bytes cut headers, payloads and footers at many places; plain files
        // read both as mapped windows (the default) and by reads.
        for (buffer_size, memory_map) in [
            (4_099, true),
            (4_099, false),
            (1 << 20, true),
            (1 << 20, false),
        ] {
            let got = TFRecordDataset::new([data(file)])
                .compression(compression)
                .buffer_size(buffer_size)
                .memory_map(memory_map)
                .build()
                .collect()
                .await;
            let got: Vec<Vec<u8>> = got
                .unwrap_or_else(|e| panic!("{file}: {e:#}"))
                .iter()
                .map(|b| b.to_vec())
                .collect();
            assert!(
                got == expected,
                "{file} as {compression:?}, buffer {buffer_size}, mapped {memory_map}: payloads differ"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_files_have_no_records() {
    for (file, compression) in [
        ("empty.tfrecord", Compression::None),
        ("empty_gzip.tfrecord.gz", Compression::Gzip),
    ] {
        let got = read(
            TFRecordDataset::new([data(file)])
                .compression(compression)
                .build(),
        )
        .await;
        assert!(got.is_empty(), "{file}: {} elements", got.len());
    }
}

#[tokio::test]
async fn record_offsets_and_lengths_match_tensorflow() {
    let json = files_json();
    let plain = &json["files"]["plain.tfrecord"];
    let lengths: Vec<u64> = plain["record_lengths"]
        .as_array()
        .expect("lengths")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    let offsets: Vec<u64> = plain["record_offsets"]
        .as_array()
        .expect("offsets")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    let bytes = std::fs::read(data("plain.tfrecord")).expect("plain.tfrecord");
    assert_eq!(bytes.len() as u64, plain["bytes"].as_u64().expect("bytes"));
    let records: Vec<Bytes> = tfrecord_records(&bytes[..], "plain.tfrecord")
        .map(|r| r.expect("a clean file"))
        .collect()
        .await;
    assert_eq!(
        records.iter().map(|r| r.len() as u64).collect::<Vec<_>>(),
        lengths
    );
    // Each record starts where the previous one's 16 bytes of framing and payload end.
    let mut offset = 0;
    for (i, len) in lengths.iter().enumerate() {
        assert_eq!(offsets[i], offset, "record {i}");
        offset += 16 + len;
    }
    assert_eq!(offset, bytes.len() as u64);
}

/// What TensorFlow yields for a damaged file read as it is: the records before the damage,
/// then the error it names (record index, byte offset, kind), or a clean end.
#[derive(Clone, Debug)]
struct Damage {
    file: &'static str,
    records_before: usize,
    error: Option<(u64, u64, &'static str)>,
}

/// TensorFlow's behaviour in one case of `tfrecord_errors.json` (the file lists the case
/// names; what TensorFlow did in each is in the folder's README).
#[derive(Clone, Debug)]
enum Expected {
    /// One damaged file.
    Damaged(Damage),
    /// A damaged file, then `plain.tfrecord`: the damaged file's records and error, then all
    /// 100 records of the next file (`ignore_errors` keeps both files' records).
    ThenPlain(Damage),
    /// A file read with the wrong compression: a `DataLossError` before any record, whose
    /// message has these words (`corrupted record` for compressed bytes read as records,
    /// `inflate() failed` for records read as compressed).
    WrongCompression {
        file: &'static str,
        compression: Compression,
        words: &'static str,
    },
}

/// The expectation for the case `name` of `tfrecord_errors.json`, if there is one.
fn expectation(name: &str) -> Option<Expected> {
    let offsets: Vec<u64> = files_json()["files"]["plain.tfrecord"]["record_offsets"]
        .as_array()
        .expect("offsets")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    // Payload byte 40 of record 3 flipped: the data CRC fails; TF names the payload offset.
    let corrupt = Damage {
        file: "corrupt_data_crc.tfrecord",
        records_before: 3,
        error: Some((3, offsets[3] + 12, "corrupted record")),
    };
    // Cut inside record 7's payload: TF names the record's start.
    let truncated = Damage {
        file: "truncated.tfrecord",
        records_before: 7,
        error: Some((7, offsets[7], "truncated record")),
    };
    let wrong = |file, compression, words| Expected::WrongCompression {
        file,
        compression,
        words,
    };
    let (inflate, crc) = ("inflate() failed", "corrupted record at 0");
    Some(match name {
        "corrupt_data_crc.tfrecord" => Expected::Damaged(corrupt),
        "truncated.tfrecord" => Expected::Damaged(truncated),
        // Ends 5 bytes into record 7's header: a partial header is the end of the file.
        "truncated_header.tfrecord" => Expected::Damaged(Damage {
            file: "truncated_header.tfrecord",
            records_before: 7,
            error: None,
        }),
        // Records 0..9 and 3 stray bytes: also a partial header.
        "trailing_garbage.tfrecord" => Expected::Damaged(Damage {
            file: "trailing_garbage.tfrecord",
            records_before: 10,
            error: None,
        }),
        "multi_file:corrupt_data_crc+plain" => Expected::ThenPlain(corrupt),
        "multi_file:truncated+plain" => Expected::ThenPlain(truncated),
        "plain.tfrecord read as GZIP" => wrong("plain.tfrecord", Compression::Gzip, inflate),
        "plain.tfrecord read as ZLIB" => wrong("plain.tfrecord", Compression::Zlib, inflate),
        "gzip.tfrecord.gz read uncompressed" => wrong("gzip.tfrecord.gz", Compression::None, crc),
        "zlib.tfrecord.zz read uncompressed" => wrong("zlib.tfrecord.zz", Compression::None, crc),
        "zlib.tfrecord.zz read as GZIP" => wrong("zlib.tfrecord.zz", Compression::Gzip, inflate),
        "gzip.tfrecord.gz read as ZLIB" => wrong("gzip.tfrecord.gz", Compression::Zlib, inflate),
        _ => return None,
    })
}

/// Every case `tfrecord_errors.json` names has an expectation here (a new case fails this
/// test until it gets one), and each reads as TensorFlow read it, mapped or read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_of_tfrecord_errors_json_reads_as_tensorflow_read_it() {
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(data("tfrecord_errors.json")).expect("tfrecord_errors.json"),
    )
    .expect("JSON");
    let names: Vec<&str> = json["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| c.as_str().expect("a case name"))
        .collect();
    assert_eq!(names.len(), 12, "the cases of TensorFlow 2.21's run");
    let missing: Vec<&&str> = names.iter().filter(|n| expectation(n).is_none()).collect();
    assert!(
        missing.is_empty(),
        "cases without an expectation: {missing:?}"
    );
    for name in names {
        match expectation(name).expect("checked above") {
            Expected::Damaged(case) => {
                for memory_map in [true, false] {
                    check_damaged(&case, memory_map).await;
                }
            }
            Expected::ThenPlain(case) => check_then_plain(&case).await,
            Expected::WrongCompression {
                file,
                compression,
                words,
            } => check_wrong_compression(name, file, compression, words).await,
        }
    }
}

async fn check_damaged(case: &Damage, memory_map: bool) {
    let expected = expected_payloads();
    let dataset = TFRecordDataset::new([data(case.file)]).memory_map(memory_map);
    let got = read(dataset.clone().build()).await;
    let oks: Vec<&Vec<u8>> = got.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(oks.len(), case.records_before, "{}", case.file);
    assert!(
        oks.iter().zip(&expected).all(|(a, b)| *a == b),
        "{}: payloads before the damage",
        case.file
    );
    match case.error {
        None => assert_eq!(got.len(), case.records_before, "{}: a clean end", case.file),
        Some((record, offset, kind)) => {
            assert_eq!(
                got.len(),
                case.records_before + 1,
                "{}: the error ends the file",
                case.file
            );
            let err = got
                .last()
                .and_then(|r| r.as_ref().err())
                .expect("an error last");
            assert_eq!(
                data_loss(err),
                Some((record, offset, kind.to_string())),
                "{}: {err:#}",
                case.file
            );
            let text = err.to_string();
            assert!(text.contains(case.file), "{text} names the file");
            assert!(
                text.contains(&format!("{kind} at {offset}")),
                "{text} has TensorFlow's words"
            );
        }
    }
    // ignore_errors: the records before the damage, nothing after it.
    let kept = dataset
        .build()
        .ignore_errors()
        .collect()
        .await
        .expect("no errors");
    assert_eq!(kept.len(), case.records_before, "{}", case.file);
}

async fn check_then_plain(case: &Damage) {
    let before = case.records_before;
    let ds = TFRecordDataset::new([data(case.file), data("plain.tfrecord")]).build();
    let got = read(ds.clone()).await;
    assert_eq!(got.len(), before + 1 + 100, "{}+plain", case.file);
    let (record, offset, kind) = case.error.expect("a damaged file");
    assert_eq!(
        got[before].as_ref().err().and_then(data_loss),
        Some((record, offset, kind.to_string())),
        "{}: the error in order",
        case.file
    );
    let expected = expected_payloads();
    assert!(
        got[before + 1..]
            .iter()
            .zip(&expected)
            .all(|(r, want)| r.as_ref().ok() == Some(want)),
        "{}: then every record of the next file",
        case.file
    );
    assert_eq!(
        ds.ignore_errors().count().await.ok(),
        Some(before as u64 + 100),
        "{}+plain, ignore_errors",
        case.file
    );
}

async fn check_wrong_compression(name: &str, file: &str, compression: Compression, words: &str) {
    for memory_map in [true, false] {
        let got = read(
            TFRecordDataset::new([data(file)])
                .compression(compression)
                .memory_map(memory_map)
                .build(),
        )
        .await;
        // No record before the error, and the error ends the file.
        assert_eq!(got.len(), 1, "{name}: one element, {} records", got.len());
        let err = got[0].as_ref().expect_err("an error, no record first");
        let (record, offset, message) = data_loss(err)
            .unwrap_or_else(|| panic!("{name}: DataLoss, as TensorFlow's DataLossError: {err:?}"));
        assert_eq!((record, offset), (0, 0), "{name}: {err}");
        let text = err.to_string();
        assert!(text.contains(words), "{name}: {text} has {words:?}");
        assert!(text.contains(file), "{name}: {text} names the file");
        assert!(!message.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_writes_what_tensorflow_wrote() {
    let expected = expected_payloads();
    let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
    for payload in &expected {
        writer.write(payload).await.expect("in memory");
    }
    assert_eq!(writer.records(), 100);
    let written = writer.finish().await.expect("in memory");
    assert!(
        written == std::fs::read(data("plain.tfrecord")).expect("plain.tfrecord"),
        "byte for byte"
    );

    let dir = tempfile::tempdir().expect("a temporary directory");
    for (name, compression) in [
        ("w.tfrecord.gz", Compression::Gzip),
        ("w.tfrecord.zz", Compression::Zlib),
    ] {
        let path = dir.path().join(name);
        let file = tokio::fs::File::create(&path).await.expect("created");
        let mut writer = TFRecordWriter::new(file, compression);
        for payload in &expected {
            writer.write(payload).await.expect("written");
        }
        writer.finish().await.expect("finished");
        let back = TFRecordDataset::new([&path])
            .compression(Compression::Auto)
            .build()
            .collect()
            .await
            .expect("read back");
        assert!(
            back.iter().map(|b| b.to_vec()).collect::<Vec<_>>() == expected,
            "{name}"
        );
    }
}

#[tokio::test]
async fn an_absurd_length_is_an_error_not_an_allocation() {
    // A header claiming 2^60 bytes, with a correct length CRC, then a little data.
    let len = (1u64 << 60).to_le_bytes();
    let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
    writer.write(b"ok").await.expect("in memory");
    let mut bytes = writer.finish().await.expect("in memory");
    let crc = {
        // The masked CRC32C TensorFlow puts after the length.
        let c = crc32c::crc32c(&len);
        c.rotate_right(15).wrapping_add(0xa282_ead8)
    };
    bytes.extend_from_slice(&len);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes.extend_from_slice(&[0u8; 64]);
    let got: Vec<anyhow::Result<Bytes>> = tfrecord_records(&bytes[..], "absurd").collect().await;
    assert_eq!(got.len(), 2);
    let err = got[1]
        .as_ref()
        .err()
        .and_then(data_loss)
        .expect("a data-loss error");
    assert_eq!((err.0, err.1), (1, 12 + 2 + 4), "record 1, at its start");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_reads_keep_tensorflows_interleaved_order() {
    let files = [data("plain.tfrecord"), data("gzip.tfrecord.gz")];
    let got = TFRecordDataset::new(files)
        .compression(Compression::Auto)
        .num_parallel_reads(2)
        .build()
        .collect()
        .await
        .expect("clean files");
    let expected = expected_payloads();
    // Cycle of two files, one record from each in turn.
    let interleaved: Vec<&Vec<u8>> = expected.iter().flat_map(|p| [p, p]).collect();
    assert_eq!(got.len(), 200);
    assert!(got.iter().zip(interleaved).all(|(a, b)| a[..] == b[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_file_is_an_error_naming_it() {
    let got =
        read(TFRecordDataset::new([data("no-such-file.tfrecord"), data("plain.tfrecord")]).build())
            .await;
    assert_eq!(got.len(), 101);
    let err = got[0]
        .as_ref()
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default();
    assert!(err.contains("no-such-file.tfrecord"), "{err}");
}

/// `bytes` as a reader that hands them over `sizes` bytes at a time (cycling through
/// `sizes`), as object-store bodies and decompressors do.
fn chunked(bytes: &[u8], sizes: &[usize]) -> impl tokio::io::AsyncRead + Send + Unpin + use<> {
    let mut chunks = Vec::new();
    let mut at = 0;
    for size in sizes.iter().cycle() {
        if at >= bytes.len() {
            break;
        }
        let end = (at + size).min(bytes.len());
        chunks.push(Ok::<_, std::io::Error>(Bytes::copy_from_slice(
            &bytes[at..end],
        )));
        at = end;
    }
    tokio_util::io::StreamReader::new(futures::stream::iter(chunks))
}

#[tokio::test]
async fn records_across_any_block_boundaries_read_the_same() {
    let bytes = std::fs::read(data("plain.tfrecord")).expect("plain.tfrecord");
    let expected = expected_payloads();
    for sizes in [
        &[1][..],
        &[3],
        &[11],
        &[12],
        &[13],
        &[4099],
        &[1, 700, 5, 12, 64, 2],
    ] {
        let got: Vec<Bytes> = tfrecord_records(chunked(&bytes, sizes), "plain.tfrecord")
            .map(|r| r.expect("a clean file"))
            .collect()
            .await;
        assert_eq!(got.len(), expected.len(), "blocks of {sizes:?}");
        for (i, (got, want)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(&got[..], &want[..], "record {i}, blocks of {sizes:?}");
        }
    }
}

#[tokio::test]
async fn large_records_and_truncation_across_blocks() {
    // Records of 100 KiB and more are slices of their block rather than copies.
    let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
    let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100_000 + i as usize]).collect();
    for p in &payloads {
        writer.write(p).await.expect("written");
    }
    let bytes = writer.finish().await.expect("finished");
    for sizes in [&[1 << 20][..], &[4096], &[70_000, 30_000]] {
        let got: Vec<Bytes> = tfrecord_records(chunked(&bytes, sizes), "big")
            .map(|r| r.expect("a clean file"))
            .collect()
            .await;
        let got: Vec<&[u8]> = got.iter().map(|r| &r[..]).collect();
        assert_eq!(got, payloads.iter().map(|p| &p[..]).collect::<Vec<_>>());
    }
    // Cut inside the third record: two records, then a truncation error at its offset.
    let third = 2 * 16 + 100_000 + 100_001;
    let cut = &bytes[..third + 5_000];
    let got: Vec<anyhow::Result<Bytes>> = tfrecord_records(chunked(cut, &[4096]), "cut")
        .collect()
        .await;
    assert_eq!(got.len(), 3);
    let err = got[2].as_ref().expect_err("truncated");
    match err.downcast_ref::<Error>() {
        Some(Error::DataLoss { record, offset, .. }) => {
            assert_eq!((*record, *offset), (2, third as u64))
        }
        other => panic!("expected data loss, got {other:?}: {err:#}"),
    }
}

/// A FIFO at `dir/name`, fed `content` by a thread (which blocks until a reader opens it).
#[cfg(unix)]
fn fed_fifo(dir: &std::path::Path, name: &str, content: Vec<u8>) -> PathBuf {
    let path = dir.join(name);
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
    let fifo = path.clone();
    std::thread::spawn(move || std::fs::write(&fifo, content).expect("the FIFO is written"));
    path
}

/// A pipe has no length: it is read to its end, never taken for an empty file, with
/// `memory_map` on or off (a pipe cannot be mapped), plain or compressed, and its damage is
/// found as in the file.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_is_read_to_its_end() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let expected = expected_payloads();
    let plain = std::fs::read(data("plain.tfrecord")).expect("plain.tfrecord");
    let gzip = std::fs::read(data("gzip.tfrecord.gz")).expect("gzip.tfrecord.gz");
    for (i, memory_map) in [true, false].into_iter().enumerate() {
        for (j, (content, compression)) in [
            (plain.clone(), Compression::None),
            (gzip.clone(), Compression::Gzip),
        ]
        .into_iter()
        .enumerate()
        {
            let fifo = fed_fifo(dir.path(), &format!("fifo-{i}-{j}"), content);
            let got = TFRecordDataset::new([&fifo])
                .memory_map(memory_map)
                .compression(compression)
                .buffer_size(4096)
                .build()
                .collect()
                .await
                .expect("the FIFO reads");
            assert_eq!(got, expected, "{compression:?}, memory_map {memory_map}");
        }
    }
    // Damage read through a pipe is the damage read from the file.
    let damaged = std::fs::read(data("corrupt_data_crc.tfrecord")).expect("damaged file");
    let fifo = fed_fifo(dir.path(), "damaged", damaged);
    let got = read(TFRecordDataset::new([&fifo]).build()).await;
    let from_file = read(TFRecordDataset::new([data("corrupt_data_crc.tfrecord")]).build()).await;
    assert_eq!(got.len(), from_file.len());
    let (err, file_err) = (
        got.last().and_then(|r| r.as_ref().err()).expect("an error"),
        from_file
            .last()
            .and_then(|r| r.as_ref().err())
            .expect("an error"),
    );
    assert!(data_loss(err).is_some(), "{err:#}");
    assert_eq!(data_loss(err), data_loss(file_err));
}

/// A damaged compressed stream is TensorFlow's `DataLossError`: the records before the
/// damage arrive, then a `DataLoss` naming the file, the record being read and its offset in
/// the decompressed stream, in TensorFlow's words ("inflate() failed").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_compressed_file_is_data_loss_after_its_whole_records() {
    let expected = expected_payloads();
    // Where each record starts in the decompressed stream.
    let starts: Vec<u64> = expected
        .iter()
        .scan(0u64, |at, p| {
            let start = *at;
            *at += 16 + p.len() as u64;
            Some(start)
        })
        .collect();
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (source, name) in [
        ("gzip.tfrecord.gz", "trunc.tfrecord.gz"),
        ("zlib.tfrecord.zz", "trunc.tfrecord.zz"),
    ] {
        let whole = std::fs::read(data(source)).expect("compressed file");
        let path = dir.path().join(name);
        std::fs::write(&path, &whole[..whole.len() * 3 / 5]).expect("written");
        for memory_map in [true, false] {
            let got = read(
                TFRecordDataset::new([&path])
                    .compression(Compression::Auto)
                    .memory_map(memory_map)
                    .buffer_size(64 * 1024)
                    .build(),
            )
            .await;
            let before = got.len() - 1;
            assert!(before > 0 && before < 100, "{name}: {before} records");
            assert!(
                got[..before]
                    .iter()
                    .zip(&expected)
                    .all(|(r, want)| r.as_ref().ok() == Some(want)),
                "{name}: the records before the damage, in order"
            );
            let err = got[before].as_ref().expect_err("an error last");
            let (record, offset, message) = data_loss(err).expect("DataLoss");
            assert_eq!(record, before as u64, "{name}: the record being read");
            assert_eq!(offset, starts[before], "{name}: its decompressed offset");
            assert!(message.contains("inflate() failed"), "{message}");
            let text = err.to_string();
            assert!(
                text.contains(name) && text.contains(&format!("record {before}")),
                "{text}"
            );
        }
    }
    // Bytes that are not compressed at all, read as compressed: data loss at record 0.
    for compression in [Compression::Gzip, Compression::Zlib] {
        let got = read(
            TFRecordDataset::new([data("plain.tfrecord")])
                .compression(compression)
                .build(),
        )
        .await;
        assert_eq!(got.len(), 1, "{compression:?}: no record, one error");
        let err = got[0].as_ref().expect_err("an error");
        let (record, offset, message) = data_loss(err).expect("DataLoss");
        assert_eq!((record, offset), (0, 0), "{compression:?}");
        assert!(message.contains("inflate() failed"), "{message}");
        assert!(err.to_string().contains("plain.tfrecord"), "{err}");
    }
}

/// The writer refuses a record the reader would refuse (longer than 1 GiB): an
/// `InvalidArgument`, nothing written, and the writer still usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_refuses_a_record_the_reader_refuses() {
    // Zeroed by the allocator and never touched: no gigabyte is written to memory.
    let too_long = vec![0u8; (1 << 30) + 1];
    for compression in [Compression::None, Compression::Gzip] {
        let mut writer = TFRecordWriter::new(Vec::new(), compression);
        writer.write(b"before").await.expect("a small record");
        let err = writer
            .write(&too_long)
            .await
            .expect_err("a record over 1 GiB is refused");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(
            matches!(
                err.get_ref().and_then(|e| e.downcast_ref::<Error>()),
                Some(Error::InvalidArgument(m)) if m.contains("1073741825 bytes")
            ),
            "{err:?}"
        );
        writer.write(b"after").await.expect("still usable");
        assert_eq!(writer.records(), 2);
        let bytes = writer.finish().await.expect("in memory");
        let records: Vec<anyhow::Result<Bytes>> = match compression {
            Compression::Gzip => {
                let decoder = async_compression::tokio::bufread::GzipDecoder::new(&bytes[..]);
                tfrecord_records(decoder, "written").collect().await
            }
            _ => tfrecord_records(&bytes[..], "written").collect().await,
        };
        let records: Vec<Bytes> = records
            .into_iter()
            .collect::<anyhow::Result<_>>()
            .expect("readable");
        assert_eq!(records, [&b"before"[..], b"after"], "{compression:?}");
    }
}

/// The `DataLoss` of the first element of `ds`: its `looks_compressed` and its text.
async fn first_damage(ds: streamload::Dataset<Bytes>) -> (Option<Compression>, String) {
    let got = read(ds).await;
    let err = got[0].as_ref().expect_err("an error first");
    match err.downcast_ref::<Error>() {
        Some(Error::DataLoss {
            looks_compressed, ..
        }) => (*looks_compressed, err.to_string()),
        _ => panic!("DataLoss: {err:?}"),
    }
}

/// A bad first header is TensorFlow's "corrupted record at 0 (Is this even a TFRecord
/// file?)" (`GetChecksumErrorSuffix` of TensorFlow's record reader); a compressed file read
/// without decompression also says which compression to set. Only at offset 0, and only for
/// bytes read as they are: a payload CRC error is TensorFlow's words alone, and a stream that
/// was decompressed is not taken for a compressed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_first_header_asks_whether_it_is_a_tfrecord_file_and_names_the_compression() {
    let tf = "corrupted record at 0 (Is this even a TFRecord file?) (record 0)";
    for memory_map in [true, false] {
        let not_tfrecord = TFRecordDataset::new([data("examples.expected.json")])
            .memory_map(memory_map)
            .build();
        let (looks, text) = first_damage(not_tfrecord).await;
        assert_eq!(looks, None);
        assert!(text.ends_with(tf), "{text}");
        for (file, compression, name) in [
            ("gzip.tfrecord.gz", Compression::Gzip, "GZIP"),
            ("zlib.tfrecord.zz", Compression::Zlib, "ZLIB"),
        ] {
            // The default (no compression), as a `.gz` file read without `.compression(..)`.
            let ds = TFRecordDataset::new([data(file)])
                .memory_map(memory_map)
                .build();
            let (looks, text) = first_damage(ds).await;
            assert_eq!(looks, Some(compression), "{file}");
            assert!(
                text.ends_with(&format!(
                    "{tf}; the file looks {name}-compressed: set .compression(Compression::{compression:?})"
                )),
                "{text}"
            );
        }
    }
    // A payload's CRC: TensorFlow's words, with no reminder.
    let (looks, text) = first_damage(
        TFRecordDataset::new([data("corrupt_data_crc.tfrecord")])
            .build()
            .skip(3),
    )
    .await;
    assert_eq!(looks, None);
    assert!(
        text.ends_with("corrupted record at 65597 (record 3)"),
        "{text}"
    );
    // A GZIP file whose decompressed stream is itself GZIP (compressed twice): read with
    // `Compression::Gzip`, it is not said to look compressed.
    let dir = tempfile::tempdir().expect("tempdir");
    let twice = dir.path().join("twice.tfrecord.gz");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(
        &mut encoder,
        &std::fs::read(data("gzip.tfrecord.gz")).expect("gzip file"),
    )
    .expect("in memory");
    std::fs::write(&twice, encoder.finish().expect("in memory")).expect("written");
    let (looks, text) = first_damage(
        TFRecordDataset::new([&twice])
            .compression(Compression::Gzip)
            .build(),
    )
    .await;
    assert_eq!(looks, None);
    assert!(text.ends_with(tf), "{text}");
    // `tfrecord_records` over any reader: the bytes are taken as they are.
    let gz = std::fs::read(data("gzip.tfrecord.gz")).expect("gzip file");
    let first = tfrecord_records(&gz[..], "in-memory").next().await;
    let err = first.expect("an element").expect_err("damage");
    assert!(
        err.to_string()
            .ends_with("set .compression(Compression::Gzip)"),
        "{err}"
    );
}
