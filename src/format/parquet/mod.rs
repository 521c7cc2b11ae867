//! Parquet files as a dataset of Arrow [`RecordBatch`]es: [`ParquetDataset`] (feature
//! `parquet`), with [`column_tensor`] and [`column_view`] to hand numeric and fixed-size-list
//! columns to a model as [`Tensor`](crate::tensor::Tensor)s or `ndarray` views.
//!
//! # How it reads
//!
//! The unit of work is the *row group*: every file's footer is read first (through
//! [`storage`], so local paths and object-store URLs alike, with the storage
//! layer's retries), and the dataset is the list of (file, row group) units, interleaved
//! across files (row group 0 of every file, then row group 1, ...), so that a few large files
//! still spread over workers ([`ParquetDataset::shard`] keeps every n-th unit) and over the
//! decoding threads.
//!
//! Each unit's column chunks (only the projected columns') are fetched with ranged reads
//! (adjacent chunks coalesced into one request) by a task of its own, then decoded on a
//! blocking thread by the `parquet` crate's sans-IO `ParquetPushDecoder`, to which the bytes
//! are pushed. Several units are in flight at once ([`ParquetDataset::num_parallel_reads`],
//! plus one ahead), in order: row group k+1's chunks arrive while row group k decodes, which
//! `parquet`'s own async reader does not do (it fetches the next row group only when the
//! current one is used up: arrow-rs#6559).
//!
//! # Data-parallel ranks
//!
//! [`ParquetDataset::shard_source`] reads the footers once and makes a
//! [`ShardSource`](crate::distribute::ShardSource) for
//! [`Distribute::plan`](crate::distribute::Distribute::plan): whole row groups dealt to the
//! ranks ([`ShardPolicy::RowGroup`](crate::distribute::ShardPolicy::RowGroup)), every rank
//! the same number of batches, known from the footers. Its element is a batch of rows, not a
//! row: [`ParquetShards`] says why.
//!
//! # Damaged files
//!
//! A damaged file is an error naming the file, the row group and the column, never a panic
//! or an allocation sized by a damaged length: the footer's length is checked against the
//! file's size before it is read, every length in the footer and in each page header is
//! checked against the bytes that are really there before the `parquet` crate sees them, and
//! the crate's decoding runs under `catch_unwind` as a last resort (a panic inside it becomes
//! an error naming the file and row group). The one place that last resort is known to be
//! needed: a damaged Arrow schema stored in the footer (`ARROW:schema`, a flatbuffer) makes
//! `arrow-ipc` 59 panic (an `unwrap` on a missing field) while the footer is read; the panic
//! message still goes to the panic hook (stderr), and the element is an error naming the
//! file. A file whose footer is damaged is one error element (the dataset goes on with the
//! other files); so is a damaged row group.
//!
//! Every file's footer (a HEAD and usually one ranged read of its last 64 KiB, 16 files at
//! once) is read when an epoch starts, before the first batch: the interleaved order needs
//! every file's row group count.
//!
//! # Where each batch was read
//!
//! Every batch carries its file and the index of its first row in the file (from 0, counted
//! over the file's row groups whatever the columns read or the shard) in its schema's
//! metadata: [`BatchOrigin`]. [`column_tensor`] and [`column_view`] name the file and the row
//! of a null or a ragged list with it (``data/part-1.parquet: row 1037: column `label`: a
//! null ...``), as the Python package does. It costs one schema per batch, nothing per row.
//!
//! # Checkpoints
//!
//! A position is (unit, row within its row group): a restored epoch fetches that row group
//! again and skips the rows already delivered. The checkpoint names the file by size and
//! version, and the layout of all the files (their row groups' sizes): a file that changed
//! is refused with [`Error::Checkpoint`]. Batches held by position downstream (in a shuffle
//! buffer) are read again one by one after a restore: each from its row group, fetched and
//! decoded up to that batch (so a restore of a shuffle of N batches costs N such reads).

mod footer;
mod origin;
mod shard;
mod tensor;

use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub use arrow_array::{self, RecordBatch};
pub use arrow_schema;
use bytes::Bytes;
use futures::stream::{self, Stream, StreamExt};
pub use origin::{BatchOrigin, FILE_KEY, FIRST_ROW_KEY};
use parquet::DecodeResult;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, RowSelection, RowSelector};
use parquet::arrow::push_decoder::ParquetPushDecoderBuilder;
pub use shard::ParquetShards;
pub use tensor::{ViewElement, column_tensor, column_token_ids, column_view};

