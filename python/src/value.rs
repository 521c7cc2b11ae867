//! [`Value`]: the element type of a Python pipeline, and its crossings to and from Python.
//!
//! tf.data's elements are nested structures (tuples, dicts) of tensors. Here a tensor is an
//! [`Array`] (an owned `ndarray` array of one numeric type, 0-d for a scalar), one byte
//! string ([`Value::String`], a 0-d `tf.string`) or a [`Value::Strings`] array of them.
//! Values hold no Python object, so every Rust stage (shuffle, batch, parse, prefetch) works
//! on them without the GIL.
//!
//! A `Value` is small (40 bytes): one string, the element of a record reader, is held inline
//! (a `Bytes`, no heap cell of its own), and the arrays are boxed. A record goes through the
//! reader, a 10,000-element shuffle buffer and `batch` as those 40 bytes, where a 0-d
//! `ndarray` array would be over 100 bytes moved at each step, plus an allocation and a free
//! (the W3 workload from Python: BENCHMARKS.md).
//!
//! To Python, an n-d array is handed over without a copy: its `Vec` moves into the numpy
//! array, which owns it (`PyArray::from_owned_array`), and numpy frees it with the array.
//! From Python (a function's result, `from_tensor_slices`' arrays) the data is copied once
//! into a Rust array, as tf.data copies a numpy array into a tensor.

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use ndarray::{ArrayD, Axis, IxDyn};
use numpy::{PyArray, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// One element of a Python pipeline: tf.data's nested structure of tensors.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// One byte string: a 0-d `tf.string` tensor (a record, a file name, a line). Always this
    /// variant, never a 0-d [`Value::Strings`] ([`Value::strings`] makes sure), so the derived
    /// equality holds.
    String(Bytes),
    /// A numeric tensor (0-d for a scalar).
    Array(Box<Array>),
    /// A `tf.string` tensor of rank 1 or more (made by [`Value::strings`]).
    Strings(Box<ArrayD<Bytes>>),
    /// A tuple of components (tf.data passes them to functions as separate arguments).
    Tuple(Vec<Value>),
    /// A dict of components by name, in key order (as `tf.nest` orders them).
    Dict(BTreeMap<String, Value>),
    /// A `tf.SparseTensor` (a `VarLenFeature`'s values).
    Sparse(Box<Sparse>),
    /// A `tf.RaggedTensor` (a `RaggedFeature`'s values in a batch).
    Ragged(Box<Ragged>),
    /// A string tensor of rank 1 or more packed for the hand-over to Python
    /// (`parse_example(..., strings="packed")`): to Python, `streamload.PackedStrings`.
    Packed(Box<Packed>),
    /// A string tensor of rank 1 or more handed to Python as views of its strings, not
    /// copies (`parse_example(..., strings="view")`): to Python, `streamload.StringsView`.
    Views(Box<ArrayD<Bytes>>),
}

// What the shuffle buffer, the channels and every stage move per element: one string
// inline, the rest boxed (module docs).
const _: () = assert!(std::mem::size_of::<Value>() == 40);

/// A string tensor packed in one buffer: every string's bytes one after another in
/// `values`, string `i` (row-major over `shape`) at `values[offsets[i]..offsets[i + 1]]`.
/// Arrow's binary layout (tf.RaggedTensor's `values` and `row_splits`): Python receives
/// `values` and `offsets` as two numpy arrays that own these vectors (no copy), where the
/// default hand-over makes one Python `bytes` object per string with the GIL held.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Packed {
    pub(crate) values: Vec<u8>,
    pub(crate) offsets: Vec<i64>,
    pub(crate) shape: Vec<usize>,
}

impl Packed {
    /// Copies the strings into one buffer (one copy each, without the GIL).
    pub(crate) fn pack(strings: &ArrayD<Bytes>) -> Packed {
        let total = strings.iter().map(Bytes::len).sum();
        let mut values = Vec::with_capacity(total);
        let mut offsets = Vec::with_capacity(strings.len() + 1);
        offsets.push(0);
        for s in strings.iter() {
            values.extend_from_slice(s);
            offsets.push(values.len() as i64);
        }
        Packed {
            values,
            offsets,
            shape: strings.shape().to_vec(),
        }
    }

    /// Row `i` along the first axis (its strings copied).
    fn row(&self, i: usize) -> Packed {
        let per_row: usize = self.shape[1..].iter().product();
        let (first, last) = (i * per_row, (i + 1) * per_row);
        let base = self.offsets[first];
        Packed {
            values: self.values[base as usize..self.offsets[last] as usize].to_vec(),
            offsets: self.offsets[first..=last]
                .iter()
                .map(|o| o - base)
                .collect(),
            shape: self.shape[1..].to_vec(),
        }
    }

    /// The strings again, as slices of the one buffer (no copy).
    pub(crate) fn unpack(self) -> anyhow::Result<ArrayD<Bytes>> {
        let values = Bytes::from(self.values);
        let mut strings = Vec::with_capacity(self.offsets.len().saturating_sub(1));
        for w in self.offsets.windows(2) {
            let (start, end) = (w[0], w[1]);
            if start < 0 || end < start || end as usize > values.len() {
                return Err(invalid(format!(
                    "PackedStrings: offsets {start}..{end} out of a values buffer of {} bytes",
                    values.len()
                )));
            }
            strings.push(values.slice(start as usize..end as usize));
        }
        ArrayD::from_shape_vec(IxDyn(&self.shape), strings).map_err(|_| {
            invalid(format!(
                "PackedStrings: {} strings do not fill the shape {:?}",
                self.offsets.len().saturating_sub(1),
                self.shape
            ))
        })
    }
}

