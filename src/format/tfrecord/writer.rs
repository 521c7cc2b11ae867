//! Writing TFRecord files that TensorFlow reads back.

use async_compression::tokio::write::{GzipEncoder, ZlibEncoder};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::MAX_RECORD_LEN;
use crate::error::Error;
use crate::format::{Compression, masked_crc32c};

/// The destination, behind the encoder the compression needs.
enum Out<W: AsyncWrite> {
    Plain(W),
    Gzip(GzipEncoder<W>),
    Zlib(ZlibEncoder<W>),
}

/// Writes records in TFRecord framing, optionally compressed, to any async writer
/// (tf.io's `TFRecordWriter`). Records longer than 1 GiB, which readers refuse, are refused
/// (see [`write`](TFRecordWriter::write)). Call [`finish`](TFRecordWriter::finish) at the end: it
/// completes the compressed stream, flushes, and hands the writer back.
///
/// ```
/// use streamload::format::{Compression, TFRecordWriter};
/// # tokio_test::block_on(async {
/// let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
/// writer.write(b"abc").await?;
/// let bytes = writer.finish().await?;
/// assert_eq!(bytes.len(), 12 + 3 + 4); // header, payload, footer
/// # anyhow::Ok(()) }).unwrap();
/// ```
pub struct TFRecordWriter<W: AsyncWrite> {
    out: Out<W>,
    records: u64,
}

impl<W: AsyncWrite> std::fmt::Debug for TFRecordWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TFRecordWriter")
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}

impl<W: AsyncWrite + Unpin> TFRecordWriter<W> {
    /// A writer of records into `out`, compressed as `compression` says
    /// ([`Compression::Auto`] means none here: there is no file name to go by).
    pub fn new(out: W, compression: Compression) -> Self {
        let out = match compression {
            Compression::Gzip => Out::Gzip(GzipEncoder::new(out)),
            Compression::Zlib => Out::Zlib(ZlibEncoder::new(out)),
            Compression::None | Compression::Auto => Out::Plain(out),
        };
        TFRecordWriter { out, records: 0 }
    }

    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match &mut self.out {
            Out::Plain(w) => w.write_all(bytes).await,
            Out::Gzip(w) => w.write_all(bytes).await,
            Out::Zlib(w) => w.write_all(bytes).await,
        }
    }

    /// Appends one record.
    ///
    /// # Errors
    ///
    /// A record longer than 1 GiB (2^30 bytes), which TFRecord readers refuse (streamload's
    /// as data loss), is refused with nothing written: an error of kind
    /// [`InvalidInput`](std::io::ErrorKind::InvalidInput) holding an
    /// [`Error::InvalidArgument`] (`err.get_ref()` downcasts to it); the writer stays usable.
    /// Otherwise, the destination's or the encoder's errors.
    ///
    /// ```
    /// use streamload::format::{Compression, TFRecordWriter};
    /// # tokio_test::block_on(async {
    /// let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
    /// let too_long = vec![0u8; (1 << 30) + 1];
    /// let err = writer.write(&too_long).await.unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// assert_eq!(writer.records(), 0);
    /// assert!(writer.finish().await?.is_empty(), "nothing written");
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub async fn write(&mut self, payload: &[u8]) -> std::io::Result<()> {
        if payload.len() as u64 > MAX_RECORD_LEN {
            let message = format!(
                "TFRecordWriter: a record of {} bytes is longer than the {MAX_RECORD_LEN} bytes \
                 (1 GiB) TFRecord readers accept; nothing was written",
                payload.len()
            );
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                Error::InvalidArgument(message),
            ));
        }
        let len = (payload.len() as u64).to_le_bytes();
        let mut header = [0u8; 12];
        header[..8].copy_from_slice(&len);
        header[8..].copy_from_slice(&masked_crc32c(&len).to_le_bytes());
        self.write_all(&header).await?;
        self.write_all(payload).await?;
        self.write_all(&masked_crc32c(payload).to_le_bytes())
            .await?;
        self.records += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Completes the stream (the compressed trailer, if any), flushes, and hands back the
    /// destination.
    pub async fn finish(self) -> std::io::Result<W> {
        match self.out {
            Out::Plain(mut w) => {
                w.flush().await?;
                Ok(w)
            }
            Out::Gzip(mut w) => {
                w.shutdown().await?;
                Ok(w.into_inner())
            }
            Out::Zlib(mut w) => {
                w.shutdown().await?;
                Ok(w.into_inner())
            }
        }
    }
}
