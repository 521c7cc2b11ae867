//! Zarr stores as a dataset of `ndarray` arrays: [`ZarrDataset`] (feature `zarr`), rows,
//! slices of k rows, chunks along the first axis or random patches of an N-dimensional array
//! (or of a hyperslab of it) in Zarr v2 and v3 stores, local or in object storage, with the
//! same rows of a labels array beside them.
//!
//! # The reader
//!
//! Metadata and chunks are decoded by [`zarrs`](https://docs.rs/zarrs): Zarr v2 (`.zarray`,
//! `.zattrs`) and v3 (`zarr.json`) arrays; the codecs zarr-python writes: `bytes` (either
//! byte order), `transpose` (and v2's Fortran order), `blosc` (every compressor and
//! shuffle), `zstd`, `gzip`, `crc32c`, and `sharding_indexed` (v3's shards, their inner
//! chunks read from the shard's index); v2's `.` and `/` chunk-key separators. Other codecs
//! (`zlib`, `bz2`, `pcodec`, `zfp`, numcodecs' filters such as `delta`) are errors naming
//! them when the array is opened. Element types: see [`Element`].
//!
//! # How it reads
//!
//! A *store* is the root of a Zarr hierarchy (`data/era5.zarr`, `s3://bucket/era5.zarr`),
//! the *array* a path in it (`t2m`, `group/points`; empty for an array at the root). When an
//! epoch starts every store's array (and labels) is opened: its objects are listed (a
//! directory walk, or an object-store listing), its metadata read and checked (the array
//! exists, its type is the one asked for, the labels have as many rows). The unit of work
//! is a *block* of rows of one store: `k` rows with [`ZarrDataset::slices`], one chunk's
//! rows with [`ZarrDataset::chunks`], a patch with [`ZarrDataset::patches`], else about 1 MiB
//! of rows cut at the chunk grid (so a chunk is fetched and decoded once). Blocks are
//! interleaved across stores (block 0 of every store, then block 1, ...) and read
//! [`ZarrDataset::num_parallel_reads`] at once, more ahead while they fit in 8 MiB, in order.
//!
//! A block's chunks (only those it touches) are fetched by async reads through
//! [`storage`] (local files by positioned reads, objects by GETs, retried
//! as every read is), then decoded on a blocking thread, with zarrs' own parallelism (a
//! rayon pool sized to the cores) across the chunks and a shard's inner chunks: decoding
//! never runs on the async workers. A sharded array's blocks read only the ranges they need
//! of each shard, while decoding: its index (read once per shard and epoch, then kept), then
//! the inner chunks; in a local store each such read is one positioned read, on the
//! decoding thread, of the shard's file kept open for the epoch. When a sharded array's
//! inner chunks hold whole rows (they span every axis but the first) and a block takes
//! every column, its inner chunks are read one by one and decoded into the block (zstd
//! straight into it), one after another on its thread, not through zarrs' partial decoders
//! (the blocks in flight are decoded side by side).
//!
//! A chunk the listing does not have is the array's fill value, as the Zarr spec says (and
//! zarr-python reads it). A chunk that is listed but cannot be read or decoded (truncated,
//! damaged, a checksum that does not match) is an error naming the store, the array and the
//! chunk, never a fill value.
//!
//! # Data-parallel ranks
//!
//! [`ZarrDataset::shard_source`] makes a [`ShardSource`](crate::distribute::ShardSource)
//! for [`Distribute::plan`](crate::distribute::Distribute::plan), counted from the arrays'
//! shapes: whole stores dealt to the ranks, or equal runs of rows (slices, chunks, patches)
//! across store boundaries, each rank reading only the chunks of its rows.
//!
//! # Checkpoints
//!
//! A position is (block, row within it): a restored epoch reads that block again and skips
//! the rows already delivered. Patches are drawn from (seed, epoch, store name), and the
//! checkpoint holds the epoch: a restored epoch draws the same ones. The checkpoint names
//! every store by a digest of its array's objects as listed (each chunk's key, size and
//! version: modification time, or ETag) and the layout of all of them (their rows and
//! blocks): a store with a chunk rewritten, added or removed since is refused with
//! [`Error::Checkpoint`](crate::Error::Checkpoint). Elements held by position downstream (in
//! a shuffle buffer) are read again one by one after a restore.

