//! The file readers, with tf.data's names and keyword arguments: one function per format
//! (`streamload/__init__.py` wraps each in the class-like name users call), and the pieces
//! they share, written once:
//!
//! - [`Reading`]: `compression_type`, `buffer_size` and `num_parallel_reads` checked and
//!   applied to any of the crate's readers ([`FileReader`]);
//! - [`read_files`]: `filenames` as a path, a list or a dataset of names (`list_files`),
//!   the latter read one file at a time or `num_parallel_reads` at once, interleaved;
//! - the conversion of each format's element to a [`Value`] (`formats.rs`).

use pyo3::prelude::*;
use streamload::format::{
    Compression, CsvDataset, FixedLengthRecordDataset, JsonLinesDataset, TFRecordDataset,
    TextLineDataset, WebDataset,
};
use streamload::storage::Location;
use streamload::{Dataset, Parallelism};

use crate::dataset::{PyDataset, parallelism};
use crate::distribute::sharder;
use crate::errors;
use crate::formats;
use crate::value::Value;

/// A reader of the crate that takes tf.data's three reading settings.
pub(crate) trait FileReader: Sized {
    fn compression(self, compression: Compression) -> Self;
    fn buffer_size(self, bytes: usize) -> Self;
    fn num_parallel_reads(self, n: Parallelism) -> Self;
}

macro_rules! file_readers {
    ($($reader:ty),* $(,)?) => {$(
        impl FileReader for $reader {
            fn compression(self, compression: Compression) -> Self {
                <$reader>::compression(self, compression)
            }
            fn buffer_size(self, bytes: usize) -> Self {
                <$reader>::buffer_size(self, bytes)
            }
            fn num_parallel_reads(self, n: Parallelism) -> Self {
                <$reader>::num_parallel_reads(self, n)
            }
        }
    )*};
}

file_readers!(
    TFRecordDataset,
    TextLineDataset,
    FixedLengthRecordDataset,
    CsvDataset,
    JsonLinesDataset,
    WebDataset,
);

/// `compression_type` and `buffer_size`, checked once when the dataset is made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reading {
    compression: Option<Compression>,
    buffer: Option<usize>,
}

impl Reading {
    /// `compression_type` is `None` (the reader's default), `""`, `"GZIP"`, `"ZLIB"`, or
    /// `"AUTO"` (by each file's extension); `buffer_size` is in bytes (`None` or `AUTOTUNE`:
    /// the reader's default).
    pub(crate) fn new(
        py: Python<'_>,
        compression_type: Option<&str>,
        buffer_size: Option<i64>,
    ) -> PyResult<Reading> {
        let compression = match compression_type {
            None => None,
            Some("") => Some(Compression::None),
            Some("GZIP") => Some(Compression::Gzip),
            Some("ZLIB") => Some(Compression::Zlib),
            Some("AUTO") => Some(Compression::Auto),
            Some(other) => {
                return Err(errors::invalid(
                    py,
                    format!(
                        "Unsupported compression_type: {other}. Supported: \"\", \"ZLIB\", \
                         \"GZIP\" (and \"AUTO\": by the file's extension)"
                    ),
                ));
            }
        };
        let buffer = match buffer_size {
            None | Some(crate::dataset::AUTOTUNE) => None,
            Some(n) if n > 0 => Some(n as usize),
            Some(n) => {
                return Err(errors::invalid(
                    py,
                    format!("buffer_size must be positive, got {n}"),
                ));
            }
        };
        Ok(Reading {
            compression,
            buffer,
        })
    }

    /// `reader` with these settings and `reads` files read at once.
    pub(crate) fn apply<R: FileReader>(&self, mut reader: R, reads: Option<Parallelism>) -> R {
        if let Some(c) = self.compression {
            reader = reader.compression(c);
        }
        if let Some(b) = self.buffer {
            reader = reader.buffer_size(b);
        }
        if let Some(n) = reads {
            reader = reader.num_parallel_reads(n);
        }
        reader
    }
}

/// The file names of `filenames`: a str, or a list or tuple of them.
fn file_names(filenames: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(one) = filenames.extract::<String>() {
        return Ok(vec![one]);
    }
    let mut out = Vec::new();
    for item in filenames.try_iter()? {
        let item = item?;
        let name = match item.extract::<String>() {
            Ok(s) => s,
            Err(_) => match item.extract::<Vec<u8>>() {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(_) => item.str()?.to_string(), // a pathlib.Path
            },
        };
        out.push(name);
    }
    Ok(out)
}

