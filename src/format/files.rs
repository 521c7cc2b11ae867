//! Reading many files through one decoder: in order, or several at once.

use std::sync::Arc;

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::{self, Stream, StreamExt};

use super::Compression;
use super::options::{BlockOptions, FileOptions};
use crate::checkpoint::{Prov, State};
use crate::engine::Resumable;
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Source, Start as SourceStart};
use crate::options::Parallelism;
use crate::storage::blocks::Blocks;
use crate::storage::local::READ_AHEAD;
use crate::storage::{Identity, Location};

/// Turns one opened file into elements; the `&str` names the file in errors; the blocks start
/// at `Start` (a restored reader's position).
pub(crate) type Decode<T> = Arc<dyn Fn(Opened, &str, Start) -> BoxStream<T> + Send + Sync>;

/// Where a file's reader starts: the (decompressed) byte offset of a record boundary, and
/// that record's index in the file.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Start {
    pub(crate) offset: u64,
    pub(crate) record: u64,
}

impl Start {
    /// The offset a file's reader saves once it has ended: after an error that ends the file
    /// (damaged data, a failed read), read again from its last record's end it would give
    /// that error again, where the epoch it resumes had no more of the file.
    pub(crate) const ENDED: u64 = u64::MAX;
}

/// One file opened for a format's decoder.
pub(crate) struct Opened {
    /// Its (decompressed) blocks.
    pub(crate) blocks: Blocks,
    /// The blocks are windows of the file mapped into memory: an element sliced out of one
    /// holds on to page cache, not to heap memory, so small elements need no copy.
    pub(crate) mapped: bool,
    /// The blocks are decompressed (GZIP or ZLIB), not the file's own bytes.
    pub(crate) decompressed: bool,
    /// What the file was when opened (its size and modification time or ETag).
    pub(crate) identity: Option<Identity>,
    /// The file.
    pub(crate) location: Location,
}

/// A file format's decoder, as one type: its fields are its parameters that decide the
/// elements (a record's layout, a damaged-data policy), hashed into the recipe's fingerprint
/// by their `Hash` (so a parameter added later is keyed unless it is wrapped in
/// [`Unkeyed`](crate::engine::Unkeyed)), and [`decode`](Format::decode) turns one opened
/// file into elements, saving its position as `[offset, record]` and giving each element's
/// start offset as its position.
pub(crate) trait Format: std::hash::Hash + Send + Sync + 'static {
    /// What each file's records are.
    type Out: Send + 'static;
    /// The stage name of each file's reader (`tfrecord`, `text_line`).
    const STAGE: &'static str;

    /// The elements of `file` (`name` names it in errors), its blocks starting at `start`.
    fn decode(self: Arc<Self>, file: Opened, name: &str, start: Start) -> BoxStream<Self::Out>;
}

/// How to read each file of a file dataset (what the files are and how they are read as
/// blocks is the [`FileOptions`] given with it): a [`Format`], type-erased.
pub(crate) struct FileFormat<T> {
    /// The stage name of each file's reader.
    pub(crate) stage: &'static str,
    pub(crate) decode: Decode<T>,
    /// The key of the format's parameters; the options every reader shares are keyed beside
    /// them ([`key`](FileFormat::key)).
    format_key: u64,
}

impl<T> Clone for FileFormat<T> {
    fn clone(&self) -> Self {
        FileFormat {
            stage: self.stage,
            decode: Arc::clone(&self.decode),
            format_key: self.format_key,
        }
    }
}

impl<T: Send + 'static> FileFormat<T> {
    pub(crate) fn new<F: Format<Out = T>>(format: F) -> Self {
        let format_key = crate::engine::params_key(&format);
        let format = Arc::new(format);
        FileFormat {
            stage: F::STAGE,
            decode: Arc::new(move |file, name, start| {
                Arc::clone(&format).decode(file, name, start)
            }),
            format_key,
        }
    }
}

impl<T> FileFormat<T> {
    /// The key of a reader of this format whose files are read as `blocks` says, for the
    /// recipe's fingerprint: the shared options that decide the elements
    /// ([`BlockOptions::key`]) and the format's own.
    pub(crate) fn key(&self, blocks: &BlockOptions) -> u64 {
        crate::hash::Key::new()
            .word(blocks.key())
            .word(self.format_key)
            .finish()
    }
}