use self::footer::{FileMeta, guard, read_footer, slice_of};
use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Source, Start as SourceStart};
use crate::engine::{Resumable, unsupported};
use crate::error::Error;
use crate::options::Parallelism;
use crate::runtime;
use crate::storage::{self, Location};

const STAGE: &str = "parquet";
/// Column chunks closer than this are fetched with one request.
const COALESCE: u64 = 1 << 20;
/// Footers read at once when an epoch starts.
const FOOTERS_AT_ONCE: usize = 16;

/// Parquet files as a dataset of Arrow [`RecordBatch`]es, read by row group (see the
/// [module documentation](self) for how).
///
/// ```
/// use std::sync::Arc;
/// use streamload::format::parquet::{ParquetDataset, RecordBatch, column_tensor, column_view};
/// use streamload::format::parquet::arrow_array::{ArrayRef, Int64Array, FixedSizeListArray};
/// use streamload::format::parquet::arrow_array::types::Float32Type;
///
/// # tokio_test::block_on(async {
/// // A file of 1,000 rows in row groups of 300 (made here with the `parquet` crate).
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("train.parquet");
/// let label: ArrayRef = Arc::new(Int64Array::from_iter_values(0..1000));
/// let weights: ArrayRef = Arc::new(FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
///     (0..1000).map(|i| Some([Some(i as f32); 4])),
///     4,
/// ));
/// let batch = RecordBatch::try_from_iter([("label", label), ("weights", weights)])?;
/// let props = parquet::file::properties::WriterProperties::builder()
///     .set_max_row_group_row_count(Some(300))
///     .build();
/// let mut writer =
///     parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&path)?, batch.schema(), Some(props))?;
/// writer.write(&batch)?;
/// writer.close()?;
///
/// let batches = ParquetDataset::new([&path])
///     .columns(["label", "weights"])
///     .batch_size(256)
///     .build()
///     .collect()
///     .await?;
/// // 300 = 256 + 44 in each row group: a batch never spans row groups.
/// let rows: Vec<usize> = batches.iter().map(|b| b.num_rows()).collect();
/// assert_eq!(rows, [256, 44, 256, 44, 256, 44, 100]);
///
/// // Columns as tensors (one copy of the column's buffer) or as `ndarray` views (none).
/// let label = column_tensor(&batches[1], "label")?;
/// assert_eq!(label.shape(), [44]);
/// assert_eq!(label.as_slice::<i64>().unwrap()[0], 256);
/// let weights = column_view::<f32>(&batches[1], "weights")?;
/// assert_eq!(weights.shape(), [44, 4]);
/// assert_eq!(weights[[0, 3]], 256.0);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct ParquetDataset {
    files: Vec<Location>,
    columns: Option<Vec<String>>,
    exclude: Vec<String>,
    batch_size: usize,
    shard: (u64, u64),
    num_parallel_reads: Parallelism,
}

impl ParquetDataset {
    /// The rows of these files: row groups interleaved across files (row group 0 of each
    /// file in order, then row group 1, ...), rows in order within a row group.
    pub fn new<P: Into<Location>>(files: impl IntoIterator<Item = P>) -> Self {
        ParquetDataset {
            files: files.into_iter().map(Into::into).collect(),
            columns: None,
            exclude: Vec::new(),
            batch_size: 1024,
            shard: (1, 0),
            num_parallel_reads: Parallelism::Autotune,
        }
    }

