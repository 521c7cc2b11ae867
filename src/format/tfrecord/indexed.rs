//! Random access to TFRecord files through their indexes: [`IndexedTFRecords`].

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{self, FuturesOrdered, Stream, StreamExt};

use super::FRAME_OVERHEAD;
use super::index::{IndexEntry, TFRecordIndex, refuse_compressed};
use crate::checkpoint::{Prov, State};
use crate::engine::error_stream;
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Source, Start as SourceStart};
use crate::engine::{Resumable, unsupported};
use crate::error::Error;
use crate::format::masked_crc32c;
use crate::hash::{Permutation, mix64};
use crate::stats::StageCounters;
use crate::storage::local::OpenSlot;
use crate::storage::{Identity, Location};

/// The stage's name in statistics, errors and checkpoints.
const STAGE: &str = "indexed_tfrecord";
/// A window of the epoch's order read at once: at most this many records...
const WINDOW_RECORDS: usize = 256;
/// ... or this many bytes of records, whichever comes first.
const WINDOW_BYTES: u64 = 8 << 20;
/// Windows read ahead of the consumer (the one being yielded from included).
const WINDOWS_AHEAD: usize = 2;
/// Records of one file closer than this are read by one ranged read, gap included...
const COALESCE_GAP: u64 = 64 << 10;
/// ... as long as that read stays under this many bytes.
const MAX_READ: u64 = 16 << 20;
/// Ranged reads in flight per window, by default.
const DEFAULT_PARALLEL_READS: usize = 16;
/// With at most this many files, local files are kept open for an epoch's reads (more would
/// hold too many file descriptors: each read then opens its file).
const KEEP_OPEN: usize = 256;
/// Files whose indexes and sizes are read at once when opening.
const OPEN_AT_ONCE: usize = 16;

/// TFRecord files with random access through their indexes (DALI's `tfrecord2idx` files,
/// see [`TFRecordIndex`]): exact sharding by record, and a global shuffle of the record
/// order across files, each record read by position (positioned reads of local files,
/// ranged GETs of objects). What DALI's `fn.readers.tfrecord(index_path=...)` and Grain's
/// `ArrayRecordDataSource` with an `IndexSampler` offer, on TFRecord files.
///
/// Build it with [`open`](Self::open) (each file's index at `<file>.idx`, as the
/// `tfrecord index` tool and DALI's convention put it) or
/// [`from_indexes`](Self::from_indexes); choose the records with [`shard`](Self::shard) and
/// their order with [`shuffle_records`](Self::shuffle_records); then
/// [`records`](Self::records) is the [`Dataset`] of their payloads, of known cardinality
/// ([`num_records`](Self::num_records)).
///
/// # How records are read
///
/// The epoch's order is cut into windows of up to 256 records or 8 MiB. The records of a
/// window are sorted by file and offset, and records of one file less than 64 KiB apart are
/// read together by one ranged read (up to 16 MiB, gaps included); those reads run
/// [`num_parallel_reads`](Self::num_parallel_reads) at once (16 by default), in a task per
/// window, and the next two windows are read while the current one is yielded. Local files
/// are read by positioned reads on blocking threads, each file opened once per epoch (up to
/// 256 files; with more, each read opens its file). Without a shuffle, consecutive records
/// coalesce into large reads and the files are read about as fast as sequentially. With a
/// shuffle over many files, most records are read one by one: a ranged GET per record costs
/// a round trip to object storage (tens of milliseconds), so throughput from object storage
/// rests on many reads in flight (raise `num_parallel_reads` for small records there), and
/// on records being large enough for their bytes, not the round trips, to dominate. Every
/// record's two CRCs are checked, and its length against the index.
///
/// # Checkpoints
///
/// Resumable: a checkpoint saves how far the epoch's order went (one number) and the
/// epoch; the order is derived from (seed, epoch), so a restored epoch goes on with exactly
/// the records the uninterrupted one would have read next. A record's position (for a
/// shuffle buffer downstream) is its number among all the files' records. The checkpoint
/// also records each file holding records of the shard as it was when
/// [`open`](Self::open)ed (its size, and a digest of its modification time or ETag, a few
/// bytes per file): a resume over a file that changed since, under an unchanged index (which
/// would read as damage), is refused with an [`Error::Checkpoint`] naming the file.
///
/// ```
/// use streamload::format::{Compression, IndexedTFRecords, TFRecordIndex, TFRecordWriter};
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let mut files = Vec::new();
/// for f in 0..2u8 {
///     let path = dir.path().join(format!("part-{f}.tfrecord"));
///     let mut writer = TFRecordWriter::new(tokio::fs::File::create(&path).await?, Compression::None);
///     for r in 0..5u8 {
///         writer.write(&[f * 10 + r]).await?;
///     }
///     writer.finish().await?;
///     // What `tfrecord index` (or DALI's tfrecord2idx) writes beside each file.
///     TFRecordIndex::build(&path).await?.write(dir.path().join(format!("part-{f}.tfrecord.idx"))).await?;
///     files.push(path);
/// }
///
/// let indexed = IndexedTFRecords::open(&files).await?;
/// assert_eq!(indexed.num_records(), 10);
/// let in_order: Vec<u8> = indexed.records().collect().await?.iter().map(|r| r[0]).collect();
/// assert_eq!(in_order, [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]);
///
/// // Worker 1 of 2, its records in an order drawn anew each epoch.
/// let shard = indexed.shard(2, 1).shuffle_records(42);
/// assert_eq!(shard.num_records(), 5);
/// let mut mine: Vec<u8> = shard.records().collect().await?.iter().map(|r| r[0]).collect();
/// mine.sort();
/// assert_eq!(mine, [10, 11, 12, 13, 14]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct IndexedTFRecords {
    files: Arc<Files>,
    /// The records chosen: global numbers `lo..hi`.
    lo: u64,
    hi: u64,
    seed: Option<u64>,
    parallel_reads: usize,
}

