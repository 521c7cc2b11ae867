//! Fixed-length records (`tf.data.FixedLengthRecordDataset`): a header to skip, records of
//! `record_bytes` each, a footer to skip.

use crate::storage::Location;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures::stream::{Stream, StreamExt};

use crate::checkpoint::{Prov, State};
use crate::engine::Resumable;
use tokio::io::AsyncRead;
use tokio_util::codec::{Decoder, FramedRead};

use super::files::{FileFormat, Format, Opened, Start, read_files};
use super::options::{FileOptions, file_options};
use crate::Error;
use crate::engine::{BoxStream, Dataset};
use crate::storage::compression::damage;

/// Splits a byte stream into fixed-length records, holding back `footer` bytes so the footer
/// is never taken for a record.
#[derive(Debug)]
struct FixedLengthDecoder {
    name: Arc<str>,
    record: usize,
    header: usize,
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
        if left < self.footer {
            let message = format!("the file ends inside its {}-byte footer", self.footer);
            return Err(self.loss(message));
        }
        let body = self.index * self.record as u64 + (left - self.footer) as u64;
        Err(self.loss(not_a_multiple(&self.layout(), &self.name, body)))
    }
}

/// TensorFlow's words for a body that is not a whole number of records.
fn not_a_multiple(layout: &Layout, name: &str, body: u64) -> String {
    format!(
        "Excluding the header ({} bytes) and footer ({} bytes), input file \"{name}\" has body \
         length {body} bytes, which is not an exact multiple of the record length ({} bytes).",
        layout.header, layout.footer, layout.record
    )
}

impl FixedLengthDecoder {
    fn layout(&self) -> Layout {
        Layout {
            record: self.record,
            header: self.header,
            footer: self.footer,
        }
    }

    fn loss(&self, message: String) -> anyhow::Error {
        Error::DataLoss {
            path: self.name.to_string(),
            record: self.index,
            offset: self.offset,
            message,
            looks_compressed: None,
            skipped: None,
        }
        .into()
    }
}

/// The records of one stream (`name` is used in errors), read from `start` on (a restored
/// reader's position: the header is skipped only at offset 0), after `error` if any (a
/// size check's), or none at all (`records` false).
fn fixed_length_records<R>(
    reader: R,
    name: &str,
    layout: Layout,
    start: Start,
    first: Sized,
) -> FixedLengthRecords<R>
where
    R: AsyncRead + Send + Unpin,
{
    let header_left = layout
        .header
        .saturating_sub(usize::try_from(start.offset).unwrap_or(usize::MAX));
    let decoder = FixedLengthDecoder {
        name: Arc::from(name),
        record: layout.record,
        header: layout.header,
        header_left,
        footer: layout.footer,
        index: start.record,
        offset: start.offset,
    };
    let capacity = (layout.record + layout.footer).max(64 * 1024);
    let (framed, error) = match first {
        Sized::Records => (
            Some(FramedRead::with_capacity(reader, decoder, capacity)),
            None,
        ),
        Sized::Empty => (None, None),
        Sized::NotAMultiple(message) => (None, Some(Error::InvalidArgument(message).into())),
    };
    FixedLengthRecords {
        framed,
        error,
        last_start: start.offset,
        last_end: start.offset,
        index: start.record,
    }
}

/// The records of one file: after an error the stream ends (the rest of a damaged file is
/// not read).
struct FixedLengthRecords<R> {
    framed: Option<FramedRead<R, FixedLengthDecoder>>,
    /// An error to yield first, in place of any record (TensorFlow's size check).
    error: Option<anyhow::Error>,
    /// Where the last record yielded starts and ends, and the records yielded.
    last_start: u64,
    last_end: u64,
    index: u64,
}

impl<R> Unpin for FixedLengthRecords<R> {}

impl<R: AsyncRead + Unpin> Stream for FixedLengthRecords<R> {
    type Item = anyhow::Result<Bytes>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = self.get_mut();
        if let Some(e) = this.error.take() {
            return Poll::Ready(Some(Err(e)));
        }
        let Some(framed) = this.framed.as_mut() else {
            return Poll::Ready(None);
        };
        let next = std::task::ready!(framed.poll_next_unpin(cx));
        let decoder = framed.decoder();
        let out = match next {
            Some(Ok(record)) => {
                this.last_end = decoder.offset;
                this.last_start = decoder.offset - record.len() as u64;
                this.index = decoder.index;
                return Poll::Ready(Some(Ok(record)));
            }
            Some(Err(e)) => {
                this.last_start = decoder.offset;
                Some(Err(decoder.read_error(e)))
            }
            None => None,
        };
        this.framed = None;
        Poll::Ready(out)
    }
}