/// A `tf.SparseTensor`: the `(n, rank)` int64 `indices` of `n` values (a 1-d tensor of one
/// type) in a tensor of `dense_shape`. To Python, `streamload.SparseTensorValue` (as
/// `tf.compat.v1.SparseTensorValue`, what `as_numpy_iterator` gives for a sparse tensor).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sparse {
    pub(crate) indices: ArrayD<i64>,
    pub(crate) values: Value,
    pub(crate) dense_shape: Vec<i64>,
}

/// A `tf.RaggedTensor` with one ragged dimension: row `i` is
/// `values[row_splits[i]..row_splits[i + 1]]`, the `row_splits` `int32` or `int64` (a
/// `RaggedFeature`'s `row_splits_dtype`). To Python, `streamload.RaggedTensorValue` (as
/// `tf.compat.v1.ragged.RaggedTensorValue`, what `as_numpy_iterator` gives for a ragged
/// tensor).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Ragged {
    pub(crate) values: Value,
    /// A 1-d `int32` or `int64` array (checked where made).
    pub(crate) row_splits: Array,
}

impl Ragged {
    /// The row splits as `i64`s.
    fn splits(&self) -> Vec<i64> {
        match &self.row_splits {
            Array::Int64(a) => a.iter().copied().collect(),
            Array::Int32(a) => a.iter().map(|&x| i64::from(x)).collect(),
            _ => Vec::new(),
        }
    }

    /// Row split `i` (0 when there is none).
    fn split(&self, i: usize) -> usize {
        match &self.row_splits {
            Array::Int64(a) => a.get(i).map_or(0, |&x| x as usize),
            Array::Int32(a) => a.get(i).map_or(0, |&x| x as usize),
            _ => 0,
        }
    }

    /// How many rows.
    fn nrows(&self) -> usize {
        self.row_splits
            .shape()
            .first()
            .map_or(0, |n| n.saturating_sub(1))
    }
}

macro_rules! arrays {
    ($($variant:ident($ty:ty) = $name:literal),* $(,)?) => {
        /// A numeric tensor: an owned, row-major `ndarray` array of one element type.
        #[derive(Clone, Debug, PartialEq)]
        pub(crate) enum Array {
            $(
                #[doc = concat!("`", $name, "` values.")]
                $variant(ArrayD<$ty>),
            )*
        }

        impl Array {
            /// The numpy name of the element type.
            pub(crate) fn dtype(&self) -> &'static str {
                match self {
                    $(Array::$variant(_) => $name,)*
                }
            }

            pub(crate) fn shape(&self) -> &[usize] {
                match self {
                    $(Array::$variant(a) => a.shape(),)*
                }
            }

            /// The address of the first value (what the numpy array will point at).
            pub(crate) fn address(&self) -> usize {
                match self {
                    $(Array::$variant(a) => a.as_ptr() as usize,)*
                }
            }

            /// Hands the array to numpy without copying: numpy owns the buffer from now on.
            fn into_py<'py>(self, py: Python<'py>) -> Bound<'py, PyAny> {
                match self {
                    $(Array::$variant(a) => PyArray::from_owned_array(py, a).into_any(),)*
                }
            }

            /// Copies a numpy array of a supported type; `None` for another type.
            fn from_numpy(obj: &Bound<'_, PyAny>) -> Option<Array> {
                $(
                    if let Ok(a) = obj.cast::<PyArrayDyn<$ty>>() {
                        return Some(Array::$variant(a.to_owned_array()));
                    }
                )*
                None
            }

            /// Row `i` along the first axis (a copy).
            fn row(&self, i: usize) -> Array {
                match self {
                    $(Array::$variant(a) => Array::$variant(a.index_axis(Axis(0), i).to_owned()),)*
                }
            }

            /// Rows `start..end` along the first axis (a copy).
            fn rows_between(&self, start: usize, end: usize) -> Array {
                match self {
                    $(Array::$variant(a) => Array::$variant(
                        a.slice_axis(Axis(0), ndarray::Slice::from(start..end)).to_owned(),
                    ),)*
                }
            }

            /// The same values in another shape of as many (row-major); `None` otherwise.
            pub(crate) fn reshape(self, shape: &[usize]) -> Option<Array> {
                match self {
                    $(Array::$variant(a) => a
                        .into_shape_with_order(IxDyn(shape))
                        .ok()
                        .map(Array::$variant),)*
                }
            }

            /// Stacks arrays of this type and shape along a new first axis.
            fn stack(first: &Array, all: &[&Array]) -> Option<Array> {
                match first {
                    $(
                        Array::$variant(head) => {
                            let mut shape = vec![all.len()];
                            shape.extend_from_slice(head.shape());
                            let mut data = Vec::with_capacity(all.len() * head.len());
                            for a in all {
                                let Array::$variant(a) = a else { return None };
                                // Row-major (as every array made here is): one copy.
                                match a.as_slice() {
                                    Some(values) => data.extend_from_slice(values),
                                    None => data.extend(a.iter().cloned()),
                                }
                            }
                            ArrayD::from_shape_vec(IxDyn(&shape), data).ok().map(Array::$variant)
                        }
                    )*
                }
            }
        }
        $(
            impl From<ArrayD<$ty>> for Array {
                fn from(a: ArrayD<$ty>) -> Array {
                    Array::$variant(a)
                }
            }
        )*
    };
}

