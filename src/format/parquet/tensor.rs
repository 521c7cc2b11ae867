//! Columns of a [`RecordBatch`] as the crate's [`Tensor`]s or as `ndarray` views.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    ArrowPrimitiveType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use bytes::Bytes;
use ndarray::{ArrayViewD, IxDyn};

use super::BatchOrigin;
use crate::tensor::{Tensor, Values};

/// An element type [`column_view`] can view: a primitive Arrow type's native type (`i8` to
/// `i64`, `u8` to `u64`, `f32`, `f64`).
pub trait ViewElement: arrow_array::ArrowNativeTypeOp + private::Sealed {
    /// The Arrow type whose values are `Self`.
    #[doc(hidden)]
    type Arrow: ArrowPrimitiveType<Native = Self>;
}

mod private {
    pub trait Sealed {}
}

macro_rules! view_element {
    ($($native:ty => $arrow:ty),*) => {$(
        impl private::Sealed for $native {}
        impl ViewElement for $native {
            type Arrow = $arrow;
        }
    )*};
}

view_element!(
    i8 => Int8Type, i16 => Int16Type, i32 => Int32Type, i64 => Int64Type,
    u8 => UInt8Type, u16 => UInt16Type, u32 => UInt32Type, u64 => UInt64Type,
    f32 => Float32Type, f64 => Float64Type
);

fn column<'a>(batch: &'a RecordBatch, name: &str) -> anyhow::Result<&'a dyn Array> {
    batch
        .column_by_name(name)
        .map(|c| c.as_ref())
        .ok_or_else(|| {
            let names: Vec<String> = batch
                .schema()
                .fields()
                .iter()
                .map(|f| format!("`{}`", f.name()))
                .collect();
            let names = names.join(", ");
            match BatchOrigin::of(batch) {
                Some(o) => anyhow::anyhow!(
                    "{}: no column `{name}` in the batch (it has {names})",
                    o.file
                ),
                None => anyhow::anyhow!("no column `{name}` in the batch (it has {names})"),
            }
        })
}

/// The column being converted, to name where a bad value is: its name, and its batch's
/// rows and origin.
#[derive(Clone, Copy)]
struct Col<'a> {
    name: &'a str,
    rows: usize,
    origin: Option<BatchOrigin<'a>>,
}

/// Maps an index in a (nested) array to the row of the batch holding it: called only to
/// name a bad value, so nested lists cost nothing until then.
type ToRow<'a> = &'a dyn Fn(usize) -> usize;

impl<'a> Col<'a> {
    fn new(batch: &'a RecordBatch, name: &'a str) -> Self {
        Col {
            name,
            rows: batch.num_rows(),
            origin: BatchOrigin::of(batch),
        }
    }

    /// Row `row` of the batch, as the file counts it where the batch has an origin.
    fn row(&self, row: usize) -> u64 {
        self.origin.map_or(row as u64, |o| o.row(row))
    }

    /// An error about row `row` of the batch: the file, the row in it and the column.
    fn at_row(&self, row: usize, what: impl std::fmt::Display) -> anyhow::Error {
        match self.origin {
            Some(o) => anyhow::anyhow!(
                "{}: row {}: column `{}`: {what}",
                o.file,
                o.row(row),
                self.name
            ),
            None => anyhow::anyhow!("column `{}`: row {row} of the batch: {what}", self.name),
        }
    }

    /// An error about the whole column: the file, the batch's rows and the column.
    fn whole(&self, what: impl std::fmt::Display) -> anyhow::Error {
        match self.origin {
            Some(o) => anyhow::anyhow!(
                "{}: rows {}..{}: column `{}`: {what}",
                o.file,
                o.first_row,
                o.row(self.rows),
                self.name
            ),
            None => anyhow::anyhow!("column `{}`: {what}", self.name),
        }
    }
}

/// An error when `array` has a null (a tensor has no place for one), naming its row; the
/// nulls are searched only when there is one.
fn no_nulls(array: &dyn Array, col: Col<'_>, to_row: ToRow<'_>) -> anyhow::Result<()> {
    if let Some(nulls) = array.logical_nulls().filter(|n| n.null_count() > 0) {
        let at = nulls.iter().position(|valid| !valid).unwrap_or(0);
        return Err(col.at_row(to_row(at), "a null (a tensor has no nulls)"));
    }
    Ok(())
}

