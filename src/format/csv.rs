//! CSV files (`tf.data.experimental.CsvDataset`): typed columns with defaults, a header,
//! quoting, a delimiter, an NA value and column selection. The CSV grammar (RFC 4180 quoting,
//! quoted newlines) is `csv-async`'s (`csv-core` underneath).

use crate::storage::Location;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{Stream, StreamExt};
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

    fn parse(&self, text: &[u8]) -> Option<Field> {
        let number = || std::str::from_utf8(text).ok().map(str::trim);
        Some(match self.kind {
            Field::Int32(_) => Field::Int32(number()?.parse().ok()?),
            Field::Int64(_) => Field::Int64(number()?.parse().ok()?),
            Field::Float32(_) => Field::Float32(number()?.parse().ok()?),
            Field::Float64(_) => Field::Float64(number()?.parse().ok()?),
            Field::String(_) => Field::String(Bytes::copy_from_slice(text)),
        })
    }
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

/// The rows of one stream (`name` is used in errors).
fn csv_rows<R>(
    reader: R,
    name: &str,
    config: Arc<Config>,
) -> impl Stream<Item = anyhow::Result<Vec<Field>>> + Send + use<R>
where
    R: AsyncRead + Send + Unpin + 'static,
{
    let name: Arc<str> = name.into();
    let rows = csv_async::AsyncReaderBuilder::new()
        .has_headers(config.header)
        .delimiter(config.delimiter)
        .quoting(config.quoting)
        .flexible(true)
        .create_reader(reader)
        .into_byte_records();
    let mut failed = false;
    rows.enumerate()
        .map(move |(index, row)| -> anyhow::Result<Vec<Field>> {
            let row = row.map_err(|e| {
                anyhow::Error::new(e).context(format!("{name}: record {index}: not valid CSV"))
            })?;
            convert(&config, &row, index).map_err(|message| {
                anyhow::Error::from(Error::InvalidArgument(format!(
                    "{name}: record {index}: {message}"
                )))
            })
        })
        .take_while(move |row| {
            // A CSV syntax error leaves the reader lost; stop this file there.
            let go = !failed;
            failed |= matches!(row, Err(e) if e.downcast_ref::<Error>().is_none());
            futures::future::ready(go)
        })
}

/// One record's selected fields, typed; errors in TensorFlow's words.
fn convert(
    config: &Config,
    row: &csv_async::ByteRecord,
    index: usize,
) -> Result<Vec<Field>, String> {
    let wanted = config.columns.len();
    let field_of = |i: usize| -> Result<&[u8], String> {
        let column = match &config.select {
            Some(select) => select[i],
            None => i,
        };
        row.get(column).ok_or_else(|| {
            format!(
                "Expect {} fields but have {} in record {index}",
                config
                    .select
                    .as_ref()
                    .map_or(wanted, |s| s[s.len() - 1] + 1),
                row.len()
            )
        })
    };
    if config.select.is_none() && row.len() != wanted {
        return Err(format!(
            "Expect {wanted} fields but have {} in record {index}",
            row.len()
        ));
    }
    let mut out = Vec::with_capacity(wanted);
    for (i, column) in config.columns.iter().enumerate() {
        let text = field_of(i)?;
        if text.is_empty() || text == config.na_value.as_slice() {
            match &column.default {
                Some(default) => out.push(default.clone()),
                None => {
                    return Err(format!(
                        "Field {i} is required but missing in record {index}!"
                    ));
                }
            }
            continue;
        }
        match column.parse(text) {
            Some(field) => out.push(field),
            None => {
                return Err(format!(
                    "Field {i} in record {index} is not a valid {}: {}",
                    column.kind.type_name(),
                    text.escape_ascii()
                ));
            }
        }
    }
    Ok(out)
}

/// `tf.data.experimental.CsvDataset`: each record of the files as a row of typed fields.
///
/// Columns are given as TensorFlow's `record_defaults` (one [`Column`] per selected column).
/// Empty fields and fields equal to `na_value` take the column's default; a column without a
/// default is required. Errors name the file and the record: a wrong number of fields, a
/// missing required field, a number that does not parse.
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
                "CsvDataset: select_cols is not strictly increasing"
            );
            assert_eq!(
                select.len(),
                self.columns.len(),
                "CsvDataset: select_cols and record_defaults must have the same length"
            );
        }
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
                Box::pin(csv_rows(reader, name, Arc::clone(&config)))
            }),
            compression: self.compression,
            buffer_size: self.buffer_size,
            memory_map: false,
        };
        read_files(self.files, format, self.num_parallel_reads)
    }
}