arrays! {
    Bool(bool) = "bool",
    Int8(i8) = "int8",
    UInt8(u8) = "uint8",
    Int16(i16) = "int16",
    UInt16(u16) = "uint16",
    Int32(i32) = "int32",
    UInt32(u32) = "uint32",
    Int64(i64) = "int64",
    UInt64(u64) = "uint64",
    Float32(f32) = "float32",
    Float64(f64) = "float64",
}

impl Value {
    /// A 0-d `tf.string`.
    pub(crate) fn string(bytes: Bytes) -> Value {
        Value::String(bytes)
    }

    /// A string tensor of any rank: [`Value::String`] for rank 0 (its one string), else
    /// [`Value::Strings`].
    pub(crate) fn strings(a: ArrayD<Bytes>) -> Value {
        if a.ndim() == 0 {
            // A 0-d array holds exactly one value.
            Value::String(a.into_iter().next().unwrap_or_default())
        } else {
            Value::Strings(Box::new(a))
        }
    }

    /// A numeric tensor.
    pub(crate) fn array(a: impl Into<Array>) -> Value {
        Value::Array(Box::new(a.into()))
    }

    /// A 0-d `int64`.
    pub(crate) fn int64(x: i64) -> Value {
        Value::scalar(x)
    }

    /// A 0-d tensor of `x`'s type.
    pub(crate) fn scalar<T>(x: T) -> Value
    where
        ArrayD<T>: Into<Array>,
    {
        Value::array(ndarray::arr0(x).into_dyn())
    }

    /// A 1-d tensor of `values`.
    pub(crate) fn vector<T>(values: Vec<T>) -> Value
    where
        ArrayD<T>: Into<Array>,
    {
        Value::array(ndarray::Array1::from(values).into_dyn())
    }

    /// The one string of a 0-d `tf.string` value.
    pub(crate) fn as_string(&self) -> Option<&Bytes> {
        match self {
            Value::String(b) => Some(b),
            _ => None,
        }
    }

    /// The shape of a string tensor (`[]` for one string); `None` for another value.
    fn string_shape(&self) -> Option<&[usize]> {
        match self {
            Value::String(_) => Some(&[]),
            Value::Strings(a) => Some(a.shape()),
            _ => None,
        }
    }