/// Column `name` of `batch` as an `ndarray` view of its values, without copying: a
/// primitive column of `T` as `[rows]`, a fixed-size list of them as `[rows, size]` (nested
/// fixed-size lists add a dimension each).
///
/// ```
/// use std::sync::Arc;
/// use streamload::format::parquet::{RecordBatch, column_view};
/// use streamload::format::parquet::arrow_array::{ArrayRef, FixedSizeListArray, types::Float32Type};
///
/// let weights: ArrayRef = Arc::new(FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
///     [Some([Some(1.0), Some(2.0)]), Some([Some(3.0), Some(4.0)])],
///     2,
/// ));
/// let batch = RecordBatch::try_from_iter([("weights", weights)])?;
/// let view = column_view::<f32>(&batch, "weights")?;
/// assert_eq!(view.shape(), [2, 2]);
/// assert_eq!(view[[1, 0]], 3.0);
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// No such column, a column of another type (naming it), or a null in it (naming its row:
/// in the file and counted from 0 for a batch of [`ParquetDataset`](super::ParquetDataset),
/// with the file; see [`BatchOrigin`]).
pub fn column_view<'a, T: ViewElement>(
    batch: &'a RecordBatch,
    name: &str,
) -> anyhow::Result<ArrayViewD<'a, T>> {
    let array = column(batch, name)?;
    let mut shape = vec![array.len()];
    let values = flat::<T>(array, Col::new(batch, name), &mut shape, &|row| row)?;
    Ok(ArrayViewD::from_shape(IxDyn(&shape), values)?)
}

/// The values of `array`, a primitive array of `T` or fixed-size lists of them, with each
/// list's size pushed on `shape`.
fn flat<'a, T: ViewElement>(
    array: &'a dyn Array,
    col: Col<'_>,
    shape: &mut Vec<usize>,
    to_row: ToRow<'_>,
) -> anyhow::Result<&'a [T]> {
    no_nulls(array, col, to_row)?;
    if let Some(values) = array.as_primitive_opt::<T::Arrow>() {
        return Ok(values.values());
    }
    if let Some(list) = array.as_fixed_size_list_opt() {
        let size = usize::try_from(list.value_length())?;
        shape.push(size);
        // Sliced lists slice their values too: `values()` holds exactly their elements.
        let up = |at: usize| to_row(at / size.max(1));
        return flat::<T>(list.values().as_ref(), col, shape, &up);
    }
    Err(col.whole(format!(
        "{} is not {} or a fixed-size list of it",
        array.data_type(),
        T::Arrow::DATA_TYPE
    )))
}

/// Column `name` of `batch` as a [`Tensor`]: integer columns as `int64` (widened), `float32`
/// as `float`, strings and binary (plain or dictionary-encoded) as `string`, each of shape
/// `[rows]`; fixed-size lists of them (and lists whose rows all have one length) as
/// `[rows, size]`, nested ones with a dimension each. Numbers are copied once, as one
/// contiguous buffer (never row by row); strings are copied value by value.
///
/// ```
/// use std::sync::Arc;
/// use streamload::format::parquet::{RecordBatch, column_tensor};
/// use streamload::format::parquet::arrow_array::{ArrayRef, Int32Array};
///
/// let label: ArrayRef = Arc::new(Int32Array::from(vec![3, 1, 4]));
/// let batch = RecordBatch::try_from_iter([("label", label)])?;
/// let tensor = column_tensor(&batch, "label")?;
/// assert_eq!(tensor.shape(), [3]);
/// assert_eq!(tensor.as_slice::<i64>(), Some(&[3i64, 1, 4][..]));
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// No such column, a type with no tensor type (`float64`: view it with
/// [`column_view`]; booleans, structs), or a null or ragged lists in it (naming the row: in
/// the file and counted from 0 for a batch of [`ParquetDataset`](super::ParquetDataset), with
/// the file; see [`BatchOrigin`]).
pub fn column_tensor(batch: &RecordBatch, name: &str) -> anyhow::Result<Tensor> {
    let array = column(batch, name)?;
    let mut shape = vec![array.len()];
    let values = tensor_values(array, Col::new(batch, name), &mut shape, &|row| row)?;
    Tensor::new(shape, values)
}

