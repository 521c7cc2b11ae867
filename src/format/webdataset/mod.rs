//! WebDataset tar shards: samples grouped from tar members, read streaming, and written.

mod sample;
mod tar;
mod writer;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures::stream::Stream;
use tokio::io::AsyncRead;

use super::Compression;
use super::files::{FileFormat, Format, Opened, Start, read_files};
use super::options::{FileOptions, file_options};
use crate::engine::{BoxStream, Dataset};
use crate::error::Error;
use crate::storage::Location;
use crate::storage::blocks::{BlockCursor, reader_blocks};
use crate::storage::compression::damage;
pub use sample::Sample;
use sample::{base_plus_ext, is_meta};
use tar::{Member, ReadError, TarMembers};
pub use writer::ShardWriter;

/// Read size when decoding a plain `AsyncRead`.
const DEFAULT_BUFFER: usize = 256 * 1024;

/// The samples of one WebDataset tar stream read from any async reader (a file, a
/// decompressor, an object-storage body); `name` is the shard's name in errors and each
/// sample's [`url`](Sample::url). After an error the stream ends.
///
/// # Errors
///
/// As [`WebDataset`]'s: damage is an [`Error::DataLoss`] naming `name`, the sample and the
/// byte offset (members over 2 GiB are refused as damage); an error of `reader` is passed on
/// with `name` as context.
///
/// ```
/// use futures::StreamExt;
/// use streamload::format::{Sample, ShardWriter, webdataset_samples};
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let mut writer = ShardWriter::new(dir.path().join("shard-%03d.tar").to_str().unwrap())?;
/// writer.write(&Sample::new("a").with("txt", "hello").with("cls", "1")).await?;
/// let shards = writer.finish().await?;
/// let file = tokio::fs::File::open(shards[0].as_path().unwrap()).await?;
/// let samples: Vec<anyhow::Result<Sample>> = webdataset_samples(file, "shard-000.tar").collect().await;
/// assert_eq!(samples.len(), 1);
/// let sample = samples.into_iter().next().unwrap()?;
/// assert_eq!((sample.key(), sample.txt()?, sample.cls()?), ("a", "hello", 1));
/// # anyhow::Ok(()) }).unwrap();
/// ```
pub fn webdataset_samples<R>(
    reader: R,
    name: &str,
) -> impl Stream<Item = anyhow::Result<Sample>> + Send + use<R>
where
    R: AsyncRead + Send + Unpin,
{
    TarSamples::new(
        BlockCursor::new(reader_blocks(reader, DEFAULT_BUFFER)),
        name,
        tar::DEFAULT_MAX_MEMBER,
        true,
    )
}

/// The samples of a tar stream read as blocks: consecutive members sharing a key, grouped.
pub(crate) struct TarSamples<S> {
    members: TarMembers<S>,
    name: Arc<str>,
    /// The sample being gathered, and where its first member's header starts.
    current: Option<(Sample, u64)>,
    /// A member of the next sample, read before the current one was passed on.
    pending: Option<(Member, usize)>,
    /// An error to pass on after the sample it found complete.
    error: Option<anyhow::Error>,
    /// Index of the next sample.
    record: u64,
    done: bool,
    /// Where the last sample yielded starts, and where the next one starts (its saved
    /// position: the reader is past that one's first member).
    last_start: u64,
    last_end: u64,
}

impl<S> TarSamples<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    pub(crate) fn new(cursor: BlockCursor<S>, name: &str, max_member: u64, raw: bool) -> Self {
        TarSamples {
            members: TarMembers::new(cursor, max_member, raw),
            name: name.into(),
            current: None,
            pending: None,
            error: None,
            record: 0,
            done: false,
            last_start: 0,
            last_end: 0,
        }
    }

    /// Reads from `start` on: the blocks begin at that (decompressed) offset, where sample
    /// `start.record` begins.
    pub(crate) fn starting_at(mut self, start: Start) -> Self {
        self.members.cursor.offset = start.offset;
        self.record = start.record;
        self.last_start = start.offset;
        self.last_end = start.offset;
        self
    }

    fn data_loss(&self, offset: u64, message: String, looks_gzip: bool) -> anyhow::Error {
        Error::DataLoss {
            path: self.name.to_string(),
            record: self.record,
            offset,
            message,
            looks_compressed: looks_gzip.then_some(Compression::Gzip),
            skipped: None,
        }
        .into()
    }

    fn error(&self, e: ReadError) -> anyhow::Error {
        match e {
            ReadError::Io(e) => match damage(&e) {
                Some(message) => self.data_loss(self.members.offset(), message, false),
                None => anyhow::Error::new(e).context(format!("reading {}", self.name)),
            },
            ReadError::Tar(t) => {
                let whose = match (&t.member, &self.current) {
                    (Some(member), _) => match base_plus_ext(member) {
                        Some((key, _)) => format!(" (member `{member}`, sample key `{key}`)"),
                        None => format!(" (member `{member}`)"),
                    },
                    (None, Some((sample, _))) => {
                        format!(" (in or after sample key `{}`)", sample.key())
                    }
                    (None, None) => String::new(),
                };
                self.data_loss(t.offset, format!("{}{whose}", t.message), t.looks_gzip)
            }
        }
    }

    /// Passes the current sample on; the next starts at `next` (an offset).
    fn finish_sample(&mut self, next: u64) -> Option<Sample> {
        let (sample, start) = self.current.take()?;
        self.last_start = start;
        self.last_end = next;
        self.record += 1;
        Some(sample)
    }
}

