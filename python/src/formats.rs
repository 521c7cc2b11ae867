//! Each format's element as a [`Value`]: CSV rows, JSON values, WebDataset samples, Parquet
//! record batches and HDF5 arrays. Everything here runs in the pipeline, without the GIL.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use ndarray::{ArrayD, IxDyn};
use pyo3::prelude::*;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use streamload::Dataset;
use streamload::format::hdf5::{Element, Hdf5Dataset, f16};
use streamload::format::parquet::arrow_array::cast::AsArray;
use streamload::format::parquet::arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use streamload::format::parquet::arrow_array::{Array as ArrowArray, ArrayRef};
use streamload::format::parquet::arrow_schema::DataType;
use streamload::format::parquet::{BatchOrigin, RecordBatch};
use streamload::format::{Column, Field};

use crate::errors;
use crate::value::{Array, Value, invalid};

// ---------------------------------------------------------------------------------------
// CSV

/// `record_defaults` as `streamload/__init__.py` passes them: a `(dtype, default)` pair per
/// column, `default` `None` for a required column.
pub(crate) fn csv_columns(
    py: Python<'_>,
    record_defaults: &Bound<'_, PyAny>,
) -> PyResult<Vec<Column>> {
    let mut columns = Vec::new();
    for (i, item) in record_defaults.try_iter()?.enumerate() {
        let (dtype, default): (String, Option<Bound<'_, PyAny>>) = item?.extract()?;
        let bad = |what: String| errors::invalid(py, format!("record_defaults[{i}]: {what}"));
        let column = match (dtype.as_str(), default) {
            ("int32", None) => Column::int32(),
            ("int64", None) => Column::int64(),
            ("float32", None) => Column::float32(),
            ("float64", None) => Column::float64(),
            ("string", None) => Column::string(),
            ("int32", Some(d)) => Column::with_default(Field::Int32(d.extract()?)),
            ("int64", Some(d)) => Column::with_default(Field::Int64(d.extract()?)),
            ("float32", Some(d)) => Column::with_default(Field::Float32(d.extract()?)),
            ("float64", Some(d)) => Column::with_default(Field::Float64(d.extract()?)),
            ("string", Some(d)) => {
                let bytes: Vec<u8> = match d.extract::<String>() {
                    Ok(s) => s.into_bytes(),
                    Err(_) => d.extract()?,
                };
                Column::with_default(Field::String(bytes.into()))
            }
            (other, _) => {
                return Err(bad(format!(
                    "a CSV column is float32, float64, int32, int64 or string, not {other}"
                )));
            }
        };
        columns.push(column);
    }
    if columns.is_empty() {
        return Err(errors::invalid(
            py,
            "CsvDataset: record_defaults must not be empty",
        ));
    }
    Ok(columns)
}

/// A CSV field as a 0-d tensor of its column's type.
pub(crate) fn csv_field(field: Field) -> Value {
    match field {
        Field::Int32(v) => Value::scalar(v),
        Field::Int64(v) => Value::scalar(v),
        Field::Float32(v) => Value::scalar(v),
        Field::Float64(v) => Value::scalar(v),
        Field::String(v) => Value::string(v),
    }
}

// ---------------------------------------------------------------------------------------
// JSON lines

/// A JSON value as tensors, made while the line is deserialized (so an error names the
/// file and the line): an object is a dict, a number an `int64` (a `uint64` past its range)
/// or a `float32`, a string `tf.string`, `true`/`false` a `bool`, a list of one shape a
/// tensor with one more dimension (integers and floats mixed: `float32`). `null` and
/// ragged lists are errors.
pub(crate) struct JsonElement(pub(crate) Value);

impl<'de> Deserialize<'de> for JsonElement {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor).map(JsonElement)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value that is a tensor or a structure of them")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::scalar(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::scalar(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(match i64::try_from(v) {
            Ok(i) => Value::scalar(i),
            Err(_) => Value::scalar(v),
        })
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::scalar(v as f32))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::string(Bytes::copy_from_slice(v.as_bytes())))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Err(E::custom(
            "null is not a tensor (streamload's tensors have no missing values): leave the \
             key out, or read the lines with TextLineDataset and parse them in a map",
        ))
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(JsonElement(v)) = seq.next_element()? {
            items.push(v);
        }
        json_list(items).map_err(de::Error::custom)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map
                .next_value::<JsonElement>()
                .map_err(|e| de::Error::custom(format!("key {key:?}: {e}")))?;
            out.insert(key, value.0);
        }
        Ok(Value::Dict(out))
    }
}

