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

use super::Compression;
use super::files::{FileFormat, read_files};
use crate::Error;
use crate::dataset::Dataset;
use crate::options::Parallelism;

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

#[derive(Debug)]
struct Config {
    columns: Vec<Column>,
    header: bool,
    delimiter: u8,
    quoting: bool,
    na_value: Vec<u8>,
    select: Option<Vec<usize>>,
}

/// Records longer than this are an error rather than a buffer that grows without bound.
const MAX_RECORD: usize = 64 << 20;

/// The rows of one stream (`name` is used in errors): each record's fields, or its error
/// (the next record is read after it, as TensorFlow reads on). A header that cannot be read
/// ends the stream with TensorFlow's "Can't read header of file".
fn csv_rows<R>(
    reader: R,
    name: &str,
    config: Arc<Config>,
    buffer_size: usize,
) -> impl Stream<Item = anyhow::Result<Vec<Field>>> + Send + use<R>
where
    R: AsyncRead + Send + Unpin + 'static,
{
    let state = Reader {
        reader,
        buffer: BytesMut::new(),
        eof: false,
        header: config.header,
        index: 0,
        done: false,
        name: name.into(),
        config,
        buffer_size,
    };
    futures::stream::unfold(state, |mut state| async move {
        let row = state.next().await?;
        Some((row, state))
    })
}

/// One file's reader: the bytes read and not yet parsed.
struct Reader<R> {
    reader: R,
    buffer: BytesMut,
    eof: bool,
    /// The header is still to be skipped.
    header: bool,
    /// Records yielded so far.
    index: usize,
    done: bool,
    name: Arc<str>,
    config: Arc<Config>,
    buffer_size: usize,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    async fn next(&mut self) -> Option<anyhow::Result<Vec<Field>>> {
        use tokio::io::AsyncReadExt;
        if self.done {
            return None;
        }
        loop {
            let header = self.header;
            match parse_record(&self.buffer, self.eof, &self.config, header) {
                Parsed::Record(consumed, row) => {
                    self.buffer.advance(consumed);
                    if header {
                        self.header = false;
                        if row.is_err() {
                            self.done = true;
                            return Some(Err(self.invalid("Can't read header of file".into())));
                        }
                        continue;
                    }
                    let index = self.index;
                    self.index += 1;
                    return Some(
                        row.map_err(|message| self.invalid(format!("record {index}: {message}"))),
                    );
                }
                Parsed::End => {
                    self.done = true;
                    if header {
                        return Some(Err(self.invalid("Can't read header of file".into())));
                    }
                    return None;
                }
                Parsed::NeedMore => {
                    if self.buffer.len() > MAX_RECORD {
                        self.done = true;
                        let (name, index) = (&self.name, self.index);
                        return Some(Err(anyhow::anyhow!(
                            "{name}: record {index} is longer than {MAX_RECORD} bytes"
                        )));
                    }
                    self.buffer.reserve(self.buffer_size);
                    match self.reader.read_buf(&mut self.buffer).await {
                        Ok(0) => self.eof = true,
                        Ok(_) => {}
                        Err(e) => {
                            self.done = true;
                            let index = self.index;
                            return Some(Err(anyhow::Error::new(e)
                                .context(format!("reading record {index} of {}", self.name))));
                        }
                    }
                }
            }
        }
    }

    fn invalid(&self, message: String) -> anyhow::Error {
        Error::InvalidArgument(format!("{}: {message}", self.name)).into()
    }
}

/// What [`parse_record`] found at the start of the buffer.
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

/// Parses the record at the start of `data` by TensorFlow's `CsvDataset` rules (its
/// `ReadRecord`, `ParseQuotedField`, `ParseUnquotedField`, `FieldToOutput`): fields end at
/// the delimiter, a record at `\n`, `\r` or `\r\n`; the record is read to its end even after
/// an error, and the first error is its result. A `header` is parsed and its fields dropped.
fn parse_record(data: &[u8], eof: bool, config: &Config, header: bool) -> Parsed {
    if data.is_empty() {
        return if eof { Parsed::End } else { Parsed::NeedMore };
    }
    let mut record = RecordParser {
        data,
        eof,
        pos: 0,
        config,
        out: Vec::with_capacity(config.columns.len()),
        error: None,
    };
    let mut parsed = 0;
    let mut end = false;
    while !end {
        let include = !header
            && match &config.select {
                None => true,
                Some(select) => select.get(record.out.len()) == Some(&parsed),
            };
        match record.field(include) {
            Ok(last) => end = last,
            Err(More) => return Parsed::NeedMore,
        }
        parsed += 1;
    }
    let result = match record.error {
        Some(error) => Err(error),
        None if !header && record.out.len() != config.columns.len() => Err(format!(
            "Expect {} fields but have {} in record",
            config.columns.len(),
            record.out.len()
        )),
        None => Ok(record.out),
    };
    Parsed::Record(record.pos, result)
}

struct RecordParser<'a> {
    data: &'a [u8],
    eof: bool,
    pos: usize,
    config: &'a Config,
    out: Vec<Field>,
    /// The record's first error.
    error: Option<String>,
}

