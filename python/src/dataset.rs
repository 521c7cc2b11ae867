//! The Python `Dataset`: a `streamload::Dataset<Value>` and one thin method per tf.data
//! operation, with tf.data's names, keyword arguments and argument checks.

use std::hash::BuildHasher;
use std::sync::Arc;

use bytes::Bytes;
use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator as PyIter, PyTuple};
use streamload::{
    AUTOTUNE as RUST_AUTOTUNE, Cardinality, Checkpoint, Dataset, Options, Parallelism,
};

use crate::errors;
use crate::iterator::PyIterator;
use crate::padding;
use crate::spec;
use crate::transforms::Transform;
use crate::value::Value;

/// tf.data's `AUTOTUNE`.
pub(crate) const AUTOTUNE: i64 = -1;
/// The largest `num_parallel_calls`, `cycle_length` or `num_parallel_reads` taken.
const MAX_PARALLELISM: i64 = 1 << 16;
/// tf.data's `INFINITE_CARDINALITY`.
pub(crate) const INFINITE: i64 = -1;
/// tf.data's `UNKNOWN_CARDINALITY`.
pub(crate) const UNKNOWN: i64 = -2;

/// A re-iterable recipe of elements (tf.data's `tf.data.Dataset`): each `iter()` runs it
/// once, in Rust, as a fresh epoch.
#[pyclass(name = "Dataset", module = "streamload._native", frozen)]
pub(crate) struct PyDataset {
    pub(crate) inner: Dataset<Value>,
    /// How to shard it by file or row group, for a file reader made from a list of files.
    pub(crate) sharder: Option<crate::distribute::Sharder>,
}

impl PyDataset {
    pub(crate) fn wrap(inner: Dataset<Value>) -> PyDataset {
        PyDataset {
            inner,
            sharder: None,
        }
    }
}

/// `num_parallel_calls` / `buffer_size` / `num_parallel_reads` as a parallelism level
/// (`AUTOTUNE` is -1); `None` for `None`.
///
/// At most [`MAX_PARALLELISM`]: each level is a thread, a reader or a slot made up front, so
/// a mistyped huge value would take the process down (threads refused, memory exhausted)
/// rather than fail.
pub(crate) fn parallelism(
    py: Python<'_>,
    what: &str,
    n: Option<i64>,
) -> PyResult<Option<Parallelism>> {
    match n {
        None => Ok(None),
        Some(AUTOTUNE) => Ok(Some(RUST_AUTOTUNE)),
        Some(n) if n > MAX_PARALLELISM => Err(errors::invalid(
            py,
            format!("{what} must be at most {MAX_PARALLELISM} (or AUTOTUNE), got {n}"),
        )),
        Some(n) if n > 0 => Ok(Some(Parallelism::Fixed(n as usize))),
        Some(n) => Err(errors::invalid(
            py,
            format!("{what} must be greater than zero or AUTOTUNE (-1), got {n}"),
        )),
    }
}

/// `strings=`: how string tensors are handed over: as object arrays of `bytes` (`"bytes"`,
/// tf.data's `as_numpy_iterator`), packed (`"packed"`), or as views (`"view"`).
#[derive(Clone, Copy)]
pub(crate) enum StringForm {
    Bytes,
    Packed,
    View,
}

impl StringForm {
    /// `value`'s string tensors in this form.
    pub(crate) fn apply(self, value: Value) -> Value {
        match self {
            StringForm::Bytes => value,
            StringForm::Packed => value.pack_strings(),
            StringForm::View => value.view_strings(),
        }
    }
}

pub(crate) fn string_format(py: Python<'_>, strings: &str) -> PyResult<StringForm> {
    match strings {
        "bytes" => Ok(StringForm::Bytes),
        "packed" => Ok(StringForm::Packed),
        "view" => Ok(StringForm::View),
        other => Err(errors::invalid(
            py,
            format!("strings must be \"bytes\", \"packed\" or \"view\", got {other:?}"),
        )),
    }
}

/// Calls `f` with an element: a tuple's components as separate arguments (as tf.data does),
/// anything else as the one argument. The GIL is held only inside.
fn call(f: &Py<PyAny>, value: Value) -> anyhow::Result<Value> {
    Python::attach(|py| {
        let arg = value.into_py(py)?;
        let result = match arg.cast::<PyTuple>() {
            Ok(args) => f.bind(py).call1(args.clone())?,
            Err(_) => f.bind(py).call1((arg,))?,
        };
        Value::from_py(&result)
    })
    .map_err(anyhow::Error::from)
}

/// Calls a predicate with an element, as [`call`]; its result is read as Python's truth.
fn test(f: &Py<PyAny>, value: &Value) -> anyhow::Result<bool> {
    Python::attach(|py| {
        let arg = value.clone().into_py(py)?;
        let result = match arg.cast::<PyTuple>() {
            Ok(args) => f.bind(py).call1(args.clone())?,
            Err(_) => f.bind(py).call1((arg,))?,
        };
        result.is_truthy()
    })
    .map_err(anyhow::Error::from)
}