mod element;
mod shard;
mod store;
mod whole;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

pub use element::Element;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt, TryStreamExt};
pub use half::f16;
pub use ndarray::ArrayD;
pub use shard::ZarrShards;
use zarrs::array::{Array, ArrayMetadata, DataType};
use zarrs::array_subset::ArraySubset;
use zarrs::storage::{ReadableStorageTraits, StoreKey};

use super::arrays::{self, Mode, Opened, Recipe, Rest};
use crate::engine::Dataset;
use crate::runtime;
use crate::storage::{self, Location};
use store::Fetched;

const STAGE: &str = "zarr";
/// Chunks of one block fetched at once.
const FETCH_AT_ONCE: usize = 8;

/// Rows, slices, chunks or patches of an N-dimensional array in Zarr stores, as `ndarray`
/// arrays (see the [module documentation](self) for how it reads).
///
/// ```
/// use streamload::format::zarr::{ArrayD, ZarrDataset};
///
/// # tokio_test::block_on(async {
/// // Two stores written by zarr-python (`scripts/zarr_conformance.py`): `points` is float32
/// // (rows, 16, 3), sharded in the first (Zarr v3), blosc chunks of 8 rows in the second
/// // (Zarr v2); `labels` is int64 (rows,).
/// let stores = ["tests/data/zarr/scenes-0.zarr", "tests/data/zarr/scenes-1.zarr"];
///
/// // One element per row: a (16, 3) array and its label.
/// let rows = ZarrDataset::new(stores, "points")
///     .with_labels("labels")
///     .build_labeled::<f32, i64>()
///     .collect()
///     .await?;
/// assert_eq!(rows.len(), 50 + 37);
/// let (points, label) = &rows[0];
/// assert_eq!(points.shape(), [16, 3]);
/// assert_eq!(label.first(), Some(&0));
///
/// // One element per chunk along the first axis (a shard of 16 rows in the first store,
/// // a chunk of 8 in the second), interleaved: chunk 0 of each store, then chunk 1, ...
/// let chunks: Vec<ArrayD<f32>> = ZarrDataset::new(stores, "points")
///     .chunks()
///     .build::<f32>()
///     .collect()
///     .await?;
/// let sizes: Vec<usize> = chunks.iter().map(|c| c.shape()[0]).collect();
/// assert_eq!(sizes, [16, 8, 16, 8, 16, 8, 2, 8, 5]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct ZarrDataset {
    recipe: Recipe,
    array: String,
    labels: Option<String>,
}

impl ZarrDataset {
    /// The rows (along the first axis) of the array at `array` (a path in the store, such
    /// as `t2m` or `scenes/points`; empty for an array at the store's root) in each of
    /// `stores` (the stores' roots: local directories or URLs): blocks of rows interleaved
    /// across stores, rows in order within a block.
    pub fn new<P: Into<Location>>(
        stores: impl IntoIterator<Item = P>,
        array: impl Into<String>,
    ) -> Self {
        ZarrDataset {
            recipe: Recipe::new(stores.into_iter().map(Into::into).collect()),
            array: array.into(),
            labels: None,
        }
    }

    /// One element per chunk along the first axis: the rows of one chunk (a shard, for a
    /// sharded array: the unit stored as one object), all of the other axes (or the
    /// selection's), so each element is fetched and decoded on its own. With a selection,
    /// the first and last may be shorter (cut at the chunk grid).
    pub fn chunks(mut self) -> Self {
        self.recipe.mode = Mode::Chunks;
        self
    }

