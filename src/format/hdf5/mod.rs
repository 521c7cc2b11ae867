//! HDF5 files as a dataset of `ndarray` arrays: [`Hdf5Dataset`] (feature `hdf5`), rows,
//! slices of k rows or random patches of an N-dimensional dataset (or of a hyperslab of
//! it), with the same rows of a labels dataset beside them: what a
//! `tf.data.Dataset.from_generator` over `h5py` does, in parallel.
//!
//! # The reader
//!
//! Files are read by [`hdf5-reader`](https://docs.rs/hdf5-reader), a pure-Rust HDF5
//! decoder: no libhdf5, whose every call takes one global lock (the C library is not
//! thread-safe; its Rust bindings serialise all calls behind a mutex), so reads of several
//! files, or of several parts of one file, run at once on as many threads, each locating
//! its chunks, reading them and decompressing them itself. It reads what h5py writes:
//! contiguous, compact and chunked layouts (every chunk index: B-tree v1 and v2, fixed,
//! extensible and implicit arrays); the deflate (gzip), shuffle, fletcher32, szip, nbit,
//! scaleoffset and LZ4 filters, and h5py's LZF (registered here, through the `lzf` crate).
//! Blosc and other plugin filters are not read: such a dataset is an error naming the
//! filter. Element types: see [`Element`].
//!
//! [`inspect`] lists a file's groups and datasets (shape, type, chunks) with their
//! attributes, as h5py's `visititems` and `attrs` show them.
//!
//! # How it reads
//!
//! When an epoch starts every file is opened (16 at once, on blocking threads): its
//! superblock, the dataset's and the labels' headers are read and checked (the dataset
//! exists, its type is the one asked for, the labels have as many rows). The unit of work
//! is a *block* of rows of one file: `k` rows with [`Hdf5Dataset::slices`], a patch with
//! [`Hdf5Dataset::patches`], else about 1 MiB of rows rounded up to whole chunks along the
//! first axis (so a chunk is decompressed once). Blocks are interleaved across files (block 0 of every file, then
//! block 1, ...) and read on blocking threads, [`Hdf5Dataset::num_parallel_reads`] at
//! once plus one ahead, in order; a block reads only the chunks it touches.
//!
//! A chunk the file does not store (its chunk index is walked when the file is opened) is
//! an error naming it, not the fill value libhdf5 and h5py read in its place: in a file
//! written whole, a missing chunk means a damaged index, whose rows would otherwise silently
//! be zeros ([`Hdf5Dataset::fill_missing_chunks`] reads them as h5py does).
//!
//! Local files are read with positioned reads; a URL (object storage, through
//! [`storage`]) with ranged reads: each chunk with one request, the small reads of
//! metadata through a cache of 64 KiB blocks (4 MiB per open file).
//!
//! # Data-parallel ranks
//!
//! [`Hdf5Dataset::shard_source`] makes a [`ShardSource`](crate::distribute::ShardSource)
//! for [`Distribute::plan`](crate::distribute::Distribute::plan), counted from the
//! datasets' shapes: whole files dealt to the ranks, or (HDF5 reads from any row) equal runs
//! of rows across file boundaries, each rank reading only the chunks of its rows.
//!
//! # Checkpoints
//!
//! A position is (block, row within it): a restored epoch reads that block again and skips
//! the rows already delivered. Patches are drawn from (seed, epoch, file name), and the
//! checkpoint holds the epoch: a restored epoch draws the same ones. The checkpoint names every file by its size and version
//! (modification time, or ETag) and the layout of all of them (their rows and blocks): a
//! changed file is refused with [`Error::Checkpoint`]. Elements held by position downstream
//! (in a shuffle buffer) are read again one by one after a restore.

mod chunks;
mod element;
mod inspect;
mod shard;

use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub use element::Element;
use futures::stream::{self, Stream, StreamExt};
pub use half::f16;
use hdf5_reader::{Datatype, Hdf5File, SliceInfo, SliceInfoElem};
pub use inspect::{AttributeValue, DatasetInfo, GroupInfo, Hdf5Contents, inspect};
pub use ndarray::{ArrayD, Axis};
pub use shard::Hdf5Shards;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Counting, Dataset};
use crate::engine::{Resumable, unsupported};
use crate::error::Error;
use crate::options::Parallelism;
use crate::runtime;
use crate::storage::{self, Identity, Location};

const STAGE: &str = "hdf5";
/// Files opened at once when an epoch starts.
const OPEN_AT_ONCE: usize = 16;
/// About this many bytes of rows per block read (rows mode).
const BLOCK_BYTES: u64 = 1 << 20;