/// The files of `filenames` when it is a list (not a dataset of names).
fn listed(filenames: &Bound<'_, PyAny>) -> PyResult<Option<Vec<Location>>> {
    if filenames.cast::<PyDataset>().is_ok() {
        return Ok(None);
    }
    Ok(Some(
        file_names(filenames)?
            .iter()
            .map(|f| Location::parse(f))
            .collect(),
    ))
}

/// A file reader's elements. `filenames` is a list of names (read by `build` with its own
/// parallel reads) or a dataset of names (`list_files`): each file read in turn, or
/// `num_parallel_reads` at once, interleaved one element at a time (tf.data).
pub(crate) fn read_files(
    py: Python<'_>,
    filenames: &Bound<'_, PyAny>,
    num_parallel_reads: Option<i64>,
    build: impl Fn(Vec<Location>, Option<Parallelism>) -> Dataset<Value> + Send + Sync + 'static,
) -> PyResult<PyDataset> {
    let reads = parallelism(py, "num_parallel_reads", num_parallel_reads)?;
    if let Ok(files) = filenames.cast::<PyDataset>() {
        let open = move |name: Value| -> Dataset<Value> {
            match name.as_string() {
                Some(n) => build(vec![Location::parse(&String::from_utf8_lossy(n))], None),
                None => {
                    let message =
                        format!("a file name must be a string, got a {}", name.describe());
                    Dataset::range(0, 1)
                        .try_map(move |_| Err(crate::value::invalid(message.clone())))
                }
            }
        };
        let files = &files.get().inner;
        return Ok(PyDataset::wrap(match reads {
            None | Some(Parallelism::Fixed(1)) => files.flat_map(open),
            Some(n) => files.parallel_interleave(n, 1, n, open),
        }));
    }
    let files = file_names(filenames)?
        .iter()
        .map(|f| Location::parse(f))
        .collect();
    Ok(PyDataset::wrap(build(files, reads)))
}

/// A reader taking the three reading settings: `make` opens the files, `build` turns the
/// configured reader into elements.
#[allow(clippy::too_many_arguments)] // the readers' keyword arguments, passed on
fn read_with<R: FileReader>(
    py: Python<'_>,
    filenames: &Bound<'_, PyAny>,
    compression_type: Option<&str>,
    buffer_size: Option<i64>,
    num_parallel_reads: Option<i64>,
    make: impl Fn(Vec<Location>) -> R + Send + Sync + 'static,
    build: impl Fn(R) -> Dataset<Value> + Send + Sync + 'static,
) -> PyResult<PyDataset> {
    let reading = Reading::new(py, compression_type, buffer_size)?;
    read_files(py, filenames, num_parallel_reads, move |files, reads| {
        build(reading.apply(make(files), reads))
    })
}

/// The readers whose only settings are the three shared ones, by format: `"tfrecord"`
/// (`TFRecordDataset`), `"text_line"` (`TextLineDataset`), `"json_lines"`
/// (`JsonLinesDataset`), `"webdataset"` (`WebDataset`); see those in `streamload`.
#[pyfunction]
#[pyo3(signature = (format, filenames, compression_type=None, buffer_size=None, num_parallel_reads=None))]
pub(crate) fn read(
    py: Python<'_>,
    format: &str,
    filenames: &Bound<'_, PyAny>,
    compression_type: Option<&str>,
    buffer_size: Option<i64>,
    num_parallel_reads: Option<i64>,
) -> PyResult<PyDataset> {
    let (c, b, n) = (compression_type, buffer_size, num_parallel_reads);
    match format {
        "tfrecord" => {
            let mut ds = read_with(py, filenames, c, b, n, TFRecordDataset::new, |r| {
                r.build().map(Value::string)
            })?;
            if let Some(files) = listed(filenames)? {
                let reading = Reading::new(py, c, b)?;
                let reads = parallelism(py, "num_parallel_reads", n)?;
                ds.sharder = Some(sharder(
                    move || Ok(reading.apply(TFRecordDataset::new(files.clone()), reads)),
                    |record| Ok(Value::string(record)),
                ));
            }
            Ok(ds)
        }
        "text_line" => read_with(py, filenames, c, b, n, TextLineDataset::new, |r| {
            r.build().map(Value::string)
        }),
        "json_lines" => read_with(py, filenames, c, b, n, JsonLinesDataset::new, |r| {
            r.build_as::<formats::JsonElement>().map(|e| e.0)
        }),
        "webdataset" => read_with(py, filenames, c, b, n, WebDataset::new, |r| {
            r.build().map(formats::sample)
        }),
        other => Err(errors::invalid(
            py,
            format!("no reader for format {other:?}"),
        )),
    }
}