/// A JSON list as one tensor: its items stacked (as `batch` stacks elements).
fn json_list(mut items: Vec<Value>) -> Result<Value, String> {
    if items.is_empty() {
        // TensorFlow's type of an empty list.
        return Ok(Value::vector(Vec::<f32>::new()));
    }
    // Integers among floats (at any depth): floats, as numpy and TensorFlow make such a list.
    let dtype = |v: &Value| match v {
        Value::Array(a) => Some(a.dtype()),
        _ => None,
    };
    let kinds: Vec<_> = items.iter().map(dtype).collect();
    if kinds.contains(&Some("float32"))
        && kinds
            .iter()
            .all(|k| matches!(k, Some("float32" | "int64" | "uint64")))
    {
        items = items
            .into_iter()
            .map(|v| match v {
                Value::Array(a) => match *a {
                    Array::Int64(a) => Value::array(a.mapv(|x| x as f32)),
                    Array::UInt64(a) => Value::array(a.mapv(|x| x as f32)),
                    other => Value::array(other),
                },
                other => other,
            })
            .collect();
    }
    Value::stack(&items).map_err(|e| {
        format!(
            "a list whose items differ in type or shape (ragged) is not a tensor ({})",
            e.to_string()
                .replace("Cannot batch tensors", "cannot stack items")
        )
    })
}

// ---------------------------------------------------------------------------------------
// WebDataset

/// A sample as `webdataset` gives it: a dict of `__key__`, `__url__` and each field's bytes
/// by extension.
pub(crate) fn sample(sample: streamload::format::Sample) -> Value {
    let mut out = BTreeMap::new();
    out.insert(
        "__key__".to_owned(),
        Value::string(Bytes::copy_from_slice(sample.key().as_bytes())),
    );
    out.insert(
        "__url__".to_owned(),
        Value::string(Bytes::copy_from_slice(sample.url().as_bytes())),
    );
    for (ext, data) in sample.fields() {
        out.insert(ext.to_owned(), Value::string(data.clone()));
    }
    Value::Dict(out)
}

// ---------------------------------------------------------------------------------------
// Parquet

/// A record batch as a dict of its columns, each a tensor with one row per row. An error
/// names the file and the row in it (from 0) where the batch has its origin (every batch of
/// `ParquetDataset` does), and the column.
///
/// With `ragged`, a list column whose rows differ in length is a ragged tensor (its values
/// and `int64` row splits, as `tf.RaggedTensor`) rather than an error: token ids, one list
/// per document.
pub(crate) fn record_batch(batch: &RecordBatch, ragged: bool) -> anyhow::Result<Value> {
    let schema = batch.schema();
    let origin = BatchOrigin::of(batch);
    let mut out = BTreeMap::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        let col = Col {
            name: field.name(),
            rows: batch.num_rows(),
            origin,
            ragged,
        };
        let value = arrow_column(column, col, &|row| row)?;
        out.insert(field.name().clone(), value);
    }
    Ok(Value::Dict(out))
}

/// The column being converted, to name where a bad value is: its name, and its batch's rows
/// and origin (file and first row).
#[derive(Clone, Copy)]
struct Col<'a> {
    name: &'a str,
    rows: usize,
    origin: Option<BatchOrigin<'a>>,
    /// Lists of several lengths are a ragged tensor (else an error).
    ragged: bool,
}

/// Maps an index in a (nested) array to the row of the batch holding it: called only to name
/// a bad value, so nested columns cost nothing more until then.
type ToRow<'a> = &'a dyn Fn(usize) -> usize;

