//! Checkpoint and exact resume: the elements received before a checkpoint, followed by those
//! after resuming from it (in a fresh recipe, as a new process would build it), equal the
//! uninterrupted epoch's, at every point.

use std::fmt::Debug;

use futures::StreamExt;
use streamload::text::Packing;
use streamload::{Checkpoint, Dataset};

#[path = "support/s3.rs"]
mod s3;

#[path = "support/with_errors.rs"]
mod with_errors;
use with_errors::assert_exact_with_errors;

/// For every `k` in `points`: takes `k` elements, checkpoints (through bytes), resumes from a
/// freshly built recipe, and checks the whole against the uninterrupted epoch. Returns the
/// largest checkpoint's size in bytes.
async fn assert_exact<T, F>(make: F, points: impl IntoIterator<Item = usize>) -> usize
where
    T: PartialEq + Debug + Send + 'static,
    F: Fn() -> Dataset<T>,
{
    let full = make().collect().await.expect("uninterrupted epoch");
    let mut largest = 0;
    for k in points {
        let k = k.min(full.len());
        let ds = make();
        let mut epoch = ds.iter();
        let mut seen = Vec::new();
        for _ in 0..k {
            seen.push(epoch.next().await.expect("an element").expect("no error"));
        }
        let bytes = epoch.checkpoint().expect("checkpoint").to_bytes();
        largest = largest.max(bytes.len());
        // The epoch goes on unchanged after a checkpoint.
        let mut rest_here = Vec::new();
        while let Some(x) = epoch.next().await {
            rest_here.push(x.expect("no error"));
        }
        assert_eq!(
            &full[k..],
            &rest_here[..],
            "epoch changed by a checkpoint at {k}"
        );
        drop(epoch);
        let restored = Checkpoint::from_bytes(&bytes).expect("from_bytes");
        let mut resumed = make().iter_from(&restored).expect("iter_from");
        while let Some(x) = resumed.next().await {
            seen.push(x.expect("no error"));
        }
        assert_eq!(seen.len(), full.len(), "resumed at {k}: wrong length");
        assert_eq!(seen, full, "resumed at {k}: elements differ");
    }
    largest
}

#[tokio::test]
async fn range_map_filter_take_skip_enumerate_batch() {
    let make = || {
        Dataset::range(0, 1000)
            .map(|x| x * 3)
            .filter(|x| x % 2 == 0)
            .skip(7)
            .take(400)
            .enumerate(5)
            .batch(16)
    };
    assert_exact(make, [0, 1, 2, 5, 12, 24, 25, 26]).await;
}

#[tokio::test]
async fn random_resumes_at_its_index_and_replays_under_a_shuffle() {
    // One number saved: the index of the next value.
    let size = assert_exact(|| Dataset::random(Some(3), false).take(300), [0, 1, 7, 150]).await;
    assert!(size < 100, "{size} bytes");
    // Held by position in a shuffle buffer, then batched: the values are found again.
    let make = || {
        Dataset::random(Some(5), true)
            .take(200)
            .shuffle(32, Some(1))
            .batch(8)
    };
    assert_exact(make, [0, 1, 3, 11, 24]).await;
    // In a later repetition of a rerandomized recipe (other values), too.
    let make = || {
        Dataset::random(Some(9), true)
            .take(50)
            .repeat_n(3)
            .shuffle(16, Some(2))
    };
    assert_exact(make, [0, 60, 149]).await;
}

#[tokio::test]
async fn from_vec_and_batch_remainder() {
    let make =
        || Dataset::from_vec((0..37).map(|i| format!("s{i}")).collect()).batch_drop_remainder(5);
    assert_exact(make, 0..8).await;
}

#[tokio::test]
async fn a_checkpoint_of_another_recipe_is_refused() {
    let ds = Dataset::range(0, 10).batch(2);
    let mut epoch = ds.iter();
    epoch.next().await.unwrap().unwrap();
    let cp = epoch.checkpoint().unwrap();
    let other = Dataset::range(0, 10).batch(3);
    let err = other.iter_from(&cp).unwrap_err();
    assert!(err.to_string().contains("another recipe"), "{err:#}");
    let err = Checkpoint::from_bytes(b"not a checkpoint").unwrap_err();
    assert!(err.to_string().contains("SLCK"), "{err:#}");
    let mut bytes = cp.to_bytes();
    bytes[4] = 9;
    let err = Checkpoint::from_bytes(&bytes).unwrap_err();
    assert!(err.to_string().contains("format version 9"), "{err:#}");
    // Versions 1 to 3 saved held elements in another layout: refused, never misread.
    for old in [1, 2, 3] {
        bytes[4] = old;
        let err = Checkpoint::from_bytes(&bytes).unwrap_err();
        assert!(err.to_string().contains("earlier streamload"), "{err:#}");
    }
}

#[tokio::test]
async fn a_stage_that_cannot_save_is_named() {
    let ds = Dataset::from_generator(4, || 0..10).map(|x| x + 1);
    let mut epoch = ds.iter();
    epoch.next().await.unwrap().unwrap();
    let err = epoch.checkpoint().unwrap_err();
    let e = err
        .downcast_ref::<streamload::Error>()
        .expect("a streamload error");
    assert!(
        matches!(e, streamload::Error::NotResumable { stage, .. } if stage == "from_generator"),
        "{err:#}"
    );
}

#[tokio::test]
async fn shuffle_resumes_with_its_buffer_and_generator() {
    let make = || Dataset::range(0, 500).map(|x| x * 7).shuffle(64, Some(3));
    let size = assert_exact(make, [0, 1, 2, 63, 64, 65, 100, 250, 436, 437, 499, 500]).await;
    // 64 positions of a few bytes each, not 64 elements' contents.
    assert!(size < 64 * 4 + 200, "checkpoint of {size} bytes");
}

#[tokio::test]
async fn unseeded_shuffle_resumes_exactly_too() {
    // The recipe is built once (its fallback seed drawn once); each epoch reshuffles.
    let ds = Dataset::range(0, 300).shuffle(50, None).batch(7);
    let first = ds.collect().await.unwrap();
    let second = ds.collect().await.unwrap();
    assert_ne!(first, second, "reshuffled each epoch");
    let third = ds.collect().await.unwrap();
    // Epoch 3 (index 3) again, interrupted and resumed from bytes.
    let mut epoch = ds.iter();
    let all = {
        let mut v = Vec::new();
        while let Some(b) = epoch.next().await {
            v.push(b.unwrap());
        }
        v
    };
    assert_ne!(all, third);
    let mut epoch = ds.iter(); // epoch 4
    let mut seen = vec![epoch.next().await.unwrap().unwrap(); 1];
    seen.push(epoch.next().await.unwrap().unwrap());
    let cp = Checkpoint::from_bytes(&epoch.checkpoint().unwrap().to_bytes()).unwrap();
    assert_eq!(cp.epoch(), 4);
    let mut uninterrupted = Vec::new();
    while let Some(b) = epoch.next().await {
        uninterrupted.push(b.unwrap());
    }
    let mut resumed = ds.iter_from(&cp).unwrap();
    let mut rest = Vec::new();
    while let Some(b) = resumed.next().await {
        rest.push(b.unwrap());
    }
    assert_eq!(rest, uninterrupted);
    // After a resume, the next iter() is the next epoch.
    let mut next = ds.iter();
    drop(next.next().await);
    assert_eq!(next.checkpoint().unwrap().epoch(), 5);
}

#[tokio::test]
async fn shuffle_then_batch_and_batch_then_shuffle() {
    let make = || {
        Dataset::range(0, 300)
            .shuffle(40, Some(9))
            .map(|x| x + 1)
            .batch(8)
    };
    assert_exact(make, [0, 1, 3, 4, 5, 20, 37, 38]).await;
    let make = || {
        Dataset::range(0, 300)
            .batch(4)
            .shuffle(10, Some(9))
            .map(|b| b.len())
    };
    assert_exact(make, [0, 1, 9, 10, 11, 40, 74, 75]).await;
    let make = || {
        Dataset::range(0, 300)
            .shuffle(30, Some(1))
            .shuffle(20, Some(2))
            .batch(5)
    };
    assert_exact(make, [0, 1, 7, 30, 59, 60]).await;
}

