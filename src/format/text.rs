//! Text files, one element per line (tf.data's `TextLineDataset`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use bytes::{Buf, Bytes};
use futures::stream::Stream;
use tokio::io::AsyncRead;
use tokio::sync::mpsc;

use super::files::{
    FileFormat, Format, Opened, Start, gone, identity_words, open_blocks, position, read_files,
    replay_files, restored_start, unchanged,
};
use super::options::{BlockOptions, FileOptions, file_options};
use crate::checkpoint::{Prov, State};
use crate::engine::Resumable;
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Source, Start as SourceStart};
use crate::error::Error;
use crate::runtime::{self, Task};
use crate::stats::StageCounters;
use crate::storage::blocks::{BlockCursor, Blocks, reader_blocks};
use crate::storage::compression::damage;
use crate::storage::{Identity, Location};

/// Lines longer than this are an error rather than a buffer that grows without bound.
const MAX_LINE: usize = 64 << 20;
/// Read size when splitting a plain `AsyncRead`.
const DEFAULT_BUFFER: usize = 256 * 1024;
/// The reader task hands lines over in chunks of this many lines at most...
const CHUNK_LINES: usize = 4096;
/// ... or of this many bytes of lines, whichever comes first.
const CHUNK_BYTES: usize = 1 << 20;
/// The stage's name in statistics and errors.
const STAGE: &str = "text_line";

/// The lines of one text stream, as TensorFlow's `TextLineDataset` reads them: lines end at
/// `\n`, and every `\r` is dropped (not only before a `\n`); a final line without a newline
/// is yielded unless nothing but `\r` is left of it; a final newline adds no empty line.
/// Lines are `Bytes` that share the read buffer (no copy per line, except for lines holding
/// a `\r` before their end). After an error the stream ends.
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
    /// Where the last line yielded starts, and where it ends (after its `\n`: its saved
    /// position; the cursor may be inside the next line).
    last_start: u64,
    last_end: u64,
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
            last_start: 0,
            last_end: 0,
        }
    }

    /// Reads from `start` on: the blocks begin at that (decompressed) offset, where line
    /// `start.record` begins.
    pub(crate) fn starting_at(mut self, start: Start) -> Self {
        self.cursor.offset = start.offset;
        self.line = start.record;
        self.last_start = start.offset;
        self.last_end = start.offset;
        self
    }

    /// The number (from 1) of the last line yielded.
    pub(crate) fn line_number(&self) -> u64 {
        self.line
    }

    /// A read error: a damaged compressed stream is data loss at the line being read (its
    /// offset in the decompressed stream); anything else an I/O error naming the file and
    /// the line (counted from 1).
    fn read_error(&self, e: std::io::Error) -> anyhow::Error {
        match damage(&e) {
            Some(message) => Error::DataLoss {
                path: self.name.to_string(),
                record: self.line,
                offset: self.cursor.offset,
                message,
                looks_compressed: None,
                skipped: None,
            }
            .into(),
            None => {
                let (name, line) = (&self.name, self.line + 1);
                anyhow::Error::new(e).context(format!("reading line {line} of {name}"))
            }
        }
    }

    fn poll_line(&mut self, cx: &mut Context<'_>) -> Poll<anyhow::Result<Option<Bytes>>> {
        let c = &mut self.cursor;
        loop {
            let newline = memchr::memchr(b'\n', &c.block);
            if c.carry.is_empty() {
                if let Some(end) = newline {
                    return Poll::Ready(Ok(Some(cut_from_block(c, end))));
                }
            } else if let Some(end) = newline {
                c.carry_from_block(end);
                c.block.advance(1);
                c.offset += 1;
                return Poll::Ready(Ok(Some(without_cr(c.take_carry()))));
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
                // The last line, without a newline: none when nothing but `\r` is left.
                Ok(false) if !c.carry.is_empty() => {
                    let line = without_cr(c.take_carry());
                    if line.is_empty() {
                        return Poll::Ready(Ok(None));
                    }
                    return Poll::Ready(Ok(Some(line)));
                }
                Ok(false) => return Poll::Ready(Ok(None)),
                Err(e) => return Poll::Ready(Err(self.read_error(e))),
            }
        }
    }
}