/// Rows, or slices of k rows, of an N-dimensional dataset in HDF5 files, as `ndarray`
/// arrays (see the [module documentation](self) for how it reads).
///
/// ```
/// use streamload::format::hdf5::{ArrayD, Hdf5Dataset};
///
/// # tokio_test::block_on(async {
/// // Two files written by h5py (`scripts/hdf5_conformance.py`): /scenes/points is
/// // float32 (rows, 16, 3), chunked and compressed; /scenes/labels is int64 (rows,).
/// let files = ["tests/data/hdf5/scenes-0.h5", "tests/data/hdf5/scenes-1.h5"];
///
/// // One element per row: a (16, 3) array and its label.
/// let rows = Hdf5Dataset::new(files, "/scenes/points")
///     .with_labels("/scenes/labels")
///     .build_labeled::<f32, i64>()
///     .collect()
///     .await?;
/// assert_eq!(rows.len(), 50 + 37);
/// let (points, label) = &rows[0];
/// assert_eq!(points.shape(), [16, 3]);
/// assert_eq!(label.first(), Some(&0));
///
/// // Slices of 16 rows: the last slice of each file is shorter.
/// let slices: Vec<ArrayD<f32>> = Hdf5Dataset::new(files, "/scenes/points")
///     .slices(16)
///     .num_parallel_reads(2)
///     .build::<f32>()
///     .collect()
///     .await?;
/// let sizes: Vec<usize> = slices.iter().map(|s| s.shape()[0]).collect();
/// // Interleaved: slice 0 of each file, then slice 1, ...
/// assert_eq!(sizes, [16, 16, 16, 16, 16, 5, 2]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Hdf5Dataset {
    files: Vec<Location>,
    dataset: String,
    labels: Option<String>,
    field: Option<String>,
    slices: Option<u64>,
    patches: Option<Patches>,
    shard: (u64, u64),
    num_parallel_reads: Parallelism,
    fill_missing: bool,
    /// The hyperslab read: a range along each of the first axes.
    select: Option<Vec<Range<u64>>>,
    /// Only these rows of each file (a data-parallel rank's unit, see [`shard_source`]).
    ///
    /// [`shard_source`]: Hdf5Dataset::shard_source
    only_rows: Option<Range<u64>>,
}

/// Random patches: their shape, how many per file and epoch, and the seed of their origins.
#[derive(Debug, Clone)]
struct Patches {
    shape: Vec<u64>,
    per_file: u64,
    seed: u64,
}

impl Hdf5Dataset {
    /// Whether each unit read is one element (a slice or a patch), not one per row.
    fn one_per_unit(&self) -> bool {
        self.slices.is_some() || self.patches.is_some()
    }

    /// The rows (along the first axis) of the dataset at `dataset` (a path such as
    /// `/scenes/points`) in each of `files` (local paths or URLs): blocks of rows
    /// interleaved across files, rows in order within a block.
    pub fn new<P: Into<Location>>(
        files: impl IntoIterator<Item = P>,
        dataset: impl Into<String>,
    ) -> Self {
        Hdf5Dataset {
            files: files.into_iter().map(Into::into).collect(),
            dataset: dataset.into(),
            labels: None,
            field: None,
            slices: None,
            patches: None,
            shard: (1, 0),
            num_parallel_reads: Parallelism::Autotune,
            fill_missing: false,
            select: None,
            only_rows: None,
        }
    }

    /// Reads the same rows of the dataset at `path` beside each element (the labels of a
    /// training set): each element is `(data, labels)`, built with
    /// [`build_labeled`](Self::build_labeled).
    ///
    /// # Errors
    ///
    /// A file whose labels dataset is missing, of another type, or has another number of
    /// rows than the data is an error naming the file and both datasets.
    pub fn with_labels(mut self, path: impl Into<String>) -> Self {
        self.labels = Some(path.into());
        self
    }

    /// Reads one named field of a compound dataset (h5py's `dataset["x"]`), whose type the
    /// element type must match.
    pub fn field(mut self, name: impl Into<String>) -> Self {
        self.field = Some(name.into());
        self
    }

    /// Reads only a hyperslab of each file's dataset: `ranges[0]` of its rows, `ranges[i]`
    /// along axis `i`; the axes past the ranges given are read whole. Rows and slices are
    /// then cut from the selected rows (an element of a 4-dimensional dataset with
    /// `select([0..100, 2..6])` in rows mode has shape `[4, d2, d3]`), and only the chunks
    /// the hyperslab touches are read. The labels are read for the selected rows.
    ///
    /// # Errors
    ///
    /// A selection outside a file's dataset (more ranges than axes, a range past an axis'
    /// length, or reversed) is an error naming the file, the dataset, the selection and the
    /// dataset's shape; the dataset goes on with the other files.
    pub fn select(mut self, ranges: impl IntoIterator<Item = Range<u64>>) -> Self {
        self.select = Some(ranges.into_iter().collect());
        self
    }

    /// Reads only `rows` of each file's dataset (all of its other axes): `select` with one
    /// range.
    ///
    /// # Errors
    ///
    /// As [`select`](Self::select).
    pub fn select_rows(self, rows: Range<u64>) -> Self {
        self.select(std::iter::once(rows))
    }

    /// One element per row (the default): an array of the dataset's shape without its first
    /// axis (0-dimensional for a 1-dimensional dataset).
    pub fn rows(mut self) -> Self {
        self.slices = None;
        self.patches = None;
        self
    }

    /// One element per `k` rows: an array of shape `[k, ...]`, shorter for the last slice of
    /// a file (whose rows are not a multiple of `k`); a slice never spans files.
    ///
    /// # Panics
    ///
    /// When `k` is 0.
    pub fn slices(mut self, k: usize) -> Self {
        assert!(k > 0, "Hdf5Dataset::slices: k must be positive");
        self.slices = Some(k as u64);
        self.patches = None;
        self
    }

