//! What the N-dimensional array readers ([`hdf5`](super::hdf5) and [`zarr`](super::zarr))
//! share: the recipe's selection (rows, slices of k rows, chunk-aligned slices or random
//! patches, of a hyperslab), the epoch's plan (units of rows of each file, interleaved across
//! files, sharded), the reads in order with a few ahead, checkpoints as positions (unit, row)
//! with the files' layout and identities, elements read again by position, and the files as a
//! [`ShardSource`](crate::distribute::ShardSource) for data-parallel ranks.
//!
//! A format is a [`Source`]: it opens a file (checking its arrays and types, naming the
//! file) and reads rows of it (and of its labels) as `ndarray` arrays; everything else is
//! here, once, the builder methods of the selection included (`array_options!`, as
//! `file_options!` writes the record readers' file options).

use std::marker::PhantomData;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::{self, Stream, StreamExt, TryStreamExt};
use ndarray::{ArrayD, Axis};

use crate::checkpoint::{Prov, State};
use crate::engine::{self, BoxStream, Cardinality, Ctx, Dataset, Resumable, Unkeyed, unsupported};
use crate::error::Error;
use crate::options::Parallelism;
use crate::runtime;
use crate::storage::Location;

/// Files opened at once when an epoch starts.
pub(crate) const OPEN_AT_ONCE: usize = 16;
/// About this many bytes of rows per block read (rows mode).
pub(crate) const BLOCK_BYTES: u64 = 1 << 20;

/// What each element is.
#[derive(Debug, Clone, PartialEq, Hash)]
pub(crate) enum Mode {
    /// One element per row.
    Rows,
    /// One element per `k` rows, from the first row selected.
    Slices(u64),
    /// One element per chunk along the first axis (cut at the chunk grid, so the first and
    /// last of a selection may be shorter).
    // Only Zarr iterates by chunk (HDF5's `slices` are not aligned).
    #[cfg_attr(not(feature = "zarr"), allow(dead_code))]
    Chunks,
    /// Random patches.
    Patches(Patches),
}

/// Random patches: their shape, how many per file and epoch, and the seed of their origins.
#[derive(Debug, Clone, PartialEq, Hash)]
pub(crate) struct Patches {
    pub(crate) shape: Vec<u64>,
    pub(crate) per_file: u64,
    pub(crate) seed: u64,
}

/// The selection part of an array dataset's recipe, the same for every format.
#[derive(Debug, Clone)]
pub(crate) struct Recipe {
    pub(crate) files: Vec<Location>,
    pub(crate) mode: Mode,
    pub(crate) shard: (u64, u64),
    pub(crate) num_parallel_reads: Parallelism,
    /// The hyperslab read: a range along each of the first axes.
    pub(crate) select: Option<Vec<Range<u64>>>,
    /// Only these elements of each file, by index (rows, slices or patches: a data-parallel
    /// rank's unit, see [`Shards`]).
    pub(crate) only: Option<Range<u64>>,
}

impl std::hash::Hash for Recipe {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Every field named: one added later does not build until it is keyed or left out.
        let Recipe {
            files,
            mode,
            shard,
            num_parallel_reads: _,
            select,
            only,
        } = self;
        (files, mode, shard, select, only).hash(state);
    }
}

impl Recipe {
    pub(crate) fn new(files: Vec<Location>) -> Self {
        Recipe {
            files,
            mode: Mode::Rows,
            shard: (1, 0),
            num_parallel_reads: Parallelism::Autotune,
            select: None,
            only: None,
        }
    }

    /// Whether each unit read is one element (a slice, a chunk or a patch), not one per row.
    pub(crate) fn one_per_unit(&self) -> bool {
        !matches!(self.mode, Mode::Rows)
    }

    /// Patches' shape, count and seed, checked (`what` names the method in panics).
    pub(crate) fn patches(
        &mut self,
        what: &str,
        shape: impl IntoIterator<Item = u64>,
        per_file: u64,
        seed: u64,
    ) {
        let shape: Vec<u64> = shape.into_iter().collect();
        assert!(!shape.is_empty(), "{what}::patches: the shape has no axes");
        assert!(per_file > 0, "{what}::patches: per_file must be positive");
        self.mode = Mode::Patches(Patches {
            shape,
            per_file,
            seed,
        });
    }

    /// tf.data's `shard`, by unit (`what` names the method in panics).
    pub(crate) fn shard(&mut self, what: &str, num_shards: u64, index: u64) {
        assert!(num_shards > 0, "{what}::shard: num_shards must be positive");
        assert!(
            index < num_shards,
            "{what}::shard: index {index} must be less than num_shards {num_shards}"
        );
        self.shard = (num_shards, index);
    }

