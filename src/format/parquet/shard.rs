//! Parquet files as a [`ShardSource`]: [`ParquetShards`], for
//! [`ShardPolicy::RowGroup`](crate::distribute::ShardPolicy::RowGroup).
//!
//! See [`ParquetShards`] for what an element is and why.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::{self, Stream, StreamExt};

use super::{ParquetDataset, Plan, RecordBatch, STAGE, plan, read_unit};
use crate::checkpoint::{Prov, State};
use crate::distribute::{ShardSource, Unit};
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Source, Start as SourceStart};
use crate::engine::{Resumable, unsupported};
use crate::error::Error;
use crate::hash::mix64;
use crate::runtime;

/// Parquet files whose footers have been read, as a [`ShardSource`] of batches: made by
/// [`ParquetDataset::shard_source`].
///
/// # The element is a batch
///
/// Equal steps and coverage count *elements*, and a Parquet dataset yields
/// [`RecordBatch`]es of many rows. Here the element is the batch of at most `batch_size`
/// rows ([`ParquetDataset::batch_size`]) that never spans a row group, exactly as
/// [`ParquetDataset`] cuts them: a row group of `r` rows is `ceil(r / batch_size)` elements
/// (the last one shorter unless `batch_size` divides `r`). So:
///
/// - the counts (of every file, of every row group) come from the footers alone, before the
///   epoch: every rank yields the same number of batches, known up front;
/// - a rank's share is whole row groups, balanced over the ranks by their batch counts (about
///   their rows over `batch_size`): no row group is decoded by two ranks;
/// - padding ([`Remainder::Pad`](crate::distribute::Remainder::Pad)) repeats whole batches of
///   the rank's own shard, each marked [`Distributed::padded`](crate::distribute::Distributed):
///   weigh all its rows 0 in the loss;
/// - [`Distributed::record`](crate::distribute::Distributed) is the batch's index in its file
///   (batches numbered over the file's row groups in order), which is what coverage
///   fingerprints;
/// - a checkpoint saves how many batches of the rank's current row group (or run) were
///   yielded: a restored rank fetches that row group again and skips the rows before
///   (ranged reads of its column chunks only, nothing before it); an elastic resume
///   ([`ShardPlan::resume`](crate::distribute::ShardPlan::resume)) deals out the batches no
///   rank took, as runs of batches, each read from its own row group on.
///
/// The other choice, rows as elements, would count and pad single rows: either a batch per
/// row (slow) or equal steps that are not equal batch counts once batched. With batches as
/// elements, `plan.dataset()` is already batched: do not `batch` it again unless the batches
/// of batches are what you want.
///
/// The footers are read once, by [`ParquetDataset::shard_source`] (local paths and object
/// store URLs alike, through [`storage`](crate::storage)): a plan made from the source, and
/// every epoch of its dataset, reads no footer again.
///
/// # Examples
///
/// Two ranks over two files of 1,000 and 300 rows (row groups of 250 rows, batches of 100):
/// [`ShardPolicy::Auto`](crate::distribute::ShardPolicy::Auto) shards by row group, as the
/// files are too uneven to give each rank one; both ranks take 9 batches, rank 1's last two
/// (padding) marked.
///
/// ```
/// use std::sync::Arc;
/// use streamload::distribute::{CoverageReport, Distribute, Remainder, ShardPolicy};
/// use streamload::format::parquet::{ParquetDataset, RecordBatch};
/// use streamload::format::parquet::arrow_array::{ArrayRef, Int64Array};
///
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let mut files = Vec::new();
/// for (f, rows) in [1000, 300].into_iter().enumerate() {
///     let path = dir.path().join(format!("part-{f}.parquet"));
///     let id: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows));
///     let batch = RecordBatch::try_from_iter([("id", id)])?;
///     let props = parquet::file::properties::WriterProperties::builder()
///         .set_max_row_group_row_count(Some(250))
///         .build();
///     let file = std::fs::File::create(&path)?;
///     let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props))?;
///     writer.write(&batch)?;
///     writer.close()?;
///     files.push(path);
/// }
/// // Row groups of 250, 250, 250, 250 and 250, 50 rows: 3, 3, 3, 3 and 3, 1 batches of 100.
/// let source = ParquetDataset::new(&files).batch_size(100).shard_source().await?;
///
/// let mut summaries = Vec::new();
/// for rank in 0..2 {
///     let plan = Distribute::new(rank, 2)
///         .policy(ShardPolicy::Auto)
///         .remainder(Remainder::Pad)
///         .plan(source.clone())
///         .await?;
///     assert_eq!(plan.policy(), ShardPolicy::RowGroup);
///     assert_eq!(plan.elements_per_rank(), 9); // 9 + 7 batches, padded to 9
///     let mut coverage = plan.coverage(0);
///     let mut rows = 0.0; // rows weighted for the loss: padding weighs 0
///     for batch in plan.dataset().collect().await? {
///         coverage.add(&batch);
///         rows += batch.item.num_rows() as f32 * batch.weight();
///     }
///     assert_eq!(rows, [750.0, 550.0][rank]);
///     summaries.push(coverage);
/// }
/// let report = CoverageReport::merge(&summaries)?;
/// assert!(report.disjoint() && report.complete(), "{report}");
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct ParquetShards {
    inner: Arc<Shards>,
}

