//! TFRecord indexes in DALI's `tfrecord2idx` text format: one `offset size` line per record.

use std::fmt;
use std::path::Path;

use futures::StreamExt;
use tokio::io::AsyncReadExt;

use super::{FRAME_OVERHEAD, MAX_RECORD_LEN, TFRecordFrames};
use crate::error::Error;
use crate::format::Compression;
use crate::format::options::BlockOptions;
use crate::storage::Location;

/// Where one record lies in its TFRecord file: the offset of its header and the length of the
/// whole frame (12-byte header, payload, 4-byte footer), as DALI's `tfrecord2idx` writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexEntry {
    /// The byte offset where the record's header starts.
    pub offset: u64,
    /// The record's framed length: its payload's length plus 16.
    pub size: u64,
}

/// The positions of the records of one TFRecord file: what DALI's `tools/tfrecord2idx`
/// writes and `fn.readers.tfrecord(index_path=...)` reads, one `offset size` line per record
/// (decimal, separated by a space, each line ending with `\n`; `size` is the whole framed
/// record, header and footer included).
///
/// Make one by reading a file once ([`build`](Self::build), CRCs checked; or as a side effect
/// of reading it, [`TFRecordDataset::write_index`](super::TFRecordDataset::write_index)), by
/// reading an index
/// file DALI or the `tfrecord index` tool wrote ([`read`](Self::read), [`parse`](Self::parse)),
/// and write it with [`write`](Self::write) or [`Display`](fmt::Display). With indexes, a set
/// of files has random access: [`IndexedTFRecords`](super::IndexedTFRecords).
///
/// ```
/// use streamload::format::{Compression, TFRecordIndex, TFRecordWriter};
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("train.tfrecord");
/// let mut writer = TFRecordWriter::new(tokio::fs::File::create(&path).await?, Compression::None);
/// writer.write(b"hello").await?;
/// writer.write(b"").await?;
/// writer.finish().await?;
///
/// let index = TFRecordIndex::build(&path).await?;
/// assert_eq!(index.len(), 2);
/// assert_eq!(index.to_string(), "0 21\n21 16\n");
/// index.write(dir.path().join("train.tfrecord.idx")).await?;
/// let read = TFRecordIndex::read(dir.path().join("train.tfrecord.idx")).await?;
/// assert_eq!(read, index);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TFRecordIndex {
    entries: Vec<IndexEntry>,
}

impl TFRecordIndex {
    /// An index of these entries.
    pub fn new(entries: Vec<IndexEntry>) -> Self {
        TFRecordIndex { entries }
    }