    /// One element per random patch: `per_file` patches of each file, each an array of
    /// `shape` (its first axes; the axes past them read whole) at an origin drawn uniformly
    /// among those where it fits (inside the [`select`](Self::select)ion, if any), with the
    /// labels of its rows. The origins come from `seed`, the epoch and the file's name: the
    /// same in every run, others each epoch, and the same again in an epoch resumed from a
    /// checkpoint. Files interleave: patch 0 of every file, then patch 1, ...
    ///
    /// # Errors
    ///
    /// A patch with more axes than a file's dataset, or larger than it along an axis, is an
    /// error naming the file, the dataset, the patch's shape and the dataset's.
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
        let shape: Vec<u64> = shape.into_iter().collect();
        assert!(
            !shape.is_empty(),
            "Hdf5Dataset::patches: the shape has no axes"
        );
        assert!(
            per_file > 0,
            "Hdf5Dataset::patches: per_file must be positive"
        );
        self.patches = Some(Patches {
            shape,
            per_file,
            seed,
        });
        self.slices = None;
        self
    }

    /// Keeps every `num_shards`-th block of rows, starting at `index` (counted over all
    /// files' blocks in the dataset's interleaved order): tf.data's `shard`, by block, so
    /// each worker reads only its own chunks.
    ///
    /// # Panics
    ///
    /// When `num_shards` is 0 or `index >= num_shards`.
    pub fn shard(mut self, num_shards: u64, index: u64) -> Self {
        assert!(
            num_shards > 0,
            "Hdf5Dataset::shard: num_shards must be positive"
        );
        assert!(
            index < num_shards,
            "Hdf5Dataset::shard: index {index} must be less than num_shards {num_shards}"
        );
        self.shard = (num_shards, index);
        self
    }

    /// How many blocks of rows are read and decompressed at once, each on a blocking thread
    /// (default: `AUTOTUNE`, the number of cores); one more is read ahead. Memory: about
    /// this many blocks (1 MiB each in rows mode, `k` rows with `slices`).
    pub fn num_parallel_reads(mut self, n: impl Into<Parallelism>) -> Self {
        self.num_parallel_reads = n.into();
        self
    }

    /// Whether a chunk the file does not store is read as the dataset's fill value, as h5py
    /// and libhdf5 read it (default: `false`, an error naming the file, the dataset and the
    /// chunk). A file written whole stores every chunk, so a missing one means a damaged chunk
    /// index, whose rows would silently be zeros; a dataset written in parts on purpose
    /// (`create_dataset(shape, chunks=...)`, then some of its rows) needs `true`.
    pub fn fill_missing_chunks(mut self, fill: bool) -> Self {
        self.fill_missing = fill;
        self
    }

    /// The dataset's rows (or slices) as arrays of `T`.
    ///
    /// # Ordering
    ///
    /// Deterministic: blocks in the interleaved order, rows in order.
    ///
    /// # Errors
    ///
    /// An element is an error naming the file and the dataset when a file cannot be read
    /// (missing, not HDF5, damaged or truncated), has no such dataset, holds another type
    /// than `T` (naming it), is a scalar (no rows), or uses a filter the reader lacks; a
    /// block that cannot be read (a damaged or truncated chunk, a checksum that does not
    /// match, a chunk the file does not store) is an error naming the file, dataset, rows and
    /// chunk. A file that cannot be opened is one error, then the dataset goes on with the
    /// other files; so is a block.
    ///
    /// # Panics
    ///
    /// When [`with_labels`](Self::with_labels) was set: use
    /// [`build_labeled`](Self::build_labeled).
    ///
    /// # Cancellation
    ///
    /// Dropping the stream drops the blocks in flight; a block being read on a blocking
    /// thread finishes first.
    pub fn build<T: Element>(self) -> Dataset<ArrayD<T>> {
        assert!(
            self.labels.is_none(),
            "Hdf5Dataset::build: labels were set with `with_labels`; use `build_labeled`"
        );
        build_stage::<T, T, ArrayD<T>>(self, |data, _| data)
    }

    /// The dataset's rows (or slices) as arrays of `T`, each with the same rows of the
    /// labels dataset as an array of `L`. Ordering, errors and cancellation as
    /// [`build`](Self::build).
    ///
    /// # Panics
    ///
    /// When no labels were set with [`with_labels`](Self::with_labels).
    pub fn build_labeled<T: Element, L: Element>(self) -> Dataset<(ArrayD<T>, ArrayD<L>)> {
        assert!(
            self.labels.is_some(),
            "Hdf5Dataset::build_labeled: no labels dataset: set one with `with_labels`"
        );
        build_stage::<T, L, _>(self, |data, labels| {
            (
                data,
                labels.unwrap_or_else(|| ndarray::Array::from_vec(Vec::new()).into_dyn()),
            )
        })
    }
}

/// What a block's arrays become: one element.
type Make<T, L, Out> = fn(ArrayD<T>, Option<ArrayD<L>>) -> Out;

fn build_stage<T: Element, L: Element, Out: Send + 'static>(
    config: Hdf5Dataset,
    make: Make<T, L, Out>,
) -> Dataset<Out> {
    let key = fingerprint(&config, T::NAME, L::NAME);
    let config = Arc::new(config);
    Dataset::stage_resumable(
        STAGE,
        Cardinality::Unknown,
        crate::options::Options::default(),
        0,
        Counting::Wrapped,
        move |ctx| -> BoxStream<Out> {
            let config = Arc::clone(&config);
            let stats = ctx.stats_handle();
            let epoch = ctx.epoch();
            if let Some(provs) = ctx.replaying() {
                let provs = Arc::clone(provs);
                return Box::pin(Replay::new::<T, L>(config, provs, make, stats, epoch));
            }
            let restored = match ctx.restoring().map(Saved::from_state).transpose() {
                Ok(restored) => restored,
                Err(e) => return crate::engine::error_stream(e),
            };
            Box::pin(Rows::new::<T, L>(config, restored, make, stats, epoch))
        },
    )
    .keyed(key)
}