impl std::hash::Hash for IndexedTFRecords {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Every field named: one added later does not build until it is keyed or left out.
        // The files are keyed by their names and indexes.
        let IndexedTFRecords {
            files,
            lo,
            hi,
            seed,
            parallel_reads: _,
        } = self;
        (files.key, lo, hi, seed).hash(state);
    }
}

impl Source for IndexedTFRecords {
    type Out = Bytes;
    type Stream = BoxStream<Bytes>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Finite(self.num_records())
    }

    /// See [`records`](IndexedTFRecords::records): the start is the context's.
    fn open(&self, ctx: &Ctx, _: SourceStart<'_>) -> anyhow::Result<BoxStream<Bytes>> {
        Ok(self.epoch(ctx))
    }
}

impl std::fmt::Debug for IndexedTFRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexedTFRecords")
            .field("files", &self.files.locations.len())
            .field("records", &(self.lo..self.hi))
            .field("seed", &self.seed)
            .field("parallel_reads", &self.parallel_reads)
            .finish()
    }
}

/// The files and their indexes.
struct Files {
    locations: Vec<Location>,
    names: Vec<Arc<str>>,
    indexes: Vec<TFRecordIndex>,
    /// What each file was when opened (its size and version), for checkpoints to name.
    identities: Vec<Identity>,
    /// The global number of each file's first record; the last is the total.
    starts: Vec<u64>,
    /// A hash of the files' names and entries (the recipe's fingerprint).
    key: u64,
}

impl Files {
    fn new(
        locations: Vec<Location>,
        indexes: Vec<TFRecordIndex>,
        identities: Vec<Identity>,
    ) -> Files {
        let mut starts = Vec::with_capacity(indexes.len() + 1);
        let mut total = 0u64;
        let mut key = 0x1DE7_u64;
        for (location, index) in locations.iter().zip(&indexes) {
            starts.push(total);
            total += index.len() as u64;
            key = mix64(key ^ hash_str(&location.to_string()));
            for entry in index.entries() {
                key = mix64(key ^ entry.offset ^ entry.size.rotate_left(32));
            }
        }
        starts.push(total);
        let names = locations.iter().map(|l| l.to_string().into()).collect();
        Files {
            locations,
            names,
            indexes,
            identities,
            starts,
            key,
        }
    }

    fn total(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The files holding records of `lo..hi` (empty files inside the range included).
    fn touched(&self, lo: u64, hi: u64) -> std::ops::Range<usize> {
        if lo >= hi {
            return 0..0;
        }
        let first = self.starts.partition_point(|&s| s <= lo).saturating_sub(1);
        let last = self.starts.partition_point(|&s| s < hi).saturating_sub(1);
        first..(last + 1).min(self.indexes.len())
    }

    /// What a checkpoint records of the files `touched`: per file, its size and a 32-bit
    /// digest of its version (modification time or ETag).
    fn identity_words(&self, touched: std::ops::Range<usize>) -> impl Iterator<Item = u64> + '_ {
        self.identities[touched]
            .iter()
            .flat_map(|i| [i.size, mix64(i.version) >> 32])
    }

