//! Local files: block reads on blocking threads, `read_ahead` blocks in flight; or, for
//! formats that cut elements straight out of their blocks, windows of the file mapped into
//! memory ([`map_ahead`]).
//!
//! Every file is read to its end as the reads find it (a read that returns 0 bytes), never
//! to a length taken at open: a file that grows while it is read is read to its new end, as
//! TensorFlow reads. A regular file is read by positioned reads, several at once; anything
//! else (a pipe, a FIFO, `/dev/stdin`, a character device), and a regular file that reports
//! a length of 0 (`/proc` and `/sys` files, which have contents all the same), is read
//! sequentially by one blocking thread, `read_ahead` blocks ahead of the consumer.
//!
//! A block's buffer goes back to a small process-wide pool once the block is dropped: right
//! after decoding when its records were copied out (small ones), else with its last slice.
//! So steady-state reads neither fault fresh pages in nor zero them.

use std::fs::Metadata;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::stream::{self, Stream, StreamExt};

use super::Blocks;
use super::{Identity, OpenedFile};
use crate::runtime;

/// Default block size of a local read (TensorFlow's `buffer_size` is 256 KiB; a 1 MiB block
/// takes a quarter of the blocking-thread round trips, for `READ_AHEAD` MiB per open file).
pub(crate) const DEFAULT_BLOCK: usize = 1024 * 1024;

/// Blocks read ahead of the consumer per open file.
pub(crate) const READ_AHEAD: usize = 2;

/// Opens `path` and streams its bytes in blocks of `block` bytes, with `read_ahead` blocks
/// being read at once (positioned reads, so they proceed in parallel and arrive in order; or,
/// for a pipe or device, one after the other on one thread), until a read finds the end.
/// Memory per open file is at most `read_ahead * block` bytes plus the consumer's buffer.
pub(crate) async fn read_ahead(
    path: &Path,
    block: usize,
    read_ahead: usize,
    offset: u64,
) -> std::io::Result<OpenedFile> {
    open(path, block, read_ahead, false, offset).await
}

/// A positioned fetch of `n` bytes of a file at an offset (a read, or a mapped window), and
/// `true` when the file ended first.
type Fetch = fn(&std::fs::File, u64, usize) -> std::io::Result<(Bytes, bool)>;

/// A file as one blocking job found it, with its size and version.
enum Opened {
    /// A regular file of known length: its first block (from the offset), and how to fetch
    /// the others.
    Positioned {
        file: std::fs::File,
        first: std::io::Result<(Bytes, bool)>,
        fetch: Fetch,
        mapped: bool,
        identity: Option<Identity>,
    },
    /// Anything else, read sequentially from its start.
    Sequential(std::fs::File, Option<Identity>),
}

/// Opens `path` as its blocks from `offset` on (mapped windows when `map` is set and the file
/// can be mapped). A pipe or a device is read from its start (`start` says where the blocks
/// begin).
///
/// Opening, asking for the length, probing the mapping and fetching the first block are one
/// job on a blocking thread: a file that fits in a block costs one round trip there. (With a
/// job per step, four for a small file (open, length, two reads ahead), a pipeline of many
/// small files kept tokio's blocking pool busy, and tokio starts a blocking thread whenever
/// none is idle: the pool grew with the machine's load, to 40-55 threads on 2 cores, and with
/// it the memory the C allocator caches per thread.)
async fn open(
    path: &Path,
    block: usize,
    read_ahead: usize,
    map: bool,
    offset: u64,
) -> std::io::Result<OpenedFile> {
    let block = block.max(1);
    let path = path.to_owned();
    let task = runtime::spawn_blocking("read", move || -> std::io::Result<Opened> {
        let file = std::fs::File::open(&path)?;
        let meta = file.metadata()?;
        let identity = identity(&meta);
        if !meta.is_file() || meta.len() == 0 {
            return Ok(Opened::Sequential(file, identity));
        }
        let mapped = map && map_window(&file, 0, 1, false).is_ok();
        let fetch: Fetch = if mapped { fetch_mapped } else { read_at };
        let first = fetch(&file, offset, block);
        Ok(Opened::Positioned {
            file,
            first,
            fetch,
            mapped,
            identity,
        })
    })
    .map_err(std::io::Error::other)?;
    let opened = task
        .await
        .map_err(|e| std::io::Error::other(runtime::join_error("read", e)))??;
    Ok(match opened {
        Opened::Sequential(file, identity) => OpenedFile {
            blocks: sequential_blocks(file, block, read_ahead),
            mapped: false,
            start: 0,
            identity,
        },
        Opened::Positioned {
            file,
            first,
            fetch,
            mapped,
            identity,
        } => OpenedFile {
            blocks: blocks_of(Arc::new(file), offset, first, block, read_ahead, fetch),
            mapped,
            start: offset,
            identity,
        },
    })
}