/// Column `name` of `batch` as documents of token ids, one per row: a column of lists
/// (`list` or `large_list`, each row its own length) of integers (`int8` to `int64`, `uint8`
/// to `uint64`), the way pretraining corpora store tokenized text. Each id is checked to fit
/// in `u32`. Read a file's documents with
/// `ParquetDataset::new(files).columns(["tokens"]).build().try_map(|b| column_token_ids(&b, "tokens")).unbatch()`,
/// then [`pack`](crate::Dataset::pack) them.
///
/// ```
/// use std::sync::Arc;
/// use streamload::format::parquet::{RecordBatch, column_token_ids};
/// use streamload::format::parquet::arrow_array::{ArrayRef, ListArray, types::Int32Type};
///
/// let tokens: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
///     Some(vec![Some(5), Some(6), Some(7)]),
///     Some(vec![Some(8)]),
/// ]));
/// let batch = RecordBatch::try_from_iter([("tokens", tokens)])?;
/// assert_eq!(column_token_ids(&batch, "tokens")?, [vec![5, 6, 7], vec![8]]);
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// No such column, a column that is not lists of integers, a null (a row or an id) or an id
/// outside `0..2^32`, naming the row (in the file, for a batch of
/// [`ParquetDataset`](super::ParquetDataset)) and the column.
pub fn column_token_ids(batch: &RecordBatch, name: &str) -> anyhow::Result<Vec<Vec<u32>>> {
    let array = column(batch, name)?;
    let col = Col::new(batch, name);
    no_nulls(array, col, &|row| row)?;
    let (offsets, values): (Vec<usize>, &dyn Array) = if let Some(list) = array.as_list_opt::<i32>()
    {
        let offsets = list.offsets().iter().map(|&o| o as usize).collect();
        (offsets, list.values().as_ref())
    } else if let Some(list) = array.as_list_opt::<i64>() {
        let offsets = list.offsets().iter().map(|&o| o as usize).collect();
        (offsets, list.values().as_ref())
    } else {
        return Err(col.whole(format!(
            "{} is not a list of integers (token ids)",
            array.data_type()
        )));
    };
    // A sliced batch's lists point into a longer child array: only their values are read.
    let first = offsets.first().copied().unwrap_or(0);
    let values = values.slice(first, offsets.last().copied().unwrap_or(0) - first);
    let values = values.as_ref();
    // The row holding value `at` (for errors only).
    let row_of = |at: usize| {
        offsets
            .partition_point(|&o| o <= at + first)
            .saturating_sub(1)
    };
    no_nulls(values, col, &row_of)?;
    let ids: Vec<u32> = match ids_of(values) {
        Some(Ok(ids)) => ids,
        Some(Err((at, value))) => {
            return Err(col.at_row(row_of(at), format!("token id {value} is outside 0..2^32")));
        }
        None => {
            return Err(col.whole(format!(
                "{} is not a list of integers (token ids)",
                array.data_type()
            )));
        }
    };
    Ok(offsets
        .windows(2)
        .map(|w| ids[w[0] - first..w[1] - first].to_vec())
        .collect())
}

/// The values of an integer array as `u32` ids, or the first that does not fit (its index and
/// value); `None` for an array of another type.
fn ids_of(values: &dyn Array) -> Option<Result<Vec<u32>, (usize, i128)>> {
    fn convert<T: ArrowPrimitiveType>(values: &dyn Array) -> Option<Result<Vec<u32>, (usize, i128)>>
    where
        T::Native: Into<i128>,
    {
        let values = values.as_primitive_opt::<T>()?;
        Some(
            values
                .values()
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let v: i128 = v.into();
                    u32::try_from(v).map_err(|_| (i, v))
                })
                .collect(),
        )
    }
    convert::<UInt32Type>(values)
        .or_else(|| convert::<Int32Type>(values))
        .or_else(|| convert::<Int64Type>(values))
        .or_else(|| convert::<UInt16Type>(values))
        .or_else(|| convert::<Int16Type>(values))
        .or_else(|| convert::<UInt8Type>(values))
        .or_else(|| convert::<Int8Type>(values))
        .or_else(|| convert::<UInt64Type>(values))
}

fn widen<T: ArrowPrimitiveType>(array: &dyn Array) -> Option<Values>
where
    T::Native: Into<i64>,
{
    let values = array.as_primitive_opt::<T>()?;
    Some(Values::Int64(
        values.values().iter().map(|&v| v.into()).collect(),
    ))
}

