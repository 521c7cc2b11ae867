//! Data-parallel training: each of `world_size` ranks reads its share of a dataset, every rank
//! takes the same number of steps, and what the ranks read together can be checked.
//!
//! - [`Distribute`]: a rank, the world size, a [`ShardPolicy`] (tf.data's auto-shard: by file
//!   when there are enough files, else by element), a [`Remainder`] policy (drop or pad) and
//!   an optional seeded rotation of the shard assignment each epoch (DALI's).
//! - [`ShardSource`]: what can be sharded before reading (a list of files and how many
//!   elements each holds). [`TFRecordDataset`](crate::format::TFRecordDataset) is one; any
//!   dataset of known cardinality is one too, read whole and sharded by element
//!   ([`Dataset::distribute`]).
//! - [`ShardPlan`]: the assignment, made once the element counts are known: its
//!   [`dataset`](ShardPlan::dataset) yields [`Distributed`] elements (padding marked), as many
//!   on every rank, its [`coverage`](ShardPlan::coverage) summarises what a rank read, and
//!   [`resume`](ShardPlan::resume) splits the rest of an interrupted epoch over a new world
//!   size.
//! - [`Coverage`] and [`CoverageReport`]: per-rank summaries and their merge.
//!
//! # Where finer shards plug in
//!
//! [`ShardPolicy::Record`] needs a source that can start reading a file at a record without
//! reading what comes before it ([`ShardSource::seekable_records`]: a TFRecord index;
//! [`IndexedTFRecords`](crate::format::IndexedTFRecords) is such a source), and
//! [`ShardPolicy::RowGroup`] one that knows its files' row groups
//! ([`ShardSource::row_groups`]: Parquet metadata; with the `parquet` feature,
//! `ParquetDataset::shard_source` makes such a source, whose elements are batches of rows:
//! see `format::parquet::ParquetShards` for why). Until a source says so, those policies are
//! refused with an error naming the source and the policy; the assignment (contiguous runs of
//! records, balanced row groups) is done here, the reading by [`ShardSource::read`].

mod assign;
mod coverage;
mod tfrecord;
mod units;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::engine::{Cardinality, Dataset};
use crate::error::Error;
use crate::hash::mix64;

pub use coverage::{Coverage, CoverageReport, Gap, Overlap};
pub use tfrecord::clear_count_cache;

/// How a dataset is split between ranks (tf.data's `AutoShardPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ShardPolicy {
    /// By file when there are at least `world_size` files holding elements (unless the
    /// source has row groups and dealing them balances the ranks better: a few large files
    /// among small ones); else by record or row group where the source supports it; else by
    /// element (tf.data's `AUTO`).
    Auto,
    /// Whole files: each rank reads only its files, so nothing is read twice (tf.data's
    /// `FILE`). Refused with fewer files holding elements than ranks.
    File,
    /// Contiguous runs of records: each rank reads `1/world_size` of the records, starting in
    /// the middle of a file where needed. Needs a source that can seek to a record
    /// ([`ShardSource::seekable_records`], e.g. with a TFRecord index, or HDF5 rows through
    /// `Hdf5Dataset::shard_source`, feature `hdf5`).
    Record,
    /// Parquet row groups, balanced over the ranks by their element counts, each read by one
    /// rank only. Needs a source that knows them ([`ShardSource::row_groups`]; Parquet
    /// files through `ParquetDataset::shard_source`, feature `parquet`, where an element is
    /// a batch of rows).
    RowGroup,
    /// Every rank reads everything and keeps every `world_size`-th element (tf.data's
    /// `DATA`): works for any source, at `world_size` times the reading.
    Element,
}

/// What ranks with more elements than others do, so that all take the same number of steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Remainder {
    /// Every rank stops at the smallest rank's count: the other ranks' last elements are not
    /// read this epoch.
    Drop,
    /// Every rank goes on to the largest rank's count, repeating elements from the start of
    /// its own shard, each marked [`Distributed::padded`] (give them no weight in the loss).
    Pad,
}

/// Which share of a dataset this process reads: its `rank` among `world_size` ranks, and how.
///
/// See [`Dataset::distribute`] and [`ShardPlan`] for examples.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Distribute {
    rank: usize,
    world_size: usize,
    policy: ShardPolicy,
    remainder: Remainder,
    rotation: Option<u64>,
}

