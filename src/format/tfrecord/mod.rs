//! TFRecord files: the length-prefixed, CRC-checked codec and the dataset over files (here);
//! the writer (`writer.rs`); indexes in DALI's format (`index.rs`), random access through them
//! (`indexed.rs`) and indexes written while reading (`index_on_read.rs`).
//!
//! The framing (TensorFlow's `tensorflow/core/lib/io/record_writer.cc`):
//! `u64 LE length | u32 LE masked_crc32c(length) | payload | u32 LE masked_crc32c(payload)`.
//! Damage is handled exactly as TensorFlow's reader does: a CRC mismatch is
//! "corrupted record at OFFSET" (the payload's offset for a bad data CRC, the record's for a
//! bad length CRC), a cut payload or footer is "truncated record at OFFSET" (the record's),
//! and a partial header (1 to 11 bytes) at the end of a file is read as the end of the file.
//! A bad first header is TensorFlow's "corrupted record at 0 (Is this even a TFRecord
//! file?)"; when the bytes were read as they are and start as a GZIP or ZLIB stream, the
//! error says so ([`Error::DataLoss`]'s `looks_compressed`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use futures::stream::Stream;
use tokio::io::AsyncRead;

use super::files::{FileFormat, Format, Opened, Start, read_files};
use super::options::{FileOptions, file_options};
use super::{Compression, masked_crc32c};
use crate::engine::{BoxStream, Dataset, Unkeyed};
use crate::error::Error;
use crate::storage::Location;
use crate::storage::blocks::{BlockCursor, reader_blocks};
use crate::storage::compression::damage;
use index_on_read::IndexOnRead;

mod index;
mod index_on_read;
mod indexed;
mod writer;

pub use index::{IndexEntry, TFRecordIndex};
pub use index_on_read::IndexTarget;
pub use indexed::IndexedTFRecords;
pub use writer::TFRecordWriter;