    /// A string tensor as an array (a 0-d one made for one string); `None` for another value.
    pub(crate) fn string_array(&self) -> Option<Cow<'_, ArrayD<Bytes>>> {
        match self {
            Value::String(b) => Some(Cow::Owned(ArrayD::from_elem(IxDyn(&[]), b.clone()))),
            Value::Strings(a) => Some(Cow::Borrowed(a)),
            _ => None,
        }
    }

    /// tf.data's name of this value's structure, for error messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Value::Array(a) => format!("{} tensor of shape {:?}", a.dtype(), a.shape()),
            Value::String(_) => "string tensor of shape []".into(),
            Value::Strings(a) => format!("string tensor of shape {:?}", a.shape()),
            Value::Tuple(items) => format!("tuple of {}", items.len()),
            Value::Dict(items) => format!(
                "dict with keys {:?}",
                items.keys().map(String::as_str).collect::<Vec<_>>()
            ),
            Value::Sparse(s) => format!(
                "sparse {} of dense shape {:?}",
                s.values.describe(),
                s.dense_shape
            ),
            Value::Packed(p) => format!("string tensor of shape {:?}", p.shape),
            Value::Views(a) => format!("string tensor of shape {:?}", a.shape()),
            Value::Ragged(r) => format!("ragged {} of {} rows", r.values.describe(), r.nrows()),
        }
    }

    /// Every string tensor of rank 1 or more in this value packed in one buffer
    /// ([`Packed`]); 0-d strings stay as they are (one `bytes` in Python).
    pub(crate) fn pack_strings(self) -> Value {
        self.map_strings(&|a| Value::Packed(Box::new(Packed::pack(&a))))
    }

    /// Every string tensor of rank 1 or more in this value to be handed over as views of
    /// its strings ([`Value::Views`]).
    pub(crate) fn view_strings(self) -> Value {
        self.map_strings(&Value::Views)
    }

    /// Every string tensor of rank 1 or more in this value (in tuples, dicts, and the values
    /// of sparse and ragged tensors) as `f` makes it.
    fn map_strings(self, f: &dyn Fn(Box<ArrayD<Bytes>>) -> Value) -> Value {
        match self {
            Value::Strings(a) => f(a),
            Value::Tuple(items) => {
                Value::Tuple(items.into_iter().map(|v| v.map_strings(f)).collect())
            }
            Value::Dict(items) => Value::Dict(
                items
                    .into_iter()
                    .map(|(k, v)| (k, v.map_strings(f)))
                    .collect(),
            ),
            Value::Sparse(mut s) => {
                s.values =
                    std::mem::replace(&mut s.values, Value::Tuple(Vec::new())).map_strings(f);
                Value::Sparse(s)
            }
            Value::Ragged(mut r) => {
                r.values =
                    std::mem::replace(&mut r.values, Value::Tuple(Vec::new())).map_strings(f);
                Value::Ragged(r)
            }
            other => other,
        }
    }

    /// Every packed or viewed string tensor in this value as a string tensor again (no
    /// copy): what the stages that work on strings take.
    pub(crate) fn unpack_strings(self) -> anyhow::Result<Value> {
        Ok(match self {
            Value::Packed(p) => Value::strings(p.unpack()?),
            Value::Views(a) => Value::Strings(a),
            Value::Tuple(items) => Value::Tuple(
                items
                    .into_iter()
                    .map(Value::unpack_strings)
                    .collect::<anyhow::Result<_>>()?,
            ),
            Value::Dict(items) => Value::Dict(
                items
                    .into_iter()
                    .map(|(k, v)| Ok((k, v.unpack_strings()?)))
                    .collect::<anyhow::Result<_>>()?,
            ),
            Value::Sparse(mut s) => {
                s.values =
                    std::mem::replace(&mut s.values, Value::Tuple(Vec::new())).unpack_strings()?;
                Value::Sparse(s)
            }
            Value::Ragged(mut r) => {
                r.values =
                    std::mem::replace(&mut r.values, Value::Tuple(Vec::new())).unpack_strings()?;
                Value::Ragged(r)
            }
            other => other,
        })
    }

    /// Whether this value holds a packed or viewed string tensor anywhere (a form made for
    /// the hand-over).
    pub(crate) fn has_packed(&self) -> bool {
        match self {
            Value::Packed(_) | Value::Views(_) => true,
            Value::Tuple(items) => items.iter().any(Value::has_packed),
            Value::Dict(items) => items.values().any(Value::has_packed),
            Value::Sparse(s) => s.values.has_packed(),
            Value::Ragged(r) => r.values.has_packed(),
            Value::Array(_) | Value::String(_) | Value::Strings(_) => false,
        }
    }

    /// The addresses of the buffers of this value's n-d numeric arrays, in the order
    /// [`Value::into_py`] hands them over (depth first, dicts in key order).
    pub(crate) fn addresses(&self, out: &mut Vec<usize>) {
        match self {
            Value::Array(a) if !a.shape().is_empty() => out.push(a.address()),
            Value::Array(_) | Value::String(_) | Value::Strings(_) => {}
            Value::Tuple(items) => items.iter().for_each(|v| v.addresses(out)),
            Value::Dict(items) => items.values().for_each(|v| v.addresses(out)),
            Value::Sparse(s) => {
                out.push(s.indices.as_ptr() as usize);
                s.values.addresses(out);
            }
            Value::Ragged(r) => {
                r.values.addresses(out);
                out.push(r.row_splits.address());
            }
            Value::Packed(p) => {
                out.push(p.values.as_ptr() as usize);
                out.push(p.offsets.as_ptr() as usize);
            }
            Value::Views(a) => out.extend(a.iter().map(|s| s.as_ptr() as usize)),
        }
    }

    /// Whether this value holds a viewed string tensor anywhere.
    fn has_views(&self) -> bool {
        match self {
            Value::Views(_) => true,
            Value::Tuple(items) => items.iter().any(Value::has_views),
            Value::Dict(items) => items.values().any(Value::has_views),
            Value::Sparse(s) => s.values.has_views(),
            Value::Ragged(r) => r.values.has_views(),
            _ => false,
        }
    }

    /// The Python object: numpy arrays (without copying), numpy scalars for 0-d tensors,
    /// `bytes` for one string, object arrays of `bytes` for string tensors, tuples, dicts;
    /// `streamload.PackedStrings` (two numpy arrays that own the Rust buffers) for packed
    /// string tensors.
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        Ok(match self {
            Value::Array(a) if a.shape().is_empty() => {
                // A numpy scalar of the array's type, as tf.data's `as_numpy_iterator` gives.
                a.into_py(py).get_item(PyTuple::empty(py))?
            }
            Value::Array(a) => a.into_py(py),
            Value::String(b) => PyBytes::new(py, &b).into_any(),
            Value::Strings(a) => {
                let objects = a.mapv(|b| PyBytes::new(py, &b).into_any().unbind());
                PyArray::from_owned_object_array(py, objects).into_any()
            }
            Value::Tuple(items) => {
                let items = items
                    .into_iter()
                    .map(|v| v.into_py(py))
                    .collect::<PyResult<Vec<_>>>()?;
                PyTuple::new(py, items)?.into_any()
            }
            Value::Dict(items) => {
                let dict = PyDict::new(py);
                for (k, v) in items {
                    dict.set_item(k, v.into_py(py)?)?;
                }
                dict.into_any()
            }
            Value::Sparse(s) => {
                let Sparse {
                    indices,
                    values,
                    dense_shape,
                } = *s;
                let class = py
                    .import("streamload.sparse")?
                    .getattr("SparseTensorValue")?;
                let dense_shape = ndarray::Array1::from(dense_shape).into_dyn();
                class.call1((
                    PyArray::from_owned_array(py, indices),
                    values.into_py(py)?,
                    PyArray::from_owned_array(py, dense_shape),
                ))?
            }
            Value::Ragged(r) => {
                let Ragged { values, row_splits } = *r;
                let class = py
                    .import("streamload.ragged")?
                    .getattr("RaggedTensorValue")?;
                class.call1((values.into_py(py)?, row_splits.into_py(py)))?
            }
            Value::Packed(p) => {
                let Packed {
                    values,
                    offsets,
                    shape,
                } = *p;
                let class = py.import("streamload.strings")?.getattr("PackedStrings")?;
                class.call1((
                    PyArray::from_vec(py, values),
                    PyArray::from_vec(py, offsets),
                    PyTuple::new(py, shape)?,
                ))?
            }
            Value::Views(a) => {
                Bound::new(py, crate::strings_view::StringsView::new(*a))?.into_any()
            }
        })
    }

    /// A value from a Python object, as tf.data converts a function's result to tensors:
    /// tuples and dicts are structure, a list is one tensor; Python `int` is `int64`, `float`
    /// is `float32` (TensorFlow's default), `bool` is `bool`, `bytes` and `str` (UTF-8) are
    /// strings; numpy arrays and scalars keep their type.
    pub(crate) fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
        if let Ok(view) = obj.cast::<crate::strings_view::StringsView>() {
            // Its strings, shared (handed over as views again).
            return Ok(Value::Views(Box::new(view.get().to_array()?)));
        }
        if type_name(obj) == "SparseTensorValue" {
            let indices = match Value::from_py(&obj.getattr("indices")?)? {
                Value::Array(a) => match *a {
                    Array::Int64(a) => Ok(a),
                    other => Err(Value::array(other)),
                },
                other => Err(other),
            }
            .map_err(|other| {
                PyTypeError::new_err(format!(
                    "SparseTensorValue.indices must be int64, not a {}",
                    other.describe()
                ))
            })?;
            let values = Value::from_py(&obj.getattr("values")?)?;
            let dense_shape: Vec<i64> = obj
                .py()
                .import("numpy")?
                .call_method1("asarray", (obj.getattr("dense_shape")?,))?
                .call_method0("tolist")?
                .extract()?;
            return Ok(Value::Sparse(Box::new(Sparse {
                indices,
                values,
                dense_shape,
            })));
        }
        if type_name(obj) == "RaggedTensorValue" {
            let values = Value::from_py(&obj.getattr("values")?)?;
            let row_splits = match Value::from_py(&obj.getattr("row_splits")?)? {
                Value::Array(a)
                    if matches!(*a, Array::Int32(_) | Array::Int64(_)) && a.shape().len() == 1 =>
                {
                    Ok(*a)
                }
                other => Err(other),
            }
            .map_err(|other| {
                PyTypeError::new_err(format!(
                    "RaggedTensorValue.row_splits must be a vector of int32 or int64, not a {}",
                    other.describe()
                ))
            })?;
            let ragged = Ragged { values, row_splits };
            let splits = ragged.splits();
            let rows = ragged.values.rows().ok();
            let ok = splits.first() == Some(&0)
                && splits.windows(2).all(|w| w[0] <= w[1])
                && rows.is_some_and(|n| splits.last() == Some(&(n as i64)));
            if !ok {
                return Err(PyTypeError::new_err(format!(
                    "RaggedTensorValue: row_splits {splits:?} must start at 0, never decrease \
                     and end at the number of values ({})",
                    ragged.values.describe()
                )));
            }
            return Ok(Value::Ragged(Box::new(ragged)));
        }
        if type_name(obj) == "PackedStrings" {
            // A string tensor like any other from here on (packed again only for a hand-over).
            let values: Vec<u8> = obj
                .getattr("values")?
                .cast_into::<PyArrayDyn<u8>>()
                .map_err(|_| PyTypeError::new_err("PackedStrings.values must be a uint8 array"))?
                .to_vec()?;
            let offsets: Vec<i64> = obj
                .getattr("offsets")?
                .cast_into::<PyArrayDyn<i64>>()
                .map_err(|_| PyTypeError::new_err("PackedStrings.offsets must be an int64 array"))?
                .to_vec()?;
            let shape: Vec<usize> = obj.getattr("shape")?.extract()?;
            let packed = Packed {
                values,
                offsets,
                shape,
            };
            return packed
                .unpack()
                .map(Value::strings)
                .map_err(|e| PyTypeError::new_err(e.to_string()));
        }
        if let Ok(t) = obj.cast::<PyTuple>() {
            return t
                .iter()
                .map(|o| Value::from_py(&o))
                .collect::<PyResult<_>>()
                .map(Value::Tuple);
        }
        if let Ok(d) = obj.cast::<PyDict>() {
            let mut out = BTreeMap::new();
            for (k, v) in d.iter() {
                let key: String = k.extract().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "dict keys of an element must be str, not {}",
                        type_name(&k)
                    ))
                })?;
                out.insert(key, Value::from_py(&v)?);
            }
            return Ok(Value::Dict(out));
        }
        if obj.is_instance_of::<PyBool>() {
            let b: bool = obj.extract()?;
            return Ok(Value::scalar(b));
        }
        if obj.is_instance_of::<PyInt>() {
            let x: i64 = obj.extract()?;
            return Ok(Value::int64(x));
        }
        if obj.is_instance_of::<PyFloat>() {
            let x: f64 = obj.extract()?;
            return Ok(Value::scalar(x as f32));
        }
        if let Ok(b) = obj.cast::<PyBytes>() {
            return Ok(Value::string(Bytes::copy_from_slice(b.as_bytes())));
        }
        if let Ok(s) = obj.cast::<PyString>() {
            return Ok(Value::string(Bytes::from(s.to_str()?.to_owned())));
        }
        let np = obj.py().import("numpy")?;
        if obj.is_instance_of::<PyList>() {
            return Value::from_list(obj, &np);
        }
        if obj.is_instance(&np.getattr("generic")?)? {
            let array = np.call_method1("asarray", (obj,))?;
            return Value::from_numpy(&array);
        }
        if obj.is_instance(&np.getattr("ndarray")?)? {
            return Value::from_numpy(obj);
        }
        Err(PyTypeError::new_err(format!(
            "cannot convert an object of type {} to a tensor: an element is a tensor (numpy array, number, \
             bytes, str, list) or a tuple or dict of them",
            type_name(obj)
        )))
    }

    /// A Python list as one tensor, with TensorFlow's default types (`int64`, `float32`).
    fn from_list(obj: &Bound<'_, PyAny>, np: &Bound<'_, PyModule>) -> PyResult<Value> {
        let array = np.call_method1("asarray", (obj,))?;
        let kind = array
            .cast::<numpy::PyUntypedArray>()
            .map(|a| a.dtype().kind())
            .unwrap_or(b'O');
        let array = match kind {
            b'f' => array.call_method1("astype", ("float32",))?,
            b'i' => array.call_method1("astype", ("int64",))?,
            _ => array,
        };
        Value::from_numpy(&array)
    }

    /// A numpy array (copied), of a numeric type, or of `bytes`/`str`/objects as strings.
    pub(crate) fn from_numpy(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
        if let Some(a) = Array::from_numpy(obj) {
            return Ok(Value::array(a));
        }
        let untyped = obj.cast::<numpy::PyUntypedArray>()?;
        let kind = untyped.dtype().kind();
        if matches!(kind, b'S' | b'U' | b'O') {
            let shape = untyped.shape().to_vec();
            let flat = obj.call_method0("ravel")?.call_method0("tolist")?;
            let mut data = Vec::with_capacity(untyped.len());
            for item in flat.try_iter()? {
                let item = item?;
                if let Ok(b) = item.cast::<PyBytes>() {
                    data.push(Bytes::copy_from_slice(b.as_bytes()));
                } else if let Ok(s) = item.cast::<PyString>() {
                    data.push(Bytes::from(s.to_str()?.to_owned()));
                } else {
                    return Err(PyTypeError::new_err(format!(
                        "an object array of a tensor must hold bytes or str, not {}",
                        type_name(&item)
                    )));
                }
            }
            let a = ArrayD::from_shape_vec(IxDyn(&shape), data)
                .map_err(|e| PyTypeError::new_err(e.to_string()))?;
            return Ok(Value::strings(a));
        }
        Err(PyTypeError::new_err(format!(
            "unsupported numpy dtype {}: streamload's tensors are bool, (u)int8..64, float32, \
             float64 and strings",
            untyped.dtype()
        )))
    }

    /// The number of rows along the first axis of every component (for
    /// `from_tensor_slices`), or why the components cannot be sliced together.
    pub(crate) fn rows(&self) -> Result<usize, String> {
        match self {
            Value::Array(a) => a
                .shape()
                .first()
                .copied()
                .ok_or_else(|| "from_tensor_slices: a component is a scalar (rank 0)".into()),
            Value::String(_) => Err("from_tensor_slices: a component is a scalar (rank 0)".into()),
            Value::Strings(a) => a
                .shape()
                .first()
                .copied()
                .ok_or_else(|| "from_tensor_slices: a component is a scalar (rank 0)".into()),
            Value::Tuple(items) => common_rows(items.iter()),
            Value::Dict(items) => common_rows(items.values()),
            Value::Sparse(_) => Err("a sparse tensor cannot be sliced into rows".into()),
            // Its rows (tf.data unbatches a ragged batch into its rows, dense tensors).
            Value::Ragged(r) if r.values.has_packed() => Err(
                "a ragged tensor of packed strings cannot be sliced into rows (parse with \
                 strings=\"bytes\")"
                    .into(),
            ),
            Value::Ragged(r) => match &r.values {
                Value::Array(_) | Value::Strings(_) => Ok(r.nrows()),
                _ => Err("a ragged tensor of ragged tensors cannot be sliced into rows".into()),
            },
            Value::Packed(p) => p
                .shape
                .first()
                .copied()
                .ok_or_else(|| "from_tensor_slices: a component is a scalar (rank 0)".into()),
            Value::Views(a) => a
                .shape()
                .first()
                .copied()
                .ok_or_else(|| "from_tensor_slices: a component is a scalar (rank 0)".into()),
        }
    }

    /// Row `i` of every component (`from_tensor_slices`).
    pub(crate) fn row(&self, i: usize) -> Value {
        match self {
            Value::Array(a) => Value::array(a.row(i)),
            // `rows` refuses a scalar, so no row of one is asked for.
            Value::String(b) => Value::String(b.clone()),
            Value::Strings(a) => Value::strings(a.index_axis(Axis(0), i).to_owned()),
            Value::Tuple(items) => Value::Tuple(items.iter().map(|v| v.row(i)).collect()),
            Value::Dict(items) => {
                Value::Dict(items.iter().map(|(k, v)| (k.clone(), v.row(i))).collect())
            }
            // `rows` refuses a sparse tensor, so no row of one is asked for.
            Value::Sparse(s) => Value::Sparse(s.clone()),
            Value::Ragged(r) => {
                // `rows` checked the values are a tensor and counted the rows; the splits
                // were checked where the value was made.
                let (start, end) = (r.split(i), r.split(i + 1));
                match &r.values {
                    Value::Array(a) => Value::array(a.rows_between(start, end)),
                    Value::Strings(a) => Value::strings(
                        a.slice_axis(Axis(0), ndarray::Slice::from(start..end))
                            .to_owned(),
                    ),
                    other => other.clone(),
                }
            }
            Value::Packed(p) => match p.row(i) {
                // One string: `bytes` in Python, as every 0-d string.
                row if row.shape.is_empty() => Value::string(Bytes::from(row.values)),
                row => Value::Packed(Box::new(row)),
            },
            Value::Views(a) => match a.ndim() {
                // One string: `bytes` in Python, as every 0-d string.
                1 => Value::String(a[[i]].clone()),
                _ => Value::Views(Box::new(a.index_axis(Axis(0), i).to_owned())),
            },
        }
    }

    /// [`Value::stack`] of elements it may take apart: a batch of single strings (a batch of
    /// serialized records, the common case) moves the strings into the batch instead of
    /// cloning them (a clone touches the reference count shared by every record of a
    /// file's window, from every thread).
    pub(crate) fn stack_owned(items: Vec<Value>) -> anyhow::Result<Value> {
        if !items.is_empty() && items.iter().all(|v| matches!(v, Value::String(_))) {
            let strings: Vec<Bytes> = items
                .into_iter()
                .filter_map(|v| match v {
                    Value::String(b) => Some(b),
                    _ => None,
                })
                .collect();
            return Ok(Value::strings(ndarray::Array1::from(strings).into_dyn()));
        }
        Value::stack(&items)
    }

    /// Stacks elements of one structure into a batch (tf.data's `batch`): every tensor gets
    /// a leading dimension. TensorFlow's error when shapes or structures differ.
    pub(crate) fn stack(items: &[Value]) -> anyhow::Result<Value> {
        let Some(first) = items.first() else {
            return Err(invalid("batch: cannot stack an empty batch".into()));
        };
        if items.iter().any(Value::has_packed) {
            // Packed strings are made for the hand-over; batching them again (rare) goes
            // through the string tensors, then packs the batch.
            let unpacked = items
                .iter()
                .map(|v| v.clone().unpack_strings())
                .collect::<anyhow::Result<Vec<_>>>()?;
            let stacked = Value::stack(&unpacked)?;
            return Ok(if items.iter().any(Value::has_views) {
                stacked.view_strings()
            } else {
                stacked.pack_strings()
            });
        }
        let refs: Vec<&Value> = items.iter().collect();
        stack_refs(first, &refs, &mut 0)
    }
}

