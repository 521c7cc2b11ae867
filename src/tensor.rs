//! Tensors: what parsers hand to a model, a flat buffer of one data type plus a shape.
//!
//! [`Tensor`] is dense and row-major, and views as an [`ndarray`] array without copying
//! ([`Tensor::view`]); [`SparseTensor`] is TensorFlow's COO layout (indices, values,
//! dense shape), the output of a `VarLenFeature`; [`RaggedValues`] is a `tf.RaggedTensor` of
//! any data type (values plus row splits), the output of a `RaggedFeature` in a batch.
//! Strings are [`Bytes`], usually slices of the record they were parsed from, so parsing
//! copies no string payload.
//!
//! Batches: [`Collate`] stacks elements (scalars, `Vec`s, `ndarray` arrays, tuples of them)
//! into contiguous arrays with a leading batch dimension; [`PaddedCollate`] pads them to a
//! common shape first; [`RaggedCollate`] concatenates rows of different lengths into a
//! [`RaggedTensor`]. [`Unbatch`] splits any of these batches back into rows.

mod collate;
mod ragged;
mod unbatch;

pub use collate::{Collate, PaddedCollate, PaddedShape, RaggedCollate, Scalar};
pub use ragged::RaggedTensor;
pub use unbatch::Unbatch;

use std::fmt;

use bytes::Bytes;
use ndarray::{ArrayViewD, IxDyn};

use crate::Error;

/// A tensor's element type, as `tf.train.Example` stores them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `tf.int64`.
    Int64,
    /// `tf.float32`.
    Float32,
    /// `tf.string`: byte strings.
    String,
}

impl fmt::Display for DType {
    /// TensorFlow's own names (`DataTypeString`): `int64`, `float`, `string`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::Int64 => "int64",
            DType::Float32 => "float",
            DType::String => "string",
        })
    }
}

/// A flat list of values of one [`DType`].
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// 64-bit integers.
    Int64(Vec<i64>),
    /// 32-bit floats.
    Float32(Vec<f32>),
    /// Byte strings.
    String(Vec<Bytes>),
}

impl Values {
    /// An empty list of `dtype`.
    pub fn empty(dtype: DType) -> Values {
        Values::with_capacity(dtype, 0)
    }

    pub(crate) fn with_capacity(dtype: DType, capacity: usize) -> Values {
        match dtype {
            DType::Int64 => Values::Int64(Vec::with_capacity(capacity)),
            DType::Float32 => Values::Float32(Vec::with_capacity(capacity)),
            DType::String => Values::String(Vec::with_capacity(capacity)),
        }
    }

    /// The data type.
    pub fn dtype(&self) -> DType {
        match self {
            Values::Int64(_) => DType::Int64,
            Values::Float32(_) => DType::Float32,
            Values::String(_) => DType::String,
        }
    }

