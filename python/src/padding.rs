//! `padded_batch`: elements of different shapes padded to a common one, then stacked.
//!
//! tf.data's rules: each component is padded to `padded_shapes`' dimension where one is
//! given, else to the longest in the batch; with `padding_values` (default 0, or `b""` for
//! strings). An element longer than a given dimension fails the batch with TensorFlow's
//! message ("Attempted to pad to a smaller size than the input element."; a
//! `DataLossError`, as TensorFlow's class is).

use std::collections::BTreeMap;

use bytes::Bytes;
use ndarray::{ArrayD, Axis, IxDyn, Slice};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::value::{Array, Value, invalid};

/// One padding value, as given in Python.
#[derive(Clone, Debug)]
pub(crate) enum Pad {
    Int(i64),
    Float(f64),
    Bool(bool),
    Bytes(Bytes),
}

/// `padded_shapes` and `padding_values`, matched to the elements' structure.
#[derive(Clone, Debug)]
pub(crate) enum PadSpec {
    /// A tensor: its padded shape (`None` per dimension: the longest in the batch; no shape:
    /// every dimension the longest) and padding value.
    Leaf {
        shape: Option<Vec<Option<usize>>>,
        value: Option<Pad>,
    },
    Tuple(Vec<PadSpec>),
    Dict(BTreeMap<String, PadSpec>),
}

fn leaf() -> PadSpec {
    PadSpec::Leaf {
        shape: None,
        value: None,
    }
}

impl PadSpec {
    /// The spec from `padded_shapes` (a shape is a list of ints or `None`s, or an int or
    /// `None` for one dimension... as tf.data takes them: a tuple or dict is structure).
    pub(crate) fn from_py(
        shapes: Option<&Bound<'_, PyAny>>,
        values: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PadSpec> {
        let shape_part = match shapes {
            Some(s) if !s.is_none() => Some(s),
            _ => None,
        };
        let value_part = match values {
            Some(v) if !v.is_none() => Some(v),
            _ => None,
        };
        // Structure comes from whichever of the two has it.
        fn tuple_of<'py>(o: Option<&Bound<'py, PyAny>>) -> Option<Bound<'py, PyTuple>> {
            o.and_then(|o| o.cast::<PyTuple>().ok().cloned())
        }
        fn dict_of<'py>(o: Option<&Bound<'py, PyAny>>) -> Option<Bound<'py, PyDict>> {
            o.and_then(|o| o.cast::<PyDict>().ok().cloned())
        }
        if let Some(t) = tuple_of(shape_part).or_else(|| tuple_of(value_part)) {
            let n = t.len();
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let s = shape_part.map(|s| s.get_item(i)).transpose()?;
                let v = match value_part {
                    Some(v) if v.cast::<PyTuple>().is_ok() => Some(v.get_item(i)?),
                    other => other.cloned(),
                };
                out.push(PadSpec::from_py(s.as_ref(), v.as_ref())?);
            }
            return Ok(PadSpec::Tuple(out));
        }
        if let Some(d) = dict_of(shape_part).or_else(|| dict_of(value_part)) {
            let mut out = BTreeMap::new();
            for (k, _) in d.iter() {
                let key: String = k.extract()?;
                let s = match shape_part {
                    Some(s) => s.get_item(&k).ok(),
                    None => None,
                };
                let v = match value_part {
                    Some(v) if v.cast::<PyDict>().is_ok() => v.get_item(&k).ok(),
                    other => other.cloned(),
                };
                out.insert(key, PadSpec::from_py(s.as_ref(), v.as_ref())?);
            }
            return Ok(PadSpec::Dict(out));
        }
        let shape = match shape_part {
            None => None,
            Some(s) => {
                let dims: Vec<Option<i64>> = match s.extract::<Option<i64>>() {
                    Ok(one) => vec![one],
                    Err(_) => s.extract()?,
                };
                Some(
                    dims.into_iter()
                        .map(|d| d.filter(|&d| d >= 0).map(|d| d as usize))
                        .collect(),
                )
            }
        };
        let value = value_part.map(pad_value).transpose()?;
        Ok(PadSpec::Leaf { shape, value })
    }
}

fn pad_value(obj: &Bound<'_, PyAny>) -> PyResult<Pad> {
    if let Ok(b) = obj.extract::<bool>()
        && obj.is_instance_of::<pyo3::types::PyBool>()
    {
        return Ok(Pad::Bool(b));
    }
    if let Ok(i) = obj.extract::<i64>() {
        return Ok(Pad::Int(i));
    }
    if let Ok(f) = obj.extract::<f64>() {
        return Ok(Pad::Float(f));
    }
    if let Ok(s) = obj.extract::<String>() {
        return Ok(Pad::Bytes(Bytes::from(s)));
    }
    if let Ok(b) = obj.extract::<Vec<u8>>() {
        return Ok(Pad::Bytes(Bytes::from(b)));
    }
    Err(PyTypeError::new_err(
        "padding_values must be scalars (int, float, bool, bytes or str) or a tuple or dict of them",
    ))
}