impl Distribute {
    /// Rank `rank` of `world_size`, with [`ShardPolicy::Auto`], [`Remainder::Drop`] and no
    /// rotation.
    ///
    /// # Panics
    ///
    /// If `world_size` is 0 or `rank >= world_size`.
    pub fn new(rank: usize, world_size: usize) -> Self {
        assert!(world_size > 0, "Distribute: world_size must be at least 1");
        assert!(
            rank < world_size,
            "Distribute: rank {rank} is not below world_size {world_size}"
        );
        Distribute {
            rank,
            world_size,
            policy: ShardPolicy::Auto,
            remainder: Remainder::Drop,
            rotation: None,
        }
    }

    /// How to split the data (default [`ShardPolicy::Auto`]).
    pub fn policy(mut self, policy: ShardPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Drop or pad to equal steps (default [`Remainder::Drop`]).
    pub fn remainder(mut self, remainder: Remainder) -> Self {
        self.remainder = remainder;
        self
    }

    /// Deals the shards to the ranks in a different order each epoch, drawn from `seed` and
    /// the epoch number (DALI's `shuffle_after_epoch` of the shard assignment), so a rank
    /// sees other files each epoch. The shards themselves are balanced once, so every epoch
    /// has the same number of steps. Applies to shards of files, records and row groups
    /// (not to [`ShardPolicy::Element`], where every rank reads everything).
    pub fn rotate(mut self, seed: u64) -> Self {
        self.rotation = Some(seed);
        self
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The assignment of `source`'s elements to the ranks: counts the elements of each file
    /// ([`ShardSource::count`]; for TFRecord files a scan of each file once, cached) and
    /// chooses the policy.
    ///
    /// # Errors
    ///
    /// When counting fails (naming the file), or the policy cannot be applied (too few files
    /// for [`ShardPolicy::File`], a source that cannot seek for [`ShardPolicy::Record`],
    /// one without row groups for [`ShardPolicy::RowGroup`], a rank with nothing to pad
    /// from): an [`Error::InvalidArgument`] saying which.
    pub async fn plan<S: ShardSource>(&self, source: S) -> anyhow::Result<ShardPlan<S>> {
        let counts = source.count().await?;
        self.plan_with_counts(source, counts)
    }

    /// [`plan`](Distribute::plan) with the element counts of the source's files given (from
    /// an index, or a manifest written with the data).
    ///
    /// # Errors
    ///
    /// As [`plan`](Distribute::plan), and when `counts` has not one count per file.
    pub fn plan_with_counts<S: ShardSource>(
        &self,
        source: S,
        counts: Vec<u64>,
    ) -> anyhow::Result<ShardPlan<S>> {
        let names = source.names();
        if names.len() != counts.len() {
            return Err(invalid(format!(
                "{} counts for {} files",
                counts.len(),
                names.len()
            )));
        }
        let units = counts
            .iter()
            .enumerate()
            .map(|(file, &n)| Unit {
                file,
                start: 0,
                end: n,
            })
            .collect();
        ShardPlan::new(
            self.clone(),
            Arc::new(source),
            names.into(),
            counts.into(),
            units,
            0,
            BTreeMap::new(),
        )
    }
}

fn invalid(message: String) -> anyhow::Error {
    Error::InvalidArgument(format!("distribute: {message}")).into()
}

/// An element of a [`ShardPlan::dataset`]: the element, whether it is padding, and where it
/// came from (for [`Coverage`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Distributed<T> {
    /// The element.
    pub item: T,
    /// A repeat of an element of this rank's shard, added so that every rank takes the same
    /// number of steps ([`Remainder::Pad`]): weigh it 0 in the loss.
    pub padded: bool,
    /// The index of its file in the source's list.
    pub file: usize,
    /// Its index in that file.
    pub record: u64,
    /// How much of it an interrupted run of the epoch already took: 0, but for a document
    /// [`pack`](Dataset::pack) had begun to pass on when the run was stopped, handed on by
    /// an elastic resume ([`ShardPlan::resume`]) to go on where it was: the number of its
    /// tokens already in sequences the training loop took (`pack` starts after them).
    pub offset: u64,
}

impl<T> Distributed<T> {
    /// The same element transformed by `f`, with its marks: for a `map` after
    /// [`ShardPlan::dataset`] (`ds.map(|d| d.map(parse))`).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Distributed<U> {
        Distributed {
            item: f(self.item),
            padded: self.padded,
            file: self.file,
            record: self.record,
            offset: self.offset,
        }
    }