const HEADER: usize = 12;
const FOOTER: usize = 4;
/// A frame's bytes besides its payload: the 12-byte header and the 4-byte footer.
pub(crate) const FRAME_OVERHEAD: u64 = (HEADER + FOOTER) as u64;
/// Records longer than this (1 GiB) are refused by the reader, as data loss, and by
/// [`TFRecordWriter::write`](TFRecordWriter::write), which writes nothing of them
/// (TensorFlow's records are protocol buffers, at most 2 GiB); a damaged length field never
/// turns into a large allocation.
pub(crate) const MAX_RECORD_LEN: u64 = 1 << 30;
/// Read size when decoding a plain `AsyncRead` (TensorFlow's `buffer_size` default).
const DEFAULT_BUFFER: usize = 256 * 1024;

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The records of one TFRecord stream, read from any async reader (a file, a decompressor,
/// an object-storage body). After an error the stream ends: the rest of a damaged file is not
/// read, as in TensorFlow.
///
/// ```
/// use futures::StreamExt;
/// use streamload::format::{TFRecordWriter, Compression, tfrecord_records};
/// # tokio_test::block_on(async {
/// let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
/// writer.write(b"hello").await?;
/// writer.write(b"").await?;
/// let bytes = writer.finish().await?;
/// let records: Vec<anyhow::Result<bytes::Bytes>> = tfrecord_records(&bytes[..], "in-memory").collect().await;
/// let records: Vec<bytes::Bytes> = records.into_iter().collect::<anyhow::Result<_>>()?;
/// assert_eq!(records, [&b"hello"[..], b""]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
pub fn tfrecord_records<R>(
    reader: R,
    name: &str,
) -> impl Stream<Item = anyhow::Result<Bytes>> + Send + use<R>
where
    R: AsyncRead + Send + Unpin,
{
    TFRecordFrames::new(reader_blocks(reader, DEFAULT_BUFFER), name)
}

/// The records of a TFRecord stream read as blocks. A record inside one block is a slice of
/// it (no copy); a record that spans blocks is gathered into its own buffer. Both CRCs are
/// checked; damage is an [`Error::DataLoss`] naming the stream, the record and the offset,
/// after which the stream ends.
pub(crate) struct TFRecordFrames<S> {
    cursor: BlockCursor<S>,
    name: Arc<str>,
    /// Index of the next record.
    record: u64,
    /// The bytes are the file's own (not decompressed): a damaged first header that looks
    /// like a compressed stream's is reported as such.
    raw: bool,
    done: bool,
    /// Where the last record yielded starts, and where it ends (its saved position: the
    /// cursor may be inside the next record).
    last_start: u64,
    last_end: u64,
    /// Resynchronise after damage (see [`TFRecordDataset::resync`]).
    resync: bool,
    /// The frame whose data CRC failed, for the scan that follows.
    damaged_frame: Option<Bytes>,
    /// A scan for the next good record in progress.
    scan: Option<Scan>,
}

/// A scan for the next good record after damage: the bytes from the damaged record's start
/// on (`buf[0]` is at offset `start`), the candidate position, and the error to yield once
/// the scan ends.
struct Scan {
    buf: bytes::BytesMut,
    start: u64,
    damaged: u64,
    pos: usize,
    error: Option<anyhow::Error>,
}

/// Scanned bytes dropped from the front of a scan's buffer at a time.
const SCAN_TRIM: usize = 1 << 20;

impl<S> TFRecordFrames<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    pub(crate) fn new(blocks: S, name: &str) -> Self {
        Self::with_cursor(BlockCursor::new(blocks), name, true)
    }

    fn with_cursor(cursor: BlockCursor<S>, name: &str, raw: bool) -> Self {
        TFRecordFrames {
            cursor,
            name: name.into(),
            record: 0,
            raw,
            done: false,
            last_start: 0,
            last_end: 0,
            resync: false,
            damaged_frame: None,
            scan: None,
        }
    }

    /// Resynchronises after damage (see [`TFRecordDataset::resync`]).
    pub(crate) fn resync(mut self, on: bool) -> Self {
        self.resync = on;
        self
    }

    /// Reads from `start` on: the blocks begin at that (decompressed) offset, which is where
    /// record `start.record` begins.
    pub(crate) fn starting_at(mut self, start: crate::format::files::Start) -> Self {
        self.cursor.offset = start.offset;
        self.record = start.record;
        self.last_end = start.offset;
        self.last_start = start.offset;
        self
    }

    /// Where the last record yielded starts and ends (its whole frame).
    pub(crate) fn last_span(&self) -> (u64, u64) {
        (self.last_start, self.last_end)
    }

    fn data_loss(&self, offset: u64, message: impl Into<String>) -> anyhow::Error {
        self.data_loss_compressed(offset, message, None)
    }

    fn data_loss_compressed(
        &self,
        offset: u64,
        message: impl Into<String>,
        looks_compressed: Option<Compression>,
    ) -> anyhow::Error {
        Error::DataLoss {
            path: self.name.to_string(),
            record: self.record,
            offset,
            message: message.into(),
            looks_compressed,
            skipped: None,
        }
        .into()
    }

    /// The whole frame's length from its 12-byte header, the length's CRC checked.
    fn frame_len(&self, header: &[u8]) -> anyhow::Result<usize> {
        let (len_bytes, crc) = header.split_at(8);
        if masked_crc32c(len_bytes) != le_u32(crc) {
            let offset = self.cursor.offset;
            let looks_compressed = if offset == 0 && self.raw {
                compression_of(header)
            } else {
                None
            };
            return Err(self.data_loss_compressed(offset, "corrupted record", looks_compressed));
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(len_bytes);
        let len = u64::from_le_bytes(len);
        if len > MAX_RECORD_LEN {
            return Err(self.data_loss(
                self.cursor.offset,
                format!("record length {len} larger than {MAX_RECORD_LEN}"),
            ));
        }
        Ok(HEADER + len as usize + FOOTER)
    }

    /// Checks the payload's CRC of a whole `frame` and returns the payload.
    fn payload(&mut self, mut frame: Bytes) -> anyhow::Result<Bytes> {
        let len = frame.len() - HEADER - FOOTER;
        let (payload, crc) = frame[HEADER..].split_at(len);
        if masked_crc32c(payload) != le_u32(crc) {
            let offset = self.cursor.offset - frame.len() as u64 + HEADER as u64;
            if self.resync {
                self.damaged_frame = Some(frame.clone());
            }
            return Err(self.data_loss(offset, "corrupted record"));
        }
        frame.advance(HEADER);
        frame.truncate(len);
        self.record += 1;
        Ok(frame)
    }

    /// A read error: a damaged compressed stream is data loss at the record being read
    /// (its offset in the decompressed stream); anything else an I/O error naming the file.
    fn io_error(&self, e: std::io::Error) -> anyhow::Error {
        match damage(&e) {
            Some(message) => self.data_loss(self.cursor.offset, message),
            None => anyhow::Error::new(e).context(format!("reading {}", self.name)),
        }
    }

    fn poll_record(&mut self, cx: &mut Context<'_>) -> Poll<anyhow::Result<Option<Bytes>>> {
        loop {
            if self.cursor.carry.is_empty() {
                let available = self.cursor.block.len();
                if available >= HEADER {
                    let total = self.frame_len(&self.cursor.block[..HEADER])?;
                    if available >= total {
                        let frame = self.cursor.take_from_block(total);
                        return Poll::Ready(self.payload(frame).map(Some));
                    }
                }
                if available == 0 {
                    match ready!(self.cursor.poll_block(cx)) {
                        Ok(true) => continue,
                        Ok(false) => return Poll::Ready(Ok(None)),
                        Err(e) => return Poll::Ready(Err(self.io_error(e))),
                    }
                }
                // The record runs past this block: gather it.
                self.cursor.carry_from_block(available);
            }
            let gathered = self.cursor.carry.len();
            let need = if gathered < HEADER {
                HEADER
            } else {
                self.frame_len(&self.cursor.carry[..HEADER])?
            };
            if gathered >= need {
                let frame = self.cursor.take_carry();
                return Poll::Ready(self.payload(frame).map(Some));
            }
            if self.cursor.block.is_empty() {
                match ready!(self.cursor.poll_block(cx)) {
                    Ok(true) => {}
                    // A partial header at the end of a file is its end, as in TensorFlow.
                    Ok(false) if gathered < HEADER => return Poll::Ready(Ok(None)),
                    Ok(false) => {
                        return Poll::Ready(Err(
                            self.data_loss(self.cursor.offset, "truncated record")
                        ));
                    }
                    Err(e) => return Poll::Ready(Err(self.io_error(e))),
                }
            }
            self.cursor.carry_from_block(need - gathered);
        }
    }
}

impl<S> TFRecordFrames<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    /// Starts a scan after the framing damage `error`: from the damaged record's start, with
    /// every unread byte.
    fn start_scan(&mut self, error: anyhow::Error) {
        let mut buf = bytes::BytesMut::new();
        let start = match self.damaged_frame.take() {
            Some(frame) => {
                buf.extend_from_slice(&frame);
                self.cursor.offset - frame.len() as u64
            }
            None => {
                buf.extend_from_slice(&self.cursor.carry);
                self.cursor.offset
            }
        };
        buf.extend_from_slice(&self.cursor.block);
        self.cursor.clear();
        self.scan = Some(Scan {
            buf,
            start,
            damaged: start,
            pos: 1,
            error: Some(error),
        });
    }

    /// Scans for the next position whose header's length CRC holds (and whose length is at
    /// most [`MAX_RECORD_LEN`]) and whose payload's CRC holds; reading goes on there (or the
    /// file ends). Yields the damage's error, with the bytes skipped.
    fn poll_scan(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<Bytes>>> {
        let Some(scan) = self.scan.as_mut() else {
            return Poll::Ready(None);
        };
        let found = loop {
            if scan.pos > SCAN_TRIM {
                let _ = scan.buf.split_to(scan.pos);
                scan.start += scan.pos as u64;
                scan.pos = 0;
            }
            let at = scan.pos;
            let need = match scan.buf.get(at..at + HEADER) {
                None => HEADER,
                Some(header) => {
                    let (len_bytes, crc) = header.split_at(8);
                    let mut len = [0u8; 8];
                    len.copy_from_slice(len_bytes);
                    let len = u64::from_le_bytes(len);
                    if masked_crc32c(len_bytes) != le_u32(crc) || len > MAX_RECORD_LEN {
                        scan.pos += 1;
                        continue;
                    }
                    let total = HEADER + len as usize + FOOTER;
                    match scan.buf.get(at..at + total) {
                        Some(frame) => {
                            let (payload, crc) = frame[HEADER..].split_at(len as usize);
                            if masked_crc32c(payload) == le_u32(crc) {
                                break Some(at);
                            }
                            scan.pos += 1;
                            continue;
                        }
                        None => total,
                    }
                }
            };
            // More bytes are needed to check the candidate at `at`.
            debug_assert!(scan.buf.len() < at + need);
            match ready!(self.cursor.poll_block(cx)) {
                Ok(true) => {
                    scan.buf.extend_from_slice(&self.cursor.block);
                    self.cursor.block.clear();
                }
                // The file ends before a candidate is whole: none is left past it, unless
                // a shorter one starts further on.
                Ok(false) if scan.buf.len() >= at + HEADER => scan.pos += 1,
                Ok(false) => break None,
                Err(e) => {
                    self.scan = None;
                    self.done = true;
                    return Poll::Ready(Some(Err(self.io_error(e))));
                }
            }
        };
        let Some(mut scan) = self.scan.take() else {
            return Poll::Ready(None);
        };
        let end = match found {
            Some(at) => {
                let end = scan.start + at as u64;
                let _ = scan.buf.split_to(at);
                self.cursor.block = scan.buf.freeze();
                self.cursor.offset = end;
                // The damaged bytes count as one record.
                self.record += 1;
                self.last_start = scan.damaged;
                self.last_end = end;
                end
            }
            None => {
                self.done = true;
                let end = scan.start + scan.buf.len() as u64;
                self.last_end = end;
                end
            }
        };
        let mut error = scan
            .error
            .take()
            .unwrap_or_else(|| anyhow::anyhow!("damage"));
        if let Some(Error::DataLoss { skipped, .. }) = error.downcast_mut::<Error>() {
            *skipped = Some(scan.damaged..end);
        }
        Poll::Ready(Some(Err(error)))
    }
}

/// Whether `e` is damage to the framing (a CRC, a length, a cut record) that a scan can
/// step over; not a damaged compressed stream or an I/O error.
fn framing_damage(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<Error>(),
        Some(Error::DataLoss { message, .. })
            if message == "corrupted record"
                || message == "truncated record"
                || message.starts_with("record length")
    )
}