/// The dataset `f` makes of an element (`interleave`, `flat_map`); one that yields the
/// error when `f` raises or returns something else.
fn inner_dataset(f: &Py<PyAny>, value: Value) -> Dataset<Value> {
    let made = Python::attach(|py| -> PyResult<Dataset<Value>> {
        let arg = value.into_py(py)?;
        let result = match arg.cast::<PyTuple>() {
            Ok(args) => f.bind(py).call1(args.clone())?,
            Err(_) => f.bind(py).call1((arg,))?,
        };
        match result.cast::<PyDataset>() {
            Ok(ds) => Ok(ds.get().inner.clone()),
            Err(_) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "the function of interleave/flat_map must return a Dataset, not {}",
                crate::value::type_name(&result)
            ))),
        }
    });
    match made {
        Ok(ds) => ds,
        Err(e) => {
            let e = Arc::new(e);
            Dataset::range(0, 1)
                .try_map(move |_| Err(Python::attach(|py| anyhow::Error::from(e.clone_ref(py)))))
        }
    }
}

/// The elements of a Python iterator, converted as they come; the GIL taken for each.
struct PyElements {
    /// `None` once it ended or failed.
    iter: Option<Py<PyAny>>,
    /// Why the generator could not be started, yielded first.
    failed: Option<anyhow::Error>,
}

impl Iterator for PyElements {
    type Item = anyhow::Result<Value>;

    fn next(&mut self) -> Option<anyhow::Result<Value>> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        let iter = self.iter.as_ref()?;
        let next = Python::attach(|py| -> PyResult<Option<Value>> {
            let iter = iter.bind(py).cast::<PyIter>()?.clone();
            match iter.into_iter().next() {
                Some(item) => Value::from_py(&item?).map(Some),
                None => Ok(None),
            }
        });
        match next {
            Ok(Some(v)) => Some(Ok(v)),
            Ok(None) => {
                self.iter = None;
                None
            }
            Err(e) => {
                self.iter = None;
                Some(Err(e.into()))
            }
        }
    }
}

/// `tf.data.Dataset.list_files(file_pattern, shuffle=None, seed=None)`: the file names
/// matching a glob (local, or an object-storage URL such as `s3://bucket/train-*`), as
/// strings; shuffled unless `shuffle=False` (tf.data's default), by `seed` when given.
#[pyfunction]
#[pyo3(signature = (file_pattern, shuffle=None, seed=None))]
pub(crate) fn list_files(
    file_pattern: &str,
    shuffle: Option<bool>,
    seed: Option<u64>,
) -> PyDataset {
    let order = match shuffle {
        Some(false) => None,
        _ => Some(
            seed.unwrap_or_else(|| std::collections::hash_map::RandomState::new().hash_one(0u8)),
        ),
    };
    PyDataset::wrap(
        Dataset::list_files(file_pattern, order)
            .map(|location| Value::string(Bytes::from(location.to_string()))),
    )
}

#[pymethods]
impl PyDataset {
    /// `Dataset.range(stop)`, `range(start, stop[, step])`: `int64` scalars.
    #[staticmethod]
    #[pyo3(signature = (*args))]
    fn range(py: Python<'_>, args: Vec<i64>) -> PyResult<PyDataset> {
        let (start, stop, step) = match args[..] {
            [stop] => (0, stop, 1),
            [start, stop] => (start, stop, 1),
            [start, stop, step] => (start, stop, step),
            _ => {
                return Err(errors::invalid(
                    py,
                    format!("range takes 1 to 3 arguments ({} given)", args.len()),
                ));
            }
        };
        if step == 0 {
            return Err(errors::invalid(py, "step must be a non-zero integer."));
        }
        Ok(PyDataset::wrap(
            Dataset::range_step(start, stop, step).map(Value::int64),
        ))
    }

    /// `Dataset.list_files(file_pattern, shuffle=None, seed=None)`: see `streamload.list_files`.
    #[staticmethod]
    #[pyo3(name = "list_files", signature = (file_pattern, shuffle=None, seed=None))]
    fn list_files_static(
        file_pattern: &str,
        shuffle: Option<bool>,
        seed: Option<u64>,
    ) -> PyDataset {
        list_files(file_pattern, shuffle, seed)
    }

    /// `Dataset.from_tensor_slices(tensors)`: the rows of each component along its first
    /// axis. Components are numpy arrays, lists, tuples (structure) or dicts of them; they
    /// are copied into Rust once, here.
    #[staticmethod]
    fn from_tensor_slices(py: Python<'_>, tensors: &Bound<'_, PyAny>) -> PyResult<PyDataset> {
        let value = Value::from_py(tensors)?;
        let rows = value.rows().map_err(|e| errors::invalid(py, e))?;
        let value = Arc::new(value);
        Ok(PyDataset::wrap(
            Dataset::range(0, rows as i64).map(move |i| value.row(i as usize)),
        ))
    }

    /// `Dataset.from_tensors(tensors)`: one element, the whole structure.
    #[staticmethod]
    fn from_tensors(tensors: &Bound<'_, PyAny>) -> PyResult<PyDataset> {
        let value = Value::from_py(tensors)?;
        Ok(PyDataset::wrap(Dataset::from_vec(vec![value])))
    }