    /// `1.0` for a real element, `0.0` for padding: a loss weight.
    pub fn weight(&self) -> f32 {
        if self.padded { 0.0 } else { 1.0 }
    }
}

/// Where a segment of a packed sequence came from: tokens `start..end` of the document at
/// `file`, `record` of a [`ShardPlan::dataset`] (see [`Packed::pieces`](crate::text::Packed)),
/// for [`Coverage::add_pieces`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Piece {
    /// The index of the document's file in the source's list.
    pub file: usize,
    /// The document's index in that file.
    pub record: u64,
    /// The first of its tokens in the segment.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// Whether the segment ends the document (no token of it is left for a later sequence).
    pub last: bool,
    /// Whether the document is padding ([`Distributed::padded`]).
    pub padded: bool,
}

/// Elements `start..end` of file `file` of a [`ShardSource`]: what a rank is given to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Unit {
    /// The file's index in [`ShardSource::names`].
    pub file: usize,
    /// The first element (record, row) to read.
    pub start: u64,
    /// One past the last.
    pub end: u64,
}

impl Unit {
    /// How many elements it holds.
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A dataset that can be split between ranks before it is read: a list of files, how many
/// elements each holds, and a reader of part of a file.
///
/// Implemented by [`TFRecordDataset`](crate::format::TFRecordDataset) (by file),
/// [`IndexedTFRecords`](crate::format::IndexedTFRecords) (by record), Parquet files through
/// `ParquetDataset::shard_source` (by row group; feature `parquet`) and, through
/// [`Dataset::distribute`], by any dataset of known cardinality (one "file", by element).
pub trait ShardSource: Send + Sync + 'static {
    /// The elements it yields.
    type Item: Send + 'static;

    /// Its files' names (in errors and coverage reports), in order.
    fn names(&self) -> Vec<String>;

    /// How many elements each file holds. It may be costly (reading the files); it is called
    /// once per [`Distribute::plan`].
    fn count(&self) -> BoxFuture<'_, anyhow::Result<Vec<u64>>>;

    /// The elements `unit.start..unit.end` of file `unit.file`, exactly those, in order. A
    /// source that cannot seek may read and drop the first `unit.start` (a resumed epoch
    /// asks for that); with [`seekable_records`](ShardSource::seekable_records) it must
    /// not.
    fn read(&self, unit: Unit) -> Dataset<Self::Item>;

    /// Whether [`read`](ShardSource::read) starts at a record without reading the ones
    /// before it (a TFRecord file with an index): [`ShardPolicy::Record`] is refused
    /// otherwise. Default `false`.
    fn seekable_records(&self) -> bool {
        false
    }

    /// The sizes (in elements) of each file's row groups, in order, when the source has
    /// them (Parquet's metadata): [`ShardPolicy::RowGroup`] is refused otherwise. Default
    /// `None`.
    fn row_groups(&self) -> Option<Vec<Vec<u64>>> {
        None
    }
}

