//! `FixedLenFeature` and `parse_example`: serialized `tf.train.Example`s to tensors with
//! streamload's parser (TensorFlow's outputs and messages), run without the GIL.

use std::collections::BTreeMap;

use ndarray::{ArrayD, IxDyn};
use pyo3::prelude::*;
use streamload::format::{FeatureSpec, ParseSpec, Parsed, parse_example, parse_single_example};
use streamload::tensor::{DType, SparseTensor, Tensor, Values};

use crate::errors;
use crate::value::{Array, Sparse, Value, invalid};

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

fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Int64 => "int64",
        DType::Float32 => "float32",
        DType::String => "string",
    }
}

/// A dtype given as `"int64"`/`"float32"`/`"string"` (`sl.int64`, ...), or as numpy's
/// `np.int64`, `np.float32`, `np.bytes_`/`bytes`/`str`.
fn parse_dtype(py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<DType> {
    let name = match dtype.extract::<String>() {
        Ok(s) => s,
        Err(_) => dtype
            .getattr("__name__")
            .and_then(|n| n.extract::<String>())
            .unwrap_or_default(),
    };
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

/// The checked spec of a `{name: FixedLenFeature}` dict.
pub(crate) fn parse_spec(
    py: Python<'_>,
    features: &Bound<'_, pyo3::types::PyDict>,
) -> PyResult<ParseSpec> {
    let mut specs = Vec::with_capacity(features.len());
    for (name, feature) in features.iter() {
        let name: String = name.extract()?;
        let spec = if let Ok(f) = feature.cast::<FixedLenFeature>() {
            f.get().spec.clone()
        } else if let Ok(f) = feature.cast::<VarLenFeature>() {
            f.get().spec.clone()
        } else if let Ok(f) = feature.cast::<FixedLenSequenceFeature>() {
            f.get().spec.clone()
        } else {
            return Err(errors::invalid(
                py,
                format!(
                    "parse_example: feature {name}: a FixedLenFeature, VarLenFeature or \
                     FixedLenSequenceFeature, not {}",
                    crate::value::type_name(&feature)
                ),
            ));
        };
        specs.push((name, spec));
    }
    ParseSpec::new(specs).map_err(|e| errors::to_py(py, e))
}

/// Parses one serialized example (a 0-d string) or a batch of them (a 1-d string tensor,
/// after `batch`) into a dict of tensors.
pub(crate) fn parse(value: Value, spec: &ParseSpec) -> anyhow::Result<Value> {
    let value = if value.has_packed() {
        value.unpack_strings()?
    } else {
        value
    };
    let mut parsed = match value {
        Value::Strings(a) if a.ndim() == 0 => match a.first() {
            Some(record) => parse_single_example(record, spec)?,
            None => return Err(invalid("parse_example: an empty string tensor".into())),
        },
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
    let names: Vec<String> = spec.names().map(str::to_owned).collect();
    let mut out = BTreeMap::new();
    for name in names {
        let value = match parsed.get(&name) {
            Some(Parsed::Sparse(sparse)) => sparse_value(sparse)?,
            _ => tensor_value(parsed.take_dense(&name)?)?,
        };
        out.insert(name, value);
    }
    Ok(Value::Dict(out))
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

/// A parsed tensor as a value, its values moved (not copied).
fn tensor_value(tensor: Tensor) -> anyhow::Result<Value> {
    let shape = IxDyn(tensor.shape());
    Ok(match tensor.into_values() {
        Values::Int64(v) => Value::Array(Array::Int64(ArrayD::from_shape_vec(shape, v)?)),
        Values::Float32(v) => Value::Array(Array::Float32(ArrayD::from_shape_vec(shape, v)?)),
        Values::String(v) => Value::Strings(ArrayD::from_shape_vec(shape, v)?),
    })
}
