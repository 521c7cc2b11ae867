//! Reading many files through one decoder: in order, or several at once.

use std::sync::Arc;

use std::pin::Pin;
use std::task::{Context, Poll};

use anyhow::Context as _;
use futures::stream::{self, Stream, StreamExt};

use super::Compression;
use super::blocks::Blocks;
use crate::checkpoint::{Prov, Resumable, State};
use crate::dataset::{BoxStream, Cardinality, Dataset};
use crate::options::Parallelism;
use crate::storage::Location;
use crate::storage::local::READ_AHEAD;

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

/// One file opened for a format's decoder.
pub(crate) struct Opened {
    /// Its (decompressed) blocks.
    pub(crate) blocks: Blocks,
    /// The blocks are windows of the file mapped into memory: an element sliced out of one
    /// holds on to page cache, not to heap memory, so small elements need no copy.
    pub(crate) mapped: bool,
    /// The blocks are decompressed (GZIP or ZLIB), not the file's own bytes.
    pub(crate) decompressed: bool,
}

/// How to read each file of a file dataset.
pub(crate) struct FileFormat<T> {
    /// The stage name of each file's reader (`tfrecord`, `text_line`).
    pub(crate) stage: &'static str,
    pub(crate) decode: Decode<T>,
    pub(crate) compression: Compression,
    pub(crate) buffer_size: usize,
    /// Map local, uncompressed files into memory rather than read them (see
    /// `TFRecordDataset::memory_map`).
    pub(crate) memory_map: bool,
    /// The decoder saves its position (`[offset, record]`) and gives each element's start
    /// offset as its position.
    pub(crate) resumable: bool,
}

impl<T> Clone for FileFormat<T> {
    fn clone(&self) -> Self {
        FileFormat {
            stage: self.stage,
            decode: Arc::clone(&self.decode),
            compression: self.compression,
            buffer_size: self.buffer_size,
            memory_map: self.memory_map,
            resumable: self.resumable,
        }
    }
}

