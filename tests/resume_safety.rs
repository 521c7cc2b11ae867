//! Resume is never silently wrong: files changed between a checkpoint and its resume, damaged
//! records resynchronised under every buffering operation, damaged checkpoint bytes, and a
//! recipe whose parameters changed. Each is met as a user meets it: from outside the crate,
//! through the checkpoint's bytes, with files on disk.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use streamload::format::{Compression, TFRecordDataset, TFRecordWriter, TextLineDataset};
use streamload::{Checkpoint, Dataset, Error, ErrorBudget};

/// Every record's payload is this long, so a rewrite with another tag keeps the file's size.
fn payload(tag: char, r: usize) -> Vec<u8> {
    format!("{tag}-record-{r:05}").into_bytes()
}

async fn write_records(path: &Path, tag: char, n: usize) -> anyhow::Result<()> {
    let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
    for r in 0..n {
        writer.write(&payload(tag, r)).await?;
    }
    // A new file put in its place (as tools that rewrite files do): the old one stays whole
    // for whatever still maps it (a dropped epoch's tasks end a moment later).
    let new = path.with_extension("new");
    std::fs::write(&new, writer.finish().await?)?;
    std::fs::rename(&new, path)?;
    Ok(())
}

/// How a file changes between a checkpoint and its resume.
#[derive(Debug, Clone, Copy)]
enum Change {
    /// Its modification time only (`touch`).
    Touch,
    /// Three more records at its end.
    Append,
    /// Other records of the same size: the same length, other contents.
    Rewrite,
}

const CHANGES: [Change; 3] = [Change::Touch, Change::Append, Change::Rewrite];

async fn change(path: &Path, how: Change, n: usize) -> anyhow::Result<()> {
    let before = std::fs::metadata(path)?;
    match how {
        Change::Touch => {}
        Change::Append => {
            let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
            for r in n..n + 3 {
                writer.write(&payload('a', r)).await?;
            }
            use std::io::Write as _;
            let more = writer.finish().await?;
            std::fs::File::options()
                .append(true)
                .open(path)?
                .write_all(&more)?;
        }
        Change::Rewrite => write_records(path, 'b', n).await?,
    }
    // A modification time surely after the one saved (file systems with coarse clocks).
    let later = before.modified()? + Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(path)?
        .set_modified(later.max(SystemTime::now()))?;
    Ok(())
}

fn is_refusal(e: &anyhow::Error) -> bool {
    matches!(e.downcast_ref::<Error>(), Some(Error::Checkpoint(_)))
}

/// The shapes that can stand between a file reader and the consumer.
fn between(shape: usize, records: Dataset<Bytes>) -> (&'static str, Dataset<Bytes>) {
    let join = |v: Vec<Bytes>| Bytes::from(v.concat());
    match shape {
        0 => ("nothing", records),
        1 => ("prefetch(1)", records.prefetch(1)),
        2 => ("map_parallel(4)", records.map_parallel(4, |r| r)),
        3 => ("shuffle(16)", records.shuffle(16, Some(1))),
        4 => (
            "shuffle, batch, map_parallel, prefetch (W3)",
            records
                .shuffle(64, Some(3))
                .batch(8)
                .map_parallel(2, join)
                .prefetch(2),
        ),
        5 => ("batch(7)", records.batch(7).map(join)),
        6 => ("ignore_errors", records.ignore_errors()),
        7 => (
            "ignore_errors_within(count 5)",
            records.ignore_errors_within(ErrorBudget::count(5)),
        ),
        8 => (
            "map_parallel, prefetch",
            records.map_parallel(3, |r| r).prefetch(4),
        ),
        9 => (
            "shuffle, prefetch",
            records.shuffle(32, Some(5)).prefetch(3),
        ),
        10 => (
            "ignore_errors, prefetch",
            records.ignore_errors().prefetch(2),
        ),
        11 => ("window(5, 3)", records.window(5, 3, 1, false).map(join)),
        12 => (
            "map_async, shuffle, unbatch",
            records
                .map_async(2, |r| async move { r })
                .shuffle(10, Some(9))
                .batch(3)
                .unbatch(),
        ),
        13 => ("cache", records.cache()),
        _ => unreachable!(),
    }
}

const SHAPES: usize = 14;

