//! Brief mutation fuzzing of the decoders that face untrusted bytes: the TFRecord reader (plain,
//! GZIP and ZLIB, in memory and through `TFRecordDataset`'s files, memory-mapped or
//! decompressed), the `tf.train.Example` decoder and `parse_single_example`. Seeds are files
//! TensorFlow wrote; each case is a seeded mutation of one (bit flips, byte overwrites with
//! boundary values, insertions, deletions, truncation, huge length fields). Every case must end
//! (no hang, no busy loop: a timeout guards it) with records or an error, never a panic.
//! The CSV and fixed-length readers (whose grammar is TensorFlow's, written here) get the same
//! treatment over files, and so do TFRecord indexes (DALI's text format) and the records read
//! through them (a mutated file under a sound index, a mutated index over a sound file), and
//! the image decoders (libjpeg-turbo through streamload's C bridge, the PNG decoder,
//! and the fused crop transforms) over small JPEGs and PNGs. `FUZZ_CASES` sets the number of
//! cases (default 5,000 per target; a tenth of that for the file readers, which write a file
//! per case, and a fifth for the image decoders).

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use streamload::Error;
use streamload::format::{
    Column, Compression, CsvDataset, Example, FeatureSpec, Field, FixedLengthRecordDataset,
    IndexedTFRecords, ParseSpec, TFRecordDataset, TFRecordIndex, TFRecordWriter, parse_example,
    parse_single_example, parse_single_example_view, tfrecord_records,
};
use streamload::tensor::DType;

fn data(name: &str) -> Vec<u8> {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tensorflow"
    ))
    .join(name);
    std::fs::read(path).expect("seed file")
}

fn cases() -> usize {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5_000)
}

fn mutate(rng: &mut StdRng, seed: &[u8]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        if out.is_empty() {
            out.push(rng.random());
            continue;
        }
        let at = rng.random_range(0..out.len());
        match rng.random_range(0..6) {
            0 => out[at] ^= 1 << rng.random_range(0..8),
            1 => out[at] = [0x00, 0x7f, 0x80, 0xff][rng.random_range(0..4)],
            2 => out.insert(at, rng.random()),
            3 => {
                out.remove(at);
            }
            4 => out.truncate(at),
            _ => {
                // A huge little-endian length or varint at a random place.
                let huge = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f];
                for (i, b) in huge.iter().enumerate() {
                    if let Some(slot) = out.get_mut(at + i) {
                        *slot = *b;
                    }
                }
            }
        }
    }
    out
}

/// The elements `tfrecord_records` yields for `bytes`, decompressed first as `compression`
/// says (concatenated GZIP members read as one stream, as the file readers do).
async fn decode(bytes: Vec<u8>, compression: Compression) -> Vec<anyhow::Result<Bytes>> {
    let reader = std::io::Cursor::new(bytes);
    let records = match compression {
        Compression::Gzip => {
            let mut decoder = async_compression::tokio::bufread::GzipDecoder::new(reader);
            decoder.multiple_members(true);
            tfrecord_records(decoder, "fuzz").boxed()
        }
        Compression::Zlib => {
            let decoder = async_compression::tokio::bufread::ZlibDecoder::new(reader);
            tfrecord_records(decoder, "fuzz").boxed()
        }
        _ => tfrecord_records(reader, "fuzz").boxed(),
    };
    records.collect().await
}

/// `records` written by `TFRecordWriter` with `compression`.
async fn written(records: &[&[u8]], compression: Compression) -> Vec<u8> {
    let mut writer = TFRecordWriter::new(Vec::new(), compression);
    for record in records {
        writer.write(record).await.expect("write");
    }
    writer.finish().await.expect("finish")
}

