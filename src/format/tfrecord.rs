//! Reading TFRecord files: a length-prefixed, CRC-checked codec and the dataset over files.
//!
//! The framing (TensorFlow's `tensorflow/core/lib/io/record_writer.cc`):
//! `u64 LE length | u32 LE masked_crc32c(length) | payload | u32 LE masked_crc32c(payload)`.
//! Damage is handled exactly as TensorFlow's reader does: a CRC mismatch is
//! "corrupted record at OFFSET" (the payload's offset for a bad data CRC, the record's for a
//! bad length CRC), a cut payload or footer is "truncated record at OFFSET" (the record's),
//! and a partial header (1 to 11 bytes) at the end of a file is read as the end of the file.

use crate::storage::Location;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures::stream::{Stream, StreamExt};
use tokio::io::AsyncRead;
use tokio_util::codec::{Decoder, FramedRead};

use super::files::{FileFormat, read_files};
use super::{Compression, masked_crc32c};
use crate::dataset::Dataset;
use crate::error::Error;
use crate::options::Parallelism;

const HEADER: usize = 12;
const FOOTER: usize = 4;
/// Records longer than this are refused (TensorFlow's records are protocol buffers, at most
/// 2 GiB); a damaged length field never turns into a large allocation.
const MAX_RECORD_LEN: u64 = 1 << 30;
/// A partial record grows the buffer by at most this much at a time.
const RESERVE_STEP: usize = 1 << 20;
/// Default read buffer (TensorFlow's `buffer_size` default is 256 KiB).
const DEFAULT_BUFFER: usize = 256 * 1024;

/// A [`tokio_util::codec::Decoder`] of TFRecord frames: yields each record's payload,
/// checking both CRCs. Errors are [`Error::DataLoss`] naming the file, record and offset.
#[derive(Debug, Clone)]
pub struct TFRecordDecoder {
    name: Arc<str>,
    /// Index of the next record.
    record: u64,
    /// Byte offset of the next record in the (uncompressed) stream.
    offset: u64,
}

impl TFRecordDecoder {
    /// A decoder for the stream called `name` in error messages.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        TFRecordDecoder {
            name: name.into(),
            record: 0,
            offset: 0,
        }
    }

    fn data_loss(&self, offset: u64, message: impl Into<String>) -> anyhow::Error {
        Error::DataLoss {
            path: self.name.to_string(),
            record: self.record,
            offset,
            message: message.into(),
        }
        .into()
    }
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

impl Decoder for TFRecordDecoder {
    type Item = Bytes;
    type Error = anyhow::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> anyhow::Result<Option<Bytes>> {
        if buf.len() < HEADER {
            return Ok(None);
        }
        let (len_bytes, rest) = buf.split_at(8);
        if masked_crc32c(len_bytes) != le_u32(rest) {
            return Err(self.data_loss(self.offset, "corrupted record"));
        }
        let len = u64::from_le_bytes([
            len_bytes[0],
            len_bytes[1],
            len_bytes[2],
            len_bytes[3],
            len_bytes[4],
            len_bytes[5],
            len_bytes[6],
            len_bytes[7],
        ]);
        if len > MAX_RECORD_LEN {
            return Err(self.data_loss(
                self.offset,
                format!("record length {len} larger than {MAX_RECORD_LEN}"),
            ));
        }
        let len = len as usize;
        let total = HEADER + len + FOOTER;
        if buf.len() < total {
            buf.reserve((total - buf.len()).min(RESERVE_STEP));
            return Ok(None);
        }
        let payload = &buf[HEADER..HEADER + len];
        if masked_crc32c(payload) != le_u32(&buf[HEADER + len..total]) {
            return Err(self.data_loss(self.offset + HEADER as u64, "corrupted record"));
        }
        let mut frame = buf.split_to(total);
        frame.advance(HEADER);
        frame.truncate(len);
        self.offset += total as u64;
        self.record += 1;
        Ok(Some(frame.freeze()))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> anyhow::Result<Option<Bytes>> {
        if let Some(record) = self.decode(buf)? {
            return Ok(Some(record));
        }
        if buf.is_empty() {
            return Ok(None);
        }
        if buf.len() < HEADER {
            // TensorFlow reads a partial header at the end of a file as the end of the file.
            buf.clear();
            return Ok(None);
        }
        Err(self.data_loss(self.offset, "truncated record"))
    }
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
    let name: Arc<str> = name.into();
    let frames = FramedRead::with_capacity(
        reader,
        TFRecordDecoder::new(Arc::clone(&name)),
        DEFAULT_BUFFER,
    );
    let mut failed = false;
    frames
        .take_while(move |item| {
            let go = !failed;
            failed |= item.is_err();
            futures::future::ready(go)
        })
        .map(move |item| {
            item.map_err(|e| {
                // Data loss names the file already; anything else (I/O, a bad gzip stream) gets it.
                if e.downcast_ref::<Error>().is_some() {
                    e
                } else {
                    e.context(format!("reading {name}"))
                }
            })
        })
}

/// The records of TFRecord files as a [`Dataset`] of `Bytes` (tf.data's `TFRecordDataset`).
///
/// Files are read in order, or `num_parallel_reads` at once through
/// [`parallel_interleave`](Dataset::parallel_interleave) (cycle of that many files, one
/// record from each in turn: deterministic, like tf.data's). Each record's CRCs are checked.
///
/// # Errors
///
/// A damaged file yields an [`Error::DataLoss`] element naming the file, the record and the
/// byte offset, and ends that file; the next file is read, so
/// [`ignore_errors`](Dataset::ignore_errors) skips the rest of a damaged file, as in
/// TensorFlow. A file that cannot be opened is an error element naming it.
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
    files: Vec<Location>,
    compression: Compression,
    buffer_size: usize,
    num_parallel_reads: Option<Parallelism>,
}

impl TFRecordDataset {
    /// The records of these files, in this order.
    pub fn new<P: Into<Location>>(files: impl IntoIterator<Item = P>) -> Self {
        TFRecordDataset {
            files: files.into_iter().map(Into::into).collect(),
            compression: Compression::None,
            buffer_size: crate::storage::local::DEFAULT_BLOCK,
            num_parallel_reads: None,
        }
    }

    /// How the files are compressed (default: none; [`Compression::Auto`] goes by extension).
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Bytes read from a file at a time (default 1 MiB; two blocks are read ahead).
    ///
    /// # Panics
    ///
    /// If `bytes` is 0.
    pub fn buffer_size(mut self, bytes: usize) -> Self {
        assert!(bytes > 0, "TFRecordDataset: buffer_size must be at least 1");
        self.buffer_size = bytes;
        self
    }

    /// Reads this many files at once (tf.data's `num_parallel_reads`).
    pub fn num_parallel_reads(mut self, n: impl Into<Parallelism>) -> Self {
        self.num_parallel_reads = Some(n.into());
        self
    }

    /// The dataset.
    pub fn build(self) -> Dataset<Bytes> {
        let format = FileFormat {
            stage: "tfrecord",
            decode: std::sync::Arc::new(|reader, name| Box::pin(tfrecord_records(reader, name))),
            compression: self.compression,
            buffer_size: self.buffer_size,
        };
        read_files(self.files, format, self.num_parallel_reads)
    }
}
