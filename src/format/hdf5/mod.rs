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
//! first axis (so a chunk is decompressed once). Blocks are interleaved across files (block
//! 0 of every file, then block 1, ...) and read on blocking threads,
//! [`Hdf5Dataset::num_parallel_reads`] at once, more ahead while they fit in 8 MiB, in
//! order; a block reads only the chunks it touches.
//!
//! When the dataset's chunks hold whole rows (a chunk spans every axis but the first, as
//! h5py's chunks of `(k, *row_shape)` do) and a block starts and ends on the chunk grid (as
//! `slices(k)` with `k` a multiple of the chunk's rows, and rows mode, do, unless a
//! hyperslab starts off the grid), the block is read chunk by chunk: each chunk decoded
//! once and its bytes appended to the result as values in one pass, the shuffle filter
//! undone on the way (`whole.rs`); other blocks go through the reader's `read_slice`.
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
//! checkpoint holds the epoch: a restored epoch draws the same ones. The checkpoint names
//! every file by its size and version (modification time, or ETag) and the layout of all of
//! them (their rows and blocks): a changed file is refused with
//! [`Error::Checkpoint`](crate::Error::Checkpoint). Elements held by position downstream (in
//! a shuffle buffer) are read again one by one after a restore. (The selection, the plan,
//! the reads and the checkpoints are shared with the Zarr reader: `src/format/arrays.rs`.)

mod chunks;
mod element;
mod inspect;
mod shard;
mod whole;

use std::ops::Range;
use std::sync::Arc;

pub use element::Element;
use futures::future::BoxFuture;
pub use half::f16;
use hdf5_reader::{Datatype, Hdf5File, SliceInfo, SliceInfoElem};
pub use inspect::{AttributeValue, DatasetInfo, GroupInfo, Hdf5Contents, inspect};
pub use ndarray::{ArrayD, Axis};
pub use shard::Hdf5Shards;

use super::arrays::{self, Opened, Recipe, Rest};
use crate::engine::Dataset;
use crate::runtime;
use crate::storage::{self, Identity, Location};

const STAGE: &str = "hdf5";

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
    recipe: Recipe,
    dataset: String,
    labels: Option<String>,
    field: Option<String>,
    fill_missing: bool,
}

impl Hdf5Dataset {
    /// The rows (along the first axis) of the dataset at `dataset` (a path such as
    /// `/scenes/points`) in each of `files` (local paths or URLs): blocks of rows
    /// interleaved across files, rows in order within a block.
    pub fn new<P: Into<Location>>(
        files: impl IntoIterator<Item = P>,
        dataset: impl Into<String>,
    ) -> Self {
        Hdf5Dataset {
            recipe: Recipe::new(files.into_iter().map(Into::into).collect()),
            dataset: dataset.into(),
            labels: None,
            field: None,
            fill_missing: false,
        }
    }

    /// Reads one named field of a compound dataset (h5py's `dataset["x"]`), whose type the
    /// element type must match.
    pub fn field(mut self, name: impl Into<String>) -> Self {
        self.field = Some(name.into());
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
        let key = fingerprint(&self, T::NAME, T::NAME);
        arrays::build(Hdf5Source::<T, T>::new(self), key, |data, _| data)
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
        let key = fingerprint(&self, T::NAME, L::NAME);
        arrays::build(Hdf5Source::<T, L>::new(self), key, arrays::labeled)
    }
}

arrays::array_options!(
    Hdf5Dataset,
    "file",
    "dataset",
    "Each block is read and decompressed on a blocking thread. Memory: about this many \
     blocks (1 MiB each in rows mode, `k` rows with `slices`), and up to 8 MiB read ahead."
);

/// An [`Hdf5Dataset`] read as arrays of `T` with labels of `L`: the format's part of
/// [`arrays`]' engine.
type Hdf5Source<T, L> = arrays::Typed<Hdf5Dataset, T, L>;

impl<T: Element, L: Element> arrays::Source for Hdf5Source<T, L> {
    const STAGE: &'static str = STAGE;
    const FILES: &'static str = "HDF5 files";
    const CHANGES: &'static str = "a file's size, modification time or rows differ";
    type File = H5File;
    type Data = T;
    type Labels = L;

    fn recipe(&self) -> &Recipe {
        &self.config.recipe
    }