/// The recipe's parameters as a number, for the checkpoint's fingerprint.
fn fingerprint(config: &Hdf5Dataset, data: &str, labels: &str) -> u64 {
    let mut text = String::new();
    for file in &config.files {
        text.push_str(&file.to_string());
        text.push('\0');
    }
    for range in config.select.iter().flatten() {
        text.push_str(&format!("{}..{},", range.start, range.end));
    }
    if let Some(p) = &config.patches {
        text.push_str(&format!("patches {:?} {} {};", p.shape, p.per_file, p.seed));
    }
    for part in [
        Some(config.dataset.as_str()),
        config.labels.as_deref(),
        config.field.as_deref(),
        Some(data),
        Some(labels),
    ] {
        text.push_str(part.unwrap_or("\u{2}"));
        text.push('\u{1}');
    }
    let hash = text.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    });
    [
        config.slices.unwrap_or(0),
        u64::from(config.fill_missing),
        config.only_rows.as_ref().map_or(u64::MAX, |r| r.start),
        config.only_rows.as_ref().map_or(u64::MAX, |r| r.end),
        config.shard.0,
        config.shard.1,
        hash,
    ]
    .into_iter()
    .fold(0xCBF2_9CE4_8422_2325u64, |h, w| crate::hash::mix64(h ^ w))
}

/// One file, opened: its dataset (and labels) checked.
struct FileMeta {
    location: Location,
    identity: Identity,
    data: hdf5_reader::Dataset,
    labels: Option<hdf5_reader::Dataset>,
    /// The compound field read: its byte offset, size and type.
    field: Option<(usize, usize, Datatype)>,
    rows: u64,
    /// The rows selected (all unless [`Hdf5Dataset::select`] says).
    span: Range<u64>,
    /// The range selected along each axis (all unless [`Hdf5Dataset::select`] says).
    bounds: Vec<Range<u64>>,
    /// Rows per block.
    block: u64,
    /// The chunks the file does not store (their origins), and the chunk shape: of the data,
    /// then of the labels (nothing when missing chunks are filled).
    missing: [(Vec<Vec<u64>>, Vec<u64>); 2],
}

impl std::fmt::Debug for FileMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileMeta")
            .field("location", &self.location)
            .field("rows", &self.rows)
            .field("block", &self.block)
            .finish_non_exhaustive()
    }
}

/// Opens a file and checks its dataset (and labels) on a blocking thread.
async fn open_file<T: Element, L: Element>(
    config: Arc<Hdf5Dataset>,
    location: Location,
) -> anyhow::Result<FileMeta> {
    let identity = storage::identity(&location).await?;
    let handle = tokio::runtime::Handle::current();
    let task = runtime::spawn_blocking(STAGE, move || {
        open_blocking::<T, L>(&config, location, identity, handle)
    })?;
    task.await.map_err(|e| runtime::join_error(STAGE, e))?
}

/// The HDF5 file at `location` (of `identity`'s size), opened on the calling (blocking)
/// thread; an object's ranged reads run on `handle`.
fn open_hdf5(
    location: &Location,
    identity: Identity,
    handle: tokio::runtime::Handle,
) -> anyhow::Result<Hdf5File> {
    let options = hdf5_reader::OpenOptions::default().with_filter_registry(element::filters());
    match location {
        Location::Local(path) => Hdf5File::open_with_options(path, options),
        Location::Url(_) => {
            let remote = location.clone();
            let ranged =
                hdf5_reader::RangeRequestStorage::new(identity.size, move |offset, len| {
                    let range = offset..offset.saturating_add(len as u64);
                    handle
                        .block_on(storage::read_range(remote.clone(), range))
                        .map(|bytes| bytes.to_vec())
                        .map_err(|e| std::io::Error::other(format!("{e:#}")).into())
                });
            Hdf5File::from_storage_with_options(Arc::new(Remote::new(ranged)), options)
        }
    }
    .map_err(|e| anyhow::anyhow!("{location}: not a readable HDF5 file: {e}"))
}