impl Col<'_> {
    /// Row `row` of the batch, as its file counts it where the batch has an origin.
    fn row(&self, row: usize) -> u64 {
        self.origin.map_or(row as u64, |o| o.row(row))
    }

    /// An error about row `row` of the batch: its file, the row in the file, the column.
    fn at_row(&self, row: usize, what: impl fmt::Display) -> anyhow::Error {
        invalid(match self.origin {
            Some(o) => format!(
                "{}: row {}: column `{}`: {what}",
                o.file,
                o.row(row),
                self.name
            ),
            None => format!("column `{}`: row {row} of the batch: {what}", self.name),
        })
    }

    /// An error about the whole column: the file, the batch's rows in it, the column.
    fn whole(&self, what: impl fmt::Display) -> anyhow::Error {
        invalid(match self.origin {
            Some(o) => format!(
                "{}: rows {}..{}: column `{}`: {what}",
                o.file,
                o.first_row,
                o.row(self.rows),
                self.name
            ),
            None => format!("column `{}`: {what}", self.name),
        })
    }
}

/// One column: numbers and booleans of their own type (`float16` as `float32`), strings
/// and binaries as `tf.string`, fixed-size lists and lists of one length as one more
/// dimension. Nulls, ragged lists and other types are errors naming the column (and the
/// row: `to_row` maps an index in `array` to the batch's row holding it).
fn arrow_column(array: &ArrayRef, col: Col<'_>, to_row: ToRow<'_>) -> anyhow::Result<Value> {
    if array.null_count() > 0 {
        let at = (0..array.len()).find(|&i| array.is_null(i)).unwrap_or(0);
        return Err(col.at_row(
            to_row(at),
            "a null (streamload's tensors have no missing values)",
        ));
    }
    macro_rules! primitive {
        ($t:ty) => {
            Value::vector(array.as_primitive::<$t>().values().to_vec())
        };
    }
    fn strings<'a>(values: impl Iterator<Item = &'a [u8]>) -> Value {
        let data: Vec<Bytes> = values.map(Bytes::copy_from_slice).collect();
        Value::strings(ndarray::Array1::from(data).into_dyn())
    }
    let n = array.len();
    Ok(match array.data_type() {
        DataType::Boolean => Value::vector(array.as_boolean().values().iter().collect()),
        DataType::Int8 => primitive!(Int8Type),
        DataType::Int16 => primitive!(Int16Type),
        DataType::Int32 => primitive!(Int32Type),
        DataType::Int64 => primitive!(Int64Type),
        DataType::UInt8 => primitive!(UInt8Type),
        DataType::UInt16 => primitive!(UInt16Type),
        DataType::UInt32 => primitive!(UInt32Type),
        DataType::UInt64 => primitive!(UInt64Type),
        DataType::Float16 => Value::vector(
            array
                .as_primitive::<Float16Type>()
                .values()
                .iter()
                .map(|h| h.to_f32())
                .collect(),
        ),
        DataType::Float32 => primitive!(Float32Type),
        DataType::Float64 => primitive!(Float64Type),
        DataType::Utf8 => strings(array.as_string::<i32>().iter().flatten().map(str::as_bytes)),
        DataType::LargeUtf8 => {
            strings(array.as_string::<i64>().iter().flatten().map(str::as_bytes))
        }
        DataType::Utf8View => strings(array.as_string_view().iter().flatten().map(str::as_bytes)),
        DataType::Binary => strings(array.as_binary::<i32>().iter().flatten()),
        DataType::LargeBinary => strings(array.as_binary::<i64>().iter().flatten()),
        DataType::BinaryView => strings(array.as_binary_view().iter().flatten()),
        DataType::FixedSizeBinary(_) => strings(array.as_fixed_size_binary().iter().flatten()),
        DataType::FixedSizeList(_, size) => {
            let list = array.as_fixed_size_list();
            let size = usize::try_from(*size)?;
            let start = usize::try_from(list.value_offset(0).max(0))?;
            let values = list.values().slice(start, n * size);
            let up = |at: usize| to_row(at / size.max(1));
            nest(arrow_column(&values, col, &up)?, n, size, col)?
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let offsets: Vec<usize> = list.value_offsets().iter().map(|&o| o as usize).collect();
            dense_list(list.values(), &offsets, col, to_row)?
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            let offsets: Vec<usize> = list.value_offsets().iter().map(|&o| o as usize).collect();
            dense_list(list.values(), &offsets, col, to_row)?
        }
        DataType::Dictionary(_, _) => {
            // Categories (pandas' `category`): each row's value looked up.
            let dictionary = array.as_any_dictionary();
            let keys = dictionary.normalized_keys();
            // A bad value is in the first row that takes it.
            let up = |at: usize| to_row(keys.iter().position(|&k| k == at).unwrap_or(0));
            let values = arrow_column(dictionary.values(), col, &up)?;
            let rows: Vec<Value> = keys.iter().map(|&k| values.row(k)).collect();
            if rows.is_empty() {
                values
            } else {
                Value::stack(&rows)?
            }
        }
        other => {
            return Err(col.whole(format!(
                "Arrow type {other} is not read into a tensor (numbers, booleans, strings, \
                 binaries and lists of them are); leave it out with columns=[...]"
            )));
        }
    })
}