/// `tf.data.FixedLengthRecordDataset`; see `streamload.FixedLengthRecordDataset`.
#[pyfunction]
#[pyo3(signature = (filenames, record_bytes, header_bytes=None, footer_bytes=None, buffer_size=None, compression_type=None, num_parallel_reads=None))]
#[allow(clippy::too_many_arguments)] // tf.data's keyword arguments
pub(crate) fn fixed_length_record_dataset(
    py: Python<'_>,
    filenames: &Bound<'_, PyAny>,
    record_bytes: i64,
    header_bytes: Option<i64>,
    footer_bytes: Option<i64>,
    buffer_size: Option<i64>,
    compression_type: Option<&str>,
    num_parallel_reads: Option<i64>,
) -> PyResult<PyDataset> {
    if record_bytes <= 0 {
        return Err(errors::invalid(
            py,
            format!("record_bytes must be greater than zero, got {record_bytes}"),
        ));
    }
    let size = |what: &str, n: Option<i64>| match n {
        None => Ok(0usize),
        Some(n) if n >= 0 => Ok(n as usize),
        Some(n) => Err(errors::invalid(
            py,
            format!("{what} must not be negative, got {n}"),
        )),
    };
    let (header, footer) = (
        size("header_bytes", header_bytes)?,
        size("footer_bytes", footer_bytes)?,
    );
    read_with(
        py,
        filenames,
        compression_type,
        buffer_size,
        num_parallel_reads,
        move |files| {
            FixedLengthRecordDataset::new(files, record_bytes as usize)
                .header_bytes(header)
                .footer_bytes(footer)
        },
        |r| r.build().map(Value::string),
    )
}

/// `tf.data.experimental.CsvDataset`; see `streamload.experimental.CsvDataset`.
#[pyfunction]
#[pyo3(signature = (filenames, record_defaults, compression_type=None, buffer_size=None, header=false, field_delim=",", use_quote_delim=true, na_value="", select_cols=None, exclude_cols=None, num_parallel_reads=None))]
#[allow(clippy::too_many_arguments)] // tf.data's keyword arguments
pub(crate) fn csv_dataset(
    py: Python<'_>,
    filenames: &Bound<'_, PyAny>,
    record_defaults: &Bound<'_, PyAny>,
    compression_type: Option<&str>,
    buffer_size: Option<i64>,
    header: bool,
    field_delim: &str,
    use_quote_delim: bool,
    na_value: &str,
    select_cols: Option<Vec<i64>>,
    exclude_cols: Option<Vec<i64>>,
    num_parallel_reads: Option<i64>,
) -> PyResult<PyDataset> {
    let columns = formats::csv_columns(py, record_defaults)?;
    if select_cols.is_some() && exclude_cols.is_some() {
        return Err(errors::invalid(
            py,
            "Either select_cols or exclude_cols should be empty",
        ));
    }
    let exclude = exclude_cols.unwrap_or_default();
    if exclude.iter().any(|&c| c < 0) {
        return Err(errors::invalid(
            py,
            "exclude_cols should be non-negative indices",
        ));
    }
    if !exclude.windows(2).all(|w| w[0] < w[1]) {
        return Err(errors::invalid(
            py,
            "exclude_cols should be strictly increasing indices",
        ));
    }
    let exclude: Vec<usize> = exclude.into_iter().map(|c| c as usize).collect();
    let delimiter = match field_delim.as_bytes() {
        [d] => *d,
        _ => {
            return Err(errors::invalid(
                py,
                format!("field_delim should be only 1 char, got {field_delim:?}"),
            ));
        }
    };
    let select = match select_cols {
        None => None,
        Some(cols) => {
            if cols.iter().any(|&c| c < 0) {
                return Err(errors::invalid(
                    py,
                    "select_cols should be non-negative indices",
                ));
            }
            if !cols.windows(2).all(|w| w[0] < w[1]) {
                return Err(errors::invalid(
                    py,
                    "select_cols should be strictly increasing indices",
                ));
            }
            if cols.len() != columns.len() {
                return Err(errors::invalid(
                    py,
                    format!(
                        "select_cols should match output size: {} columns selected, {} \
                         record_defaults",
                        cols.len(),
                        columns.len()
                    ),
                ));
            }
            Some(cols.into_iter().map(|c| c as usize).collect::<Vec<_>>())
        }
    };
    let na_value = na_value.to_owned();
    read_with(
        py,
        filenames,
        compression_type,
        buffer_size,
        num_parallel_reads,
        move |files| {
            let reader = CsvDataset::new(files, columns.clone())
                .header(header)
                .field_delim(delimiter)
                .use_quote_delim(use_quote_delim)
                .na_value(na_value.clone())
                .exclude_cols(exclude.iter().copied());
            match &select {
                Some(cols) => reader.select_cols(cols.iter().copied()),
                None => reader,
            }
        },
        |r| {
            r.build()
                .map(|row| Value::Tuple(row.into_iter().map(formats::csv_field).collect()))
        },
    )
}