    /// Reads only these columns (top-level fields, by name), in this order; by default all.
    /// Only their column chunks are fetched.
    ///
    /// # Errors
    ///
    /// A name a file does not have is an error naming the file and listing its columns.
    pub fn columns<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.columns = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Leaves these columns out (top-level fields, by name): their column chunks are not
    /// fetched. With [`columns`](ParquetDataset::columns), they are left out of those.
    ///
    /// # Errors
    ///
    /// A name a file does not have is an error naming the file and listing its columns.
    pub fn exclude_columns<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.exclude = names.into_iter().map(Into::into).collect();
        self
    }

    /// Rows per batch (default 1024). A batch holds rows of one row group: the last batch
    /// of each row group is shorter unless the group's size is a multiple of this.
    ///
    /// # Panics
    ///
    /// When `rows` is 0.
    pub fn batch_size(mut self, rows: usize) -> Self {
        assert!(
            rows > 0,
            "ParquetDataset::batch_size: rows must be positive"
        );
        self.batch_size = rows;
        self
    }

    /// Keeps every `num_shards`-th row group, starting at `index` (counted over all files'
    /// row groups in the dataset's interleaved order): tf.data's `shard`, by row group, so
    /// each worker fetches only its own row groups.
    ///
    /// # Panics
    ///
    /// When `num_shards` is 0 or `index >= num_shards`.
    pub fn shard(mut self, num_shards: u64, index: u64) -> Self {
        assert!(
            num_shards > 0,
            "ParquetDataset::shard: num_shards must be positive"
        );
        assert!(
            index < num_shards,
            "ParquetDataset::shard: index {index} must be less than num_shards {num_shards}"
        );
        self.shard = (num_shards, index);
        self
    }

    /// How many row groups are fetched and decoded at once (default: `AUTOTUNE`, the number
    /// of cores); one more is fetched ahead. Memory: about this many row groups' fetched
    /// chunks and decoded batches.
    pub fn num_parallel_reads(mut self, n: impl Into<Parallelism>) -> Self {
        self.num_parallel_reads = n.into();
        self
    }

    /// The dataset.
    ///
    /// # Ordering
    ///
    /// Deterministic: units in the interleaved order, batches in row order.
    ///
    /// # Errors
    ///
    /// An element is an error, naming the file (and the row group and column where there is
    /// one), when a file cannot be read (missing, a fault of object storage past the retry
    /// deadline), is not a Parquet file, or is damaged, or lacks a column asked for. A file
    /// whose footer cannot be read is one error, then the dataset goes on without it; a row
    /// group that cannot be decoded is one error, then the dataset goes on with the next.
    ///
    /// # Cancellation
    ///
    /// Dropping the stream aborts the fetches in flight; a row group being decoded on a
    /// blocking thread finishes, and its batches are dropped.
    pub fn build(self) -> Dataset<RecordBatch> {
        Dataset::from_source(Reader(Arc::new(self)))
    }
}

/// A [`ParquetDataset`]'s batches: the source of its stage.
struct Reader(Arc<ParquetDataset>);

impl std::hash::Hash for Reader {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        fingerprint(&self.0).hash(state);
    }
}

impl Source for Reader {
    type Out = RecordBatch;
    type Stream = BoxStream<RecordBatch>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }

    /// The start is the context's (read with its statistics).
    fn open(&self, ctx: &Ctx, _: SourceStart<'_>) -> anyhow::Result<BoxStream<RecordBatch>> {
        let config = Arc::clone(&self.0);
        let stats = ctx.stats_handle();
        if let Some(provs) = ctx.replaying() {
            return Ok(Box::pin(Replay::new(config, Arc::clone(provs), stats)));
        }
        let restored = ctx.restoring().map(Saved::from_state).transpose()?;
        Ok(Box::pin(Batches::new(config, restored, stats)))
    }
}

/// The recipe's parameters as a number, for the checkpoint's fingerprint.
fn fingerprint(config: &ParquetDataset) -> u64 {
    // Every field named: one added later does not build until it is keyed or left out.
    let ParquetDataset {
        files,
        columns,
        exclude,
        batch_size,
        shard,
        num_parallel_reads: _,
    } = config;
    crate::engine::params_key(&(files, columns, exclude, batch_size, shard))
}

/// One row group to read: its index in the dataset's interleaved order (before sharding),
/// its file and its index in the file, its rows and the index of its first row in the file.
#[derive(Debug, Clone, Copy)]
struct Unit {
    index: u64,
    file: usize,
    row_group: usize,
    rows: u64,
    first_row: u64,
}

/// An epoch's plan: the files' footers and the units of this shard.
#[derive(Debug)]
struct Plan {
    files: Vec<Option<Arc<FileMeta>>>,
    units: Vec<Unit>,
    /// A hash of every file's row group sizes (and which footers failed).
    layout: u64,
}