#[derive(Debug)]
struct Shards {
    config: Arc<ParquetDataset>,
    plan: Arc<Plan>,
    names: Vec<String>,
    /// By file, by row group: its index in `plan.units`.
    units: Vec<Vec<usize>>,
    /// By file, by row group: its batches.
    batches: Vec<Vec<u64>>,
    /// The configuration, the files' layout and versions, hashed (checkpoints name it).
    key: u64,
}

impl ParquetDataset {
    /// The files as a [`ShardSource`] for [`Distribute::plan`](crate::distribute::Distribute::plan):
    /// reads every file's footer once, here (a few files at once), so that plans and epochs
    /// made from it know every row group's size without reading again. Its elements are
    /// batches of at most [`batch_size`](ParquetDataset::batch_size) rows of one row group,
    /// of the [`columns`](ParquetDataset::columns) asked for (see [`ParquetShards`]).
    ///
    /// # Errors
    ///
    /// A file whose footer cannot be read (missing, not Parquet, damaged, without a column
    /// asked for): the error names it. A dataset with its own
    /// [`shard`](ParquetDataset::shard) is an [`Error::InvalidArgument`]: the plan decides
    /// what each rank reads.
    ///
    /// # Cancellation
    ///
    /// Dropping the future stops the footer reads in flight.
    pub async fn shard_source(&self) -> anyhow::Result<ParquetShards> {
        if self.shard != (1, 0) {
            return Err(Error::InvalidArgument(format!(
                "ParquetDataset::shard_source: the dataset is already sharded ({} of {}); \
                 leave sharding to the distribute plan",
                self.shard.1, self.shard.0
            ))
            .into());
        }
        let config = Arc::new(self.clone());
        let (plan, errors) = plan(&config).await;
        if let Some(e) = errors.into_iter().next() {
            return Err(e.context("reading the Parquet footers for a distribute plan"));
        }
        let mut units: Vec<Vec<usize>> = plan
            .files
            .iter()
            .map(|meta| {
                vec![usize::MAX; meta.as_ref().map_or(0, |m| m.metadata().num_row_groups())]
            })
            .collect();
        for (at, unit) in plan.units.iter().enumerate() {
            if let Some(slot) = units
                .get_mut(unit.file)
                .and_then(|groups| groups.get_mut(unit.row_group))
            {
                *slot = at;
            }
        }
        let size = config.batch_size as u64;
        let batches: Vec<Vec<u64>> = plan
            .files
            .iter()
            .map(|meta| {
                meta.as_ref().map_or_else(Vec::new, |m| {
                    m.metadata()
                        .row_groups()
                        .iter()
                        .map(|g| (g.num_rows().max(0) as u64).div_ceil(size))
                        .collect()
                })
            })
            .collect();
        let mut key = mix64(super::fingerprint(&config) ^ plan.layout);
        for meta in plan.files.iter().flatten() {
            key = mix64(key ^ meta.identity.size);
            key = mix64(key ^ meta.identity.version);
        }
        let names = config.files.iter().map(ToString::to_string).collect();
        Ok(ParquetShards {
            inner: Arc::new(Shards {
                config,
                plan,
                names,
                units,
                batches,
                key,
            }),
        })
    }
}

impl ParquetShards {
    /// The batches of each file's row groups, in order (what [`ShardSource::row_groups`]
    /// answers).
    pub fn batches_per_row_group(&self) -> &[Vec<u64>] {
        &self.inner.batches
    }
}

