//! `StringsView`: a string tensor handed to Python without copying its strings
//! (`parse_example(..., strings="view")`).
//!
//! The strings stay where the pipeline has them (slices of the records they were parsed
//! from, in the reader's buffers or mapped windows); Python receives one object per tensor,
//! and each string it asks for is a read-only numpy `uint8` array over those bytes, whose
//! base keeps them alive. A consumer that reads some strings pays for those only; one that
//! reads none (a batch whose images go to a decoder later, or not at all) pays nothing per
//! string.

use std::sync::Arc;

use bytes::Bytes;
use numpy::ndarray::{ArrayD, ArrayView1, IxDyn};
use numpy::{PyArray, PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

/// A string tensor whose strings are handed over as views (see the module doc): strings
/// `start..start + size` of `strings`, row-major over `shape`.
#[pyclass(frozen, module = "streamload._native", name = "StringsView", sequence)]
pub(crate) struct StringsView {
    strings: Arc<[Bytes]>,
    start: usize,
    shape: Vec<usize>,
}

impl StringsView {
    /// The view of a string tensor of rank 1 or more.
    pub(crate) fn new(strings: ArrayD<Bytes>) -> StringsView {
        let shape = strings.shape().to_vec();
        // Moved out in row-major order (no reference count touched).
        let strings: Arc<[Bytes]> = strings.into_iter().collect();
        StringsView {
            strings,
            start: 0,
            shape,
        }
    }

    /// Its strings as a string tensor (shared, not copied).
    pub(crate) fn to_array(&self) -> PyResult<ArrayD<Bytes>> {
        ArrayD::from_shape_vec(IxDyn(&self.shape), self.own().to_vec())
            .map_err(|e| PyTypeError::new_err(e.to_string()))
    }

    fn size(&self) -> usize {
        self.shape.iter().product()
    }

    fn own(&self) -> &[Bytes] {
        &self.strings[self.start..self.start + self.size()]
    }
}

#[pymethods]
impl StringsView {
    /// The string tensor's shape (`(256,)` for a batch of 256 strings).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The number of strings.
    #[getter(size)]
    fn py_size(&self) -> usize {
        self.size()
    }

    fn __len__(&self) -> usize {
        self.shape.first().copied().unwrap_or(0)
    }

    /// String `i` of a 1-d tensor as a read-only numpy `uint8` array over its bytes (no
    /// copy); row `i` of an n-d one as a `StringsView`.
    fn __getitem__<'py>(slf: Bound<'py, Self>, i: isize) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        let n = this.__len__() as isize;
        let k = if i < 0 { i + n } else { i };
        if k < 0 || k >= n {
            return Err(PyIndexError::new_err(format!(
                "StringsView index {i} out of range for {n} rows"
            )));
        }
        let k = k as usize;
        if this.shape.len() > 1 {
            let per_row: usize = this.shape[1..].iter().product();
            let row = StringsView {
                strings: Arc::clone(&this.strings),
                start: this.start + k * per_row,
                shape: this.shape[1..].to_vec(),
            };
            return Ok(Bound::new(slf.py(), row)?.into_any());
        }
        let bytes = &this.own()[k];
        Ok(view(&slf, bytes).into_any())
    }

    /// The strings' lengths, an `int64` array of the tensor's shape.
    fn lengths<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lengths: Vec<i64> = self.own().iter().map(|s| s.len() as i64).collect();
        let array = ArrayD::from_shape_vec(IxDyn(&self.shape), lengths)
            .map_err(|e| PyTypeError::new_err(e.to_string()))?;
        Ok(PyArray::from_owned_array(py, array).into_any())
    }

    /// tf.data's form: an object array of `bytes` of the tensor's shape (each string
    /// copied into its `bytes`).
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let objects: Vec<Py<PyAny>> = self
            .own()
            .iter()
            .map(|s| PyBytes::new(py, s).into_any().unbind())
            .collect();
        let array = ArrayD::from_shape_vec(IxDyn(&self.shape), objects)
            .map_err(|e| PyTypeError::new_err(e.to_string()))?;
        Ok(PyArray::from_owned_object_array(py, array).into_any())
    }

    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = (dtype, copy);
        self.to_numpy(py)
    }

    fn __repr__(&self) -> String {
        format!("StringsView(shape={:?})", self.shape)
    }
}

/// A read-only numpy array over `bytes`, whose base is `owner` (which holds them).
#[allow(unsafe_code)]
fn view<'py>(owner: &Bound<'py, StringsView>, bytes: &Bytes) -> Bound<'py, PyArray1<u8>> {
    let data = ArrayView1::from(&bytes[..]);
    // SAFETY: `owner` is frozen and holds `bytes` (an immutable, reference-counted buffer)
    // for as long as it lives; numpy keeps `owner` alive as the array's base, so the
    // memory stays valid and is never moved or written (the array is made read-only
    // before Python sees it).
    let array = unsafe { PyArray1::borrow_from_array(&data, owner.clone().into_any()) };
    array.readwrite().make_nonwriteable();
    array
}