/// A regular file's size and modification time (in nanoseconds since 1970), to tell later
/// whether it changed; nothing for anything else (a pipe, a device).
pub(crate) fn identity(meta: &Metadata) -> Option<Identity> {
    if !meta.is_file() {
        return None;
    }
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    Some(Identity {
        size: meta.len(),
        version: modified,
    })
}

/// The files under the directory `dir` (none when it does not exist), each by its path
/// after `prefix` (`/`-separated) with its identity, into `found`.
// Only the Zarr reader (feature `zarr`) lists a store.
#[cfg_attr(not(feature = "zarr"), allow(dead_code))]
pub(crate) fn walk(
    dir: &Path,
    prefix: &str,
    found: &mut Vec<(String, Identity)>,
) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        entries => entries?,
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let key = format!("{prefix}{name}");
        let meta = std::fs::metadata(entry.path())?;
        if meta.is_dir() {
            walk(&entry.path(), &format!("{key}/"), found)?;
        } else if let Some(identity) = identity(&meta) {
            found.push((key, identity));
        }
    }
    Ok(())
}

/// The bytes of `range` in the file at `path`, up to its end; an error when the range
/// starts past the end.
pub(crate) async fn read_range(path: &Path, range: std::ops::Range<u64>) -> anyhow::Result<Bytes> {
    let file = tokio::fs::File::open(path).await?;
    let len = file.metadata().await?.len();
    anyhow::ensure!(
        range.start <= len,
        "the range starts past the end ({len} bytes)"
    );
    let n = usize::try_from(range.end.min(len).saturating_sub(range.start))?;
    let file = file.into_std().await;
    let task = runtime::spawn_blocking("read", move || read_at(&file, range.start, n))?;
    let (bytes, _) = task.await.map_err(|e| runtime::join_error("read", e))??;
    Ok(bytes)
}