/// A padding value as a numeric type.
trait FromPad: Sized + Clone {
    fn from_pad(pad: Option<&Pad>) -> Option<Self>;
}

macro_rules! from_pad {
    ($($t:ty),*) => {$(
        impl FromPad for $t {
            #[allow(clippy::cast_lossless)] // one cast per source type, whatever the target
            fn from_pad(pad: Option<&Pad>) -> Option<Self> {
                match pad {
                    None => Some(0 as $t),
                    Some(Pad::Int(i)) => Some(*i as $t),
                    Some(Pad::Float(f)) => Some(*f as $t),
                    Some(Pad::Bool(b)) => Some(u8::from(*b) as $t),
                    Some(Pad::Bytes(_)) => None,
                }
            }
        }
    )*};
}

from_pad!(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);

impl FromPad for bool {
    fn from_pad(pad: Option<&Pad>) -> Option<Self> {
        match pad {
            None => Some(false),
            Some(Pad::Bool(b)) => Some(*b),
            Some(Pad::Int(i)) => Some(*i != 0),
            Some(Pad::Float(_) | Pad::Bytes(_)) => None,
        }
    }
}

impl FromPad for Bytes {
    fn from_pad(pad: Option<&Pad>) -> Option<Self> {
        match pad {
            None => Some(Bytes::new()),
            Some(Pad::Bytes(b)) => Some(b.clone()),
            Some(_) => None,
        }
    }
}

/// Pads `items` (arrays of one type) to a common shape and stacks them.
fn pad_stack<T: FromPad>(
    items: &[&ArrayD<T>],
    spec_shape: Option<&[Option<usize>]>,
    pad: Option<&Pad>,
    component: usize,
) -> anyhow::Result<ArrayD<T>> {
    let rank = items.first().map_or(0, |a| a.ndim());
    if let Some((i, a)) = items.iter().enumerate().find(|(_, a)| a.ndim() != rank) {
        return Err(invalid(format!(
            "padded_batch: component {component}: element {i} has rank {}, element 0 rank {rank}",
            a.ndim()
        )));
    }
    if let Some(s) = spec_shape
        && s.len() != rank
    {
        return Err(invalid(format!(
            "padded_batch: component {component}: padded_shapes has rank {}, the elements {rank}",
            s.len()
        )));
    }
    let mut target: Vec<usize> = (0..rank)
        .map(|d| items.iter().map(|a| a.shape()[d]).max().unwrap_or(0))
        .collect();
    if let Some(s) = spec_shape {
        for (d, want) in s.iter().enumerate() {
            if let Some(w) = want {
                target[d] = *w;
            }
        }
    }
    for (i, a) in items.iter().enumerate() {
        if a.shape()
            .iter()
            .zip(&target)
            .any(|(have, want)| have > want)
        {
            return Err(streamload::Error::PaddingTooSmall {
                component,
                element: i,
                shape: a.shape().to_vec(),
                padded: target.clone(),
            }
            .into());
        }
    }
    let Some(fill) = T::from_pad(pad) else {
        return Err(invalid(format!(
            "padded_batch: component {component}: the padding value {pad:?} does not fit its type"
        )));
    };
    let mut shape = vec![items.len()];
    shape.extend_from_slice(&target);
    // A padded shape from the user may be huge: fail with an error, not an aborted process.
    let total = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| {
            invalid(format!(
                "padded_batch: a batch of shape {shape:?} is too large"
            ))
        })?;
    let mut data = Vec::new();
    data.try_reserve_exact(total).map_err(|_| {
        invalid(format!(
            "padded_batch: cannot allocate a batch of shape {shape:?} ({total} values)"
        ))
    })?;
    data.resize(total, fill);
    let mut out = ArrayD::from_shape_vec(IxDyn(&shape), data)?;
    for (i, a) in items.iter().enumerate() {
        let mut row = out.index_axis_mut(Axis(0), i);
        let mut region = row.slice_each_axis_mut(|ax| Slice::from(0..a.shape()[ax.axis.index()]));
        region.assign(a);
    }
    Ok(out)
}