impl ShardSource for ParquetShards {
    type Item = RecordBatch;

    fn names(&self) -> Vec<String> {
        self.inner.names.clone()
    }

    /// The batches of each file, from the footers read by
    /// [`ParquetDataset::shard_source`] (nothing is read here).
    fn count(&self) -> BoxFuture<'_, anyhow::Result<Vec<u64>>> {
        let counts = self.inner.batches.iter().map(|g| g.iter().sum()).collect();
        Box::pin(futures::future::ready(Ok(counts)))
    }

    /// Batches `unit.start..unit.end` of the file: only the row groups holding them are
    /// fetched, each from the first row wanted.
    fn read(&self, unit: Unit) -> Dataset<RecordBatch> {
        Dataset::from_source(UnitBatches {
            shards: Arc::clone(&self.inner),
            pieces: self.inner.pieces(unit).into(),
            unit,
        })
    }

    /// Each file's row groups, in batches.
    fn row_groups(&self) -> Option<Vec<Vec<u64>>> {
        Some(self.inner.batches.clone())
    }
}

/// One unit's batches: the source of a rank's reader of one file's run of batches.
struct UnitBatches {
    shards: Arc<Shards>,
    pieces: Arc<[Piece]>,
    unit: Unit,
}

impl std::hash::Hash for UnitBatches {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // The files' layout and the unit; the pieces follow from them.
        (
            self.shards.key,
            self.unit.file,
            self.unit.start,
            self.unit.end,
        )
            .hash(state);
    }
}

impl Source for UnitBatches {
    type Out = RecordBatch;
    type Stream = BoxStream<RecordBatch>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Finite(self.unit.len())
    }

    /// The start is the context's (read with its statistics).
    fn open(&self, ctx: &Ctx, _: SourceStart<'_>) -> anyhow::Result<BoxStream<RecordBatch>> {
        let start = match ctx.replaying() {
            Some(provs) => Start::Replay(
                provs
                    .iter()
                    .map(|p| match p {
                        Prov::At(words) if words.len() == 1 => Ok(words[0]),
                        _ => Err(Error::Checkpoint(format!(
                            "a saved position of a Parquet shard is not a batch: {p:?}"
                        ))
                        .into()),
                    })
                    .collect(),
            ),
            None => Start::At(ctx.restoring().map(|s| s.word(0)).transpose()?.unwrap_or(0)),
        };
        Ok(Box::pin(Run::new(
            Arc::clone(&self.shards),
            Arc::clone(&self.pieces),
            start,
            ctx.stats_handle(),
        )))
    }
}

/// The part of a unit in one row group: rows `skip..skip + take` of it, its batches
/// `first..first + n` of the unit.
#[derive(Debug, Clone, Copy)]
struct Piece {
    /// The row group's index in the plan's units.
    at: usize,
    skip: u64,
    take: u64,
    first: u64,
    n: u64,
}

impl Shards {
    fn pieces(&self, unit: Unit) -> Vec<Piece> {
        let size = self.config.batch_size as u64;
        let mut out = Vec::new();
        let mut base = 0u64;
        let groups = self.batches.get(unit.file).map_or(&[][..], Vec::as_slice);
        for (g, &n) in groups.iter().enumerate() {
            let (lo, hi) = (base, base + n);
            base = hi;
            let (a, b) = (unit.start.max(lo), unit.end.min(hi));
            if a < b {
                out.push(Piece {
                    at: self.units[unit.file][g],
                    skip: (a - lo) * size,
                    take: (b - a) * size,
                    first: a - unit.start,
                    n: b - a,
                });
            }
        }
        out
    }
}

/// Where a [`Run`] starts: at a batch of its unit, or replaying saved batches.
enum Start {
    At(u64),
    Replay(Vec<anyhow::Result<u64>>),
}

/// Batches, each with its index in the unit; an error in the place of a row group's batches
/// says the index after them (the next batch once it is passed on).
type Numbered =
    Pin<Box<dyn Stream<Item = Result<(RecordBatch, u64), (anyhow::Error, Option<u64>)>> + Send>>;

/// Stream of a [`ParquetShards`] unit: its row groups fetched (a few ahead) and decoded, the
/// batches numbered within the unit.
#[must_use = "streams do nothing unless polled"]
struct Run {
    inner: Numbered,
    /// The unit's batches yielded (the next one's index).
    next: u64,
    /// The index of the last batch yielded.
    last: Option<u64>,
}