    /// The array's rows (or slices, chunks, patches) as arrays of `T`.
    ///
    /// # Ordering
    ///
    /// Deterministic: blocks in the interleaved order, rows in order.
    ///
    /// # Errors
    ///
    /// An element is an error naming the store and the array when a store cannot be listed
    /// or read, has no such array, holds another type than `T` (naming it), is a scalar
    /// (no rows), or uses a codec zarrs lacks; a block that cannot be read (a chunk that is
    /// truncated, damaged, fails its checksum, or cannot be fetched) is an error naming the
    /// store, the array, the rows and the chunk. A store that cannot be opened is one error,
    /// then the dataset goes on with the other stores; so is a block.
    ///
    /// # Panics
    ///
    /// When [`with_labels`](Self::with_labels) was set: use
    /// [`build_labeled`](Self::build_labeled).
    ///
    /// # Cancellation
    ///
    /// Dropping the stream drops the blocks in flight (their fetches stop); a block being
    /// decoded on a blocking thread finishes first.
    pub fn build<T: Element>(self) -> Dataset<ArrayD<T>> {
        assert!(
            self.labels.is_none(),
            "ZarrDataset::build: labels were set with `with_labels`; use `build_labeled`"
        );
        let key = fingerprint(&self, T::NAME, T::NAME);
        arrays::build(ZarrSource::<T, T>::new(self), key, |data, _| data)
    }

    /// The array's rows (or slices, chunks, patches) as arrays of `T`, each with the same
    /// rows of the labels array as an array of `L`. Ordering, errors and cancellation as
    /// [`build`](Self::build).
    ///
    /// # Panics
    ///
    /// When no labels were set with [`with_labels`](Self::with_labels).
    pub fn build_labeled<T: Element, L: Element>(self) -> Dataset<(ArrayD<T>, ArrayD<L>)> {
        assert!(
            self.labels.is_some(),
            "ZarrDataset::build_labeled: no labels array: set one with `with_labels`"
        );
        let key = fingerprint(&self, T::NAME, L::NAME);
        arrays::build(ZarrSource::<T, L>::new(self), key, arrays::labeled)
    }
}

arrays::array_options!(
    ZarrDataset,
    "store",
    "array",
    "A block's chunks are fetched by async reads, then decoded on a blocking thread. Memory: \
     about this many blocks (1 MiB each in rows mode, rounded up to whole chunks; a chunk's \
     rows with `chunks`) and their chunks' bytes, and up to 8 MiB read ahead."
);

impl arrays::Config for ZarrDataset {
    fn recipe(&self) -> &Recipe {
        &self.recipe
    }

    fn recipe_mut(&mut self) -> &mut Recipe {
        &mut self.recipe
    }
}

/// The key of the recipe's parameters and the element types read, for the checkpoint's
/// fingerprint.
fn fingerprint(config: &ZarrDataset, data: &str, label: &str) -> u64 {
    // Every field named: one added later does not build until it is keyed or left out.
    let ZarrDataset {
        recipe,
        array,
        labels,
    } = config;
    crate::engine::params_key(&(recipe, array, labels, data, label))
}

/// A [`ZarrDataset`] read as arrays of `T` with labels of `L`: the format's part of
/// [`arrays`]' engine.
type ZarrSource<T, L> = arrays::Typed<ZarrDataset, T, L>;

/// One array of a store, opened: its metadata, and its chunks as listed (key and size).
pub(crate) struct ZarrArray {
    /// What errors call it: "array `points`", "labels `labels`".
    what: String,
    array: Array<Fetched>,
    chunks: Arc<HashMap<StoreKey, u64>>,
    /// Whether its chunks are shards: read by ranges (the index, the inner chunks wanted),
    /// not fetched whole.
    sharded: bool,
    /// The shards' indexes read in this epoch.
    indexes: Arc<store::Indexes>,
    /// The shard files of a local store opened in this epoch.
    files: Arc<store::OpenShards>,
    /// Its layout when its shards and inner chunks hold whole rows (read inner chunk by
    /// inner chunk, see `whole`).
    whole: Option<Arc<whole::WholeRows>>,
}

/// One store, opened: its array (and labels) checked.
pub(crate) struct ZarrFile {
    data: ZarrArray,
    labels: Option<ZarrArray>,
}

impl std::fmt::Debug for ZarrFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrFile")
            .field("shape", &self.data.array.shape())
            .field("chunks", &self.data.chunks.len())
            .finish_non_exhaustive()
    }
}

/// `path` as a relative key prefix: no leading or trailing `/`.
fn relative(path: &str) -> &str {
    path.trim_matches('/')
}

