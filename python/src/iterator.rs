//! One epoch of a Python dataset: `iter(ds)`.
//!
//! `__next__` releases the GIL and waits on the tokio runtime for the next element, a short
//! tick at a time: between ticks it takes the GIL back to let Python handle signals, so
//! Ctrl-C raises `KeyboardInterrupt` within a tick. Dropping the iterator drops the epoch,
//! which stops every task it spawned.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use streamload::Epoch;

use crate::errors;
use crate::runtime::runtime;
use crate::value::Value;

/// How long `__next__` waits with the GIL released before it checks for signals.
const TICK: Duration = Duration::from_millis(50);

/// An iterator over one epoch of a `Dataset` (`iter(ds)`, `ds.iter_from(state)`).
///
/// Yields elements as numpy arrays that own the buffers Rust filled (no copy), numpy scalars
/// for scalars, `bytes` for strings, tuples and dicts as the dataset's structure.
#[pyclass(name = "Iterator", module = "streamload._native")]
pub(crate) struct PyIterator {
    /// `None` once dropped early by `close()`.
    epoch: Mutex<Option<Epoch<Value>>>,
    /// The addresses of the last element's array buffers, as Rust held them (for tests of
    /// the zero-copy hand-over).
    last_addresses: Mutex<Vec<usize>>,
}

enum Step {
    Item(anyhow::Result<Value>),
    End,
    Waiting,
}

impl PyIterator {
    pub(crate) fn new(epoch: Epoch<Value>) -> Self {
        PyIterator {
            epoch: Mutex::new(Some(epoch)),
            last_addresses: Mutex::new(Vec::new()),
        }
    }

    /// The next element as a Python object; `None` at the end of the epoch. Waits with the
    /// GIL released; raises `KeyboardInterrupt` on Ctrl-C.
    pub(crate) fn next_element(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        loop {
            match py.detach(|| self.step()) {
                Step::Item(Ok(value)) => {
                    let mut addresses = Vec::new();
                    value.addresses(&mut addresses);
                    *self
                        .last_addresses
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = addresses;
                    return Ok(Some(value.into_py(py)?.unbind()));
                }
                Step::Item(Err(e)) => return Err(errors::to_py(py, e)),
                Step::End => return Ok(None),
                // Ctrl-C: `KeyboardInterrupt` from here; the epoch stays as it was.
                Step::Waiting => py.check_signals()?,
            }
        }
    }

    /// Waits up to one tick for the next element, without the GIL.
    fn step(&self) -> Step {
        let mut guard = self.epoch.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(epoch) = guard.as_mut() else {
            return Step::End;
        };
        let rt = match runtime() {
            Ok(rt) => rt,
            Err(e) => return Step::Item(Err(e)),
        };
        match rt.block_on(async { tokio::time::timeout(TICK, epoch.next()).await }) {
            Ok(Some(item)) => Step::Item(item),
            Ok(None) => Step::End,
            Err(_) => Step::Waiting,
        }
    }
}

#[pymethods]
impl PyIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.next_element(py)
    }

    /// The position after the last element this iterator returned, as bytes:
    /// `ds.iter_from(state)` goes on from there (in this process or another).
    ///
    /// Raises `CheckpointError` naming the first stage that cannot save its position
    /// (`from_generator`, ...).
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let saved = py.detach(|| {
            let mut guard = self.epoch.lock().unwrap_or_else(PoisonError::into_inner);
            match guard.as_mut() {
                Some(epoch) => epoch.checkpoint().map(|c| c.to_bytes()),
                None => Err(anyhow::anyhow!(
                    "checkpoint: the iterator was closed; checkpoint before close()"
                )),
            }
        });
        match saved {
            Ok(bytes) => Ok(PyBytes::new(py, &bytes)),
            Err(e) => Err(errors::to_py(py, e)),
        }
    }

    /// The per-stage report of this epoch so far: elements, time and the bottleneck.
    fn stats(&self, py: Python<'_>) -> String {
        py.detach(|| {
            let guard = self.epoch.lock().unwrap_or_else(PoisonError::into_inner);
            guard
                .as_ref()
                .map(|e| e.stats().to_string())
                .unwrap_or_default()
        })
    }

    /// Stops the epoch now: every task it spawned is stopped; later `next` calls end.
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            let epoch = self
                .epoch
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            drop(epoch);
        });
    }

    /// The buffer addresses of the last element's n-d arrays, as Rust held them before the
    /// hand-over (depth first, dict keys in order): equal to the numpy arrays' own data
    /// addresses when no copy was made. For tests.
    fn _last_buffer_addresses(&self) -> Vec<usize> {
        self.last_addresses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for PyIterator {
    fn drop(&mut self) {
        // Stop the epoch's tasks without holding the GIL: a stage may be waiting for it.
        let epoch = self
            .epoch
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if epoch.is_some() {
            Python::attach(|py| py.detach(move || drop(epoch)));
        }
    }
}