/// Saved state: `[offset, record]` after the last record yielded (the offset in the
/// decompressed stream for a compressed file; `Start::ENDED` once the file has ended); a
/// record's position is its start offset.
impl<R> Resumable for FixedLengthRecords<R> {
    fn save(self: std::pin::Pin<&mut Self>) -> anyhow::Result<State> {
        // Ended (at the end of the file, or at an error that ends it): nothing more to read.
        let ended = self.framed.is_none() && self.error.is_none();
        let offset = if ended { Start::ENDED } else { self.last_end };
        Ok(State::new(STAGE).words([offset, self.index]))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        Ok(Prov::at(self.last_start))
    }
}

/// The stage's name.
const STAGE: &str = "fixed_length_record";

impl FixedLengthDecoder {
    /// An error from the stream: data loss names the file already; a damaged compressed
    /// stream is data loss at the record being read (its offset in the decompressed
    /// stream); an I/O error gets the file's name.
    fn read_error(&self, e: anyhow::Error) -> anyhow::Error {
        if e.downcast_ref::<Error>().is_some() {
            return e;
        }
        match e.downcast_ref::<std::io::Error>().and_then(damage) {
            Some(message) => self.loss(message),
            None => e.context(format!("reading {}", self.name)),
        }
    }
}

/// The format's parameters: the records' layout in each file.
#[derive(Debug, Clone, Copy, Hash)]
struct Layout {
    record: usize,
    header: usize,
    footer: usize,
}

/// What a file's size says before it is read.
enum Sized {
    /// The body is not a whole number of records: TensorFlow's error, and no record.
    NotAMultiple(String),
    /// Header and footer overlap: no record and no error (TensorFlow's arithmetic).
    Empty,
    /// Read it.
    Records,
}

impl Layout {
    /// TensorFlow's check of an uncompressed file's size, wrapping arithmetic included (a
    /// file shorter than its header and footer has a body of nearly 2^64 bytes).
    fn check(&self, size: u64, name: &str) -> Sized {
        let edges = (self.header as u64).wrapping_add(self.footer as u64);
        let body = size.wrapping_sub(edges);
        if body % self.record as u64 != 0 {
            Sized::NotAMultiple(not_a_multiple(self, name, body))
        } else if size >= self.header as u64 && size < edges {
            Sized::Empty
        } else {
            Sized::Records
        }
    }
}

/// `tf.data.FixedLengthRecordDataset`: every `record_bytes`-long record of each file, after
/// skipping `header_bytes` and before `footer_bytes`.
///
/// A file whose body is not a whole number of records is an error, in TensorFlow's words
/// ("Excluding the header (H bytes) and footer (F bytes), input file "PATH" has body length
/// B bytes, which is not an exact multiple of the record length (R bytes)."): for a local
/// file read as it is, an `InvalidArgument` before any of its records, as TensorFlow checks
/// the file's size first; for a compressed or remote file, a `DataLoss` naming the record
/// and offset after its whole records. A file shorter than its header is a `DataLoss`, and
/// so is a damaged compressed stream ("GZIP inflate() failed (...)", after the whole records
/// before the damage, naming the record being read and its offset in the decompressed
/// stream). Use
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
    files: FileOptions,
    layout: Layout,
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
            files: FileOptions::new(files),
            layout: Layout {
                record: record_bytes,
                header: 0,
                footer: 0,
            },
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

    /// The dataset.
    pub fn build(self) -> Dataset<Bytes> {
        read_files(self.files, FileFormat::new(self.layout))
    }
}

impl Format for Layout {
    type Out = Bytes;
    const STAGE: &'static str = STAGE;

    fn decode(self: Arc<Self>, file: Opened, name: &str, start: Start) -> BoxStream<Bytes> {
        // A local regular file read as it is has a size to check first, as TensorFlow
        // does (a pipe or device has none: it is read to its end).
        let local = file.location.as_path().is_some() && !file.decompressed;
        let size = file.identity.filter(|_| local).map(|file| file.size);
        let first = match size {
            Some(size) => self.check(size, name),
            None => Sized::Records,
        };
        let reader = tokio_util::io::StreamReader::new(file.blocks);
        Box::pin(fixed_length_records(reader, name, *self, start, first))
    }
}

file_options!(FixedLengthRecordDataset, "file");