#[tokio::test]
async fn tfrecord_decoder_survives_mutations() {
    // Small seeds so each case is quick: the first records of TensorFlow's files.
    let plain = data("plain.tfrecord");
    let small = plain[..plain.len().min(6_000)].to_vec();
    let examples = data("examples.tfrecord");
    let mut rng = StdRng::seed_from_u64(0x7f_2e_c0_de);
    let records: [&[u8]; 2] = [b"hello", &[7u8; 300]];
    let gz = written(&records, Compression::Gzip).await;
    let zz = written(&records, Compression::Zlib).await;
    for case in 0..cases() {
        let (seed, compression) = match case % 4 {
            0 => (&small, Compression::None),
            1 => (&examples, Compression::None),
            2 => (&gz, Compression::Gzip),
            _ => (&zz, Compression::Zlib),
        };
        let bytes = mutate(&mut rng, seed);
        let n = tokio::time::timeout(Duration::from_secs(10), decode(bytes.clone(), compression))
            .await
            .unwrap_or_else(|_| panic!("case {case} hangs: {:?}", Bytes::from(bytes.clone())))
            .len();
        assert!(
            n <= bytes.len() / 16 + 2,
            "case {case}: {n} records from {} bytes",
            bytes.len()
        );
    }
}

/// The record index, offset and words of a `DataLoss`.
fn named(e: &anyhow::Error) -> Option<(u64, u64, String)> {
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

/// The file paths of `TFRecordDataset`: memory-mapped windows (of several sizes, so records
/// straddle windows) for files not compressed, and the compression layer for ZLIB and GZIP
/// files. A mutated file fails where the in-memory decoder fails on its bytes, with one
/// error, a `DataLoss` (a local file that opens never fails otherwise), as its last element;
/// a mapped file reads exactly as the bytes in memory, records and error alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tfrecord_files_mapped_and_compressed_survive_mutations() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = data("plain.tfrecord");
    let small = plain[..plain.len().min(6_000)].to_vec();
    let records: Vec<&[u8]> = vec![b"hello", b"", &[7u8; 300], &[1u8; 2_000], b"end"];
    let zz = written(&records, Compression::Zlib).await;
    let gz = written(&records, Compression::Gzip).await;
    let mut rng = StdRng::seed_from_u64(0x5eed_f11e);
    let mut mapped_cases = 0;
    for case in 0..cases() / 2 {
        let (seed, compression) = match case % 3 {
            0 => (&small, Compression::None),
            1 => (&zz, Compression::Zlib),
            _ => (&gz, Compression::Gzip),
        };
        let bytes = mutate(&mut rng, seed);
        let path = dir.path().join(format!("case-{case}.tfrecord"));
        std::fs::write(&path, &bytes).expect("write case");
        let buffer_size = [64, 1_000, 4_096, 1 << 20][case % 4];
        let dataset = TFRecordDataset::new([&path])
            .compression(compression)
            .memory_map(true)
            .buffer_size(buffer_size)
            .build();
        let read = async {
            let mut epoch = dataset.iter();
            let mut got = Vec::new();
            while let Some(item) = epoch.next().await {
                got.push(item);
            }
            (got, decode(bytes.clone(), compression).await)
        };
        let (got, want) = tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .unwrap_or_else(|_| panic!("case {case} hangs: {:?}", Bytes::from(bytes.clone())));
        let ok = |v: &[anyhow::Result<Bytes>]| -> Vec<Bytes> {
            v.iter().map_while(|r| r.as_ref().ok().cloned()).collect()
        };
        let (ours, theirs) = (ok(&got), ok(&want));
        let errors = got.iter().filter(|r| r.is_err()).count();
        assert_eq!(
            errors,
            usize::from(want.iter().any(Result::is_err)),
            "case {case} ({compression:?}): an error where the decoder has one"
        );
        assert_eq!(
            ours.len() + errors,
            got.len(),
            "case {case}: the error is last"
        );
        if let Some(Err(e)) = got.last() {
            assert!(
                matches!(e.downcast_ref::<Error>(), Some(Error::DataLoss { .. })),
                "case {case} ({compression:?}): {e:?}"
            );
        }
        if compression == Compression::None {
            // Mapped windows of any size read exactly as the bytes in memory: the same
            // records, the same error (record, offset and words).
            assert_eq!(ours, theirs, "case {case}: the records");
            if let (Some(Err(e)), Some(Err(want_err))) = (got.last(), want.last()) {
                assert_eq!(named(e), named(want_err), "case {case}");
            }
        } else {
            // A damaged compressed stream is found wherever it is decompressed, but how many
            // records come before the error depends on how the stream was cut into blocks (the
            // output of the inflate call that fails is lost, as in TensorFlow). What does come
            // are the records written, in order: their CRCs were checked.
            for got in [&ours, &theirs] {
                assert!(got.len() <= records.len(), "case {case}");
                assert!(
                    got.iter().zip(&records).all(|(a, b)| a[..] == b[..]),
                    "case {case} ({compression:?}): records written, in order"
                );
            }
        }
        mapped_cases += usize::from(compression == Compression::None);
        std::fs::remove_file(&path).expect("remove case");
    }
    assert!(mapped_cases >= cases() / 7, "{mapped_cases} mapped cases");
}