/// Opens the array at `path` in `store`: lists its objects, reads its metadata. Returns it
/// with a digest of its objects' keys, sizes and versions.
async fn open_array(
    store: &Location,
    path: &str,
    what: String,
) -> anyhow::Result<(ZarrArray, Vec<u64>)> {
    let path = relative(path);
    let prefix = if path.is_empty() {
        String::new()
    } else {
        format!("{path}/")
    };
    let dir = if path.is_empty() {
        store.clone()
    } else {
        store::child(store, path)?
    };
    let listed = storage::list(&dir)
        .await
        .map_err(|e| e.context(format!("{store}: {what}: listing its chunks")))?;
    let mut digest = Vec::with_capacity(listed.len() * 3 + 1);
    digest.push(listed.len() as u64);
    let mut metadata = HashMap::new();
    let mut chunks = HashMap::new();
    for (key, identity) in &listed {
        let name_hash = farmhash::fingerprint64(key.as_bytes());
        digest.extend([name_hash, identity.size, identity.version]);
        let Ok(store_key) = StoreKey::new(format!("{prefix}{key}")) else {
            continue;
        };
        if matches!(key.as_str(), "zarr.json" | ".zarray" | ".zattrs") {
            let bytes = store::fetch(store, store_key.as_str(), identity.size)
                .await
                .map_err(|e| e.context(format!("{store}: {what}: reading its metadata")))?;
            metadata.insert(store_key, store::bool_fill_value(key, bytes));
        } else {
            chunks.insert(store_key, identity.size);
        }
    }
    let has = |name: &str| metadata.keys().any(|k| k.as_str().ends_with(name));
    anyhow::ensure!(
        has("zarr.json") || has(".zarray"),
        "{store}: no {what}: no `{prefix}zarr.json` (Zarr v3) or `{prefix}.zarray` (Zarr v2) \
         in the store"
    );
    let array = Array::open(Arc::new(Fetched(metadata)), &format!("/{path}"))
        .map_err(|e| anyhow::anyhow!("{store}: {what} cannot be read: {e}"))?;
    let sharded = matches!(
        array.metadata(),
        ArrayMetadata::V3(v3) if v3.codecs.iter().any(|c| c.name() == "sharding_indexed")
    );
    let whole = whole::WholeRows::new(&array).map(Arc::new);
    Ok((
        ZarrArray {
            what,
            array,
            chunks: Arc::new(chunks),
            sharded,
            indexes: Arc::default(),
            files: Arc::default(),
            whole,
        },
        digest,
    ))
}

/// A data type's name in errors: `int16`, `float32`, ...
fn describe(dtype: &DataType) -> String {
    dtype.to_string()
}

/// Opens a store and checks its array (and labels).
async fn open_store<T: Element, L: Element>(
    config: &ZarrDataset,
    location: Location,
) -> anyhow::Result<Opened<ZarrFile>> {
    let name = &config.array;
    let (data, mut digest) = open_array(&location, name, format!("array `{name}`")).await?;
    let dtype = data.array.data_type();
    anyhow::ensure!(
        T::accepts(dtype),
        "{location}: array `{name}` holds {}, not {}",
        describe(dtype),
        T::NAME
    );
    let shape = data.array.shape().to_vec();
    let bounds = config
        .recipe
        .bounds(&location, &format!("array `{name}`"), &shape)?;
    let rows = shape[0];
    let labels = match &config.labels {
        None => None,
        Some(path) => {
            let (labels, more) = open_array(&location, path, format!("labels `{path}`")).await?;
            digest.extend(more);
            let label_rows = labels.array.shape().first().copied();
            anyhow::ensure!(
                label_rows == Some(rows),
                "{location}: labels `{path}` have {} rows, array `{name}` has {rows}",
                label_rows.map_or_else(|| "no".to_string(), |r| r.to_string())
            );
            anyhow::ensure!(
                L::accepts(labels.array.data_type()),
                "{location}: labels `{path}` hold {}, not {}",
                describe(labels.array.data_type()),
                L::NAME
            );
            Some(labels)
        }
    };
    let origin = vec![0; shape.len()];
    let chunk_rows = data
        .array
        .chunk_shape(&origin)
        .ok()
        .and_then(|c| c.first().map(|n| n.get()));
    let element_size = match dtype.size() {
        zarrs::array::DataTypeSize::Fixed(n) => n as u64,
        zarrs::array::DataTypeSize::Variable => 1,
    };
    let block = config.recipe.block_rows(&shape, element_size, chunk_rows);
    let identity = digest
        .iter()
        .fold(0xCBF2_9CE4_8422_2325u64, |h, &w| crate::hash::mix64(h ^ w));
    Ok(Opened {
        location,
        identity: (identity, digest.len() as u64),
        bounds,
        rows,
        block,
        // Blocks and chunks are cut at the chunk grid; slices from the first row selected.
        origin: match config.recipe.mode {
            Mode::Slices(_) => None,
            _ => Some(0),
        },
        file: ZarrFile { data, labels },
    })
}