impl Lines<Blocks> {
    /// Moves the lines that lie whole in the current block into `gathered` until it is full:
    /// the common case, without a poll per line. The rest (a line that spans blocks, the
    /// next block, the end, an error) is left to `poll_next`.
    fn cut_block(&mut self, gathered: &mut Gathered) {
        let c = &mut self.cursor;
        if self.done || !c.carry.is_empty() {
            return;
        }
        while !gathered.is_full() {
            let Some(end) = memchr::memchr(b'\n', &c.block) else {
                break;
            };
            let line = cut_from_block(c, end);
            gathered.push(Ok(line), c.offset);
            self.line += 1;
        }
    }
}

/// Cuts the line that ends with the `\n` at `end` of the cursor's block (nothing of it in
/// `carry`), without its `\n` or any `\r`, and steps over the `\n`.
fn cut_from_block<S>(c: &mut BlockCursor<S>, end: usize) -> Bytes
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    let line = c.take_from_block(end);
    c.block.advance(1);
    c.offset += 1;
    without_cr(line)
}

/// The line without its `\r` bytes: TensorFlow's `ReadLine` drops every one of them, not
/// only those before the `\n` (a line without any, the usual case, is returned as it is).
fn without_cr(line: Bytes) -> Bytes {
    match memchr::memchr(b'\r', &line) {
        None => line,
        Some(first) if first + 1 == line.len() => line.slice(..first),
        Some(_) => line
            .iter()
            .copied()
            .filter(|&b| b != b'\r')
            .collect::<Vec<u8>>()
            .into(),
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
        // The line in progress starts here (`carry` is counted once it is taken).
        let start = this.cursor.offset;
        let next = ready!(this.poll_line(cx));
        if !matches!(next, Ok(None)) {
            this.last_start = start;
        }
        match &next {
            Ok(Some(_)) => {
                this.line += 1;
                this.last_end = this.cursor.offset;
            }
            _ => {
                this.done = true;
                this.cursor.clear();
            }
        }
        Poll::Ready(next.transpose())
    }
}

/// Saved state: `[offset, line]` after the last line yielded (the offset in the
/// decompressed stream for a compressed file; `Start::ENDED` once the file has ended); a
/// line's position is its start offset.
impl<S> Resumable for Lines<S> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        // Ended (at the end of the file, or at an error that ends it): nothing more to read.
        let offset = if self.done {
            Start::ENDED
        } else {
            self.last_end
        };
        Ok(State::new(STAGE).words([offset, self.line]))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        Ok(Prov::at(self.last_start))
    }
}

/// The lines of text files as a [`Dataset`] of `Bytes` (tf.data's `TextLineDataset`).
///
/// Files are read in order, or `num_parallel_reads` at once (one line from each in turn).
/// Lines end at `\n`, which is not part of them, and every `\r` is dropped, as TensorFlow's
/// reader does (so `\r\n` ends a line, and a lone `\r` is not kept); a final newline adds no
/// empty line, nor does a last line of nothing but `\r`. Lines under 64 KiB are copied out
/// of the read blocks into buffers of their own (larger ones are slices of their block), so
/// lines held downstream (a shuffle buffer) keep no block alive.
///
/// # Reading in order
///
/// Without `num_parallel_reads`, a task of the epoch's own (spawned at the first poll) reads
/// the files one after the other, cuts their lines and hands them over in chunks of up to
/// 4,096 lines or 1 MiB: reading and cutting lines runs beside the stages after it, and the
/// consumer is woken once per chunk, not per line. A chunk is handed over early when the
/// file has nothing more ready (a slow store), so lines are never held back waiting.
/// With `num_parallel_reads`, each file is cut by its reader's task inside the interleave.
///
/// # Errors
///
/// A file that cannot be opened or read, or a line longer than 64 MiB, is an error element
/// naming the file (and the line); a damaged compressed stream is an
/// [`Error::DataLoss`](crate::Error) ("GZIP inflate() failed (...)", TensorFlow's
/// `DataLossError`) naming the file, the line being read (0-based) and its offset in the
/// decompressed text. The rest of that file is skipped and the next file is read, so
/// [`ignore_errors`](Dataset::ignore_errors) keeps every other line.
/// Polled outside a tokio runtime, the epoch yields [`Error::NoRuntime`](crate::Error).
///
/// # Cancellation and memory
///
/// Dropping the epoch stops its reader task. The task holds at most three chunks ahead of
/// the consumer (one in the hand-over, one being gathered or sent, the consumer's own),
/// besides the blocks it reads ahead; the report shows them as the stage's buffer.
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
    files: FileOptions,
}