/// Reads every footer (a few at once), yields each failure as an error, and lays out the
/// units.
async fn plan(config: &ParquetDataset) -> (Arc<Plan>, Vec<anyhow::Error>) {
    let (columns, exclude) = (config.columns.clone(), Arc::new(config.exclude.clone()));
    let footers: Vec<anyhow::Result<FileMeta>> = stream::iter(config.files.clone())
        .map(|location| {
            let (columns, exclude) = (columns.clone(), Arc::clone(&exclude));
            async move { read_footer(&location, columns.as_deref(), &exclude).await }
        })
        .buffered(FOOTERS_AT_ONCE)
        .collect()
        .await;
    let mut errors = Vec::new();
    let mut files = Vec::with_capacity(footers.len());
    let mut layout = Vec::new();
    for footer in footers {
        match footer {
            Ok(meta) => {
                let groups = meta.metadata().row_groups();
                layout.push(groups.len() as u64);
                layout.extend(groups.iter().map(|g| g.num_rows() as u64));
                files.push(Some(Arc::new(meta)));
            }
            Err(e) => {
                layout.push(u64::MAX);
                errors.push(e);
                files.push(None);
            }
        }
    }
    let most = files
        .iter()
        .flatten()
        .map(|f| f.metadata().num_row_groups())
        .max()
        .unwrap_or(0);
    let (num_shards, shard) = config.shard;
    let mut units = Vec::new();
    let mut index = 0u64;
    // By file: the index in the file of the next row group's first row.
    let mut first_rows = vec![0u64; files.len()];
    for row_group in 0..most {
        for (file, meta) in files.iter().enumerate() {
            let Some(meta) = meta else { continue };
            if let Some(group) = meta.metadata().row_groups().get(row_group) {
                let rows = group.num_rows().max(0) as u64;
                if index % num_shards == shard {
                    units.push(Unit {
                        index,
                        file,
                        row_group,
                        rows,
                        first_row: first_rows[file],
                    });
                }
                first_rows[file] += rows;
                index += 1;
            }
        }
    }
    let layout = layout
        .into_iter()
        .fold(0x9E37_79B9_7F4A_7C15u64, |h, w| crate::hash::mix64(h ^ w));
    let plan = Plan {
        files,
        units,
        layout,
    };
    (Arc::new(plan), errors)
}

/// Fetches a unit's chunks and decodes them: the batches of rows `skip..` (at most `take`
/// of them), each with the row it starts at.
async fn read_unit(
    plan: Arc<Plan>,
    at: usize,
    skip: u64,
    take: Option<u64>,
    batch_size: usize,
    stats: Option<Arc<crate::stats::StageCounters>>,
) -> anyhow::Result<Vec<RecordBatch>> {
    let unit = plan.units[at];
    let Some(file) = plan.files[unit.file].clone() else {
        anyhow::bail!("a unit of a file without footer");
    };
    let rows = unit.rows.saturating_sub(skip).min(take.unwrap_or(u64::MAX));
    if rows == 0 {
        return Ok(Vec::new());
    }
    let name = |e: String| anyhow::anyhow!("{}: row group {}: {e}", file.location, unit.row_group);
    let mut selection = Vec::new();
    if skip > 0 {
        selection.push(RowSelector::skip(skip as usize));
    }
    selection.push(RowSelector::select(rows as usize));
    let decoder = {
        let (arrow, row_group) = (file.arrow.clone(), unit.row_group);
        move |mask: ProjectionMask| {
            ParquetPushDecoderBuilder::new_with_metadata(arrow.clone())
                .with_row_groups(vec![row_group])
                .with_projection(mask)
                .with_batch_size(batch_size)
                .with_row_selection(RowSelection::from(selection.clone()))
                .build()
        }
    };
    let mut pushed: Vec<(u64, Bytes)> = Vec::new();
    let mut decoding = guard(|| decoder(file.mask.clone())).map_err(name)?;
    let reader = loop {
        match guard(|| decoding.try_next_reader()).map_err(name)? {
            DecodeResult::NeedsData(ranges) => {
                let pieces = fetch(&file, &ranges).await.map_err(|e| {
                    e.context(format!("{}: row group {}", file.location, unit.row_group))
                })?;
                if let Some(stats) = &stats {
                    stats.add_bytes(pieces.iter().map(|(_, b)| b.len() as u64).sum());
                }
                check_unit_pages(&file, unit.row_group, &pieces).map_err(name)?;
                let data = ranges
                    .iter()
                    .map(|r| slice_of(&pieces, r.clone()).unwrap_or_default())
                    .collect();
                guard(|| decoding.push_ranges(ranges, data)).map_err(name)?;
                pushed.extend(pieces);
            }
            DecodeResult::Data(reader) => break Some(reader),
            DecodeResult::Finished => break None,
        }
    };
    let Some(reader) = reader else {
        return Ok(Vec::new());
    };
    let first_row = unit.first_row + skip;
    let task = runtime::spawn_blocking(STAGE, move || {
        let decoded = decode(reader)
            .and_then(|batches| match &file.order {
                None => Ok(batches),
                Some(order) => batches
                    .into_iter()
                    .map(|b| b.project(order).map_err(|e| e.to_string()))
                    .collect(),
            })
            .and_then(|batches| origin::place(batches, &file.location.to_string(), first_row));
        decoded.map_err(|e| {
            // Name the column: decode each projected column alone from the same bytes.
            let column = file.roots.iter().find_map(|(root, column)| {
                let schema = file.metadata().file_metadata().schema_descr();
                let alone = ProjectionMask::roots(schema, [*root]);
                let failed = one_column(decoder(alone), &pushed).is_err();
                failed.then_some(column.as_str())
            });
            let at = match column {
                Some(column) => format!("column `{column}`: "),
                None => String::new(),
            };
            anyhow::anyhow!("{}: row group {}: {at}{e}", file.location, unit.row_group)
        })
    })?;
    task.await.map_err(|e| runtime::join_error(STAGE, e))?
}