fn open_blocking<T: Element, L: Element>(
    config: &Hdf5Dataset,
    location: Location,
    identity: Identity,
    handle: tokio::runtime::Handle,
) -> anyhow::Result<FileMeta> {
    let file = open_hdf5(&location, identity, handle)?;
    let path = &config.dataset;
    let data = file
        .dataset(path)
        .map_err(|e| anyhow::anyhow!("{location}: no dataset `{path}` ({e})"))?;
    let shape = data.shape().to_vec();
    let Some(&rows) = shape.first() else {
        anyhow::bail!("{location}: dataset `{path}` is a scalar: it has no rows to read");
    };
    if let Some(ranges) = &config.select {
        let outside = ranges.len() > shape.len()
            || ranges
                .iter()
                .zip(&shape)
                .any(|(r, &n)| r.start > r.end || r.end > n);
        anyhow::ensure!(
            !outside,
            "{location}: dataset `{path}`: the selection {ranges:?} is outside its shape {shape:?}"
        );
    }
    let bounds: Vec<Range<u64>> = shape
        .iter()
        .enumerate()
        .map(|(d, &n)| {
            let selected = config.select.as_ref().and_then(|r| r.get(d));
            selected.cloned().unwrap_or(0..n)
        })
        .collect();
    let span = bounds[0].clone();
    if let Some(patches) = &config.patches {
        let fits = patches.shape.len() <= shape.len()
            && patches
                .shape
                .iter()
                .zip(&bounds)
                .all(|(&s, b)| s <= b.end - b.start);
        anyhow::ensure!(
            fits,
            "{location}: dataset `{path}`: a patch of shape {:?} does not fit in its shape \
             {shape:?}{}",
            patches.shape,
            match &config.select {
                Some(select) => format!(" (selected {select:?})"),
                None => String::new(),
            }
        );
    }
    let dtype = data.dtype();
    let field = match &config.field {
        None => {
            anyhow::ensure!(
                T::accepts(dtype),
                "{location}: dataset `{path}` holds {}, not {}",
                element::describe(dtype),
                T::NAME
            );
            None
        }
        Some(name) => {
            let Datatype::Compound { fields, .. } = dtype else {
                anyhow::bail!(
                    "{location}: dataset `{path}` holds {}, not a compound type with a field `{name}`",
                    element::describe(dtype)
                );
            };
            let found = fields.iter().find(|f| &f.name == name).ok_or_else(|| {
                anyhow::anyhow!(
                    "{location}: dataset `{path}` has no field `{name}` (it holds {})",
                    element::describe(dtype)
                )
            })?;
            anyhow::ensure!(
                T::accepts(&found.datatype),
                "{location}: field `{name}` of dataset `{path}` holds {}, not {}",
                element::describe(&found.datatype),
                T::NAME
            );
            let size = element::size_of(&found.datatype)
                .ok_or_else(|| anyhow::anyhow!("{location}: field `{name}`: no fixed size"))?;
            Some((found.byte_offset as usize, size, found.datatype.clone()))
        }
    };
    let labels = match &config.labels {
        None => None,
        Some(labels_path) => {
            let labels = file.dataset(labels_path).map_err(|e| {
                anyhow::anyhow!("{location}: no labels dataset `{labels_path}` ({e})")
            })?;
            let label_rows = labels.shape().first().copied();
            anyhow::ensure!(
                label_rows == Some(rows),
                "{location}: labels `{labels_path}` have {} rows, dataset `{path}` has {rows}",
                label_rows.map_or_else(|| "no".to_string(), |r| r.to_string())
            );
            anyhow::ensure!(
                L::accepts(labels.dtype()),
                "{location}: labels `{labels_path}` hold {}, not {}",
                element::describe(labels.dtype()),
                L::NAME
            );
            Some(labels)
        }
    };
    let chunk_rows = data
        .chunks()
        .and_then(|c| c.first().copied())
        .map(|c| u64::from(c).max(1));
    let block = match config.slices {
        Some(k) => k,
        None => {
            let row_bytes = shape[1..]
                .iter()
                .product::<u64>()
                .saturating_mul(element::size_of(dtype).unwrap_or(1) as u64)
                .max(1);
            let wanted = (BLOCK_BYTES / row_bytes).max(1);
            match chunk_rows {
                Some(c) => wanted.div_ceil(c).saturating_mul(c),
                None => wanted,
            }
        }
    };
    let mut missing = [(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
    if !config.fill_missing {
        missing[0] = chunks::missing(&file, &data).map_err(|e| {
            anyhow::anyhow!("{location}: dataset `{path}`: its chunk index cannot be read: {e}")
        })?;
        if let (Some(labels), Some(labels_path)) = (&labels, &config.labels) {
            missing[1] = chunks::missing(&file, labels).map_err(|e| {
                anyhow::anyhow!(
                    "{location}: labels `{labels_path}`: their chunk index cannot be read: {e}"
                )
            })?;
        }
    }
    Ok(FileMeta {
        span,
        bounds,
        missing,
        location,
        identity,
        data,
        labels,
        field,
        rows,
        block: block.max(1),
    })
}

/// An object read with ranged reads: small ones (the metadata's headers, B-tree nodes and
/// heaps, a few hundred bytes each) through a cache of 64 KiB blocks, 64 of them (4 MiB per
/// open file), large ones (chunks) each with one request of its own.
struct Remote {
    direct: Arc<hdf5_reader::RangeRequestStorage>,
    cached: hdf5_reader::BlockCacheStorage,
}

/// Reads at least this long bypass the block cache.
const REMOTE_BLOCK: usize = 64 << 10;

impl Remote {
    fn new(ranged: hdf5_reader::RangeRequestStorage) -> Self {
        let direct = Arc::new(ranged);
        let inner: hdf5_reader::storage::DynStorage = direct.clone();
        Remote {
            direct,
            cached: hdf5_reader::BlockCacheStorage::new(inner, REMOTE_BLOCK, 64),
        }
    }
}

impl hdf5_reader::Storage for Remote {
    fn len(&self) -> u64 {
        self.direct.len()
    }

    fn read_range(
        &self,
        offset: u64,
        len: usize,
    ) -> hdf5_reader::error::Result<hdf5_reader::StorageBuffer> {
        if len >= REMOTE_BLOCK {
            self.direct.read_range(offset, len)
        } else {
            self.cached.read_range(offset, len)
        }
    }
}

/// One block of rows to read: its index in the dataset's interleaved order (before
/// sharding), its file and its rows.
#[derive(Debug, Clone)]
struct Unit {
    index: u64,
    file: usize,
    rows: Range<u64>,
    /// A patch's ranges along the axes after the first (else the selection's).
    rest: Option<Arc<[Range<u64>]>>,
}

/// An epoch's plan: the files, opened, and the blocks of this shard.
#[derive(Debug)]
struct Plan {
    files: Vec<Option<Arc<FileMeta>>>,
    units: Vec<Unit>,
    /// A hash of every file's rows and blocks (and which failed to open).
    layout: u64,
    /// A hash of every file's size and version.
    identities: u64,
}

async fn plan<T: Element, L: Element>(
    config: &Arc<Hdf5Dataset>,
    epoch: u64,
) -> (Arc<Plan>, Vec<anyhow::Error>) {
    let opened: Vec<anyhow::Result<FileMeta>> = stream::iter(config.files.clone())
        .map(|location| open_file::<T, L>(Arc::clone(config), location))
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
                identities.extend([meta.identity.size, meta.identity.version]);
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
    let span = |meta: &FileMeta| {
        let all = meta.span.clone();
        match &config.only_rows {
            Some(rows) => {
                let at = |r: u64| all.start.saturating_add(r).min(all.end);
                at(rows.start)..at(rows.end)
            }
            None => all,
        }
    };
    let (num_shards, shard) = config.shard;
    let mut units = Vec::new();
    let mut index = 0u64;
    if let Some(patches) = &config.patches {
        // Patch j of each file in turn, the origins drawn from (seed, epoch, file name).
        let drawn: Vec<Vec<Unit>> = files
            .iter()
            .enumerate()
            .map(|(at, meta)| match meta {
                Some(meta) => draw_patches(patches, epoch, at, meta, config.only_rows.as_ref()),
                None => Vec::new(),
            })
            .collect();
        let most = drawn.iter().map(Vec::len).max().unwrap_or(0);
        for j in 0..most {
            for file in &drawn {
                if let Some(unit) = file.get(j) {
                    if index % num_shards == shard {
                        units.push(Unit {
                            index,
                            ..unit.clone()
                        });
                    }
                    index += 1;
                }
            }
        }
    }
    let most = match config.patches {
        Some(_) => 0,
        None => files
            .iter()
            .flatten()
            .map(|f| (span(f).end - span(f).start).div_ceil(f.block))
            .max()
            .unwrap_or(0),
    };
    for block in 0..most {
        for (at, meta) in files.iter().enumerate() {
            let Some(meta) = meta else { continue };
            let rows = span(meta);
            let start = rows.start + block * meta.block;
            if start < rows.end {
                if index % num_shards == shard {
                    units.push(Unit {
                        index,
                        file: at,
                        rows: start..(start + meta.block).min(rows.end),
                        rest: None,
                    });
                }
                index += 1;
            }
        }
    }
    let hash = |words: Vec<u64>| {
        words
            .into_iter()
            .fold(0x9E37_79B9_7F4A_7C15u64, |h, w| crate::hash::mix64(h ^ w))
    };
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
fn draw_patches(
    patches: &Patches,
    epoch: u64,
    file: usize,
    meta: &FileMeta,
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
            let rest: Vec<Range<u64>> = ranges[1..]
                .iter()
                .cloned()
                .chain(meta.bounds[ranges.len()..].iter().cloned())
                .collect();
            Unit {
                index: 0,
                file,
                rows: ranges[0].clone(),
                rest: Some(rest.into()),
            }
        })
        .collect()
}

/// `rows` of every axis-0 position, all of the others.
fn selection(rows: &Range<u64>, rest: &[Range<u64>], ndim: usize) -> SliceInfo {
    let mut selection = SliceInfo::all(ndim);
    let ranges = std::iter::once(rows).chain(rest);
    for (slot, range) in selection.selections.iter_mut().zip(ranges) {
        *slot = SliceInfoElem::Slice {
            start: range.start,
            end: range.end,
            step: 1,
        };
    }
    selection
}

/// Reads `rows` of the file's data (and labels) on the calling (blocking) thread.
fn read_rows<T: Element, L: Element>(
    config: &Hdf5Dataset,
    meta: &FileMeta,
    rows: &Range<u64>,
    patch: Option<&[Range<u64>]>,
) -> anyhow::Result<(ArrayD<T>, Option<ArrayD<L>>)> {
    let data_name = format!("dataset `{}`", config.dataset);
    not_missing(meta, 0, &data_name, rows)?;
    if let Some(labels) = &config.labels {
        not_missing(meta, 1, &format!("labels `{labels}`"), rows)?;
    }
    let selected = config
        .select
        .as_deref()
        .map_or(&[][..], |r| r.get(1..).unwrap_or_default());
    let rest = patch.unwrap_or(selected);
    let data = read_field::<T>(&meta.data, meta.field.as_ref(), rows, rest).map_err(|e| {
        located(meta, &meta.data, &data_name, rows, e, |part| {
            read_field::<T>(&meta.data, meta.field.as_ref(), part, rest).map(drop)
        })
    })?;
    let labels = match &meta.labels {
        None => None,
        Some(labels) => {
            let what = format!("labels `{}`", config.labels.as_deref().unwrap_or_default());
            let read = |part: &Range<u64>| L::read(labels, &selection(part, &[], labels.ndim()));
            Some(
                read(rows).map_err(|e| {
                    located(meta, labels, &what, rows, e, |part| read(part).map(drop))
                })?,
            )
        }
    };
    Ok((data, labels))
}

/// An error naming the first chunk `rows` touch that the file does not store (of the data,
/// `which` 0, or of the labels, 1).
fn not_missing(meta: &FileMeta, which: usize, what: &str, rows: &Range<u64>) -> anyhow::Result<()> {
    let (missing, chunk) = &meta.missing[which];
    let Some(&extent) = chunk.first() else {
        return Ok(());
    };
    match missing
        .iter()
        .find(|origin| origin[0] < rows.end && origin[0] + extent > rows.start)
    {
        None => Ok(()),
        Some(origin) => Err(anyhow::anyhow!(
            "{}: {what}: rows {}..{}: the chunk at {origin:?} (shape {chunk:?}) is not in \
             the file: its chunk index is damaged, or the chunk was never written (to read \
             it as the fill value, as h5py does: `fill_missing_chunks(true)`)",
            meta.location,
            rows.start,
            rows.end
        )),
    }
}

/// `rows` of `dataset`: its elements, or a compound's field of each.
fn read_field<T: Element>(
    dataset: &hdf5_reader::Dataset,
    field: Option<&(usize, usize, Datatype)>,
    rows: &Range<u64>,
    rest: &[Range<u64>],
) -> Result<ArrayD<T>, hdf5_reader::error::Error> {
    let sel = selection(rows, rest, dataset.ndim());
    let Some((offset, size, dtype)) = field else {
        return T::read(dataset, &sel);
    };
    let records = dataset.read_slice::<element::Record>(&sel)?;
    let shape = records.shape().to_vec();
    let values = records
        .iter()
        .map(|r| {
            let bytes = r.0.get(*offset..offset + size).ok_or_else(|| {
                hdf5_reader::error::Error::InvalidData("a field past its record".into())
            })?;
            T::decode(bytes, dtype)
        })
        .collect::<Result<Vec<T>, _>>()?;
    ArrayD::from_shape_vec(shape, values)
        .map_err(|e| hdf5_reader::error::Error::InvalidData(e.to_string()))
}

/// The error `e` of reading `rows` of `dataset` (`what`), naming the file, the dataset, the
/// rows and, for a chunked dataset, the first chunk along the first axis that fails when
/// `read` tries each one alone.
fn located(
    meta: &FileMeta,
    dataset: &hdf5_reader::Dataset,
    what: &str,
    rows: &Range<u64>,
    e: hdf5_reader::error::Error,
    read: impl Fn(&Range<u64>) -> Result<(), hdf5_reader::error::Error>,
) -> anyhow::Error {
    let location = &meta.location;
    let chunk_rows = dataset
        .chunks()
        .and_then(|c| c.first().copied())
        .map(u64::from);
    if let Some(c) = chunk_rows.filter(|&c| c > 0 && rows.end > rows.start) {
        for chunk in rows.start / c..=(rows.end - 1) / c {
            let part = (chunk * c).max(rows.start)..((chunk + 1) * c).min(rows.end);
            if let Err(e) = read(&part) {
                return anyhow::anyhow!(
                    "{location}: {what}: rows {}..{}: the chunk at rows {}..{} (chunk {chunk} \
                     along the first axis): {e}",
                    rows.start,
                    rows.end,
                    chunk * c,
                    (chunk + 1) * c
                );
            }
        }
    }
    anyhow::anyhow!("{location}: {what}: rows {}..{}: {e}", rows.start, rows.end)
}

/// An element with where it was read: its unit's position in the plan, and its first row
/// and the row after it, counted within the unit.
type Placed<Out> = (Out, usize, u64, u64);

/// Reads a unit's rows from row `skip` of it (at most `take` of them) on a blocking thread
/// and cuts them into elements.
async fn read_unit<T: Element, L: Element, Out: Send + 'static>(
    config: Arc<Hdf5Dataset>,
    plan: Arc<Plan>,
    at: usize,
    skip: u64,
    take: Option<u64>,
    make: Make<T, L, Out>,
    stats: Option<Arc<crate::stats::StageCounters>>,
) -> anyhow::Result<Vec<Placed<Out>>> {
    let unit = plan.units[at].clone();
    let Some(meta) = plan.files[unit.file].clone() else {
        return Ok(Vec::new());
    };
    let slices = config.one_per_unit();
    let task = runtime::spawn_blocking(STAGE, move || {
        let start = (unit.rows.start + skip).min(unit.rows.end);
        let end = take.map_or(unit.rows.end, |t| (start + t).min(unit.rows.end));
        if start == end {
            return Ok(Vec::new());
        }
        let (data, labels) =
            read_rows::<T, L>(&config, &meta, &(start..end), unit.rest.as_deref())?;
        if let Some(stats) = &stats {
            // The arrays' bytes (what the autotuner costs buffers by).
            let labels_len = labels.as_ref().map_or(0, |l| l.len() * size_of::<L>());
            stats.add_bytes((data.len() * size_of::<T>() + labels_len) as u64);
        }
        let first = start - unit.rows.start;
        if slices {
            return Ok(vec![(make(data, labels), at, first, first + (end - start))]);
        }
        let n = (end - start) as usize;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let row = data.index_axis(Axis(0), i).to_owned();
            let label = labels.as_ref().map(|l| l.index_axis(Axis(0), i).to_owned());
            let at_row = first + i as u64;
            out.push((make(row, label), at, at_row, at_row + 1));
        }
        Ok(out)
    })?;
    task.await.map_err(|e| runtime::join_error(STAGE, e))?
}