/// A changed file is refused before any of its records reaches the consumer, whatever stands
/// between the reader and the consumer: at `iter_from`, or as an error element that ends the
/// epoch (never records of the new contents, never a short epoch without an error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_file_is_refused_whatever_stands_between() -> anyhow::Result<()> {
    const N: usize = 400;
    let dir = tempfile::tempdir()?;
    for shape in 0..SHAPES {
        for how in CHANGES {
            for files in [1, 2] {
                let paths: Vec<PathBuf> = (0..files)
                    .map(|f| dir.path().join(format!("s{shape}-{how:?}-{f}.tfrecord")))
                    .collect();
                for path in &paths {
                    write_records(path, 'a', N).await?;
                }
                let recipe = || {
                    let reader = TFRecordDataset::new(&paths);
                    let reader = if files > 1 {
                        reader.num_parallel_reads(2)
                    } else {
                        reader
                    };
                    between(shape, reader.build())
                };
                let (name, ds) = recipe();
                let mut epoch = ds.iter();
                for _ in 0..40 {
                    epoch.next().await.expect("an element")?;
                }
                let saved = epoch.checkpoint()?.to_bytes();
                drop(epoch);
                // Every file changes: each reader, and every record held by position, meets
                // a changed file.
                for path in &paths {
                    change(path, how, N).await?;
                }
                let what = format!("{name}, {how:?}, {files} file(s)");
                let resumed = recipe().1.iter_from(&Checkpoint::from_bytes(&saved)?);
                let mut epoch = match resumed {
                    Ok(epoch) => epoch,
                    Err(e) => {
                        assert!(is_refusal(&e), "{what}: {e:#}");
                        continue;
                    }
                };
                match epoch.next().await {
                    Some(Err(e)) => {
                        assert!(is_refusal(&e), "{what}: not a refusal: {e:#}");
                        assert!(
                            format!("{e:#}").contains(".tfrecord"),
                            "{what}: the refusal names no file: {e:#}"
                        );
                    }
                    Some(Ok(x)) => panic!("{what}: resumed with an element, {x:?}"),
                    None => panic!("{what}: resumed with no element and no error"),
                }
                assert!(
                    epoch.next().await.is_none(),
                    "{what}: the epoch goes on after the refusal"
                );
            }
        }
    }
    Ok(())
}

/// The same for text lines read in order by one reader, whose records come back by position
/// under a shuffle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_text_file_is_refused_under_a_shuffle() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("lines.txt");
    let text = |tag: char| -> String { (0..300).map(|i| format!("{tag}{i:05}\n")).collect() };
    std::fs::write(&path, text('a'))?;
    let recipe = || {
        TextLineDataset::new([&path])
            .build()
            .shuffle(50, Some(2))
            .prefetch(2)
    };
    let mut epoch = recipe().iter();
    for _ in 0..30 {
        epoch.next().await.expect("a line")?;
    }
    let saved = epoch.checkpoint()?.to_bytes();
    drop(epoch);
    std::fs::write(&path, text('b'))?;
    let later = SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&path)?
        .set_modified(later)?;
    let items: Vec<_> = recipe()
        .iter_from(&Checkpoint::from_bytes(&saved)?)?
        .collect()
        .await;
    assert_eq!(items.len(), 1, "one refusal, then the end: {items:?}");
    let e = items
        .into_iter()
        .next()
        .and_then(Result::err)
        .expect("an error");
    assert!(is_refusal(&e), "{e:#}");
    assert!(format!("{e:#}").contains("lines.txt"), "{e:#}");
    Ok(())
}

/// 300 records, #150 damaged in its payload: with `resync`, the reader skips it (an error in
/// its place) and reads on.
async fn damaged_file(path: &Path) -> anyhow::Result<()> {
    write_records(path, 'a', 300).await?;
    let mut bytes = std::fs::read(path)?;
    let len = 12 + payload('a', 0).len() + 4;
    bytes[150 * len + 12 + 2] ^= 0x20;
    std::fs::write(path, bytes)?;
    Ok(())
}

/// A damaged record skipped with `resync` under every buffering operation: an epoch cut at
/// any point (before, inside and after the damage, with records past it in the buffers)
/// resumes exactly, and a budget resumes with the count it had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_under_buffers_resumes_exactly_across_the_damage() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("damaged.tfrecord");
    damaged_file(&path).await?;
    type Policy = fn(Dataset<Bytes>) -> Dataset<Bytes>;
    let policies: [(&str, Policy); 3] = [
        ("errors as elements", |d| d),
        ("ignore_errors", |d| d.ignore_errors()),
        ("budget of 5", |d| {
            d.ignore_errors_within(ErrorBudget::count(5))
        }),
    ];
    for shape in 0..SHAPES {
        for (policy, apply) in policies {
            let recipe = || {
                let records = apply(TFRecordDataset::new([&path]).resync(true).build());
                between(shape, records).1
            };
            let name = between(shape, Dataset::from_vec(Vec::new())).0;
            let whole: Vec<Result<Bytes, String>> = recipe()
                .iter()
                .map(|r| r.map_err(|e| format!("{e:#}")))
                .collect()
                .await;
            for cut in (0..whole.len()).filter(|c| (140..=160).contains(c) || c % 53 == 0) {
                let mut epoch = recipe().iter();
                let mut got = Vec::new();
                for _ in 0..cut {
                    let item = epoch.next().await.expect("an element");
                    got.push(item.map_err(|e| format!("{e:#}")));
                }
                let saved = epoch.checkpoint()?.to_bytes();
                drop(epoch);
                let rest = recipe().iter_from(&Checkpoint::from_bytes(&saved)?)?;
                got.extend(
                    rest.map(|r| r.map_err(|e| format!("{e:#}")))
                        .collect::<Vec<_>>()
                        .await,
                );
                assert_eq!(got, whole, "{name}, {policy}, cut after {cut}");
            }
        }
    }
    Ok(())
}