/// The compression a stream starting with `head` seems to have: GZIP's magic `1f 8b`, or a
/// ZLIB header (`CMF` 0x78, a deflate window of 32 KiB, with its check bits; RFC 1950).
fn compression_of(head: &[u8]) -> Option<Compression> {
    match head {
        [0x1f, 0x8b, ..] => Some(Compression::Gzip),
        [0x78, flg, ..] if (0x7800 | u16::from(*flg)) % 31 == 0 => Some(Compression::Zlib),
        _ => None,
    }
}

impl<S> Stream for TFRecordFrames<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    type Item = anyhow::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if this.scan.is_some() {
            return this.poll_scan(cx);
        }
        // The record in progress starts here (`carry` is counted once it is taken).
        let start = this.cursor.offset;
        let next = ready!(this.poll_record(cx));
        if let Err(e) = next {
            if this.resync && framing_damage(&e) {
                this.start_scan(e);
                return this.poll_scan(cx);
            }
            this.damaged_frame = None;
            this.done = true;
            this.cursor.clear();
            this.last_start = start;
            return Poll::Ready(Some(Err(e)));
        }
        if !matches!(next, Ok(Some(_))) {
            this.done = true;
            this.cursor.clear();
        }
        this.last_start = start;
        if matches!(next, Ok(Some(_))) {
            this.last_end = this.cursor.offset;
        }
        Poll::Ready(next.transpose())
    }
}