impl RecordParser<'_> {
    /// The byte at `pos`; `None` at the end of the file.
    fn at(&self, pos: usize) -> Result<Option<u8>, More> {
        match self.data.get(pos) {
            Some(&b) => Ok(Some(b)),
            None if self.eof => Ok(None),
            None => Err(More),
        }
    }

    fn fail(&mut self, message: String) {
        self.error.get_or_insert(message);
    }

    /// Parses one field; `Ok(true)` when it ends the record.
    fn field(&mut self, include: bool) -> Result<bool, More> {
        match self.at(self.pos)? {
            None => {
                if include {
                    self.output(&[]);
                }
                Ok(true)
            }
            Some(b'"') if self.config.quoting => self.quoted(include),
            Some(_) => self.unquoted(include),
        }
    }

    fn unquoted(&mut self, include: bool) -> Result<bool, More> {
        let start = self.pos;
        loop {
            let Some(c) = self.at(self.pos)? else {
                if include {
                    self.output(&self.data[start..self.pos]);
                }
                return Ok(true);
            };
            if c == self.config.delimiter {
                if include {
                    self.output(&self.data[start..self.pos]);
                }
                self.pos += 1;
                return Ok(false);
            }
            if c == b'\n' || c == b'\r' {
                if include {
                    self.output(&self.data[start..self.pos]);
                }
                self.pos += 1;
                if c == b'\r' {
                    self.skip_newline()?;
                }
                return Ok(true);
            }
            if self.config.quoting && c == b'"' {
                self.fail("Unquoted fields cannot have quotes inside".into());
            }
            self.pos += 1;
        }
    }

    fn quoted(&mut self, mut include: bool) -> Result<bool, More> {
        let start = self.pos;
        self.pos += 1;
        // A quote not doubled and not closing the field: the field's error, unless the file
        // ends before the field does (that error replaces it, as in TensorFlow).
        let mut stray_quote = false;
        loop {
            let Some(c) = self.at(self.pos)? else {
                self.fail("Reached end of file without closing quoted field in record".into());
                // TensorFlow then reads one more (empty) field at the end of the file.
                if include {
                    self.output(&[]);
                }
                return Ok(true);
            };
            self.pos += 1;
            if c != b'"' {
                continue;
            }
            let end = self.pos - 1;
            let next = self.at(self.pos)?;
            let last = match next {
                None => true,
                Some(b'\n' | b'\r') => true,
                Some(b) if b == self.config.delimiter => false,
                Some(b) => {
                    self.pos += 1;
                    if b != b'"' {
                        include = false;
                        stray_quote = true;
                    }
                    continue;
                }
            };
            if next.is_some() {
                self.pos += 1;
            }
            if stray_quote {
                self.fail("Quote inside a string has to be escaped by another quote".into());
            } else if include {
                self.output_quoted(start, end);
            }
            if next == Some(b'\r') {
                self.skip_newline()?;
            }
            return Ok(last);
        }
    }

    /// After a `\r`, a `\n` belongs to the same line break.
    fn skip_newline(&mut self) -> Result<(), More> {
        if self.at(self.pos)? == Some(b'\n') {
            self.pos += 1;
        }
        Ok(())
    }

    /// The quoted field between the quotes at `start` and `end`, `""` read as `"`.
    fn output_quoted(&mut self, start: usize, end: usize) {
        let inner = &self.data[start + 1..end];
        if memchr::memchr(b'"', inner).is_none() {
            self.output(inner);
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
            self.output(&text);
        }
    }

    /// TensorFlow's `FieldToOutput`: the next column's value, its default, or an error.
    fn output(&mut self, text: &[u8]) {
        let index = self.out.len();
        let Some(column) = self.config.columns.get(index) else {
            let n = self.config.columns.len();
            self.fail(format!("Expect {n} fields but have more in record"));
            return;
        };
        let value = if text.is_empty() || text == self.config.na_value.as_slice() {
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
/// is read, as TensorFlow reads on.
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
    files: Vec<Location>,
    columns: Vec<Column>,
    header: bool,
    delimiter: u8,
    quoting: bool,
    na_value: String,
    select: Option<Vec<usize>>,
    compression: Compression,
    buffer_size: usize,
    num_parallel_reads: Option<Parallelism>,
}

impl CsvDataset {
    /// Rows of `columns` from these files, in this order.
    pub fn new<P: Into<Location>>(
        files: impl IntoIterator<Item = P>,
        columns: impl IntoIterator<Item = Column>,
    ) -> Self {
        CsvDataset {
            files: files.into_iter().map(Into::into).collect(),
            columns: columns.into_iter().collect(),
            header: false,
            delimiter: b',',
            quoting: true,
            na_value: String::new(),
            select: None,
            compression: Compression::None,
            buffer_size: crate::storage::local::DEFAULT_BLOCK,
            num_parallel_reads: None,
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

    /// Reads only these columns (0-based, ascending; one [`Column`] each).
    pub fn select_cols(mut self, columns: impl IntoIterator<Item = usize>) -> Self {
        self.select = Some(columns.into_iter().collect());
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
        assert!(bytes > 0, "CsvDataset: buffer_size must be at least 1");
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
    ///
    /// # Panics
    ///
    /// As TensorFlow refuses them when the op is built: no columns, or `select_cols` not
    /// strictly ascending or of a different length than the columns.
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
        let buffer_size = self.buffer_size;
        let config = Arc::new(Config {
            columns: self.columns,
            header: self.header,
            delimiter: self.delimiter,
            quoting: self.quoting,
            na_value: self.na_value.into_bytes(),
            select: self.select,
        });
        let format = FileFormat {
            stage: "csv",
            decode: Arc::new(move |file, name| {
                let reader = tokio_util::io::StreamReader::new(file.blocks);
                Box::pin(csv_rows(reader, name, Arc::clone(&config), buffer_size))
            }),
            compression: self.compression,
            buffer_size: self.buffer_size,
            memory_map: false,
        };
        read_files(self.files, format, self.num_parallel_reads)
    }
}