fn common_rows<'a>(items: impl Iterator<Item = &'a Value>) -> Result<usize, String> {
    let mut rows = None;
    for v in items {
        let n = v.rows()?;
        match rows {
            None => rows = Some(n),
            Some(m) if m != n => {
                return Err(format!(
                    "from_tensor_slices: all components must have the same size in their first \
                     dimension (got {m} and {n})"
                ));
            }
            Some(_) => {}
        }
    }
    rows.ok_or_else(|| "from_tensor_slices: an empty structure has no rows".into())
}

/// Stacks component `component` (counted depth first, for the error message).
fn stack_refs(first: &Value, all: &[&Value], component: &mut usize) -> anyhow::Result<Value> {
    let mismatch = |i: usize, v: &Value| {
        invalid(format!(
            "Cannot batch tensors with different structures: the first element is a {} and \
             element {i} a {}",
            first.describe(),
            v.describe()
        ))
    };
    match first {
        Value::Array(head) => {
            let mut arrays = Vec::with_capacity(all.len());
            for (i, v) in all.iter().enumerate() {
                match v {
                    Value::Array(a) if a.dtype() == head.dtype() => {
                        if a.shape() != head.shape() {
                            return Err(invalid(format!(
                                "Cannot batch tensors with different shapes in component {}. \
                                 First element had shape {:?} and element {i} had shape {:?}.",
                                *component,
                                head.shape(),
                                a.shape()
                            )));
                        }
                        arrays.push(&**a);
                    }
                    other => return Err(mismatch(i, other)),
                }
            }
            *component += 1;
            Array::stack(head, &arrays)
                .map(Value::array)
                .ok_or_else(|| invalid(format!("batch: mixed types in component {}", *component)))
        }
        Value::String(_) | Value::Strings(_) => {
            let head = first.string_shape().unwrap_or_default();
            let mut shape = vec![all.len()];
            shape.extend_from_slice(head);
            let mut data = Vec::with_capacity(shape.iter().product());
            for (i, v) in all.iter().enumerate() {
                let Some(this) = v.string_shape() else {
                    return Err(mismatch(i, v));
                };
                if this != head {
                    return Err(invalid(format!(
                        "Cannot batch tensors with different shapes in component {}. \
                         First element had shape {head:?} and element {i} had shape {this:?}.",
                        *component,
                    )));
                }
                match v {
                    Value::String(b) => data.push(b.clone()),
                    Value::Strings(a) => data.extend(a.iter().cloned()),
                    _ => unreachable!("a string tensor, by its shape"),
                }
            }
            *component += 1;
            Ok(Value::strings(ArrayD::from_shape_vec(IxDyn(&shape), data)?))
        }
        Value::Tuple(head) => {
            let mut out = Vec::with_capacity(head.len());
            for (j, h) in head.iter().enumerate() {
                let mut column = Vec::with_capacity(all.len());
                for (i, v) in all.iter().enumerate() {
                    match v {
                        Value::Tuple(items) if items.len() == head.len() => column.push(&items[j]),
                        other => return Err(mismatch(i, other)),
                    }
                }
                out.push(stack_refs(h, &column, component)?);
            }
            Ok(Value::Tuple(out))
        }
        Value::Dict(head) => {
            let mut out = BTreeMap::new();
            for (key, h) in head {
                let mut column = Vec::with_capacity(all.len());
                for (i, v) in all.iter().enumerate() {
                    match v {
                        Value::Dict(items) if items.len() == head.len() => match items.get(key) {
                            Some(x) => column.push(x),
                            None => return Err(mismatch(i, v)),
                        },
                        other => return Err(mismatch(i, other)),
                    }
                }
                out.insert(key.clone(), stack_refs(h, &column, component)?);
            }
            Ok(Value::Dict(out))
        }
        // tf.data would add a ragged dimension; not supported here.
        Value::Ragged(_) => Err(invalid(format!(
            "batch: component {} is a ragged tensor (a RaggedFeature parsed in a batch), \
             which streamload cannot batch again: parse_example after batch, or unbatch first",
            *component
        ))),
        // `Value::stack` unpacks them first.
        Value::Packed(_) | Value::Views(_) => Err(invalid(
            "batch: packed strings reached the stacking (unpack them first)".into(),
        )),
        Value::Sparse(head) => {
            // tf.data's batch of sparse tensors: the element's index first in each row, the
            // dense shape the largest of each dimension.
            let rank = head.dense_shape.len();
            let mut indices = Vec::new();
            let mut dense = vec![0i64; rank];
            let mut values = Vec::new();
            for (i, v) in all.iter().enumerate() {
                match v {
                    Value::Sparse(s) if s.dense_shape.len() == rank => {
                        for row in s.indices.iter().copied().collect::<Vec<_>>().chunks(rank) {
                            indices.push(i as i64);
                            indices.extend_from_slice(row);
                        }
                        for (d, n) in dense.iter_mut().zip(&s.dense_shape) {
                            *d = (*d).max(*n);
                        }
                        let n = s.values.rows().map_err(invalid)?;
                        values.extend((0..n).map(|j| s.values.row(j)));
                    }
                    other => return Err(mismatch(i, other)),
                }
            }
            *component += 1;
            let n = values.len();
            let values = if values.is_empty() {
                head.values.clone()
            } else {
                Value::stack(&values)?
            };
            let mut dense_shape = vec![all.len() as i64];
            dense_shape.extend(dense);
            Ok(Value::Sparse(Box::new(Sparse {
                indices: ArrayD::from_shape_vec(IxDyn(&[n, rank + 1]), indices)?,
                values,
                dense_shape,
            })))
        }
    }
}