impl TextLineDataset {
    /// The lines of these files, in this order.
    pub fn new<P: Into<Location>>(files: impl IntoIterator<Item = P>) -> Self {
        TextLineDataset {
            files: FileOptions::new(files),
        }
    }

    /// The dataset (see [`TextLineDataset`] for how files are read).
    pub fn build(self) -> Dataset<Bytes> {
        let format = FileFormat::new(Text);
        if self.files.num_parallel_reads.is_some() {
            return read_files(self.files, format);
        }
        Dataset::from_source(InOrder {
            files: self.files.files.into(),
            format,
            blocks: self.files.blocks,
        })
    }
}

/// The lines of the files in order, read ahead by a task of its own.
struct InOrder {
    files: Arc<[Location]>,
    format: FileFormat<Bytes>,
    blocks: BlockOptions,
}

// Keyed as `read_files` keys its readers: the format with its shared options, and the
// files by their count (a changed file is refused by its identity).
impl std::hash::Hash for InOrder {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.format.key(&self.blocks).hash(state);
        self.files.len().hash(state);
    }
}

impl Source for InOrder {
    type Out = Bytes;
    type Stream = crate::engine::BoxStream<Bytes>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }

    /// The start is the context's (the ledger of files is read beside it).
    fn open(&self, ctx: &Ctx, _: SourceStart<'_>) -> anyhow::Result<Self::Stream> {
        ctx.gauge();
        let stats = ctx.stats_handle();
        if let Some(provs) = ctx.replaying() {
            let (files, format) = (Arc::clone(&self.files), self.format.clone());
            let ledger = ctx.files().clone();
            return Ok(replay_files(
                files,
                format,
                self.blocks,
                Arc::clone(provs),
                stats,
                ledger,
            ));
        }
        let (first, start, expected) = match ctx.restoring().map(restored_in_order) {
            Some(Ok(restored)) => restored,
            Some(Err(e)) => return Ok(crate::engine::error_stream(e)),
            None => (0, Start::default(), None),
        };
        if let Some(stats) = &stats {
            stats.set_buffer_limit(3 * CHUNK_LINES);
        }
        let reader = ReadLines {
            ledger: ctx.files().clone(),
            files: Arc::clone(&self.files),
            first,
            start,
            expected,
            blocks: self.blocks,
            stats,
        };
        Ok(Box::pin(LineChunks::new(reader)))
    }
}

/// The text line format: no parameters of its own.
#[derive(Hash)]
pub(crate) struct Text;

impl Format for Text {
    type Out = Bytes;
    const STAGE: &'static str = STAGE;

    fn decode(self: Arc<Self>, file: Opened, name: &str, start: Start) -> BoxStream<Bytes> {
        Box::pin(Lines::new(file.blocks, name).starting_at(start))
    }
}

file_options!(TextLineDataset, "file");