macro_rules! pad_arrays {
    ($head:expr, $items:expr, $shape:expr, $pad:expr, $component:expr, $($variant:ident),*) => {
        match $head {
            $(
                Array::$variant(_) => {
                    let mut arrays = Vec::with_capacity($items.len());
                    for (i, v) in $items.iter().enumerate() {
                        match v {
                            Value::Array(a) if matches!(**a, Array::$variant(_)) => {
                                let Array::$variant(a) = &**a else { unreachable!("matched above") };
                                arrays.push(a)
                            }
                            other => {
                                return Err(invalid(format!(
                                    "padded_batch: component {}: element {i} is a {}, element 0 a {}",
                                    $component,
                                    other.describe(),
                                    $head.dtype()
                                )));
                            }
                        }
                    }
                    Value::array(pad_stack(&arrays, $shape, $pad, $component)?)
                }
            )*
        }
    };
}

/// Pads and stacks a batch of elements of one structure (tf.data's `padded_batch`).
pub(crate) fn padded_stack(items: &[Value], spec: &PadSpec) -> anyhow::Result<Value> {
    let Some(first) = items.first() else {
        return Err(invalid("padded_batch: an empty batch".into()));
    };
    if items.iter().any(Value::has_packed) {
        // Packed strings (made for the hand-over) are padded as the string tensors they hold.
        let unpacked = items
            .iter()
            .map(|v| v.clone().unpack_strings())
            .collect::<anyhow::Result<Vec<_>>>()?;
        return padded_stack(&unpacked, spec);
    }
    let refs: Vec<&Value> = items.iter().collect();
    padded_refs(first, &refs, spec, &mut 0)
}

fn padded_refs(
    first: &Value,
    all: &[&Value],
    spec: &PadSpec,
    component: &mut usize,
) -> anyhow::Result<Value> {
    let structure = |i: usize, v: &Value| {
        invalid(format!(
            "padded_batch: the elements' structures differ: element 0 is a {}, element {i} a {}",
            first.describe(),
            v.describe()
        ))
    };
    let default = leaf();
    match (first, spec) {
        (Value::Tuple(head), PadSpec::Tuple(_) | PadSpec::Leaf { .. }) => {
            let mut out = Vec::with_capacity(head.len());
            for (j, h) in head.iter().enumerate() {
                let sub = match spec {
                    PadSpec::Tuple(specs) => specs.get(j).unwrap_or(&default),
                    _ => spec,
                };
                let mut column = Vec::with_capacity(all.len());
                for (i, v) in all.iter().enumerate() {
                    match v {
                        Value::Tuple(items) if items.len() == head.len() => column.push(&items[j]),
                        other => return Err(structure(i, other)),
                    }
                }
                out.push(padded_refs(h, &column, sub, component)?);
            }
            Ok(Value::Tuple(out))
        }
        (Value::Dict(head), PadSpec::Dict(_) | PadSpec::Leaf { .. }) => {
            let mut out = BTreeMap::new();
            for (key, h) in head {
                let sub = match spec {
                    PadSpec::Dict(specs) => specs.get(key).unwrap_or(&default),
                    _ => spec,
                };
                let mut column = Vec::with_capacity(all.len());
                for (i, v) in all.iter().enumerate() {
                    match v {
                        Value::Dict(items) if items.len() == head.len() => match items.get(key) {
                            Some(x) => column.push(x),
                            None => return Err(structure(i, v)),
                        },
                        other => return Err(structure(i, other)),
                    }
                }
                out.insert(key.clone(), padded_refs(h, &column, sub, component)?);
            }
            Ok(Value::Dict(out))
        }
        (Value::Array(head), PadSpec::Leaf { shape, value }) => {
            let c = *component;
            *component += 1;
            Ok(pad_arrays!(
                &**head,
                all,
                shape.as_deref(),
                value.as_ref(),
                c,
                Bool,
                Int8,
                UInt8,
                Int16,
                UInt16,
                Int32,
                UInt32,
                Int64,
                UInt64,
                Float32,
                Float64
            ))
        }
        (Value::String(_) | Value::Strings(_), PadSpec::Leaf { shape, value }) => {
            let c = *component;
            *component += 1;
            // One string is padded as the 0-d tensor it is.
            let mut owned = Vec::with_capacity(all.len());
            for (i, v) in all.iter().enumerate() {
                owned.push(v.string_array().ok_or_else(|| structure(i, v))?);
            }
            let arrays: Vec<&ArrayD<Bytes>> = owned.iter().map(|a| a.as_ref()).collect();
            Ok(Value::strings(pad_stack(
                &arrays,
                shape.as_deref(),
                value.as_ref(),
                c,
            )?))
        }
        (_, _) => Err(invalid(format!(
            "padded_batch: padded_shapes / padding_values do not match the elements' structure \
             (a {})",
            first.describe()
        ))),
    }
}