/// An `InvalidArgument` error (raised in Python as `InvalidArgumentError`, as TensorFlow's).
pub(crate) fn invalid(message: String) -> anyhow::Error {
    streamload::Error::InvalidArgument(message).into()
}

/// The type's name, for messages.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}

/// A component of an element: a dict's entry or a tuple's.
#[derive(Clone)]
pub(crate) enum Key {
    Name(String),
    Index(usize),
}

/// How many token ids the document at `key` of `value` holds (as [`token_ids`] would give),
/// without making them.
pub(crate) fn token_count(value: &Value, key: Option<&Key>) -> anyhow::Result<usize> {
    let value = match (key, value) {
        (None, v) => v,
        (Some(Key::Name(k)), Value::Dict(d)) => d
            .get(k)
            .ok_or_else(|| invalid(format!("the element has no key {k:?}")))?,
        (Some(Key::Index(i)), Value::Tuple(t)) if *i < t.len() => &t[*i],
        (Some(_), v) => {
            return Err(invalid(format!(
                "key= does not name a component of {}",
                v.describe()
            )));
        }
    };
    match value {
        Value::Array(a) if a.shape().len() == 1 && a.dtype().contains("int") => Ok(a.shape()[0]),
        v => Err(invalid(format!(
            "a document of token ids must be a 1-D integer array, got {}",
            v.describe()
        ))),
    }
}