/// Where a [`TextLineDataset`] read in order goes on: `[file, offset, line]` then the file's
/// identity (see [`LineChunks`]'s state).
fn restored_in_order(state: &State) -> anyhow::Result<(usize, Start, Option<Identity>)> {
    let file = usize::try_from(state.word(0)?).map_err(|_| state.malformed())?;
    let rest = State {
        words: state.words.get(1..).unwrap_or_default().to_vec(),
        ..State::new(STAGE)
    };
    let (start, identity) = restored_start(&rest)?;
    Ok((file, start, identity))
}

/// What the reader task of a [`TextLineDataset`] read in order does: the files' lines, in
/// chunks, from file `first` at `start` (a restored reader's position) on.
struct ReadLines {
    /// The files the epoch opened (see `checkpoint::opened`).
    ledger: crate::checkpoint::opened::Ledger,
    files: Arc<[Location]>,
    first: usize,
    start: Start,
    /// What file `first` was at the checkpoint restored from.
    expected: Option<Identity>,
    /// How each file is read.
    blocks: BlockOptions,
    stats: Option<Arc<StageCounters>>,
}

/// Lines handed over at once, each with the offset where it ends (after its `\n`), and
/// where the lines of each file begin.
struct Chunk {
    lines: Vec<(anyhow::Result<Bytes>, u64)>,
    files: Vec<FileMark>,
}

/// The lines of chunk from `at` on come from file `file` (of the dataset's list), which
/// was read from `start` and was `identity` when opened.
struct FileMark {
    at: usize,
    file: usize,
    start: Start,
    identity: Option<Identity>,
}

/// The lines gathered for the next hand-over.
struct Gathered {
    chunk: Chunk,
    /// Their bytes.
    bytes: usize,
}

impl Gathered {
    fn new() -> Self {
        Gathered {
            chunk: Self::empty(),
            bytes: 0,
        }
    }