impl<T: Element, L: Element> arrays::Source for ZarrSource<T, L> {
    const STAGE: &'static str = STAGE;
    const FILES: &'static str = "Zarr stores";
    const CHANGES: &'static str =
        "an array's metadata, a chunk's key, size or version, or its rows differ";
    type File = ZarrFile;
    type Data = T;
    type Labels = L;

    fn recipe(&self) -> &Recipe {
        &self.config.recipe
    }

    fn open(
        self: Arc<Self>,
        location: Location,
    ) -> BoxFuture<'static, anyhow::Result<Opened<ZarrFile>>> {
        Box::pin(async move { open_store::<T, L>(&self.config, location).await })
    }

    /// Fetches the chunks `rows` touch (async reads), then decodes them on a blocking
    /// thread.
    fn read<R: Send + 'static>(
        self: Arc<Self>,
        file: Arc<Opened<ZarrFile>>,
        rows: Range<u64>,
        rest: Rest,
        then: impl FnOnce(ArrayD<T>, Option<ArrayD<L>>) -> R + Send + 'static,
    ) -> BoxFuture<'static, anyhow::Result<R>> {
        Box::pin(async move {
            let store = &file.location;
            let data_ranges: Vec<Range<u64>> = std::iter::once(rows.clone())
                .chain(rest.iter().cloned())
                .collect();
            let data = fetch_chunks(store, &file.file.data, &data_ranges, &rows).await?;
            let labels = match &file.file.labels {
                None => None,
                Some(labels) => {
                    let ranges: Vec<Range<u64>> = std::iter::once(rows.clone())
                        .chain(labels.array.shape()[1..].iter().map(|&n| 0..n))
                        .collect();
                    let fetched = fetch_chunks(store, labels, &ranges, &rows).await?;
                    Some((ranges, fetched))
                }
            };
            let handle = tokio::runtime::Handle::current();
            let task = runtime::spawn_blocking(STAGE, move || {
                let opened = &file.file;
                let store = &file.location;
                let data = decode::<T>(store, &opened.data, data, &data_ranges, &rows, &handle)?;
                let labels = match (labels, &opened.labels) {
                    (Some((ranges, fetched)), Some(array)) => {
                        Some(decode::<L>(store, array, fetched, &ranges, &rows, &handle)?)
                    }
                    _ => None,
                };
                anyhow::Ok(then(data, labels))
            })?;
            task.await.map_err(|e| runtime::join_error(STAGE, e))?
        })
    }
}