    /// How many values.
    pub fn len(&self) -> usize {
        match self {
            Values::Int64(v) => v.len(),
            Values::Float32(v) => v.len(),
            Values::String(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends every value of `other` (which has the same data type).
    pub(crate) fn extend_from(&mut self, other: &Values) {
        match (self, other) {
            (Values::Int64(a), Values::Int64(b)) => a.extend_from_slice(b),
            (Values::Float32(a), Values::Float32(b)) => a.extend_from_slice(b),
            (Values::String(a), Values::String(b)) => a.extend_from_slice(b),
            (a, b) => unreachable!("extend {:?} with {:?}", a.dtype(), b.dtype()),
        }
    }

    /// Appends values `range` of `other` (which has the same data type).
    pub(crate) fn extend_range(&mut self, other: &Values, range: std::ops::Range<usize>) {
        match (self, other) {
            (Values::Int64(a), Values::Int64(b)) => a.extend_from_slice(&b[range]),
            (Values::Float32(a), Values::Float32(b)) => a.extend_from_slice(&b[range]),
            (Values::String(a), Values::String(b)) => a.extend_from_slice(&b[range]),
            (a, b) => unreachable!("extend {:?} with {:?}", a.dtype(), b.dtype()),
        }
    }

    /// Appends value `index` of `other` `count` times (padding).
    pub(crate) fn extend_repeat(&mut self, other: &Values, index: usize, count: usize) {
        match (self, other) {
            (Values::Int64(a), Values::Int64(b)) => a.extend(std::iter::repeat_n(b[index], count)),
            (Values::Float32(a), Values::Float32(b)) => {
                a.extend(std::iter::repeat_n(b[index], count))
            }
            (Values::String(a), Values::String(b)) => {
                a.extend(std::iter::repeat_n(b[index].clone(), count))
            }
            (a, b) => unreachable!("pad {:?} with {:?}", a.dtype(), b.dtype()),
        }
    }

    /// Appends `count` zeros (empty strings).
    pub(crate) fn extend_zeros(&mut self, count: usize) {
        match self {
            Values::Int64(a) => a.resize(a.len() + count, 0),
            Values::Float32(a) => a.resize(a.len() + count, 0.0),
            Values::String(a) => a.resize(a.len() + count, Bytes::new()),
        }
    }
}

impl From<Vec<i64>> for Values {
    fn from(v: Vec<i64>) -> Values {
        Values::Int64(v)
    }
}

impl From<Vec<f32>> for Values {
    fn from(v: Vec<f32>) -> Values {
        Values::Float32(v)
    }
}

impl From<Vec<Bytes>> for Values {
    fn from(v: Vec<Bytes>) -> Values {
        Values::String(v)
    }
}

impl From<Vec<&str>> for Values {
    fn from(v: Vec<&str>) -> Values {
        Values::String(
            v.into_iter()
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect(),
        )
    }
}

impl From<i64> for Values {
    fn from(v: i64) -> Values {
        Values::Int64(vec![v])
    }
}

impl From<f32> for Values {
    fn from(v: f32) -> Values {
        Values::Float32(vec![v])
    }
}

impl From<&str> for Values {
    fn from(v: &str) -> Values {
        Values::String(vec![Bytes::copy_from_slice(v.as_bytes())])
    }
}

/// A Rust type a [`Tensor`] can hold: `i64`, `f32` or [`Bytes`].
pub trait Element: Sized {
    /// The matching data type.
    const DTYPE: DType;
    /// The values as a slice of `Self`, when their type matches.
    fn slice(values: &Values) -> Option<&[Self]>;
    /// The values as a vector of `Self`, moved, when their type matches.
    fn take(values: Values) -> Option<Vec<Self>>;
}

impl Element for i64 {
    const DTYPE: DType = DType::Int64;
    fn slice(values: &Values) -> Option<&[i64]> {
        match values {
            Values::Int64(v) => Some(v),
            _ => None,
        }
    }
    fn take(values: Values) -> Option<Vec<i64>> {
        match values {
            Values::Int64(v) => Some(v),
            _ => None,
        }
    }
}

impl Element for f32 {
    const DTYPE: DType = DType::Float32;
    fn slice(values: &Values) -> Option<&[f32]> {
        match values {
            Values::Float32(v) => Some(v),
            _ => None,
        }
    }
    fn take(values: Values) -> Option<Vec<f32>> {
        match values {
            Values::Float32(v) => Some(v),
            _ => None,
        }
    }
}

impl Element for Bytes {
    const DTYPE: DType = DType::String;
    fn slice(values: &Values) -> Option<&[Bytes]> {
        match values {
            Values::String(v) => Some(v),
            _ => None,
        }
    }
    fn take(values: Values) -> Option<Vec<Bytes>> {
        match values {
            Values::String(v) => Some(v),
            _ => None,
        }
    }
}

/// A dense, row-major tensor.
///
/// ```
/// use streamload::tensor::{Tensor, Values};
/// let t = Tensor::new(vec![2, 3], Values::Int64((0..6).collect()))?;
/// let view = t.view::<i64>()?;
/// assert_eq!(view[[1, 2]], 5);
/// assert_eq!(t.as_slice::<i64>(), Some(&[0, 1, 2, 3, 4, 5][..]));
/// # anyhow::Ok(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    values: Values,
}

impl Tensor {
    /// A tensor of `shape` over `values` (row-major).
    ///
    /// # Errors
    ///
    /// When the number of values is not the product of the shape.
    pub fn new(shape: Vec<usize>, values: Values) -> anyhow::Result<Tensor> {
        let want: usize = shape.iter().product();
        if want != values.len() {
            return Err(Error::InvalidArgument(format!(
                "a tensor of shape {shape:?} needs {want} values, got {}",
                values.len()
            ))
            .into());
        }
        Ok(Tensor { shape, values })
    }

    pub(crate) fn new_unchecked(shape: Vec<usize>, values: Values) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), values.len());
        Tensor { shape, values }
    }

    /// The shape (empty for a scalar).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The data type.
    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }

    /// The values, row-major.
    pub fn values(&self) -> &Values {
        &self.values
    }

    /// Takes the values out, row-major.
    pub fn into_values(self) -> Values {
        self.values
    }

    /// The values as a flat slice of `T`, when `T` is the tensor's type.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        T::slice(&self.values)
    }

    /// The tensor as an `ndarray` view, without copying.
    ///
    /// # Errors
    ///
    /// When `T` is not the tensor's type.
    pub fn view<T: Element>(&self) -> anyhow::Result<ArrayViewD<'_, T>> {
        let data = T::slice(&self.values).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "tensor holds {} values, not {}",
                self.dtype(),
                T::DTYPE
            ))
        })?;
        Ok(ArrayViewD::from_shape(IxDyn(&self.shape), data)?)
    }
}