/// The elements of the files in order, or `num_parallel_reads` files at once through
/// `parallel_interleave` (one element from each in turn, deterministically), with as many
/// more opened ahead: the next files' first bytes (a round trip to object storage) arrive
/// while the current ones are read, instead of after each ends.
pub(crate) fn read_files<T: Send + 'static>(
    options: FileOptions,
    format: FileFormat<T>,
) -> Dataset<T> {
    let FileOptions {
        files,
        num_parallel_reads,
        blocks,
    } = options;
    // The list of names and the interleave over them are plumbing: the statistics show the
    // readers as one stage, with the interleave's parallelism, as if the user had written
    // `list_files(..).parallel_interleave(n, 1, AUTOTUNE, |f| read(f))`.
    let files = Dataset::from_vec(files).hidden();
    let key = format.key(&blocks);
    let read = move |path: Location| {
        Dataset::from_source(FileElements {
            path,
            format: format.clone(),
            blocks,
        })
    };
    match num_parallel_reads {
        None => files.flat_map(read).hidden().keyed(key),
        Some(n) => {
            // AUTOTUNE opens `n` more ahead of the cycle (`2 * n` readers).
            let n = n.resolve().max(1);
            files
                .parallel_interleave(n, 1, Parallelism::Autotune, read)
                .hidden()
                .keyed(key)
        }
    }
}

/// Adds each block's bytes to a stage's statistics once the block is used up.
struct BlockBytes {
    stats: Arc<crate::stats::StageCounters>,
    /// The block being decoded.
    last: usize,
}

impl BlockBytes {
    fn next(&mut self, len: usize) {
        self.stats.add_bytes(self.last as u64);
        self.last = len;
    }
}

impl Drop for BlockBytes {
    fn drop(&mut self) {
        self.stats.add_bytes(self.last as u64);
    }
}

/// One file's elements; the file is opened when the stream is first polled. Restored, it
/// opens the file at the saved offset (and refuses a file that changed since); in replay, it
/// reads the records at the saved positions (see [`replay`]).
///
/// Saved state: the decoder's `[offset, record]` (after the last element yielded), then the
/// file's size and version ([`Identity`]) once it is open. An element's position is its start
/// offset and the digest of the file's identity ([`position`]).
struct FileElements<T> {
    path: Location,
    format: FileFormat<T>,
    blocks: BlockOptions,
}

// Only ever the inner dataset of `read_files`, whose stage keys the format and the files.
impl<T> std::hash::Hash for FileElements<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.path.hash(state);
        self.format.key(&self.blocks).hash(state);
    }
}

impl<T: Send + 'static> Source for FileElements<T> {
    type Out = T;
    type Stream = BoxStream<T>;
    const NAME: &'static str = "file";

    fn name(&self) -> &'static str {
        self.format.stage
    }

    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }

    /// The start is the context's (the ledger of files is read beside it).
    fn open(&self, ctx: &Ctx, _: SourceStart<'_>) -> anyhow::Result<BoxStream<T>> {
        let path = self.path.clone();
        let location = path.clone();
        let format = self.format.clone();
        let blocks = self.blocks;
        let stats = ctx.stats_handle();
        let files = ctx.files().clone();
        if let Some(provs) = ctx.replaying() {
            let provs = Arc::clone(provs);
            let stage = format.stage;
            let records = replay(path, format, blocks, Arc::clone(&provs), stats, files);
            return Ok(Box::pin(Replayed::new(records, provs, stage)));
        }
        let (start, expected) = match ctx.restoring().map(restored_start).transpose() {
            Ok(restored) => restored.unwrap_or_default(),
            Err(e) => return Ok(crate::engine::error_stream(e)),
        };
        // What the file was at the checkpoint this epoch resumes from: the state's, or
        // the ledger's when the state was saved before the file was open.
        let expected = expected.or_else(|| files.expected(&path));
        let stage = format.stage;
        let open = async move {
            let name = path.to_string();
            let opened = open_blocks(&path, blocks, stats, start.offset)
                .await
                .and_then(|opened| unchanged(opened, expected, &name));
            match opened {
                Ok(opened) => {
                    let identity = opened.identity;
                    files.opened(&path, identity);
                    ((format.decode)(opened, &name, start), identity)
                }
                Err(e) => {
                    // A changed file's error names it already. A file the checkpoint
                    // had open that cannot be opened again (gone, unreadable) cannot
                    // be resumed: refused, never skipped by an error policy.
                    let e = if crate::error::is_refusal(&e) {
                        e
                    } else if expected.is_some() {
                        gone(&name, &e)
                    } else {
                        e.context(format!("opening {name}"))
                    };
                    (crate::engine::error_stream(e), None)
                }
            }
        };
        // Ended at the checkpoint: nothing more of it, not even opened.
        let opening = (start.offset != Start::ENDED).then(|| Box::pin(open) as _);
        Ok(Box::pin(FileReader {
            opening,
            inner: None,
            start,
            identity: expected,
            location,
            stage,
            damaged: None,
        }))
    }
}

