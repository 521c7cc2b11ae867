//! Reading many files through one decoder: in order, or several at once.

use std::sync::Arc;

use futures::stream::{self, StreamExt};

use super::Compression;
use super::blocks::Blocks;
use crate::dataset::{BoxStream, Cardinality, Dataset};
use crate::options::Parallelism;
use crate::storage::Location;
use crate::storage::local::READ_AHEAD;

/// Turns one opened file into elements; the `&str` names the file in errors.
pub(crate) type Decode<T> = Arc<dyn Fn(Opened, &str) -> BoxStream<T> + Send + Sync>;

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
}

impl<T> Clone for FileFormat<T> {
    fn clone(&self) -> Self {
        FileFormat {
            stage: self.stage,
            decode: Arc::clone(&self.decode),
            compression: self.compression,
            buffer_size: self.buffer_size,
            memory_map: self.memory_map,
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

/// One file's elements; the file is opened when the stream is first polled.
fn file_elements<T: Send + 'static>(path: Location, format: FileFormat<T>) -> Dataset<T> {
    Dataset::source(format.stage, Cardinality::Unknown, move |ctx| {
        let path = path.clone();
        let format = format.clone();
        let stats = ctx.stats_handle();
        let open = async move {
            let name = path.to_string();
            let (compression, size) = (format.compression, format.buffer_size);
            match open_blocks(&path, compression, size, format.memory_map, stats).await {
                Ok(opened) => (format.decode)(opened, &name),
                Err(e) => {
                    stream::once(async move { Err(e.context(format!("opening {name}"))) }).boxed()
                }
            }
        };
        // Flattened rather than re-yielded, so each element costs one direct poll.
        stream::once(open).flatten()
    })
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
