//! Local files: block reads on blocking threads, `read_ahead` blocks in flight.
//!
//! A block's buffer goes back to a small process-wide pool once the block is dropped: right
//! after decoding when its records were copied out (small ones), else with its last slice.
//! So steady-state reads neither fault fresh pages in nor zero them.

use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::stream::{self, Stream, StreamExt};

use crate::format::Blocks;
use crate::runtime;

/// Default block size of a local read (TensorFlow's `buffer_size` is 256 KiB; a 1 MiB block
/// takes a quarter of the blocking-thread round trips, for `READ_AHEAD` MiB per open file).
pub(crate) const DEFAULT_BLOCK: usize = 1024 * 1024;

/// Blocks read ahead of the consumer per open file.
pub(crate) const READ_AHEAD: usize = 2;

/// Opens `path` and streams its bytes in blocks of `block` bytes, with `read_ahead` blocks
/// being read at once (positioned reads, so they proceed in parallel and arrive in order).
/// Memory per open file is at most `read_ahead * block` bytes plus the consumer's buffer.
pub(crate) async fn read_ahead(
    path: &Path,
    block: usize,
    read_ahead: usize,
) -> std::io::Result<Blocks> {
    let file = tokio::fs::File::open(path).await?;
    let len = file.metadata().await?.len();
    let file = Arc::new(file.into_std().await);
    let block = block.max(1) as u64;
    let reads = stream::iter((0..len).step_by(block as usize))
        .map(move |offset| {
            let file = Arc::clone(&file);
            let n = block.min(len - offset) as usize;
            async move {
                let task = runtime::spawn_blocking("read", move || read_at(&file, offset, n))
                    .map_err(std::io::Error::other)?;
                match task.await {
                    // The format's reader names the file in its error context.
                    Ok(read) => read,
                    Err(e) => Err(std::io::Error::other(runtime::join_error("read", e))),
                }
            }
        })
        .buffered(read_ahead.max(1));
    Ok(stop_at_short_read(reads))
}

/// Ends the stream after a short block (the file shrank while being read).
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
        .boxed()
}

/// Reads `n` bytes at `offset`; `true` when the file ended first.
fn read_at(file: &std::fs::File, offset: u64, n: usize) -> std::io::Result<(Bytes, bool)> {
    let mut buf = take_buffer(n);
    let mut filled = 0;
    while filled < n {
        match positioned_read(file, &mut buf[filled..], offset + filled as u64) {
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