impl<S> Stream for TarSamples<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    type Item = anyhow::Result<Sample>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(e) = this.error.take() {
                return Poll::Ready(Some(Err(e)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let (member, dot) = match this.pending.take() {
                Some(pending) => pending,
                None => match ready!(this.members.poll_member(cx)) {
                    Ok(Some(member)) => {
                        if is_meta(&member.name) {
                            continue;
                        }
                        let Some((key, _)) = base_plus_ext(&member.name) else {
                            continue;
                        };
                        let dot = key.len();
                        (member, dot)
                    }
                    Ok(None) => {
                        let end = this.members.offset();
                        return match this.finish_sample(end) {
                            Some(sample) => Poll::Ready(Some(Ok(sample))),
                            None => {
                                this.done = true;
                                Poll::Ready(None)
                            }
                        };
                    }
                    Err(e) => {
                        this.done = true;
                        this.members.clear();
                        // Damage in a member of another sample: the current one is whole.
                        let next = match &e {
                            ReadError::Tar(t) => t
                                .member
                                .as_deref()
                                .and_then(base_plus_ext)
                                .filter(|(key, _)| {
                                    this.current.as_ref().is_some_and(|(s, _)| s.key() != *key)
                                })
                                .map(|_| t.start),
                            ReadError::Io(_) => None,
                        };
                        if let Some(next) = next
                            && let Some(sample) = this.finish_sample(next)
                        {
                            this.error = Some(this.error(e));
                            return Poll::Ready(Some(Ok(sample)));
                        }
                        let e = this.error(e);
                        this.current = None;
                        return Poll::Ready(Some(Err(e)));
                    }
                },
            };
            let key = &member.name[..dot];
            match &mut this.current {
                Some((sample, _)) if sample.key() == key => {
                    let ext = member.name[dot + 1..].to_lowercase();
                    let duplicate = ext == "__key__" || ext == "__url__";
                    if duplicate || !sample.push(ext.clone(), member.data) {
                        let message = format!(
                            "duplicate file name in tar file: extension `{ext}` twice in sample \
                             key `{key}` (member `{}`)",
                            member.name
                        );
                        let e = this.data_loss(member.start, message, false);
                        this.done = true;
                        this.current = None;
                        this.members.clear();
                        return Poll::Ready(Some(Err(e)));
                    }
                }
                Some(_) => {
                    let next = member.start;
                    this.pending = Some((member, dot));
                    if let Some(sample) = this.finish_sample(next) {
                        return Poll::Ready(Some(Ok(sample)));
                    }
                }
                None => {
                    let mut sample = Sample::read(key.to_string(), Arc::clone(&this.name));
                    let ext = member.name[dot + 1..].to_lowercase();
                    if ext == "__key__" || ext == "__url__" {
                        let message = format!(
                            "duplicate file name in tar file: extension `{ext}` in sample key \
                             `{key}` (member `{}`)",
                            member.name
                        );
                        let e = this.data_loss(member.start, message, false);
                        this.done = true;
                        this.members.clear();
                        return Poll::Ready(Some(Err(e)));
                    }
                    sample.push(ext, member.data);
                    this.current = Some((sample, member.start));
                }
            }
        }
    }
}

/// Saved state: `[offset, sample]` where the next sample starts (the offset in the
/// decompressed stream for a compressed shard; `Start::ENDED` once it has ended); a sample's position is the offset of its
/// first member's first header.
impl<S> crate::engine::Resumable for TarSamples<S> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<crate::checkpoint::State> {
        // Ended (at the end of the shard, or at an error that ends it, passed on): nothing
        // more to read.
        let offset = if self.done && self.error.is_none() {
            Start::ENDED
        } else {
            self.last_end
        };
        Ok(crate::checkpoint::State::new("webdataset").words([offset, self.record]))
    }

    fn last_prov(&self) -> anyhow::Result<crate::checkpoint::Prov> {
        Ok(crate::checkpoint::Prov::at(self.last_start))
    }
}