    /// The range read along each axis of an array of `shape` in `location` (`what` names
    /// it: "dataset `/x`", "array `x`"): the selection's, else all; an error naming them when
    /// the array is a scalar, the selection is outside it, or a patch does not fit.
    pub(crate) fn bounds(
        &self,
        location: &Location,
        what: &str,
        shape: &[u64],
    ) -> anyhow::Result<Vec<Range<u64>>> {
        anyhow::ensure!(
            !shape.is_empty(),
            "{location}: {what} is a scalar: it has no rows to read"
        );
        if let Some(ranges) = &self.select {
            let outside = ranges.len() > shape.len()
                || ranges
                    .iter()
                    .zip(shape)
                    .any(|(r, &n)| r.start > r.end || r.end > n);
            anyhow::ensure!(
                !outside,
                "{location}: {what}: the selection {ranges:?} is outside its shape {shape:?}"
            );
        }
        let bounds: Vec<Range<u64>> = shape
            .iter()
            .enumerate()
            .map(|(d, &n)| {
                let selected = self.select.as_ref().and_then(|r| r.get(d));
                selected.cloned().unwrap_or(0..n)
            })
            .collect();
        if let Mode::Patches(patches) = &self.mode {
            let fits = patches.shape.len() <= shape.len()
                && patches
                    .shape
                    .iter()
                    .zip(&bounds)
                    .all(|(&s, b)| s <= b.end - b.start);
            anyhow::ensure!(
                fits,
                "{location}: {what}: a patch of shape {:?} does not fit in its shape \
                 {shape:?}{}",
                patches.shape,
                match &self.select {
                    Some(select) => format!(" (selected {select:?})"),
                    None => String::new(),
                }
            );
        }
        Ok(bounds)
    }

    /// Rows per unit read in rows mode (about [`BLOCK_BYTES`] of rows of `shape` whose
    /// elements take `element_size` bytes, rounded up to whole chunks of `chunk_rows`), or
    /// the slices' `k`, or `chunk_rows` for chunks.
    pub(crate) fn block_rows(
        &self,
        shape: &[u64],
        element_size: u64,
        chunk_rows: Option<u64>,
    ) -> u64 {
        let chunk_rows = chunk_rows.map(|c| c.max(1));
        let block = match (&self.mode, chunk_rows) {
            (Mode::Slices(k), _) => *k,
            (Mode::Chunks, Some(c)) => c,
            _ => {
                let row_bytes = shape
                    .get(1..)
                    .unwrap_or_default()
                    .iter()
                    .product::<u64>()
                    .saturating_mul(element_size)
                    .max(1);
                let wanted = (BLOCK_BYTES / row_bytes).max(1);
                match chunk_rows {
                    Some(c) => wanted.div_ceil(c).saturating_mul(c),
                    None => wanted,
                }
            }
        };
        block.max(1)
    }
}

/// One file (or store), opened by its format: what the plan needs of it, and the format's
/// own handle.
#[derive(Debug)]
pub(crate) struct Opened<F> {
    pub(crate) location: Location,
    /// What the file is (its size and version, or a digest of a store's objects): a
    /// checkpoint refuses a file whose identity changed.
    pub(crate) identity: (u64, u64),
    /// The range read along each axis (see [`Recipe::bounds`]).
    pub(crate) bounds: Vec<Range<u64>>,
    /// The rows of the whole array.
    pub(crate) rows: u64,
    /// Rows per unit read (see [`Recipe::block_rows`]).
    pub(crate) block: u64,
    /// Where units are cut: at multiples of `block` from this row (the chunk grid's origin),
    /// or, when `None`, from the first row read.
    pub(crate) origin: Option<u64>,
    pub(crate) file: F,
}

/// The full ranges along the axes after the first, for the rows of a unit.
pub(crate) type Rest = Arc<[Range<u64>]>;

/// An array format: opens a file (checking it, naming it in errors) and reads rows of it.
pub(crate) trait Source: Send + Sync + 'static {
    /// The stage's name (in errors and stats).
    const STAGE: &'static str;
    /// What the files are called in errors: "HDF5 files", "Zarr stores".
    const FILES: &'static str;
    /// What changes in a file a checkpoint refuses it for.
    const CHANGES: &'static str;
    /// What the format keeps of an open file.
    type File: Send + Sync + 'static;
    /// The data's element type.
    type Data: Send + 'static;
    /// The labels' element type.
    type Labels: Send + 'static;

    fn recipe(&self) -> &Recipe;

    /// Opens the file at `location` and checks it (its arrays, their types, the selection).
    fn open(
        self: Arc<Self>,
        location: Location,
    ) -> BoxFuture<'static, anyhow::Result<Opened<Self::File>>>;

    /// Reads `rows` of the data (`rest`: the ranges along its other axes) and of the labels
    /// (every other axis whole), then gives them to `then`, on a blocking thread.
    fn read<R: Send + 'static>(
        self: Arc<Self>,
        file: Arc<Opened<Self::File>>,
        rows: Range<u64>,
        rest: Rest,
        then: impl FnOnce(ArrayD<Self::Data>, Option<ArrayD<Self::Labels>>) -> R + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<R>>;
}

/// A format's recipe read as arrays of `T` with labels of `L`: what each format implements
/// [`Source`] for.
pub(crate) struct Typed<C, T, L> {
    pub(crate) config: C,
    types: PhantomData<fn() -> (T, L)>,
}

impl<C, T, L> Typed<C, T, L> {
    pub(crate) fn new(config: C) -> Self {
        Typed {
            config,
            types: PhantomData,
        }
    }
}

/// What a unit's arrays become: one element.
pub(crate) type Make<T, L, Out> = fn(ArrayD<T>, Option<ArrayD<L>>) -> Out;

/// What a labeled dataset (`build_labeled`) makes of a unit's arrays: the data and its
/// labels (read whenever labels are set, so never missing then; empty otherwise).
pub(crate) fn labeled<T, L>(data: ArrayD<T>, labels: Option<ArrayD<L>>) -> (ArrayD<T>, ArrayD<L>) {
    let labels = labels.unwrap_or_else(|| ndarray::Array::from_vec(Vec::new()).into_dyn());
    (data, labels)
}

