//! Local files: block reads on blocking threads, `read_ahead` blocks in flight.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, Stream, StreamExt};
use tokio::io::AsyncBufRead;
use tokio_util::io::StreamReader;

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
) -> std::io::Result<impl AsyncBufRead + Send + Unpin + 'static> {
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
    Ok(StreamReader::new(stop_at_short_read(reads)))
}

/// Ends the stream after a short block (the file shrank while being read).
fn stop_at_short_read(
    reads: impl Stream<Item = std::io::Result<(Bytes, bool)>> + Send + Unpin + 'static,
) -> impl Stream<Item = std::io::Result<Bytes>> + Send + Unpin + 'static {
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
    let mut buf = vec![0u8; n];
    let mut filled = 0;
    while filled < n {
        match positioned_read(file, &mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok((Bytes::from(buf), filled < n))
}

#[cfg(unix)]
fn positioned_read(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn positioned_read(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}