/// A saved position: the unit (its index before sharding) and the rows of it delivered,
/// the layout of the files, the files' identities.
#[derive(Debug, Clone, Copy)]
struct Saved {
    unit: u64,
    row: u64,
    files: Option<(u64, u64)>,
}

impl Saved {
    fn from_state(state: &State) -> anyhow::Result<Saved> {
        let unit = state.word(0)?;
        let row = state.word(1)?;
        let files = match state.words.get(2..4) {
            Some(&[layout, identities]) => Some((layout, identities)),
            _ => None,
        };
        Ok(Saved { unit, row, files })
    }

    fn to_state(self) -> State {
        let state = State::new(STAGE).words([self.unit, self.row]);
        match self.files {
            Some((layout, identities)) => state.words([layout, identities]),
            None => state,
        }
    }
}

/// Refuses a restore over files that changed since the checkpoint, naming the file when
/// its size or version differs from the one the saved block was read from.
fn check_restored(plan: &Plan, saved: Saved) -> anyhow::Result<()> {
    let Some((layout, identities)) = saved.files else {
        return Ok(());
    };
    if layout != plan.layout || identities != plan.identities {
        return Err(Error::Checkpoint(
            "the HDF5 files changed since the checkpoint (a file's size, modification time \
             or rows differ): resume over the files the checkpoint was taken over"
                .into(),
        )
        .into());
    }
    Ok(())
}