    /// An [`Error::Checkpoint`] naming the first of the files `touched` that is not what the
    /// checkpoint recorded (`saved`, as [`identity_words`](Self::identity_words) made them).
    fn unchanged(&self, touched: std::ops::Range<usize>, saved: &[u64]) -> anyhow::Result<()> {
        let now: Vec<u64> = self.identity_words(touched.clone()).collect();
        if saved.len() != now.len() {
            return Err(Error::Checkpoint(format!(
                "{STAGE}: the checkpoint records {} files, the recipe reads {}",
                saved.len() / 2,
                now.len() / 2
            ))
            .into());
        }
        for (file, (then, now)) in touched.zip(saved.chunks(2).zip(now.chunks(2))) {
            if then != now {
                return Err(Error::Checkpoint(format!(
                    "{} changed since the checkpoint (then {} bytes, now {}{}): resume over \
                     the files the checkpoint was taken over (and index them again if they \
                     changed)",
                    self.names[file],
                    then[0],
                    now[0],
                    if then[0] == now[0] {
                        ", and its modification time or ETag differs"
                    } else {
                        ""
                    }
                ))
                .into());
            }
        }
        Ok(())
    }

    /// The file and record (in it) of global record `id`, and where it lies.
    fn locate(&self, id: u64) -> Option<(usize, u64, IndexEntry)> {
        if id >= self.total() {
            return None;
        }
        // The last file starting at or before `id` (empty files start where the next does).
        let file = self.starts.partition_point(|&s| s <= id) - 1;
        let record = id - self.starts[file];
        let entry = *self.indexes[file].entries().get(record as usize)?;
        Some((file, record, entry))
    }
}

fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    })
}

/// Where `file`'s index is by convention: `<file>.idx`.
pub(crate) fn index_location(file: &Location) -> Location {
    match file {
        Location::Local(path) => {
            let mut name = path.clone().into_os_string();
            name.push(".idx");
            Location::Local(name.into())
        }
        Location::Url(url) => {
            let mut url = url.clone();
            let path = format!("{}.idx", url.path());
            url.set_path(&path);
            Location::Url(url)
        }
    }
}

impl IndexedTFRecords {
    /// The records of `files`, each indexed by the file beside it named `<file>.idx` (a
    /// local path or a URL alike: `s3://bucket/train-0.tfrecord.idx`). The indexes and the
    /// files' sizes are read, 16 files at once.
    ///
    /// # Errors
    ///
    /// A compressed file (`.gz`, `.zz`, `.zlib`: no random access), a missing or malformed
    /// index (naming it, and the line), or an index with a record past the end of its file
    /// (naming both and the record).
    pub async fn open<P: Into<Location>>(
        files: impl IntoIterator<Item = P>,
    ) -> anyhow::Result<Self> {
        let files: Vec<Location> = files.into_iter().map(Into::into).collect();
        let indexes = stream::iter(files.iter().map(|file| async move {
            refuse_compressed(file)?;
            let at = index_location(file);
            TFRecordIndex::read(at.clone()).await.map_err(|e| {
                e.context(format!(
                    "reading the index of {file} (make it with `tfrecord index {file}`, \
                     TFRecordIndex::build, or TFRecordDataset::write_index while reading)"
                ))
            })
        }))
        .buffered(OPEN_AT_ONCE)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
        Self::checked(files, indexes, |file| index_location(file).to_string()).await
    }

    /// The records of `files`, indexed by `indexes` (one per file, in the same order: read
    /// with [`TFRecordIndex::read`] from wherever they are kept, or built with
    /// [`TFRecordIndex::build`]). The files' sizes are read, 16 files at once.
    ///
    /// # Errors
    ///
    /// When there are not as many indexes as files, a file is compressed, or an index has a
    /// record past the end of its file (naming the file and the record).
    pub async fn from_indexes<P: Into<Location>>(
        files: impl IntoIterator<Item = P>,
        indexes: Vec<TFRecordIndex>,
    ) -> anyhow::Result<Self> {
        let files: Vec<Location> = files.into_iter().map(Into::into).collect();
        anyhow::ensure!(
            files.len() == indexes.len(),
            "IndexedTFRecords: {} files but {} indexes",
            files.len(),
            indexes.len()
        );
        for file in &files {
            refuse_compressed(file)?;
        }
        Self::checked(files, indexes, |file| format!("given for {file}")).await
    }