#[test]
fn example_parsers_survive_mutations() {
    let spec = ParseSpec::new([
        (
            "id",
            FeatureSpec::fixed_len([], DType::Int64).with_default(0),
        ),
        (
            "embedding",
            FeatureSpec::fixed_len([3], DType::Float32).with_default(vec![0f32; 3]),
        ),
        (
            "name",
            FeatureSpec::fixed_len([], DType::String).with_default("?"),
        ),
        ("tokens", FeatureSpec::var_len(DType::String)),
        ("ids", FeatureSpec::var_len(DType::Int64)),
        (
            "seq",
            FeatureSpec::fixed_len_sequence([], DType::Float32, true),
        ),
        // A RaggedFeature reading another key (the lookups of a renamed spec).
        (
            "weights_ragged",
            FeatureSpec::ragged(DType::Float32).with_value_key("weights"),
        ),
    ])
    .expect("spec");
    let records = streamload_records(&data("examples.tfrecord"));
    assert_eq!(records.len(), 20);
    let mut rng = StdRng::seed_from_u64(42);
    for case in 0..cases() {
        let seed = &records[case % records.len()];
        let bytes = Bytes::from(mutate(&mut rng, seed));
        // Either decoder may refuse the bytes; neither may panic, and when both accept them
        // they agree on the values parse_single_example reads.
        let decoded = Example::decode_bytes(&bytes);
        let parsed = parse_single_example(&bytes, &spec);
        if let (Ok(example), Ok(parsed)) = (&decoded, &parsed)
            && let Some(ids) = example.int64("ids")
        {
            let sparse = parsed.sparse("ids").expect("ids");
            assert_eq!(sparse.values().len(), ids.len(), "case {case}");
        }
        if let Ok(batch) = parse_example(&[bytes.clone(), Bytes::from_static(b"\x0a\x00")], &spec) {
            // The ragged rows: this record's values, then none for the empty one.
            let ragged = batch.ragged("weights_ragged").expect("ragged");
            assert_eq!(ragged.nrows(), 2, "case {case}");
            assert_eq!(
                ragged.row_splits()[1],
                ragged.row_splits()[2],
                "case {case}"
            );
        }
        // The in-place view accepts and refuses what parse_single_example does, with the
        // same message, and reads the same values.
        match (&parsed, parse_single_example_view(&bytes, &spec)) {
            (Ok(parsed), Ok(view)) => {
                for name in spec.names() {
                    let want = format!("{:?}", parsed.get(name).expect("feature"));
                    let got = format!("{:?}", view.parsed(name).expect("feature"));
                    assert_eq!(want, got, "case {case}: {name}");
                }
                let ids: Vec<i64> = view.int64("ids").expect("ids").collect();
                let sparse = parsed.sparse("ids").expect("ids");
                let want = match sparse.values() {
                    streamload::tensor::Values::Int64(v) => v.clone(),
                    other => panic!("case {case}: {other:?}"),
                };
                assert_eq!(want, ids, "case {case}");
                let embedding: Vec<f32> = view.floats("embedding").expect("embedding").collect();
                let dense = parsed.dense("embedding").expect("embedding");
                assert_eq!(
                    dense
                        .as_slice::<f32>()
                        .map(|v| v.iter().map(|x| x.to_bits()).collect()),
                    Some(embedding.iter().map(|x| x.to_bits()).collect::<Vec<u32>>()),
                    "case {case}"
                );
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "case {case}"),
            (a, b) => panic!("case {case}: {:?} against {:?}", a.as_ref().err(), b.err()),
        }
    }
}

