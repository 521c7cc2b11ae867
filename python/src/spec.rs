//! `FixedLenFeature`, `VarLenFeature`, `FixedLenSequenceFeature`, `SparseFeature`,
//! `RaggedFeature` and `parse_example`: serialized `tf.train.Example`s to tensors with
//! streamload's parser (TensorFlow's outputs and messages), run without the GIL. A
//! `SparseFeature` is built here from `VarLen` parses of its keys (the Rust parser has no
//! composite features).

use std::collections::BTreeMap;

use ndarray::{ArrayD, IxDyn};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use streamload::format::{
    FeatureSpec, ParseSpec, Parsed, ParsedExample, parse_example, parse_single_example,
};
use streamload::tensor::{DType, RaggedValues, SparseTensor, Tensor, Values};

use crate::errors;
use crate::value::{Array, Ragged, Sparse, Value, invalid};

/// `tf.io.FixedLenFeature(shape, dtype, default_value=None)`: exactly `prod(shape)` values
/// of `dtype` (`"int64"`, `"float32"` or `"string"`), or `default_value` when the feature is
/// missing (required when `None`).
#[pyclass(name = "FixedLenFeature", module = "streamload._native", frozen)]
pub(crate) struct FixedLenFeature {
    spec: FeatureSpec,
    #[pyo3(get)]
    shape: Vec<usize>,
    #[pyo3(get)]
    dtype: String,
}

#[pymethods]
impl FixedLenFeature {
    #[new]
    #[pyo3(signature = (shape, dtype, default_value=None))]
    fn new(
        py: Python<'_>,
        shape: Vec<usize>,
        dtype: &Bound<'_, PyAny>,
        default_value: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let dtype = parse_dtype(py, dtype)?;
        let mut spec = FeatureSpec::fixed_len(shape.clone(), dtype);
        if let Some(default) = default_value {
            spec = spec.with_default(default_values(py, default, dtype)?);
        }
        Ok(FixedLenFeature {
            spec,
            shape,
            dtype: dtype_name(dtype).to_string(),
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "FixedLenFeature(shape={:?}, dtype={})",
            self.shape, self.dtype
        )
    }
}

/// `tf.io.VarLenFeature(dtype)`: any number of values, parsed as a sparse tensor
/// (`streamload.SparseTensorValue`: `indices`, `values`, `dense_shape`).
#[pyclass(name = "VarLenFeature", module = "streamload._native", frozen)]
pub(crate) struct VarLenFeature {
    spec: FeatureSpec,
    #[pyo3(get)]
    dtype: String,
}

#[pymethods]
impl VarLenFeature {
    #[new]
    fn new(py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<Self> {
        let dtype = parse_dtype(py, dtype)?;
        Ok(VarLenFeature {
            spec: FeatureSpec::var_len(dtype),
            dtype: dtype_name(dtype).to_string(),
        })
    }

    fn __repr__(&self) -> String {
        format!("VarLenFeature(dtype={})", self.dtype)
    }
}

/// `tf.io.FixedLenSequenceFeature(shape, dtype, allow_missing=False, default_value=None)`:
/// any number of rows of `shape` (a dense tensor of shape `[rows] + shape`); in a batch,
/// rows are padded to the longest with `default_value` (or zero / `b""`). TensorFlow
/// requires `allow_missing=True`, and so does this.
#[pyclass(
    name = "FixedLenSequenceFeature",
    module = "streamload._native",
    frozen
)]
pub(crate) struct FixedLenSequenceFeature {
    spec: FeatureSpec,
    #[pyo3(get)]
    shape: Vec<usize>,
    #[pyo3(get)]
    dtype: String,
}