impl Run {
    fn new(
        shards: Arc<Shards>,
        pieces: Arc<[Piece]>,
        start: Start,
        stats: Option<Arc<crate::stats::StageCounters>>,
    ) -> Run {
        let size = shards.config.batch_size;
        let next = match &start {
            Start::At(next) => *next,
            Start::Replay(_) => 0,
        };
        let plan = Arc::clone(&shards.plan);
        let inner: Numbered = match start {
            Start::At(next) => {
                // The pieces from the one holding batch `next`, less the batches before it.
                let todo: Vec<Piece> = pieces
                    .iter()
                    .filter(|p| p.first + p.n > next)
                    .map(|p| {
                        let done = next.saturating_sub(p.first);
                        Piece {
                            skip: p.skip + done * size as u64,
                            take: p.take - done * size as u64,
                            first: p.first + done,
                            n: p.n - done,
                            ..*p
                        }
                    })
                    .collect();
                let ahead = shards.config.num_parallel_reads.resolve().max(1) + 1;
                let loads = stream::iter(todo)
                    .map(move |p| {
                        let task = runtime::spawn(
                            STAGE,
                            read_unit(
                                Arc::clone(&plan),
                                p.at,
                                p.skip,
                                Some(p.take),
                                size,
                                stats.clone(),
                            ),
                        );
                        let end = p.first + p.n;
                        let load = async move {
                            let batches = match task {
                                Ok(task) => {
                                    task.await.map_err(|e| runtime::join_error(STAGE, e))?
                                }
                                Err(e) => Err(e),
                            };
                            let batches = batches?;
                            anyhow::ensure!(
                                batches.len() as u64 == p.n,
                                "{}: a row group gave {} batches, its footer says {}",
                                STAGE,
                                batches.len(),
                                p.n
                            );
                            Ok(batches
                                .into_iter()
                                .zip(p.first..)
                                .map(Ok)
                                .collect::<Vec<_>>())
                        };
                        async move { (load.await, end) }
                    })
                    .buffered(ahead)
                    .flat_map(|(loaded, end)| match loaded {
                        Ok(batches) => stream::iter(batches),
                        Err(e) => stream::iter(vec![Err((e, Some(end)))]),
                    });
                Box::pin(loads)
            }
            Start::Replay(wanted) => {
                let one = move |index: anyhow::Result<u64>| {
                    let plan = Arc::clone(&plan);
                    let pieces = Arc::clone(&pieces);
                    let stats = stats.clone();
                    async move {
                        let index = index?;
                        let piece = pieces
                            .iter()
                            .find(|p| (p.first..p.first + p.n).contains(&index))
                            .copied()
                            .ok_or_else(|| {
                                unsupported(STAGE, "a saved batch is past the end of its shard")
                            })?;
                        let skip = piece.skip + (index - piece.first) * size as u64;
                        let batches =
                            read_unit(plan, piece.at, skip, Some(size as u64), size, stats).await?;
                        let batch = batches.into_iter().next().ok_or_else(|| {
                            anyhow::Error::from(Error::Checkpoint(format!(
                                "no batch {index} in a Parquet shard (the files changed?)"
                            )))
                        })?;
                        Ok((batch, index))
                    }
                };
                Box::pin(
                    stream::iter(wanted)
                        .then(one)
                        .map(|r| r.map_err(|e| (e, None))),
                )
            }
        };
        Run {
            inner,
            next,
            last: None,
        }
    }
}

impl Stream for Run {
    type Item = anyhow::Result<RecordBatch>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match std::task::ready!(this.inner.as_mut().poll_next(cx)) {
            Some(Ok((batch, index))) => {
                this.last = Some(index);
                this.next = index + 1;
                Poll::Ready(Some(Ok(batch)))
            }
            Some(Err((e, after))) => {
                // A row group that could not be read: its batches are passed on as this
                // error, and a resume goes on after them.
                if let Some(after) = after {
                    this.next = after;
                }
                Poll::Ready(Some(Err(e)))
            }
            None => Poll::Ready(None),
        }
    }
}

impl Resumable for Run {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new(STAGE).words([self.next]))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.last
            .map(Prov::at)
            .ok_or_else(|| unsupported(STAGE, "no element yielded yet"))
    }
}
