//! CSV files (`tf.data.experimental.CsvDataset`): typed columns with defaults, a header,
//! quoting, a delimiter, an NA value and column selection, parsed by TensorFlow's own rules
//! (its CSV reader is not RFC 4180's: a record ends at `\n`, `\r` or `\r\n`, a quote inside
//! an unquoted field and text after a closing quote are errors, numbers are read as `absl`
//! reads them), so that every file gives what TensorFlow gives, errors included.

use crate::storage::Location;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures::stream::Stream;
use tokio::io::AsyncRead;

use super::files::{FileFormat, Format, Opened, Start, read_files};
use super::options::{FileOptions, file_options};
use crate::Error;
use crate::checkpoint::{Prov, State};
use crate::engine::Resumable;
use crate::engine::{BoxStream, Dataset, Unkeyed};
use crate::storage::compression::damage;

/// One parsed CSV field.
#[derive(Clone, Debug, PartialEq)]
pub enum Field {
    /// `tf.int32`.
    Int32(i32),
    /// `tf.int64`.
    Int64(i64),
    /// `tf.float32`.
    Float32(f32),
    /// `tf.float64`.
    Float64(f64),
    /// `tf.string`.
    String(Bytes),
}

impl Field {
    /// The value as `i64`, for integer fields.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Field::Int32(v) => Some(i64::from(*v)),
            Field::Int64(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as `f64`, for float fields.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Field::Float32(v) => Some(f64::from(*v)),
            Field::Float64(v) => Some(*v),
            _ => None,
        }
    }

    /// The bytes of a string field.
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self {
            Field::String(v) => Some(v),
            _ => None,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Field::Int32(_) => "int32",
            Field::Int64(_) => "int64",
            Field::Float32(_) => "float",
            Field::Float64(_) => "double",
            Field::String(_) => "string",
        }
    }
}

/// A column's type and default: TensorFlow's `record_defaults` entry. A column without a
/// default is required: an empty or NA field in it is an error.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    kind: Field,
    default: Option<Field>,
}

impl Column {
    /// A required `int32` column.
    pub fn int32() -> Column {
        Column::of(Field::Int32(0))
    }
    /// A required `int64` column.
    pub fn int64() -> Column {
        Column::of(Field::Int64(0))
    }
    /// A required `float32` column.
    pub fn float32() -> Column {
        Column::of(Field::Float32(0.0))
    }
    /// A required `float64` column.
    pub fn float64() -> Column {
        Column::of(Field::Float64(0.0))
    }
    /// A required `string` column.
    pub fn string() -> Column {
        Column::of(Field::String(Bytes::new()))
    }

    fn of(kind: Field) -> Column {
        Column {
            kind,
            default: None,
        }
    }

    /// An optional column of `default`'s type, `default` filling empty and NA fields
    /// (`record_defaults=[[0]]` in TensorFlow).
    pub fn with_default(default: Field) -> Column {
        Column {
            kind: default.clone(),
            default: Some(default),
        }
    }

    /// The field's value, as TensorFlow reads numbers (`absl::SimpleAtoi` / `SimpleAtof`:
    /// ASCII whitespace around, a sign, `inf`/`nan`, hexadecimal floats).
    fn parse(&self, text: &[u8]) -> Option<Field> {
        let number = || std::str::from_utf8(text.trim_ascii()).ok();
        Some(match self.kind {
            Field::Int32(_) => Field::Int32(number()?.parse().ok()?),
            Field::Int64(_) => Field::Int64(number()?.parse().ok()?),
            Field::Float32(_) => Field::Float32(parse_float(number()?)? as f32),
            Field::Float64(_) => Field::Float64(parse_float(number()?)?),
            Field::String(_) => Field::String(Bytes::copy_from_slice(text)),
        })
    }
}