/// The samples of WebDataset tar shards as a [`Dataset`] of [`Sample`]s (the `webdataset`
/// package's `WebDataset(urls)`, without its decoding: see [`Sample`]'s accessors).
///
/// Each shard is read streaming (never held whole), from local paths or any object-store URL
/// (see [`storage`](crate::storage)), `.tar.gz` / `.tgz` shards inflated on the way
/// (compression by extension by default). Shards are read in order, or
/// `num_parallel_reads` at once through [`parallel_interleave`](Dataset::parallel_interleave)
/// (one sample from each in turn: deterministic).
///
/// Samples are grouped as the Python package groups them: a member's key is its path up to
/// the first `.` of its file name, its extension the rest, lower-cased; consecutive members
/// with the same key make one sample, never across shards. Members it skips are skipped:
/// names without such a key (`README`, `.hidden`), metadata named `__...__` (e.g. `__key__`,
/// `__meta__/...`), and directories, links, devices and FIFOs (which must have no data).
/// GNU sparse files, multi-volume continuations and unknown member types are refused (the
/// Python package would skip what it cannot read as a file). Reading ends at the first
/// all-zero block (as Python's `tarfile`) or at the end of the file at a header boundary.
/// Headers are ustar with PAX extended headers (`path`, `size`) and GNU long names, as
/// Python's `tarfile`, GNU tar and bsdtar write them. The parser is streamload's own, small
/// and strict (see "Which crate does what" in ARCHITECTURE.md for why not an async tar crate).
///
/// # Errors
///
/// Damage ends the shard with an [`Error::DataLoss`] element naming the shard, the sample
/// (its index in the shard as `record`, its key in the message) and the byte offset of the
/// header concerned (in the decompressed stream for a `.tar.gz`); the next shard is read, so
/// [`ignore_errors`](Dataset::ignore_errors) skips the rest of a damaged shard. Damage is: a
/// header whose checksum fails ("bad tar header checksum"; when the first one fails in a
/// shard read uncompressed that starts as a GZIP stream, the message says to set
/// `.compression(Compression::Gzip)`), a header, member or padding cut short ("truncated tar
/// member (N of M bytes)"), a PAX `size` that disagrees with the header's, a member larger
/// than [`max_member_size`](Self::max_member_size) (refused before any of it is read), a
/// malformed number or PAX record, a name that is not UTF-8, an unsupported member type, a
/// directory or link with data, and an extension twice in one sample ("duplicate file name
/// in tar file", as the Python package's `ValueError`). A shard that cannot be opened is an
/// error element naming it.
///
/// ```
/// use streamload::format::{Sample, ShardWriter, WebDataset};
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let pattern = dir.path().join("train-%06d.tar");
/// let mut writer = ShardWriter::new(pattern.to_str().unwrap())?.max_samples(4);
/// for i in 0..10 {
///     let sample = Sample::new(format!("{i:05}"))
///         .with("cls", (i % 3).to_string())
///         .with("txt", format!("sample {i}"));
///     writer.write(&sample).await?;
/// }
/// let shards = writer.finish().await?;
/// assert_eq!(shards.len(), 3); // 4 + 4 + 2 samples
/// let labels: Vec<i64> = WebDataset::new(&shards)
///     .build()
///     .try_map(|sample| sample.cls())
///     .collect()
///     .await?;
/// assert_eq!(labels, [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct WebDataset {
    files: FileOptions,
    max_member_size: u64,
}

impl WebDataset {
    /// The samples of these shards, in this order.
    pub fn new<P: Into<Location>>(shards: impl IntoIterator<Item = P>) -> Self {
        WebDataset {
            files: FileOptions::new(shards)
                .compressed(Compression::Auto)
                .mapped(),
            max_member_size: tar::DEFAULT_MAX_MEMBER,
        }
    }

    /// The largest member accepted (default 2 GiB): a header declaring more is data loss,
    /// refused before anything is read or allocated. A member's bytes are gathered as they
    /// arrive, never allocated by the size its header declares.
    pub fn max_member_size(mut self, bytes: u64) -> Self {
        self.max_member_size = bytes;
        self
    }

    /// The dataset.
    pub fn build(self) -> Dataset<Sample> {
        let format = FileFormat::new(Tar {
            max_member_size: self.max_member_size,
        });
        read_files(self.files, format)
    }
}

/// The tar format: the bound on a member's size.
#[derive(Hash)]
struct Tar {
    max_member_size: u64,
}

impl Format for Tar {
    type Out = Sample;
    const STAGE: &'static str = "webdataset";

    fn decode(self: Arc<Self>, file: Opened, name: &str, start: Start) -> BoxStream<Sample> {
        let cursor = BlockCursor::new(file.blocks).mapped(file.mapped);
        let samples = TarSamples::new(cursor, name, self.max_member_size, !file.decompressed);
        Box::pin(samples.starting_at(start))
    }
}

file_options!(
    WebDataset,
    "shard",
    "default [`Compression::Auto`](crate::format::Compression::Auto): `.gz` and `.tgz` are \
     GZIP, anything else plain tar",
    memory_map
);