    /// Checks each index against its file's size.
    async fn checked(
        files: Vec<Location>,
        indexes: Vec<TFRecordIndex>,
        index_name: impl Fn(&Location) -> String,
    ) -> anyhow::Result<Self> {
        let sizes = stream::iter(files.iter().map(crate::storage::identity))
            .buffered(OPEN_AT_ONCE)
            .collect::<Vec<_>>()
            .await;
        let mut identities = Vec::with_capacity(files.len());
        for ((file, index), size) in files.iter().zip(&indexes).zip(sizes) {
            let identity = size?;
            index.check(identity.size, &file.to_string(), &index_name(file))?;
            identities.push(identity);
        }
        let files = Files::new(files, indexes, identities);
        Ok(IndexedTFRecords {
            lo: 0,
            hi: files.total(),
            files: Arc::new(files),
            seed: None,
            parallel_reads: DEFAULT_PARALLEL_READS,
        })
    }

    /// The number of records each file holds (from the indexes).
    pub(crate) fn file_counts(&self) -> Vec<u64> {
        self.files.indexes.iter().map(|i| i.len() as u64).collect()
    }

    /// The files' names, in order.
    pub(crate) fn file_names(&self) -> Vec<String> {
        self.files.names.iter().map(|n| n.to_string()).collect()
    }

    /// Records `start..end` of file `file` alone, in order (a contiguous run of the global
    /// order; no shuffle).
    pub(crate) fn file_run(&self, file: usize, start: u64, end: u64) -> Self {
        let base = self.files.starts.get(file).copied().unwrap_or(0);
        let len = self.files.indexes.get(file).map_or(0, |i| i.len() as u64);
        IndexedTFRecords {
            lo: base + start.min(len),
            hi: base + end.min(len),
            seed: None,
            ..self.clone()
        }
    }

    /// The number of records chosen (of this shard): the cardinality of
    /// [`records`](Self::records).
    pub fn num_records(&self) -> u64 {
        self.hi - self.lo
    }

    /// Shard `index` of `num_shards`: a contiguous block of the records (numbered across the
    /// files in order), every record in exactly one shard and the shards' sizes within one of
    /// each other, as DALI's `shard_id`/`num_shards` and Grain's `ShardOptions` split them
    /// (tf.data's [`Dataset::shard`] takes every `num_shards`-th element instead: here a
    /// block keeps each shard's reads contiguous). A shard of a shard splits it again.
    /// Shard first and shuffle after, or the other way: the shard is the same set of records.
    ///
    /// # Panics
    ///
    /// If `num_shards` is 0 or `index >= num_shards`.
    pub fn shard(mut self, num_shards: u64, index: u64) -> Self {
        assert!(
            num_shards > 0 && index < num_shards,
            "IndexedTFRecords::shard: index {index} is not below num_shards {num_shards}"
        );
        let len = u128::from(self.hi - self.lo);
        let bound = |i: u64| self.lo + (len * u128::from(i) / u128::from(num_shards)) as u64;
        (self.lo, self.hi) = (bound(index), bound(index + 1));
        self
    }