/// A sparse tensor in COO layout, as TensorFlow's `tf.sparse.SparseTensor`.
///
/// `indices` holds `values.len()` rows of `dense_shape.len()` coordinates each, in row-major
/// order.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseTensor {
    indices: Vec<i64>,
    values: Values,
    dense_shape: Vec<usize>,
}

impl SparseTensor {
    /// A sparse tensor; `indices` is flat, `values.len() * dense_shape.len()` long.
    ///
    /// # Errors
    ///
    /// When the lengths do not agree.
    pub fn new(indices: Vec<i64>, values: Values, dense_shape: Vec<usize>) -> anyhow::Result<Self> {
        if indices.len() != values.len() * dense_shape.len() {
            return Err(Error::InvalidArgument(format!(
                "a sparse tensor of rank {} with {} values needs {} indices, got {}",
                dense_shape.len(),
                values.len(),
                values.len() * dense_shape.len(),
                indices.len()
            ))
            .into());
        }
        Ok(SparseTensor {
            indices,
            values,
            dense_shape,
        })
    }

    pub(crate) fn new_unchecked(
        indices: Vec<i64>,
        values: Values,
        dense_shape: Vec<usize>,
    ) -> Self {
        debug_assert_eq!(indices.len(), values.len() * dense_shape.len());
        SparseTensor {
            indices,
            values,
            dense_shape,
        }
    }

    /// The coordinates of value `i`.
    pub fn coordinates(&self, i: usize) -> &[i64] {
        let rank = self.dense_shape.len();
        &self.indices[i * rank..(i + 1) * rank]
    }

    /// Every coordinate, flat (row-major `[values.len(), rank]`).
    pub fn indices(&self) -> &[i64] {
        &self.indices
    }

    /// The values.
    pub fn values(&self) -> &Values {
        &self.values
    }

    /// The shape of the dense tensor this one stands for.
    pub fn dense_shape(&self) -> &[usize] {
        &self.dense_shape
    }

    /// The data type.
    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }
}

/// A batch of rows of different lengths over values of any [`DType`]: TensorFlow's
/// `tf.RaggedTensor` with one ragged dimension, the output of a `RaggedFeature` in
/// [`parse_example`](crate::format::parse_example). Row `i` is
/// `values[row_splits[i]..row_splits[i + 1]]`; the row splits are `i64` (TensorFlow's
/// `RaggedFeature` makes `int32` ones by default: the same numbers). [`RaggedValues::to_ragged`]
/// gives the typed
/// [`RaggedTensor`] (an `ndarray` buffer) without copying the values.
///
/// ```
/// use streamload::tensor::{RaggedValues, Values};
///
/// let t = RaggedValues::new(Values::Int64(vec![1, 2, 3]), vec![0, 2, 2, 3])?;
/// assert_eq!(t.nrows(), 3);
/// assert_eq!(t.row_lengths().collect::<Vec<_>>(), [2, 0, 1]);
/// assert_eq!(t.to_ragged::<i64>()?.to_vecs(), vec![vec![1, 2], vec![], vec![3]]);
/// # anyhow::Ok(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RaggedValues {
    values: Values,
    row_splits: Vec<i64>,
}