/// The payloads of a TFRecord file, read with the crate's own reader.
fn streamload_records(file: &[u8]) -> Vec<Bytes> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        tfrecord_records(std::io::Cursor::new(file.to_vec()), "examples.tfrecord")
            .map(|r| r.expect("a record"))
            .collect()
            .await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_and_fixed_length_readers_survive_mutations() {
    let dir = tempfile::tempdir().expect("temp dir");
    let seeds: Vec<Vec<u8>> = ["header.csv", "quotes.csv", "crlf.csv", "empties.csv"]
        .iter()
        .filter_map(|name| {
            std::fs::read(
                PathBuf::from(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/tests/data/tensorflow/formats_more/csv"
                ))
                .join(name),
            )
            .ok()
        })
        .chain([b"a,b,c\n1,\"x,\"\"y\"\"\n\",2.5\r\n,,\n-7,z,nan\n".to_vec()])
        .collect();
    let mut rng = StdRng::seed_from_u64(0xc5_f1_2e);
    for case in 0..cases() / 10 {
        let bytes = mutate(&mut rng, &seeds[case % seeds.len()]);
        let path = dir.path().join(format!("case-{case}.csv"));
        std::fs::write(&path, &bytes).expect("write case");
        let csv = CsvDataset::new(
            [path.clone()],
            [
                Column::with_default(Field::Int64(0)),
                Column::string(),
                Column::with_default(Field::Float64(0.0)),
            ],
        )
        .header(case % 2 == 0)
        .use_quote_delim(case % 3 != 0)
        .build();
        let fixed = FixedLengthRecordDataset::new([path], 1 + case % 7)
            .header_bytes(case % 5)
            .footer_bytes(case % 3)
            .build();
        let read = async { (count_all(csv).await, count_all(fixed).await) };
        let (rows, records) = tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .unwrap_or_else(|_| panic!("case {case} hangs: {:?}", Bytes::from(bytes.clone())));
        // Every element is a row or an error, one per line at most; a record per
        // `record_bytes` at most.
        assert!(rows <= bytes.len() + 1, "case {case}: {rows} rows");
        assert!(records <= bytes.len() + 1, "case {case}: {records} records");
    }
}

/// Elements of one epoch, rows and errors alike (an epoch goes on after an error element).
async fn count_all<T: Send + 'static>(dataset: streamload::Dataset<T>) -> usize {
    let mut epoch = dataset.iter();
    let mut n = 0;
    while epoch.next().await.is_some() {
        n += 1;
    }
    n
}