    /// `Dataset.from_generator(generator, ...)`: the elements a Python generator yields,
    /// converted to tensors. `generator` is a callable returning an iterator, called once per
    /// epoch; it runs on a thread of streamload's, holding the GIL only while it makes an
    /// element. Not resumable (a checkpoint says so).
    #[staticmethod]
    #[pyo3(signature = (generator, output_types=None, output_shapes=None, args=None, output_signature=None))]
    fn from_generator(
        generator: Py<PyAny>,
        output_types: Option<&Bound<'_, PyAny>>,
        output_shapes: Option<&Bound<'_, PyAny>>,
        args: Option<Py<PyTuple>>,
        output_signature: Option<&Bound<'_, PyAny>>,
    ) -> PyDataset {
        // The signature is accepted for porting; the elements' own types are kept.
        let _ = (output_types, output_shapes, output_signature);
        let generator = Arc::new(generator);
        let args = Arc::new(args);
        PyDataset::wrap(Dataset::try_from_generator(1, move || {
            let made = Python::attach(|py| -> PyResult<Py<PyAny>> {
                let args = match args.as_ref() {
                    Some(a) => a.bind(py).clone(),
                    None => PyTuple::empty(py),
                };
                Ok(generator
                    .bind(py)
                    .call1(args)?
                    .try_iter()?
                    .into_any()
                    .unbind())
            });
            match made {
                Ok(iter) => PyElements {
                    iter: Some(iter),
                    failed: None,
                },
                Err(e) => PyElements {
                    iter: None,
                    failed: Some(e.into()),
                },
            }
        }))
    }

    /// `map(map_func, num_parallel_calls=None, deterministic=None)`: `map_func` on every
    /// element (a tuple's components as separate arguments). Calls run on threads of
    /// streamload's, in input order: one at a time, or `num_parallel_calls` at once
    /// (`AUTOTUNE` lets streamload choose); each holds the GIL only while `map_func` runs.
    /// `deterministic` and `name` are taken for porting; the order is the input's unless
    /// `with_options` sets `deterministic = False`. An exception is raised from the iterator in the
    /// element's place, as itself.
    #[pyo3(signature = (map_func, num_parallel_calls=None, deterministic=None, name=None))]
    fn map(
        &self,
        py: Python<'_>,
        map_func: Py<PyAny>,
        num_parallel_calls: Option<i64>,
        deterministic: Option<bool>,
        name: Option<&str>,
    ) -> PyResult<PyDataset> {
        let _ = (deterministic, name);
        // A built-in transform (`streamload.image`, `streamload.text`): run in Rust, without
        // the GIL.
        if let Ok(t) = map_func.bind(py).cast::<Transform>() {
            let n = parallelism(py, "num_parallel_calls", num_parallel_calls)?
                .unwrap_or(Parallelism::Fixed(1));
            return Ok(PyDataset::wrap(t.get().map(&self.inner, n)));
        }
        let f = Arc::new(map_func);
        // A Python function is CPU-bound user code: even unparallel it runs on a thread of
        // streamload's, never on an async worker (where waiting for the GIL would stall
        // the readers); one call at a time, in order.
        let n = parallelism(py, "num_parallel_calls", num_parallel_calls)?
            .unwrap_or(Parallelism::Fixed(1));
        Ok(PyDataset::wrap(
            self.inner.try_map_parallel(n, move |v| call(&f, v)),
        ))
    }

    /// `interleave(map_func, cycle_length=None, block_length=None, num_parallel_calls=None)`:
    /// `map_func` makes a dataset of each element; `cycle_length` of them (`AUTOTUNE` or
    /// `None`: one per core) are read at once, `block_length` (default 1) elements from each
    /// in turn, with tf.data's order. With `num_parallel_calls`, the inputs are read ahead
    /// by tasks of their own (the order stays tf.data's deterministic one).
    #[pyo3(signature = (map_func, cycle_length=None, block_length=None, num_parallel_calls=None, deterministic=None, name=None))]
    #[allow(clippy::too_many_arguments)] // tf.data's keyword arguments
    fn interleave(
        &self,
        py: Python<'_>,
        map_func: Py<PyAny>,
        cycle_length: Option<i64>,
        block_length: Option<i64>,
        num_parallel_calls: Option<i64>,
        deterministic: Option<bool>,
        name: Option<&str>,
    ) -> PyResult<PyDataset> {
        let _ = (deterministic, name);
        let cycle = parallelism(py, "cycle_length", cycle_length)?.unwrap_or(RUST_AUTOTUNE);
        let block = match block_length {
            None => 1,
            Some(n) if n > 0 => n as usize,
            Some(n) => {
                return Err(errors::invalid(
                    py,
                    format!("block_length must be greater than zero, got {n}"),
                ));
            }
        };
        let parallel = parallelism(py, "num_parallel_calls", num_parallel_calls)?;
        let f = Arc::new(map_func);
        let open = move |v: Value| inner_dataset(&f, v);
        Ok(PyDataset::wrap(match parallel {
            None => self.inner.interleave(cycle, block, open),
            Some(n) => self.inner.parallel_interleave(cycle, block, n, open),
        }))
    }

    /// `flat_map(map_func)`: the datasets `map_func` makes of the elements, one after the
    /// other.
    fn flat_map(&self, map_func: Py<PyAny>) -> PyDataset {
        let f = Arc::new(map_func);
        PyDataset::wrap(self.inner.flat_map(move |v| inner_dataset(&f, v)))
    }