/// The dataset of `source`'s elements, made by `make`; `key` is the key of the format's
/// parameters (its builder's fields: see each format's `key`).
pub(crate) fn build<S: Source, Out: Send + 'static>(
    source: S,
    key: u64,
    make: Make<S::Data, S::Labels, Out>,
) -> Dataset<Out>
where
    S::Data: Clone,
    S::Labels: Clone,
{
    Dataset::from_source(Elements {
        source: Unkeyed(Arc::new(source)),
        key,
        make: Unkeyed(make),
    })
}

/// An array format's elements: the source of its stage.
struct Elements<S: Source, Out> {
    source: Unkeyed<Arc<S>>,
    key: u64,
    make: Unkeyed<Make<S::Data, S::Labels, Out>>,
}

crate::engine::keyed_fields!(impl[S: Source, Out] Elements<S, Out> { keyed: [key], unkeyed: [source, make] });

impl<S: Source, Out: Send + 'static> engine::Source for Elements<S, Out>
where
    S::Data: Clone,
    S::Labels: Clone,
{
    type Out = Out;
    type Stream = BoxStream<Out>;
    const NAME: &'static str = S::STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }

    /// The start is the context's (read with its statistics and epoch).
    fn open(&self, ctx: &Ctx, _: engine::Start<'_>) -> anyhow::Result<BoxStream<Out>> {
        let source = Arc::clone(&self.source);
        let (stats, epoch, make) = (ctx.stats_handle(), ctx.epoch(), *self.make);
        if let Some(provs) = ctx.replaying() {
            let provs = Arc::clone(provs);
            return Ok(Box::pin(Replay::new(source, provs, make, stats, epoch)));
        }
        let restored = ctx.restoring().map(Saved::from_state).transpose()?;
        Ok(Box::pin(Rows::new(source, restored, make, stats, epoch)))
    }
}

/// One unit of rows to read: its index in the dataset's interleaved order (before
/// sharding), its file and its rows.
#[derive(Debug, Clone)]
struct Unit {
    index: u64,
    file: usize,
    rows: Range<u64>,
    /// A patch's ranges along the axes after the first (else the selection's).
    rest: Rest,
}

/// An epoch's plan: the files, opened, and the units of this shard.
struct Plan<F> {
    files: Vec<Option<Arc<Opened<F>>>>,
    units: Vec<Unit>,
    /// A hash of every file's rows and blocks (and which failed to open).
    layout: u64,
    /// A hash of every file's identity.
    identities: u64,
}

/// The boundaries of the units of `rows` cut at multiples of `block` from `origin`.
fn cuts(rows: &Range<u64>, block: u64, origin: u64) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    let mut start = rows.start;
    while start < rows.end {
        let next = if start < origin {
            origin.min(rows.end)
        } else {
            let k = (start - origin) / block + 1;
            origin.saturating_add(k.saturating_mul(block)).min(rows.end)
        };
        out.push(start..next);
        start = next;
    }
    out
}

/// The units of one file (before patches): its rows cut into blocks, or its slices.
fn file_units<F>(recipe: &Recipe, meta: &Opened<F>) -> Vec<Range<u64>> {
    let all = meta.bounds[0].clone();
    match (&recipe.mode, &recipe.only) {
        (Mode::Rows, Some(only)) => {
            let at = |r: u64| all.start.saturating_add(r).min(all.end);
            let rows = at(only.start)..at(only.end);
            cuts(&rows, meta.block, meta.origin.unwrap_or(rows.start))
        }
        (_, only) => {
            let units = cuts(&all, meta.block, meta.origin.unwrap_or(all.start));
            match only {
                Some(only) => units
                    .into_iter()
                    .skip(only.start as usize)
                    .take(only.end.saturating_sub(only.start) as usize)
                    .collect(),
                None => units,
            }
        }
    }
}

/// The elements of one file: rows, units, or patches.
fn elements<F>(recipe: &Recipe, meta: &Opened<F>) -> u64 {
    match &recipe.mode {
        Mode::Patches(p) => p.per_file,
        Mode::Rows => meta.bounds[0].end - meta.bounds[0].start,
        _ => file_units(recipe, meta).len() as u64,
    }
}

fn hash(words: Vec<u64>) -> u64 {
    words
        .into_iter()
        .fold(0x9E37_79B9_7F4A_7C15u64, |h, w| crate::hash::mix64(h ^ w))
}

async fn plan<S: Source>(source: &Arc<S>, epoch: u64) -> (Arc<Plan<S::File>>, Vec<anyhow::Error>) {
    let recipe = source.recipe();
    let opened: Vec<anyhow::Result<Opened<S::File>>> = stream::iter(recipe.files.clone())
        .map(|location| Arc::clone(source).open(location))
        .buffered(OPEN_AT_ONCE)
        .collect()
        .await;
    let mut errors = Vec::new();
    let mut files = Vec::with_capacity(opened.len());
    let mut layout = Vec::new();
    let mut identities = Vec::new();
    for file in opened {
        match file {
            Ok(meta) => {
                layout.extend([meta.rows, meta.block]);
                identities.extend([meta.identity.0, meta.identity.1]);
                files.push(Some(Arc::new(meta)));
            }
            Err(e) => {
                layout.push(u64::MAX);
                identities.push(u64::MAX);
                errors.push(e);
                files.push(None);
            }
        }
    }
    let rest_of = |meta: &Opened<S::File>| -> Rest { meta.bounds[1..].iter().cloned().collect() };
    let (num_shards, shard) = recipe.shard;
    let mut index = 0u64;
    let mut units = Vec::new();
    let mut keep = |unit: Unit, units: &mut Vec<Unit>| {
        if index % num_shards == shard {
            units.push(Unit { index, ..unit });
        }
        index += 1;
    };
    // Unit j of every file in turn: patches drawn from (seed, epoch, file name), or blocks.
    let per_file: Vec<Vec<Unit>> = files
        .iter()
        .enumerate()
        .map(|(at, meta)| match (meta, &recipe.mode) {
            (None, _) => Vec::new(),
            (Some(meta), Mode::Patches(patches)) => {
                draw_patches(patches, epoch, at, meta, recipe.only.as_ref())
            }
            (Some(meta), _) => {
                let rest = rest_of(meta);
                file_units(recipe, meta)
                    .into_iter()
                    .map(|rows| Unit {
                        index: 0,
                        file: at,
                        rows,
                        rest: Arc::clone(&rest),
                    })
                    .collect()
            }
        })
        .collect();
    let most = per_file.iter().map(Vec::len).max().unwrap_or(0);
    for j in 0..most {
        for file in &per_file {
            if let Some(unit) = file.get(j) {
                keep(unit.clone(), &mut units);
            }
        }
    }
    let plan = Plan {
        files,
        units,
        layout: hash(layout),
        identities: hash(identities),
    };
    (Arc::new(plan), errors)
}