/// List rows (by `offsets`) that all have one length, as one more dimension.
fn dense_list(
    values: &ArrayRef,
    offsets: &[usize],
    col: Col<'_>,
    to_row: ToRow<'_>,
) -> anyhow::Result<Value> {
    let rows = offsets.len().saturating_sub(1);
    let (first, last) = (
        offsets.first().copied().unwrap_or(0),
        offsets.last().copied().unwrap_or(0),
    );
    let lengths = offsets.windows(2).map(|w| w[1] - w[0]);
    let length = lengths.clone().next().unwrap_or(0);
    let uneven = lengths.enumerate().find(|&(_, l)| l != length);
    if let Some((i, other)) = uneven
        && !col.ragged
    {
        return Err(col.at_row(
            to_row(i),
            format!(
                "ragged lists ({other} values where row {} has {length}): not a tensor; pad \
                 them when writing, or leave the column out with columns=[...]",
                col.row(to_row(0))
            ),
        ));
    }
    let values = values.slice(first, last - first);
    // Value `at` (of the sliced values) is in the list whose offsets hold it.
    let up = |at: usize| {
        to_row(
            offsets
                .partition_point(|&o| o <= first + at)
                .saturating_sub(1),
        )
    };
    let inner = arrow_column(&values, col, &up)?;
    if uneven.is_none() {
        return nest(inner, rows, length, col);
    }
    // Lists of several lengths, asked for as a ragged tensor: its values and row splits.
    if matches!(inner, Value::Ragged(_)) || inner.rows().map_or(true, |n| n != last - first) {
        return Err(col.whole("lists of lists of several lengths are not read"));
    }
    let splits: Vec<i64> = offsets.iter().map(|&o| (o - first) as i64).collect();
    Ok(Value::Ragged(Box::new(crate::value::Ragged {
        values: inner,
        row_splits: Array::from(ndarray::Array1::from(splits).into_dyn()),
    })))
}

/// `inner` (`rows * size` rows) as `rows` rows of `size`.
fn nest(inner: Value, rows: usize, size: usize, col: Col<'_>) -> anyhow::Result<Value> {
    let reshape_error = || col.whole("list values do not fit its shape");
    Ok(match inner {
        Value::Array(a) => {
            let mut shape = vec![rows, size];
            shape.extend_from_slice(&a.shape()[1..]);
            Value::array(a.reshape(&shape).ok_or_else(reshape_error)?)
        }
        Value::Strings(a) => {
            let mut shape = vec![rows, size];
            shape.extend_from_slice(&a.shape()[1..]);
            Value::strings(
                a.into_shape_with_order(IxDyn(&shape))
                    .map_err(|_| reshape_error())?,
            )
        }
        _ => return Err(reshape_error()),
    })
}

// ---------------------------------------------------------------------------------------
// HDF5

/// The element types `HDF5Dataset` reads (numpy's names).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Hdf5Type {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
    String,
}

impl Hdf5Type {
    pub(crate) fn parse(py: Python<'_>, name: &str) -> PyResult<Hdf5Type> {
        Ok(match name {
            "int8" => Hdf5Type::I8,
            "int16" => Hdf5Type::I16,
            "int32" => Hdf5Type::I32,
            "int64" => Hdf5Type::I64,
            "uint8" => Hdf5Type::U8,
            "uint16" => Hdf5Type::U16,
            "uint32" => Hdf5Type::U32,
            "uint64" => Hdf5Type::U64,
            "float16" => Hdf5Type::F16,
            "float32" => Hdf5Type::F32,
            "float64" => Hdf5Type::F64,
            "string" => Hdf5Type::String,
            other => {
                return Err(errors::invalid(
                    py,
                    format!(
                        "HDF5Dataset: dtype must be one of int8..int64, uint8..uint64, \
                         float16, float32, float64 or string, not {other:?}"
                    ),
                ));
            }
        })
    }
}

