//! Framing elements straight out of the blocks a byte stream was read in.
//!
//! Storage hands over a file as a stream of `Bytes` blocks (1 MiB local reads, object-store
//! body chunks, decompressor output). Elements are cut straight out of them, with no reader
//! buffer in between:
//!
//! - A small element (under [`SLICE_FROM`] bytes) is copied into its own buffer. A slice
//!   would keep its whole block alive: a shuffle buffer of 10,000 two-kilobyte records sliced
//!   out of 1 MiB blocks holds on to over a hundred blocks (a block lives until the last of its
//!   500 records leaves the buffer), six times the memory the user asked for. Copied, blocks
//!   are released as soon as they are decoded and their buffers are reused for the next reads.
//! - A large element is a zero-copy slice of its block (it pins little beyond itself).
//! - When the blocks are windows of a file mapped into memory (`mapped`), every element is a
//!   slice: what it pins is page cache, which the kernel can reclaim, not heap memory, and
//!   neither a copy nor an allocation is spent on it.
//! - An element that spans blocks is gathered into `carry`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use futures::stream::{Stream, StreamExt};
use tokio::io::AsyncRead;
use tokio_util::io::ReaderStream;

/// Elements of at least this many bytes are slices of their block; smaller ones are copied.
pub(crate) const SLICE_FROM: usize = 64 * 1024;

/// A byte stream as the blocks it was read in.
pub(crate) type Blocks = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;

/// The blocks of any async reader, `capacity` bytes at most each.
pub(crate) fn reader_blocks<R>(reader: R, capacity: usize) -> ReaderStream<R>
where
    R: AsyncRead,
{
    ReaderStream::with_capacity(reader, capacity.max(1))
}

/// The unread part of a block stream: the unread bytes of the current block, preceded by
/// the bytes of an element that spans blocks while it is being gathered.
pub(crate) struct BlockCursor<S> {
    blocks: S,
    /// Unread bytes of the current block; elements inside it are sliced out of it.
    pub(crate) block: Bytes,
    /// The start of an element that spans blocks, copied out of earlier blocks. When it is
    /// not empty, it comes before `block`.
    pub(crate) carry: BytesMut,
    /// Bytes consumed so far (the offset of the next unread byte, `carry` included).
    pub(crate) offset: u64,
    ended: bool,
    /// Small elements are sliced too (the blocks are mapped windows of a file).
    mapped: bool,
}

impl<S> BlockCursor<S>
where
    S: Stream<Item = io::Result<Bytes>> + Unpin,
{
    pub(crate) fn new(blocks: S) -> Self {
        BlockCursor {
            blocks,
            block: Bytes::new(),
            carry: BytesMut::new(),
            offset: 0,
            ended: false,
            mapped: false,
        }
    }

    /// Slices small elements out of their blocks too: for blocks that are mapped windows of
    /// a file, which hold on to page cache rather than heap memory.
    pub(crate) fn mapped(mut self, mapped: bool) -> Self {
        self.mapped = mapped;
        self
    }

    /// Reads the next block into `block`, which must be empty: `false` at the end of the
    /// stream. Empty blocks are skipped.
    pub(crate) fn poll_block(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        debug_assert!(self.block.is_empty());
        while !self.ended {
            match ready!(self.blocks.poll_next_unpin(cx)) {
                Some(Ok(block)) if block.is_empty() => {}
                Some(Ok(block)) => {
                    self.block = block;
                    return Poll::Ready(Ok(true));
                }
                Some(Err(e)) => return Poll::Ready(Err(e)),
                None => self.ended = true,
            }
        }
        Poll::Ready(Ok(false))
    }

    /// Takes the first `n` bytes of `block` (which must hold them) as an element.
    pub(crate) fn take_from_block(&mut self, n: usize) -> Bytes {
        self.offset += n as u64;
        if n < SLICE_FROM && !self.mapped {
            let element = Bytes::copy_from_slice(&self.block[..n]);
            self.block.advance(n);
            element
        } else {
            self.block.split_to(n)
        }
    }

    /// Moves up to `n` bytes from `block` to the end of `carry`. `carry` grows with the
    /// data that arrives, never ahead of it, so a damaged length field reserves nothing.
    pub(crate) fn carry_from_block(&mut self, n: usize) {
        let n = n.min(self.block.len());
        self.carry.extend_from_slice(&self.block[..n]);
        self.block.advance(n);
    }

    /// Takes all of `carry` as an element (a small one is copied out, so `carry` keeps its
    /// buffer for the next element that spans blocks).
    pub(crate) fn take_carry(&mut self) -> Bytes {
        self.offset += self.carry.len() as u64;
        if self.carry.len() < SLICE_FROM {
            let element = Bytes::copy_from_slice(&self.carry);
            self.carry.clear();
            element
        } else {
            self.carry.split().freeze()
        }
    }

    /// Drops the unread bytes (after an error, or at a partial header TensorFlow ignores).
    pub(crate) fn clear(&mut self) {
        self.block.clear();
        self.carry.clear();
    }
}