/// Recipes whose checkpoints are flipped bit by bit.
fn flip_recipes() -> Vec<(&'static str, Dataset<i64>)> {
    vec![
        ("range", Dataset::range(0, 1000)),
        (
            "shuffle, batch",
            Dataset::range(0, 1000)
                .shuffle(20, Some(4))
                .batch(3)
                .map(|v| v.iter().sum()),
        ),
        (
            "interleave, prefetch",
            Dataset::range(0, 10)
                .interleave(3, 2, |x| Dataset::range(0, 50).map(move |y| x * 100 + y))
                .prefetch(2),
        ),
        (
            "map_parallel, take",
            Dataset::range(0, 1000).map_parallel(2, |x| x * 2).take(900),
        ),
    ]
}

/// Every single-bit flip of a checkpoint is refused by `from_bytes`: no damaged checkpoint
/// resumes anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_flipped_bit_of_a_checkpoint_is_refused() -> anyhow::Result<()> {
    for (name, ds) in flip_recipes() {
        let mut epoch = ds.iter();
        for _ in 0..10 {
            epoch.next().await.expect("an element")?;
        }
        let bytes = epoch.checkpoint()?.to_bytes();
        assert!(Checkpoint::from_bytes(&bytes).is_ok(), "{name}");
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            match Checkpoint::from_bytes(&damaged) {
                Ok(_) => panic!("{name}: bit {bit} of {} flipped, accepted", bytes.len() * 8),
                Err(e) => assert!(is_refusal(&e), "{name}, bit {bit}: {e:#}"),
            }
        }
        // Cut short, or with a byte more: refused too.
        for len in [bytes.len() - 1, bytes.len() / 2, 8] {
            assert!(
                Checkpoint::from_bytes(&bytes[..len]).is_err(),
                "{name}: {len} bytes"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(
            Checkpoint::from_bytes(&longer).is_err(),
            "{name}: a byte more"
        );
    }
    Ok(())
}

/// A checkpoint of `a` after a few elements: restored into `a` again it is accepted, into `b`
/// (one parameter changed) refused at `iter_from`.
async fn refused<A, B>(what: &str, a: impl Fn() -> Dataset<A>, b: impl Fn() -> Dataset<B>)
where
    A: Send + 'static,
    B: Send + 'static,
{
    let mut epoch = a().iter();
    for _ in 0..3 {
        if epoch.next().await.is_none() {
            break;
        }
    }
    let checkpoint = epoch
        .checkpoint()
        .unwrap_or_else(|e| panic!("{what}: checkpoint: {e:#}"));
    let checkpoint = Checkpoint::from_bytes(&checkpoint.to_bytes()).expect("its bytes");
    drop(epoch);
    if let Err(e) = a().iter_from(&checkpoint) {
        panic!("{what}: the same recipe refused its own checkpoint: {e:#}");
    }
    match b().iter_from(&checkpoint) {
        Ok(_) => panic!("{what}: a changed parameter, and the checkpoint is accepted"),
        Err(e) => assert!(is_refusal(&e), "{what}: {e:#}"),
    }
}

/// `make(x)` and `make(y)` differ in one parameter: each refuses the other's checkpoint.
macro_rules! differ {
    ($what:expr, |$p:ident $(: $t:ty)?| $make:expr, $x:expr, $y:expr) => {{
        let make = |$p $(: $t)?| $make;
        refused($what, || make($x), || make($y)).await;
        refused($what, || make($y), || make($x)).await;
    }};
}

fn r() -> Dataset<i64> {
    Dataset::range(0, 200)
}