/// Saved state: `[offset, record]` after the last record yielded (the offset in the
/// decompressed stream for a compressed file; `Start::ENDED` once the file has ended); a
/// record's position is its start offset.
impl<S> crate::engine::Resumable for TFRecordFrames<S> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<crate::checkpoint::State> {
        // Ended (at the end of the file, or at an error that ends it): nothing more to read.
        let offset = if self.done {
            Start::ENDED
        } else {
            self.last_end
        };
        Ok(crate::checkpoint::State::new("tfrecord").words([offset, self.record]))
    }

    fn last_prov(&self) -> anyhow::Result<crate::checkpoint::Prov> {
        Ok(crate::checkpoint::Prov::at(self.last_start))
    }
}

/// Refuses [`TFRecordDataset::write_index`] with an explicit compression, two files that
/// would write the same index, or a file whose index cannot be named.
fn check_index_targets(files: &[Location], compression: Compression, target: &IndexTarget) {
    assert!(
        matches!(compression, Compression::None | Compression::Auto),
        "TFRecordDataset::write_index: the files are {compression:?}-compressed, and \
         compressed files are not indexed (a compressed stream has no random access)"
    );
    let mut seen = std::collections::HashMap::new();
    for file in files {
        let index = target.of(file).unwrap_or_else(|| {
            panic!("TFRecordDataset::write_index: {file} has no file name to name its index by")
        });
        if let Some(other) = seen.insert(index.clone(), file)
            && other != file
        {
            panic!(
                "TFRecordDataset::write_index: {other} and {file} would both write the index {index}"
            );
        }
    }
}