/// The dataset's stream: the plan, then the units' elements in order.
#[must_use = "streams do nothing unless polled"]
struct Rows<Out> {
    inner: Pin<Box<dyn Stream<Item = anyhow::Result<Placed<Out>>> + Send>>,
    plan: Arc<tokio::sync::OnceCell<Arc<Plan>>>,
    /// Where the last element yielded was read: its unit's position, its first row and
    /// the row after it.
    last: Option<(usize, u64, u64)>,
    restored: Option<Saved>,
}

impl<Out: Send + 'static> Rows<Out> {
    fn new<T: Element, L: Element>(
        config: Arc<Hdf5Dataset>,
        restored: Option<Saved>,
        make: Make<T, L, Out>,
        stats: Option<Arc<crate::stats::StageCounters>>,
        epoch: u64,
    ) -> Self {
        let cell = Arc::new(tokio::sync::OnceCell::new());
        let planned = Arc::clone(&cell);
        let inner = async_stream::stream! {
            let (plan, errors) = plan::<T, L>(&config, epoch).await;
            let _ = planned.set(Arc::clone(&plan));
            for e in errors {
                yield Err(e);
            }
            let (first, skip) = match restored {
                None => (0, 0),
                Some(saved) => {
                    if let Err(e) = check_restored(&plan, saved) {
                        yield Err(e);
                        return;
                    }
                    let first = plan.units.partition_point(|u| u.index < saved.unit);
                    let same = plan.units.get(first).is_some_and(|u| u.index == saved.unit);
                    (first, if same { saved.row } else { 0 })
                }
            };
            let ahead = config.num_parallel_reads.resolve().max(1) + 1;
            let loads = stream::iter(first..plan.units.len())
                .map(|at| {
                    let skip = if at == first { skip } else { 0 };
                    let read = read_unit(Arc::clone(&config), Arc::clone(&plan), at, skip, None, make, stats.clone());
                    let task = runtime::spawn(STAGE, read);
                    async move {
                        match task {
                            Ok(task) => task.await.map_err(|e| runtime::join_error(STAGE, e))?,
                            Err(e) => Err(e),
                        }
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
                    Err(e) => yield Err(e),
                }
            }
        };
        Rows {
            inner: Box::pin(inner),
            plan: cell,
            last: None,
            restored,
        }
    }
}