/// Every parameter of every operation that decides its elements or their order is in the
/// recipe's fingerprint: change one, and a checkpoint of the old recipe is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_parameter_that_decides_the_elements_is_in_the_fingerprint() -> anyhow::Result<()> {
    use streamload::format::{
        Column, CsvDataset, FixedLengthRecordDataset, IndexedTFRecords, JsonLinesDataset, Sample,
        ShardWriter, TFRecordIndex, WebDataset,
    };
    use streamload::text::Packing;
    use streamload::{BucketOptions, Options};

    // Sources.
    differ!("range start", |s| Dataset::range(s, 200), 0, 1);
    differ!("range stop", |s| Dataset::range(0, s), 200, 199);
    differ!("range step", |s| Dataset::range_step(0, 200, s), 1, 2);
    differ!("counter start", |s| Dataset::counter(s, 1), 0, 1);
    differ!("counter step", |s| Dataset::counter(0, s), 1, 2);
    differ!(
        "from_vec length",
        |n| Dataset::from_vec((0..n).collect::<Vec<i64>>()),
        10,
        11
    );

    // Files: every reader's parameters that decide its records.
    let dir = tempfile::tempdir()?;
    let paths: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("part-{i}.tfrecord")))
        .collect();
    for path in &paths {
        write_records(path, 'a', 50).await?;
    }
    let pattern = dir.path().join("part-*.tfrecord");
    let pattern = pattern.to_str().expect("a UTF-8 path");
    let other = dir.path().join("part-[01].tfrecord");
    let other = other.to_str().expect("a UTF-8 path");
    differ!(
        "list_files pattern",
        |p| Dataset::list_files(p, None),
        pattern,
        other
    );
    differ!(
        "list_files shuffle",
        |s| Dataset::list_files(pattern, s),
        None,
        Some(1)
    );
    differ!(
        "list_files seed",
        |s| Dataset::list_files(pattern, Some(s)),
        1,
        2
    );
    let tfrecord = || TFRecordDataset::new(&paths);
    differ!(
        "TFRecordDataset resync",
        |on| tfrecord().resync(on).build(),
        false,
        true
    );
    differ!(
        "TFRecordDataset compression",
        |c| tfrecord().compression(c).build(),
        Compression::None,
        Compression::Auto
    );
    differ!(
        "TFRecordDataset num_parallel_reads",
        |n: Option<usize>| match n {
            Some(n) => tfrecord().num_parallel_reads(n).build(),
            None => tfrecord().build(),
        },
        None,
        Some(2)
    );
    differ!(
        "TFRecordDataset num_parallel_reads",
        |n| tfrecord().num_parallel_reads(n).build(),
        2,
        3
    );
    differ!(
        "TFRecordDataset files",
        |n| TFRecordDataset::new(&paths[..n]).build(),
        3,
        2
    );
    let text = dir.path().join("rows.csv");
    std::fs::write(
        &text,
        (0..50)
            .map(|i| format!("{i},{},x\n", i * 2))
            .collect::<String>(),
    )?;
    let lines = || TextLineDataset::new([&text]);
    differ!(
        "TextLineDataset compression",
        |c| lines().compression(c).build(),
        Compression::None,
        Compression::Auto
    );
    differ!(
        "TextLineDataset num_parallel_reads",
        |n| lines().num_parallel_reads(n).build(),
        1,
        2
    );
    let columns = || vec![Column::int64(), Column::int64(), Column::string()];
    let csv = || CsvDataset::new([&text], columns());
    differ!(
        "CsvDataset header",
        |h| csv().header(h).build(),
        false,
        true
    );
    differ!(
        "CsvDataset field_delim",
        |d| csv().field_delim(d).build(),
        b',',
        b';'
    );
    differ!(
        "CsvDataset quotes",
        |q| csv().use_quote_delim(q).build(),
        true,
        false
    );
    differ!(
        "CsvDataset na_value",
        |v| csv().na_value(v).build(),
        "",
        "x"
    );
    differ!(
        "CsvDataset columns",
        |c: Vec<Column>| CsvDataset::new([&text], c).build(),
        columns(),
        vec![Column::int64(), Column::float64(), Column::string()]
    );
    differ!(
        "CsvDataset select_cols",
        |s: [usize; 2]| CsvDataset::new([&text], vec![Column::int64(), Column::int64()])
            .select_cols(s)
            .build(),
        [0, 1],
        [0, 2]
    );
    differ!(
        "CsvDataset exclude_cols",
        |e: [usize; 1]| CsvDataset::new([&text], vec![Column::int64(), Column::string()])
            .exclude_cols(e)
            .build(),
        [1],
        [2]
    );
    differ!(
        "FixedLengthRecordDataset record_bytes",
        |n| FixedLengthRecordDataset::new([&text], n).build(),
        4,
        5
    );
    differ!(
        "FixedLengthRecordDataset header_bytes",
        |n| FixedLengthRecordDataset::new([&text], 4)
            .header_bytes(n)
            .build(),
        0,
        2
    );
    differ!(
        "FixedLengthRecordDataset footer_bytes",
        |n| FixedLengthRecordDataset::new([&text], 4)
            .footer_bytes(n)
            .build(),
        0,
        2
    );
    let json = dir.path().join("values.jsonl");
    std::fs::write(&json, (0..50).map(|i| format!("{i}\n")).collect::<String>())?;
    refused(
        "JsonLinesDataset type",
        || JsonLinesDataset::new([&json]).build(),
        || JsonLinesDataset::new([&json]).build_as::<i64>(),
    )
    .await;
    let shards = {
        let pattern = dir.path().join("wds-%02d.tar");
        let mut writer = ShardWriter::new(pattern.to_str().expect("a UTF-8 path"))?;
        for i in 0..20 {
            writer
                .write(&Sample::new(format!("s{i}")).with("bin", vec![i as u8; 100]))
                .await?;
        }
        writer.finish().await?
    };
    differ!(
        "WebDataset max_member_size",
        |n| WebDataset::new(&shards).max_member_size(n).build(),
        1 << 20,
        1 << 10
    );
    // The options every file reader shares are keyed in one place: the compression, for all.
    differ!(
        "CsvDataset compression",
        |c| csv().compression(c).build(),
        Compression::None,
        Compression::Auto
    );
    differ!(
        "FixedLengthRecordDataset compression",
        |c| FixedLengthRecordDataset::new([&text], 4)
            .compression(c)
            .build(),
        Compression::None,
        Compression::Auto
    );
    differ!(
        "JsonLinesDataset compression",
        |c| JsonLinesDataset::new([&json]).compression(c).build(),
        Compression::None,
        Compression::Auto
    );
    differ!(
        "WebDataset compression",
        |c| WebDataset::new(&shards).compression(c).build(),
        Compression::Auto,
        Compression::None
    );
    // Indexed TFRecord files: the records chosen and their order.
    for path in &paths {
        let mut index = path.clone().into_os_string();
        index.push(".idx");
        TFRecordIndex::build(path).await?.write(index).await?;
    }
    let indexed = IndexedTFRecords::open(&paths).await?;
    differ!(
        "IndexedTFRecords shard",
        |i| indexed.clone().shard(2, i).records(),
        0,
        1
    );
    differ!(
        "IndexedTFRecords shuffle_records",
        |s: Option<u64>| match s {
            Some(s) => indexed.clone().shuffle_records(s).records(),
            None => indexed.records(),
        },
        None,
        Some(1)
    );
    differ!(
        "IndexedTFRecords seed",
        |s| indexed.clone().shuffle_records(s).records(),
        1,
        2
    );

    // Operations.
    let inner = |x: i64| Dataset::range(0, 5).map(move |y| x * 10 + y);
    differ!(
        "interleave cycle_length",
        |c| r().interleave(c, 1, inner),
        2,
        3
    );
    differ!(
        "interleave block_length",
        |b| r().interleave(2, b, inner),
        1,
        2
    );
    differ!(
        "parallel_interleave cycle_length",
        |c| r().parallel_interleave(c, 1, 4, inner),
        2,
        3
    );
    differ!(
        "parallel_interleave block_length",
        |b| r().parallel_interleave(4, b, 4, inner),
        1,
        2
    );
    differ!("batch size", |n| r().batch(n), 3, 4);
    refused(
        "batch drop_remainder",
        || r().batch(3),
        || r().batch_drop_remainder(3),
    )
    .await;
    let rows = || r().map(|x| vec![x; (x % 3) as usize]);
    differ!(
        "padded_batch size",
        |n| rows().padded_batch(n, None, None, false),
        3,
        4
    );
    differ!(
        "padded_batch drop",
        |d| rows().padded_batch(3, None, None, d),
        false,
        true
    );
    differ!("ragged_batch size", |n| rows().ragged_batch(n, false), 3, 4);
    differ!(
        "ragged_batch drop",
        |d| rows().ragged_batch(3, d),
        false,
        true
    );
    differ!("rebatch size", |n| r().batch(4).rebatch(n, false), 3, 5);
    differ!("rebatch drop", |d| r().batch(4).rebatch(3, d), false, true);
    differ!(
        "rebatch_sizes",
        |s: [usize; 2]| r().batch(4).rebatch_sizes(&s, false),
        [2, 3],
        [3, 2]
    );
    differ!("shuffle buffer_size", |n| r().shuffle(n, Some(1)), 16, 17);
    differ!("shuffle seed", |s| r().shuffle(16, s), Some(1), Some(2));
    differ!(
        "shuffle reshuffle",
        |f| r().shuffle_with(16, Some(1), f),
        true,
        false
    );
    refused(
        "shuffle flags",
        || r().shuffle_with(17, None, false),
        || r().shuffle_with(16, None, true),
    )
    .await;
    differ!("repeat_n count", |n| r().repeat_n(n), 2, 3);
    refused("repeat", || r().repeat(), || r().repeat_n(5)).await;
    differ!("take count", |n| r().take(n), 100, 101);
    differ!("skip count", |n| r().skip(n), 1, 2);
    differ!("shard num_shards", |n| r().shard(n, 0), 2, 3);
    differ!("shard index", |i| r().shard(3, i), 0, 1);
    differ!("enumerate start", |s| r().enumerate(s), 0, 1);
    differ!(
        "concatenate",
        |n| r().concatenate(&Dataset::range(0, n)),
        5,
        6
    );
    differ!("zip", |n| Dataset::zip(r(), Dataset::range(0, n)), 100, 101);
    differ!(
        "zip_all",
        |n| Dataset::zip_all(vec![r(), Dataset::range(0, n)]),
        100,
        101
    );
    differ!(
        "scan_resumable initial state",
        |s| r().scan_resumable(s, |a, x| (a + x, a)),
        0i64,
        1
    );
    differ!(
        "ignore_errors_within count",
        |n| r().ignore_errors_within(ErrorBudget::count(n)),
        1,
        2
    );
    refused(
        "ignore_errors_within kind",
        || r().ignore_errors_within(ErrorBudget::count(0)),
        || r().ignore_errors_within(ErrorBudget::rate(0.0)),
    )
    .await;
    differ!("window size", |n| r().window(n, 2, 1, false), 3, 4);
    differ!("window shift", |n| r().window(3, n, 1, false), 2, 3);
    differ!("window stride", |n| r().window(3, 2, n, false), 1, 2);
    differ!("window drop", |d| r().window(3, 2, 1, d), false, true);
    let docs = || r().map(|x| vec![x as u32; (x % 7) as usize]);
    differ!(
        "pack length",
        |n| docs().pack(n, Packing::ConcatThenSplit),
        4,
        5
    );
    differ!(
        "pack policy",
        |p| docs().pack(4, p),
        Packing::FirstFit { bins: 2 },
        Packing::BestFit { bins: 2 }
    );
    differ!(
        "pack bins",
        |n| docs().pack(4, Packing::FirstFit { bins: n }),
        2,
        3
    );
    differ!(
        "batch_by_tokens budget",
        |n| docs().batch_by_tokens(n, Vec::len),
        8,
        9
    );
    let weights = || streamload::Mixture::constant(vec![1.0, 2.0]);
    differ!(
        "mix seed",
        |seed| Dataset::mix(vec![r(), r()], weights(), Some(seed)),
        1,
        2
    );
    refused(
        "mix over elements or tokens",
        || Dataset::mix(vec![docs(), docs()], weights(), Some(1)),
        || Dataset::mix_over_tokens(vec![docs(), docs()], weights(), Some(1), Vec::len),
    )
    .await;
    differ!(
        "group_by_window size",
        |n| r().group_by_window(|x| x % 3, |_, w| w.batch(8), n),
        4,
        5
    );
    let bucket = |b: Vec<usize>, s: Vec<usize>, o: BucketOptions<Vec<i64>>| {
        rows().bucket_by_sequence_length(|v| v.len(), b, s, o)
    };
    differ!(
        "bucket_by_sequence_length boundaries",
        |b| bucket(b, vec![2, 2], BucketOptions::default()),
        vec![1],
        vec![2]
    );
    differ!(
        "bucket_by_sequence_length batch sizes",
        |s| bucket(vec![1], s, BucketOptions::default()),
        vec![2, 2],
        vec![2, 3]
    );
    differ!(
        "bucket_by_sequence_length drop_remainder",
        |d| bucket(
            vec![1],
            vec![2, 2],
            BucketOptions::default().drop_remainder(d)
        ),
        false,
        true
    );
    let two = || vec![r(), Dataset::range(1000, 1100)];
    differ!(
        "sample_from_datasets weights",
        |w| Dataset::sample_from_datasets(two(), Some(w), Some(1), false),
        vec![0.5, 0.5],
        vec![0.6, 0.4]
    );
    differ!(
        "sample_from_datasets seed",
        |s| Dataset::sample_from_datasets(two(), None, s, false),
        Some(1),
        Some(2)
    );
    differ!(
        "sample_from_datasets stop",
        |f| Dataset::sample_from_datasets(two(), None, Some(1), f),
        false,
        true
    );
    differ!(
        "choose_from_datasets choices",
        |n| Dataset::choose_from_datasets(two(), Dataset::range(0, n).map(|x| x % 2), true),
        300,
        299
    );
    differ!(
        "choose_from_datasets stop",
        |f| Dataset::choose_from_datasets(two(), Dataset::range(0, 300).map(|x| x % 2), f),
        true,
        false
    );
    differ!(
        "random_map seed",
        |s| r().random_map(2, s, |x, _| x),
        Some(1),
        Some(2)
    );
    differ!("random seed", |s| Dataset::random(Some(s), false), 1, 2);
    differ!(
        "random rerandomize_each_iteration",
        |b| Dataset::random(Some(1), b),
        false,
        true
    );
    differ!(
        "assert_cardinality",
        |n| r().assert_cardinality(n),
        200,
        201
    );
    differ!(
        "Options seed",
        |s| r().shuffle(16, None).with_options(Options::new().seed(s)),
        1,
        2
    );
    refused(
        "Options deterministic",
        || r().map_parallel(2, |x| x),
        || {
            r().map_parallel(2, |x| x)
                .with_options(Options::new().deterministic(true))
        },
    )
    .await;
    Ok(())
}