/// All of a row group's batches, any panic inside the decoder an error.
fn decode(reader: ParquetRecordBatchReader) -> Result<Vec<RecordBatch>, String> {
    guard(|| reader.collect::<Result<Vec<_>, _>>())
}

/// Decodes one column alone from the bytes fetched for all (to find the damaged one).
fn one_column(
    decoder: Result<
        parquet::arrow::push_decoder::ParquetPushDecoder,
        parquet::errors::ParquetError,
    >,
    pushed: &[(u64, Bytes)],
) -> Result<(), String> {
    let mut decoder = decoder.map_err(|e| e.to_string())?;
    loop {
        match guard(|| decoder.try_next_reader())? {
            DecodeResult::NeedsData(ranges) => {
                let data = ranges
                    .iter()
                    .map(|r| slice_of(pushed, r.clone()).ok_or("not fetched"))
                    .collect::<Result<Vec<_>, _>>()?;
                guard(|| decoder.push_ranges(ranges, data))?;
            }
            DecodeResult::Data(reader) => {
                decode(reader)?;
            }
            DecodeResult::Finished => return Ok(()),
        }
    }
}

/// The page headers of every whole column chunk among the fetched pieces, checked.
fn check_unit_pages(
    file: &FileMeta,
    row_group: usize,
    pieces: &[(u64, Bytes)],
) -> Result<(), String> {
    let group = file.metadata().row_group(row_group);
    for column in group.columns() {
        let start = column
            .dictionary_page_offset()
            .unwrap_or_else(|| column.data_page_offset()) as u64;
        let range = start..start + column.compressed_size() as u64;
        if let Some(chunk) = slice_of(pieces, range) {
            footer::check_pages(
                &chunk,
                column.uncompressed_size() as u64,
                column.num_values().max(0) as u64,
            )
            .map_err(|e| format!("column `{}`: {e}", column.column_path().string()))?;
        }
    }
    Ok(())
}

/// The bytes of `ranges` (checked to lie in the file's data), adjacent ones fetched with one
/// request, all requests at once: the pieces fetched, by start offset.
async fn fetch(file: &FileMeta, ranges: &[Range<u64>]) -> anyhow::Result<Vec<(u64, Bytes)>> {
    for range in ranges {
        anyhow::ensure!(
            range.start <= range.end && range.end <= file.data_end,
            "the decoder asked for bytes {range:?}, outside the file's data (..{})",
            file.data_end
        );
    }
    let mut sorted: Vec<Range<u64>> = ranges.to_vec();
    sorted.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::new();
    for range in sorted {
        match merged.last_mut() {
            Some(last) if range.start <= last.end.saturating_add(COALESCE) => {
                last.end = last.end.max(range.end);
            }
            _ => merged.push(range),
        }
    }
    let reads = merged.into_iter().map(|range| async move {
        let bytes = storage::read_range(file.location.clone(), range.clone()).await?;
        anyhow::ensure!(
            bytes.len() as u64 == range.end - range.start,
            "{}: bytes {range:?}: the file is shorter than when its footer was read",
            file.location
        );
        Ok((range.start, bytes))
    });
    futures::future::try_join_all(reads).await
}