    /// Reads the records in an order drawn from `seed` and the epoch: a uniform-looking
    /// permutation of all the records chosen, across files, drawn anew for each epoch
    /// (tf.data's `reshuffle_each_iteration=True`: each [`iter`](Dataset::iter) of the
    /// dataset, and each repetition of a `repeat`, is an epoch); the same seed and epoch
    /// give the same order. The permutation takes no memory (a keyed Feistel network over
    /// the record numbers, walked into range, as Grain's index shuffle), however many records
    /// there are.
    pub fn shuffle_records(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Ranged reads in flight at once (default 16).
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn num_parallel_reads(mut self, n: usize) -> Self {
        assert!(
            n > 0,
            "IndexedTFRecords: num_parallel_reads must be at least 1"
        );
        self.parallel_reads = n;
        self
    }

    /// The records' payloads, as a [`Dataset`] of known cardinality.
    ///
    /// # Ordering
    ///
    /// The files' order and each file's index order, or with
    /// [`shuffle_records`](Self::shuffle_records) the permutation of (seed, epoch).
    ///
    /// # Errors
    ///
    /// A record whose CRC fails is an [`Error::DataLoss`] naming the file, the record and
    /// the offset; so is a record whose header disagrees with the index's size (a stale or
    /// wrong index), or one past the end of the file. A read that fails (after the storage
    /// layer's retries) is an error for each record it was to read, naming the file and the
    /// record. Each error takes its record's place and the other records follow, so
    /// [`ignore_errors`](Dataset::ignore_errors) skips exactly the records that fail.
    ///
    /// # Cancellation
    ///
    /// Each window is read by a task of its own (its reads in flight, its CRCs checked),
    /// while the consumer takes the records of the window before. Dropping the epoch aborts
    /// those tasks and the reads in flight (a local positioned read already begun on a
    /// blocking thread finishes its read). At most three windows are held: the one being
    /// yielded and two read ahead (each 8 MiB of records, or one record if larger, and the
    /// gaps of under 64 KiB read with them).
    pub fn records(&self) -> Dataset<Bytes> {
        Dataset::from_source(self.clone())
    }

    /// The files holding the records chosen.
    fn touched(&self) -> std::ops::Range<usize> {
        self.files.touched(self.lo, self.hi)
    }

    /// One epoch: fresh, restored from `[position, epoch, files...]`, or replaying record
    /// numbers.
    fn epoch(&self, ctx: &Ctx) -> BoxStream<Bytes> {
        let stats = ctx.stats_handle();
        let reader = |order: Order, next: u64| {
            Box::pin(IndexedRecords {
                files: Arc::clone(&self.files),
                touched: self.touched(),
                order,
                parallel_reads: self.parallel_reads,
                planned: next,
                windows: FuturesOrdered::new(),
                ready: Vec::new().into_iter(),
                yielded: next,
                last: None,
                stats: stats.clone(),
                kept: (self.files.locations.len() <= KEEP_OPEN).then(|| {
                    (0..self.files.locations.len())
                        .map(|_| OpenSlot::default())
                        .collect()
                }),
            }) as BoxStream<Bytes>
        };
        if let Some(provs) = ctx.replaying() {
            return reader(Order::Replay(Arc::clone(provs)), 0);
        }
        let (next, epoch) = match ctx.restoring() {
            Some(state) => match (state.word(0), state.word(1)) {
                (Ok(next), Ok(epoch)) if next <= self.num_records() => {
                    // A checkpoint from before files were recorded has two words.
                    let saved = state.words.get(2..).unwrap_or(&[]);
                    if !saved.is_empty()
                        && let Err(e) = self.files.unchanged(self.touched(), saved)
                    {
                        return error_stream(e);
                    }
                    (next, epoch)
                }
                _ => return error_stream(state.malformed()),
            },
            None => (0, ctx.epoch()),
        };
        let permutation = self
            .seed
            .map(|seed| Permutation::new(self.num_records(), mix64(seed) ^ mix64(!epoch)));
        reader(
            Order::Epoch {
                lo: self.lo,
                len: self.num_records(),
                epoch,
                permutation,
            },
            next,
        )
    }
}

/// The records an epoch reads, in order.
enum Order {
    /// The records `lo..lo + len`, in order or permuted.
    Epoch {
        lo: u64,
        len: u64,
        epoch: u64,
        permutation: Option<Permutation>,
    },
    /// Records at saved positions (their global numbers).
    Replay(Arc<[Prov]>),
}

impl Order {
    fn len(&self) -> u64 {
        match self {
            Order::Epoch { len, .. } => *len,
            Order::Replay(provs) => provs.len() as u64,
        }
    }