/// Where a restored file reader starts, and what the file was then (when it was open).
pub(crate) fn restored_start(state: &State) -> anyhow::Result<(Start, Option<Identity>)> {
    let start = Start {
        offset: state.word(0)?,
        record: state.word(1)?,
    };
    let identity = match (state.words.get(2), state.words.get(3)) {
        (Some(&size), Some(&version)) => Some(Identity { size, version }),
        _ => None,
    };
    Ok((start, identity))
}

/// `opened`, unless it is not the file a checkpoint saw (`expected`): then an
/// [`Error::Checkpoint`](crate::Error) naming it.
pub(crate) fn unchanged(
    opened: Opened,
    expected: Option<Identity>,
    name: &str,
) -> anyhow::Result<Opened> {
    match (expected, opened.identity) {
        (Some(then), Some(now)) if then != now => Err(crate::Error::Checkpoint(format!(
            "{name} changed since the checkpoint (then {} bytes, now {}{}): resume over the \
             files the checkpoint was taken over",
            then.size,
            now.size,
            if then.size == now.size {
                ", and its modification time or ETag differs"
            } else {
                ""
            }
        ))
        .into()),
        _ => Ok(opened),
    }
}

/// The words a file reader's state ends with: the file's size and version.
pub(crate) fn identity_words(identity: Option<Identity>) -> impl Iterator<Item = u64> {
    identity.into_iter().flat_map(|i| [i.size, i.version])
}

/// A file's blocks from `offset` on (its first `offset` bytes dropped).
fn skip_to(mut opened: Opened, offset: u64) -> Opened {
    if offset == 0 {
        return opened;
    }
    let mut left = offset;
    let blocks = std::mem::replace(&mut opened.blocks, Box::pin(stream::empty()));
    opened.blocks = Box::pin(blocks.filter_map(move |block| {
        let out = match block {
            Ok(mut block) if left > 0 => {
                let n = (block.len() as u64).min(left);
                left -= n;
                bytes::Buf::advance(&mut block, n as usize);
                (!block.is_empty()).then_some(Ok(block))
            }
            other => Some(other),
        };
        futures::future::ready(out)
    }));
    opened
}