#[cfg(feature = "image")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_decoders_survive_mutations() {
    use streamload::image::{self, CenterCrop, RandomResizedCrop};
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/images"));
    let mut seeds: Vec<Vec<u8>> = ["baseline.jpg", "progressive.jpg", "cmyk.jpg", "grey.jpg"]
        .iter()
        .map(|name| std::fs::read(dir.join(name)).expect("seed image"))
        .collect();
    let png =
        ::image::RgbImage::from_fn(24, 16, |x, y| ::image::Rgb([x as u8 * 9, y as u8 * 13, 3]));
    let mut out = std::io::Cursor::new(Vec::new());
    png.write_to(&mut out, ::image::ImageFormat::Png)
        .expect("png");
    seeds.push(out.into_inner());
    let mut rng = StdRng::seed_from_u64(0x1a_6e_f0_22);
    for case in 0..cases() / 5 {
        let bytes = mutate(&mut rng, &seeds[case % seeds.len()]);
        let input = bytes.clone();
        let run = tokio::task::spawn_blocking(move || {
            let mut crop_rng = StdRng::seed_from_u64(case as u64);
            let mut sizes = Vec::new();
            let mut keep = |r: anyhow::Result<ndarray::Array3<u8>>| {
                if let Ok(img) = r {
                    sizes.push(img.len());
                }
            };
            keep(image::decode_image(&input));
            keep(image::decode_jpeg_scaled(&input, 1));
            keep(image::decode_jpeg_scaled(&input, 8));
            keep(image::decode_and_crop_jpeg(&input, [2, 3, 9, 11]));
            keep(image::decode_and_resize(&input, 5, 7));
            let _ = image::extract_jpeg_shape(&input);
            let _ = RandomResizedCrop::new(6, 6).apply(&input, &mut crop_rng);
            let _ = CenterCrop::new(6, 6, 8).apply(&input);
            sizes
        });
        let sizes = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .unwrap_or_else(|_| panic!("image case {case} hangs: {bytes:?}"))
            .unwrap_or_else(|e| panic!("image case {case} panicked ({e}): {bytes:?}"));
        // Whatever decodes is bounded by the pixel limit.
        assert!(sizes.iter().all(|n| *n as u64 <= image::MAX_PIXELS * 3));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tfrecord_indexes_and_indexed_reads_survive_mutations() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = data("plain.tfrecord");
    // The first records whole (about 6 KB of them).
    let good = dir.path().join("good.tfrecord");
    let index = {
        let full = TFRecordIndex::parse(
            &String::from_utf8(
                std::fs::read(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/tests/data/tfrecord_index/plain.tfrecord.idx"
                ))
                .expect("DALI's index"),
            )
            .expect("text"),
            "plain.tfrecord.idx",
        )
        .expect("index");
        let kept: Vec<_> = full
            .entries()
            .iter()
            .copied()
            .take_while(|e| e.offset + e.size <= 6_000)
            .collect();
        TFRecordIndex::new(kept)
    };
    let end = index.entries().last().map_or(0, |e| e.offset + e.size) as usize;
    std::fs::write(&good, &plain[..end]).expect("write");
    let records = TFRecordDataset::new([&good])
        .build()
        .collect()
        .await
        .expect("records");
    assert_eq!(records.len(), index.len());
    let by_offset: std::collections::HashMap<u64, Bytes> = index
        .entries()
        .iter()
        .map(|e| e.offset)
        .zip(records.iter().cloned())
        .collect();
    let text = index.to_string().into_bytes();
    let mut rng = StdRng::seed_from_u64(0x1de7_f022);
    for case in 0..cases() / 10 {
        let mutated_file = case % 2 == 0;
        let (file, idx) = if mutated_file {
            let path = dir.path().join(format!("case-{case}.tfrecord"));
            std::fs::write(&path, mutate(&mut rng, &plain[..end])).expect("write case");
            (path, index.clone())
        } else {
            let bytes = mutate(&mut rng, &text);
            match TFRecordIndex::parse(&String::from_utf8_lossy(&bytes), "case.idx") {
                Ok(idx) => (good.clone(), idx),
                Err(e) => {
                    assert!(e.to_string().starts_with("case.idx: line "), "{e}");
                    continue;
                }
            }
        };
        let run = async {
            if mutated_file {
                // Building agrees with the sequential reader: an index of every record, or
                // its error.
                let built = TFRecordIndex::build(&file).await;
                let read: Vec<anyhow::Result<Bytes>> =
                    TFRecordDataset::new([&file]).build().iter().collect().await;
                match &built {
                    Ok(built) => assert!(
                        read.iter().all(Result::is_ok) && built.len() == read.len(),
                        "case {case}"
                    ),
                    Err(_) => assert!(read.iter().any(Result::is_err), "case {case}"),
                }
            }
            let Ok(indexed) = IndexedTFRecords::from_indexes([&file], vec![idx.clone()]).await
            else {
                return;
            };
            let got: Vec<anyhow::Result<Bytes>> = indexed.records().iter().collect().await;
            assert_eq!(got.len(), idx.len(), "case {case}");
            for (entry, item) in idx.entries().iter().zip(got) {
                match item {
                    Ok(record) => assert_eq!(
                        Some(&record),
                        by_offset.get(&entry.offset),
                        "case {case}: a record read whole is the one written there"
                    ),
                    Err(e) => assert!(
                        matches!(e.downcast_ref::<Error>(), Some(Error::DataLoss { .. })),
                        "case {case}: {e:#}"
                    ),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .unwrap_or_else(|_| panic!("case {case} hangs"));
    }
}