/// The patches of one file (those of `only`, by index, when a data-parallel rank reads a
/// run of them): the same for the same seed, epoch and file name.
fn draw_patches<F>(
    patches: &Patches,
    epoch: u64,
    file: usize,
    meta: &Opened<F>,
    only: Option<&Range<u64>>,
) -> Vec<Unit> {
    use rand::{Rng, SeedableRng};
    let name = meta.location.to_string();
    let name = name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    });
    let key = crate::hash::mix64(patches.seed ^ crate::hash::mix64(epoch ^ name));
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(key);
    let keep = only.cloned().unwrap_or(0..patches.per_file);
    (0..patches.per_file)
        .map(|_| {
            patches
                .shape
                .iter()
                .zip(&meta.bounds)
                .map(|(&size, bounds)| {
                    let last = bounds.end - size;
                    let start = rng.random_range(bounds.start..=last);
                    start..start + size
                })
                .collect::<Vec<_>>()
        })
        .enumerate()
        .filter(|(j, _)| keep.contains(&(*j as u64)))
        .map(|(_, ranges)| {
            // The axes past the patch's: the selection's ranges.
            let rest: Rest = ranges[1..]
                .iter()
                .cloned()
                .chain(meta.bounds[ranges.len()..].iter().cloned())
                .collect();
            Unit {
                index: 0,
                file,
                rows: ranges[0].clone(),
                rest,
            }
        })
        .collect()
}

/// An element with where it was read: its unit's position in the plan, and its first row
/// and the row after it, counted within the unit.
type Placed<Out> = (Out, usize, u64, u64);

/// Reads a unit's rows from row `skip` of it (at most `take` of them) and cuts them into
/// elements on a blocking thread.
async fn read_unit<S: Source, Out: Send + 'static>(
    source: Arc<S>,
    plan: Arc<Plan<S::File>>,
    at: usize,
    skip: u64,
    take: Option<u64>,
    make: Make<S::Data, S::Labels, Out>,
    stats: Option<Arc<crate::stats::StageCounters>>,
) -> anyhow::Result<Vec<Placed<Out>>>
where
    S::Data: Clone,
    S::Labels: Clone,
{
    let unit = plan.units[at].clone();
    let Some(meta) = plan.files[unit.file].clone() else {
        return Ok(Vec::new());
    };
    let one = source.recipe().one_per_unit();
    let start = (unit.rows.start + skip).min(unit.rows.end);
    let end = take.map_or(unit.rows.end, |t| (start + t).min(unit.rows.end));
    if start == end {
        return Ok(Vec::new());
    }
    let first = start - unit.rows.start;
    source
        .read(meta, start..end, unit.rest, move |data, labels| {
            if let Some(stats) = &stats {
                // The arrays' bytes (what the autotuner costs buffers by).
                let labels_len = labels
                    .as_ref()
                    .map_or(0, |l| l.len() * size_of::<S::Labels>());
                stats.add_bytes((data.len() * size_of::<S::Data>() + labels_len) as u64);
            }
            if one {
                return vec![(make(data, labels), at, first, first + (end - start))];
            }
            let n = (end - start) as usize;
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let row = data.index_axis(Axis(0), i).to_owned();
                let label = labels.as_ref().map(|l| l.index_axis(Axis(0), i).to_owned());
                let at_row = first + i as u64;
                out.push((make(row, label), at, at_row, at_row + 1));
            }
            out
        })
        .await
}

/// Bytes of decoded blocks read ahead, beyond the `num_parallel_reads` blocks.
const READ_AHEAD_BYTES: u64 = 8 << 20;
/// At most this many blocks read ahead (however small).
const READ_AHEAD_BLOCKS: usize = 16;