/// Parquet files; see `streamload.ParquetDataset`.
#[pyfunction]
#[pyo3(signature = (filenames, columns=None, batch_size=1024, num_parallel_reads=None, exclude_cols=None, ragged=false))]
pub(crate) fn parquet_dataset(
    py: Python<'_>,
    filenames: &Bound<'_, PyAny>,
    columns: Option<Vec<String>>,
    batch_size: i64,
    num_parallel_reads: Option<i64>,
    exclude_cols: Option<Vec<String>>,
    ragged: bool,
) -> PyResult<PyDataset> {
    use streamload::format::parquet::ParquetDataset;
    if columns.is_some() && exclude_cols.is_some() {
        return Err(errors::invalid(
            py,
            "ParquetDataset: columns and exclude_cols are mutually exclusive",
        ));
    }
    // Left out by the reader (their column chunks are not fetched).
    let exclude = exclude_cols.unwrap_or_default();
    if batch_size <= 0 {
        return Err(errors::invalid(
            py,
            format!("batch_size must be greater than zero, got {batch_size}"),
        ));
    }
    let make = move |files: Vec<Location>, reads: Option<Parallelism>| {
        let mut reader = ParquetDataset::new(files)
            .batch_size(batch_size as usize)
            .exclude_columns(exclude.iter().cloned());
        if let Some(names) = &columns {
            reader = reader.columns(names.iter().cloned());
        }
        if let Some(n) = reads {
            reader = reader.num_parallel_reads(n);
        }
        reader
    };
    let make = std::sync::Arc::new(make);
    let build = std::sync::Arc::clone(&make);
    let mut ds = read_files(py, filenames, num_parallel_reads, move |files, reads| {
        build(files, reads)
            .build()
            .try_map(move |batch| formats::record_batch(&batch, ragged))
    })?;
    if let Some(files) = listed(filenames)? {
        let reads = parallelism(py, "num_parallel_reads", num_parallel_reads)?;
        ds.sharder = Some(sharder(
            move || {
                let reader = make(files.clone(), reads);
                crate::runtime::runtime()?.block_on(reader.shard_source())
            },
            move |batch| formats::record_batch(&batch, ragged),
        ));
    }
    Ok(ds)
}

