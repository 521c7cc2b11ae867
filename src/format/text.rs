//! Text files, one element per line (tf.data's `TextLineDataset`).

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use futures::stream::Stream;
use tokio::io::AsyncRead;

use super::Compression;
use super::blocks::{BlockCursor, reader_blocks};
use super::files::{FileFormat, read_files};
use crate::dataset::Dataset;
use crate::options::Parallelism;
use crate::storage::Location;

/// Lines longer than this are an error rather than a buffer that grows without bound.
const MAX_LINE: usize = 64 << 20;
/// Read size when splitting a plain `AsyncRead`.
const DEFAULT_BUFFER: usize = 256 * 1024;

/// The lines of one text stream, without their `\n` or `\r\n`, as `Bytes` that share the
/// read buffer (no copy per line). A final line without a newline is yielded; a final newline
/// adds no empty line. After an error the stream ends.
///
/// ```
/// use futures::StreamExt;
/// use streamload::format::text_lines;
/// # tokio_test::block_on(async {
/// let lines: Vec<_> = text_lines(&b"a b\r\n\nlast"[..], "in-memory").collect().await;
/// let lines: Vec<bytes::Bytes> = lines.into_iter().collect::<anyhow::Result<_>>()?;
/// assert_eq!(lines, [&b"a b"[..], b"", b"last"]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
pub fn text_lines<R>(
    reader: R,
    name: &str,
) -> impl Stream<Item = anyhow::Result<Bytes>> + Send + use<R>
where
    R: AsyncRead + Send + Unpin,
{
    Lines::new(reader_blocks(reader, DEFAULT_BUFFER), name)
}

/// The lines of a text stream read as blocks: a line inside one block is a slice of it, a
/// line that spans blocks is gathered into its own buffer.
pub(crate) struct Lines<S> {
    cursor: BlockCursor<S>,
    name: Arc<str>,
    /// Lines yielded so far.
    line: u64,
    done: bool,
}

impl<S> Lines<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    pub(crate) fn new(blocks: S, name: &str) -> Self {
        Lines {
            cursor: BlockCursor::new(blocks),
            name: name.into(),
            line: 0,
            done: false,
        }
    }

    fn poll_line(&mut self, cx: &mut Context<'_>) -> Poll<anyhow::Result<Option<Bytes>>> {
        let c = &mut self.cursor;
        loop {
            let newline = memchr::memchr(b'\n', &c.block);
            if c.carry.is_empty() {
                if let Some(end) = newline {
                    // Cut the line without its `\n` or `\r\n` (trimming a `Bytes` after the
                    // copy would cost a second allocation), then step over them.
                    let len = if end > 0 && c.block[end - 1] == b'\r' {
                        end - 1
                    } else {
                        end
                    };
                    let line = c.take_from_block(len);
                    c.block.advance(end + 1 - len);
                    c.offset += (end + 1 - len) as u64;
                    return Poll::Ready(Ok(Some(line)));
                }
            } else if let Some(end) = newline {
                c.carry_from_block(end);
                c.block.advance(1);
                c.offset += 1;
                if c.carry.last() == Some(&b'\r') {
                    c.carry.truncate(c.carry.len() - 1);
                    c.offset += 1;
                }
                return Poll::Ready(Ok(Some(c.take_carry())));
            }
            // No newline in this block: the line goes on in the next one.
            if c.carry.len() + c.block.len() > MAX_LINE {
                let (name, line) = (&self.name, self.line + 1);
                return Poll::Ready(Err(anyhow::anyhow!(
                    "{name}: line {line} is longer than {MAX_LINE} bytes"
                )));
            }
            let rest = c.block.len();
            c.carry_from_block(rest);
            match ready!(c.poll_block(cx)) {
                Ok(true) => {}
                // The last line, without a newline.
                Ok(false) if !c.carry.is_empty() => {
                    if c.carry.last() == Some(&b'\r') {
                        c.carry.truncate(c.carry.len() - 1);
                        c.offset += 1;
                    }
                    return Poll::Ready(Ok(Some(c.take_carry())));
                }
                Ok(false) => return Poll::Ready(Ok(None)),
                Err(e) => {
                    let (name, line) = (&self.name, self.line + 1);
                    return Poll::Ready(Err(
                        anyhow::Error::new(e).context(format!("reading line {line} of {name}"))
                    ));
                }
            }
        }
    }
}

impl<S> Stream for Lines<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    type Item = anyhow::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let next = ready!(this.poll_line(cx));
        match &next {
            Ok(Some(_)) => this.line += 1,
            _ => {
                this.done = true;
                this.cursor.clear();
            }
        }
        Poll::Ready(next.transpose())
    }
}

/// The lines of text files as a [`Dataset`] of `Bytes` (tf.data's `TextLineDataset`).
///
/// Files are read in order, or `num_parallel_reads` at once (one line from each in turn).
///
/// ```
/// use streamload::format::TextLineDataset;
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("a.txt");
/// std::fs::write(&path, "first line\nsecond line\n")?;
/// let lines = TextLineDataset::new([&path]).build().collect().await?;
/// assert_eq!(lines, [&b"first line"[..], b"second line"]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct TextLineDataset {
    files: Vec<Location>,
    compression: Compression,
    buffer_size: usize,
    num_parallel_reads: Option<Parallelism>,
}

impl TextLineDataset {
    /// The lines of these files, in this order.
    pub fn new<P: Into<Location>>(files: impl IntoIterator<Item = P>) -> Self {
        TextLineDataset {
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
        assert!(bytes > 0, "TextLineDataset: buffer_size must be at least 1");
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
        let format = FileFormat {
            stage: "text_line",
            decode: Arc::new(|blocks, name| Box::pin(Lines::new(blocks, name))),
            compression: self.compression,
            buffer_size: self.buffer_size,
        };
        read_files(self.files, format, self.num_parallel_reads)
    }
}

/// The files matching a glob `pattern` (`data/train-*.tfrecord`), sorted by path (tf.data's
/// `list_files`).
///
/// tf.data shuffles the list by default; streamload returns it sorted, so a pipeline reads
/// files in a stable, reproducible order unless asked otherwise: shuffle the list with
/// `.shuffle(n, seed)` (or read with `num_parallel_reads`) where you want it.
///
/// # Errors
///
/// When the pattern is invalid, a matching path cannot be read, or nothing matches (an error
/// naming the pattern, as tf.data's "No files matched pattern").
///
/// ```
/// # fn main() -> anyhow::Result<()> {
/// let dir = tempfile::tempdir()?;
/// for name in ["b.txt", "a.txt", "c.csv"] {
///     std::fs::write(dir.path().join(name), "x\n")?;
/// }
/// let files = streamload::format::list_files(&format!("{}/*.txt", dir.path().display()))?;
/// assert_eq!(files.iter().map(|f| f.file_name().unwrap()).collect::<Vec<_>>(), ["a.txt", "b.txt"]);
/// assert!(streamload::format::list_files(&format!("{}/*.parquet", dir.path().display())).is_err());
/// # Ok(()) }
/// ```
pub fn list_files(pattern: &str) -> anyhow::Result<Vec<PathBuf>> {
    let paths = glob::glob(pattern)
        .map_err(|e| anyhow::anyhow!("invalid file pattern {pattern:?}: {e}"))?;
    let mut files = paths
        .map(|p| p.map_err(|e| anyhow::anyhow!("listing {pattern:?}: {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    files.retain(|p| p.is_file());
    anyhow::ensure!(!files.is_empty(), "no files matched pattern {pattern:?}");
    files.sort();
    Ok(files)
}