/// A saved position: the unit (its index before sharding) and the rows of it delivered
/// ([`Saved::ENDED`] once the unit failed and its error was passed on), the layout of the
/// files, the unit's file's size and version, and how many files that could not be planned
/// (a damaged footer) were passed on as errors.
///
/// Words: `[unit, row]`, then `[layout, size, version]` when known, then `[errors]` when not 0.
#[derive(Debug, Clone, Copy)]
struct Saved {
    unit: u64,
    row: u64,
    file: Option<(u64, storage::Identity)>,
    errors: u64,
}

impl Saved {
    /// The row a unit's position is at once its error was passed on: nothing more of it.
    const ENDED: u64 = u64::MAX;

    fn from_state(state: &State) -> anyhow::Result<Saved> {
        let unit = state.word(0)?;
        let row = state.word(1)?;
        let (file, errors) = match state.words.get(2..) {
            Some(&[]) => (None, 0),
            Some(&[errors]) => (None, errors),
            Some(&[layout, size, version, ref errors @ ..]) if errors.len() <= 1 => (
                Some((layout, storage::Identity { size, version })),
                errors.first().copied().unwrap_or(0),
            ),
            _ => return Err(state.malformed()),
        };
        Ok(Saved {
            unit,
            row,
            file,
            errors,
        })
    }

    fn to_state(self) -> State {
        let state = State::new(STAGE).words([self.unit, self.row]);
        let state = match self.file {
            Some((layout, identity)) => state.words([layout, identity.size, identity.version]),
            None => state,
        };
        state.words((self.errors > 0).then_some(self.errors))
    }
}

/// A batch with where it was read: the unit's position in the plan, and the rows of the unit
/// delivered before it.
type Placed = (RecordBatch, usize, u64);

/// What the plan's stream yields: a batch, or an error in its place with the unit it ends
/// (`None`: a file that could not be planned, before every unit).
type Read = Result<Placed, (anyhow::Error, Option<usize>)>;

/// The dataset's stream: the plan, then the units' batches in order.
#[must_use = "streams do nothing unless polled"]
struct Batches {
    inner: Pin<Box<dyn Stream<Item = Read> + Send>>,
    plan: Arc<tokio::sync::OnceCell<Arc<Plan>>>,
    /// Where the last batch yielded was read: its unit's index, the row it started at and
    /// the row after it (both [`Saved::ENDED`] for the unit's error).
    last: Option<(usize, u64, u64)>,
    restored: Option<Saved>,
    /// Files that could not be planned, passed on as errors (after those a restore skips).
    errors: u64,
}