/// Writes `bytes` as the file at `path`, replacing it atomically: into a temporary file
/// beside it (`.<name>.<process id>.<counter>.tmp`), synced to disk, then renamed over
/// `path`, so a reader finds the old file or the new one whole, never a part. One job on a
/// blocking thread: once begun it finishes (rename included) even if its caller is dropped,
/// so no temporary file is left behind but by a crash; a failed write removes its own.
pub(crate) async fn write_atomic(path: &Path, bytes: Bytes) -> std::io::Result<()> {
    use std::io::Write;
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let path = path.to_path_buf();
    let task = runtime::spawn_blocking("write", move || -> std::io::Result<()> {
        let name = path
            .file_name()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"))?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(
            ".{}.{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let temp = path.with_file_name(temp_name);
        let written = (|| {
            let mut file = std::fs::File::create(&temp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&temp, &path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    })
    .map_err(std::io::Error::other)?;
    task.await
        .map_err(|e| std::io::Error::other(runtime::join_error("write", e)))?
}

/// A local file opened once and kept for reads at many offsets (the records an index
/// points to), shared by the reads of an epoch.
pub(crate) type OpenSlot = std::sync::Arc<std::sync::OnceLock<std::sync::Arc<std::fs::File>>>;

/// The bytes of `range` in the file at `path`, up to its end (fewer bytes when the file ends
/// before), by one positioned read on a blocking thread; the file is opened there the first
/// time and kept in `slot` for the next reads (no open, `fstat` and close per read).
pub(crate) async fn read_range_kept(
    path: &Path,
    slot: OpenSlot,
    range: std::ops::Range<u64>,
) -> anyhow::Result<Bytes> {
    let n = usize::try_from(range.end.saturating_sub(range.start))?;
    let path = path.to_path_buf();
    let task = runtime::spawn_blocking("read", move || {
        let file = match slot.get() {
            Some(file) => std::sync::Arc::clone(file),
            None => {
                let file = std::sync::Arc::new(std::fs::File::open(&path)?);
                // Two first reads racing open it twice; one is kept.
                let _ = slot.set(std::sync::Arc::clone(&file));
                file
            }
        };
        read_at(&file, range.start, n)
    })?;
    let (bytes, _) = task.await.map_err(|e| runtime::join_error("read", e))??;
    Ok(bytes)
}

/// Like [`read_ahead`], but each block is a window of the file mapped into memory and
/// populated on a blocking thread (so no page fault stalls the consumer's thread): the bytes
/// are never copied into the heap, and an element sliced out of a window holds on to page
/// cache, which the kernel can reclaim, not to heap memory. Returns `false` (and reads the
/// file instead) when it cannot be mapped: not a regular file, empty, or on a file system
/// without `mmap`.
///
/// Each window is mapped up to the length the file has when that window is mapped, and the
/// windows go on until one finds the end: a file that grows while it is read is read up to
/// its length when its last window is mapped (bytes appended after that are not read, as
/// with a read that found the end).
///
/// Mapping's one hazard: a file truncated by another process while a window of it is mapped
/// makes touching the lost pages raise `SIGBUS`. Each window is mapped only up to the
/// length the file has at that moment, which narrows the hazard to a truncation during the
/// window's use; `TFRecordDataset::memory_map(false)` avoids it.
pub(crate) async fn map_ahead(
    path: &Path,
    block: usize,
    read_ahead: usize,
    offset: u64,
) -> std::io::Result<OpenedFile> {
    open(path, block, read_ahead, true, offset).await
}

/// A window of `file`, mapped while fewer than [`MAX_LIVE_WINDOWS`] are alive.
fn fetch_mapped(file: &std::fs::File, offset: u64, n: usize) -> std::io::Result<(Bytes, bool)> {
    fetch_window(file, offset, n, MAX_LIVE_WINDOWS)
}

/// Mapped windows alive at once in the process, at most (each is a mapping, and Linux allows
/// a process 65,530 by default). Past it, windows are read into buffers instead: a huge
/// shuffle buffer of large records can pin a window per record.
const MAX_LIVE_WINDOWS: usize = 32 * 1024;

/// Mapped windows alive now (see [`Window`]).
static LIVE_WINDOWS: AtomicUsize = AtomicUsize::new(0);

/// A mapped window, counted in [`LIVE_WINDOWS`] while it lives.
struct Window(memmap2::Mmap);

impl AsRef<[u8]> for Window {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        LIVE_WINDOWS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A window of `file` mapped and populated, or read into a buffer when `limit` windows are
/// alive already (the elements then are copies or slices of a buffer, which is correct,
/// only costlier).
fn fetch_window(
    file: &std::fs::File,
    offset: u64,
    n: usize,
    limit: usize,
) -> std::io::Result<(Bytes, bool)> {
    if LIVE_WINDOWS.load(Ordering::Relaxed) >= limit {
        return read_at(file, offset, n);
    }
    map_window(file, offset, n, true)
}

/// The blocks of `file`, `block` bytes each: `first` (fetched already), then the others
/// fetched by `fetch` on blocking threads, `read_ahead` at once, in order, up to the first
/// short one (the end of the file as that fetch found it). A first block that is short, or
/// an error, is the last.
fn blocks_of(
    file: Arc<std::fs::File>,
    offset: u64,
    first: std::io::Result<(Bytes, bool)>,
    block: usize,
    read_ahead: usize,
    fetch: Fetch,
) -> Blocks {
    let more = matches!(first, Ok((_, false)));
    let rest = more.then(|| {
        stream::iter((offset + block as u64..).step_by(block))
            .map(move |offset| {
                let file = Arc::clone(&file);
                async move {
                    let task = runtime::spawn_blocking("read", move || fetch(&file, offset, block))
                        .map_err(std::io::Error::other)?;
                    match task.await {
                        // The format's reader names the file in its error context.
                        Ok(read) => read,
                        Err(e) => Err(std::io::Error::other(runtime::join_error("read", e))),
                    }
                }
            })
            .buffered(read_ahead.max(1))
    });
    let reads = stream::once(futures::future::ready(first)).chain(stream::iter(rest).flatten());
    stop_at_short_read(reads)
}

/// The blocks of `file` read one after the other from its current position by one blocking
/// thread, until a read returns 0 bytes: for pipes, FIFOs, devices and files whose length
/// says nothing, which positioned reads cannot serve. The thread reads `read_ahead` blocks
/// ahead of the consumer at most; it stops once the stream is dropped (after the read it is
/// in, which for a pipe lasts until the writer writes or closes).
fn sequential_blocks(mut file: std::fs::File, block: usize, read_ahead: usize) -> Blocks {
    let block = block.max(1);
    // One block being read, the rest waiting for the consumer.
    let (tx, rx) = tokio::sync::mpsc::channel(read_ahead.max(2) - 1);
    let task = runtime::spawn_blocking("read", move || {
        loop {
            let read = read_sequential(&mut file, block);
            let last = !matches!(read, Ok((_, false)));
            if tx.blocking_send(read).is_err() || last {
                return;
            }
        }
    });
    let task = match task {
        Ok(task) => task,
        Err(e) => return stream::once(async move { Err(std::io::Error::other(e)) }).boxed(),
    };
    let reads = stream::unfold((rx, Some(task)), |(mut rx, task)| async move {
        match rx.recv().await {
            Some(read) => Some((read, (rx, task))),
            // The reader is done; if it panicked, the consumer hears of it (never a quiet,
            // short file).
            None => match task?.await {
                Ok(()) => None,
                Err(e) => {
                    let e = std::io::Error::other(runtime::join_error("read", e));
                    Some((Err(e), (rx, None)))
                }
            },
        }
    });
    stop_at_short_read(Box::pin(reads))
}

/// Reads up to `n` bytes from where `file` stands; `true` when the file ended first.
fn read_sequential(file: &mut std::fs::File, n: usize) -> std::io::Result<(Bytes, bool)> {
    fill(n, |buf, _| file.read(buf))
}

/// Maps `n` bytes of `file` at `offset` (fewer, and `true`, when the file has shrunk below
/// `offset + n`), its pages read in and mapped at once when `populate` is set.
fn map_window(
    file: &std::fs::File,
    offset: u64,
    n: usize,
    populate: bool,
) -> std::io::Result<(Bytes, bool)> {
    // Never map past the file's end as it is now: those pages would fault with SIGBUS.
    let left = file.metadata()?.len().saturating_sub(offset);
    let n_now = n.min(usize::try_from(left).unwrap_or(usize::MAX));
    if n_now == 0 {
        return Ok((Bytes::new(), true));
    }
    let mut options = memmap2::MmapOptions::new();
    options.offset(offset).len(n_now);
    if populate {
        options.populate();
    }
    // SAFETY: the mapping is read-only and private, and lies within the file's current
    // length. What `mmap` cannot rule out is another process truncating or rewriting the
    // file while it is mapped (see `map_ahead`); reading files that change under the reader
    // is outside what a data pipeline can give meaning to, and `memory_map(false)` reads
    // instead.
    #[allow(unsafe_code)]
    let map = unsafe { options.map(file)? };
    LIVE_WINDOWS.fetch_add(1, Ordering::Relaxed);
    Ok((Bytes::from_owner(Window(map)), n_now < n))
}

/// Ends the stream after a short block (the end of the file), leaving out empty blocks.
fn stop_at_short_read(
    reads: impl Stream<Item = std::io::Result<(Bytes, bool)>> + Send + Unpin + 'static,
) -> Blocks {
    reads
        .scan(false, |done, read| {
            if *done {
                return futures::future::ready(None);
            }
            futures::future::ready(Some(read.map(|(bytes, short)| {
                *done = short;
                bytes
            })))
        })
        .filter(|read| futures::future::ready(!matches!(read, Ok(bytes) if bytes.is_empty())))
        .boxed()
}

/// Reads `n` bytes at `offset` on the calling thread (a blocking one): one positioned read
/// (more if the kernel returns fewer bytes), into a pooled buffer; `true` when the file ended
/// first.
pub(crate) fn read_at(
    file: &std::fs::File,
    offset: u64,
    n: usize,
) -> std::io::Result<(Bytes, bool)> {
    fill(n, |buf, filled| {
        positioned_read(file, buf, offset + filled as u64)
    })
}

/// A block of `n` bytes filled by `read(unfilled, filled so far)` until it is full or a read
/// returns 0 (the end of the file: then `true`).
fn fill(
    n: usize,
    mut read: impl FnMut(&mut [u8], usize) -> std::io::Result<usize>,
) -> std::io::Result<(Bytes, bool)> {
    let mut buf = take_buffer(n);
    let mut filled = 0;
    while filled < n {
        match read(&mut buf[filled..], filled) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                recycle(buf);
                return Err(e);
            }
        }
    }
    Ok((Bytes::from_owner(Block { buf, filled }), filled < n))
}

/// Idle block buffers kept for reuse, at most this many bytes of them.
const POOL_BYTES: usize = 16 << 20;
static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A block's buffer, returned to the pool when the last slice of it is dropped.
struct Block {
    buf: Vec<u8>,
    filled: usize,
}

impl AsRef<[u8]> for Block {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.filled]
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        recycle(std::mem::take(&mut self.buf));
    }
}