/// A float as `absl::SimpleAtof` reads one: decimal (Rust's grammar, which takes `inf`,
/// `infinity` and `nan` in any case), `nan(...)`, or hexadecimal (`0x1.8p3`).
fn parse_float(text: &str) -> Option<f64> {
    if let Ok(x) = text.parse::<f64>() {
        return Some(x);
    }
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    // `nan(...)`, with any characters C's `strtod` allows between the parentheses.
    if rest.len() > 4
        && rest[..4].eq_ignore_ascii_case("nan(")
        && rest.ends_with(')')
        && rest[4..rest.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Some(if negative { -f64::NAN } else { f64::NAN });
    }
    let hex = rest
        .strip_prefix("0x")
        .or_else(|| rest.strip_prefix("0X"))?;
    let (mantissa, exponent) = match hex.find(['p', 'P']) {
        Some(i) => (&hex[..i], hex[i + 1..].parse::<i32>().ok()?),
        None => (hex, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for c in whole.chars() {
        value = value * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in fraction.chars() {
        value += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    let value = value * 2f64.powi(exponent);
    Some(if negative { -value } else { value })
}

/// The CSV format's parameters (the read buffer's size only sets how much is read at once).
#[derive(Debug)]
struct Config {
    columns: Vec<Column>,
    header: bool,
    delimiter: u8,
    quoting: bool,
    na_value: Vec<u8>,
    select: Option<Vec<usize>>,
    /// Columns left out (ascending): every other field is an output column.
    exclude: Vec<usize>,
    buffer_size: Unkeyed<usize>,
}

impl std::hash::Hash for Config {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Every field named: one added later does not build until it is keyed or left out.
        let Config {
            columns,
            header,
            delimiter,
            quoting,
            na_value,
            select,
            exclude,
            buffer_size: _,
        } = self;
        // The columns' defaults hold floats, which have no `Hash`: keyed by how they print.
        format!("{columns:?}").hash(state);
        (header, delimiter, quoting, na_value, select, exclude).hash(state);
    }
}

impl Format for Config {
    type Out = Vec<Field>;
    const STAGE: &'static str = STAGE;

    fn decode(self: Arc<Self>, file: Opened, name: &str, start: Start) -> BoxStream<Vec<Field>> {
        let compressed = file.decompressed;
        let reader = tokio_util::io::StreamReader::new(file.blocks);
        let buffer_size = *self.buffer_size;
        Box::pin(csv_rows(reader, name, self, buffer_size, compressed, start))
    }
}

/// Records longer than this are an error rather than a buffer that grows without bound.
const MAX_RECORD: usize = 64 << 20;

/// The rows of one stream (`name` is used in errors), read from `start` on (a restored
/// reader's position; the header, if any, is skipped only at offset 0): each record's
/// fields, or its error (the next record is read after it, as TensorFlow reads on). A header
/// that cannot be read ends the stream with TensorFlow's "Can't read header of file".
/// `compressed` says whether `reader` decompresses, so that its failures are data loss.
fn csv_rows<R>(
    reader: R,
    name: &str,
    config: Arc<Config>,
    buffer_size: usize,
    compressed: bool,
    start: Start,
) -> Reader<R>
where
    R: AsyncRead + Send + Unpin + 'static,
{
    let header = config.header && start.offset == 0;
    Reader {
        reader,
        buffer: BytesMut::new(),
        eof: false,
        reading: false,
        header,
        record: RecordParser::new(header),
        index: start.record,
        offset: start.offset,
        last_start: start.offset,
        done: false,
        name: name.into(),
        config,
        buffer_size,
        compressed,
    }
}

/// One file's reader: the bytes read and not yet parsed.
struct Reader<R> {
    reader: R,
    /// The bytes of the record being parsed, from its first, and any read after it.
    buffer: BytesMut,
    eof: bool,
    /// The record at the start of `buffer` needs more bytes (a read was pending).
    reading: bool,
    /// The header is still to be skipped.
    header: bool,
    /// How far the record at the start of `buffer` is parsed: kept across reads, so each
    /// byte is scanned once however many reads a long record takes.
    record: RecordParser,
    /// Records yielded so far.
    index: u64,
    /// The offset of `buffer`'s start in the (decompressed) stream: where the record after
    /// the last one yielded starts.
    offset: u64,
    /// Where the last record yielded starts.
    last_start: u64,
    done: bool,
    name: Arc<str>,
    config: Arc<Config>,
    buffer_size: usize,
    /// The reader decompresses: its errors are data loss.
    compressed: bool,
}

impl<R: AsyncRead + Unpin> Stream for Reader<R> {
    type Item = anyhow::Result<Vec<Field>>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::{Poll, ready};
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        loop {
            if !this.reading {
                let header = this.header;
                match this.record.parse(&this.buffer, this.eof, &this.config) {
                    Parsed::Record(consumed, row) => {
                        let start = this.offset;
                        this.buffer.advance(consumed);
                        this.offset += consumed as u64;
                        this.header = false;
                        this.record = RecordParser::new(false);
                        if header {
                            if row.is_err() {
                                this.done = true;
                                let e = this.invalid("Can't read header of file".into());
                                return Poll::Ready(Some(Err(e)));
                            }
                            continue;
                        }
                        let index = this.index;
                        this.index += 1;
                        this.last_start = start;
                        return Poll::Ready(Some(row.map_err(|message| {
                            this.invalid(format!("record {index}: {message}"))
                        })));
                    }
                    Parsed::End => {
                        this.done = true;
                        if header {
                            let e = this.invalid("Can't read header of file".into());
                            return Poll::Ready(Some(Err(e)));
                        }
                        return Poll::Ready(None);
                    }
                    Parsed::NeedMore => {
                        if this.buffer.len() > MAX_RECORD {
                            this.done = true;
                            let (name, index) = (&this.name, this.index);
                            return Poll::Ready(Some(Err(anyhow::anyhow!(
                                "{name}: record {index} is longer than {MAX_RECORD} bytes"
                            ))));
                        }
                        this.buffer.reserve(this.buffer_size);
                        this.reading = true;
                    }
                }
            }
            let read = ready!(tokio_util::io::poll_read_buf(
                std::pin::Pin::new(&mut this.reader),
                cx,
                &mut this.buffer
            ));
            this.reading = false;
            match read {
                Ok(0) => this.eof = true,
                Ok(_) => {}
                Err(e) => {
                    this.done = true;
                    this.last_start = this.offset;
                    return Poll::Ready(Some(Err(this.read_error(e))));
                }
            }
        }
    }
}

/// Saved state: `[offset, record]` after the last record yielded (the offset in the
/// decompressed stream for a compressed file; `Start::ENDED` once the file has ended); a
/// record's position is its start offset.
impl<R> Resumable for Reader<R> {
    fn save(self: std::pin::Pin<&mut Self>) -> anyhow::Result<State> {
        // Ended (at the end of the file, or at an error that ends it): nothing more to read.
        let offset = if self.done { Start::ENDED } else { self.offset };
        Ok(State::new(STAGE).words([offset, self.index]))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        Ok(Prov::at(self.last_start))
    }
}

/// The stage's name.
const STAGE: &str = "csv";

impl<R> Reader<R> {
    fn invalid(&self, message: String) -> anyhow::Error {
        Error::InvalidArgument(format!("{}: {message}", self.name)).into()
    }

    /// A failed read: data loss at the record being read when the decompressor failed (a
    /// damaged or truncated compressed stream; the offset is the record's start in the
    /// decompressed stream), an I/O error naming the file and the record otherwise.
    fn read_error(&self, e: std::io::Error) -> anyhow::Error {
        if let Some(message) = damage(&e).filter(|_| self.compressed) {
            return Error::DataLoss {
                path: self.name.to_string(),
                record: self.index,
                offset: self.offset,
                message,
                looks_compressed: None,
                skipped: None,
            }
            .into();
        }
        let index = self.index;
        anyhow::Error::new(e).context(format!("reading record {index} of {}", self.name))
    }
}

/// What [`RecordParser::parse`] found at the start of the buffer.
enum Parsed {
    /// A record of this many bytes (its line break included): its fields, or TensorFlow's
    /// error for it.
    Record(usize, Result<Vec<Field>, String>),
    /// The buffer ends inside the record, and more may come.
    NeedMore,
    /// No more records.
    End,
}

/// Ran out of buffered bytes before the end of the file.
struct More;

/// How a field ended.
enum FieldEnd {
    /// At the delimiter: another field follows.
    Delimiter,
    /// At `\n` or the end of the file: the record ends.
    Last,
    /// At `\r`: the record ends, with the `\n` after it if there is one.
    CarriageReturn,
}

/// Where the parse of a record stands.
#[derive(Clone, Copy)]
enum Step {
    /// At the start of a field.
    Field,
    /// Inside an unquoted field that began at `start`.
    Unquoted { start: usize, include: bool },
    /// Inside a quoted field whose opening quote is at `start`.
    Quoted {
        start: usize,
        include: bool,
        /// A quote neither doubled nor closing the field was met: the field's error,
        /// unless the file ends before the field does (that error replaces it, as in
        /// TensorFlow).
        stray_quote: bool,
    },
    /// The record ended at a `\r`; a `\n` right after it belongs to it.
    AfterCarriageReturn,
    /// The record is whole.
    Done,
}

/// Parses a record by TensorFlow's `CsvDataset` rules (its `ReadRecord`, `ParseQuotedField`,
/// `ParseUnquotedField`, `FieldToOutput`): fields end at the delimiter, a record at `\n`,
/// `\r` or `\r\n`; the record is read to its end even after an error, and the first error
/// is its result. A header is parsed and its fields dropped.
///
/// The parse stops where the buffered bytes run out and resumes there when more have been
/// appended (the record's bytes stay at the start of the buffer), so a record read in many
/// small reads costs what it costs read at once.
struct RecordParser {
    header: bool,
    /// The next byte to look at, from the record's start.
    pos: usize,
    /// Fields seen so far (selected or not).
    parsed: usize,
    out: Vec<Field>,
    /// The record's first error.
    error: Option<String>,
    step: Step,
}

impl RecordParser {
    fn new(header: bool) -> Self {
        RecordParser {
            header,
            pos: 0,
            parsed: 0,
            out: Vec::new(),
            error: None,
            step: Step::Field,
        }
    }

    /// Goes on parsing the record at the start of `data` (the bytes given before, and
    /// maybe more) from where the last call stopped.
    fn parse(&mut self, data: &[u8], eof: bool, config: &Config) -> Parsed {
        if self.pos == 0 && data.is_empty() {
            return if eof { Parsed::End } else { Parsed::NeedMore };
        }
        if self.run(data, eof, config).is_err() {
            return Parsed::NeedMore;
        }
        let out = std::mem::take(&mut self.out);
        let result = match self.error.take() {
            Some(error) => Err(error),
            None if !self.header && out.len() != config.columns.len() => Err(format!(
                "Expect {} fields but have {} in record",
                config.columns.len(),
                out.len()
            )),
            None => Ok(out),
        };
        Parsed::Record(self.pos, result)
    }

    fn run(&mut self, data: &[u8], eof: bool, config: &Config) -> Result<(), More> {
        loop {
            let end = match self.step {
                Step::Done => return Ok(()),
                Step::Field => {
                    if self.out.capacity() == 0 {
                        self.out.reserve(config.columns.len());
                    }
                    let include = !self.header
                        && match &config.select {
                            None => config.exclude.binary_search(&self.parsed).is_err(),
                            Some(select) => select.get(self.out.len()) == Some(&self.parsed),
                        };
                    match at(data, eof, self.pos)? {
                        None => {
                            if include {
                                self.output(config, &[]);
                            }
                            FieldEnd::Last
                        }
                        Some(b'"') if config.quoting => {
                            self.step = Step::Quoted {
                                start: self.pos,
                                include,
                                stray_quote: false,
                            };
                            self.pos += 1;
                            continue;
                        }
                        Some(_) => {
                            self.step = Step::Unquoted {
                                start: self.pos,
                                include,
                            };
                            continue;
                        }
                    }
                }
                Step::Unquoted { start, include } => {
                    self.unquoted(data, eof, config, start, include)?
                }
                Step::Quoted {
                    start,
                    mut include,
                    mut stray_quote,
                } => {
                    let end = self.quoted(data, eof, config, start, &mut include, &mut stray_quote);
                    match end {
                        Ok(end) => end,
                        Err(More) => {
                            self.step = Step::Quoted {
                                start,
                                include,
                                stray_quote,
                            };
                            return Err(More);
                        }
                    }
                }
                Step::AfterCarriageReturn => {
                    if at(data, eof, self.pos)? == Some(b'\n') {
                        self.pos += 1;
                    }
                    self.step = Step::Done;
                    continue;
                }
            };
            self.parsed += 1;
            self.step = match end {
                FieldEnd::Delimiter => Step::Field,
                FieldEnd::Last => Step::Done,
                FieldEnd::CarriageReturn => Step::AfterCarriageReturn,
            };
        }
    }

    fn fail(&mut self, message: String) {
        self.error.get_or_insert(message);
    }

    fn unquoted(
        &mut self,
        data: &[u8],
        eof: bool,
        config: &Config,
        start: usize,
        include: bool,
    ) -> Result<FieldEnd, More> {
        loop {
            let Some(c) = at(data, eof, self.pos)? else {
                if include {
                    self.output(config, &data[start..self.pos]);
                }
                return Ok(FieldEnd::Last);
            };
            let end = if c == config.delimiter {
                FieldEnd::Delimiter
            } else if c == b'\n' {
                FieldEnd::Last
            } else if c == b'\r' {
                FieldEnd::CarriageReturn
            } else {
                if config.quoting && c == b'"' {
                    self.fail("Unquoted fields cannot have quotes inside".into());
                }
                self.pos += 1;
                continue;
            };
            if include {
                self.output(config, &data[start..self.pos]);
            }
            self.pos += 1;
            return Ok(end);
        }
    }

    /// The rest of a quoted field. On [`More`], `pos` is where to resume: never between a
    /// quote and the byte that says what the quote means.
    fn quoted(
        &mut self,
        data: &[u8],
        eof: bool,
        config: &Config,
        start: usize,
        include: &mut bool,
        stray_quote: &mut bool,
    ) -> Result<FieldEnd, More> {
        loop {
            // Straight to the next quote: nothing else matters inside quotes.
            let rest = data.get(self.pos..).unwrap_or_default();
            self.pos += memchr::memchr(b'"', rest).unwrap_or(rest.len());
            if at(data, eof, self.pos)?.is_none() {
                self.fail("Reached end of file without closing quoted field in record".into());
                // TensorFlow then reads one more (empty) field at the end of the file.
                if *include {
                    self.output(config, &[]);
                }
                return Ok(FieldEnd::Last);
            }
            let quote = self.pos;
            let next = at(data, eof, quote + 1)?;
            self.pos = quote + 1;
            let end = match next {
                None | Some(b'\n') => FieldEnd::Last,
                Some(b'\r') => FieldEnd::CarriageReturn,
                Some(b) if b == config.delimiter => FieldEnd::Delimiter,
                Some(b) => {
                    self.pos += 1;
                    if b != b'"' {
                        *include = false;
                        *stray_quote = true;
                    }
                    continue;
                }
            };
            if next.is_some() {
                self.pos += 1;
            }
            if *stray_quote {
                self.fail("Quote inside a string has to be escaped by another quote".into());
            } else if *include {
                self.output_quoted(config, &data[start + 1..quote]);
            }
            return Ok(end);
        }
    }

    /// A quoted field's text between its quotes, `""` read as `"`.
    fn output_quoted(&mut self, config: &Config, inner: &[u8]) {
        if memchr::memchr(b'"', inner).is_none() {
            self.output(config, inner);
        } else {
            let mut text = Vec::with_capacity(inner.len());
            let mut skip = false;
            for &b in inner {
                if b == b'"' {
                    skip = !skip;
                    if !skip {
                        continue;
                    }
                }
                text.push(b);
            }
            self.output(config, &text);
        }
    }

    /// TensorFlow's `FieldToOutput`: the next column's value, its default, or an error.
    fn output(&mut self, config: &Config, text: &[u8]) {
        let index = self.out.len();
        let Some(column) = config.columns.get(index) else {
            let n = config.columns.len();
            self.fail(format!("Expect {n} fields but have more in record"));
            return;
        };
        let value = if text.is_empty() || text == config.na_value.as_slice() {
            match &column.default {
                Some(default) => Ok(default.clone()),
                None => Err(format!("Field {index} is required but missing in record!")),
            }
        } else {
            column.parse(text).ok_or_else(|| {
                format!(
                    "Field {index} in record is not a valid {}: {}",
                    column.kind.type_name(),
                    String::from_utf8_lossy(text)
                )
            })
        };
        match value {
            Ok(field) => self.out.push(field),
            Err(message) => {
                // TensorFlow has added the column before it checks it.
                self.out.push(column.kind.clone());
                self.fail(message);
            }
        }
    }
}

/// The byte at `pos`; `None` at the end of the file, [`More`] where the buffered bytes end
/// before it.
fn at(data: &[u8], eof: bool, pos: usize) -> Result<Option<u8>, More> {
    match data.get(pos) {
        Some(&b) => Ok(Some(b)),
        None if eof => Ok(None),
        None => Err(More),
    }
}

/// `tf.data.experimental.CsvDataset`: each record of the files as a row of typed fields.
///
/// Columns are given as TensorFlow's `record_defaults` (one [`Column`] per selected column).
/// Empty fields and fields equal to `na_value` take the column's default; a column without a
/// default is required. Records end at `\n`, `\r` or `\r\n` (inside quotes too: a quoted
/// field may hold line breaks); `""` in a quoted field is a quote. Errors are TensorFlow's
/// messages, prefixed with the file and the record: a wrong number of fields ("Expect 3
/// fields but have 2 in record"), a missing required field ("Field 0 is required but missing
/// in record!"), a number that does not parse ("Field 0 in record is not a valid int32: x"),
/// a quote inside an unquoted field or after a closing quote, a quote left open at the end
/// of the file, a header that cannot be read. After an error in a record, the next record
/// is read, as TensorFlow reads on. A compressed file that is damaged or cut short is an
/// [`Error::DataLoss`](crate::Error::DataLoss) naming the file, the record being read and
/// its offset in the decompressed stream; the file ends there, and the next file is read.
///
/// A record is parsed as its bytes arrive, each byte once, so a record longer than
/// [`buffer_size`](CsvDataset::buffer_size) (a long quoted field) costs what it would
/// cost read at once.
///
/// ```
/// use streamload::format::{Column, CsvDataset, Field};
///
/// # tokio_test::block_on(async {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("data.csv");
/// std::fs::write(&path, "id,name,score\n1,\"Smith, J\",0.5\n2,Lee,\n")?;
/// let rows = CsvDataset::new([path], [Column::int64(), Column::string(),
///                                      Column::with_default(Field::Float32(-1.0))])
///     .header(true)
///     .build()
///     .collect()
///     .await?;
/// assert_eq!(rows[0][1], Field::String("Smith, J".into()));
/// assert_eq!(rows[1][2], Field::Float32(-1.0));
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct CsvDataset {
    files: FileOptions,
    columns: Vec<Column>,
    header: bool,
    delimiter: u8,
    quoting: bool,
    na_value: String,
    select: Option<Vec<usize>>,
    exclude: Vec<usize>,
}

impl CsvDataset {
    /// Rows of `columns` from these files, in this order.
    pub fn new<P: Into<Location>>(
        files: impl IntoIterator<Item = P>,
        columns: impl IntoIterator<Item = Column>,
    ) -> Self {
        CsvDataset {
            files: FileOptions::new(files),
            columns: columns.into_iter().collect(),
            header: false,
            delimiter: b',',
            quoting: true,
            na_value: String::new(),
            select: None,
            exclude: Vec::new(),
        }
    }

    /// Whether each file starts with a header line to skip (default false).
    pub fn header(mut self, yes: bool) -> Self {
        self.header = yes;
        self
    }

    /// The field delimiter (default `,`).
    pub fn field_delim(mut self, delimiter: u8) -> Self {
        self.delimiter = delimiter;
        self
    }

    /// Whether double quotes delimit fields (RFC 4180; default true).
    pub fn use_quote_delim(mut self, yes: bool) -> Self {
        self.quoting = yes;
        self
    }

    /// A field value that means "missing" (default: only the empty field).
    pub fn na_value(mut self, value: impl Into<String>) -> Self {
        self.na_value = value.into();
        self
    }

    /// Reads only these columns (0-based, ascending; one [`Column`] each). Fields after the
    /// last of them are not read.
    pub fn select_cols(mut self, columns: impl IntoIterator<Item = usize>) -> Self {
        self.select = Some(columns.into_iter().collect());
        self
    }

    /// Reads every column but these (0-based, ascending): the record has as many fields as
    /// there are [`Column`]s and excluded columns together, as TensorFlow's `exclude_cols`
    /// (a record with more is "Expect 2 fields but have more in record").
    ///
    /// ```
    /// use streamload::format::{Column, CsvDataset, Field};
    ///
    /// # tokio_test::block_on(async {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("data.csv");
    /// std::fs::write(&path, "1,skip,0.5\n2,skip,0.25\n")?;
    /// let rows = CsvDataset::new([path], [Column::int64(), Column::float32()])
    ///     .exclude_cols([1])
    ///     .build()
    ///     .collect()
    ///     .await?;
    /// assert_eq!(rows[1], [Field::Int64(2), Field::Float32(0.25)]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn exclude_cols(mut self, columns: impl IntoIterator<Item = usize>) -> Self {
        self.exclude = columns.into_iter().collect();
        self
    }

    /// The dataset.
    ///
    /// # Panics
    ///
    /// As TensorFlow refuses them when the op is built: no columns, `select_cols` not
    /// strictly ascending or of a different length than the columns, `exclude_cols` not
    /// strictly ascending, or both given.
    pub fn build(self) -> Dataset<Vec<Field>> {
        assert!(
            !self.columns.is_empty(),
            "CsvDataset: record_defaults must not be empty"
        );
        if let Some(select) = &self.select {
            assert!(
                select.windows(2).all(|w| w[0] < w[1]),
                "CsvDataset: select_cols should be strictly increasing indices"
            );
            assert_eq!(
                select.len(),
                self.columns.len(),
                "CsvDataset: select_cols should match output size"
            );
        }
        assert!(
            self.select.is_none() || self.exclude.is_empty(),
            "CsvDataset: Either select_cols or exclude_cols should be empty"
        );
        assert!(
            self.exclude.windows(2).all(|w| w[0] < w[1]),
            "CsvDataset: exclude_cols should be strictly increasing indices"
        );
        let format = FileFormat::new(Config {
            columns: self.columns,
            header: self.header,
            delimiter: self.delimiter,
            quoting: self.quoting,
            na_value: self.na_value.into_bytes(),
            select: self.select,
            exclude: self.exclude,
            buffer_size: Unkeyed(self.files.blocks.buffer_size),
        });
        read_files(self.files, format)
    }
}

file_options!(CsvDataset, "file");