impl Batches {
    fn new(
        config: Arc<ParquetDataset>,
        restored: Option<Saved>,
        stats: Option<Arc<crate::stats::StageCounters>>,
    ) -> Self {
        let cell = Arc::new(tokio::sync::OnceCell::new());
        let planned = Arc::clone(&cell);
        let inner = async_stream::stream! {
            let (plan, errors) = plan(&config).await;
            let _ = planned.set(Arc::clone(&plan));
            // Those passed on before the checkpoint are not passed on again.
            let passed = restored.map_or(0, |saved| saved.errors);
            for e in errors.into_iter().skip(passed as usize) {
                yield Err((e, None));
            }
            // Where to start: the first unit at or after the saved one, rows skipped.
            let (first, skip) = match restored {
                None => (0, 0),
                Some(saved) => {
                    if let Err(e) = check_restored(&plan, saved) {
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
            let ahead = config.num_parallel_reads.resolve().max(1) + 1;
            let batch_size = config.batch_size;
            let loads = stream::iter(first..plan.units.len())
                .map(|at| {
                    let skip = if at == first { skip } else { 0 };
                    let task = runtime::spawn(
                        STAGE,
                        read_unit(Arc::clone(&plan), at, skip, None, batch_size, stats.clone()),
                    );
                    async move {
                        let batches = match task {
                            Ok(task) => task
                                .await
                                .map_err(|e| (runtime::join_error(STAGE, e), Some(at)))?,
                            Err(e) => Err(e),
                        };
                        batches.map(|b| (at, skip, b)).map_err(|e| (e, Some(at)))
                    }
                })
                .buffered(ahead);
            futures::pin_mut!(loads);
            while let Some(loaded) = loads.next().await {
                match loaded {
                    Ok((at, skip, batches)) => {
                        let mut row = skip;
                        for batch in batches {
                            let start = row;
                            row += batch.num_rows() as u64;
                            yield Ok((batch, at, start));
                        }
                    }
                    Err(failed) => yield Err(failed),
                }
            }
        };
        Batches {
            inner: Box::pin(inner),
            plan: cell,
            last: None,
            restored,
            errors: 0,
        }
    }
}

/// Refuses a restore over files that changed since the checkpoint.
fn check_restored(plan: &Plan, saved: Saved) -> anyhow::Result<()> {
    let Some((layout, identity)) = saved.file else {
        return Ok(());
    };
    let changed = |what: String| Error::Checkpoint(what).into();
    if layout != plan.layout {
        return Err(changed(
            "the Parquet files changed since the checkpoint (their row groups differ)".into(),
        ));
    }
    if let Some(unit) = plan.units.iter().find(|u| u.index == saved.unit)
        && let Some(meta) = &plan.files[unit.file]
        && meta.identity != identity
    {
        return Err(changed(format!(
            "{} changed since the checkpoint (size or modification time differ)",
            meta.location
        )));
    }
    Ok(())
}

impl Stream for Batches {
    type Item = anyhow::Result<RecordBatch>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match std::task::ready!(this.inner.as_mut().poll_next(cx)) {
            Some(Ok((batch, at, start))) => {
                this.last = Some((at, start, start + batch.num_rows() as u64));
                Poll::Ready(Some(Ok(batch)))
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

impl Resumable for Batches {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let errors = this.restored.map_or(0, |saved| saved.errors) + this.errors;
        let Some((at, _, end)) = this.last else {
            // No batch yielded yet: where it started.
            let start = this.restored.unwrap_or(Saved {
                unit: 0,
                row: 0,
                file: None,
                errors: 0,
            });
            return Ok(Saved { errors, ..start }.to_state());
        };
        let plan = this
            .plan
            .get()
            .ok_or_else(|| unsupported(STAGE, "no plan yet"))?;
        let unit = plan.units[at];
        let file = plan.files[unit.file]
            .as_ref()
            .map(|meta| (plan.layout, meta.identity));
        Ok(Saved {
            unit: unit.index,
            row: end,
            file,
            errors,
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

/// The batches at saved positions ((unit, first row) each), read again one by one.
#[must_use = "streams do nothing unless polled"]
struct Replay {
    inner: Pin<Box<dyn Stream<Item = anyhow::Result<RecordBatch>> + Send>>,
    provs: Arc<[Prov]>,
    next: usize,
}

impl Replay {
    fn new(
        config: Arc<ParquetDataset>,
        provs: Arc<[Prov]>,
        stats: Option<Arc<crate::stats::StageCounters>>,
    ) -> Self {
        let wanted = Arc::clone(&provs);
        let inner = async_stream::stream! {
            let (plan, _) = plan(&config).await;
            for prov in wanted.iter() {
                let batch = async {
                    let (unit, row) = match prov {
                        Prov::At(words) if words.len() == 2 => (words[0], words[1]),
                        _ => return Err(Error::Checkpoint(format!(
                            "a saved Parquet position is not (row group, row): {prov:?}"
                        )).into()),
                    };
                    let at = plan
                        .units
                        .iter()
                        .position(|u| u.index == unit)
                        .ok_or_else(|| Error::Checkpoint(format!(
                            "no row group {unit} in the Parquet files (they changed?)"
                        )))?;
                    let size = config.batch_size;
                    let batches =
                        read_unit(Arc::clone(&plan), at, row, Some(size as u64), size, stats.clone())
                            .await?;
                    batches.into_iter().next().ok_or_else(|| {
                        anyhow::Error::from(Error::Checkpoint(format!(
                            "no row {row} in row group {unit} of the Parquet files (they changed?)"
                        )))
                    })
                };
                yield batch.await;
            }
        };
        Replay {
            inner: Box::pin(inner),
            provs,
            next: 0,
        }
    }
}

impl Stream for Replay {
    type Item = anyhow::Result<RecordBatch>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let item = std::task::ready!(this.inner.as_mut().poll_next(cx));
        if item.is_some() {
            this.next += 1;
        }
        Poll::Ready(item)
    }
}

impl Resumable for Replay {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Err(crate::engine::replaying(STAGE))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        crate::engine::numbered(STAGE, self.next as u64, Some(&self.provs))
    }
}