/// The array and column readers too: every parameter that decides their elements is in the
/// recipe's fingerprint (each format's builder is keyed field by field, so one added later
/// does not build until it is keyed or left out).
#[cfg(any(feature = "parquet", feature = "hdf5", feature = "zarr"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_parameter_of_the_array_and_column_readers_is_in_the_fingerprint() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    #[cfg(feature = "parquet")]
    {
        use streamload::format::parquet::ParquetDataset;
        let file = data.join("parquet/types-none.parquet");
        let parquet = || ParquetDataset::new([&file]).batch_size(100);
        differ!(
            "ParquetDataset columns",
            |c: &[&str]| parquet().columns(c.iter().copied()).build(),
            &["id", "label"],
            &["id", "name"]
        );
        differ!(
            "ParquetDataset exclude_columns",
            |c| parquet().exclude_columns([c]).build(),
            "blob",
            "name"
        );
        differ!(
            "ParquetDataset batch_size",
            |n| ParquetDataset::new([&file]).batch_size(n).build(),
            100,
            50
        );
        differ!(
            "ParquetDataset shard",
            |i| parquet().shard(2, i).build(),
            0,
            1
        );
        differ!(
            "ParquetDataset files",
            |other: bool| {
                let second = if other { "types-zstd" } else { "types-none" };
                let second = data.join(format!("parquet/{second}.parquet"));
                ParquetDataset::new([&file, &second]).build()
            },
            false,
            true
        );
    }
    #[cfg(feature = "hdf5")]
    {
        use streamload::format::hdf5::Hdf5Dataset;
        let files = [data.join("hdf5/scenes-0.h5"), data.join("hdf5/scenes-1.h5")];
        let h5 = || Hdf5Dataset::new(&files, "/scenes/points");
        let filters = [data.join("hdf5/filters.h5")];
        differ!(
            "Hdf5Dataset dataset",
            |d| Hdf5Dataset::new(&filters, d).build::<f32>(),
            "/gzip",
            "/lzf"
        );
        differ!(
            "Hdf5Dataset slices",
            |k| h5().slices(k).build::<f32>(),
            4,
            5
        );
        differ!(
            "Hdf5Dataset select_rows",
            |n| h5().select_rows(0..n).build::<f32>(),
            30,
            20
        );
        differ!(
            "Hdf5Dataset patches",
            |seed| h5().patches([4, 16, 3], 3, seed).build::<f32>(),
            1,
            2
        );
        refused(
            "Hdf5Dataset with_labels",
            || h5().build::<f32>().map(|a| a.len()),
            || {
                h5().with_labels("/scenes/labels")
                    .build_labeled::<f32, i64>()
                    .map(|(a, _)| a.len())
            },
        )
        .await;
        differ!(
            "Hdf5Dataset fill_missing_chunks",
            |on| h5().fill_missing_chunks(on).build::<f32>(),
            false,
            true
        );
    }
    #[cfg(feature = "zarr")]
    {
        use streamload::format::zarr::ZarrDataset;
        let stores = [
            data.join("zarr/scenes-0.zarr"),
            data.join("zarr/scenes-1.zarr"),
        ];
        let zarr = || ZarrDataset::new(&stores, "points");
        differ!(
            "ZarrDataset array",
            |a| ZarrDataset::new(&stores, a).build::<f32>(),
            "points",
            "labels"
        );
        differ!(
            "ZarrDataset slices",
            |k| zarr().slices(k).build::<f32>(),
            4,
            5
        );
        differ!(
            "ZarrDataset chunks",
            |on: bool| if on { zarr().chunks() } else { zarr() }.build::<f32>(),
            false,
            true
        );
        differ!(
            "ZarrDataset select_rows",
            |n| zarr().select_rows(0..n).build::<f32>(),
            30,
            20
        );
    }
}