#[pymethods]
impl FixedLenSequenceFeature {
    #[new]
    #[pyo3(signature = (shape, dtype, allow_missing=false, default_value=None))]
    fn new(
        py: Python<'_>,
        shape: Vec<usize>,
        dtype: &Bound<'_, PyAny>,
        allow_missing: bool,
        default_value: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let dtype = parse_dtype(py, dtype)?;
        let mut spec = FeatureSpec::fixed_len_sequence(shape.clone(), dtype, allow_missing);
        if let Some(default) = default_value {
            spec = spec.with_default(default_values(py, default, dtype)?);
        }
        Ok(FixedLenSequenceFeature {
            spec,
            shape,
            dtype: dtype_name(dtype).to_string(),
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "FixedLenSequenceFeature(shape={:?}, dtype={})",
            self.shape, self.dtype
        )
    }
}

/// `tf.io.SparseFeature(index_key, value_key, dtype, size, already_sorted=False)`: a sparse
/// tensor of dense shape `size` (one more leading dimension after `batch`) whose indices
/// are the int64 values of the feature(s) `index_key` and whose values are those of
/// `value_key`, paired in order, sorted by index unless `already_sorted`.
#[pyclass(name = "SparseFeature", module = "streamload._native", frozen)]
pub(crate) struct SparseFeature {
    #[pyo3(get)]
    index_key: Vec<String>,
    #[pyo3(get)]
    value_key: String,
    #[pyo3(get)]
    dtype: String,
    #[pyo3(get)]
    size: Vec<usize>,
    #[pyo3(get)]
    already_sorted: bool,
    dtype_: DType,
}

#[pymethods]
impl SparseFeature {
    #[new]
    #[pyo3(signature = (index_key, value_key, dtype, size, already_sorted=false))]
    fn new(
        py: Python<'_>,
        index_key: &Bound<'_, PyAny>,
        value_key: String,
        dtype: &Bound<'_, PyAny>,
        size: &Bound<'_, PyAny>,
        already_sorted: bool,
    ) -> PyResult<Self> {
        let dtype_ = parse_dtype(py, dtype)?;
        let index_key: Vec<String> = match index_key.extract::<String>() {
            Ok(k) => vec![k],
            Err(_) => index_key.extract()?,
        };
        let size: Vec<usize> = match size.extract::<usize>() {
            Ok(n) => vec![n],
            Err(_) => size.extract()?,
        };
        if index_key.is_empty() || index_key.len() != size.len() {
            return Err(errors::invalid(
                py,
                format!(
                    "SparseFeature: index_key and size must have the same number of entries \
                     (one per dimension), got {} and {}",
                    index_key.len(),
                    size.len()
                ),
            ));
        }
        Ok(SparseFeature {
            index_key,
            value_key,
            dtype: dtype_name(dtype_).to_string(),
            size,
            already_sorted,
            dtype_,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "SparseFeature(index_key={:?}, value_key={:?}, dtype={}, size={:?})",
            self.index_key, self.value_key, self.dtype, self.size
        )
    }
}

/// `tf.io.RaggedFeature(dtype, value_key=None, partitions=(), row_splits_dtype=int32,
/// validate=False)` without partitions: the values of the feature `value_key` (the spec's
/// key when `None`). One example parses to a vector of its values; a batch to a
/// `streamload.RaggedTensorValue` (`values`, `row_splits`), one row per example, its
/// `row_splits` of `row_splits_dtype` (`int32`, TensorFlow's default, or `int64`). A missing
/// feature has no values. `partitions` (more ragged dimensions) are not supported: a
/// `RaggedFeature` with any is refused.
#[pyclass(name = "RaggedFeature", module = "streamload._native", frozen)]
pub(crate) struct RaggedFeature {
    #[pyo3(get)]
    dtype: String,
    #[pyo3(get)]
    value_key: Option<String>,
    #[pyo3(get)]
    row_splits_dtype: String,
    #[pyo3(get)]
    validate: bool,
    dtype_: DType,
}

#[pymethods]
impl RaggedFeature {
    #[new]
    #[pyo3(signature = (
        dtype, value_key=None, partitions=None, row_splits_dtype=None, validate=false
    ))]
    fn new(
        py: Python<'_>,
        dtype: &Bound<'_, PyAny>,
        value_key: Option<String>,
        partitions: Option<&Bound<'_, PyAny>>,
        row_splits_dtype: Option<&Bound<'_, PyAny>>,
        validate: bool,
    ) -> PyResult<Self> {
        let dtype_ = parse_dtype(py, dtype)?;
        if let Some(partitions) = partitions
            && partitions.len().unwrap_or(1) > 0
        {
            return Err(errors::invalid(
                py,
                format!(
                    "RaggedFeature: partitions are not supported by streamload (only one ragged \
                     dimension, the examples of a batch), got {}",
                    partitions.repr()?
                ),
            ));
        }
        let row_splits_dtype = match row_splits_dtype {
            None => "int32".to_string(),
            Some(d) => {
                let name = type_name_of(d);
                match name.as_str() {
                    "int32" | "int64" => name,
                    other => {
                        return Err(errors::invalid(
                            py,
                            format!(
                                "RaggedFeature: row_splits_dtype must be int32 or int64, not \
                                 {other:?}"
                            ),
                        ));
                    }
                }
            }
        };
        if value_key.as_deref() == Some("") {
            return Err(errors::invalid(
                py,
                "RaggedFeature: value_key must not be empty",
            ));
        }
        Ok(RaggedFeature {
            dtype: dtype_name(dtype_).to_string(),
            value_key,
            row_splits_dtype,
            validate,
            dtype_,
        })
    }

    /// Always empty: partitions are not supported.
    #[getter]
    fn partitions<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyTuple> {
        pyo3::types::PyTuple::empty(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "RaggedFeature(dtype={}, value_key={:?}, row_splits_dtype={})",
            self.dtype, self.value_key, self.row_splits_dtype
        )
    }
}