/// The elements of one file at `provs` (each a record's start offset and the digest of the
/// file's identity it was read from, [`position`]), in that order: the file is read from the
/// first of them to the last (positions in a shuffle buffer are close together), and the
/// records wanted are kept. A file whose identity is not the one its records were read from
/// is refused ([`Error::Checkpoint`](crate::Error) naming it) before any record; records past
/// damage that a resynchronising reader skipped are found as they were the first time.
async fn replay<T: Send + 'static>(
    path: Location,
    format: FileFormat<T>,
    blocks: BlockOptions,
    provs: Arc<[Prov]>,
    stats: Option<Arc<crate::stats::StageCounters>>,
    files: crate::checkpoint::opened::Ledger,
) -> anyhow::Result<Vec<anyhow::Result<T>>> {
    let name = path.to_string();
    let positions = provs
        .iter()
        .map(from_position)
        .collect::<anyhow::Result<Vec<(u64, u64, Option<u64>)>>>()?;
    let offsets: Vec<u64> = positions.iter().map(|p| p.0).collect();
    let digests = positions.iter().map(|p| p.1);
    // The record each damaged element named (the scan below counts records from `first`).
    let damaged: std::collections::HashMap<u64, u64> = positions
        .iter()
        .filter_map(|&(offset, _, record)| Some((offset, record?)))
        .collect();
    let (Some(&first), Some(&last)) = (offsets.iter().min(), offsets.iter().max()) else {
        return Ok(Vec::new());
    };
    let opened = open_blocks(&path, blocks, stats, first)
        .await
        .map_err(|e| gone(&name, &e))?;
    let opened = unchanged(opened, files.expected(&path), &name)?;
    if let Some(now) = opened.identity
        && digests.clone().any(|d| d != 0 && d != now.digest())
    {
        return Err(crate::Error::Checkpoint(format!(
            "{name} changed since the checkpoint (now {} bytes, and not the file the records \
             it holds were read from): resume over the files the checkpoint was taken over",
            now.size
        ))
        .into());
    }
    let start = Start {
        offset: first,
        record: 0,
    };
    let mut records = (format.decode)(opened, &name, start);
    let mut wanted: std::collections::HashMap<u64, Option<anyhow::Result<T>>> =
        offsets.iter().map(|&o| (o, None)).collect();
    let mut found = 0;
    while let Some(item) = records.next().await {
        // An error element has a position too (a resynchronised reader's skipped bytes): it
        // may be one held at the checkpoint; reading goes on after it while the decoder does.
        let at = match records.last_prov().and_then(|p| p.single()) {
            Ok(at) => at,
            Err(_) if item.is_err() => continue,
            Err(e) => return Err(e),
        };
        if let Some(slot) = wanted.get_mut(&at)
            && slot.is_none()
        {
            let mut item = item;
            if let (Err(e), Some(&saved)) = (&mut item, damaged.get(&at))
                && let Some(crate::Error::DataLoss { record, .. }) =
                    e.downcast_mut::<crate::Error>()
            {
                *record = saved;
            }
            *slot = Some(item);
            found += 1;
        }
        if found == wanted.len() || at >= last {
            break;
        }
    }
    Ok(offsets
        .iter()
        .map(|o| {
            wanted.get_mut(o).and_then(Option::take).unwrap_or_else(|| {
                Err(crate::Error::Checkpoint(format!(
                    "{name}: no record starts at offset {o} (the file changed since the checkpoint?)"
                ))
                .into())
            })
        })
        .collect())
}

/// The refusal of a resume over a file the checkpoint read that cannot be opened again.
pub(crate) fn gone(name: &str, e: &anyhow::Error) -> anyhow::Error {
    crate::Error::Checkpoint(format!(
        "{name} cannot be opened again to resume from the checkpoint: {e:#}"
    ))
    .into()
}

/// The position of a record of a file: its start offset, then the digest of the file's
/// identity ([`Identity::digest`], 0 when the storage gives none), so a replay can tell that
/// the file is still the one the record was read from.
pub(crate) fn position(offset: u64, identity: Option<Identity>) -> anyhow::Result<Prov> {
    Prov::at(offset).push(identity.map_or(0, |i| i.digest()))
}

/// `(offset, digest, damaged record)` of a [`position`] (a damaged element's adds the record
/// its error named).
fn from_position(prov: &Prov) -> anyhow::Result<(u64, u64, Option<u64>)> {
    match prov {
        Prov::At(words) if words.len() == 2 => Ok((words[0], words[1], None)),
        Prov::At(words) if words.len() == 3 => Ok((words[0], words[1], Some(words[2]))),
        _ => Err(crate::Error::Checkpoint(format!(
            "a saved position is not a file record's: {prov:?}"
        ))
        .into()),
    }
}