/// Where a rank's elements come from, each epoch: made by [`Distribute::plan`].
///
/// # Examples
///
/// Three ranks over four TFRecord files of uneven sizes (here all in one process); each
/// rank reads only its files, pads to the largest rank's count, and the coverage check
/// confirms that together they read every record once:
///
/// ```
/// use streamload::distribute::{Coverage, CoverageReport, Distribute, Remainder};
/// use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let mut files = Vec::new();
/// for (f, n) in [5, 2, 7, 3].into_iter().enumerate() {
///     let path = dir.path().join(format!("part-{f}.tfrecord"));
///     let mut writer = TFRecordWriter::new(tokio::fs::File::create(&path).await?, Compression::None);
///     for r in 0..n {
///         writer.write(format!("{f}/{r}").as_bytes()).await?;
///     }
///     writer.finish().await?;
///     files.push(path);
/// }
///
/// let mut summaries = Vec::new();
/// for rank in 0..3 {
///     let dist = Distribute::new(rank, 3).remainder(Remainder::Pad);
///     let plan = dist.plan(TFRecordDataset::new(&files)).await?;
///     let batches = plan.dataset().batch(2);
///     // Shards of 7, 5 and 2 + 3 records, padded to 7: 4 batches each, known before the epoch.
///     assert_eq!(batches.cardinality().finite(), Some(4));
///     let mut coverage = plan.coverage(0);
///     for batch in batches.collect().await? {
///         for element in &batch {
///             coverage.add(element);
///         }
///     }
///     summaries.push(coverage);
/// }
/// let report = CoverageReport::merge(&summaries)?;
/// assert!(report.disjoint() && report.complete(), "{report}");
/// # anyhow::Ok(()) }).unwrap();
/// ```
pub struct ShardPlan<S> {
    inner: Arc<Plan>,
    source: Arc<S>,
}

impl<S> Clone for ShardPlan<S> {
    fn clone(&self) -> Self {
        ShardPlan {
            inner: Arc::clone(&self.inner),
            source: Arc::clone(&self.source),
        }
    }
}

impl<S> fmt::Debug for ShardPlan<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardPlan")
            .field("rank", &self.inner.dist.rank)
            .field("world_size", &self.inner.dist.world_size)
            .field("policy", &self.inner.policy)
            .field("elements_per_rank", &self.inner.target)
            .finish_non_exhaustive()
    }
}

/// A plan without its source.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) dist: Distribute,
    /// The policy applied (never `Auto`).
    pub(crate) policy: ShardPolicy,
    pub(crate) names: Arc<[String]>,
    /// Elements per file.
    pub(crate) counts: Arc<[u64]>,
    /// What is distributed: whole files, runs of records, row groups, or an interrupted
    /// epoch's rest.
    pub(crate) units: Vec<Unit>,
    /// By shard: the units it reads, in order (empty for `Element`).
    pub(crate) shards: Vec<Vec<usize>>,
    /// Elements each rank yields per epoch.
    pub(crate) target: u64,
    /// Names and counts hashed: summaries of other data are told apart.
    pub(crate) listing: u64,
    /// 0 for a fresh plan, one more for each [`ShardPlan::resume`].
    pub(crate) phase: u32,
    /// An elastic resume's documents taken in part (file, record: tokens taken), from
    /// [`Coverage::add_packed`].
    pub(crate) offsets: Arc<BTreeMap<(usize, u64), u64>>,
}

impl<S: ShardSource> ShardPlan<S> {
    fn new(
        dist: Distribute,
        source: Arc<S>,
        names: Arc<[String]>,
        counts: Arc<[u64]>,
        units: Vec<Unit>,
        phase: u32,
        offsets: BTreeMap<(usize, u64), u64>,
    ) -> anyhow::Result<Self> {
        let policy = assign::resolve(&dist, &*source, &units, phase)?;
        let (units, shards) = assign::shards(&dist, policy, &*source, &counts, units)?;
        let target = assign::target(&dist, policy, &units, &shards)?;
        let listing = listing_hash(&names, &counts);
        Ok(ShardPlan {
            inner: Arc::new(Plan {
                dist,
                policy,
                names,
                counts,
                units,
                shards,
                target,
                listing,
                phase,
                offsets: Arc::new(offsets),
            }),
            source,
        })
    }

    /// The policy applied (what [`ShardPolicy::Auto`] chose).
    pub fn policy(&self) -> ShardPolicy {
        self.inner.policy
    }

    /// How many elements this rank (and every other) yields each epoch, padding included:
    /// the dataset's [`cardinality`](Dataset::cardinality).
    pub fn elements_per_rank(&self) -> u64 {
        self.inner.target
    }

    /// The units this rank reads in epoch `epoch`, in order (for `Element`, every unit: the
    /// rank keeps every `world_size`-th element of them).
    pub fn units(&self, epoch: u64) -> Vec<Unit> {
        self.inner
            .rank_units(epoch)
            .into_iter()
            .map(|u| self.inner.units[u])
            .collect()
    }