/// The records of TFRecord files as a [`Dataset`] of `Bytes` (tf.data's `TFRecordDataset`).
///
/// Files are read in order, or `num_parallel_reads` at once through
/// [`parallel_interleave`](Dataset::parallel_interleave) (cycle of that many files, one
/// record from each in turn: deterministic, like tf.data's). Each record's CRCs are checked.
/// For random access (exact sharding by record, a global shuffle of the records across
/// files), index the files (or let this reader index them as it reads them:
/// [`write_index`](TFRecordDataset::write_index)) and read them through
/// [`IndexedTFRecords`](IndexedTFRecords).
///
/// # Errors
///
/// A damaged file yields an [`Error::DataLoss`] element naming the file, the record and the
/// byte offset, and ends that file; the next file is read, so
/// [`ignore_errors`](Dataset::ignore_errors) skips the rest of a damaged file, as in
/// TensorFlow. A record longer than 1 GiB (2^30 bytes) is refused the same way ("record length
/// N larger than 1073741824"): such a length field is taken for damage, never allocated;
/// [`TFRecordWriter::write`](TFRecordWriter::write) refuses to write such a record. A
/// compressed file whose stream is damaged (truncated, or not compressed as declared) is a
/// `DataLoss` too, "GZIP inflate() failed (...)" (TensorFlow's
/// `DataLossError` "inflate() failed ..."), after the records before the damage: it names the
/// record being read and its offset in the decompressed stream (offsets in a compressed file
/// are always decompressed offsets, as TensorFlow counts them). A file whose first header
/// fails its CRC is TensorFlow's "corrupted record at 0 (Is this even a TFRecord file?)";
/// when it was read without decompression (the default, [`Compression::None`]) and starts
/// as a GZIP or ZLIB stream, the error goes on "the file looks GZIP-compressed: set
/// .compression(Compression::Gzip)" (its `looks_compressed` field says which). A file that
/// cannot be opened is an error element naming it.
///
/// ```
/// use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("train.tfrecord.gz");
/// let mut writer = TFRecordWriter::new(tokio::fs::File::create(&path).await?, Compression::Gzip);
/// for i in 0..3u8 {
///     writer.write(&[i; 10]).await?;
/// }
/// writer.finish().await?;
/// // The compression comes from the ".gz" extension.
/// let records = TFRecordDataset::new([&path]).compression(Compression::Auto).build().collect().await?;
/// assert_eq!(records.len(), 3);
/// assert_eq!(&records[2][..], &[2u8; 10]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct TFRecordDataset {
    files: FileOptions,
    resync: bool,
    write_index: Option<IndexTarget>,
}

impl TFRecordDataset {
    /// The records of these files, in this order.
    pub fn new<P: Into<Location>>(files: impl IntoIterator<Item = P>) -> Self {
        TFRecordDataset {
            files: FileOptions::new(files).mapped(),
            resync: false,
            write_index: None,
        }
    }

