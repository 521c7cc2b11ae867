//! Fixed-length records (`tf.data.FixedLengthRecordDataset`): a header to skip, records of
//! `record_bytes` each, a footer to skip.

use crate::storage::Location;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures::stream::{Stream, StreamExt};
use tokio::io::AsyncRead;
use tokio_util::codec::{Decoder, FramedRead};

use super::Compression;
use super::files::{FileFormat, read_files};
use crate::Error;
use crate::dataset::Dataset;
use crate::options::Parallelism;

/// Splits a byte stream into fixed-length records, holding back `footer` bytes so the footer
/// is never taken for a record.
#[derive(Debug)]
struct FixedLengthDecoder {
    name: Arc<str>,
    record: usize,
    header_left: usize,
    footer: usize,
    /// Records yielded, and bytes consumed (for error messages).
    index: u64,
    offset: u64,
}

impl Decoder for FixedLengthDecoder {
    type Item = Bytes;
    type Error = anyhow::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> anyhow::Result<Option<Bytes>> {
        if self.header_left > 0 {
            let skip = self.header_left.min(buf.len());
            buf.advance(skip);
            self.header_left -= skip;
            self.offset += skip as u64;
            if self.header_left > 0 {
                return Ok(None);
            }
        }
        if buf.len() < self.record + self.footer {
            buf.reserve(self.record + self.footer - buf.len());
            return Ok(None);
        }
        self.index += 1;
        self.offset += self.record as u64;
        Ok(Some(buf.split_to(self.record).freeze()))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> anyhow::Result<Option<Bytes>> {
        if let Some(record) = self.decode(buf)? {
            return Ok(Some(record));
        }
        let left = buf.len();
        buf.clear();
        if self.header_left > 0 {
            return Err(self.loss(format!(
                "the file ends inside its {}-byte header",
                self.offset + self.header_left as u64
            )));
        }
        if left == self.footer {
            return Ok(None);
        }
        let message = if left < self.footer {
            format!("the file ends inside its {}-byte footer", self.footer)
        } else {
            format!(
                "truncated record: {} bytes before the footer, records are {} bytes",
                left - self.footer,
                self.record
            )
        };
        Err(self.loss(message))
    }
}

impl FixedLengthDecoder {
    fn loss(&self, message: String) -> anyhow::Error {
        Error::DataLoss {
            path: self.name.to_string(),
            record: self.index,
            offset: self.offset,
            message,
        }
        .into()
    }
}

/// The records of one stream (`name` is used in errors).
fn fixed_length_records<R>(
    reader: R,
    name: &str,
    layout: Layout,
) -> impl Stream<Item = anyhow::Result<Bytes>> + Send + use<R>
where
    R: AsyncRead + Send + Unpin,
{
    let decoder = FixedLengthDecoder {
        name: Arc::from(name),
        record: layout.record,
        header_left: layout.header,
        footer: layout.footer,
        index: 0,
        offset: 0,
    };
    let capacity = (layout.record + layout.footer).max(64 * 1024);
    let name: Arc<str> = name.into();
    let mut failed = false;
    FramedRead::with_capacity(reader, decoder, capacity)
        .take_while(move |item| {
            let go = !failed;
            failed |= item.is_err();
            futures::future::ready(go)
        })
        .map(move |item| {
            // Data loss names the file already; I/O and decompression errors get it here.
            item.map_err(|e| match e.downcast_ref::<Error>() {
                Some(_) => e,
                None => e.context(format!("reading {name}")),
            })
        })
}

#[derive(Debug, Clone, Copy)]
struct Layout {
    record: usize,
    header: usize,
    footer: usize,
}

/// `tf.data.FixedLengthRecordDataset`: every `record_bytes`-long record of each file, after
/// skipping `header_bytes` and before `footer_bytes`.
///
/// A file whose body is not a whole number of records ends with a `DataLoss` error naming
/// the file, the record and the offset (TensorFlow logs a warning and stops reading); use
/// [`Dataset::ignore_errors`] to skip the rest of such a file and go on.
///
/// ```
/// use streamload::format::FixedLengthRecordDataset;
///
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("fixed.bin");
/// std::fs::write(&path, b"HEADER012345FOOTER")?;
/// let records = FixedLengthRecordDataset::new([path], 2)
///     .header_bytes(6)
///     .footer_bytes(6)
///     .build()
///     .collect()
///     .await?;
/// assert_eq!(records, [&b"01"[..], b"23", b"45"]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct FixedLengthRecordDataset {
    files: Vec<Location>,
    layout: Layout,
    compression: Compression,
    buffer_size: usize,
    num_parallel_reads: Option<Parallelism>,
}

impl FixedLengthRecordDataset {
    /// Records of `record_bytes` bytes from these files, in this order.
    ///
    /// # Panics
    ///
    /// If `record_bytes` is 0 (as TensorFlow refuses it).
    pub fn new<P: Into<Location>>(files: impl IntoIterator<Item = P>, record_bytes: usize) -> Self {
        assert!(
            record_bytes > 0,
            "FixedLengthRecordDataset: record_bytes must be at least 1"
        );
        FixedLengthRecordDataset {
            files: files.into_iter().map(Into::into).collect(),
            layout: Layout {
                record: record_bytes,
                header: 0,
                footer: 0,
            },
            compression: Compression::None,
            buffer_size: crate::storage::local::DEFAULT_BLOCK,
            num_parallel_reads: None,
        }
    }

    /// Bytes to skip at the start of each file.
    pub fn header_bytes(mut self, bytes: usize) -> Self {
        self.layout.header = bytes;
        self
    }

    /// Bytes to ignore at the end of each file.
    pub fn footer_bytes(mut self, bytes: usize) -> Self {
        self.layout.footer = bytes;
        self
    }

    /// GZIP / ZLIB / by extension (default: none).
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Bytes read from a file at a time (default 1 MiB).
    ///
    /// # Panics
    ///
    /// If `bytes` is 0.
    pub fn buffer_size(mut self, bytes: usize) -> Self {
        assert!(
            bytes > 0,
            "FixedLengthRecordDataset: buffer_size must be at least 1"
        );
        self.buffer_size = bytes;
        self
    }

    /// Reads this many files at once (tf.data's `num_parallel_reads`), and opens as many more
    /// ahead, so the next files' first bytes arrive while the current ones are read.
    pub fn num_parallel_reads(mut self, n: impl Into<Parallelism>) -> Self {
        self.num_parallel_reads = Some(n.into());
        self
    }

    /// The dataset.
    pub fn build(self) -> Dataset<Bytes> {
        let layout = self.layout;
        let format = FileFormat {
            stage: "fixed_length_record",
            decode: Arc::new(move |file, name| {
                let reader = tokio_util::io::StreamReader::new(file.blocks);
                Box::pin(fixed_length_records(reader, name, layout))
            }),
            compression: self.compression,
            buffer_size: self.buffer_size,
            memory_map: false,
        };
        read_files(self.files, format, self.num_parallel_reads)
    }
}