    /// The global number of the `k`-th record of the order.
    fn id(&self, k: u64) -> anyhow::Result<u64> {
        match self {
            Order::Epoch {
                lo, permutation, ..
            } => Ok(lo + permutation.as_ref().map_or(k, |p| p.at(k))),
            Order::Replay(provs) => provs
                .get(k as usize)
                .ok_or_else(|| unsupported(STAGE, "a replay past its positions"))?
                .single(),
        }
    }
}

/// A window's records, in the order's order: each with its global number.
type Window = Vec<(u64, anyhow::Result<Bytes>)>;

/// Stream for [`IndexedTFRecords::records`].
///
/// Saved state: `[position, epoch]`: the records of the order yielded, and the epoch the
/// order was drawn for; then, for each file holding records of the shard, its size and a
/// 32-bit digest of its version (a restore over a file that changed is refused, naming it).
/// A record's position is its global number.
#[must_use = "streams do nothing unless polled"]
struct IndexedRecords {
    files: Arc<Files>,
    /// The files holding the records chosen (their identities are saved).
    touched: std::ops::Range<usize>,
    order: Order,
    parallel_reads: usize,
    /// The next position of the order to put in a window.
    planned: u64,
    windows: FuturesOrdered<BoxFuture<'static, Window>>,
    ready: std::vec::IntoIter<(u64, anyhow::Result<Bytes>)>,
    /// Positions of the order yielded.
    yielded: u64,
    /// The global number of the last record yielded.
    last: Option<u64>,
    stats: Option<Arc<StageCounters>>,
    /// Local files kept open for the epoch's reads, when there are few enough of them.
    kept: Option<Arc<[OpenSlot]>>,
}

/// One record of a window: its place in the window, global number, file, record in the
/// file, and where it lies.
#[derive(Clone, Copy)]
struct Wanted {
    place: usize,
    id: u64,
    file: usize,
    record: u64,
    entry: IndexEntry,
}

/// One ranged read of a window: the records of one file it covers.
struct Read {
    file: usize,
    start: u64,
    end: u64,
    members: Vec<Wanted>,
}

impl IndexedRecords {
    /// The next window of the order: its records, sorted and grouped into ranged reads.
    fn plan(&mut self) -> BoxFuture<'static, Window> {
        let mut out: Vec<Option<(u64, anyhow::Result<Bytes>)>> = Vec::new();
        let mut wanted = Vec::new();
        let mut bytes = 0u64;
        while self.planned < self.order.len() && out.len() < WINDOW_RECORDS && bytes < WINDOW_BYTES
        {
            let place = out.len();
            let k = self.planned;
            self.planned += 1;
            let id = match self.order.id(k) {
                Ok(id) => id,
                Err(e) => {
                    out.push(Some((u64::MAX, Err(e))));
                    continue;
                }
            };
            match self.files.locate(id) {
                Some((file, record, entry)) => {
                    bytes += entry.size;
                    wanted.push(Wanted {
                        place,
                        id,
                        file,
                        record,
                        entry,
                    });
                    out.push(None);
                }
                None => out.push(Some((
                    id,
                    Err(crate::Error::Checkpoint(format!(
                        "a saved position names record {id}, past the {} records of the files",
                        self.files.total()
                    ))
                    .into()),
                ))),
            }
        }
        wanted.sort_by_key(|w| (w.file, w.entry.offset));
        let mut reads: Vec<Read> = Vec::new();
        for w in wanted {
            let end = w.entry.offset + w.entry.size;
            if let Some(read) = reads.last_mut()
                && read.file == w.file
                && w.entry.offset <= read.end.saturating_add(COALESCE_GAP)
                && end.max(read.end) - read.start <= MAX_READ
            {
                read.end = read.end.max(end);
                read.members.push(w);
                continue;
            }
            reads.push(Read {
                file: w.file,
                start: w.entry.offset,
                end,
                members: vec![w],
            });
        }
        let files = Arc::clone(&self.files);
        let (parallel, stats) = (self.parallel_reads, self.stats.clone());
        let kept = self.kept.clone();
        let ids: Vec<u64> = out
            .iter()
            .map(|slot| slot.as_ref().map_or(u64::MAX, |(id, _)| *id))
            .collect();
        let read = async move {
            let mut reads = stream::iter(reads.into_iter().map(|read| {
                let location = files.locations[read.file].clone();
                let slot = kept.as_ref().map(|kept| Arc::clone(&kept[read.file]));
                async move {
                    let range = read.start..read.end;
                    let bytes = match (&location, slot) {
                        (Location::Local(path), Some(slot)) => {
                            crate::storage::local::read_range_kept(path, slot, range.clone())
                                .await
                                .map_err(|e| {
                                    anyhow::anyhow!("reading {location} at {range:?}: {e}")
                                })
                        }
                        _ => crate::storage::read_range(location, range).await,
                    };
                    (read, bytes)
                }
            }))
            .buffer_unordered(parallel);
            while let Some((read, bytes)) = reads.next().await {
                let name = &files.names[read.file];
                if let (Ok(bytes), Some(stats)) = (&bytes, &stats) {
                    stats.add_bytes(bytes.len() as u64);
                }
                for w in &read.members {
                    let record = match &bytes {
                        Ok(bytes) => cut(bytes, read.start, w, name),
                        Err(e) => Err(anyhow::anyhow!(
                            "reading record {} of {name} (offset {}, {} bytes): {e:#}",
                            w.record,
                            w.entry.offset,
                            w.entry.size
                        )),
                    };
                    out[w.place] = Some((w.id, record));
                }
            }
            out.into_iter()
                .map(|slot| {
                    slot.unwrap_or_else(|| {
                        (
                            u64::MAX,
                            Err(anyhow::anyhow!("{STAGE}: a record was not read")),
                        )
                    })
                })
                .collect::<Window>()
        };
        // A task of its own: the reads go on, and their CRCs are checked, while the consumer
        // works on the window before (dropping the stream aborts it).
        let task = crate::runtime::spawn(STAGE, read);
        Box::pin(async move {
            let failed = match task {
                Ok(task) => match task.await {
                    Ok(window) => return window,
                    Err(e) => crate::runtime::join_error(STAGE, e),
                },
                Err(e) => e,
            };
            // Every record of the window gets the error: none is lost quietly.
            ids.into_iter()
                .map(|id| (id, Err(anyhow::anyhow!("{failed:#}"))))
                .collect()
        })
    }
}