/// An epoch of `a` cut after `k` elements and resumed with `b`, which differs from `a` only
/// in how fast it runs (a buffer's size, a parallelism): the rest of `a`'s epoch, exactly.
async fn resumes_across<T>(what: &str, a: impl Fn() -> Dataset<T>, b: impl Fn() -> Dataset<T>)
where
    T: Send + PartialEq + std::fmt::Debug + 'static,
{
    let whole = a().collect().await.expect("the whole epoch");
    for k in [0, 1, whole.len() / 3, whole.len() - 1] {
        let mut epoch = a().iter();
        let mut got = Vec::new();
        for _ in 0..k {
            got.push(epoch.next().await.expect("an element").expect("no error"));
        }
        let bytes = epoch.checkpoint().expect("checkpoint").to_bytes();
        drop(epoch);
        let checkpoint = Checkpoint::from_bytes(&bytes).expect("its bytes");
        let rest = b().iter_from(&checkpoint);
        let rest = rest.unwrap_or_else(|e| panic!("{what}: refused: {e:#}"));
        got.extend(rest.map(|x| x.expect("no error")).collect::<Vec<_>>().await);
        assert_eq!(got, whole, "{what}, cut after {k}");
    }
}

/// Parameters that only change how fast a recipe runs are not in its fingerprint: a job can
/// resume with more workers, other buffers or another machine's AUTOTUNE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speed_parameters_can_change_between_save_and_resume() -> anyhow::Result<()> {
    use streamload::AUTOTUNE;
    let dir = tempfile::tempdir()?;
    let paths: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("part-{i}.tfrecord")))
        .collect();
    for path in &paths {
        write_records(path, 'a', 60).await?;
    }
    let records = |buffer: usize, mapped: bool| {
        TFRecordDataset::new(&paths)
            .num_parallel_reads(2)
            .buffer_size(buffer)
            .memory_map(mapped)
            .build()
    };
    resumes_across("prefetch 1 -> 4", || r().prefetch(1), || r().prefetch(4)).await;
    resumes_across(
        "prefetch 2 -> AUTOTUNE",
        || r().prefetch(2),
        || r().prefetch(AUTOTUNE),
    )
    .await;
    resumes_across(
        "map_parallel 1 -> 3",
        || r().map_parallel(1, |x| x * 2),
        || r().map_parallel(3, |x| x * 2),
    )
    .await;
    resumes_across(
        "random_map 1 -> 3",
        || r().random_map(1, Some(4), |x, _| x),
        || r().random_map(3, Some(4), |x, _| x),
    )
    .await;
    resumes_across(
        "map_async 1 -> 4",
        || r().map_async(1, |x| async move { x + 1 }),
        || r().map_async(4, |x| async move { x + 1 }),
    )
    .await;
    let inner = |x: i64| Dataset::range(0, 5).map(move |y| x * 10 + y);
    resumes_across(
        "parallel_interleave num_parallel_calls 2 -> 4",
        || r().parallel_interleave(2, 1, 2, inner),
        || r().parallel_interleave(2, 1, 4, inner),
    )
    .await;
    resumes_across(
        "TFRecordDataset buffer_size and memory_map",
        || records(64, false).shuffle(20, Some(1)),
        || records(1 << 16, true).shuffle(20, Some(1)),
    )
    .await;
    let text = dir.path().join("lines.txt");
    std::fs::write(
        &text,
        (0..300).map(|i| format!("line {i}\n")).collect::<String>(),
    )?;
    let lines = |buffer: usize| TextLineDataset::new([&text]).buffer_size(buffer).build();
    resumes_across(
        "TextLineDataset buffer_size",
        || lines(16),
        || lines(1 << 16),
    )
    .await;
    Ok(())
}