impl RaggedValues {
    /// Rows over `values` split at `row_splits` (`tf.RaggedTensor.from_row_splits`).
    ///
    /// # Errors
    ///
    /// When `row_splits` does not start at 0, decreases, or does not end at the number of
    /// values.
    pub fn new(values: Values, row_splits: Vec<i64>) -> anyhow::Result<Self> {
        let len = values.len() as i64;
        let ends_right = row_splits.first() == Some(&0) && row_splits.last() == Some(&len);
        if !ends_right || row_splits.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::InvalidArgument(format!(
                "invalid ragged tensor: row_splits {row_splits:?} must start at 0, never \
                 decrease and end at {len}, the number of values"
            ))
            .into());
        }
        Ok(RaggedValues { values, row_splits })
    }

    pub(crate) fn new_unchecked(values: Values, row_splits: Vec<i64>) -> Self {
        debug_assert_eq!(row_splits.last(), Some(&(values.len() as i64)));
        RaggedValues { values, row_splits }
    }

    /// The rows' values, concatenated.
    pub fn values(&self) -> &Values {
        &self.values
    }

    /// Where each row starts, plus the end: `nrows() + 1` offsets.
    pub fn row_splits(&self) -> &[i64] {
        &self.row_splits
    }

    /// How many rows.
    pub fn nrows(&self) -> usize {
        self.row_splits.len().saturating_sub(1)
    }

    /// Each row's length.
    pub fn row_lengths(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.row_splits.windows(2).map(|w| (w[1] - w[0]) as usize)
    }

    /// The data type.
    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }

    /// The values and the row splits.
    pub fn into_parts(self) -> (Values, Vec<i64>) {
        (self.values, self.row_splits)
    }

    /// The typed [`RaggedTensor`] (values as an `ndarray` vector), moving the values.
    ///
    /// # Errors
    ///
    /// When `T` is not the values' type.
    pub fn into_ragged<T: Element>(self) -> anyhow::Result<RaggedTensor<T>> {
        let dtype = self.dtype();
        let Some(values) = T::take(self.values) else {
            return Err(Error::InvalidArgument(format!(
                "ragged tensor holds {dtype} values, not {}",
                T::DTYPE
            ))
            .into());
        };
        RaggedTensor::new(ndarray::Array1::from_vec(values), self.row_splits)
    }

    /// The typed [`RaggedTensor`], copying the values (see [`RaggedValues::into_ragged`]).
    ///
    /// # Errors
    ///
    /// When `T` is not the values' type.
    pub fn to_ragged<T: Element + Clone>(&self) -> anyhow::Result<RaggedTensor<T>> {
        self.clone().into_ragged()
    }
}

/// A list of byte strings that share one buffer: the text they were split from plus each
/// string's span in it. The output of splitting a line into words (tf.strings.split on one
/// string, a row of a ragged string tensor) for the price of one small allocation: no copy of
/// the text and no reference count per word.
///
/// ```
/// use bytes::Bytes;
/// use streamload::tensor::StringList;
///
/// let words = StringList::split(Bytes::from_static(b"the quick  fox"), b' ');
/// assert_eq!(words.iter().collect::<Vec<_>>(), [&b"the"[..], b"quick", b"", b"fox"]);
/// let words = StringList::split_whitespace(Bytes::from_static(b" the quick  fox\t"));
/// assert_eq!(words.len(), 3);
/// assert_eq!(words.get(1), Some(&b"quick"[..]));
/// assert_eq!(words.to_bytes(2).as_deref(), Some(&b"fox"[..]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct StringList {
    text: Bytes,
    /// `(start, end)` of each string in `text`.
    spans: Vec<(usize, usize)>,
}

impl StringList {
    /// Splits `text` at every `sep` byte, as Python's `str.split(sep)` and tf.strings.split
    /// with a separator: adjacent separators delimit empty strings, and an empty text is one
    /// empty string.
    pub fn split(text: Bytes, sep: u8) -> StringList {
        let mut spans = Vec::with_capacity(16);
        let mut start = 0;
        for_each_byte(&text, sep, |at| {
            spans.push((start, at));
            start = at + 1;
        });
        spans.push((start, text.len()));
        StringList { text, spans }
    }