    /// This rank's elements, each epoch (each [`iter`](Dataset::iter)) as many, marked
    /// [`Distributed`]: its files read in order (add [`prefetch`](Dataset::prefetch) to
    /// read ahead), cut at or padded to [`elements_per_rank`](ShardPlan::elements_per_rank)
    /// elements. `batch(n)` after it yields as many batches on every rank.
    ///
    /// Keep operations that drop or add elements (`filter`, `flat_map`) before it, in the
    /// source, or after the `batch`: the count is what every rank agrees on.
    ///
    /// # Checkpoints
    ///
    /// Resumable as any dataset ([`Epoch::checkpoint`](crate::Epoch::checkpoint)): it saves
    /// which of its units it is in and the reader's position. The recipe's fingerprint
    /// holds the rank, the world size and the assignment, so a checkpoint restores only on
    /// the rank that took it (another rank's is refused); for another world size see
    /// [`resume`](ShardPlan::resume).
    ///
    /// # Errors
    ///
    /// The source's errors, in place; an element count that differs from the plan's (a file
    /// that changed since it was counted) is an
    /// [`Error::InvalidArgument`] at the end of the epoch
    /// (`assert_cardinality`).
    pub fn dataset(&self) -> Dataset<Distributed<S::Item>> {
        units::dataset(Arc::clone(&self.inner), Arc::clone(&self.source))
    }

    /// An empty summary of what this rank reads in epoch `epoch`: [`add`](Coverage::add)
    /// each element the training loop takes from [`dataset`](ShardPlan::dataset) to it,
    /// then gather every rank's summaries (serde-serializable, a few words per file) and
    /// [`merge`](CoverageReport::merge) them.
    pub fn coverage(&self, epoch: u64) -> Coverage {
        Coverage::new(&self.inner, epoch)
    }

    /// The rest of an interrupted epoch, split over this plan's ranks (elastic resume): `old`
    /// are the summaries every rank of the interrupted run kept up to its last checkpoint
    /// (each rank's [`Coverage`], saved with its checkpoint). The records no old rank took
    /// are dealt to the new ranks (by runs of records, balanced), so that no element of the
    /// epoch is read twice or skipped; the returned plan's
    /// [`dataset`](ShardPlan::dataset) yields this rank's share (equal steps again) and
    /// its [`coverage`](ShardPlan::coverage) adds to the old summaries: merge them all.
    /// The next epochs use the full plan (this one).
    ///
    /// A document [`pack`](Dataset::pack) had passed on in part (the summaries were filled
    /// with [`Coverage::add_pieces`]) is dealt with the rest, with the number of its tokens
    /// taken as its [`Distributed::offset`]: `pack` goes on from there.
    ///
    /// Each file of the rest is read from its first record not taken: a source without
    /// [`seekable_records`](ShardSource::seekable_records) reads and drops the records
    /// before it (a TFRecord file without an index is scanned up to there).
    ///
    /// # Errors
    ///
    /// [`Error::Checkpoint`], refusing what cannot be resumed
    /// exactly: summaries of another dataset or of different epochs, a rank missing or
    /// given twice, a rank whose elements of a file are scattered over more than 4,096 runs
    /// of records (a shuffle between the dataset and the training loop: what it took is not
    /// kept by position) or were taken twice, two ranks that took the same records, or an
    /// epoch sharded by element.
    pub fn resume(&self, old: &[Coverage]) -> anyhow::Result<ShardPlan<S>> {
        let (rest, phase, offsets) = coverage::rest(&self.inner, old)?;
        ShardPlan::new(
            self.inner.dist.clone().rotate_none(),
            Arc::clone(&self.source),
            Arc::clone(&self.inner.names),
            Arc::clone(&self.inner.counts),
            rest,
            phase,
            offsets,
        )
    }
}

impl Distribute {
    fn rotate_none(mut self) -> Self {
        self.rotation = None;
        self
    }
}

impl Plan {
    /// The shard rank `rank` reads in `epoch`.
    pub(crate) fn shard_of(&self, rank: usize, epoch: u64) -> usize {
        match self.dist.rotation {
            None => rank,
            Some(seed) => assign::rotation(seed, epoch, self.dist.world_size)[rank],
        }
    }