    fn empty() -> Chunk {
        Chunk {
            lines: Vec::with_capacity(CHUNK_LINES),
            files: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.chunk.lines.is_empty()
    }

    fn is_full(&self) -> bool {
        self.chunk.lines.len() >= CHUNK_LINES || self.bytes >= CHUNK_BYTES
    }

    /// A line (or an error in its place) that ends at `end`.
    fn push(&mut self, line: anyhow::Result<Bytes>, end: u64) {
        self.bytes += line.as_ref().map_or(0, Bytes::len);
        self.chunk.lines.push((line, end));
    }

    /// The lines pushed from now on come from `file`.
    fn file(&mut self, file: usize, start: Start, identity: Option<Identity>) {
        let at = self.chunk.lines.len();
        self.chunk.files.push(FileMark {
            at,
            file,
            start,
            identity,
        });
    }

    /// The lines gathered, leaving room for the next chunk.
    fn take(&mut self) -> Chunk {
        self.bytes = 0;
        std::mem::replace(&mut self.chunk, Self::empty())
    }
}

impl ReadLines {
    /// Reads every file in order, sending its lines in chunks; returns early when the
    /// consumer has gone. An error (opening, reading or decompressing a file, a line too
    /// long) is sent in its line's place and ends that file; the next file is read after it.
    async fn run(self, tx: mpsc::Sender<Chunk>) {
        let mut gathered = Gathered::new();
        for (i, path) in self.files.iter().enumerate().skip(self.first) {
            let (start, expected) = if i == self.first {
                (self.start, self.expected)
            } else {
                (Start::default(), None)
            };
            if start.offset == Start::ENDED {
                // Restored after the error that ended it: nothing more of it.
                continue;
            }
            let expected = expected.or_else(|| self.ledger.expected(path));
            let name = path.to_string();
            let stats = self.stats.clone();
            let mut open = std::pin::pin!(open_blocks(path, self.blocks, stats, start.offset));
            let opened = match futures::poll!(open.as_mut()) {
                Poll::Ready(opened) => opened,
                Poll::Pending => {
                    // Opening takes a while (a round trip): hand over the lines gathered
                    // so far rather than hold them back meanwhile.
                    if !gathered.is_empty() && self.send(&tx, gathered.take()).await.is_err() {
                        return;
                    }
                    open.await
                }
            };
            let opened = match opened {
                Ok(opened) => unchanged(opened, expected, &name),
                // A file the checkpoint had open cannot be resumed if it is gone.
                Err(e) if expected.is_some() => Err(gone(&name, &e)),
                Err(e) => Err(e.context(format!("opening {name}"))),
            };
            let opened = match opened {
                Ok(opened) => opened,
                Err(e) => {
                    gathered.file(i, start, expected);
                    gathered.push(Err(e), start.offset);
                    continue;
                }
            };
            self.ledger.opened(path, opened.identity);
            gathered.file(i, start, opened.identity);
            let mut lines = Lines::new(opened.blocks, &name).starting_at(start);
            loop {
                match std::future::poll_fn(|cx| fill(&mut lines, &mut gathered, cx)).await {
                    // The file has ended: go on gathering from the next one.
                    Filled::Ended => break,
                    // Full, or nothing more is ready now: hand over what there is.
                    Filled::Full | Filled::Waiting => {
                        if self.send(&tx, gathered.take()).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
        if !gathered.is_empty() {
            // Whether the consumer is still there or not, this is the end.
            let _ = self.send(&tx, gathered.take()).await;
        }
    }

    /// Sends `chunk`, counting it in the stage's buffer and any wait for room.
    async fn send(&self, tx: &mpsc::Sender<Chunk>, chunk: Chunk) -> Result<(), ()> {
        let full_since = match &self.stats {
            Some(stats) => {
                stats.add_buffered(chunk.lines.len());
                (tx.capacity() == 0).then(Instant::now)
            }
            None => None,
        };
        tx.send(chunk).await.map_err(|_| ())?;
        if let (Some(since), Some(stats)) = (full_since, &self.stats) {
            stats.add_full_wait(since.elapsed());
        }
        Ok(())
    }
}

/// How [`fill`] stopped.
enum Filled {
    /// The chunk holds [`CHUNK_LINES`] lines or [`CHUNK_BYTES`] bytes.
    Full,
    /// The chunk has lines and the file has no more ready now.
    Waiting,
    /// The file has ended (after its last line, or after an error).
    Ended,
}

/// Moves the lines `lines` has ready into `gathered` until it is full; waits (`Pending`)
/// only while nothing is gathered.
fn fill(lines: &mut Lines<Blocks>, gathered: &mut Gathered, cx: &mut Context<'_>) -> Poll<Filled> {
    loop {
        lines.cut_block(gathered);
        if gathered.is_full() {
            return Poll::Ready(Filled::Full);
        }
        match Pin::new(&mut *lines).poll_next(cx) {
            Poll::Ready(Some(line)) => gathered.push(line, lines.last_end),
            Poll::Ready(None) => return Poll::Ready(Filled::Ended),
            Poll::Pending if gathered.is_empty() => return Poll::Pending,
            Poll::Pending => return Poll::Ready(Filled::Waiting),
        }
    }
}

/// The consumer's side of a [`TextLineDataset`] read in order: starts the reader task at
/// the first poll, then yields the lines of the chunks it hands over.
///
/// Saved state: `[file, offset, line]` after the last line yielded (the file's index in the
/// dataset's list, the offset after that line or `Start::ENDED` after the error that ended
/// the file, the lines of that file yielded), then the
/// file's size and version; a line's position is `[start offset, digest of the file's
/// identity, file]` (the layout of a `flat_map` over the files).
struct LineChunks {
    /// The reader, until its task is started.
    reader: Option<ReadLines>,
    rx: Option<mpsc::Receiver<Chunk>>,
    /// `Some` until the task has been joined.
    task: Option<Task<()>>,
    current: std::vec::IntoIter<(anyhow::Result<Bytes>, u64)>,
    /// Where the current chunk's files begin, and the next of them.
    files: std::vec::IntoIter<FileMark>,
    next_file: Option<FileMark>,
    /// The index in the current chunk of the next line.
    at: usize,
    stats: Option<Arc<StageCounters>>,
    /// The position: the file of the last line yielded, its identity, where that line
    /// starts, where the next one starts, and that file's lines yielded.
    file: usize,
    identity: Option<Identity>,
    /// The dataset's files.
    paths: Arc<[Location]>,
    last_start: u64,
    offset: u64,
    record: u64,
}

impl LineChunks {
    fn new(reader: ReadLines) -> Self {
        LineChunks {
            stats: reader.stats.clone(),
            file: reader.first,
            identity: reader.expected,
            paths: Arc::clone(&reader.files),
            last_start: reader.start.offset,
            offset: reader.start.offset,
            record: reader.start.record,
            reader: Some(reader),
            rx: None,
            task: None,
            current: Vec::new().into_iter(),
            files: Vec::new().into_iter(),
            next_file: None,
            at: 0,
        }
    }

    /// Starts the reader task: one chunk in the channel, one being gathered or sent.
    fn start(&mut self, reader: ReadLines) -> anyhow::Result<()> {
        let (tx, rx) = mpsc::channel(1);
        self.task = Some(runtime::spawn(STAGE, reader.run(tx))?);
        self.rx = Some(rx);
        Ok(())
    }

    /// Moves the position to the file of the line at `at`, when one begins there.
    #[inline]
    fn enter_file(&mut self) {
        while let Some(mark) = self.next_file.take_if(|mark| mark.at == self.at) {
            self.enter(mark);
        }
    }

    /// Moves the position to the start of `mark`'s file.
    fn enter(&mut self, mark: FileMark) {
        self.file = mark.file;
        self.identity = mark.identity;
        self.offset = mark.start.offset;
        self.record = mark.start.record;
        self.next_file = self.files.next();
    }
}

impl Stream for LineChunks {
    type Item = anyhow::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some((line, end)) = this.current.next() {
                this.enter_file();
                this.at += 1;
                this.last_start = this.offset;
                if line.is_ok() {
                    this.offset = end;
                    this.record += 1;
                } else {
                    // An error ends its file.
                    this.offset = Start::ENDED;
                }
                return Poll::Ready(Some(line));
            }
            if let Some(reader) = this.reader.take()
                && let Err(e) = this.start(reader)
            {
                return Poll::Ready(Some(Err(e)));
            }
            let Some(rx) = this.rx.as_mut() else {
                return Poll::Ready(None);
            };
            if let Some(chunk) = ready!(rx.poll_recv(cx)) {
                if let Some(stats) = &this.stats {
                    stats.sub_buffered(chunk.lines.len());
                }
                // Files whose lines had not begun in the last chunk begin before this one's.
                while let Some(mark) = this.next_file.take() {
                    this.enter(mark);
                }
                this.current = chunk.lines.into_iter();
                this.files = chunk.files.into_iter();
                this.next_file = this.files.next();
                this.at = 0;
                continue;
            }
            // The task ended: cleanly, or by a panic that must not pass for an end.
            let Some(task) = this.task.as_mut() else {
                this.rx = None;
                return Poll::Ready(None);
            };
            let failed = ready!(crate::ops::prefetch::poll_task_end(task, STAGE, cx));
            this.task = None;
            this.rx = None;
            return Poll::Ready(failed.map(Err));
        }
    }
}

impl Resumable for LineChunks {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        // Before its first line from the file, what a local file is now (see `FileReader`).
        let identity = self.identity.or_else(|| {
            self.paths
                .get(self.file)
                .and_then(crate::storage::identity_now)
        });
        Ok(State::new(STAGE)
            .words([self.file as u64, self.offset, self.record])
            .words(identity_words(identity)))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        position(self.last_start, self.identity)?.push(self.file as u64)
    }
}