/// The chunks of `array` that `ranges` touch and the store has (the others are its fill
/// value), fetched a few at once.
async fn fetch_chunks(
    store: &Location,
    array: &ZarrArray,
    ranges: &[Range<u64>],
    rows: &Range<u64>,
) -> anyhow::Result<Fetched> {
    if array.sharded {
        // Read by ranges while decoding (see `store::Ranged`).
        return Ok(Fetched::default());
    }
    let what = &array.what;
    let subset = ArraySubset::new_with_ranges(ranges);
    let chunks = array
        .array
        .chunks_in_array_subset(&subset)
        .ok()
        .flatten()
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{store}: {what}: rows {}..{}: the selection {ranges:?} is not in its chunk grid",
                rows.start,
                rows.end
            )
        })?;
    let wanted: Vec<(StoreKey, u64)> = chunks
        .indices()
        .into_iter()
        .filter_map(|indices| {
            let key = array.array.chunk_key(&indices);
            array.chunks.get(&key).map(|&size| (key, size))
        })
        .collect();
    let fetched = stream::iter(wanted)
        .map(|(key, size)| async move {
            let bytes = store::fetch(store, key.as_str(), size).await.map_err(|e| {
                e.context(format!(
                    "{store}: {what}: rows {}..{}: fetching chunk `{key}`",
                    rows.start, rows.end
                ))
            })?;
            anyhow::Ok((key, bytes))
        })
        .buffer_unordered(FETCH_AT_ONCE)
        .try_collect()
        .await?;
    Ok(Fetched(fetched))
}

/// The elements of `ranges` of `array`, decoded on the calling (blocking) thread from the
/// `fetched` chunks (or, for a sharded array, from the ranges of its shards read through
/// `handle`); an error names the chunk that failed.
fn decode<T: Element>(
    store: &Location,
    array: &ZarrArray,
    fetched: Fetched,
    ranges: &[Range<u64>],
    rows: &Range<u64>,
    handle: &tokio::runtime::Handle,
) -> anyhow::Result<ArrayD<T>> {
    if !array.sharded {
        let reader = array.array.with_storage(Arc::new(fetched));
        return decode_from(store, array, &reader, ranges, rows, || None);
    }
    let ranged = Arc::new(store::Ranged {
        root: store.clone(),
        listed: Arc::clone(&array.chunks),
        handle: handle.clone(),
        failed: Default::default(),
        indexes: Arc::clone(&array.indexes),
        files: Arc::clone(&array.files),
    });
    let whole = array.whole.as_ref();
    if let Some(read) = whole.and_then(|w| w.read::<T>(&array.array, &ranged, ranges)) {
        let what = &array.what;
        return read.map_err(|e| {
            anyhow::anyhow!("{store}: {what}: rows {}..{}: {e:#}", rows.start, rows.end)
        });
    }
    let reader = array.array.with_storage(Arc::clone(&ranged));
    decode_from(store, array, &reader, ranges, rows, || ranged.failure())
}

/// [`decode`] from `reader`; `failure` tells a read that failed.
fn decode_from<T: Element, S: ReadableStorageTraits + ?Sized + 'static>(
    store: &Location,
    array: &ZarrArray,
    reader: &Array<S>,
    ranges: &[Range<u64>],
    rows: &Range<u64>,
    failure: impl Fn() -> Option<String>,
) -> anyhow::Result<ArrayD<T>> {
    let what = &array.what;
    let subset = ArraySubset::new_with_ranges(ranges);
    let failed = match reader.retrieve_array_subset_elements::<T>(&subset) {
        Ok(values) => {
            let shape: Vec<usize> = ranges.iter().map(|r| (r.end - r.start) as usize).collect();
            return ArrayD::from_shape_vec(shape, values).map_err(|e| {
                anyhow::anyhow!("{store}: {what}: rows {}..{}: {e}", rows.start, rows.end)
            });
        }
        Err(e) => e,
    };
    if let Some(read) = failure() {
        // A read failed (not the data): said as it is, not tried again chunk by chunk.
        anyhow::bail!("{store}: {what}: rows {}..{}: {read}", rows.start, rows.end);
    }
    // Which chunk: each one decoded alone.
    let chunks = reader.chunks_in_array_subset(&subset).ok().flatten();
    for indices in chunks.iter().flat_map(|c| c.indices().into_iter()) {
        if let Err(e) = reader.retrieve_chunk_elements::<T>(&indices) {
            return Err(anyhow::anyhow!(
                "{store}: {what}: rows {}..{}: chunk `{}` (at {indices:?} in the chunk grid): {e}",
                rows.start,
                rows.end,
                reader.chunk_key(&indices)
            ));
        }
    }
    Err(anyhow::anyhow!(
        "{store}: {what}: rows {}..{}: {failed}",
        rows.start,
        rows.end
    ))
}