/// A buffer of exactly `n` bytes: a pooled one of that size, or a new one.
fn take_buffer(n: usize) -> Vec<u8> {
    if let Ok(mut pool) = POOL.lock()
        && let Some(i) = pool.iter().position(|b| b.len() == n)
    {
        return pool.swap_remove(i);
    }
    vec![0; n]
}

/// Keeps `buf` for a later read if the pool has room.
fn recycle(buf: Vec<u8>) {
    if buf.is_empty() {
        return;
    }
    if let Ok(mut pool) = POOL.lock() {
        let held: usize = pool.iter().map(Vec::len).sum();
        if held + buf.len() <= POOL_BYTES {
            pool.push(buf);
        }
    }
}

#[cfg(unix)]
fn positioned_read(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn positioned_read(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

#[cfg(test)]
mod tests {
    use futures::TryStreamExt;

    use super::*;

    fn file_of(len: usize) -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("data.bin");
        let content: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &content).expect("write");
        (dir, path, content)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mapped_windows_hold_the_file_in_order() {
        let (_dir, path, content) = file_of(10_000);
        for block in [1, 4_096, 4_099, 10_000, 1 << 20] {
            let opened = map_ahead(&path, block, 2, 0).await.expect("open");
            let (blocks, mapped) = (opened.blocks, opened.mapped);
            assert!(mapped, "a regular file is mapped");
            let blocks: Vec<Bytes> = blocks.try_collect().await.expect("windows");
            assert!(blocks.iter().all(|b| b.len() <= block));
            assert_eq!(blocks.concat(), content, "windows of {block} bytes");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_start_at_the_offset_asked_for() {
        let (_dir, path, content) = file_of(10_000);
        for offset in [0, 1, 4_095, 4_096, 9_999, 10_000, 12_000] {
            for mapped in [true, false] {
                let opened = if mapped {
                    map_ahead(&path, 4_096, 2, offset).await.expect("open")
                } else {
                    read_ahead(&path, 4_096, 2, offset).await.expect("open")
                };
                assert_eq!(opened.start, offset);
                assert_eq!(opened.identity.map(|i| i.size), Some(10_000));
                let blocks: Vec<Bytes> = opened.blocks.try_collect().await.expect("blocks");
                let from = (offset as usize).min(content.len());
                assert_eq!(
                    blocks.concat(),
                    &content[from..],
                    "from {offset}, mapped {mapped}"
                );
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn files_are_read_to_the_end_the_reads_find_not_their_length_at_open() {
        use std::io::Write;
        for mapped in [true, false] {
            let (_dir, path, mut content) = file_of(10_000);
            let blocks = if mapped {
                let opened = map_ahead(&path, 4_096, 2, 0).await.expect("open");
                assert!(opened.mapped);
                opened.blocks
            } else {
                read_ahead(&path, 4_096, 2, 0).await.expect("open").blocks
            };
            let more: Vec<u8> = (0..5_000).map(|i| (i % 13) as u8).collect();
            std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .and_then(|mut f| f.write_all(&more))
                .expect("appended");
            content.extend_from_slice(&more);
            let blocks: Vec<Bytes> = blocks.try_collect().await.expect("blocks");
            assert!(blocks.iter().all(|b| !b.is_empty()), "no empty block");
            assert_eq!(blocks.concat(), content, "mapped {mapped}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn empty_files_are_read_not_mapped() {
        let (_dir, path, _) = file_of(0);
        let opened = map_ahead(&path, 4_096, 2, 0).await.expect("open");
        let (blocks, mapped) = (opened.blocks, opened.mapped);
        assert!(!mapped);
        assert!(
            blocks
                .try_collect::<Vec<_>>()
                .await
                .expect("no error")
                .is_empty()
        );
    }

    #[test]
    fn a_window_stops_where_a_shrunk_file_ends() {
        let (_dir, path, content) = file_of(10_000);
        let file = std::fs::File::open(&path).expect("open");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(5_000))
            .expect("truncate");
        // What is left of the window, and `true`: the file ended first.
        let (window, short) = map_window(&file, 4_096, 4_096, true).expect("map");
        assert_eq!((&window[..], short), (&content[4_096..5_000], true));
        // Past the end: nothing, and never a page past the end.
        let (window, short) = map_window(&file, 8_192, 4_096, true).expect("map");
        assert!(window.is_empty() && short);
        let (window, short) = map_window(&file, 0, 4_096, false).expect("map");
        assert_eq!((&window[..], short), (&content[..4_096], false));
    }

    #[test]
    fn past_the_window_limit_windows_are_read() {
        let (_dir, path, content) = file_of(10_000);
        let file = std::fs::File::open(&path).expect("open");
        // No window may be mapped: the bytes are read, the same ones.
        let (block, short) = fetch_window(&file, 4_096, 4_096, 0).expect("read");
        assert_eq!((&block[..], short), (&content[4_096..8_192], false));
        let (block, short) = fetch_window(&file, 8_192, 4_096, 0).expect("read");
        assert_eq!((&block[..], short), (&content[8_192..], true));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_file_that_fits_in_a_block_is_opened_and_read_in_one_blocking_job() {
        // Its blocks are ready when the open returns: no job left for the stream to wait on
        // (with a job per step, a small file cost four blocking jobs, and a pipeline of many
        // small files grew the runtime's pool of blocking threads; see `open`).
        let (_dir, path, content) = file_of(10_000);
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        for map in [true, false] {
            let mut blocks = if map {
                let opened = map_ahead(&path, 1 << 20, 2, 0).await.expect("open");
                assert!(opened.mapped);
                opened.blocks
            } else {
                read_ahead(&path, 1 << 20, 2, 0).await.expect("open").blocks
            };
            match blocks.poll_next_unpin(&mut cx) {
                std::task::Poll::Ready(Some(Ok(block))) => assert_eq!(block[..], content[..]),
                other => panic!("mapped {map}: the first block is not ready: {other:?}"),
            }
            assert!(
                matches!(
                    blocks.poll_next_unpin(&mut cx),
                    std::task::Poll::Ready(None)
                ),
                "mapped {map}: the end is known without another read"
            );
        }
    }
}