    /// Opens a file and checks its dataset (and labels) on a blocking thread.
    fn open(
        self: Arc<Self>,
        location: Location,
    ) -> BoxFuture<'static, anyhow::Result<Opened<H5File>>> {
        Box::pin(async move {
            let identity = storage::identity(&location).await?;
            let handle = tokio::runtime::Handle::current();
            let task = runtime::spawn_blocking(STAGE, move || {
                open_blocking::<T, L>(&self.config, location, identity, handle)
            })?;
            task.await.map_err(|e| runtime::join_error(STAGE, e))?
        })
    }

    fn read<R: Send + 'static>(
        self: Arc<Self>,
        file: Arc<Opened<H5File>>,
        rows: Range<u64>,
        rest: Rest,
        then: impl FnOnce(ArrayD<T>, Option<ArrayD<L>>) -> R + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<R>> {
        Box::pin(async move {
            let task = runtime::spawn_blocking(STAGE, move || {
                let (data, labels) = read_rows::<T, L>(&self.config, &file, &rows, &rest)?;
                anyhow::Ok(then(data, labels))
            })?;
            task.await.map_err(|e| runtime::join_error(STAGE, e))?
        })
    }
}

impl arrays::Config for Hdf5Dataset {
    fn recipe(&self) -> &Recipe {
        &self.recipe
    }

    fn recipe_mut(&mut self) -> &mut Recipe {
        &mut self.recipe
    }
}

/// The key of the recipe's parameters and the element types read, for the checkpoint's
/// fingerprint.
fn fingerprint(config: &Hdf5Dataset, data: &str, label: &str) -> u64 {
    // Every field named: one added later does not build until it is keyed or left out.
    let Hdf5Dataset {
        recipe,
        dataset,
        labels,
        field,
        fill_missing,
    } = config;
    crate::engine::params_key(&(recipe, dataset, labels, field, fill_missing, data, label))
}

/// One file, opened: its dataset (and labels) checked.
pub(crate) struct H5File {
    data: hdf5_reader::Dataset,
    labels: Option<hdf5_reader::Dataset>,
    /// The compound field read: its byte offset, size and type.
    field: Option<(usize, usize, Datatype)>,
    /// The chunks the file does not store (their origins), and the chunk shape: of the data,
    /// then of the labels (nothing when missing chunks are filled).
    missing: [(Vec<Vec<u64>>, Vec<u64>); 2],
    /// The data's blocks of whole chunks read chunk by chunk, when its chunks hold whole
    /// rows (`whole.rs`).
    whole: Option<whole::WholeRows>,
}