/// The elements at `provs` of a dataset reading `files` in order itself (not through a
/// `flat_map`, but with its layout: each position is a record's [`position`] then the file's
/// index), in that order: each file is read once (see [`replay`]), a few at once.
pub(crate) fn replay_files<T: Send + 'static>(
    files: Arc<[Location]>,
    format: FileFormat<T>,
    blocks: BlockOptions,
    provs: Arc<[Prov]>,
    stats: Option<Arc<crate::stats::StageCounters>>,
    ledger: crate::checkpoint::opened::Ledger,
) -> BoxStream<T> {
    let stage = format.stage;
    let wanted = Arc::clone(&provs);
    let records = async move {
        // For each file, the offsets wanted in it and where each goes.
        let mut groups: Vec<(u64, Vec<Prov>, Vec<usize>)> = Vec::new();
        for (i, prov) in wanted.iter().enumerate() {
            let (file, offset) = prov.pop()?;
            let group = match groups.iter().position(|(f, _, _)| *f == file) {
                Some(g) => g,
                None => {
                    groups.push((file, Vec::new(), Vec::new()));
                    groups.len() - 1
                }
            };
            groups[group].1.push(offset);
            groups[group].2.push(i);
        }
        let mut out: Vec<Option<anyhow::Result<T>>> = (0..wanted.len()).map(|_| None).collect();
        let reads = groups.into_iter().map(|(file, offsets, places)| {
            let path = usize::try_from(file)
                .ok()
                .and_then(|f| files.get(f))
                .cloned();
            let (format, stats, ledger) = (format.clone(), stats.clone(), ledger.clone());
            async move {
                let path = path.ok_or_else(|| {
                    crate::Error::Checkpoint(format!(
                        "a saved position names file {file}, past the dataset's list"
                    ))
                })?;
                let records = replay(path, format, blocks, offsets.into(), stats, ledger).await?;
                anyhow::Ok((records, places))
            }
        });
        let mut reads = stream::iter(reads).buffer_unordered(REPLAY_FILES_AT_ONCE);
        while let Some(read) = reads.next().await {
            let (records, places) = read?;
            for (record, place) in records.into_iter().zip(places) {
                out[place] = Some(record);
            }
        }
        Ok(out
            .into_iter()
            .map(|record| {
                record.unwrap_or_else(|| {
                    Err(crate::Error::Checkpoint("a saved record was not read again".into()).into())
                })
            })
            .collect())
    };
    Box::pin(Replayed::new(records, provs, stage))
}

/// Files a replay reads at once.
const REPLAY_FILES_AT_ONCE: usize = 8;

/// A file's records at saved positions, as [`replay`] reads them.
struct Replayed<T> {
    records: Option<futures::future::BoxFuture<'static, anyhow::Result<Vec<anyhow::Result<T>>>>>,
    ready: std::vec::IntoIter<anyhow::Result<T>>,
    provs: Arc<[Prov]>,
    yielded: usize,
    stage: &'static str,
}

impl<T> Replayed<T> {
    fn new(
        records: impl std::future::Future<Output = anyhow::Result<Vec<anyhow::Result<T>>>>
        + Send
        + 'static,
        provs: Arc<[Prov]>,
        stage: &'static str,
    ) -> Self {
        Replayed {
            records: Some(Box::pin(records)),
            ready: Vec::new().into_iter(),
            provs,
            yielded: 0,
            stage,
        }
    }
}

impl<T> Unpin for Replayed<T> {}
impl<T> Unpin for FileReader<T> {}

impl<T> Stream for Replayed<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(records) = this.records.as_mut() {
            let records = std::task::ready!(records.as_mut().poll(cx));
            this.records = None;
            match records {
                Ok(records) => this.ready = records.into_iter(),
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
        }
        let item = this.ready.next();
        if item.is_some() {
            this.yielded += 1;
        }
        Poll::Ready(item)
    }
}

impl<T> Resumable for Replayed<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Err(crate::engine::replaying(self.stage))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        crate::engine::numbered(self.stage, self.yielded as u64, Some(&self.provs))
    }
}

/// A file's elements: opened at the first poll, then its decoder's.
struct FileReader<T> {
    opening: Option<futures::future::BoxFuture<'static, (BoxStream<T>, Option<Identity>)>>,
    inner: Option<BoxStream<T>>,
    /// Where it starts (saved until the file is open).
    start: Start,
    /// What the file is (once open; before, what it was at the checkpoint restored from).
    identity: Option<Identity>,
    location: Location,
    stage: &'static str,
    /// The last element is damaged data, in this record of the file.
    damaged: Option<u64>,
}