/// HDF5 files; see `streamload.HDF5Dataset`.
#[pyfunction]
#[pyo3(signature = (filenames, dataset, dtype, labels=None, labels_dtype=None, slices=None, field=None, fill_missing_chunks=false, num_parallel_reads=None))]
#[allow(clippy::too_many_arguments)] // the reader's keyword arguments
pub(crate) fn hdf5_dataset(
    py: Python<'_>,
    filenames: &Bound<'_, PyAny>,
    dataset: String,
    dtype: &str,
    labels: Option<String>,
    labels_dtype: Option<&str>,
    slices: Option<i64>,
    field: Option<String>,
    fill_missing_chunks: bool,
    num_parallel_reads: Option<i64>,
) -> PyResult<PyDataset> {
    let data = formats::Hdf5Type::parse(py, dtype)?;
    let label_type = match (&labels, labels_dtype) {
        (Some(_), Some(t)) => Some(formats::LabelType::parse(py, t)?),
        (Some(_), None) => {
            return Err(errors::invalid(
                py,
                "HDF5Dataset: labels_dtype is needed with labels",
            ));
        }
        (None, Some(_)) => {
            return Err(errors::invalid(
                py,
                "HDF5Dataset: labels_dtype given without labels",
            ));
        }
        (None, None) => None,
    };
    let slices = match slices {
        None => None,
        Some(k) if k > 0 => Some(k as usize),
        Some(k) => {
            return Err(errors::invalid(
                py,
                format!("slices must be greater than zero, got {k}"),
            ));
        }
    };
    read_files(py, filenames, num_parallel_reads, move |files, reads| {
        use streamload::format::hdf5::Hdf5Dataset;
        let mut reader =
            Hdf5Dataset::new(files, dataset.clone()).fill_missing_chunks(fill_missing_chunks);
        if let Some(f) = &field {
            reader = reader.field(f.clone());
        }
        if let Some(k) = slices {
            reader = reader.slices(k);
        }
        if let Some(n) = reads {
            reader = reader.num_parallel_reads(n);
        }
        match (&labels, label_type) {
            (Some(l), Some(lt)) => formats::hdf5_labeled(reader.with_labels(l.clone()), data, lt),
            _ => formats::hdf5(reader, data),
        }
    })
}

/// Megatron-LM indexed datasets (`.bin` + `.idx` pairs), opened; see
/// `streamload.MegatronDataset`.
#[pyclass(name = "MegatronDataset", module = "streamload._native", frozen)]
pub(crate) struct PyMegatron {
    inner: streamload::format::megatron::MegatronDataset,
}

#[pymethods]
impl PyMegatron {
    /// Opens the pairs named by `prefixes` (each `.idx` read and checked, the GIL released).
    #[new]
    fn new(py: Python<'_>, prefixes: &Bound<'_, PyAny>) -> PyResult<Self> {
        use streamload::format::megatron::MegatronDataset;
        let prefixes = file_names(prefixes)?;
        let opened =
            py.detach(|| crate::runtime::runtime()?.block_on(MegatronDataset::open(prefixes)));
        match opened {
            Ok(inner) => Ok(PyMegatron { inner }),
            Err(e) => Err(errors::to_py(py, e)),
        }
    }

    /// Documents in all the pairs.
    #[getter]
    fn num_documents(&self) -> u64 {
        self.inner.num_documents()
    }

    /// Document `number`'s token ids, as a `uint32` array.
    fn read_document<'py>(&self, py: Python<'py>, number: u64) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner.clone();
        let read = py.detach(|| {
            crate::runtime::runtime()?.block_on(async move { inner.read_document(number).await })
        });
        match read {
            Ok(tokens) => Value::array(ndarray::Array1::from_vec(tokens).into_dyn()).into_py(py),
            Err(e) => Err(errors::to_py(py, e)),
        }
    }

    /// The documents as a dataset of `uint32` arrays.
    #[pyo3(signature = (shuffle_seed=None, num_shards=1, index=0, num_parallel_reads=None))]
    fn documents(
        &self,
        py: Python<'_>,
        shuffle_seed: Option<u64>,
        num_shards: u64,
        index: u64,
        num_parallel_reads: Option<i64>,
    ) -> PyResult<PyDataset> {
        if num_shards == 0 || index >= num_shards {
            return Err(errors::invalid(
                py,
                format!("index {index} is not below num_shards {num_shards}"),
            ));
        }
        let mut reader = self.inner.clone().shard(num_shards, index);
        if let Some(seed) = shuffle_seed {
            reader = reader.shuffle_documents(seed);
        }
        if let Some(n) = parallelism(py, "num_parallel_reads", num_parallel_reads)? {
            reader = reader.num_parallel_reads(n);
        }
        Ok(PyDataset::wrap(reader.documents().map(|tokens| {
            Value::array(ndarray::Array1::from_vec(tokens).into_dyn())
        })))
    }
}