    /// Resynchronises after a damaged record rather than ending the file (default: off,
    /// TensorFlow's behaviour): the damage is still an [`Error::DataLoss`] element (so
    /// [`ignore_errors_within`](Dataset::ignore_errors_within) or
    /// [`ignore_errors`](Dataset::ignore_errors) decides what to do with it), and reading
    /// goes on at the next position whose header's length CRC holds, whose length is at most
    /// 1 GiB, and whose payload's CRC holds: one flipped bit costs one record, not the rest
    /// of the shard. The error's `skipped` field (and its message: "; skipped N bytes
    /// (start..end), reading on at end") says which bytes were stepped over.
    ///
    /// What it can recover: any damage inside one record's bytes (its length, its CRCs, its
    /// payload), and garbage between records; the records after it are found again, byte
    /// exact (a false match needs both CRCs to hold by chance: about 2^-64). What it cannot:
    /// records inside the skipped range (a damaged length can hide the records it spanned,
    /// since the scan starts one byte after the damaged record's start and takes the first
    /// good record it finds, which is the next undamaged one), and a damaged compressed
    /// stream (a GZIP/ZLIB file is not resynchronised: its damage ends the file). Record
    /// indices after a resync count the skipped bytes as one record. Scanning holds at most
    /// the candidate record (1 GiB at worst) and 1 MiB of scanned bytes.
    ///
    /// ```
    /// use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};
    /// use streamload::{Dataset, ErrorBudget};
    /// # tokio_test::block_on(async {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("damaged.tfrecord");
    /// let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
    /// for i in 0..5u8 {
    ///     writer.write(&[i; 10]).await?;
    /// }
    /// let mut bytes = writer.finish().await?;
    /// bytes[2 * 26 + 15] ^= 1; // a flipped bit in the payload of record 2 (26 bytes each)
    /// std::fs::write(&path, &bytes)?;
    ///
    /// let records = TFRecordDataset::new([&path]).resync(true).build()
    ///     .ignore_errors_within(ErrorBudget::count(1));
    /// let records = records.collect().await?;
    /// assert_eq!(records.iter().map(|r| r[0]).collect::<Vec<_>>(), [0, 1, 3, 4]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn resync(mut self, on: bool) -> Self {
        self.resync = on;
        self
    }

    /// Writes the index of each file read whole (DALI's `tfrecord2idx` format, what
    /// [`TFRecordIndex::build`](TFRecordIndex::build) returns and the `tfrecord index`
    /// tool writes, byte for byte) to `target`, as a side effect of reading it: from the
    /// offsets the reader sees anyway, with no second pass over the file. The next epoch (or
    /// a job) can then read the files with random access through
    /// [`IndexedTFRecords`](IndexedTFRecords).
    ///
    /// - **When**: once a file's reader has found its end, having read every record from
    ///   the file's start with no error. A file read in part writes nothing: an epoch dropped
    ///   before its end, a [`take`](Dataset::take) that stops inside it, a reader restored
    ///   from a checkpoint mid-file (a resumed epoch indexes only the files it reads from
    ///   their start), a damaged file (a [`resync`](Self::resync) that skipped bytes
    ///   included). A reader that reads ahead of its consumer (under
    ///   [`num_parallel_reads`](Self::num_parallel_reads)) may reach a file's end, and write
    ///   its index, before the consumer takes the last records.
    /// - **How**: atomically. A local index is written to a temporary file beside it and
    ///   renamed over it; an object is put in one PUT (retried on transient faults, as reads
    ///   are). A half-written index never exists under the index's name.
    /// - **An index already there**: left alone when it holds the same bytes (no rewrite each
    ///   epoch; checking costs a read of it), replaced otherwise (the file was just read whole,
    ///   so a different index is stale).
    /// - **Compressed files** are not indexed (DALI indexes uncompressed files only: a
    ///   compressed stream has no random access, so offsets into it are of no use). With
    ///   [`Compression::Auto`], files whose extension says they are compressed are read and
    ///   not indexed; an explicit [`Compression::Gzip`] or [`Compression::Zlib`] is refused
    ///   when the dataset is built (see Panics).
    /// - **Cost**: off (the default), nothing. On, 4 bytes per record of the file being read
    ///   (its records' sizes), then the index's text while it is written (and, when an index
    ///   is already there, a read of it).
    ///
    /// # Errors
    ///
    /// A failure to write an index (a missing directory, no permission, a store refusing the
    /// PUT) is an error element after the file's last record, naming the index and the file
    /// ("tfrecord: writing the index ... of ..."); the next file is read, so
    /// [`ignore_errors`](Dataset::ignore_errors) would skip it.
    ///
    /// # Panics
    ///
    /// [`build`](Self::build) panics with this option and an explicit GZIP or ZLIB
    /// compression, when two different files would write the same index (two files of the
    /// same name into one [`IndexTarget::Dir`]), or when a file has no name to name its
    /// index by.
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch while an index is being written: a local write begun on a blocking
    /// thread finishes (rename included); a PUT in flight is abandoned (an object is stored
    /// whole or not at all).
    ///
    /// ```
    /// use streamload::format::{
    ///     Compression, IndexTarget, IndexedTFRecords, TFRecordDataset, TFRecordIndex, TFRecordWriter,
    /// };
    /// # tokio_test::block_on(async {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("train.tfrecord");
    /// let mut writer = TFRecordWriter::new(tokio::fs::File::create(&path).await?, Compression::None);
    /// writer.write(b"hello").await?;
    /// writer.write(b"").await?;
    /// writer.finish().await?;
    ///
    /// let records = TFRecordDataset::new([&path]).write_index(IndexTarget::Beside).build();
    /// assert_eq!(records.collect().await?.len(), 2);
    /// // The index appeared beside the file, as `tfrecord index` would have written it.
    /// let written = std::fs::read_to_string(dir.path().join("train.tfrecord.idx"))?;
    /// assert_eq!(written, "0 21\n21 16\n");
    /// assert_eq!(written, TFRecordIndex::build(&path).await?.to_string());
    /// // Random access from here on.
    /// let indexed = IndexedTFRecords::open([&path]).await?;
    /// assert_eq!(indexed.num_records(), 2);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn write_index(mut self, target: IndexTarget) -> Self {
        self.write_index = Some(target);
        self
    }

    /// Its files and compression (for `distribute`).
    pub(crate) fn parts(&self) -> (&[Location], Compression) {
        (&self.files.files, self.files.blocks.compression)
    }

    /// The same reader over other files, one at a time (for `distribute`).
    pub(crate) fn with_files(&self, files: Vec<Location>) -> Self {
        let mut reader = self.clone();
        reader.files.files = files;
        reader.files.num_parallel_reads = None;
        reader
    }

    /// The dataset.
    ///
    /// # Panics
    ///
    /// With [`write_index`](Self::write_index), as it says.
    pub fn build(self) -> Dataset<Bytes> {
        if let Some(target) = &self.write_index {
            check_index_targets(&self.files.files, self.files.blocks.compression, target);
        }
        let format = FileFormat::new(Frames {
            resync: self.resync,
            write_index: Unkeyed(self.write_index),
        });
        read_files(self.files, format)
    }
}

/// The TFRecord format: whether a damaged record is skipped to the next good one (which
/// decides the records); where indexes are written as the files are read (which does not).
struct Frames {
    resync: bool,
    write_index: Unkeyed<Option<IndexTarget>>,
}

crate::engine::keyed_fields!(impl[] Frames<> { keyed: [resync], unkeyed: [write_index] });

impl Format for Frames {
    type Out = Bytes;
    const STAGE: &'static str = "tfrecord";

    fn decode(self: Arc<Self>, file: Opened, name: &str, start: Start) -> BoxStream<Bytes> {
        let cursor = BlockCursor::new(file.blocks).mapped(file.mapped);
        let frames = TFRecordFrames::with_cursor(cursor, name, !file.decompressed)
            .resync(self.resync)
            .starting_at(start);
        // Only a reader from the file's start can see every record; a compressed file is
        // not indexed.
        let target = self
            .write_index
            .as_ref()
            .filter(|_| start.offset == 0 && !file.decompressed)
            .and_then(|target| target.of(&file.location));
        match target {
            Some(target) => Box::pin(IndexOnRead::new(frames, target, name)),
            None => Box::pin(frames),
        }
    }
}

file_options!(TFRecordDataset, "file", memory_map);