    /// This rank's units in `epoch`, in reading order.
    pub(crate) fn rank_units(&self, epoch: u64) -> Vec<usize> {
        if self.policy == ShardPolicy::Element {
            return (0..self.units.len()).collect();
        }
        self.shards
            .get(self.shard_of(self.dist.rank, epoch))
            .cloned()
            .unwrap_or_default()
    }

    /// A word of everything the recipe depends on (its checkpoints name it).
    pub(crate) fn key(&self) -> u64 {
        // Every field named: one added later does not build until it is keyed or left out.
        // The names and counts are keyed as `listing`; the shards and the phase follow from
        // the units; the policy asked for is keyed as the one applied.
        let Plan {
            dist,
            policy,
            names: _,
            counts: _,
            units,
            shards: _,
            target,
            listing,
            phase: _,
            offsets,
        } = self;
        let Distribute {
            rank,
            world_size,
            policy: _,
            remainder,
            rotation,
        } = dist;
        let params = (
            listing, target, rank, world_size, rotation, remainder, policy,
        );
        crate::engine::params_key(&(params, units, &**offsets))
    }
}

/// Names and counts, hashed.
fn listing_hash(names: &[String], counts: &[u64]) -> u64 {
    names
        .iter()
        .zip(counts)
        .fold(0xCBF2_9CE4_8422_2325u64, |h, (name, &n)| {
            let h = name
                .bytes()
                .fold(h, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3));
            mix64(h ^ mix64(n))
        })
}

/// A dataset of known cardinality as a [`ShardSource`]: one "file", read whole.
struct Whole<T> {
    dataset: Dataset<T>,
    count: u64,
}

impl<T: Send + 'static> ShardSource for Whole<T> {
    type Item = T;

    fn names(&self) -> Vec<String> {
        vec![format!("{} (the dataset)", self.dataset.name())]
    }

    fn count(&self) -> BoxFuture<'_, anyhow::Result<Vec<u64>>> {
        Box::pin(futures::future::ready(Ok(vec![self.count])))
    }

    fn read(&self, unit: Unit) -> Dataset<T> {
        let ds = if unit.start > 0 {
            self.dataset.skip(unit.start as i64)
        } else {
            self.dataset.clone()
        };
        ds.take(unit.len() as i64)
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// This rank's share of the dataset, by element (tf.data's `DATA` auto-shard): every rank
    /// reads the whole dataset and keeps every `world_size`-th element, as
    /// [`shard`](Dataset::shard) does, then drops or pads so that every rank yields as many
    /// (see [`Distribute`]). The dataset's cardinality must be known. For files, shard before
    /// reading instead: [`Distribute::plan`] with a [`ShardSource`] such as
    /// [`TFRecordDataset`](crate::format::TFRecordDataset).
    ///
    /// ```
    /// use streamload::distribute::{Distribute, Remainder};
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 10);
    /// let rank = |r| ds.distribute(&Distribute::new(r, 4).remainder(Remainder::Pad));
    /// let rank3 = rank(3)?.dataset().collect().await?;
    /// let rank3: Vec<(i64, bool)> = rank3.into_iter().map(|d| (d.item, d.padded)).collect();
    /// assert_eq!(rank3, [(3, false), (7, false), (3, true)]); // padded to rank 0's three
    /// assert_eq!(rank(0)?.dataset().cardinality().finite(), Some(3));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the cardinality is not
    /// known (count the dataset and use
    /// [`assert_cardinality`](Dataset::assert_cardinality)), or the policy asked for is not
    /// `Auto` or `Element`.
    pub fn distribute(
        &self,
        distribute: &Distribute,
    ) -> anyhow::Result<ShardPlan<impl ShardSource<Item = T> + use<T>>> {
        let Cardinality::Finite(count) = self.cardinality() else {
            return Err(invalid(format!(
                "the cardinality of `{}` is not known ({:?}): count it once and add \
                 .assert_cardinality(n)",
                self.name(),
                self.cardinality()
            )));
        };
        let whole = Whole {
            dataset: self.clone(),
            count,
        };
        distribute.plan_with_counts(whole, vec![count])
    }
}