    /// The entries, one per record, in the order of the index file.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The number of records.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it has no record.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Reads the index text `text` (DALI's format); `name` names it in errors. Lines are
    /// two unsigned decimal numbers separated by spaces or tabs; blank lines are skipped.
    ///
    /// # Errors
    ///
    /// A line that is not two numbers, or whose size is smaller than a frame's 16 bytes,
    /// naming the index and the line (counted from 1).
    pub fn parse(text: &str, name: &str) -> anyhow::Result<Self> {
        let mut entries = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let mut fields = line.split_ascii_whitespace();
            let parsed = match (fields.next(), fields.next(), fields.next()) {
                (None, ..) => continue,
                (Some(offset), Some(size), None) => {
                    offset.parse::<u64>().ok().zip(size.parse::<u64>().ok())
                }
                _ => None,
            };
            let Some((offset, size)) = parsed else {
                anyhow::bail!(
                    "{name}: line {}: expected `offset size` (two unsigned numbers), found {:?}",
                    n + 1,
                    truncated(line)
                );
            };
            anyhow::ensure!(
                size >= FRAME_OVERHEAD,
                "{name}: line {}: record size {size} is smaller than a TFRecord frame's \
                 {FRAME_OVERHEAD} bytes of header and footer",
                n + 1
            );
            anyhow::ensure!(
                offset.checked_add(size).is_some(),
                "{name}: line {}: offset {offset} + size {size} overflows",
                n + 1
            );
            entries.push(IndexEntry { offset, size });
        }
        Ok(TFRecordIndex { entries })
    }

    /// Reads the index file at `location` (a local path or a URL).
    ///
    /// # Errors
    ///
    /// When it cannot be read, or as [`parse`](Self::parse).
    pub async fn read(location: impl Into<Location>) -> anyhow::Result<Self> {
        let location = location.into();
        let mut reader = crate::storage::open(location.clone()).await?;
        let mut text = String::new();
        reader
            .read_to_string(&mut text)
            .await
            .map_err(|e| anyhow::anyhow!("reading the index {location}: {e}"))?;
        Self::parse(&text, &location.to_string())
    }

    /// Writes the index to the local file `path` (replaced if it exists), in DALI's format,
    /// atomically: to a temporary file beside it, renamed over it (a reader never finds a
    /// part of an index).
    ///
    /// # Errors
    ///
    /// When the file cannot be written, naming it.
    pub async fn write(&self, path: impl AsRef<Path>) -> anyhow::Result<()> {
        let path = path.as_ref();
        crate::storage::local::write_atomic(path, self.to_string().into())
            .await
            .map_err(|e| anyhow::anyhow!("writing the index {}: {e}", path.display()))
    }

    /// Reads the TFRecord file at `location` once, from its start to its end, checking
    /// every CRC, and returns where each record lies (what DALI's `tfrecord2idx` writes for
    /// a sound file). A local file is mapped into memory, an object read with ranged GETs
    /// and read-ahead, as [`TFRecordDataset`](super::TFRecordDataset) reads them.
    ///
    /// # Errors
    ///
    /// A compressed file (a `.gz`, `.zz` or `.zlib` name, or content that starts as a GZIP
    /// or ZLIB stream) is refused: a compressed stream has no random access, so an index
    /// into it would be of no use (decompress it first). A damaged file is the
    /// [`Error::DataLoss`] of its first damaged record, naming the file, the record and the
    /// offset; no index of the records before it is returned.
    pub async fn build(location: impl Into<Location>) -> anyhow::Result<Self> {
        let location = location.into();
        let name = location.to_string();
        refuse_compressed(&location)?;
        let blocks = BlockOptions {
            compression: Compression::None,
            buffer_size: crate::storage::local::DEFAULT_BLOCK,
            memory_map: true,
        };
        let opened = crate::format::files::open_blocks(&location, blocks, None, 0)
            .await
            .map_err(|e| e.context(format!("opening {name}")))?;
        let mut frames = TFRecordFrames::new(opened.blocks, &name);
        let mut entries = Vec::new();
        while let Some(record) = frames.next().await {
            if let Err(e) = record {
                if let Some(Error::DataLoss {
                    looks_compressed: Some(c),
                    ..
                }) = e.downcast_ref::<Error>()
                {
                    return Err(compressed(&name, *c));
                }
                return Err(e);
            }
            let (start, end) = frames.last_span();
            entries.push(IndexEntry {
                offset: start,
                size: end - start,
            });
        }
        Ok(TFRecordIndex { entries })
    }

    /// Checks the entries against the file they index, `file_size` bytes long: each must
    /// lie inside it and be the size of a frame TFRecord readers accept.
    pub(crate) fn check(&self, file_size: u64, file: &str, index: &str) -> anyhow::Result<()> {
        for (record, entry) in self.entries.iter().enumerate() {
            anyhow::ensure!(
                (FRAME_OVERHEAD..=MAX_RECORD_LEN + FRAME_OVERHEAD).contains(&entry.size),
                "the index {index} of {file}: record {record} at offset {} has a size of {} \
                 bytes, not a TFRecord frame's (16 bytes and a payload of at most {MAX_RECORD_LEN})",
                entry.offset,
                entry.size
            );
            let end = entry.offset.saturating_add(entry.size);
            anyhow::ensure!(
                end <= file_size,
                "the index {index} does not fit {file}: record {record} at offset {} of {} \
                 bytes ends at {end}, past the end of the file ({file_size} bytes)",
                entry.offset,
                entry.size
            );
        }
        Ok(())
    }
}

/// Shown as the index file's text: `offset size\n` per record.
impl fmt::Display for TFRecordIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for entry in &self.entries {
            writeln!(f, "{} {}", entry.offset, entry.size)?;
        }
        Ok(())
    }
}

/// At most 80 characters of a line, for an error.
fn truncated(line: &str) -> String {
    line.chars().take(80).collect()
}

/// The error for a compressed file where random access is needed.
pub(crate) fn compressed(name: &str, c: Compression) -> anyhow::Error {
    anyhow::anyhow!(
        "{name} is {}-compressed: a compressed stream has no random access, so it cannot be \
         indexed or read by index (decompress it first)",
        if c == Compression::Gzip {
            "GZIP"
        } else {
            "ZLIB"
        }
    )
}

/// An error for a location whose name says it is compressed.
pub(crate) fn refuse_compressed(location: &Location) -> anyhow::Result<()> {
    match Compression::Auto.for_extension(location.extension()) {
        Compression::None => Ok(()),
        c => Err(compressed(&location.to_string(), c)),
    }
}