/// How many blocks are in flight beyond the `parallel` asked for: as many of the plan's
/// largest as fit in [`READ_AHEAD_BYTES`], at least one and at most [`READ_AHEAD_BLOCKS`].
///
/// Each block is handed from a task to a blocking thread and back, then to the consumer,
/// which takes the blocks in order; blocks in flight are decoded side by side and finish
/// together. With one block beyond `parallel` (2 on two cores), a core waited out the
/// hand-overs: two cores read W12 at 1.52x one core, W13 at 1.4x. With the blocks that fit
/// in 8 MiB (10 of W12's and W13's), 1.8x (`BENCHMARKS.md`). Holding the decoding to
/// `parallel` at once (a semaphore, the blocks ahead waiting their turn) was slower: the
/// turn is one more hand-over.
fn read_ahead<T>(plan: &Plan<impl Sized>) -> usize {
    let largest = plan
        .units
        .iter()
        .map(|u| {
            let rest: u64 = u.rest.iter().map(|r| r.end - r.start).product();
            (u.rows.end - u.rows.start) * rest * size_of::<T>() as u64
        })
        .max()
        .unwrap_or(0);
    let fit = READ_AHEAD_BYTES / largest.max(1);
    usize::try_from(fit)
        .unwrap_or(usize::MAX)
        .clamp(1, READ_AHEAD_BLOCKS)
}

/// A saved position: the unit (its index before sharding) and the rows of it delivered
/// ([`Saved::ENDED`] once the unit failed and its error was passed on), the layout of the
/// files, the files' identities, and how many files that could not be planned were passed
/// on as errors.
///
/// Words: `[unit, row]`, then `[layout, identities]` when known, then `[errors]` when not 0.
#[derive(Debug, Clone, Copy)]
struct Saved {
    unit: u64,
    row: u64,
    files: Option<(u64, u64)>,
    errors: u64,
}

impl Saved {
    /// The row a unit's position is at once its error was passed on: nothing more of it.
    const ENDED: u64 = u64::MAX;

    fn from_state(state: &State) -> anyhow::Result<Saved> {
        let unit = state.word(0)?;
        let row = state.word(1)?;
        let (files, errors) = match state.words.get(2..) {
            Some(&[]) => (None, 0),
            Some(&[errors]) => (None, errors),
            Some(&[layout, identities]) => (Some((layout, identities)), 0),
            Some(&[layout, identities, errors]) => (Some((layout, identities)), errors),
            _ => return Err(state.malformed()),
        };
        Ok(Saved {
            unit,
            row,
            files,
            errors,
        })
    }

    fn to_state(self, stage: &'static str) -> State {
        let state = State::new(stage).words([self.unit, self.row]);
        let state = match self.files {
            Some((layout, identities)) => state.words([layout, identities]),
            None => state,
        };
        state.words((self.errors > 0).then_some(self.errors))
    }
}

/// Refuses a restore over files that changed since the checkpoint.
fn check_restored<S: Source>(plan: &Plan<S::File>, saved: Saved) -> anyhow::Result<()> {
    let Some((layout, identities)) = saved.files else {
        return Ok(());
    };
    if layout != plan.layout || identities != plan.identities {
        return Err(Error::Checkpoint(format!(
            "the {} changed since the checkpoint ({}): resume over the files the checkpoint \
             was taken over",
            S::FILES,
            S::CHANGES
        ))
        .into());
    }
    Ok(())
}

/// The dataset's stream: the plan, then the units' elements in order.
#[must_use = "streams do nothing unless polled"]
struct Rows<Out, F> {
    stage: &'static str,
    inner: Pin<Box<dyn Stream<Item = Read<Out>> + Send>>,
    plan: Arc<tokio::sync::OnceCell<Arc<Plan<F>>>>,
    /// Where the last element yielded was read: its unit's position, its first row and
    /// the row after it (both [`Saved::ENDED`] for the unit's error).
    last: Option<(usize, u64, u64)>,
    restored: Option<Saved>,
    /// Files that could not be planned, passed on as errors (after those a restore skips).
    errors: u64,
}

/// What the plan's stream yields: an element, or an error in its place with the unit it
/// ends (`None`: a file that could not be planned, before every unit).
type Read<Out> = Result<Placed<Out>, (anyhow::Error, Option<usize>)>;

impl<Out: Send + 'static, F: Send + Sync + 'static> Rows<Out, F> {
    fn new<S: Source<File = F>>(
        source: Arc<S>,
        restored: Option<Saved>,
        make: Make<S::Data, S::Labels, Out>,
        stats: Option<Arc<crate::stats::StageCounters>>,
        epoch: u64,
    ) -> Self
    where
        S::Data: Clone,
        S::Labels: Clone,
    {
        let cell = Arc::new(tokio::sync::OnceCell::new());
        let planned = Arc::clone(&cell);
        let inner = async_stream::stream! {
            let (plan, errors) = plan(&source, epoch).await;
            let _ = planned.set(Arc::clone(&plan));
            // Those passed on before the checkpoint are not passed on again.
            let passed = restored.map_or(0, |saved| saved.errors);
            for e in errors.into_iter().skip(passed as usize) {
                yield Err((e, None));
            }
            let (first, skip) = match restored {
                None => (0, 0),
                Some(saved) => {
                    if let Err(e) = check_restored::<S>(&plan, saved) {
                        yield Err((e, None));
                        return;
                    }
                    let first = plan.units.partition_point(|u| u.index < saved.unit);
                    let same = plan.units.get(first).is_some_and(|u| u.index == saved.unit);
                    match (same, saved.row) {
                        // The unit failed, its error passed on: the next one.
                        (true, Saved::ENDED) => (first + 1, 0),
                        (true, row) => (first, row),
                        (false, _) => (first, 0),
                    }
                }
            };
            let parallel = source.recipe().num_parallel_reads.resolve().max(1);
            let ahead = parallel + read_ahead::<S::Data>(&plan);
            let loads = stream::iter(first..plan.units.len())
                .map(|at| {
                    let skip = if at == first { skip } else { 0 };
                    let read = read_unit(Arc::clone(&source), Arc::clone(&plan), at, skip, None, make, stats.clone());
                    let task = runtime::spawn(S::STAGE, read);
                    async move {
                        let elements = match task {
                            Ok(task) => task.await.map_err(|e| runtime::join_error(S::STAGE, e)),
                            Err(e) => Err(e),
                        };
                        elements.and_then(|r| r).map_err(|e| (e, Some(at)))
                    }
                })
                .buffered(ahead);
            futures::pin_mut!(loads);
            while let Some(loaded) = loads.next().await {
                match loaded {
                    Ok(elements) => {
                        for element in elements {
                            yield Ok(element);
                        }
                    }
                    Err(failed) => yield Err(failed),
                }
            }
        };
        Rows {
            stage: S::STAGE,
            inner: Box::pin(inner),
            plan: cell,
            last: None,
            restored,
            errors: 0,
        }
    }
}