impl<Out> Stream for Rows<Out> {
    type Item = anyhow::Result<Out>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match std::task::ready!(this.inner.as_mut().poll_next(cx)) {
            Some(Ok((element, at, start, end))) => {
                this.last = Some((at, start, end));
                Poll::Ready(Some(Ok(element)))
            }
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
            None => Poll::Ready(None),
        }
    }
}

impl<Out> Resumable for Rows<Out> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let Some((at, _, end)) = this.last else {
            // Nothing yielded yet: where it started.
            let start = Saved {
                unit: 0,
                row: 0,
                files: None,
            };
            return Ok(this.restored.unwrap_or(start).to_state());
        };
        let plan = this
            .plan
            .get()
            .ok_or_else(|| unsupported(STAGE, "no plan yet"))?;
        Ok(Saved {
            unit: plan.units[at].index,
            row: end,
            files: Some((plan.layout, plan.identities)),
        }
        .to_state())
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        let (at, start, _) = self
            .last
            .ok_or_else(|| unsupported(STAGE, "no element yielded yet"))?;
        let plan = self
            .plan
            .get()
            .ok_or_else(|| unsupported(STAGE, "no plan yet"))?;
        Ok(Prov::At(smallvec::smallvec![plan.units[at].index, start]))
    }
}

/// The elements at saved positions ((unit, first row) each), read again one by one.
#[must_use = "streams do nothing unless polled"]
struct Replay<Out> {
    inner: Pin<Box<dyn Stream<Item = anyhow::Result<Out>> + Send>>,
    provs: Arc<[Prov]>,
    next: usize,
}

impl<Out: Send + 'static> Replay<Out> {
    fn new<T: Element, L: Element>(
        config: Arc<Hdf5Dataset>,
        provs: Arc<[Prov]>,
        make: Make<T, L, Out>,
        stats: Option<Arc<crate::stats::StageCounters>>,
        epoch: u64,
    ) -> Self {
        let wanted = Arc::clone(&provs);
        let inner = async_stream::stream! {
            let (plan, _) = plan::<T, L>(&config, epoch).await;
            for prov in wanted.iter() {
                let element = async {
                    let (unit, row) = match prov {
                        Prov::At(words) if words.len() == 2 => (words[0], words[1]),
                        _ => return Err(Error::Checkpoint(format!(
                            "a saved HDF5 position is not (block, row): {prov:?}"
                        )).into()),
                    };
                    let at = plan.units.iter().position(|u| u.index == unit).ok_or_else(|| {
                        Error::Checkpoint(format!(
                            "no block {unit} in the HDF5 files (they changed?)"
                        ))
                    })?;
                    let take = if config.one_per_unit() { None } else { Some(1) };
                    let read =
                        read_unit(Arc::clone(&config), Arc::clone(&plan), at, row, take, make, stats.clone());
                    let elements = read.await?;
                    elements.into_iter().next().map(|(e, ..)| e).ok_or_else(|| {
                        anyhow::Error::from(Error::Checkpoint(format!(
                            "no row {row} in block {unit} of the HDF5 files (they changed?)"
                        )))
                    })
                };
                yield element.await;
            }
        };
        Replay {
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
        Err(unsupported(
            STAGE,
            "a stream replaying saved positions is not saved",
        ))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.next
            .checked_sub(1)
            .and_then(|i| self.provs.get(i))
            .cloned()
            .ok_or_else(|| unsupported(STAGE, "no element yielded yet"))
    }
}