    /// Splits `text` at runs of whitespace (space, `\t`, `\n`, `\v`, `\f`, `\r`: C's
    /// `isspace`), as tf.strings.split without a separator: no empty strings.
    pub fn split_whitespace(text: Bytes) -> StringList {
        let mut spans = Vec::with_capacity(16);
        let mut start = None;
        for (i, b) in text.iter().enumerate() {
            match (crate::text::is_space(b), start) {
                (true, Some(s)) => {
                    spans.push((s, i));
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        if let Some(s) = start {
            spans.push((s, text.len()));
        }
        StringList { text, spans }
    }

    /// How many strings.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// String `i`.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let &(start, end) = self.spans.get(i)?;
        self.text.get(start..end)
    }

    /// String `i` as `Bytes` sharing the text's buffer.
    pub fn to_bytes(&self, i: usize) -> Option<Bytes> {
        let &(start, end) = self.spans.get(i)?;
        Some(self.text.slice(start..end))
    }

    /// The strings in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.spans
            .iter()
            .map(|&(start, end)| &self.text[start..end])
    }

    /// The text the strings were split from.
    pub fn text(&self) -> &Bytes {
        &self.text
    }
}

/// Calls `f` with the index of each `byte` in `text`, in order. Lines and sentences are
/// short, where a vectorised search's set-up per call costs more than the search. This
/// compares eight bytes at a time (SWAR) and gathers the matches of up to 64 bytes into one
/// bit mask before visiting them, so the branches that depend on the data (one per mask and
/// one per match) stay few; the last partial word is read as the word that ends the text.
fn for_each_byte(text: &[u8], byte: u8, mut f: impl FnMut(usize)) {
    let pattern = 0x0101_0101_0101_0101 * u64::from(byte);
    let tail = text.len() % 8;
    let tail_mask = match text.last_chunk::<8>() {
        _ if tail == 0 => 0,
        Some(last) => word_mask(u64::from_le_bytes(*last), pattern) >> (8 - tail),
        None => (text.iter().enumerate()).fold(0, |m, (i, &b)| m | u64::from(b == byte) << i),
    };
    let mut visit = |mut mask: u64, base: usize| {
        while mask != 0 {
            f(base + mask.trailing_zeros() as usize);
            mask &= mask - 1;
        }
    };
    // The matches of up to eight whole words, bit `i` for byte `i`.
    let gather = |bytes: &[u8]| {
        (bytes.chunks_exact(8).enumerate()).fold(0, |m, (k, w)| {
            let w = u64::from_le_bytes(w.try_into().unwrap_or_default());
            m | word_mask(w, pattern) << (8 * k)
        })
    };
    let mut groups = text.chunks_exact(64);
    let mut base = 0;
    for group in &mut groups {
        visit(gather(group), base);
        base += 64;
    }
    let rest = groups.remainder();
    visit(gather(rest) | tail_mask << (8 * (rest.len() / 8)), base);
}

/// Bit `i` set where byte `i` of `word` (little-endian) equals the byte `pattern` repeats.
#[inline(always)]
fn word_mask(word: u64, pattern: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // Multiplying the 0x01 bits of a word by this gathers them into its top byte, in order.
    const GATHER: u64 = 0x0102_0408_1020_4080;
    let v = word ^ pattern;
    // 0x80 in exactly the bytes of `v` that are zero (no borrow between bytes).
    let zero = !(((v & LOW7) + LOW7) | v | LOW7);
    (zero >> 7).wrapping_mul(GATHER) >> 56
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_finds_every_separator_at_every_length_and_offset() {
        // Texts of 0..200 bytes with separators at pseudo-random places, for separators
        // whose bit patterns stress the word comparison (0x00, 0x80, 0xff, ' ').
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for sep in [b' ', 0x00, 0x80, 0xff, 0x7f] {
            for len in 0..200 {
                let text: Vec<u8> = (0..len)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1);
                        match state >> 61 {
                            0 | 1 => sep,
                            2 => sep ^ 0x80,
                            3 => sep.wrapping_add(1),
                            _ => (state >> 40) as u8,
                        }
                    })
                    .collect();
                let words = StringList::split(Bytes::from(text.clone()), sep);
                let expected: Vec<&[u8]> = text.split(|&b| b == sep).collect();
                assert_eq!(words.iter().collect::<Vec<_>>(), expected, "{sep} {text:?}");
            }
        }
    }
}