    /// `Dataset.zip(datasets)`: a tuple (or dict) of datasets to a dataset of tuples (or
    /// dicts); it ends with the shortest.
    #[staticmethod]
    fn zip(py: Python<'_>, datasets: &Bound<'_, PyAny>) -> PyResult<PyDataset> {
        let not_datasets =
            || errors::invalid(py, "zip: datasets must be a tuple or dict of Datasets");
        if let Ok(d) = datasets.cast::<PyDict>() {
            let mut keys = Vec::with_capacity(d.len());
            let mut parts = Vec::with_capacity(d.len());
            let mut sorted: Vec<(String, Dataset<Value>)> = Vec::with_capacity(d.len());
            for (k, v) in d.iter() {
                let key: String = k.extract()?;
                let ds = v.cast::<PyDataset>().map_err(|_| not_datasets())?;
                sorted.push((key, ds.get().inner.clone()));
            }
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            for (k, ds) in sorted {
                keys.push(k);
                parts.push(ds);
            }
            return Ok(PyDataset::wrap(Dataset::zip_all(parts).map(
                move |values| Value::Dict(keys.iter().cloned().zip(values).collect()),
            )));
        }
        let t = datasets.cast::<PyTuple>().map_err(|_| not_datasets())?;
        let parts = t
            .iter()
            .map(|v| {
                v.cast::<PyDataset>()
                    .map(|ds| ds.get().inner.clone())
                    .map_err(|_| not_datasets())
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyDataset::wrap(Dataset::zip_all(parts).map(Value::Tuple)))
    }

    /// `Dataset.sample_from_datasets(datasets, weights=None, seed=None,
    /// stop_on_empty_dataset=False, rerandomize_each_iteration=None)`: elements drawn at
    /// random from `datasets` by `weights` (uniform when `None`), each dataset's own order
    /// kept; the same draws every epoch (`rerandomize_each_iteration=True` is not offered).
    #[staticmethod]
    #[pyo3(signature = (datasets, weights=None, seed=None, stop_on_empty_dataset=false, rerandomize_each_iteration=None))]
    fn sample_from_datasets(
        py: Python<'_>,
        datasets: Vec<PyRef<'_, PyDataset>>,
        weights: Option<Vec<f64>>,
        seed: Option<u64>,
        stop_on_empty_dataset: bool,
        rerandomize_each_iteration: Option<bool>,
    ) -> PyResult<PyDataset> {
        if rerandomize_each_iteration == Some(true) {
            return Err(errors::invalid(
                py,
                "sample_from_datasets: rerandomize_each_iteration=True is not supported \
                 (every epoch draws the same sequence)",
            ));
        }
        if datasets.is_empty() {
            return Err(errors::invalid(
                py,
                "sample_from_datasets: `datasets` should not be empty.",
            ));
        }
        if let Some(w) = &weights {
            if w.len() != datasets.len() {
                return Err(errors::invalid(
                    py,
                    format!(
                        "sample_from_datasets: `weights` should have the same length as \
                         `datasets` but got `len(weights)={}` vs. `len(datasets)={}`.",
                        w.len(),
                        datasets.len()
                    ),
                ));
            }
            if w.iter().any(|x| x.is_infinite()) {
                return Err(errors::invalid(
                    py,
                    "sample_from_datasets: weights must be finite",
                ));
            }
        }
        let inputs = datasets.iter().map(|d| d.inner.clone()).collect();
        Ok(PyDataset::wrap(Dataset::sample_from_datasets(
            inputs,
            weights,
            seed,
            stop_on_empty_dataset,
        )))
    }

    /// `Dataset.mix(datasets, weights, seed=None, interpolate=False)`: elements drawn from
    /// `datasets` by weights that follow a schedule over the epoch's steps (elements passed
    /// on): `weights` is one list of weights, or a list of `(step, weights)` points (each
    /// point's weights from its step on; with `interpolate=True`, linear between points).
    /// The schedule is not part of the recipe's identity: a dataset built with new weights
    /// resumes a checkpoint and goes on from its step under them. With `over_tokens=True`
    /// a step is a token rather than an element: each element is a 1-D array of token ids
    /// (or holds one at `key`) and counts for its length. `start_step` starts the schedule
    /// at that step (an elastic resume: the steps the ranks had taken).
    #[staticmethod]
    #[pyo3(signature = (datasets, weights, seed=None, interpolate=false, over_tokens=false, key=None, start_step=0))]
    #[allow(clippy::too_many_arguments)]
    fn mix(
        py: Python<'_>,
        datasets: Vec<PyRef<'_, PyDataset>>,
        weights: &Bound<'_, PyAny>,
        seed: Option<u64>,
        interpolate: bool,
        over_tokens: bool,
        key: Option<&Bound<'_, PyAny>>,
        start_step: u64,
    ) -> PyResult<PyDataset> {
        use streamload::Mixture;
        if datasets.is_empty() {
            return Err(errors::invalid(py, "mix: `datasets` should not be empty."));
        }
        let n = datasets.len();
        let check = |w: &[f64]| -> PyResult<()> {
            if w.len() != n {
                return Err(errors::invalid(
                    py,
                    format!("mix: {} weights for {n} datasets", w.len()),
                ));
            }
            if w.iter().any(|x| !x.is_finite() || *x < 0.0) {
                return Err(errors::invalid(
                    py,
                    "mix: weights must be finite and not negative",
                ));
            }
            Ok(())
        };
        let mixture = if let Ok(w) = weights.extract::<Vec<f64>>() {
            check(&w)?;
            Mixture::constant(w)
        } else {
            let points: Vec<(u64, Vec<f64>)> = weights.extract().map_err(|_| {
                errors::invalid(
                    py,
                    "mix: weights must be a list of floats or of (step, weights) pairs",
                )
            })?;
            if points.is_empty() {
                return Err(errors::invalid(py, "mix: no (step, weights) points"));
            }
            for (_, w) in &points {
                check(w)?;
            }
            if interpolate {
                Mixture::linear(points)
            } else {
                Mixture::piecewise(points)
            }
        };
        let mixture = mixture.starting_at(start_step);
        let key = component(key)?;
        if key.is_some() && !over_tokens {
            return Err(errors::invalid(py, "mix: key= needs over_tokens=True"));
        }
        if !over_tokens {
            let inputs = datasets.iter().map(|d| d.inner.clone()).collect();
            return Ok(PyDataset::wrap(Dataset::mix(inputs, mixture, seed)));
        }
        // Each element checked to hold its token ids where `key` says, then counted.
        let inputs = datasets
            .iter()
            .map(|d| {
                let key = key.clone();
                d.inner.try_map(move |v| {
                    crate::value::token_count(&v, key.as_ref())?;
                    Ok(v)
                })
            })
            .collect();
        let length = move |v: &Value| crate::value::token_count(v, key.as_ref()).unwrap_or(0);
        Ok(PyDataset::wrap(Dataset::mix_over_tokens(
            inputs, mixture, seed, length,
        )))
    }

    /// `Dataset.choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=True)`:
    /// each element of `choice_dataset` (an `int64` scalar) says which dataset the next
    /// element comes from (tf.data's); an index out of range is an error naming it.
    #[staticmethod]
    #[pyo3(signature = (datasets, choice_dataset, stop_on_empty_dataset=true))]
    fn choose_from_datasets(
        py: Python<'_>,
        datasets: Vec<PyRef<'_, PyDataset>>,
        choice_dataset: &Bound<'_, PyDataset>,
        stop_on_empty_dataset: bool,
    ) -> PyResult<PyDataset> {
        if datasets.is_empty() {
            return Err(errors::invalid(
                py,
                "choose_from_datasets: `datasets` should not be empty.",
            ));
        }
        let choices = choice_dataset
            .get()
            .inner
            .try_map(|v| crate::value::choice(&v));
        let inputs = datasets.iter().map(|d| d.inner.clone()).collect();
        Ok(PyDataset::wrap(Dataset::choose_from_datasets(
            inputs,
            choices,
            stop_on_empty_dataset,
        )))
    }

    /// `concatenate(dataset)`: this dataset's elements, then `dataset`'s.
    fn concatenate(&self, dataset: &Bound<'_, PyDataset>) -> PyDataset {
        PyDataset::wrap(self.inner.concatenate(&dataset.get().inner))
    }

    /// `enumerate(start=0)`: `(index, element)` tuples, the index an `int64`.
    #[pyo3(signature = (start=0))]
    fn enumerate(&self, start: i64) -> PyDataset {
        PyDataset::wrap(
            self.inner
                .enumerate(start)
                .map(|(i, v)| Value::Tuple(vec![Value::int64(i), v])),
        )
    }

    /// `unbatch()`: the rows of each element along its first axis (every component split
    /// together).
    fn unbatch(&self) -> PyDataset {
        PyDataset::wrap(self.inner.flat_map(|v| match v.rows() {
            Ok(n) => Dataset::from_vec((0..n).map(|i| v.row(i)).collect()),
            Err(e) => {
                let message = e.replace("from_tensor_slices", "unbatch");
                Dataset::range(0, 1).try_map(move |_| Err(crate::value::invalid(message.clone())))
            }
        }))
    }

    /// `cache(filename="")`: the first epoch's elements kept in memory; later epochs read
    /// them from there (a shuffle before it is frozen). Caching to a file is not there yet.
    #[pyo3(signature = (filename="", name=None))]
    fn cache(&self, py: Python<'_>, filename: &str, name: Option<&str>) -> PyResult<PyDataset> {
        let _ = name;
        if !filename.is_empty() {
            return Err(errors::invalid(
                py,
                "cache: caching to a file is not supported yet; cache() keeps the elements in memory",
            ));
        }
        Ok(PyDataset::wrap(self.inner.cache()))
    }

    /// `filter(predicate)`: the elements for which `predicate` is true.
    fn filter(&self, predicate: Py<PyAny>) -> PyDataset {
        let p = Arc::new(predicate);
        // On a thread of streamload's, as `map`'s function.
        PyDataset::wrap(
            self.inner
                .try_map_parallel(1, move |v| {
                    let keep = test(&p, &v)?;
                    Ok((v, keep))
                })
                .filter(|(_, keep)| *keep)
                .map(|(v, _)| v),
        )
    }

    /// `take_while(predicate)`: the elements up to the first for which `predicate` is false.
    fn take_while(&self, predicate: Py<PyAny>) -> PyDataset {
        let p = Arc::new(predicate);
        // The predicate on a thread of streamload's, as `map`'s function.
        PyDataset::wrap(
            self.inner
                .try_map_parallel(1, move |v| {
                    let keep = test(&p, &v)?;
                    Ok((v, keep))
                })
                .take_while(|(_, keep)| *keep)
                .map(|(v, _)| v),
        )
    }

    /// `ignore_errors()`: error elements (a damaged record, an exception in a `map`
    /// function) are dropped, and the epoch goes on.
    fn ignore_errors(&self) -> PyDataset {
        PyDataset::wrap(self.inner.ignore_errors())
    }

    /// `reduce(initial_state, reduce_func)`: runs one epoch, folding each element into the
    /// state with `reduce_func(state, element)`; returns the last state.
    fn reduce(
        &self,
        py: Python<'_>,
        initial_state: Py<PyAny>,
        reduce_func: Py<PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let it = PyIterator::new(self.inner.iter());
        let mut state = initial_state;
        while let Some(element) = it.next_element(py)? {
            state = reduce_func.call1(py, (state, element))?;
        }
        Ok(state)
    }

    /// `shuffle(buffer_size, seed=None, reshuffle_each_iteration=None)`.
    #[pyo3(signature = (buffer_size, seed=None, reshuffle_each_iteration=None))]
    fn shuffle(
        &self,
        py: Python<'_>,
        buffer_size: i64,
        seed: Option<u64>,
        reshuffle_each_iteration: Option<bool>,
    ) -> PyResult<PyDataset> {
        if buffer_size <= 0 {
            return Err(errors::invalid(
                py,
                format!("buffer_size must be greater than zero, got {buffer_size}"),
            ));
        }
        Ok(PyDataset::wrap(self.inner.shuffle_with(
            buffer_size as usize,
            seed,
            reshuffle_each_iteration.unwrap_or(true),
        )))
    }

    /// `batch(batch_size, drop_remainder=False)`: elements stacked into tensors with a
    /// leading batch dimension (Rust buffers, handed to numpy without a copy). The other
    /// keyword arguments are taken for porting; stacking runs in the pipeline, in order.
    #[pyo3(signature = (batch_size, drop_remainder=false, num_parallel_calls=None, deterministic=None, name=None))]
    fn batch(
        &self,
        py: Python<'_>,
        batch_size: i64,
        drop_remainder: bool,
        num_parallel_calls: Option<i64>,
        deterministic: Option<bool>,
        name: Option<&str>,
    ) -> PyResult<PyDataset> {
        let _ = (num_parallel_calls, deterministic, name);
        if batch_size <= 0 {
            return Err(errors::invalid(py, "batch_size must be greater than zero."));
        }
        let batches = if drop_remainder {
            self.inner.batch_drop_remainder(batch_size as usize)
        } else {
            self.inner.batch(batch_size as usize)
        };
        Ok(PyDataset::wrap(batches.try_map(Value::stack_owned)))
    }

    /// `padded_batch(batch_size, padded_shapes=None, padding_values=None,
    /// drop_remainder=False)`: elements of different shapes padded to a common shape, then
    /// stacked. Each dimension is padded to `padded_shapes`' (a list per tensor, `None` or
    /// -1 for "the longest in the batch"; tuples and dicts for structure), else to the
    /// longest; with `padding_values` (default 0, or `b""`). An element longer than a given
    /// dimension raises `DataLossError` ("Attempted to pad to a smaller size than the input
    /// element."), as TensorFlow does.
    #[pyo3(signature = (batch_size, padded_shapes=None, padding_values=None, drop_remainder=false, name=None))]
    fn padded_batch(
        &self,
        py: Python<'_>,
        batch_size: i64,
        padded_shapes: Option<&Bound<'_, PyAny>>,
        padding_values: Option<&Bound<'_, PyAny>>,
        drop_remainder: bool,
        name: Option<&str>,
    ) -> PyResult<PyDataset> {
        let _ = name;
        if batch_size <= 0 {
            return Err(errors::invalid(py, "batch_size must be greater than zero."));
        }
        let spec = padding::PadSpec::from_py(padded_shapes, padding_values)?;
        let batches = if drop_remainder {
            self.inner.batch_drop_remainder(batch_size as usize)
        } else {
            self.inner.batch(batch_size as usize)
        };
        Ok(PyDataset::wrap(batches.try_map(move |items| {
            padding::padded_stack(&items, &spec)
        })))
    }

    /// `pack(sequence_length, packing="concat_then_split", num_packing_bins=None)`: documents
    /// of token ids (1-D integer arrays, as `Tokenizer.encode` makes them) packed into
    /// sequences of `sequence_length` tokens, as Grain's packing transformations make them:
    /// `"concat_then_split"` (no padding but in the last sequence), `"first_fit"` or
    /// `"best_fit"` over `num_packing_bins` bins (a document longer than a sequence is split).
    /// Each element is a dict: `tokens` (uint32), `segment_ids` and `positions` (int32; 0 for
    /// padding) and `loss_mask` (bool). `key=` picks the ids from a dict (by name) or a
    /// tuple (by index). A checkpoint saves where it is in a document, not its tokens.
    #[pyo3(signature = (sequence_length, packing="concat_then_split", num_packing_bins=None, key=None))]
    fn pack(
        &self,
        py: Python<'_>,
        sequence_length: i64,
        packing: &str,
        num_packing_bins: Option<i64>,
        key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyDataset> {
        use streamload::text::Packing;
        if sequence_length <= 0 {
            return Err(errors::invalid(
                py,
                "sequence_length must be greater than zero.",
            ));
        }
        let bins = match num_packing_bins {
            Some(n) if n <= 0 => {
                return Err(errors::invalid(
                    py,
                    "num_packing_bins must be greater than zero.",
                ));
            }
            n => n.map(|n| n as usize),
        };
        let packing = match (packing, bins) {
            ("concat_then_split", None) => Packing::ConcatThenSplit,
            ("first_fit", Some(bins)) => Packing::FirstFit { bins },
            ("best_fit", Some(bins)) => Packing::BestFit { bins },
            ("concat_then_split", Some(_)) => {
                return Err(errors::invalid(
                    py,
                    "num_packing_bins is for first_fit and best_fit",
                ));
            }
            ("first_fit" | "best_fit", None) => {
                return Err(errors::invalid(
                    py,
                    format!("{packing} needs num_packing_bins"),
                ));
            }
            (other, _) => {
                return Err(errors::invalid(
                    py,
                    format!(
                        "packing must be \"concat_then_split\", \"first_fit\" or \"best_fit\", got {other:?}"
                    ),
                ));
            }
        };
        let key = component(key)?;
        let packed = self
            .inner
            .try_map(move |v| crate::value::token_ids(v, key.as_ref()))
            .pack(sequence_length as usize, packing)
            .map(|p| {
                let mut out = std::collections::BTreeMap::new();
                out.insert("tokens".to_string(), Value::vector(p.tokens));
                out.insert("segment_ids".to_string(), Value::vector(p.segment_ids));
                out.insert("positions".to_string(), Value::vector(p.positions));
                out.insert("loss_mask".to_string(), Value::vector(p.loss_mask));
                Value::Dict(out)
            });
        Ok(PyDataset::wrap(packed))
    }

    /// `batch_by_tokens(max_tokens)`: documents of token ids (1-D arrays) grouped into
    /// batches of at most `max_tokens` tokens, whole documents in order; each batch a
    /// `RaggedTensor`-like pair `(values, row_splits)` of the documents' ids concatenated and
    /// where each starts (`key=` as `pack`'s). A document longer than the budget raises
    /// `InvalidArgumentError` in its place (never cut).
    #[pyo3(signature = (max_tokens, key=None))]
    fn batch_by_tokens(
        &self,
        py: Python<'_>,
        max_tokens: i64,
        key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyDataset> {
        if max_tokens <= 0 {
            return Err(errors::invalid(py, "max_tokens must be greater than zero."));
        }
        let key = component(key)?;
        let batches = self
            .inner
            .try_map(move |v| crate::value::token_ids(v, key.as_ref()))
            .batch_by_tokens(max_tokens as usize, Vec::len)
            .map(|docs| {
                let mut splits = Vec::with_capacity(docs.len() + 1);
                splits.push(0i64);
                for d in &docs {
                    splits.push(splits[splits.len() - 1] + d.len() as i64);
                }
                Value::Tuple(vec![Value::vector(docs.concat()), Value::vector(splits)])
            });
        Ok(PyDataset::wrap(batches))
    }

    /// `take(count)`: the first `count` elements (all of them when `count` is negative).
    fn take(&self, count: i64) -> PyDataset {
        PyDataset::wrap(self.inner.take(count))
    }

    /// `skip(count)`: all but the first `count` elements (none when `count` is negative).
    fn skip(&self, count: i64) -> PyDataset {
        PyDataset::wrap(self.inner.skip(count))
    }

    /// `repeat(count=None)`: the dataset `count` times; forever when `None` or -1.
    #[pyo3(signature = (count=None))]
    fn repeat(&self, count: Option<i64>) -> PyDataset {
        PyDataset::wrap(match count {
            None => self.inner.repeat(),
            Some(n) if n < 0 => self.inner.repeat(),
            Some(n) => self.inner.repeat_n(n as u64),
        })
    }

    /// `shard(num_shards, index)`: every `num_shards`-th element, from `index`.
    fn shard(&self, py: Python<'_>, num_shards: i64, index: i64) -> PyResult<PyDataset> {
        if num_shards <= 0 {
            return Err(errors::invalid(
                py,
                format!(
                    "Number of shards must be greater than zero (currently num_shards = {num_shards})."
                ),
            ));
        }
        if index < 0 || index >= num_shards {
            return Err(errors::invalid(
                py,
                format!(
                    "Index must be between 0 and {} (currently index = {index}).",
                    num_shards - 1
                ),
            ));
        }
        Ok(PyDataset::wrap(
            self.inner.shard(num_shards as u64, index as u64),
        ))
    }

    /// `prefetch(buffer_size)`: runs everything upstream ahead of the consumer, holding up to
    /// `buffer_size` elements (`AUTOTUNE` lets streamload size it); 0 prefetches nothing.
    fn prefetch(&self, py: Python<'_>, buffer_size: i64) -> PyResult<PyDataset> {
        if buffer_size == 0 {
            return Ok(PyDataset::wrap(self.inner.clone()));
        }
        // Not capped as parallelism levels are: the queue grows only as elements come.
        let n = match buffer_size {
            AUTOTUNE => RUST_AUTOTUNE,
            n if n > 0 => Parallelism::Fixed(n as usize),
            n => {
                return Err(errors::invalid(
                    py,
                    format!("buffer_size must be greater than zero or AUTOTUNE (-1), got {n}"),
                ));
            }
        };
        Ok(PyDataset::wrap(self.inner.prefetch(n)))
    }

    /// `parse_example(features, num_parallel_calls=None, strings="bytes")`: serialized
    /// `tf.train.Example`s to a dict of tensors under a `{name: FixedLenFeature |
    /// VarLenFeature | FixedLenSequenceFeature | SparseFeature | RaggedFeature}` spec, as
    /// `tf.io.parse_single_example` (on single records) or `tf.io.parse_example` (after
    /// `batch`), with TensorFlow's errors. Runs in Rust without the GIL, `num_parallel_calls`
    /// elements at once (`AUTOTUNE`; `None`: one at a time, as `map` without it); the parsed
    /// values are handed over without copies. `strings="packed"` hands each string tensor of
    /// rank 1 or more over as a `PackedStrings` (one buffer and offsets, packed here, on
    /// the parsing threads) instead of an object array of `bytes`; `strings="view"` as a
    /// `StringsView`, whose strings are read-only numpy arrays over the parsed records'
    /// bytes (no copy at all).
    #[pyo3(signature = (features, num_parallel_calls=None, strings="bytes"))]
    fn parse_example(
        &self,
        py: Python<'_>,
        features: &Bound<'_, PyDict>,
        num_parallel_calls: Option<i64>,
        strings: &str,
    ) -> PyResult<PyDataset> {
        let spec = spec::Features::from_py(py, features)?;
        let form = string_format(py, strings)?;
        let parse = move |v: Value| Ok(form.apply(spec::parse(v, &spec)?));
        Ok(PyDataset::wrap(
            match parallelism(py, "num_parallel_calls", num_parallel_calls)? {
                None => self.inner.try_map(parse),
                Some(n) => self.inner.try_map_parallel(n, parse),
            },
        ))
    }

    /// `with_options(options)`: pipeline-wide settings (`streamload.Options`, as
    /// `tf.data.Options`) for every stage of the pipeline this dataset ends.
    fn with_options(&self, py: Python<'_>, options: &Bound<'_, PyAny>) -> PyResult<PyDataset> {
        fn get<'py, T: FromPyObjectOwned<'py>>(
            obj: &Bound<'py, PyAny>,
            name: &str,
        ) -> PyResult<Option<T>> {
            match obj.getattr(name) {
                Ok(v) if v.is_none() => Ok(None),
                Ok(v) => v.extract::<T>().map(Some).map_err(Into::into),
                Err(_) => Ok(None),
            }
        }
        let mut rust = Options::new();
        if let Some(d) = get::<bool>(options, "deterministic")? {
            rust = rust.deterministic(d);
        }
        if let Some(seed) = get::<u64>(options, "seed")? {
            rust = rust.seed(seed);
        }
        if let Some(on) = get::<bool>(options, "stats_timing")? {
            rust = rust.stats_timing(on);
        }
        if let Ok(autotune) = options.getattr("autotune") {
            if let Some(cpu) = get::<usize>(&autotune, "cpu_budget")? {
                if cpu == 0 {
                    return Err(errors::invalid(
                        py,
                        "autotune.cpu_budget must be at least 1",
                    ));
                }
                rust = rust.cpu_budget(cpu);
            }
            if let Some(ram) = get::<u64>(&autotune, "ram_budget")? {
                rust = rust.ram_budget(ram);
            }
        }
        Ok(PyDataset::wrap(self.inner.with_options(rust)))
    }

    /// `distribute(rank=None, world_size=None, policy="auto", remainder="drop",
    /// rotate=None, weights=False)`: this rank's share of the dataset for data-parallel
    /// training; see `streamload.Dataset.distribute` in the stubs.
    #[pyo3(signature = (rank=None, world_size=None, policy="auto", remainder="drop", rotate=None, weights=false))]
    #[allow(clippy::too_many_arguments)] // the keyword arguments
    fn distribute(
        &self,
        py: Python<'_>,
        rank: Option<usize>,
        world_size: Option<usize>,
        policy: &str,
        remainder: &str,
        rotate: Option<u64>,
        weights: bool,
    ) -> PyResult<PyDataset> {
        crate::distribute::distribute(
            py, self, rank, world_size, policy, remainder, rotate, weights,
        )
    }

    /// `assert_cardinality(expected_cardinality)` (tf.data's
    /// `tf.data.experimental.assert_cardinality`): declares the number of elements (so
    /// `distribute` can shard a dataset whose size is not known from its recipe); an epoch
    /// of another length raises `InvalidArgumentError`.
    fn assert_cardinality(&self, py: Python<'_>, expected_cardinality: i64) -> PyResult<PyDataset> {
        if expected_cardinality < 0 {
            return Err(errors::invalid(
                py,
                format!("expected_cardinality must be non-negative, got {expected_cardinality}"),
            ));
        }
        Ok(PyDataset::wrap(
            self.inner.assert_cardinality(expected_cardinality as u64),
        ))
    }

    /// tf.data's `cardinality()`: the number of elements, `INFINITE_CARDINALITY` (-1) or
    /// `UNKNOWN_CARDINALITY` (-2).
    fn cardinality(&self) -> i64 {
        match self.inner.cardinality() {
            Cardinality::Finite(n) => n as i64,
            Cardinality::Infinite => INFINITE,
            Cardinality::Unknown => UNKNOWN,
        }
    }

    /// A new epoch: `for element in ds` runs the recipe once.
    fn __iter__(&self) -> PyIterator {
        PyIterator::new(self.inner.iter())
    }

    /// tf.data's `as_numpy_iterator()`: the same as `iter(ds)` (elements are numpy already).
    fn as_numpy_iterator(&self) -> PyIterator {
        self.__iter__()
    }

    /// Goes on with an epoch from `state` (bytes from `Iterator.checkpoint()`): the first
    /// element is the one after the last the checkpointed iterator returned. The dataset
    /// must be built the same way; `CheckpointError` otherwise.
    fn iter_from(&self, py: Python<'_>, state: &[u8]) -> PyResult<PyIterator> {
        let epoch = Checkpoint::from_bytes(state).and_then(|c| self.inner.iter_from(&c));
        match epoch {
            Ok(epoch) => Ok(PyIterator::new(epoch)),
            Err(e) => Err(errors::to_py(py, e)),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "<streamload.Dataset {} cardinality={}>",
            self.inner.name(),
            self.cardinality()
        )
    }
}

/// `key=`: a dict key (a string) or a tuple index; `None` for the whole element.
fn component(key: Option<&Bound<'_, PyAny>>) -> PyResult<Option<crate::value::Key>> {
    Ok(match key {
        None => None,
        Some(k) if k.is_none() => None,
        Some(k) => Some(match k.extract::<String>() {
            Ok(name) => crate::value::Key::Name(name),
            Err(_) => crate::value::Key::Index(k.extract::<usize>()?),
        }),
    })
}