impl<T> Stream for FileReader<T> {
    type Item = anyhow::Result<T>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(opening) = this.opening.as_mut() {
            let (inner, identity) = std::task::ready!(opening.as_mut().poll(cx));
            this.opening = None;
            this.inner = Some(inner);
            this.identity = identity;
        }
        let item = match this.inner.as_mut() {
            Some(inner) => std::task::ready!(inner.as_mut().poll_next(cx)),
            None => None,
        };
        this.damaged = match &item {
            Some(Err(e)) => damaged_record(e),
            _ => None,
        };
        Poll::Ready(item)
    }
}

/// The record a [`DataLoss`](crate::Error::DataLoss) error names.
fn damaged_record(e: &anyhow::Error) -> Option<u64> {
    match e.downcast_ref::<crate::Error>() {
        Some(crate::Error::DataLoss { record, .. }) => Some(*record),
        _ => None,
    }
}

impl<T> Resumable for FileReader<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let (state, identity) = match this.inner.as_mut() {
            Some(inner) => (inner.as_mut().save()?, this.identity),
            // Not open yet (a mark taken before its first element): what a local file is now,
            // so that a resume from here can tell it changed (an object's identity would
            // take a round trip: it is known once the object is open).
            None => (
                State::new(this.stage).words([this.start.offset, this.start.record]),
                this.identity
                    .or_else(|| crate::storage::identity_now(&this.location)),
            ),
        };
        Ok(state.words(identity_words(identity)))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        match &self.inner {
            Some(inner) => {
                let at = position(inner.last_prov()?.single()?, self.identity)?;
                // Damage names its record: read again from another offset, it must still.
                match self.damaged {
                    Some(record) => at.push(record),
                    None => Ok(at),
                }
            }
            None => Err(crate::engine::unsupported(
                self.stage,
                "no element yielded yet",
            )),
        }
    }
}

/// Opens one file as its (decompressed) blocks from (decompressed) byte `offset` on,
/// `buffer_size` bytes each, read ahead (with `memory_map`, a local file not compressed is
/// mapped window by window instead), as `blocks` says. With `stats`, each block's bytes count in the stage's
/// statistics.
///
/// A file read as it is (not compressed) is read from the offset: positioned reads of a
/// local file, ranged GETs of an object. A compressed stream has no random access: it is
/// inflated from its start and its first `offset` bytes are dropped, which costs reading
/// and inflating the file up to the offset (a restored reader of a compressed file near its
/// end reads nearly the whole file again).
pub(crate) async fn open_blocks(
    path: &Location,
    blocks: BlockOptions,
    stats: Option<Arc<crate::stats::StageCounters>>,
    offset: u64,
) -> anyhow::Result<Opened> {
    let BlockOptions {
        compression,
        buffer_size,
        memory_map,
    } = blocks;
    let compression = compression.for_extension(path.extension());
    let decompressed = compression != Compression::None;
    let memory_map = memory_map && !decompressed;
    let raw_offset = if decompressed { 0 } else { offset };
    let file =
        crate::storage::open_blocks(path, buffer_size, READ_AHEAD, memory_map, raw_offset).await?;
    let mut blocks = compression.blocks(file.blocks, buffer_size);
    if let Some(stats) = stats {
        // The stage's bytes (what the autotuner costs buffers by), after decompression: a
        // block counts once the decoder asks for the next one (or drops the stream), so the
        // bytes never run ahead of the elements cut from them (where a reader task cuts
        // them, the elements it holds for its consumer, three chunks at most, count already).
        let mut done = BlockBytes { stats, last: 0 };
        blocks = Box::pin(blocks.inspect(move |block| {
            if let Ok(block) = block {
                done.next(block.len());
            }
        }));
    }
    let opened = Opened {
        blocks,
        mapped: file.mapped,
        decompressed,
        identity: file.identity,
        location: path.clone(),
    };
    // What the storage could not skip (a compressed stream, a pipe) is read and dropped.
    let read_from = if decompressed { 0 } else { file.start };
    Ok(skip_to(opened, offset.saturating_sub(read_from)))
}