/// A `SparseFeature` of a spec: built after the parse from its keys' `VarLen` tensors.
#[derive(Clone, Debug)]
struct Composite {
    name: String,
    index_keys: Vec<String>,
    value_key: String,
    size: Vec<usize>,
    already_sorted: bool,
}

/// A checked `parse_example` spec: the features parsed from the records (with the keys
/// `SparseFeature`s read), and the `SparseFeature`s made from them.
#[derive(Clone, Debug)]
pub(crate) struct Features {
    parse: ParseSpec,
    composites: Vec<Composite>,
    /// The output's names (the spec's keys), in the dict's order.
    names: Vec<String>,
    /// The `RaggedFeature`s whose row splits are `int64` (the others' are `int32`).
    int64_splits: Vec<String>,
}

fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Int64 => "int64",
        DType::Float32 => "float32",
        DType::String => "string",
    }
}

/// The name of a type given as a string (`sl.int64`, `"int64"`) or as a class
/// (`np.int64`, `bytes`).
fn type_name_of(dtype: &Bound<'_, PyAny>) -> String {
    match dtype.extract::<String>() {
        Ok(s) => s,
        Err(_) => dtype
            .getattr("__name__")
            .and_then(|n| n.extract::<String>())
            .unwrap_or_default(),
    }
}

