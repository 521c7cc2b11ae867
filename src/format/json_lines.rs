//! JSON lines: one JSON value per line of text files.

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use serde::de::DeserializeOwned;

use super::files::{FileFormat, Format, Opened, Start, read_files};
use super::options::{FileOptions, file_options};
use super::text::Lines;
use crate::checkpoint::{Prov, State};
use crate::engine::Resumable;
use crate::engine::{BoxStream, Dataset};
use crate::error::Error;
use crate::storage::Location;

/// The stage's name in statistics, errors and checkpoints.
const STAGE: &str = "json_lines";

/// The lines of JSON-lines files (`.jsonl`, `.ndjson`) as a [`Dataset`] of
/// [`serde_json::Value`]s ([`build`](Self::build)) or of a type of yours that implements
/// [`Deserialize`](serde::Deserialize) ([`build_as`](Self::build_as)). Files are local
/// paths or URLs, plain or compressed ([`Compression::Auto`](super::Compression::Auto) goes
/// by the `.gz` extension).
///
/// Lines are split as [`TextLineDataset`](super::TextLineDataset) splits them (`\n`, and
/// `\r` dropped); a line of nothing but spaces or tabs is skipped (as pandas'
/// `read_json(lines=True)` and Hugging Face `datasets` do), any other is one value.
/// Checkpoints resume at the line after the last value yielded, as text lines do.
///
/// # Errors
///
/// A line that is not valid JSON (or not of the type asked for) is an error element naming
/// the file, the line number (from 1), the column in the line and serde's reason
/// (`train.jsonl: line 4, column 22: invalid type: string "x", expected u8`), an
/// [`Error::InvalidArgument`]; the lines after it follow, so
/// [`ignore_errors`](Dataset::ignore_errors) skips just the bad lines. A file that cannot be
/// opened or read, a damaged compressed stream or a line longer than 64 MiB is an error that
/// ends that file, as for [`TextLineDataset`](super::TextLineDataset).
///
/// ```
/// use streamload::format::JsonLinesDataset;
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("train.jsonl");
/// std::fs::write(&path, "{\"text\": \"hi\", \"label\": 1}\n\n{\"text\": \"there\", \"label\": 0}\n")?;
///
/// let values = JsonLinesDataset::new([&path]).build().collect().await?;
/// assert_eq!(values[1]["text"], "there");
///
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct Row {
///     text: String,
///     label: u8,
/// }
/// let rows = JsonLinesDataset::new([&path]).build_as::<Row>().collect().await?;
/// assert_eq!(rows[0], Row { text: "hi".into(), label: 1 });
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct JsonLinesDataset {
    files: FileOptions,
}

impl JsonLinesDataset {
    /// The lines of these files, in this order.
    pub fn new<P: Into<Location>>(files: impl IntoIterator<Item = P>) -> Self {
        JsonLinesDataset {
            files: FileOptions::new(files),
        }
    }

    /// The values, as [`serde_json::Value`]s.
    pub fn build(self) -> Dataset<serde_json::Value> {
        self.build_as()
    }

    /// The values, each deserialized as a `T` (a line that is valid JSON but not a `T` is
    /// an error naming the file and the line).
    pub fn build_as<T: DeserializeOwned + Send + 'static>(self) -> Dataset<T> {
        let format = FileFormat::new(Json::<T>(PhantomData));
        read_files(self.files, format)
    }
}

/// The JSON lines format, its lines read as `T`s: the type decides which are errors, so it
/// is keyed by its name.
struct Json<T>(PhantomData<fn() -> T>);

impl<T> std::hash::Hash for Json<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::any::type_name::<T>().hash(state);
    }
}

impl<T: DeserializeOwned + Send + 'static> Format for Json<T> {
    type Out = T;
    const STAGE: &'static str = STAGE;

    fn decode(self: Arc<Self>, file: Opened, name: &str, start: Start) -> BoxStream<T> {
        Box::pin(JsonLines::<_, T> {
            lines: Lines::new(file.blocks, name).starting_at(start),
            name: name.into(),
            _values: PhantomData,
        })
    }
}

file_options!(JsonLinesDataset, "file");

/// One file's values: its lines, each parsed.
#[must_use = "streams do nothing unless polled"]
struct JsonLines<S, T> {
    lines: Lines<S>,
    name: Arc<str>,
    _values: PhantomData<fn() -> T>,
}

impl<S, T> Unpin for JsonLines<S, T> {}

impl<S, T> Stream for JsonLines<S, T>
where
    S: Stream<Item = std::io::Result<bytes::Bytes>> + Unpin,
    T: DeserializeOwned,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let line = match ready!(Pin::new(&mut this.lines).poll_next(cx)) {
                Some(Ok(line)) => line,
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            };
            if line.iter().all(|b| matches!(b, b' ' | b'\t')) {
                continue;
            }
            let value = serde_json::from_slice::<T>(&line)
                .map_err(|e| json_error(&this.name, this.lines.line_number(), &e));
            return Poll::Ready(Some(value));
        }
    }
}

/// A line's error: the file, the line (from 1) and the column in it (serde's own position,
/// "at line 1 column c" of the one line it parsed, left out), then what is wrong: the JSON,
/// or (valid JSON) serde's reason it is not of the type asked for. An
/// [`Error::InvalidArgument`], as a CSV field that is not of its column's type.
fn json_error(file: &str, line: u64, e: &serde_json::Error) -> anyhow::Error {
    let text = e.to_string();
    let at = format!(" at line {} column {}", e.line(), e.column());
    let (reason, column) = match text.strip_suffix(&at) {
        Some(reason) => (reason, format!(", column {}", e.column())),
        None => (text.as_str(), String::new()),
    };
    let what = if e.is_data() { "" } else { "not valid JSON: " };
    Error::InvalidArgument(format!("{file}: line {line}{column}: {what}{reason}")).into()
}

/// Saved state and positions: the lines' (`[offset, line]` after the last value yielded; a
/// value's position is its line's start offset).
impl<S: Unpin, T> Resumable for JsonLines<S, T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let mut state = Pin::new(&mut self.get_mut().lines).save()?;
        state.stage = STAGE.into();
        Ok(state)
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.lines.last_prov()
    }
}