/// An element of a choice dataset: an integer scalar.
pub(crate) fn choice(value: &Value) -> anyhow::Result<i64> {
    let index = match value {
        Value::Array(a) if a.shape().is_empty() => match &**a {
            Array::Int64(a) => a.first().copied(),
            Array::Int32(a) => a.first().map(|&x| i64::from(x)),
            Array::UInt8(a) => a.first().map(|&x| i64::from(x)),
            Array::Int8(a) => a.first().map(|&x| i64::from(x)),
            Array::Int16(a) => a.first().map(|&x| i64::from(x)),
            Array::UInt16(a) => a.first().map(|&x| i64::from(x)),
            Array::UInt32(a) => a.first().map(|&x| i64::from(x)),
            Array::UInt64(a) => a.first().and_then(|&x| i64::try_from(x).ok()),
            _ => None,
        },
        _ => None,
    };
    index.ok_or_else(|| {
        invalid(format!(
            "choose_from_datasets: `choice_dataset` must yield int64 scalars, got {}",
            value.describe()
        ))
    })
}

/// A document of token ids: a 1-D array of integers, each in `u32`'s range (what
/// `Tokenizer.encode` gives, or a numpy array of ids), the element or its component `key`.
pub(crate) fn token_ids(value: Value, key: Option<&Key>) -> anyhow::Result<Vec<u32>> {
    let value = match (key, value) {
        (None, v) => v,
        (Some(Key::Name(k)), Value::Dict(mut d)) => d
            .remove(k)
            .ok_or_else(|| invalid(format!("the element has no key {k:?}")))?,
        (Some(Key::Index(i)), Value::Tuple(mut t)) if *i < t.len() => t.swap_remove(*i),
        (Some(_), v) => {
            return Err(invalid(format!(
                "key= does not name a component of {}",
                v.describe()
            )));
        }
    };
    fn ids<T: Copy + TryInto<u32> + std::fmt::Display>(a: &ArrayD<T>) -> anyhow::Result<Vec<u32>> {
        a.iter()
            .map(|&x| {
                x.try_into()
                    .map_err(|_| invalid(format!("a token id must be in 0..2**32, got {x}")))
            })
            .collect()
    }
    let wrong = |v: &Value| {
        invalid(format!(
            "a document of token ids must be a 1-D integer array, got {}",
            v.describe()
        ))
    };
    let Value::Array(a) = &value else {
        return Err(wrong(&value));
    };
    if a.shape().len() != 1 {
        return Err(wrong(&value));
    }
    match &**a {
        Array::UInt32(a) => Ok(a.iter().copied().collect()),
        Array::Int8(a) => ids(a),
        Array::UInt8(a) => ids(a),
        Array::Int16(a) => ids(a),
        Array::UInt16(a) => ids(a),
        Array::Int32(a) => ids(a),
        Array::Int64(a) => ids(a),
        Array::UInt64(a) => ids(a),
        _ => Err(wrong(&value)),
    }
}