/// An HDF5 element type's arrays as a value.
trait Hdf5Value: Element + Sized {
    fn value(a: ArrayD<Self>) -> Value;
}

macro_rules! hdf5_numbers {
    ($($t:ty),*) => {$(
        impl Hdf5Value for $t {
            fn value(a: ArrayD<$t>) -> Value {
                Value::array(a)
            }
        }
    )*};
}
hdf5_numbers!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

impl Hdf5Value for f16 {
    /// numpy's `float16` is not one of streamload's tensor types: widened to `float32`.
    fn value(a: ArrayD<f16>) -> Value {
        Value::array(a.mapv(f32::from))
    }
}

impl Hdf5Value for String {
    fn value(a: ArrayD<String>) -> Value {
        Value::strings(a.mapv(Bytes::from))
    }
}

/// Runs `$body` with `$T` the Rust type of `$t`.
macro_rules! by_type {
    ($t:expr, $T:ident => $body:expr) => {
        match $t {
            Hdf5Type::I8 => {
                type $T = i8;
                $body
            }
            Hdf5Type::I16 => {
                type $T = i16;
                $body
            }
            Hdf5Type::I32 => {
                type $T = i32;
                $body
            }
            Hdf5Type::I64 => {
                type $T = i64;
                $body
            }
            Hdf5Type::U8 => {
                type $T = u8;
                $body
            }
            Hdf5Type::U16 => {
                type $T = u16;
                $body
            }
            Hdf5Type::U32 => {
                type $T = u32;
                $body
            }
            Hdf5Type::U64 => {
                type $T = u64;
                $body
            }
            Hdf5Type::F16 => {
                type $T = f16;
                $body
            }
            Hdf5Type::F32 => {
                type $T = f32;
                $body
            }
            Hdf5Type::F64 => {
                type $T = f64;
                $body
            }
            Hdf5Type::String => {
                type $T = String;
                $body
            }
        }
    };
}

/// The reader's arrays as values.
pub(crate) fn hdf5(reader: Hdf5Dataset, data: Hdf5Type) -> Dataset<Value> {
    by_type!(data, T => reader.build::<T>().map(T::value))
}

/// The element types of a labels dataset: the common ones, not every type (each pair of
/// types is code of its own).
#[derive(Clone, Copy, Debug)]
pub(crate) enum LabelType {
    I32,
    I64,
    U8,
    F32,
    F64,
}

impl LabelType {
    pub(crate) fn parse(py: Python<'_>, name: &str) -> PyResult<LabelType> {
        Ok(match name {
            "int32" => LabelType::I32,
            "int64" => LabelType::I64,
            "uint8" => LabelType::U8,
            "float32" => LabelType::F32,
            "float64" => LabelType::F64,
            other => {
                return Err(errors::invalid(
                    py,
                    format!(
                        "HDF5Dataset: labels_dtype must be int32, int64, uint8, float32 or \
                         float64, not {other:?}"
                    ),
                ));
            }
        })
    }
}

/// The reader's `(data, labels)` pairs as tuples.
pub(crate) fn hdf5_labeled(
    reader: Hdf5Dataset,
    data: Hdf5Type,
    labels: LabelType,
) -> Dataset<Value> {
    macro_rules! with_labels {
        ($L:ty) => {
            by_type!(data, T => reader
                .build_labeled::<T, $L>()
                .map(|(x, y)| Value::Tuple(vec![T::value(x), <$L>::value(y)])))
        };
    }
    match labels {
        LabelType::I32 => with_labels!(i32),
        LabelType::I64 => with_labels!(i64),
        LabelType::U8 => with_labels!(u8),
        LabelType::F32 => with_labels!(f32),
        LabelType::F64 => with_labels!(f64),
    }
}