#[tokio::test]
async fn repeat_reshuffles_each_repetition_and_resumes_inside_any() {
    let make = || {
        Dataset::range(0, 50)
            .shuffle(16, Some(4))
            .repeat_n(3)
            .batch(6)
    };
    let full = make().collect().await.unwrap();
    assert_ne!(full[0], full[9], "each repetition has its own order");
    assert_exact(make, [0, 1, 8, 9, 16, 17, 24, 25]).await;
    // Shuffling across repetitions: the buffer holds elements of two repetitions.
    let make = || {
        Dataset::range(0, 20)
            .repeat_n(4)
            .shuffle(15, Some(8))
            .enumerate(0)
    };
    assert_exact(make, [0, 1, 5, 19, 20, 21, 45, 79, 80]).await;
    let make = || Dataset::range(0, 20).shuffle(5, Some(8)).repeat().take(70);
    assert_exact(make, [0, 19, 20, 21, 45, 69, 70]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetch_redoes_what_it_read_ahead() {
    // Over a small upstream: marks every few elements, the rest redone.
    let make = || {
        Dataset::range(0, 400)
            .map(|x| x * 2)
            .prefetch(8)
            .batch(3)
            .prefetch(2)
    };
    assert_exact(make, [0, 1, 2, 10, 11, 40, 66, 67, 134]).await;
    let make = || Dataset::range(0, 200).prefetch(64);
    assert_exact(make, [0, 1, 31, 32, 33, 64, 100, 199, 200]).await;
    // Over a shuffle: the positions of what it holds.
    let make = || {
        Dataset::range(0, 300)
            .shuffle(20, Some(5))
            .prefetch(16)
            .batch(4)
            .prefetch(3)
    };
    assert_exact(make, [0, 1, 2, 5, 30, 74, 75]).await;
    let make = || {
        Dataset::range(0, 300)
            .shuffle(20, Some(5))
            .prefetch(16)
            .shuffle(7, Some(6))
    };
    assert_exact(make, [0, 1, 2, 5, 30, 150, 299]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_epoch_can_be_checkpointed_again() {
    let make = || {
        Dataset::range(0, 500)
            .shuffle(30, Some(2))
            .prefetch(8)
            .batch(5)
            .prefetch(2)
    };
    let full = make().collect().await.unwrap();
    let mut seen = Vec::new();
    let mut epoch = make().iter();
    for hop in 0..6 {
        for _ in 0..(3 + hop * 5) {
            match epoch.next().await {
                Some(b) => seen.push(b.unwrap()),
                None => break,
            }
        }
        let cp = Checkpoint::from_bytes(&epoch.checkpoint().unwrap().to_bytes()).unwrap();
        drop(epoch);
        epoch = make().iter_from(&cp).unwrap();
    }
    while let Some(b) = epoch.next().await {
        seen.push(b.unwrap());
    }
    assert_eq!(seen, full);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_parallel_and_random_map_redo_their_calls_in_flight() {
    use streamload::rand::Rng;
    let slowish = |x: i64| {
        let mut h = x as u64;
        for _ in 0..200 {
            h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(7);
        }
        Ok((x, h))
    };
    let make = move || {
        Dataset::range(0, 600)
            .try_map_parallel(3, slowish)
            .batch(7)
            .prefetch(2)
    };
    assert_exact(make, [0, 1, 2, 13, 40, 85, 86]).await;
    // Over a shuffle: the positions of the calls in flight.
    let make = move || {
        Dataset::range(0, 600)
            .shuffle(50, Some(1))
            .try_map_parallel(2, slowish)
            .batch(5)
    };
    assert_exact(make, [0, 1, 3, 17, 60, 119, 120]).await;
    // Per-element randomness keyed by (seed, epoch, index): an unseeded random map too.
    let ds = Dataset::range(0, 400)
        .shuffle(40, Some(2))
        .random_map(2, None, |x, rng| x * 1000 + rng.random_range(0..1000))
        .batch(9)
        .prefetch(2);
    let full = ds.collect().await.unwrap(); // epoch 0
    let mut epoch = ds.iter(); // epoch 1: different draws
    let first = epoch.next().await.unwrap().unwrap();
    assert_ne!(first, full[0]);
    let cp = Checkpoint::from_bytes(&epoch.checkpoint().unwrap().to_bytes()).unwrap();
    let mut rest = Vec::new();
    while let Some(b) = epoch.next().await {
        rest.push(b.unwrap());
    }
    let mut resumed = ds.iter_from(&cp).unwrap();
    let mut again = Vec::new();
    while let Some(b) = resumed.next().await {
        again.push(b.unwrap());
    }
    assert_eq!(again, rest);
    let make = || {
        Dataset::range(0, 300)
            .random_map(2, Some(5), |x, rng| x * 1000 + rng.random_range(0..1000))
            .shuffle(30, Some(3))
            .random_map(3, Some(6), |x, rng| (x, rng.random_range(0..10)))
            .batch(4)
    };
    assert_exact(make, [0, 1, 2, 9, 30, 74, 75]).await;
}

/// `n` TFRecord files of `per` records each (`file-record` as text), plain or gzip.
async fn tfrecord_files(
    dir: &std::path::Path,
    n: usize,
    per: usize,
    gzip: bool,
) -> Vec<std::path::PathBuf> {
    use streamload::format::{Compression, TFRecordWriter};
    let mut files = Vec::new();
    for f in 0..n {
        let path = dir.join(format!(
            "part-{f}.tfrecord{}",
            if gzip { ".gz" } else { "" }
        ));
        let compression = if gzip {
            Compression::Gzip
        } else {
            Compression::None
        };
        let mut w = TFRecordWriter::new(tokio::fs::File::create(&path).await.unwrap(), compression);
        for r in 0..per {
            // Records of varied sizes, some spanning the reader's blocks.
            let payload = format!("{f}-{r}-{}", "x".repeat((r * 37) % 300));
            w.write(payload.as_bytes()).await.unwrap();
        }
        w.finish().await.unwrap();
        files.push(path);
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tfrecord_files_resume_at_their_offsets() {
    use streamload::format::{Compression, TFRecordDataset};
    let dir = tempfile::tempdir().unwrap();
    let files = tfrecord_files(dir.path(), 4, 150, false).await;
    let f = files.clone();
    let make = move || TFRecordDataset::new(f.clone()).buffer_size(1000).build();
    assert_exact(make, [0, 1, 149, 150, 151, 333, 599, 600]).await;
    let f = files.clone();
    let make = move || {
        TFRecordDataset::new(f.clone())
            .buffer_size(700)
            .build()
            .shuffle(64, Some(1))
            .map(|r| r.len())
            .batch(10)
            .prefetch(2)
    };
    let size = assert_exact(make, [0, 1, 6, 7, 30, 59, 60]).await;
    assert!(size < 64 * 8 + 300, "checkpoint of {size} bytes");
    // Interleaved files, positions through the interleave.
    let f = files.clone();
    let make = move || {
        streamload::Dataset::from_vec(f.clone())
            .interleave(3, 2, |p| TFRecordDataset::new([p]).buffer_size(500).build())
            .shuffle(50, Some(4))
            .batch(7)
    };
    assert_exact(make, [0, 1, 2, 20, 40, 85, 86]).await;
    // Compressed: offsets in the decompressed stream.
    let gz = tfrecord_files(dir.path(), 3, 100, true).await;
    let make = move || {
        TFRecordDataset::new(gz.clone())
            .compression(Compression::Gzip)
            .build()
            .shuffle(30, Some(2))
            .batch(8)
    };
    assert_exact(make, [0, 1, 5, 20, 37, 38]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tfrecord_files_writing_their_indexes_resume_and_index_only_files_read_whole() {
    use streamload::format::{IndexTarget, TFRecordDataset, TFRecordIndex};
    let dir = tempfile::tempdir().unwrap();
    let files = tfrecord_files(dir.path(), 3, 100, false).await;
    let out = dir.path().join("indexes");
    std::fs::create_dir(&out).unwrap();
    let index_of = |f: usize| out.join(format!("part-{f}.tfrecord.idx"));
    let (f, o) = (files.clone(), out.clone());
    let make = move || {
        TFRecordDataset::new(f.clone())
            .buffer_size(700)
            .write_index(IndexTarget::Dir(o.as_path().into()))
            .build()
    };
    assert_exact(&make, [0, 1, 99, 100, 150, 299, 300]).await;
    let f = files.clone();
    let o = out.clone();
    let shuffled = move || {
        TFRecordDataset::new(f.clone())
            .num_parallel_reads(2)
            .write_index(IndexTarget::Dir(o.as_path().into()))
            .build()
            .shuffle(40, Some(3))
            .batch(6)
    };
    assert_exact(shuffled, [0, 1, 10, 33, 49, 50]).await;
    for (i, file) in files.iter().enumerate() {
        let written = std::fs::read_to_string(index_of(i)).unwrap();
        assert_eq!(
            written,
            TFRecordIndex::build(file).await.unwrap().to_string()
        );
    }
    // A resumed epoch indexes the files it reads from their start, not the one it resumed
    // inside.
    for i in 0..3 {
        std::fs::remove_file(index_of(i)).unwrap();
    }
    let mut epoch = make().iter();
    for _ in 0..150 {
        epoch.next().await.unwrap().unwrap();
    }
    let cp = Checkpoint::from_bytes(&epoch.checkpoint().unwrap().to_bytes()).unwrap();
    drop(epoch);
    assert!(index_of(0).exists() && !index_of(1).exists());
    std::fs::remove_file(index_of(0)).unwrap();
    let rest = make().iter_from(&cp).unwrap().collect::<Vec<_>>().await;
    assert_eq!(rest.len(), 150);
    assert!(rest.iter().all(|r| r.is_ok()));
    assert!(!index_of(0).exists() && !index_of(1).exists());
    assert!(index_of(2).exists());
}

/// `n` WebDataset shards of `per` samples each (two or three members of varied sizes, some
/// spanning the reader's blocks), plain or `.tar.gz`.
async fn webdataset_shards(
    dir: &std::path::Path,
    n: usize,
    per: usize,
    gzip: bool,
) -> Vec<std::path::PathBuf> {
    use streamload::format::{Sample, ShardWriter};
    let pattern = dir.join(if gzip {
        "wds-%02d.tar.gz"
    } else {
        "wds-%02d.tar"
    });
    let mut w = ShardWriter::new(pattern.to_str().unwrap())
        .unwrap()
        .max_samples(per as u64);
    for i in 0..n * per {
        let mut sample = Sample::new(format!("s/{i:05}"))
            .with("cls", (i % 10).to_string())
            .with("txt", "x".repeat((i * 37) % 900));
        if i % 4 == 0 {
            sample.insert("json", format!("{{\"i\": {i}}}"));
        }
        w.write(&sample).await.unwrap();
    }
    let shards = w.finish().await.unwrap();
    shards
        .iter()
        .map(|s| s.as_path().unwrap().to_path_buf())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webdataset_shards_resume_at_their_samples_offsets() {
    use streamload::format::WebDataset;
    let dir = tempfile::tempdir().unwrap();
    let shards = webdataset_shards(dir.path(), 4, 60, false).await;
    let f = shards.clone();
    let make = move || WebDataset::new(f.clone()).buffer_size(1000).build();
    assert_exact(make, [0, 1, 2, 59, 60, 61, 150, 239, 240]).await;
    // Through a shuffle (samples held by position), a map and batches.
    let f = shards.clone();
    let make = move || {
        WebDataset::new(f.clone())
            .memory_map(false)
            .buffer_size(700)
            .build()
            .shuffle(40, Some(3))
            .map(|s| (s.key().to_string(), s.cls().unwrap(), s.len()))
            .batch(7)
            .prefetch(2)
    };
    let size = assert_exact(make, [0, 1, 5, 6, 20, 33, 34]).await;
    assert!(size < 40 * 8 + 400, "checkpoint of {size} bytes");
    // Parallel reads, and an interleave of single shards.
    let f = shards.clone();
    let make = move || {
        WebDataset::new(f.clone())
            .num_parallel_reads(2)
            .build()
            .shuffle(30, Some(9))
            .batch(5)
    };
    assert_exact(make, [0, 1, 7, 30, 47, 48]).await;
    let f = shards.clone();
    let make = move || {
        streamload::Dataset::from_vec(f.clone())
            .interleave(3, 2, |p| WebDataset::new([p]).buffer_size(500).build())
            .batch(9)
    };
    assert_exact(make, [0, 1, 13, 26, 27]).await;
    // Compressed: offsets in the decompressed stream, inflated again up to them.
    let gz = webdataset_shards(dir.path(), 3, 40, true).await;
    let make = move || {
        WebDataset::new(gz.clone())
            .build()
            .shuffle(25, Some(2))
            .batch(6)
    };
    assert_exact(make, [0, 1, 4, 11, 19, 20]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_reads_resume_each_reader_where_it_was_passed_on() {
    use streamload::format::TFRecordDataset;
    let dir = tempfile::tempdir().unwrap();
    let files = tfrecord_files(dir.path(), 6, 120, false).await;
    let f = files.clone();
    // W3's shape: parallel reads, shuffle, parallel map, batch, prefetch.
    let make = move || {
        TFRecordDataset::new(f.clone())
            .num_parallel_reads(3)
            .buffer_size(900)
            .build()
            .shuffle(100, Some(7))
            .map_parallel(2, |r| r.len())
            .batch(16)
            .prefetch(2)
    };
    let size = assert_exact(make, [0, 1, 2, 9, 22, 44, 45]).await;
    // At most 16 bytes per element held by position (the shuffle's 100, a partial batch,
    // two prefetched batches, the parallel map's calls in flight: 2 workers x 2 groups of at
    // most 256), plus about 1 KB.
    assert!(
        size <= 16 * (100 + 16 + 32 + 1024) + 1024,
        "checkpoint of {size} bytes"
    );
    // Without a shuffle: marks of each reader.
    let f = files.clone();
    let make = move || {
        TFRecordDataset::new(f.clone())
            .num_parallel_reads(4)
            .build()
            .batch(9)
    };
    assert_exact(make, [0, 1, 13, 40, 79, 80]).await;
    let f = files.clone();
    let make = move || {
        streamload::Dataset::from_vec(f.clone())
            .parallel_interleave(2, 3, 4, |p| TFRecordDataset::new([p]).build())
            .prefetch(5)
    };
    assert_exact(make, [0, 1, 5, 119, 120, 300, 719, 720]).await;
}

/// A checkpoint that must be refused, naming `stage`.
async fn assert_refused<T: Send + 'static>(ds: Dataset<T>, after: usize, stage: &str) {
    let mut epoch = ds.iter();
    for _ in 0..after {
        epoch.next().await.expect("an element").expect("no error");
    }
    let err = epoch.checkpoint().expect_err("a refused checkpoint");
    match err.downcast_ref::<streamload::Error>() {
        Some(streamload::Error::NotResumable { stage: s, .. }) if s == stage => {}
        _ => panic!("expected NotResumable naming {stage}, got: {err:#}"),
    }
}

#[tokio::test]
async fn shard_take_while_and_ignore_errors_keep_their_counters() {
    let faulty = |x: i64| {
        anyhow::ensure!(x % 17 != 5, "element {x} is bad");
        Ok(x)
    };
    let make = move || {
        Dataset::range(0, 400)
            .try_map(faulty)
            .ignore_errors()
            .shard(3, 1)
            .take_while(|x| *x < 330)
            .batch(4)
    };
    assert_exact(make, [0, 1, 2, 5, 13, 25, 26, 27, 40]).await;
    // Upstream of a shuffle (their elements replayed by position) and over one.
    let make = move || {
        Dataset::range(0, 400)
            .shuffle(25, Some(3))
            .try_map(faulty)
            .ignore_errors()
            .shard(2, 1)
            .take_while(|x| *x != 171)
            .shuffle(10, Some(4))
            .batch(3)
    };
    assert_exact(make, [0, 1, 2, 7, 20, 30, 60]).await;
}

#[tokio::test]
async fn ignore_errors_within_keeps_its_budget_counters() {
    let faulty = |x: i64| {
        anyhow::ensure!(x % 17 != 5, "element {x} is bad");
        Ok(x)
    };
    // 24 errors in 400 elements: a budget of 24 holds to the end.
    let make = move || {
        Dataset::range(0, 400)
            .try_map(faulty)
            .ignore_errors_within(streamload::ErrorBudget::count(24))
            .batch(4)
    };
    assert_exact(make, [0, 1, 2, 5, 13, 40, 70, 94]).await;
    // Over a shuffle (positions replayed) and with a rate.
    let make = move || {
        Dataset::range(0, 400)
            .shuffle(25, Some(3))
            .try_map(faulty)
            .ignore_errors_within(streamload::ErrorBudget::rate(0.1))
            .shuffle(10, Some(4))
            .batch(3)
    };
    assert_exact(make, [0, 1, 2, 7, 20, 30, 60]).await;
}

#[tokio::test]
async fn a_batch_over_an_input_that_cannot_place_its_elements_still_runs() {
    // The shuffle asks the batch for positions its input cannot give: the epoch runs, and
    // only a checkpoint is refused (naming the stage that cannot save).
    let ds = Dataset::from_stream(|| futures::stream::iter((0..40).map(anyhow::Ok)))
        .batch(3)
        .shuffle(4, Some(1));
    let mut all: Vec<i64> = ds.collect().await.unwrap().concat();
    all.sort();
    assert_eq!(all, (0..40).collect::<Vec<_>>());
    assert_refused(ds, 2, "from_stream").await;
}

#[tokio::test]
async fn unbatch_and_rebatch_resume_inside_an_element() {
    let make = || Dataset::range(0, 200).batch(7).unbatch().batch(5);
    assert_exact(make, [0, 1, 2, 3, 7, 13, 20, 39, 40]).await;
    let make = || Dataset::range(0, 200).batch(6).rebatch(4, false);
    assert_exact(make, [0, 1, 2, 3, 10, 33, 49, 50]).await;
    let make = || {
        Dataset::range(0, 203)
            .batch(6)
            .rebatch_sizes(&[3, 5, 1], true)
    };
    assert_exact(make, [0, 1, 2, 3, 4, 5, 22, 44, 45]).await;
    // Over a shuffle of batches: the element being split is held by position.
    let make = || {
        Dataset::range(0, 200)
            .batch(5)
            .shuffle(8, Some(1))
            .rebatch(3, false)
    };
    assert_exact(make, [0, 1, 2, 5, 30, 66, 67]).await;
    // Rows held by a shuffle after the unbatch: each row's position is its element's and
    // its index in it.
    let make = || {
        Dataset::range(0, 200)
            .shuffle(30, Some(1))
            .batch(6)
            .unbatch()
            .shuffle(10, Some(2))
            .batch(4)
    };
    assert_exact(make, [0, 1, 2, 3, 11, 25, 49, 50]).await;
    let make = || {
        Dataset::from_vec((0..60).map(|i| vec![i; (i % 4) as usize]).collect())
            .unbatch()
            .shuffle(9, Some(5))
    };
    assert_exact(make, [0, 1, 2, 8, 9, 40, 89, 90]).await;
}

#[tokio::test]
async fn padded_ragged_and_collated_batches_resume() {
    let seqs = || Dataset::range(0, 90).map(|n| vec![n; (n % 5) as usize]);
    let make = move || seqs().padded_batch(4, None, None, false);
    assert_exact(make, [0, 1, 2, 11, 22, 23]).await;
    let make = move || {
        seqs()
            .shuffle(10, Some(1))
            .padded_batch(4, None, Some(-1), true)
    };
    assert_exact(make, [0, 1, 2, 11, 21, 22]).await;
    let make = move || {
        seqs()
            .padded_batch(3, None, None, false)
            .shuffle(5, Some(2))
    };
    assert_exact(make, [0, 1, 2, 4, 5, 17, 29, 30]).await;
    let make = move || {
        seqs()
            .ragged_batch(4, false)
            .map(|r| r.to_vecs())
            .shuffle(3, Some(3))
    };
    assert_exact(make, [0, 1, 2, 3, 11, 22, 23]).await;
    let make = || {
        Dataset::range(0, 50)
            .map(|x| (x, x as f32 * 0.5))
            .batch(4)
            .collate()
    };
    assert_exact(make, [0, 1, 2, 6, 12, 13]).await;
}

#[tokio::test]
async fn scan_resumable_saves_its_running_state() {
    let make = || {
        Dataset::range(0, 300)
            .scan_resumable((0i64, 1u32), |(sum, n), x| {
                ((sum + x, n + 1), sum * 31 + i64::from(n))
            })
            .batch(7)
    };
    assert_exact(make, [0, 1, 2, 10, 42, 43]).await;
    // After a shuffle (its elements held by position), and before a prefetch.
    let make = || {
        Dataset::range(0, 300)
            .shuffle(40, Some(6))
            .scan_resumable(vec![0i64; 0], |mut last, x| {
                last.push(x);
                if last.len() > 3 {
                    last.remove(0);
                }
                let out = last.iter().sum::<i64>();
                (last, out)
            })
            .prefetch(4)
    };
    assert_exact(make, [0, 1, 2, 17, 150, 299, 300]).await;
    // Upstream of a shuffle: each element placed by its input's position and the running
    // state it was made with.
    let make = || {
        Dataset::range(0, 200)
            .scan_resumable(0i64, |s, x| (s + x, s * 3 + x))
            .shuffle(10, Some(1))
            .batch(3)
    };
    assert_exact(make, [0, 1, 2, 5, 30, 66, 67]).await;
    // A plain scan cannot save its state, nor place its elements.
    assert_refused(Dataset::range(0, 10).scan(0, |s, x| (s + x, s)), 2, "scan").await;
    let ds = Dataset::range(0, 100)
        .scan(0i64, |s, x| (s + x, s))
        .shuffle(10, Some(1));
    assert_refused(ds, 2, "scan").await;
}

#[tokio::test]
async fn unique_saves_the_positions_of_what_it_has_seen() {
    let make = || {
        Dataset::range(0, 800)
            .map(|x| (x * 37) % 211)
            .unique()
            .batch(3)
    };
    let size = assert_exact(make, [0, 1, 2, 10, 40, 70, 71]).await;
    // The set is saved as positions (a few bytes each), never as values.
    assert!(size < 211 * 4 + 200, "checkpoint of {size} bytes");
    let make = || {
        Dataset::range(0, 800)
            .shuffle(50, Some(2))
            .map(|x| (x * 37) % 211)
            .unique()
            .shuffle(10, Some(3))
            .batch(3)
    };
    assert_exact(make, [0, 1, 2, 10, 40, 70, 71]).await;
}

#[tokio::test]
async fn zip_and_concatenate_save_each_input() {
    let make = || {
        Dataset::zip(
            Dataset::range(0, 100),
            Dataset::range(5, 300)
                .filter(|x| x % 3 != 0)
                .map(|x| format!("{x}")),
        )
        .batch(3)
    };
    assert_exact(make, [0, 1, 2, 5, 20, 33, 34]).await;
    let make = || {
        Dataset::zip_all(vec![
            Dataset::range(0, 120).shuffle(10, Some(1)),
            Dataset::range(0, 100),
            Dataset::range(7, 500).shuffle(30, Some(2)),
        ])
        .shuffle(15, Some(3))
        .batch(4)
    };
    assert_exact(make, [0, 1, 2, 5, 12, 24, 25]).await;
    let make = || {
        Dataset::range(0, 50)
            .concatenate(&Dataset::range(100, 130).shuffle(7, Some(1)))
            .concatenate(&Dataset::range(200, 203))
            .batch(4)
    };
    assert_exact(make, [0, 1, 11, 12, 13, 19, 20, 21]).await;
    let make = || {
        Dataset::range(0, 50)
            .concatenate(&Dataset::range(100, 130))
            .shuffle(12, Some(4))
    };
    assert_exact(make, [0, 1, 2, 30, 45, 70, 79, 80]).await;
}

#[tokio::test]
async fn sample_and_choose_resume_their_draws_and_inputs() {
    let make = || {
        Dataset::sample_from_datasets(
            vec![
                Dataset::range(0, 100),
                Dataset::range(1000, 1040).shuffle(8, Some(1)),
                Dataset::range(5000, 5100),
            ],
            Some(vec![0.5, 0.2, 0.3]),
            Some(7),
            false,
        )
        .batch(5)
    };
    assert_exact(make, [0, 1, 2, 9, 20, 40, 47, 48]).await;
    // Unseeded: the seed drawn for the recipe is saved.
    let ds = Dataset::sample_from_datasets(
        vec![Dataset::range(0, 60), Dataset::range(100, 160)],
        None,
        None,
        true,
    );
    let make = move || ds.clone().shuffle(9, Some(2));
    assert_exact(make, [0, 1, 2, 8, 30, 59]).await;
    let make = || {
        Dataset::choose_from_datasets(
            vec![
                Dataset::range(0, 30),
                Dataset::range(100, 180).batch(2).unbatch(),
            ],
            Dataset::range(0, 300).map(|x| (x * x) % 3 % 2),
            false,
        )
        .batch(4)
    };
    assert_exact(make, [0, 1, 2, 9, 20, 26, 27]).await;
    let make = || {
        Dataset::choose_from_datasets(
            vec![Dataset::range(0, 30), Dataset::range(100, 180)],
            Dataset::range(0, 300).map(|x| x % 2).shuffle(5, Some(3)),
            true,
        )
        .shuffle(6, Some(4))
    };
    assert_exact(make, [0, 1, 2, 9, 30, 59, 60]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_async_redoes_its_calls_in_flight() {
    let call = |x: i64| async move {
        tokio::task::yield_now().await;
        x * 3
    };
    let make = move || Dataset::range(0, 300).map_async(4, call).batch(5);
    assert_exact(make, [0, 1, 2, 13, 40, 59, 60]).await;
    // More calls in flight than elements between two marks.
    let make = move || Dataset::range(0, 300).map_async(45, call);
    assert_exact(make, [0, 1, 2, 31, 32, 33, 70, 150, 299, 300]).await;
    // Over a shuffle (the positions of the calls in flight), and upstream of one.
    let make = move || {
        Dataset::range(0, 300)
            .shuffle(30, Some(1))
            .map_async(5, call)
            .shuffle(7, Some(2))
            .batch(3)
    };
    assert_exact(make, [0, 1, 2, 17, 60, 99, 100]).await;
    // In completion order, the calls in flight cannot be placed.
    let ds = Dataset::range(0, 100)
        .map_async(3, call)
        .with_options(streamload::Options::new().deterministic(false));
    assert_refused(ds, 3, "map_async").await;
}

#[tokio::test]
async fn window_resumes_from_the_oldest_window_not_passed_on() {
    // Overlapping strided windows, then windows with gaps between them.
    let make = || Dataset::range(0, 100).window(4, 3, 2, false);
    assert_exact(make, [0, 1, 2, 3, 5, 8, 20, 31, 32, 33, 34]).await;
    let make = || Dataset::range(0, 100).window(3, 5, 1, true).batch(2);
    assert_exact(make, [0, 1, 2, 5, 9, 10]).await;
    let make = || {
        Dataset::range(0, 50)
            .window(3, 1, 1, false)
            .map(|w| w.len())
    };
    assert_exact(make, [0, 1, 2, 25, 47, 48, 49, 50]).await;
    // Over a shuffle (the elements from the oldest window's first, by position) and upstream
    // of one (members shared between windows read again once).
    let make = || {
        Dataset::range(0, 100)
            .shuffle(10, Some(1))
            .window(5, 2, 1, false)
    };
    assert_exact(make, [0, 1, 2, 3, 20, 48, 49, 50]).await;
    let make = || {
        Dataset::range(0, 100)
            .window(4, 2, 3, false)
            .shuffle(6, Some(2))
            .batch(2)
    };
    assert_exact(make, [0, 1, 2, 3, 12, 24, 25]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaves_over_windows_and_zips_place_their_elements() {
    // tf.data's idiom: each window a dataset, flattened in batches. The interleave's input
    // elements (windows) and its inner elements (batches) are groups of positions.
    let make = || {
        Dataset::range(0, 60)
            .window_datasets(4, 3, 1, false)
            .flat_map(|w| w.batch(3))
    };
    assert_exact(make, [0, 1, 2, 3, 10, 39, 40]).await;
    let make = || {
        Dataset::range(0, 60)
            .shuffle(8, Some(1))
            .window_datasets(3, 2, 1, false)
            .interleave(2, 2, |w| w.batch(2))
            .shuffle(5, Some(2))
    };
    assert_exact(make, [0, 1, 2, 9, 30, 59, 60]).await;
    let make = || {
        Dataset::zip(Dataset::range(0, 20), Dataset::range(100, 140))
            .parallel_interleave(3, 2, 4, |(a, b)| Dataset::range(a, a + (b % 4)))
            .shuffle(7, Some(3))
    };
    assert_exact(make, [0, 1, 2, 10, 25, 29, 30]).await;
    // Inner datasets that are not small (each a shuffle): a reader holds what its task read
    // ahead by position, with positions asked for downstream too (a shuffle) or not.
    let inner = |x: i64| Dataset::range(x * 10, x * 10 + 7).shuffle(3, Some(x as u64));
    let make = || Dataset::range(0, 12).parallel_interleave(3, 2, 4, inner);
    assert_exact(make, spread(84)).await;
    let make = || {
        Dataset::range(0, 12)
            .parallel_interleave(3, 2, 4, inner)
            .shuffle(5, Some(4))
    };
    assert_exact(make, spread(84)).await;
}

/// Checkpoint points across an epoch of `n` elements: its start, middle and end.
fn spread(n: usize) -> Vec<usize> {
    let mut points = vec![0, 1, 2, n / 3, n / 2, n.saturating_sub(3)];
    points.extend([n.saturating_sub(2), n.saturating_sub(1), n]);
    points
}

#[tokio::test]
async fn bucket_by_sequence_length_fills_its_buckets_again() {
    use streamload::BucketOptions;
    let seqs = || Dataset::range(0, 200).map(|n| vec![n; ((n * 7) % 11) as usize + 1]);
    let make = move || {
        seqs().bucket_by_sequence_length(
            |s| s.len(),
            vec![3, 6, 9],
            vec![4, 3, 5, 2],
            BucketOptions::default().padding_values(-1),
        )
    };
    let n = make().count().await.unwrap() as usize;
    assert_exact(make, 0..=n).await;
    // A rare bucket holds its elements long (the restore reads from before its first one),
    // and the flush at the end.
    let make = move || {
        seqs().bucket_by_sequence_length(
            |s| if s[0] % 37 == 0 { 100 } else { s.len() },
            vec![50],
            vec![3, 4],
            BucketOptions::default(),
        )
    };
    let n = make().count().await.unwrap() as usize;
    assert_exact(make, 0..=n).await;
    // Over a shuffle (the elements held by position) and upstream of one (each batch's
    // members read again, padded as their bucket pads).
    let make = move || {
        seqs()
            .shuffle(20, Some(1))
            .bucket_by_sequence_length(
                |s| s.len(),
                vec![4, 8, 12],
                vec![3, 2, 4, 1],
                BucketOptions::default()
                    .pad_to_bucket_boundary(true)
                    .drop_remainder(true),
            )
            .map(|b| b.into_raw_vec_and_offset().0)
    };
    let n = make().count().await.unwrap() as usize;
    assert_exact(make, spread(n)).await;
    let make = move || {
        seqs()
            .bucket_by_sequence_length(|s| s.len(), vec![5], vec![3, 3], BucketOptions::default())
            .shuffle(4, Some(2))
    };
    let n = make().count().await.unwrap() as usize;
    assert_exact(make, spread(n)).await;
}

#[tokio::test]
async fn group_by_window_fills_its_windows_again_and_restores_the_one_being_read() {
    let make = || Dataset::range(0, 200).group_by_window(|x| x % 3, |_, w| w.batch(2), 5);
    let n = make().count().await.unwrap() as usize;
    assert_exact(make, 0..=n).await;
    // Window sizes per key, a rare key holding its window long, and the flush at the end.
    let make = || {
        Dataset::range(0, 300).group_by_window_with(
            |x| if x % 41 == 0 { 7 } else { x % 4 },
            |k, w| w.map(move |x| x * 10 + k).batch(3),
            |k| *k as usize + 2,
        )
    };
    let n = make().count().await.unwrap() as usize;
    assert_exact(make, 0..=n).await;
    // Over a shuffle (the elements held by position) and upstream of one (each element placed
    // by its window's elements and its place in the reduced dataset).
    let make = || {
        Dataset::range(0, 200)
            .shuffle(15, Some(1))
            .group_by_window(|x| x % 5, |_, w| w.batch(3), 4)
    };
    let n = make().count().await.unwrap() as usize;
    assert_exact(make, spread(n)).await;
    let make = || {
        Dataset::range(0, 200)
            .group_by_window(|x| x % 3, |k, w| w.map(move |x| (k, x)), 4)
            .shuffle(6, Some(2))
            .batch(5)
    };
    let n = make().count().await.unwrap() as usize;
    assert_exact(make, spread(n)).await;
}

#[tokio::test]
async fn cache_resumes_while_filling_and_while_reading() {
    // Repetition 0 fills the cache, the next ones read it; each resume is in a fresh recipe
    // (an empty cache: it is filled again from where its fill started).
    let make = || {
        Dataset::range(0, 50)
            .shuffle(10, Some(1))
            .cache()
            .repeat_n(3)
            .batch(4)
    };
    let n = make().count().await.unwrap() as usize;
    assert_exact(make, [0, 1, 2, 6, 12, 13, 14, 20, 25, 36, n - 1, n]).await;
    // Upstream of a shuffle: positions of both kinds (the input's, the cache's indices).
    let make = || {
        Dataset::range(0, 50)
            .shuffle(10, Some(1))
            .cache()
            .repeat_n(3)
            .shuffle(8, Some(2))
    };
    assert_exact(make, [0, 1, 2, 45, 49, 50, 55, 100, 149, 150]).await;
}

#[tokio::test]
async fn a_cache_a_take_cuts_short_fills_afresh_after_a_resume() {
    // The take stops each repetition before the cache is whole, so every repetition fills it
    // again in its own epoch (its own shuffle); a resumed fill must not hand its epoch on to
    // the next repetition (found by the random checkpoint test at 10x, seed 36).
    let make = || {
        Dataset::range(0, 100)
            .shuffle(10, Some(3))
            .cache()
            .take(20)
            .repeat_n(3)
    };
    let n = make().count().await.unwrap() as usize;
    assert_exact(make, [0, 1, 5, 19, 20, 21, 30, 39, 40, 45, n - 1]).await;
    let make = || {
        Dataset::random(Some(391), true)
            .cache()
            .take(30)
            .repeat_n(2)
    };
    assert_exact(make, [0, 7, 29, 30, 31, 45, 59]).await;
}

#[tokio::test]
async fn a_cache_whose_fill_met_an_error_before_the_checkpoint_fills_afresh_after_it() {
    // An error leaves the epoch's fill incomplete: the next repetition fills the cache again
    // in its own epoch (its own shuffle). Resumed after the error, the fill must not count
    // as clean and hand its epoch on (found by the random checkpoint test at 10x, seed 69).
    let make = || {
        Dataset::range(0, 120)
            .try_map(|x| {
                if x == 7 {
                    Err(anyhow::anyhow!("bad {x}"))
                } else {
                    Ok(x)
                }
            })
            .shuffle(10, Some(3))
            .cache()
            .repeat_n(2)
    };
    let errors = assert_exact_with_errors(make, [0, 1, 5, 30, 60, 119, 120, 121, 150, 239]).await;
    assert_eq!(errors, 2);
}

#[tokio::test]
async fn a_restored_cache_holds_the_order_of_the_epoch_that_filled_it() {
    // Unseeded: each recipe draws its own shuffle seed; the checkpoint carries the fill's.
    let recipe = || Dataset::range(0, 40).shuffle(10, None).cache();
    let a = recipe();
    let filled = a.collect().await.unwrap();
    let mut epoch = a.iter(); // reads the cache
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(epoch.next().await.unwrap().unwrap());
    }
    let cp = Checkpoint::from_bytes(&epoch.checkpoint().unwrap().to_bytes()).unwrap();
    let b = recipe(); // another process: its cache is empty, its seed another
    let mut resumed = b.iter_from(&cp).unwrap();
    while let Some(x) = resumed.next().await {
        seen.push(x.unwrap());
    }
    assert_eq!(seen, filled);
    assert_eq!(
        b.collect().await.unwrap(),
        filled,
        "the cache filled again is kept"
    );

    // A checkpoint while filling: the resumed epoch cannot fill the cache (its first
    // elements are not in it), and the next epoch fills it as the first would have.
    let a = recipe();
    let mut epoch = a.iter();
    let mut first = Vec::new();
    for _ in 0..7 {
        first.push(epoch.next().await.unwrap().unwrap());
    }
    let cp = Checkpoint::from_bytes(&epoch.checkpoint().unwrap().to_bytes()).unwrap();
    let b = recipe();
    let mut resumed = b.iter_from(&cp).unwrap();
    while let Some(x) = resumed.next().await {
        first.push(x.unwrap());
    }
    assert_eq!(b.collect().await.unwrap(), first);
    assert_eq!(b.collect().await.unwrap(), first);
}

/// Checkpoints every few elements, each resumed in a fresh recipe and checkpointed again
/// (the first ones right after a restore), against the uninterrupted epoch.
async fn assert_hops<T, F>(make: F, hops: &[usize])
where
    T: PartialEq + Debug + Send + 'static,
    F: Fn() -> Dataset<T>,
{
    let full = make().collect().await.expect("uninterrupted epoch");
    let mut seen = Vec::new();
    let mut epoch = make().iter();
    for &hop in hops {
        for _ in 0..hop {
            match epoch.next().await {
                Some(x) => seen.push(x.expect("no error")),
                None => break,
            }
        }
        let bytes = epoch.checkpoint().expect("checkpoint").to_bytes();
        drop(epoch);
        epoch = make()
            .iter_from(&Checkpoint::from_bytes(&bytes).unwrap())
            .expect("iter_from");
    }
    while let Some(x) = epoch.next().await {
        seen.push(x.expect("no error"));
    }
    assert_eq!(seen, full);
}

/// A restore over a small input reads again from a mark and drops what was passed on before
/// the checkpoint: a prefetch restored so counts those too, and a checkpoint soon after
/// saves only what it has not passed on. The upstream and the consumer are slow enough that
/// the prefetch runs ahead (what it holds is then read again after a restore).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetch_checkpoints_again_soon_after_a_restore() {
    fn spin(micros: u64) {
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_micros(micros) {
            std::hint::spin_loop();
        }
    }
    let make = || {
        Dataset::range(0, 600)
            .batch(3)
            .map(|v| {
                spin(100);
                v.iter().sum::<i64>()
            })
            .prefetch(4)
    };
    let full = make().collect().await.unwrap();
    let mut seen = Vec::new();
    let mut epoch = make().iter();
    for hop in [37, 3, 2, 1, 45, 3, 1] {
        for _ in 0..hop {
            match epoch.next().await {
                Some(x) => seen.push(x.unwrap()),
                None => break,
            }
            // Away long enough that the producer fills the buffer meanwhile.
            tokio::time::sleep(std::time::Duration::from_micros(400)).await;
        }
        let bytes = epoch.checkpoint().unwrap().to_bytes();
        drop(epoch);
        epoch = make()
            .iter_from(&Checkpoint::from_bytes(&bytes).unwrap())
            .unwrap();
    }
    while let Some(x) = epoch.next().await {
        seen.push(x.unwrap());
    }
    assert_eq!(seen, full);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remaining_operations_checkpoint_again_right_after_a_restore() {
    use streamload::BucketOptions;
    let hops = [1, 0, 1, 2, 0, 3, 5, 1, 0, 8];
    assert_hops(
        || {
            Dataset::range(0, 200)
                .map(|n| vec![n; (n % 9) as usize + 1])
                .bucket_by_sequence_length(
                    |s| s.len(),
                    vec![4],
                    vec![3, 5],
                    BucketOptions::default(),
                )
                .batch(2)
        },
        &hops,
    )
    .await;
    assert_hops(
        || {
            Dataset::range(0, 200)
                .group_by_window(|x| x % 4, |_, w| w.batch(2), 3)
                .batch(3)
        },
        &hops,
    )
    .await;
    assert_hops(
        || {
            Dataset::zip(
                Dataset::range(0, 100),
                Dataset::range(7, 200).batch(2).unbatch(),
            )
            .batch(3)
            .prefetch(2)
        },
        &hops,
    )
    .await;
    assert_hops(
        || {
            Dataset::range(0, 60)
                .shuffle(9, Some(1))
                .cache()
                .repeat_n(3)
                .batch(4)
        },
        &[20, 1, 0, 2, 0, 3],
    )
    .await;
    assert_hops(
        || {
            Dataset::range(0, 100)
                .window(4, 2, 1, false)
                .map_async(3, |w| async move { w })
                .unique()
                .batch(2)
        },
        &hops,
    )
    .await;
    assert_hops(
        || {
            Dataset::range(0, 300)
                .batch(7)
                .rebatch_sizes(&[2, 5], false)
                .concatenate(&Dataset::range(0, 10).batch(3))
                .padded_batch(2, None, None, false)
        },
        &hops,
    )
    .await;
}

#[tokio::test]
async fn batches_are_placed_under_repeat_and_enumerate() {
    // A batch's position is a group; repeat and enumerate key it (they used to add a word).
    let make = || {
        Dataset::range(0, 40)
            .batch(3)
            .repeat_n(2)
            .enumerate(0)
            .shuffle(5, Some(1))
    };
    assert_exact(make, [0, 1, 2, 6, 14, 25, 27, 28]).await;
}

/// Writes `bytes` to `dir/name`, gzip-compressed when the name ends in `.gz`.
fn write_file(dir: &std::path::Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    use std::io::Write;
    let path = dir.join(name);
    if name.ends_with(".gz") {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
    } else {
        std::fs::write(&path, bytes).unwrap();
    }
    path
}

/// `n` text files of `per` lines each (varied lengths, some with `\r\n`, the last file
/// without a final newline), plain or gzip.
fn text_files(dir: &std::path::Path, n: usize, per: usize, gzip: bool) -> Vec<std::path::PathBuf> {
    (0..n)
        .map(|f| {
            let mut text = String::new();
            for l in 0..per {
                let end = if l % 7 == 3 { "\r\n" } else { "\n" };
                text.push_str(&format!("{f}:{l}:{}{end}", "y".repeat((l * 13) % 150)));
            }
            if f == n - 1 {
                text.pop();
            }
            let name = format!("lines-{f}.txt{}", if gzip { ".gz" } else { "" });
            write_file(dir, &name, text.as_bytes())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_lines_resume_at_their_offsets() {
    use streamload::format::{Compression, TextLineDataset};
    let dir = tempfile::tempdir().unwrap();
    for gzip in [false, true] {
        // More lines than a reader task's chunk (4,096), so chunks span files.
        let files = text_files(dir.path(), 3, 3000, gzip);
        let f = files.clone();
        let make = move || {
            TextLineDataset::new(f.clone())
                .compression(Compression::Auto)
                .buffer_size(1000)
                .build()
        };
        assert_exact(make, [0, 1, 2999, 3000, 3001, 4096, 4097, 8999, 9000]).await;
        let f = files.clone();
        let make = move || {
            TextLineDataset::new(f.clone())
                .compression(Compression::Auto)
                .buffer_size(700)
                .build()
                .shuffle(200, Some(3))
                .batch(10)
        };
        let size = assert_exact(make, [0, 1, 20, 299, 300, 410, 899, 900]).await;
        assert!(size < 200 * 8 + 300, "checkpoint of {size} bytes");
        let f = files.clone();
        let make = move || {
            TextLineDataset::new(f.clone())
                .compression(Compression::Auto)
                .num_parallel_reads(2)
                .buffer_size(900)
                .build()
                .shuffle(100, Some(5))
                .prefetch(3)
        };
        assert_exact(make, [0, 1, 100, 2999, 6000, 9000]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_rows_resume_after_their_header() {
    use streamload::format::{Column, Compression, CsvDataset, Field};
    let dir = tempfile::tempdir().unwrap();
    for gzip in [false, true] {
        let files: Vec<_> = (0..3)
            .map(|f| {
                let mut text = String::from("id,name,score\n");
                for r in 0..400 {
                    // Quoted fields with delimiters and line breaks, `\r\n` and `\r` endings.
                    let name = match r % 5 {
                        0 => format!("\"n{r}, with a comma\""),
                        1 => format!("\"two\nlines {r}\""),
                        _ => format!("n{r}{}", "z".repeat(r % 40)),
                    };
                    let end = ["\n", "\r\n", "\r"][r % 3];
                    text.push_str(&format!("{},{name},{}{end}", f * 1000 + r, r % 7));
                }
                let name = format!("rows-{f}.csv{}", if gzip { ".gz" } else { "" });
                write_file(dir.path(), &name, text.as_bytes())
            })
            .collect();
        let columns = || {
            [
                Column::int64(),
                Column::string(),
                Column::with_default(Field::Int32(-1)),
            ]
        };
        let f = files.clone();
        let make = move || {
            CsvDataset::new(f.clone(), columns())
                .header(true)
                .compression(Compression::Auto)
                .buffer_size(500)
                .build()
        };
        assert_exact(make, [0, 1, 2, 399, 400, 401, 777, 1199, 1200]).await;
        let f = files.clone();
        let make = move || {
            CsvDataset::new(f.clone(), columns())
                .header(true)
                .compression(Compression::Auto)
                .buffer_size(300)
                .build()
                .shuffle(150, Some(11))
                .batch(4)
        };
        assert_exact(make, [0, 1, 37, 38, 120, 299, 300]).await;
        let f = files.clone();
        let make = move || {
            CsvDataset::new(f.clone(), columns())
                .header(true)
                .compression(Compression::Auto)
                .num_parallel_reads(3)
                .build()
                .shuffle(60, Some(2))
        };
        assert_exact(make, [0, 1, 60, 500, 1199, 1200]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_length_records_resume_between_header_and_footer() {
    use streamload::format::{Compression, FixedLengthRecordDataset};
    let dir = tempfile::tempdir().unwrap();
    for gzip in [false, true] {
        let files: Vec<_> = (0..3u8)
            .map(|f| {
                let mut bytes = b"HEADER!".to_vec();
                for r in 0..300u16 {
                    let [a, b] = r.to_le_bytes();
                    bytes.extend_from_slice(&[f, a, b, 0xAB, f ^ a]);
                }
                bytes.extend_from_slice(b"FOOT");
                let name = format!("fixed-{f}.bin{}", if gzip { ".gz" } else { "" });
                write_file(dir.path(), &name, &bytes)
            })
            .collect();
        let f = files.clone();
        let make = move || {
            FixedLengthRecordDataset::new(f.clone(), 5)
                .header_bytes(7)
                .footer_bytes(4)
                .compression(Compression::Auto)
                .buffer_size(256)
                .build()
        };
        assert_exact(make, [0, 1, 299, 300, 301, 600, 899, 900]).await;
        let f = files.clone();
        let make = move || {
            FixedLengthRecordDataset::new(f.clone(), 5)
                .header_bytes(7)
                .footer_bytes(4)
                .compression(Compression::Auto)
                .buffer_size(100)
                .build()
                .shuffle(80, Some(4))
                .batch(6)
                .prefetch(2)
        };
        assert_exact(make, [0, 1, 13, 14, 100, 149, 150]).await;
        let f = files.clone();
        let make = move || {
            FixedLengthRecordDataset::new(f.clone(), 5)
                .header_bytes(7)
                .footer_bytes(4)
                .compression(Compression::Auto)
                .num_parallel_reads(2)
                .build()
                .shuffle(50, Some(9))
        };
        assert_exact(make, [0, 1, 50, 451, 899, 900]).await;
    }
}

/// Takes `k` elements of `ds`, checkpoints, calls `change`, and returns the resumed epoch's
/// first element's error.
async fn resume_after<T: Send + Debug + 'static>(
    ds: impl Fn() -> Dataset<T>,
    k: usize,
    change: impl FnOnce(),
) -> anyhow::Error {
    let mut epoch = ds().iter();
    for _ in 0..k {
        epoch.next().await.expect("an element").expect("no error");
    }
    let cp = Checkpoint::from_bytes(&epoch.checkpoint().unwrap().to_bytes()).unwrap();
    drop(epoch);
    change();
    let mut resumed = ds().iter_from(&cp).expect("iter_from");
    match resumed.next().await {
        Some(Err(e)) => e,
        other => panic!("resumed over a changed file: {other:?}"),
    }
}

/// Whether `e` is a checkpoint error naming `file`.
fn names_changed_file(e: &anyhow::Error, file: &str) -> bool {
    matches!(
        e.downcast_ref::<streamload::Error>(),
        Some(streamload::Error::Checkpoint(message)) if message.contains(file) && message.contains("changed")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_changed_since_the_checkpoint_is_refused_by_name() {
    use streamload::format::{TFRecordDataset, TextLineDataset};
    let dir = tempfile::tempdir().unwrap();
    let files = tfrecord_files(dir.path(), 3, 100, false).await;
    let f = files.clone();
    let ds = move || TFRecordDataset::new(f.clone()).build().batch(4);
    // Rewritten with other records (another size).
    let changed = files[1].clone();
    let e = resume_after(&ds, 30, || {
        let other = std::fs::read(&files[0]).unwrap();
        std::fs::write(&changed, &other[..other.len() / 2]).unwrap();
    })
    .await;
    assert!(
        names_changed_file(&e, &changed.display().to_string()),
        "{e:#}"
    );
    // Rewritten with as many bytes, other ones: its modification time tells.
    let files = tfrecord_files(dir.path(), 3, 100, false).await;
    let e = resume_after(&ds, 40, || {
        let mut bytes = std::fs::read(&changed).unwrap();
        bytes.reverse();
        std::fs::write(&changed, &bytes).unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        let file = std::fs::File::options().write(true).open(&changed).unwrap();
        file.set_modified(later).unwrap();
    })
    .await;
    assert!(
        names_changed_file(&e, &changed.display().to_string()),
        "{e:#}"
    );
    // Text read in order by its reader task: the same.
    let texts = text_files(dir.path(), 2, 500, false);
    let t = texts.clone();
    let ds = move || TextLineDataset::new(t.clone()).build();
    let e = resume_after(&ds, 700, || {
        std::fs::write(&texts[1], "another\ntext\n").unwrap();
    })
    .await;
    assert!(
        names_changed_file(&e, &texts[1].display().to_string()),
        "{e:#}"
    );
    drop(files);
}

/// `n` TFRecord objects of `per` records each in `bucket/shards/` of `server`, as
/// [`tfrecord_files`] writes them.
async fn tfrecord_objects(
    server: &s3::MemoryS3,
    bucket: &str,
    n: usize,
    per: usize,
) -> Vec<String> {
    use streamload::format::{Compression, TFRecordWriter};
    let mut urls = Vec::new();
    for f in 0..n {
        let mut w = TFRecordWriter::new(Vec::new(), Compression::None);
        for r in 0..per {
            let payload = format!("{f}-{r}-{}", "x".repeat((r * 37) % 300));
            w.write(payload.as_bytes()).await.unwrap();
        }
        let key = format!("shards/part-{f}.tfrecord");
        server.insert(bucket, &key, w.finish().await.unwrap().into());
        urls.push(format!("s3://{bucket}/{key}"));
    }
    urls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_storage_readers_resume_with_ranged_gets_from_their_offsets() {
    use std::sync::atomic::Ordering::SeqCst;
    use streamload::format::TFRecordDataset;
    use streamload::storage::{self, ReadOptions};
    let server = s3::MemoryS3::default();
    let urls = tfrecord_objects(&server, "ckpt", 4, 150).await;
    let addr = s3::memory_s3_server(server.clone(), "AKIDCKPT", "ckpt-secret-key").await;
    let store = s3::s3_store(addr, "ckpt", "AKIDCKPT", "ckpt-secret-key");
    let options = ReadOptions::default().block_size(1000).read_ahead(2);
    storage::register_with("s3://ckpt", store, options).expect("register");
    // W3's shape over s3:// URLs: parallel reads, a shuffle, a parallel map, batches.
    let u = urls.clone();
    let make = move || {
        TFRecordDataset::new(u.clone())
            .num_parallel_reads(2)
            .build()
            .shuffle(64, Some(5))
            .map_parallel(2, |r| r.len())
            .batch(8)
            .prefetch(2)
    };
    assert_exact(make, [0, 1, 7, 8, 40, 74, 75]).await;
    let u = urls.clone();
    let make = move || TFRecordDataset::new(u.clone()).build();
    assert_exact(make, [0, 1, 149, 150, 420, 599, 600]).await;

    // A reader restored near the end of an object asks for the blocks from its offset on,
    // not for the whole object again.
    let one = vec![urls[0].clone()];
    let ds = move || TFRecordDataset::new(one.clone()).build();
    let mut epoch = ds().iter();
    for _ in 0..140 {
        epoch.next().await.unwrap().unwrap();
    }
    let cp = epoch.checkpoint().unwrap();
    drop(epoch);
    server.gets.store(0, SeqCst);
    let rest = ds().iter_from(&cp).unwrap().count().await;
    assert_eq!(rest, 10);
    let resumed_gets = server.gets.load(SeqCst);
    server.gets.store(0, SeqCst);
    assert_eq!(ds().count().await.unwrap(), 150);
    let whole_gets = server.gets.load(SeqCst);
    assert!(
        resumed_gets * 5 < whole_gets,
        "{resumed_gets} GETs to resume, {whole_gets} for the whole object"
    );

    // An object replaced since the checkpoint (another ETag) is refused by name.
    let u = urls.clone();
    let ds = move || TFRecordDataset::new(u.clone()).build().batch(10);
    let e = resume_after(&ds, 20, || {
        server.insert(
            "ckpt",
            "shards/part-1.tfrecord",
            bytes::Bytes::from("other"),
        );
    })
    .await;
    assert!(names_changed_file(&e, &urls[1]), "{e:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_files_resumes_its_epoch_order_and_the_readers_it_feeds() {
    use streamload::format::TFRecordDataset;
    let dir = tempfile::tempdir().unwrap();
    tfrecord_files(dir.path(), 5, 80, false).await;
    let pattern = format!("{}/part-*.tfrecord", dir.path().display());
    for seed in [None, Some(7)] {
        let p = pattern.clone();
        // The documented pattern: list, read files in parallel, shuffle, batch.
        let make = move || {
            Dataset::list_files(&p, seed)
                .parallel_interleave(2, 1, 2, |f| TFRecordDataset::new([f]).build())
                .shuffle(50, Some(3))
                .batch(6)
        };
        assert_exact(make, [0, 1, 8, 9, 30, 66, 67]).await;
        let p = pattern.clone();
        let make = move || {
            Dataset::list_files(&p, seed).interleave(3, 4, |f| TFRecordDataset::new([f]).build())
        };
        assert_exact(make, [0, 1, 4, 79, 80, 81, 250, 399, 400]).await;
    }
    // Reshuffled each epoch, and a later epoch resumes with its own order.
    let p = pattern.clone();
    let ds = Dataset::list_files(&p, Some(7))
        .parallel_interleave(2, 1, 2, |f| TFRecordDataset::new([f]).build())
        .shuffle(50, Some(3))
        .batch(6);
    let first = ds.collect().await.unwrap();
    let mut epoch = ds.iter(); // epoch 1
    let mut seen = Vec::new();
    for _ in 0..20 {
        seen.push(epoch.next().await.unwrap().unwrap());
    }
    let cp = Checkpoint::from_bytes(&epoch.checkpoint().unwrap().to_bytes()).unwrap();
    while let Some(b) = epoch.next().await {
        seen.push(b.unwrap());
    }
    assert_ne!(seen, first, "another order in epoch 1");
    let mut resumed = ds.iter_from(&cp).unwrap();
    let mut again = seen[..20].to_vec();
    while let Some(b) = resumed.next().await {
        again.push(b.unwrap());
    }
    assert_eq!(again, seen);
    // A file added since the checkpoint: the listing is refused.
    let ds =
        || Dataset::list_files(&p, Some(7)).interleave(2, 1, |f| TFRecordDataset::new([f]).build());
    let e = resume_after(ds, 10, || {
        std::fs::copy(
            dir.path().join("part-0.tfrecord"),
            dir.path().join("part-9.tfrecord"),
        )
        .unwrap();
    })
    .await;
    assert!(
        e.to_string().contains("changed since the checkpoint") && e.to_string().contains(&p),
        "{e:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generators_made_from_a_position_resume_there() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    // A generator that can begin anywhere: a seeded walk that jumps to element `start`.
    let value = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    let make = move || Dataset::from_generator_at(8, move |start| (start..700).map(value));
    assert_exact(make, [0, 1, 2, 7, 8, 9, 350, 699, 700]).await;
    let make = move || {
        Dataset::from_generator_at(8, move |start| (start..700).map(value))
            .shuffle(64, Some(2))
            .map_parallel(2, |x| x + 1)
            .batch(5)
            .prefetch(2)
    };
    let size = assert_exact(make, [0, 1, 12, 13, 70, 139, 140]).await;
    assert!(
        size < 16 * (64 + 5 + 10 + 512) + 1024,
        "checkpoint of {size} bytes"
    );
    // Errors are elements with positions too.
    let make = move || {
        Dataset::try_from_generator_at(4, move |start| {
            (start..300).map(move |i| {
                if i % 50 == 7 {
                    Err(anyhow::anyhow!("bad {i}"))
                } else {
                    Ok(value(i))
                }
            })
        })
        .shuffle(20, Some(5))
    };
    let errors = assert_exact_with_errors(make, [0, 1, 7, 8, 19, 20, 150, 299, 300]).await;
    assert_eq!(errors, 6);
    // Errors passed on by an unbatch and a flat_map in an element's place, and their rows
    // and inner elements held by a shuffle by position (read again after a restore).
    let rows = move || {
        Dataset::try_from_generator_at(4, move |start| {
            (start..120).map(move |i| {
                if i % 25 == 7 {
                    Err(anyhow::anyhow!("bad {i}"))
                } else {
                    Ok((0..i % 4).map(|j| value(i) + j).collect::<Vec<u64>>())
                }
            })
        })
        // Not small: the shuffles below hold their elements by position.
        .shuffle(6, Some(1))
    };
    let unbatched = move || rows().unbatch().shuffle(15, Some(3));
    let flat = move || rows().flat_map(Dataset::from_vec).shuffle(15, Some(3));
    let points = [0, 1, 9, 10, 60, 150, 176, 177];
    assert_eq!(assert_exact_with_errors(unbatched, points).await, 5);
    assert_eq!(assert_exact_with_errors(flat, points).await, 5);
    // The shuffle's buffer is made again in a few passes, not one generator per element.
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let ds = Dataset::from_generator_at(8, move |start| {
        c.fetch_add(1, SeqCst);
        (start..1000).map(value)
    })
    .shuffle(100, Some(9));
    let mut epoch = ds.iter();
    for _ in 0..400 {
        epoch.next().await.unwrap().unwrap();
    }
    let cp = epoch.checkpoint().unwrap();
    let mut rest = Vec::new();
    while let Some(x) = epoch.next().await {
        rest.push(x.unwrap());
    }
    calls.store(0, SeqCst);
    let mut resumed = ds.iter_from(&cp).unwrap();
    let mut again = Vec::new();
    while let Some(x) = resumed.next().await {
        again.push(x.unwrap());
    }
    assert_eq!(again, rest);
    let calls = calls.load(SeqCst);
    assert!((2..=10).contains(&calls), "{calls} calls of the generator");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distributed_shards_resume_with_their_padding_and_rotation() {
    use streamload::distribute::{Distribute, Remainder, ShardPolicy};
    let dir = tempfile::tempdir().unwrap();
    let files = tfrecord_files(dir.path(), 5, 7, false).await;
    let source = || streamload::format::TFRecordDataset::new(&files);
    for (policy, rank) in [(ShardPolicy::File, 1), (ShardPolicy::Element, 2)] {
        let dist = Distribute::new(rank, 3)
            .policy(policy)
            .remainder(Remainder::Pad)
            .rotate(3);
        let plan = dist.plan(source()).await.unwrap();
        // By position: a shuffle holds the shard's elements (padding too), replayed on restore.
        let make = || {
            plan.dataset()
                .map(|d| (d.item, d.padded, d.file, d.record))
                .shuffle(6, Some(9))
                .batch(4)
        };
        assert_exact(make, [0, 1, 2, 3, 5]).await;
        // Through `assert_cardinality` and the padding passes, in order.
        let make = || plan.dataset().map(|d| (d.item, d.padded));
        assert_exact(make, spread(plan.elements_per_rank() as usize)).await;
    }
    let make = || {
        Dataset::range(0, 20)
            .filter(|x| x % 3 != 0)
            .assert_cardinality(13)
    };
    assert_exact(make, [0, 1, 6, 12, 13]).await;
}

/// ImageNet-style training input (W5b's shape): shuffled JPEG bytes, the random-resized-crop
/// transform drawn from `try_random_map`'s per-element generator, batches collated into
/// `Array4`: a resumed epoch yields the same pixels, crops and flips included.
#[cfg(feature = "image")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_resized_crop_batches_resume_with_the_same_crops() {
    use ndarray::{Array1, Array4};
    use streamload::image::{Layout, RandomResizedCrop};
    let jpegs: Vec<(Vec<u8>, i64)> = (0..24)
        .map(|i| {
            (
                streamload::image::__doc_jpeg(40 + i as u32 * 3, 30 + i as u32),
                i,
            )
        })
        .collect();
    let make = move || -> Dataset<(Array4<f32>, Array1<i64>)> {
        let mut train = RandomResizedCrop::new(12, 16);
        train.layout = Layout::Chw;
        Dataset::from_vec(jpegs.clone())
            .shuffle(8, Some(3))
            .try_random_map(2, Some(9), move |(bytes, label), rng| {
                Ok((train.apply(&bytes, rng)?, label))
            })
            .batch(5)
            .collate()
    };
    assert_exact(make, [0, 1, 2, 3, 4, 5]).await;
}

/// `files` with an index beside each (`<file>.idx`), opened as `IndexedTFRecords`.
async fn indexed_files(files: &[std::path::PathBuf]) -> streamload::format::IndexedTFRecords {
    use streamload::format::{IndexedTFRecords, TFRecordIndex};
    for f in files {
        let mut idx = f.clone().into_os_string();
        idx.push(".idx");
        TFRecordIndex::build(f)
            .await
            .unwrap()
            .write(idx)
            .await
            .unwrap();
    }
    IndexedTFRecords::open(files).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_tfrecords_resume_at_their_place_in_the_order() {
    let dir = tempfile::tempdir().unwrap();
    let files = tfrecord_files(dir.path(), 3, 200, false).await;
    let indexed = indexed_files(&files).await;
    // In order: windows of 256 records, across files.
    let i = indexed.clone();
    let make = move || i.records();
    assert_exact(make, [0, 1, 199, 200, 255, 256, 257, 511, 512, 599, 600]).await;
    // Shuffled across files, and a shard of that, two epochs through `repeat`.
    let i = indexed.clone();
    let make = move || i.clone().shuffle_records(4).records();
    assert_exact(make, [0, 1, 2, 255, 256, 300, 599, 600]).await;
    let i = indexed.clone();
    let make = move || {
        i.clone()
            .shard(3, 1)
            .shuffle_records(4)
            .records()
            .repeat_n(2)
    };
    assert_exact(make, [0, 1, 199, 200, 201, 350, 400]).await;
    // Held by position in a shuffle buffer (replayed by record number), then batched.
    let i = indexed.clone();
    let make = move || {
        i.clone()
            .shuffle_records(8)
            .records()
            .shuffle(50, Some(2))
            .map_parallel(2, |r| r.len())
            .batch(7)
    };
    assert_exact(make, [0, 1, 7, 8, 40, 85, 86]).await;
    let i = indexed.clone();
    let make = move || i.clone().shuffle_records(8).records().shuffle(50, Some(2));
    let size = assert_exact(make, [0, 1, 50, 300]).await;
    // Record numbers (a few bytes each), not records.
    assert!(size < 50 * 4 + 200, "checkpoint of {size} bytes");
    // A checkpoint of another shuffle seed or shard is another recipe's.
    let mut epoch = indexed.clone().shuffle_records(1).records().iter();
    epoch.next().await.unwrap().unwrap();
    let cp = epoch.checkpoint().unwrap();
    let e = indexed
        .clone()
        .shuffle_records(2)
        .records()
        .iter_from(&cp)
        .unwrap_err();
    assert!(e.to_string().contains("another recipe"), "{e:#}");
}

/// A file rewritten under an unchanged index (same size, same record lengths) reads as
/// damage; a resume over it is refused by name instead. A shard not reading it resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_tfrecords_refuse_a_resume_over_a_changed_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = tfrecord_files(dir.path(), 3, 50, false).await;
    let indexed = indexed_files(&files).await;
    let checkpoint_after = |ds: Dataset<bytes::Bytes>, k: usize| async move {
        let mut epoch = ds.iter();
        for _ in 0..k {
            epoch.next().await.unwrap().unwrap();
        }
        Checkpoint::from_bytes(&epoch.checkpoint().unwrap().to_bytes()).unwrap()
    };
    let whole = checkpoint_after(indexed.clone().shuffle_records(5).records(), 10).await;
    let first_shard = checkpoint_after(indexed.clone().shard(3, 0).records(), 10).await;
    // A payload byte of file 1 flipped, and its modification time set apart.
    let mut bytes = std::fs::read(&files[1]).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&files[1], &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&files[1])
        .unwrap()
        .set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000))
        .unwrap();
    let reopened = streamload::format::IndexedTFRecords::open(&files)
        .await
        .unwrap();
    let e = reopened
        .clone()
        .shuffle_records(5)
        .records()
        .iter_from(&whole)
        .unwrap()
        .next()
        .await
        .unwrap()
        .unwrap_err();
    assert!(names_changed_file(&e, "part-1.tfrecord"), "{e:#}");
    assert!(e.to_string().contains("modification time or ETag"), "{e:#}");
    // Shard 0 holds file 0's records only.
    let rest = reopened
        .shard(3, 0)
        .records()
        .iter_from(&first_shard)
        .unwrap()
        .collect::<Vec<_>>()
        .await;
    assert_eq!(rest.len(), 40);
    assert!(rest.iter().all(|r| r.is_ok()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_tfrecords_over_object_storage_resume() {
    use streamload::format::{IndexedTFRecords, TFRecordIndex};
    let server = s3::MemoryS3::default();
    let urls = tfrecord_objects(&server, "ckptidx", 3, 100).await;
    let addr = s3::memory_s3_server(server.clone(), "AKIDCKPTIDX", "ckpt-idx-secret").await;
    let store = s3::s3_store(addr, "ckptidx", "AKIDCKPTIDX", "ckpt-idx-secret");
    streamload::storage::register("s3://ckptidx", store).expect("register");
    // Indexes built over the URLs, stored beside the objects.
    for url in &urls {
        let index = TFRecordIndex::build(url.as_str()).await.unwrap();
        let key = url.trim_start_matches("s3://ckptidx/");
        server.insert("ckptidx", &format!("{key}.idx"), index.to_string().into());
    }
    let indexed = IndexedTFRecords::open(&urls).await.unwrap();
    assert_eq!(indexed.num_records(), 300);
    let i = indexed.clone();
    let make = move || {
        i.clone()
            .shuffle_records(3)
            .records()
            .shuffle(40, Some(1))
            .batch(5)
    };
    assert_exact(make, [0, 1, 8, 9, 30, 59, 60]).await;
    // An object rewritten with the same size (so the same index), another ETag: refused.
    let mut epoch = indexed.records().iter();
    for _ in 0..5 {
        epoch.next().await.unwrap().unwrap();
    }
    let cp = Checkpoint::from_bytes(&epoch.checkpoint().unwrap().to_bytes()).unwrap();
    drop(epoch);
    let key = "shards/part-2.tfrecord";
    let old = streamload::storage::read_range(urls[2].as_str(), 0..1 << 20)
        .await
        .unwrap();
    let mut changed = old.to_vec();
    let last = changed.len() - 10;
    changed[last] ^= 1;
    server.insert("ckptidx", key, changed.into());
    let reopened = IndexedTFRecords::open(&urls).await.unwrap();
    let e = reopened
        .records()
        .iter_from(&cp)
        .unwrap()
        .next()
        .await
        .unwrap()
        .unwrap_err();
    assert!(names_changed_file(&e, "part-2.tfrecord"), "{e:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_resume_at_their_lines() {
    use streamload::format::{Compression, JsonLinesDataset};
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (f, gzip) in [(0, false), (1, true), (2, false)] {
        let mut text = String::new();
        for l in 0..300 {
            // Blank lines now and then, which are skipped.
            if l % 17 == 0 {
                text.push_str("  \n");
            }
            text.push_str(&format!(
                "{{\"file\": {f}, \"line\": {l}, \"pad\": \"{}\"}}\n",
                "y".repeat(l % 50)
            ));
        }
        let path = dir
            .path()
            .join(format!("part-{f}.jsonl{}", if gzip { ".gz" } else { "" }));
        let bytes = if gzip {
            use std::io::Write;
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(text.as_bytes()).unwrap();
            gz.finish().unwrap()
        } else {
            text.into_bytes()
        };
        std::fs::write(&path, bytes).unwrap();
        files.push(path);
    }
    let f = files.clone();
    let make = move || {
        JsonLinesDataset::new(f.clone())
            .compression(Compression::Auto)
            .buffer_size(1000)
            .build()
    };
    assert_exact(make, [0, 1, 299, 300, 301, 450, 899, 900]).await;
    let f = files.clone();
    let make = move || {
        JsonLinesDataset::new(f.clone())
            .compression(Compression::Auto)
            .num_parallel_reads(2)
            .build()
            .shuffle(64, Some(3))
            .map(|v| v["line"].as_u64().unwrap_or(0))
            .batch(10)
    };
    assert_exact(make, [0, 1, 9, 10, 45, 89, 90]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_while_a_damaged_file_is_skipped_resumes_identically() {
    use streamload::format::TFRecordDataset;
    let dir = tempfile::tempdir().unwrap();
    let files = tfrecord_files(dir.path(), 4, 120, false).await;
    // File 1: one payload byte flipped about halfway (a data CRC mismatch); file 2 cut short
    // inside a record (truncated). `ignore_errors` drops the rest of each, as TensorFlow does.
    let mut bytes = std::fs::read(&files[1]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&files[1], &bytes).unwrap();
    let bytes = std::fs::read(&files[2]).unwrap();
    std::fs::write(&files[2], &bytes[..bytes.len() * 2 / 3 + 5]).unwrap();

    let f = files.clone();
    let sequential = move || TFRecordDataset::new(f.clone()).build().ignore_errors();
    let full = sequential().collect().await.unwrap();
    assert!(
        full.len() > 240 && full.len() < 400,
        "{} records",
        full.len()
    );
    // Points before, at and after each damaged file's error.
    let first_bad = full
        .iter()
        .position(|r| r.starts_with(b"2-"))
        .expect("file 2's records");
    let second_bad = full
        .iter()
        .position(|r| r.starts_with(b"3-"))
        .expect("file 3's records");
    assert_exact(
        sequential,
        [
            0,
            50,
            first_bad - 1,
            first_bad,
            first_bad + 1,
            second_bad - 1,
            second_bad,
            second_bad + 1,
            full.len(),
        ],
    )
    .await;

    // W3's shape around the damaged files: parallel reads, shuffle, parallel map, batches.
    let f = files.clone();
    let make = move || {
        TFRecordDataset::new(f.clone())
            .num_parallel_reads(3)
            .buffer_size(700)
            .build()
            .ignore_errors()
            .shuffle(40, Some(9))
            .map_parallel(2, |r| r.to_vec())
            .batch(8)
            .prefetch(2)
    };
    assert_exact(make, [0, 1, 5, 12, 20, 30, 39, 40]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zip_restored_with_an_element_taken_for_its_next_step_places_it() {
    // The slow side keeps the zip waiting with the fast side's element taken; a prefetch
    // polls ahead, so checkpoints find the zip so; a shuffle after it holds the steps by
    // position. Each resume is checkpointed again right away.
    let make = || {
        let fast = Dataset::range(0, 30).parallel_interleave(2, 2, 2, |x| {
            Dataset::range(0, x % 3 + 1).map(move |y| x * 10 + y)
        });
        let slow = Dataset::range(100, 160)
            .shuffle(7, Some(3))
            .map_async(1, |x| async move {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                x
            });
        Dataset::zip(fast, slow).prefetch(3).shuffle(4, Some(2))
    };
    for _ in 0..3 {
        assert_hops(make, &[3, 0, 1, 0, 5, 1, 1, 0, 7]).await;
    }
}

/// Parquet files `part-N.parquet` of `rows` rows each (`id`, unique across files, and a
/// fixed-size list), in row groups of `group` rows.
#[cfg(feature = "parquet")]
fn parquet_files(
    dir: &std::path::Path,
    n: usize,
    rows: i64,
    group: usize,
) -> Vec<std::path::PathBuf> {
    use std::sync::Arc;
    use streamload::format::parquet::RecordBatch;
    use streamload::format::parquet::arrow_array::types::Float32Type;
    use streamload::format::parquet::arrow_array::{ArrayRef, FixedSizeListArray, Int64Array};
    (0..n)
        .map(|f| {
            let base = f as i64 * 10_000;
            let id: ArrayRef = Arc::new(Int64Array::from_iter_values(base..base + rows));
            let w: ArrayRef = Arc::new(
                FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
                    (base..base + rows).map(|i| Some([Some(i as f32); 3])),
                    3,
                ),
            );
            let batch = RecordBatch::try_from_iter([("id", id), ("w", w)]).unwrap();
            let props = parquet::file::properties::WriterProperties::builder()
                .set_max_row_group_row_count(Some(group))
                .build();
            let path = dir.join(format!("part-{f}.parquet"));
            let file = std::fs::File::create(&path).unwrap();
            let mut writer =
                parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
            path
        })
        .collect()
}

#[cfg(feature = "parquet")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_resumes_at_its_row_group_and_row() {
    use streamload::format::parquet::ParquetDataset;
    let dir = tempfile::tempdir().unwrap();
    // 3 files of 3 row groups (100, 100, 50 rows): batches of 40, 40, 20 | 40, 40, 20 | 40, 10.
    let files = parquet_files(dir.path(), 3, 250, 100);
    let f = files.clone();
    let make = move || ParquetDataset::new(f.clone()).batch_size(40).build();
    let n = make().collect().await.unwrap().len();
    assert_eq!(n, 3 * 8);
    let size = assert_exact(make, [0, 1, 2, 3, 4, 5, 10, 17, 22, 23, 24]).await;
    assert!(size < 100, "checkpoint of {size} bytes");
    // Sharded by row group, one decode at a time, projected.
    let f = files.clone();
    let make = move || {
        ParquetDataset::new(f.clone())
            .columns(["w"])
            .batch_size(30)
            .shard(2, 1)
            .num_parallel_reads(1)
            .build()
    };
    assert_exact(make, 0..12).await;
    // Batches held by position in a shuffle buffer are read again (replay), through a map and
    // a prefetch.
    let f = files.clone();
    let make = move || {
        ParquetDataset::new(f.clone())
            .batch_size(25)
            .build()
            .shuffle(6, Some(9))
            .map(|b| b.num_rows())
            .prefetch(2)
    };
    assert_exact(make, [0, 1, 2, 5, 6, 7, 15, 29, 30]).await;
}

#[cfg(feature = "parquet")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_row_group_shards_resume_inside_a_row_group() {
    use streamload::distribute::{Distribute, Remainder, ShardPolicy};
    use streamload::format::parquet::ParquetDataset;
    let dir = tempfile::tempdir().unwrap();
    // 2 files of 3 row groups (100, 100, 50 rows): batches of 30 are 4, 4, 2 per file.
    let files = parquet_files(dir.path(), 2, 250, 100);
    for rank in 0..3 {
        let source = ParquetDataset::new(files.clone())
            .batch_size(30)
            .shard_source()
            .await
            .unwrap();
        let plan = Distribute::new(rank, 3)
            .policy(ShardPolicy::RowGroup)
            .remainder(Remainder::Pad)
            .plan(source)
            .await
            .unwrap();
        let n = plan.elements_per_rank() as usize;
        assert_eq!(n, 8, "rank {rank}");
        let p = plan.clone();
        let make = move || p.dataset().map(|d| (d.item, d.padded, d.file, d.record));
        assert_exact(make, 0..=n).await;
        // Held by position in a shuffle buffer: each read again from its row group.
        let p = plan.clone();
        let make = move || {
            p.dataset()
                .shuffle(3, Some(4))
                .map(|d| (d.item.num_rows(), d.padded, d.file, d.record))
                .prefetch(2)
        };
        assert_exact(make, [0, 1, 2, 3, 5, 7, 8]).await;
    }
}

#[cfg(feature = "parquet")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_files_that_changed_are_refused() {
    use futures::StreamExt;
    use streamload::format::parquet::ParquetDataset;
    let dir = tempfile::tempdir().unwrap();
    let files = parquet_files(dir.path(), 2, 200, 100);
    let make = || ParquetDataset::new(files.clone()).batch_size(50).build();
    let ds = make();
    let mut epoch = ds.iter();
    for _ in 0..3 {
        epoch.next().await.unwrap().unwrap();
    }
    let checkpoint = epoch.checkpoint().unwrap();
    drop(epoch);
    // Rewritten with other row groups.
    parquet_files(dir.path(), 2, 200, 60);
    let mut resumed = make().iter_from(&checkpoint).unwrap();
    let e = resumed.next().await.unwrap().unwrap_err();
    assert!(
        matches!(
            e.downcast_ref::<streamload::Error>(),
            Some(streamload::Error::Checkpoint(_))
        ),
        "{e:#}"
    );
    assert!(
        format!("{e:#}").contains("changed since the checkpoint"),
        "{e:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_right_after_the_error_that_ends_a_file_resumes_past_it() {
    use streamload::format::{
        Column, Compression, CsvDataset, FixedLengthRecordDataset, TFRecordDataset,
        TextLineDataset, WebDataset,
    };
    // Each reader ends a damaged file at its error. A checkpoint taken right after that error
    // was passed on resumes with the next file: read again from its last record, the file
    // would give the error a second time. (Found by a parallel read whose reader's mark fell
    // right after the error, under a shuffle: 1 run in 8 resumed in another order.)
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let records = tfrecord_files(dir.path(), 3, 20, false).await;
    let mut bytes = std::fs::read(&records[1]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&records[1], &bytes).unwrap();
    std::fs::write(path("good.txt"), "1\n2\n3\n").unwrap();
    std::fs::write(path("bad.txt.gz"), b"\x1f\x8b\x08\x00garbage").unwrap();
    // Five 4-byte records, then 2 bytes: not a whole record.
    std::fs::write(path("records.bin"), [7u8; 22]).unwrap();
    std::fs::write(path("more.bin"), [9u8; 8]).unwrap();
    let shards = webdataset_shards(dir.path(), 2, 5, false).await;
    let tar = std::fs::read(&shards[0]).unwrap();
    std::fs::write(&shards[0], &tar[..tar.len() / 2]).unwrap();

    let points = |n: usize| 0..=n;
    let f = records.clone();
    let tfrecords = move |parallel| {
        let f = f.clone();
        move || {
            TFRecordDataset::new(f.clone())
                .num_parallel_reads(parallel)
                .build()
        }
    };
    assert_eq!(assert_exact_with_errors(tfrecords(1), points(52)).await, 1);
    assert_eq!(assert_exact_with_errors(tfrecords(2), points(52)).await, 1);
    let text = [path("good.txt"), path("bad.txt.gz"), path("good.txt")];
    let t = text.clone();
    let lines = move |parallel| {
        let t = t.clone();
        move || {
            TextLineDataset::new(t.clone())
                .compression(Compression::Auto)
                .num_parallel_reads(parallel)
                .build()
        }
    };
    assert_eq!(assert_exact_with_errors(lines(1), points(7)).await, 1);
    assert_eq!(assert_exact_with_errors(lines(2), points(7)).await, 1);
    let csv = move || {
        CsvDataset::new(text.clone(), [Column::int64()])
            .compression(Compression::Auto)
            .build()
    };
    assert_eq!(assert_exact_with_errors(csv, points(7)).await, 1);
    let fixed = [path("records.bin"), path("more.bin")];
    let fixed = move || FixedLengthRecordDataset::new(fixed.clone(), 4).build();
    assert_eq!(assert_exact_with_errors(fixed, points(8)).await, 1);
    let samples = move || {
        WebDataset::new(shards.clone())
            .build()
            .map(|s| s.key().to_string())
    };
    assert!(assert_exact_with_errors(samples, points(10)).await >= 1);
}

#[cfg(feature = "parquet")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_resumes_past_a_damaged_footer_or_row_group_it_passed_on() {
    use streamload::format::parquet::ParquetDataset;
    let dir = tempfile::tempdir().unwrap();
    let mut files = parquet_files(dir.path(), 3, 250, 100);
    // A file whose footer is damaged (an error before every batch), and a row group whose
    // first page header is (an error in its place, then the next row group).
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, b"PAR1 not a parquet file at all PAR1").unwrap();
    files.insert(1, bad);
    let mut bytes = std::fs::read(&files[2]).unwrap();
    bytes[4..40].fill(0xff);
    std::fs::write(&files[2], &bytes).unwrap();
    let f = files.clone();
    let make = move || {
        ParquetDataset::new(f.clone())
            .batch_size(40)
            .build()
            .map(|b| b.num_rows())
    };
    assert_eq!(assert_exact_with_errors(make, 0..=24).await, 2);
}

#[tokio::test]
async fn a_checkpoint_after_the_error_that_ends_an_epoch_resumes_at_its_end() {
    use streamload::ErrorBudget;
    // An exhausted error budget ends the epoch with its error; so does an input shorter
    // than `assert_cardinality` says. A resume from after that error passes on nothing more
    // (it went on reading the input, or gave the error again).
    let budget = || {
        Dataset::range(0, 30)
            .try_map(|x| {
                if x == 9 {
                    Err(anyhow::anyhow!("bad {x}"))
                } else {
                    Ok(x)
                }
            })
            .ignore_errors_within(ErrorBudget::count(0))
    };
    assert_eq!(assert_exact_with_errors(budget, 0..=10).await, 1);
    let cardinality = || Dataset::range(0, 6).assert_cardinality(8);
    assert_eq!(assert_exact_with_errors(cardinality, 0..=7).await, 1);
}

/// Document `i` of `pack`'s tests: `(i * 37 + 11) % 29` tokens (some empty, some longer than
/// a sequence), each saying where it is.
fn document(i: i64) -> Vec<u32> {
    let n = (i * 37 + 11) % 29;
    (0..n as u32).map(|t| i as u32 * 1_000 + t).collect()
}

#[tokio::test]
async fn pack_resumes_exactly_in_the_middle_of_a_document() {
    for packing in [
        Packing::ConcatThenSplit,
        Packing::FirstFit { bins: 3 },
        Packing::BestFit { bins: 2 },
    ] {
        // Held by marks (a small input) and by positions (a shuffle before it).
        for shuffled in [false, true] {
            let make = move || {
                let docs = Dataset::range(0, 60).map(document);
                let docs = if shuffled {
                    docs.shuffle(7, Some(3))
                } else {
                    docs
                };
                docs.pack(8, packing)
            };
            let largest = assert_exact(make, 0..=120).await;
            assert!(
                largest < 2_000,
                "{packing:?}: a checkpoint of {largest} bytes"
            );
        }
        // Its sequences held by position downstream (a shuffle after it replays them).
        let make = move || {
            Dataset::range(0, 60)
                .map(document)
                .pack(8, packing)
                .shuffle(5, Some(9))
        };
        assert_exact(make, (0..=120).step_by(3)).await;
    }
}

#[tokio::test]
async fn a_pack_checkpoint_saves_where_it_is_not_the_tokens() {
    // Documents of 100,000 tokens in sequences of 2,048: a checkpoint in the middle of one
    // holds a position in it, not its tokens.
    for packing in [Packing::ConcatThenSplit, Packing::BestFit { bins: 4 }] {
        let make = move || {
            Dataset::range(0, 6)
                .map(|i| (0..100_000u32).map(|t| t ^ i as u32).collect::<Vec<u32>>())
                .pack(2_048, packing)
        };
        let largest = assert_exact(make, [0, 1, 30, 49, 50, 51, 200, 292]).await;
        assert!(
            largest < 1_000,
            "{packing:?}: a checkpoint of {largest} bytes"
        );
    }
}

#[tokio::test]
async fn batch_by_tokens_resumes_exactly() {
    for shuffled in [false, true] {
        let make = move || {
            let docs = Dataset::range(0, 80).map(document);
            let docs = if shuffled {
                docs.shuffle(9, Some(5))
            } else {
                docs
            };
            docs.batch_by_tokens(40, Vec::len)
        };
        assert_exact(make, 0..=60).await;
    }
    let make = || {
        Dataset::range(0, 80)
            .map(document)
            .batch_by_tokens(40, Vec::len)
            .shuffle(4, Some(2))
    };
    assert_exact(make, 0..=60).await;
}

#[tokio::test]
async fn mix_resumes_exactly() {
    let make = || {
        let m = streamload::Mixture::piecewise(vec![
            (0, vec![0.6, 0.3, 0.1]),
            (40, vec![0.1, 0.1, 0.8]),
        ]);
        Dataset::mix(
            vec![
                Dataset::range(0, 60),
                Dataset::range(100, 160).shuffle(8, Some(2)),
                Dataset::range(200, 230).batch(3).map(|b| b[0]),
            ],
            m,
            Some(11),
        )
    };
    assert_exact(make, 0..=150).await;
    // Its elements held by position downstream.
    let shuffled = move || make().shuffle(6, Some(4));
    assert_exact(shuffled, (0..=150).step_by(5)).await;
}