/// The payload of record `w` out of `bytes` (a read from offset `start`), its frame checked
/// against its CRCs and the index's size.
fn cut(bytes: &Bytes, start: u64, w: &Wanted, name: &str) -> anyhow::Result<Bytes> {
    let data_loss = |offset: u64, message: String| -> anyhow::Error {
        Error::DataLoss {
            path: name.to_string(),
            record: w.record,
            offset,
            message,
            looks_compressed: None,
            skipped: None,
        }
        .into()
    };
    let IndexEntry { offset, size } = w.entry;
    if size < FRAME_OVERHEAD {
        // Refused when the index was opened; never sliced short.
        return Err(data_loss(offset, format!("an index entry of {size} bytes")));
    }
    let from = (offset - start) as usize;
    let Some(frame) = bytes.get(from..from.saturating_add(size as usize)) else {
        return Err(data_loss(
            offset,
            format!(
                "the index's record of {size} bytes runs past the end of the file ({} bytes): \
                 truncated record",
                start + bytes.len() as u64
            ),
        ));
    };
    let le = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if masked_crc32c(&frame[..8]) != le(&frame[8..12]) {
        return Err(data_loss(offset, "corrupted record".into()));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&frame[..8]);
    let len = u64::from_le_bytes(len);
    if len.checked_add(FRAME_OVERHEAD) != Some(size) {
        return Err(data_loss(
            offset,
            format!(
                "the record's header says {} bytes framed, the index {size} (an index of \
                 another file, or a stale one?)",
                len.saturating_add(FRAME_OVERHEAD)
            ),
        ));
    }
    let payload_end = 12 + len as usize;
    if masked_crc32c(&frame[12..payload_end]) != le(&frame[payload_end..]) {
        return Err(data_loss(offset + 12, "corrupted record".into()));
    }
    let from = from + 12;
    Ok(bytes.slice(from..from + len as usize))
}

impl Unpin for IndexedRecords {}

impl Stream for IndexedRecords {
    type Item = anyhow::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            while this.windows.len() < WINDOWS_AHEAD && this.planned < this.order.len() {
                let window = this.plan();
                this.windows.push_back(window);
            }
            if let Some((id, record)) = this.ready.next() {
                this.yielded += 1;
                this.last = Some(id);
                return Poll::Ready(Some(record));
            }
            match ready!(this.windows.poll_next_unpin(cx)) {
                Some(window) => this.ready = window.into_iter(),
                None => return Poll::Ready(None),
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.order.len() - self.yielded) as usize;
        (left, Some(left))
    }
}

impl Resumable for IndexedRecords {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        match &self.order {
            Order::Epoch { epoch, .. } => Ok(State::new(STAGE)
                .words([self.yielded, *epoch])
                .words(self.files.identity_words(self.touched.clone()))),
            Order::Replay(_) => Err(crate::engine::replaying(STAGE)),
        }
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.last
            .map(Prov::at)
            .ok_or_else(|| unsupported(STAGE, "no element yielded yet"))
    }
}