impl<Out, F> Stream for Rows<Out, F> {
    type Item = anyhow::Result<Out>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match std::task::ready!(this.inner.as_mut().poll_next(cx)) {
            Some(Ok((element, at, start, end))) => {
                this.last = Some((at, start, end));
                Poll::Ready(Some(Ok(element)))
            }
            Some(Err((e, ends))) => {
                match ends {
                    Some(at) => this.last = Some((at, Saved::ENDED, Saved::ENDED)),
                    None => this.errors += 1,
                }
                Poll::Ready(Some(Err(e)))
            }
            None => Poll::Ready(None),
        }
    }
}

impl<Out, F> Resumable for Rows<Out, F> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let errors = this.restored.map_or(0, |saved| saved.errors) + this.errors;
        let Some((at, _, end)) = this.last else {
            // Nothing yielded yet: where it started.
            let start = this.restored.unwrap_or(Saved {
                unit: 0,
                row: 0,
                files: None,
                errors: 0,
            });
            return Ok(Saved { errors, ..start }.to_state(this.stage));
        };
        let plan = this
            .plan
            .get()
            .ok_or_else(|| unsupported(this.stage, "no plan yet"))?;
        Ok(Saved {
            unit: plan.units[at].index,
            row: end,
            files: Some((plan.layout, plan.identities)),
            errors,
        }
        .to_state(this.stage))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        let (at, start, _) = self
            .last
            .ok_or_else(|| unsupported(self.stage, "no element yielded yet"))?;
        let plan = self
            .plan
            .get()
            .ok_or_else(|| unsupported(self.stage, "no plan yet"))?;
        Ok(Prov::At(smallvec::smallvec![plan.units[at].index, start]))
    }
}

/// The elements at saved positions ((unit, first row) each), read again one by one.
#[must_use = "streams do nothing unless polled"]
struct Replay<Out> {
    stage: &'static str,
    inner: Pin<Box<dyn Stream<Item = anyhow::Result<Out>> + Send>>,
    provs: Arc<[Prov]>,
    next: usize,
}

impl<Out: Send + 'static> Replay<Out> {
    fn new<S: Source>(
        source: Arc<S>,
        provs: Arc<[Prov]>,
        make: Make<S::Data, S::Labels, Out>,
        stats: Option<Arc<crate::stats::StageCounters>>,
        epoch: u64,
    ) -> Self
    where
        S::Data: Clone,
        S::Labels: Clone,
    {
        let wanted = Arc::clone(&provs);
        let format = S::FILES;
        let inner = async_stream::stream! {
            let (plan, _) = plan(&source, epoch).await;
            for prov in wanted.iter() {
                let element = async {
                    let (unit, row) = match prov {
                        Prov::At(words) if words.len() == 2 => (words[0], words[1]),
                        _ => return Err(Error::Checkpoint(format!(
                            "a saved {} position is not (block, row): {prov:?}", S::STAGE
                        )).into()),
                    };
                    let at = plan.units.iter().position(|u| u.index == unit).ok_or_else(|| {
                        Error::Checkpoint(format!(
                            "no block {unit} in the {format} (they changed?)"
                        ))
                    })?;
                    let take = if source.recipe().one_per_unit() { None } else { Some(1) };
                    let read =
                        read_unit(Arc::clone(&source), Arc::clone(&plan), at, row, take, make, stats.clone());
                    let elements = read.await?;
                    elements.into_iter().next().map(|(e, ..)| e).ok_or_else(|| {
                        anyhow::Error::from(Error::Checkpoint(format!(
                            "no row {row} in block {unit} of the {format} (they changed?)"
                        )))
                    })
                };
                yield element.await;
            }
        };
        Replay {
            stage: S::STAGE,
            inner: Box::pin(inner),
            provs,
            next: 0,
        }
    }
}

impl<Out> Stream for Replay<Out> {
    type Item = anyhow::Result<Out>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let item = std::task::ready!(this.inner.as_mut().poll_next(cx));
        if item.is_some() {
            this.next += 1;
        }
        Poll::Ready(item)
    }
}

impl<Out> Resumable for Replay<Out> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Err(crate::engine::replaying(self.stage))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        crate::engine::numbered(self.stage, self.next as u64, Some(&self.provs))
    }
}

/// A format's dataset recipe: its selection part.
pub(crate) trait Config: Clone + std::fmt::Debug + Send + Sync + 'static {
    fn recipe(&self) -> &Recipe;
    fn recipe_mut(&mut self) -> &mut Recipe;
}