/// A cache that a resumed epoch could not fill (it missed the elements from before the
/// checkpoint) is filled by the next repetition as the first would have been, in the first's
/// epoch; interrupted again while it fills, it goes on in that epoch, with that epoch's
/// randomness (it once went on in the repetition's own, and a `random_map` before it drew
/// other values).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_refilled_after_a_resume_resumes_in_its_fills_epoch() -> anyhow::Result<()> {
    use streamload::rand::Rng;
    let recipe = || {
        Dataset::range(0, 164)
            .random_map(2, Some(7), |x, rng| x * 1_000 + rng.random_range(0..1_000))
            .cache()
            .repeat_n(2)
    };
    let whole = recipe().collect().await?;
    let mut seen = Vec::new();
    let mut epoch = recipe().iter();
    // Once while the first repetition fills the cache, once while the second fills it.
    for point in [74, 238] {
        while seen.len() < point {
            seen.push(epoch.next().await.expect("an element")?);
        }
        let bytes = epoch.checkpoint()?.to_bytes();
        drop(epoch);
        epoch = recipe().iter_from(&Checkpoint::from_bytes(&bytes)?)?;
    }
    while let Some(x) = epoch.next().await {
        seen.push(x?);
    }
    assert_eq!(seen, whole);
    Ok(())
}