/// The elements of `files` in order, or `num_parallel_reads` files at once through
/// `parallel_interleave` (one element from each in turn, deterministically), with as many
/// more opened ahead: the next files' first bytes (a round trip to object storage) arrive
/// while the current ones are read, instead of after each ends.
pub(crate) fn read_files<T: Send + 'static>(
    files: Vec<Location>,
    format: FileFormat<T>,
    num_parallel_reads: Option<Parallelism>,
) -> Dataset<T> {
    // The list of names and the interleave over them are plumbing: the statistics show the
    // readers as one stage, with the interleave's parallelism, as if the user had written
    // `list_files(..).parallel_interleave(n, 1, AUTOTUNE, |f| read(f))`.
    let files = Dataset::from_vec(files).hidden();
    let read = move |path: Location| file_elements(path, format.clone());
    match num_parallel_reads {
        None => files.flat_map(read).hidden(),
        Some(n) => {
            // AUTOTUNE opens `n` more ahead of the cycle (`2 * n` readers).
            let n = n.resolve().max(1);
            files
                .parallel_interleave(n, 1, Parallelism::Autotune, read)
                .hidden()
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
/// opens the file at the saved offset; in replay, it reads the records at the saved
/// positions (see [`replay`]).
fn file_elements<T: Send + 'static>(path: Location, format: FileFormat<T>) -> Dataset<T> {
    let resumable = format.resumable;
    Dataset::stage_resumable(
        format.stage,
        Cardinality::Unknown,
        crate::options::Options::default(),
        0,
        crate::dataset::Counting::Wrapped,
        move |ctx| -> BoxStream<T> {
            let path = path.clone();
            let format = format.clone();
            let stats = ctx.stats_handle();
            if let Some(provs) = ctx.replaying() {
                let provs = Arc::clone(provs);
                let stage = format.stage;
                let records = replay(path, format, Arc::clone(&provs), stats);
                return Box::pin(Replayed::new(records, provs, stage));
            }
            let start = match ctx.restoring() {
                Some(state) => match (state.word(0), state.word(1)) {
                    (Ok(offset), Ok(record)) => Start { offset, record },
                    (Err(e), _) | (_, Err(e)) => return crate::dataset::error_stream(e),
                },
                None => Start::default(),
            };
            let stage = format.stage;
            let open = async move {
                let name = path.to_string();
                let (compression, size) = (format.compression, format.buffer_size);
                let opened = open_blocks(&path, compression, size, format.memory_map, stats).await;
                match opened.and_then(|opened| skip_to(opened, start.offset)) {
                    Ok(opened) => (format.decode)(opened, &name, start),
                    Err(e) => crate::dataset::error_stream(e.context(format!("opening {name}"))),
                }
            };
            Box::pin(FileReader {
                opening: Some(Box::pin(open)),
                inner: None,
                start,
                stage,
            })
        },
    )
    .resumable(resumable)
}

/// A file's blocks from `offset` on (its first `offset` bytes, decompressed, dropped).
fn skip_to(mut opened: Opened, offset: u64) -> anyhow::Result<Opened> {
    if offset == 0 {
        return Ok(opened);
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
    Ok(opened)
}

/// The elements of one file at `provs` (each a record's start offset), in that order: the
/// file is read from the first of them to the last (positions in a shuffle buffer are close
/// together), and the records wanted are kept.
async fn replay<T: Send + 'static>(
    path: Location,
    format: FileFormat<T>,
    provs: Arc<[Prov]>,
    stats: Option<Arc<crate::stats::StageCounters>>,
) -> anyhow::Result<Vec<anyhow::Result<T>>> {
    let name = path.to_string();
    if !format.resumable {
        return Err(crate::checkpoint::unsupported(
            format.stage,
            "this format's reader does not save its position",
        ));
    }
    let offsets = provs
        .iter()
        .map(Prov::single)
        .collect::<anyhow::Result<Vec<u64>>>()?;
    let (Some(&first), Some(&last)) = (offsets.iter().min(), offsets.iter().max()) else {
        return Ok(Vec::new());
    };
    let opened = open_blocks(
        &path,
        format.compression,
        format.buffer_size,
        format.memory_map,
        stats,
    )
    .await
    .with_context(|| format!("opening {name} to read the records saved in a checkpoint"))?;
    let opened = skip_to(opened, first)?;
    let start = Start {
        offset: first,
        record: 0,
    };
    let mut records = (format.decode)(opened, &name, start);
    let mut wanted: std::collections::HashMap<u64, Option<anyhow::Result<T>>> =
        offsets.iter().map(|&o| (o, None)).collect();
    let mut found = 0;
    while let Some(item) = records.next().await {
        let at = records.last_prov()?.single()?;
        let failed = item.is_err();
        if let Some(slot) = wanted.get_mut(&at)
            && slot.is_none()
        {
            *slot = Some(item);
            found += 1;
        }
        if failed || found == wanted.len() || at >= last {
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
        Err(crate::checkpoint::unsupported(
            self.stage,
            "a stream replaying saved positions is not saved",
        ))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.yielded
            .checked_sub(1)
            .and_then(|i| self.provs.get(i))
            .cloned()
            .ok_or_else(|| crate::checkpoint::unsupported(self.stage, "no element yielded yet"))
    }
}

/// A file's elements: opened at the first poll, then its decoder's.
struct FileReader<T> {
    opening: Option<futures::future::BoxFuture<'static, BoxStream<T>>>,
    inner: Option<BoxStream<T>>,
    /// Where it starts (saved until the file is open).
    start: Start,
    stage: &'static str,
}

impl<T> Stream for FileReader<T> {
    type Item = anyhow::Result<T>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(opening) = this.opening.as_mut() {
            let inner = std::task::ready!(opening.as_mut().poll(cx));
            this.opening = None;
            this.inner = Some(inner);
        }
        match this.inner.as_mut() {
            Some(inner) => inner.as_mut().poll_next(cx),
            None => Poll::Ready(None),
        }
    }
}

impl<T> Resumable for FileReader<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        match this.inner.as_mut() {
            Some(inner) => inner.as_mut().save(),
            None => Ok(State::new(this.stage).words([this.start.offset, this.start.record])),
        }
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        match &self.inner {
            Some(inner) => inner.last_prov(),
            None => Err(crate::checkpoint::unsupported(
                self.stage,
                "no element yielded yet",
            )),
        }
    }

    fn resumable(&self) -> bool {
        self.inner.as_ref().is_none_or(|inner| inner.resumable())
    }
}

/// Opens one file as its (decompressed) blocks, `buffer_size` bytes each, read ahead (with
/// `memory_map`, a local file not compressed is mapped window by window instead). With
/// `stats`, each block's bytes count in the stage's statistics.
pub(crate) async fn open_blocks(
    path: &Location,
    compression: Compression,
    buffer_size: usize,
    memory_map: bool,
    stats: Option<Arc<crate::stats::StageCounters>>,
) -> anyhow::Result<Opened> {
    let compression = compression.for_extension(path.extension());
    let decompressed = compression != Compression::None;
    let memory_map = memory_map && !decompressed;
    let (file, mapped) =
        crate::storage::open_blocks(path, buffer_size, READ_AHEAD, memory_map).await?;
    let mut blocks = compression.blocks(file, buffer_size);
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
    Ok(Opened {
        blocks,
        mapped,
        decompressed,
    })
}