/// A format's dataset (its element types chosen) as a [`ShardSource`]'s parts: what the
/// public `Hdf5Shards` and `ZarrShards` hold and answer with.
///
/// [`ShardSource`]: crate::distribute::ShardSource
pub(crate) struct Shards<C, Out> {
    config: C,
    build: Arc<dyn Fn(C) -> Dataset<Out> + Send + Sync>,
    count: Counter<C>,
}

/// Counts the elements of each file of a dataset.
pub(crate) type Counter<C> = fn(C) -> BoxFuture<'static, anyhow::Result<Vec<u64>>>;

impl<C: Config, Out: Send + 'static> Shards<C, Out> {
    pub(crate) fn new(
        config: C,
        build: impl Fn(C) -> Dataset<Out> + Send + Sync + 'static,
        count: Counter<C>,
    ) -> Self {
        Shards {
            config,
            build: Arc::new(build),
            count,
        }
    }

    /// The files' names.
    pub(crate) fn names(&self) -> Vec<String> {
        self.config
            .recipe()
            .files
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// Each file's elements (rows, slices, chunks or patches): every file opened and
    /// checked, a few at once, nothing of the data read.
    pub(crate) fn count(&self) -> BoxFuture<'static, anyhow::Result<Vec<u64>>> {
        (self.count)(self.config.clone())
    }

    /// Elements `unit.start..unit.end` of file `unit.file` (of its selected rows): only the
    /// chunks holding them are read; the dataset's own shard is undone.
    pub(crate) fn read(&self, unit: &crate::distribute::Unit) -> Dataset<Out> {
        let mut config = self.config.clone();
        let recipe = config.recipe_mut();
        recipe.files = vec![recipe.files[unit.file].clone()];
        recipe.shard = (1, 0);
        recipe.only = Some(unit.start..unit.end);
        (self.build)(config)
    }
}

impl<C: Clone, Out> Clone for Shards<C, Out> {
    fn clone(&self) -> Self {
        Shards {
            config: self.config.clone(),
            build: Arc::clone(&self.build),
            count: self.count,
        }
    }
}

impl<C: std::fmt::Debug, Out> std::fmt::Debug for Shards<C, Out> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shards")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The [`Shards`] of `config` read as arrays of `T` with labels of `L`, built by `build`.
pub(crate) fn shards<C: Config, T, L, Out: Send + 'static>(
    config: C,
    build: fn(C) -> Dataset<Out>,
) -> Shards<C, Out>
where
    Typed<C, T, L>: Source,
{
    Shards::new(config, build, |config| count(Typed::<C, T, L>::new(config)))
}

/// Declares a format's public [`ShardSource`](crate::distribute::ShardSource): a newtype
/// over [`Shards`] (`$name<Out>(Shards<$config, Out>)`), reading from any row.
macro_rules! shard_source_type {
    ($(#[$doc:meta])* $name:ident, $config:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name<Out>(crate::format::arrays::Shards<$config, Out>);

        impl<Out: Send + 'static> crate::distribute::ShardSource for $name<Out> {
            type Item = Out;

            fn names(&self) -> Vec<String> {
                self.0.names()
            }

            /// Each file's elements: its metadata read, a few files at once, nothing of
            /// the data.
            fn count(&self) -> futures::future::BoxFuture<'_, anyhow::Result<Vec<u64>>> {
                self.0.count()
            }

            /// Elements `unit.start..unit.end` of the file (of its selected rows): only
            /// the chunks holding them are read.
            fn read(&self, unit: crate::distribute::Unit) -> crate::Dataset<Out> {
                self.0.read(&unit)
            }

            fn seekable_records(&self) -> bool {
                true
            }
        }
    };
}
pub(crate) use shard_source_type;