impl std::fmt::Debug for H5File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H5File")
            .field("shape", &self.data.shape())
            .finish_non_exhaustive()
    }
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
) -> anyhow::Result<Opened<H5File>> {
    let file = open_hdf5(&location, identity, handle)?;
    let path = &config.dataset;
    let data = file
        .dataset(path)
        .map_err(|e| anyhow::anyhow!("{location}: no dataset `{path}` ({e})"))?;
    let shape = data.shape().to_vec();
    let bounds = config
        .recipe
        .bounds(&location, &format!("dataset `{path}`"), &shape)?;
    let rows = shape[0];
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
        .map(u64::from);
    let element_size = element::size_of(dtype).unwrap_or(1) as u64;
    let block = config.recipe.block_rows(&shape, element_size, chunk_rows);
    // The chunk index is walked to find missing chunks, and for the fast path (when
    // missing chunks are filled, an index that cannot be read only means no fast path: the
    // reads report it, as before).
    let whole_fits = field.is_none() && T::raw(dtype).is_some() && whole::fits(&data);
    let index = if !config.fill_missing {
        chunks::index(&file, &data).map_err(|e| {
            anyhow::anyhow!("{location}: dataset `{path}`: its chunk index cannot be read: {e}")
        })?
    } else if whole_fits {
        chunks::index(&file, &data).ok().flatten()
    } else {
        None
    };
    let mut missing = [(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
    if !config.fill_missing {
        if let Some(index) = &index {
            missing[0] = index.missing(&shape);
        }
        if let (Some(labels), Some(labels_path)) = (&labels, &config.labels) {
            let index = chunks::index(&file, labels).map_err(|e| {
                anyhow::anyhow!(
                    "{location}: labels `{labels_path}`: their chunk index cannot be read: {e}"
                )
            })?;
            if let Some(index) = index {
                missing[1] = index.missing(labels.shape());
            }
        }
    }
    let whole = index
        .filter(|_| whole_fits)
        .and_then(|index| whole::WholeRows::new(&file, &data, index));
    Ok(Opened {
        location,
        identity: (identity.size, identity.version),
        bounds,
        rows,
        block,
        origin: None,
        file: H5File {
            data,
            labels,
            field,
            missing,
            whole,
        },
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
    opened: &Opened<H5File>,
    rows: &Range<u64>,
    rest: &[Range<u64>],
) -> anyhow::Result<(ArrayD<T>, Option<ArrayD<L>>)> {
    let meta = &opened.file;
    let location = &opened.location;
    let data_name = format!("dataset `{}`", config.dataset);
    not_missing(opened, 0, &data_name, rows)?;
    if let Some(labels) = &config.labels {
        not_missing(opened, 1, &format!("labels `{labels}`"), rows)?;
    }
    let fast = meta.whole.as_ref().filter(|_| meta.field.is_none());
    let data = match fast.and_then(|whole| whole.read::<T>(meta.data.dtype(), rows, rest)) {
        Some(read) => read.map_err(|(chunk, e)| {
            let chunk_rows = chunk_rows(&meta.data).unwrap_or(1);
            chunk_error(location, &data_name, rows, chunk, chunk_rows, e)
        })?,
        None => read_field::<T>(&meta.data, meta.field.as_ref(), rows, rest).map_err(|e| {
            located(location, &meta.data, &data_name, rows, e, |part| {
                read_field::<T>(&meta.data, meta.field.as_ref(), part, rest).map(drop)
            })
        })?,
    };
    let labels = match &meta.labels {
        None => None,
        Some(labels) => {
            let what = format!("labels `{}`", config.labels.as_deref().unwrap_or_default());
            let read = |part: &Range<u64>| L::read(labels, &selection(part, &[], labels.ndim()));
            Some(read(rows).map_err(|e| {
                located(location, labels, &what, rows, e, |part| {
                    read(part).map(drop)
                })
            })?)
        }
    };
    Ok((data, labels))
}

/// An error naming the first chunk `rows` touch that the file does not store (of the data,
/// `which` 0, or of the labels, 1).
fn not_missing(
    opened: &Opened<H5File>,
    which: usize,
    what: &str,
    rows: &Range<u64>,
) -> anyhow::Result<()> {
    let (missing, chunk) = &opened.file.missing[which];
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
            opened.location,
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
    location: &Location,
    dataset: &hdf5_reader::Dataset,
    what: &str,
    rows: &Range<u64>,
    e: hdf5_reader::error::Error,
    read: impl Fn(&Range<u64>) -> Result<(), hdf5_reader::error::Error>,
) -> anyhow::Error {
    if let Some(c) = chunk_rows(dataset).filter(|&c| c > 0 && rows.end > rows.start) {
        for chunk in rows.start / c..=(rows.end - 1) / c {
            let part = (chunk * c).max(rows.start)..((chunk + 1) * c).min(rows.end);
            if let Err(e) = read(&part) {
                return chunk_error(location, what, rows, chunk, c, e);
            }
        }
    }
    anyhow::anyhow!("{location}: {what}: rows {}..{}: {e}", rows.start, rows.end)
}

/// A chunked dataset's chunk extent along the first axis.
fn chunk_rows(dataset: &hdf5_reader::Dataset) -> Option<u64> {
    dataset
        .chunks()
        .and_then(|c| c.first().copied())
        .map(u64::from)
}

/// The error `e` of reading `rows` of `what`, in chunk number `chunk` (of `c` rows) along
/// the first axis.
fn chunk_error(
    location: &Location,
    what: &str,
    rows: &Range<u64>,
    chunk: u64,
    c: u64,
    e: hdf5_reader::error::Error,
) -> anyhow::Error {
    anyhow::anyhow!(
        "{location}: {what}: rows {}..{}: the chunk at rows {}..{} (chunk {chunk} along the \
         first axis): {e}",
        rows.start,
        rows.end,
        chunk * c,
        (chunk + 1) * c
    )
}