/// A dtype given as `"int64"`/`"float32"`/`"string"` (`sl.int64`, ...), or as numpy's
/// `np.int64`, `np.float32`, `np.bytes_`/`bytes`/`str`.
fn parse_dtype(py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<DType> {
    let name = type_name_of(dtype);
    match name.as_str() {
        "int64" => Ok(DType::Int64),
        "float32" | "float" => Ok(DType::Float32),
        "string" | "bytes" | "bytes_" | "str" | "str_" | "object" => Ok(DType::String),
        other => Err(errors::invalid(
            py,
            format!(
                "FixedLenFeature: dtype must be int64, float32 or string (as tf.train.Example \
                 stores them), not {other:?}"
            ),
        )),
    }
}

/// A default value, flattened row-major.
fn default_values(py: Python<'_>, value: &Bound<'_, PyAny>, dtype: DType) -> PyResult<Values> {
    let flat = py
        .import("numpy")?
        .call_method1("ravel", (value,))?
        .call_method0("tolist")?;
    Ok(match dtype {
        DType::Int64 => Values::Int64(flat.extract()?),
        DType::Float32 => Values::Float32(flat.extract()?),
        DType::String => {
            let mut out = Vec::new();
            for item in flat.try_iter()? {
                let item = item?;
                let bytes: Vec<u8> = match item.extract::<String>() {
                    Ok(s) => s.into_bytes(),
                    Err(_) => item.extract()?,
                };
                out.push(bytes.into());
            }
            Values::String(out)
        }
    })
}

impl Features {
    /// The checked spec of a `{name: FixedLenFeature | VarLenFeature |
    /// FixedLenSequenceFeature | SparseFeature | RaggedFeature}` dict.
    pub(crate) fn from_py(py: Python<'_>, features: &Bound<'_, PyDict>) -> PyResult<Features> {
        let mut specs: Vec<(String, FeatureSpec)> = Vec::with_capacity(features.len());
        let mut composites = Vec::new();
        let mut names = Vec::with_capacity(features.len());
        let mut int64_splits = Vec::new();
        for (name, feature) in features.iter() {
            let name: String = name.extract()?;
            names.push(name.clone());
            let spec = if let Ok(f) = feature.cast::<FixedLenFeature>() {
                f.get().spec.clone()
            } else if let Ok(f) = feature.cast::<VarLenFeature>() {
                f.get().spec.clone()
            } else if let Ok(f) = feature.cast::<FixedLenSequenceFeature>() {
                f.get().spec.clone()
            } else if let Ok(f) = feature.cast::<RaggedFeature>() {
                let f = f.get();
                if f.row_splits_dtype == "int64" {
                    int64_splits.push(name.clone());
                }
                match &f.value_key {
                    Some(key) => FeatureSpec::ragged(f.dtype_).with_value_key(key.clone()),
                    None => FeatureSpec::ragged(f.dtype_),
                }
            } else if let Ok(f) = feature.cast::<SparseFeature>() {
                let f = f.get();
                composites.push((
                    Composite {
                        name,
                        index_keys: f.index_key.clone(),
                        value_key: f.value_key.clone(),
                        size: f.size.clone(),
                        already_sorted: f.already_sorted,
                    },
                    f.dtype_,
                ));
                continue;
            } else {
                return Err(errors::invalid(
                    py,
                    format!(
                        "parse_example: feature {name}: a FixedLenFeature, VarLenFeature, \
                         FixedLenSequenceFeature, SparseFeature or RaggedFeature, not {}",
                        crate::value::type_name(&feature)
                    ),
                ));
            };
            specs.push((name, spec));
        }
        // The keys a SparseFeature reads, as VarLen features (shared with the spec's own
        // VarLen feature of a key, which must then agree in type).
        for (c, dtype) in &composites {
            let keys = c
                .index_keys
                .iter()
                .map(|k| (k, DType::Int64))
                .chain([(&c.value_key, *dtype)]);
            for (key, dtype) in keys {
                match specs.iter().find(|(n, _)| n == key) {
                    None => specs.push((key.clone(), FeatureSpec::var_len(dtype))),
                    Some((_, FeatureSpec::VarLen { dtype: d })) if *d == dtype => {}
                    Some((_, other)) => {
                        return Err(errors::invalid(
                            py,
                            format!(
                                "parse_example: SparseFeature {} reads feature {key} as a \
                                 VarLenFeature of {}, but the spec also has it as {other:?}",
                                c.name,
                                dtype_name(dtype)
                            ),
                        ));
                    }
                }
            }
        }
        Ok(Features {
            parse: ParseSpec::new(specs).map_err(|e| errors::to_py(py, e))?,
            composites: composites.into_iter().map(|(c, _)| c).collect(),
            names,
            int64_splits,
        })
    }
}

/// Parses one serialized example (a 0-d string) or a batch of them (a 1-d string tensor,
/// after `batch`) into a dict of tensors.
pub(crate) fn parse(value: Value, features: &Features) -> anyhow::Result<Value> {
    let value = if value.has_packed() {
        value.unpack_strings()?
    } else {
        value
    };
    let spec = &features.parse;
    let batched = matches!(&value, Value::Strings(a) if a.ndim() == 1);
    let mut parsed = match value {
        Value::String(record) => parse_single_example(&record, spec)?,
        Value::Strings(a) if a.ndim() == 1 => {
            // The records moved out of the batch (not cloned: no reference count touched).
            let records: Vec<_> = a.into_iter().collect();
            parse_example(&records, spec)?
        }
        other => {
            return Err(invalid(format!(
                "parse_example: the input must be serialized examples (a string or a vector \
                 of strings), got a {}",
                other.describe()
            )));
        }
    };
    let mut out = BTreeMap::new();
    // The SparseFeatures first: their keys may be taken out below.
    for c in &features.composites {
        out.insert(c.name.clone(), sparse_feature(&parsed, c, batched)?);
    }
    for name in &features.names {
        if out.contains_key(name) {
            continue;
        }
        let value = match parsed.get(name) {
            Some(Parsed::Sparse(sparse)) => sparse_value(sparse)?,
            Some(Parsed::Ragged(_)) => {
                let int64 = features.int64_splits.iter().any(|n| n == name);
                ragged_value(name, parsed.take_ragged(name)?, int64)?
            }
            _ => tensor_value(parsed.take_dense(name)?)?,
        };
        out.insert(name.clone(), value);
    }
    Ok(Value::Dict(out))
}

/// The `SparseFeature` `c` from the parsed `VarLen` tensors of its keys: value `i` of
/// `value_key` at the coordinates given by value `i` of each `index_key` (after the
/// example's index in a batch), sorted by coordinates unless `already_sorted`.
fn sparse_feature(parsed: &ParsedExample, c: &Composite, batched: bool) -> anyhow::Result<Value> {
    let values = parsed.sparse(&c.value_key)?;
    let n = values.values().len();
    let mut index_lists = Vec::with_capacity(c.index_keys.len());
    for key in &c.index_keys {
        let index = parsed.sparse(key)?;
        // The same number of indices as values in every example: the same coordinates.
        if index.indices() != values.indices() {
            return Err(invalid(format!(
                "SparseFeature {}: the features {key} (indices) and {} (values) differ in \
                 length in an example ({} indices, {} values in all)",
                c.name,
                c.value_key,
                index.values().len(),
                n
            )));
        }
        match index.values() {
            Values::Int64(v) => index_lists.push(v),
            _ => {
                return Err(invalid(format!(
                    "SparseFeature {}: {key} is not int64",
                    c.name
                )));
            }
        }
    }
    let rank = c.size.len() + usize::from(batched);
    let mut coordinates = Vec::with_capacity(n);
    for i in 0..n {
        let mut at = Vec::with_capacity(rank);
        if batched {
            at.push(values.coordinates(i)[0]);
        }
        for ((key, list), &size) in c.index_keys.iter().zip(&index_lists).zip(&c.size) {
            let x = list[i];
            if x < 0 || x as u64 >= size as u64 {
                return Err(invalid(format!(
                    "SparseFeature {}: index {x} of feature {key} is out of bounds for size \
                     {size}",
                    c.name
                )));
            }
            at.push(x);
        }
        coordinates.push((at, i));
    }
    if !c.already_sorted {
        coordinates.sort_by(|a, b| a.0.cmp(&b.0));
    }
    let order: Vec<usize> = coordinates.iter().map(|(_, i)| *i).collect();
    let picked = match values.values() {
        Values::Int64(v) => Values::Int64(order.iter().map(|&i| v[i]).collect()),
        Values::Float32(v) => Values::Float32(order.iter().map(|&i| v[i]).collect()),
        Values::String(v) => Values::String(order.iter().map(|&i| v[i].clone()).collect()),
    };
    let mut dense_shape: Vec<i64> = Vec::with_capacity(rank);
    if batched {
        dense_shape.push(values.dense_shape()[0] as i64);
    }
    dense_shape.extend(c.size.iter().map(|&s| s as i64));
    let indices: Vec<i64> = coordinates.into_iter().flat_map(|(at, _)| at).collect();
    Ok(Value::Sparse(Box::new(Sparse {
        indices: ArrayD::from_shape_vec(IxDyn(&[n, rank]), indices)?,
        values: tensor_value(Tensor::new(vec![n], picked)?)?,
        dense_shape,
    })))
}

/// A parsed sparse tensor as a value.
fn sparse_value(sparse: &SparseTensor) -> anyhow::Result<Value> {
    let rank = sparse.dense_shape().len();
    let indices = sparse.indices().to_vec();
    let n = indices.len() / rank.max(1);
    let values = tensor_value(Tensor::new(
        vec![sparse.values().len()],
        sparse.values().clone(),
    )?)?;
    Ok(Value::Sparse(Box::new(Sparse {
        indices: ArrayD::from_shape_vec(IxDyn(&[n, rank]), indices)?,
        values,
        dense_shape: sparse.dense_shape().iter().map(|&d| d as i64).collect(),
    })))
}

/// A parsed ragged tensor as a value, its values moved (not copied), its row splits
/// `int64` or `int32` (TensorFlow's default `row_splits_dtype`).
fn ragged_value(name: &str, ragged: RaggedValues, int64: bool) -> anyhow::Result<Value> {
    let (values, row_splits) = ragged.into_parts();
    let n = values.len();
    let values = tensor_value(Tensor::new(vec![n], values)?)?;
    let row_splits = if int64 {
        Array::from(ndarray::Array1::from(row_splits).into_dyn())
    } else {
        let splits = row_splits
            .into_iter()
            .map(i32::try_from)
            .collect::<Result<Vec<i32>, _>>()
            .map_err(|_| {
                invalid(format!(
                    "RaggedFeature {name}: {n} values in the batch overflow int32 row splits \
                     (use row_splits_dtype=int64)"
                ))
            })?;
        Array::from(ndarray::Array1::from(splits).into_dyn())
    };
    Ok(Value::Ragged(Box::new(Ragged { values, row_splits })))
}

/// A parsed tensor as a value, its values moved (not copied).
fn tensor_value(tensor: Tensor) -> anyhow::Result<Value> {
    let shape = IxDyn(tensor.shape());
    Ok(match tensor.into_values() {
        Values::Int64(v) => Value::array(ArrayD::from_shape_vec(shape, v)?),
        Values::Float32(v) => Value::array(ArrayD::from_shape_vec(shape, v)?),
        Values::String(v) => Value::strings(ArrayD::from_shape_vec(shape, v)?),
    })
}