/// Writes the builder methods the array readers share into a reader's builder, which holds
/// the fields `recipe` (a [`Recipe`]) and `labels` (`Option<String>`, the labels' path):
/// `with_labels`, `select`, `select_rows`, `rows`, `slices`, `patches`, `shard` and
/// `num_parallel_reads`, documented in the format's words. The arguments: the builder (its
/// name begins the panics' messages), what its docs call a file (`"file"`, `"store"`) and an
/// array (`"dataset"`, `"array"`), and the lines that end `num_parallel_reads`' docs (how a
/// block is read, what it holds in memory).
///
/// ```text
/// array_options!(Hdf5Dataset, "file", "dataset", "Each block is read and ...");
/// ```
macro_rules! array_options {
    ($reader:ident, $file:literal, $array:literal, $reads:literal) => {
        impl $reader {
            #[doc = concat!("Reads the same rows of the ", $array, " at `path` (in the same ", $file, ")")]
            /// beside each element (the labels of a training set): each element is
            /// `(data, labels)`, built with [`build_labeled`](Self::build_labeled).
            ///
            /// # Errors
            ///
            #[doc = concat!("A ", $file, " whose labels ", $array, " is missing, of another type, or has")]
            #[doc = concat!("another number of rows than the data is an error naming the ", $file, " and")]
            #[doc = concat!("both ", $array, "s.")]
            pub fn with_labels(mut self, path: impl Into<String>) -> Self {
                self.labels = Some(path.into());
                self
            }

            #[doc = concat!("Reads only a hyperslab of each ", $file, "'s ", $array, ": `ranges[0]` of its")]
            /// rows, `ranges[i]` along axis `i`; the axes past the ranges given are read
            /// whole. The elements are then cut from the selected rows (a row of a
            #[doc = concat!("4-dimensional ", $array, " with `select([0..100, 2..6])` has shape `[4, d2, d3]`),")]
            /// and only the chunks the hyperslab touches are read. The labels are read for the
            /// selected rows.
            ///
            /// # Errors
            ///
            #[doc = concat!("A selection outside a ", $file, "'s ", $array, " (more ranges than axes, a range")]
            #[doc = concat!("past an axis' length, or reversed) is an error naming the ", $file, ", the ", $array, ",")]
            #[doc = concat!("the selection and the ", $array, "'s shape; the dataset goes on with the other ", $file, "s.")]
            pub fn select(mut self, ranges: impl IntoIterator<Item = std::ops::Range<u64>>) -> Self {
                self.recipe.select = Some(ranges.into_iter().collect());
                self
            }

            #[doc = concat!("Reads only `rows` of each ", $file, "'s ", $array, " (all of its other axes):")]
            /// `select` with one range.
            ///
            /// # Errors
            ///
            /// As [`select`](Self::select).
            pub fn select_rows(self, rows: std::ops::Range<u64>) -> Self {
                self.select(std::iter::once(rows))
            }

            #[doc = concat!("One element per row (the default): an array of the ", $array, "'s shape")]
            #[doc = concat!("without its first axis (0-dimensional for a 1-dimensional ", $array, ").")]
            pub fn rows(mut self) -> Self {
                self.recipe.mode = $crate::format::arrays::Mode::Rows;
                self
            }

            /// One element per `k` rows (from the first row selected): an array of shape
            #[doc = concat!("`[k, ...]`, shorter for the last slice of a ", $file, " (whose rows are not a")]
            #[doc = concat!("multiple of `k`); a slice never spans ", $file, "s.")]
            ///
            /// # Panics
            ///
            /// When `k` is 0.
            pub fn slices(mut self, k: usize) -> Self {
                assert!(k > 0, concat!(stringify!($reader), "::slices: k must be positive"));
                self.recipe.mode = $crate::format::arrays::Mode::Slices(k as u64);
                self
            }

            #[doc = concat!("One element per random patch: `per_file` patches of each ", $file, "'s ", $array, ",")]
            /// each an array of `shape` (its first axes; the axes past them read whole) at an
            /// origin drawn uniformly among those where it fits (inside the
            /// [`select`](Self::select)ion, if any), with the labels of its rows. The origins
            #[doc = concat!("come from `seed`, the epoch and the ", $file, "'s name: the same in every run,")]
            /// others each epoch, and the same again in an epoch resumed from a checkpoint.
            #[doc = concat!(
                "Patches interleave across ", $file, "s: patch 0 of every ", $file,
                ", then patch 1, ..."
            )]
            ///
            /// # Errors
            ///
            #[doc = concat!("A patch with more axes than a ", $file, "'s ", $array, ", or larger than it along")]
            #[doc = concat!("an axis, is an error naming the ", $file, ", the ", $array, ", the patch's shape and")]
            #[doc = concat!("the ", $array, "'s.")]
            ///
            /// # Panics
            ///
            /// When `shape` is empty or `per_file` is 0.
            pub fn patches(
                mut self,
                shape: impl IntoIterator<Item = u64>,
                per_file: u64,
                seed: u64,
            ) -> Self {
                self.recipe.patches(stringify!($reader), shape, per_file, seed);
                self
            }

            /// Keeps every `num_shards`-th block of rows, starting at `index` (counted over
            #[doc = concat!("all ", $file, "s' blocks in the dataset's interleaved order): tf.data's `shard`,")]
            /// by block, so each worker reads only its own chunks.
            ///
            /// # Panics
            ///
            /// When `num_shards` is 0 or `index >= num_shards`.
            pub fn shard(mut self, num_shards: u64, index: u64) -> Self {
                self.recipe.shard(stringify!($reader), num_shards, index);
                self
            }

            /// How many blocks of rows are read at once (default: `AUTOTUNE`, the number of
            /// cores); more are read ahead, as many as fit in 8 MiB of values (at least one,
            /// at most 16), so that the cores stay busy while blocks are handed over in
            /// order.
            #[doc = $reads]
            pub fn num_parallel_reads(
                mut self,
                n: impl Into<$crate::options::Parallelism>,
            ) -> Self {
                self.recipe.num_parallel_reads = n.into();
                self
            }
        }
    };
}
pub(crate) use array_options;

/// Each file's elements, for [`Shards`]: every file opened by `source`.
pub(crate) fn count<S: Source>(source: S) -> BoxFuture<'static, anyhow::Result<Vec<u64>>> {
    let source = Arc::new(source);
    Box::pin(async move {
        stream::iter(source.recipe().files.clone())
            .map(|location| {
                let source = Arc::clone(&source);
                async move {
                    let meta = Arc::clone(&source).open(location).await?;
                    anyhow::Ok(elements(source.recipe(), &meta))
                }
            })
            .buffered(OPEN_AT_ONCE)
            .try_collect()
            .await
    })
}

#[cfg(test)]
mod tests {
    use super::cuts;

    #[test]
    fn units_are_cut_at_the_grid_from_its_origin() {
        assert_eq!(cuts(&(0..10), 4, 0), [0..4, 4..8, 8..10]);
        assert_eq!(cuts(&(3..10), 4, 0), [3..4, 4..8, 8..10]);
        assert_eq!(cuts(&(3..10), 4, 3), [3..7, 7..10]);
        assert_eq!(cuts(&(3..3), 4, 0), Vec::<std::ops::Range<u64>>::new());
        let whole: Vec<_> = std::iter::once(5..9).collect();
        assert_eq!(cuts(&(5..9), 100, 0), whole);
    }
}