fn tensor_values(
    array: &dyn Array,
    col: Col<'_>,
    shape: &mut Vec<usize>,
    to_row: ToRow<'_>,
) -> anyhow::Result<Values> {
    no_nulls(array, col, to_row)?;
    let values = match array.data_type() {
        DataType::Int64 => Some(Values::Int64(
            array.as_primitive::<Int64Type>().values().to_vec(),
        )),
        DataType::Float32 => Some(Values::Float32(
            array.as_primitive::<Float32Type>().values().to_vec(),
        )),
        DataType::Int32 => widen::<Int32Type>(array),
        DataType::Int16 => widen::<Int16Type>(array),
        DataType::Int8 => widen::<Int8Type>(array),
        DataType::UInt32 => widen::<UInt32Type>(array),
        DataType::UInt16 => widen::<UInt16Type>(array),
        DataType::UInt8 => widen::<UInt8Type>(array),
        DataType::UInt64 => {
            let values = array.as_primitive::<UInt64Type>().values();
            let ints = values
                .iter()
                .map(|&v| i64::try_from(v))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| {
                    let at = values.iter().position(|&v| i64::try_from(v).is_err());
                    col.at_row(to_row(at.unwrap_or(0)), "a uint64 past int64's range")
                })?;
            Some(Values::Int64(ints))
        }
        DataType::FixedSizeList(_, size) => {
            let list = array.as_fixed_size_list();
            let size = usize::try_from(*size)?;
            shape.push(size);
            let up = |at: usize| to_row(at / size.max(1));
            return tensor_values(list.values().as_ref(), col, shape, &up);
        }
        DataType::List(_) | DataType::LargeList(_) => {
            // Lists whose rows all have one length: a dense dimension.
            let (offsets, values): (Vec<usize>, _) = match array.as_list_opt::<i32>() {
                Some(list) => (
                    list.value_offsets().iter().map(|&o| o as usize).collect(),
                    list.values(),
                ),
                None => {
                    let list = array.as_list::<i64>();
                    (
                        list.value_offsets().iter().map(|&o| o as usize).collect(),
                        list.values(),
                    )
                }
            };
            let lengths: Vec<usize> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
            let size = lengths.first().copied().unwrap_or(0);
            if let Some(row) = lengths.iter().position(|&l| l != size) {
                return Err(col.at_row(
                    to_row(row),
                    format!(
                        "{} values where row {} has {size} (ragged lists: a tensor needs one \
                         length)",
                        lengths[row],
                        col.row(to_row(0))
                    ),
                ));
            }
            shape.push(size);
            let (first, last) = (
                offsets.first().copied().unwrap_or(0),
                offsets.last().copied().unwrap_or(0),
            );
            let values = values.slice(first, last - first);
            // Value `at` (of the sliced values) is in the list whose offsets hold it.
            let up = |at: usize| {
                to_row(
                    offsets
                        .partition_point(|&o| o <= first + at)
                        .saturating_sub(1),
                )
            };
            return tensor_values(values.as_ref(), col, shape, &up);
        }
        _ => strings(array),
    };
    values.ok_or_else(|| {
        col.whole(format!(
            "{} has no tensor type (int64, float32, strings; view float64 with column_view)",
            array.data_type()
        ))
    })
}

/// Strings and binary values, plain or dictionary-encoded, as `Values::String`.
fn strings(array: &dyn Array) -> Option<Values> {
    if let Some(dictionary) = array.as_any_dictionary_opt() {
        let Some(Values::String(values)) = strings(dictionary.values().as_ref()) else {
            return None;
        };
        let keys = dictionary.normalized_keys();
        return Some(Values::String(
            keys.into_iter().map(|k| values[k].clone()).collect(),
        ));
    }
    let copy = |v: &[u8]| Bytes::copy_from_slice(v);
    let values: Vec<Bytes> = match array.data_type() {
        DataType::Utf8 => array
            .as_string::<i32>()
            .iter()
            .map(|v| copy(v.unwrap_or_default().as_bytes()))
            .collect(),
        DataType::LargeUtf8 => array
            .as_string::<i64>()
            .iter()
            .map(|v| copy(v.unwrap_or_default().as_bytes()))
            .collect(),
        DataType::Utf8View => array
            .as_string_view()
            .iter()
            .map(|v| copy(v.unwrap_or_default().as_bytes()))
            .collect(),
        DataType::Binary => array
            .as_binary::<i32>()
            .iter()
            .map(|v| copy(v.unwrap_or_default()))
            .collect(),
        DataType::LargeBinary => array
            .as_binary::<i64>()
            .iter()
            .map(|v| copy(v.unwrap_or_default()))
            .collect(),
        DataType::BinaryView => array
            .as_binary_view()
            .iter()
            .map(|v| copy(v.unwrap_or_default()))
            .collect(),
        DataType::FixedSizeBinary(_) => array
            .as_fixed_size_binary()
            .iter()
            .map(|v| copy(v.unwrap_or_default()))
            .collect(),
        _ => return None,
    };
    Some(Values::String(values))
}
