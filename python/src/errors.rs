//! Rust errors as Python exceptions.
//!
//! The exception classes live in `streamload/errors.py` (tf.errors' names, each also a
//! subclass of the matching builtin: `InvalidArgumentError` is a `ValueError`, `DataLossError`
//! an `OSError`, ...). An error that began as a Python exception (raised by a `map`
//! function) is raised again as itself. The message is the Rust error's, with its context
//! (the file, the record).

use pyo3::prelude::*;

/// The `streamload.errors` class for `err`, and its message.
fn classify(err: &anyhow::Error) -> &'static str {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<streamload::Error>() {
            return match e {
                // TensorFlow's class for a too-small padded shape is DataLossError too.
                streamload::Error::DataLoss { .. } | streamload::Error::PaddingTooSmall { .. } => {
                    "DataLossError"
                }
                streamload::Error::InvalidArgument(_) => "InvalidArgumentError",
                streamload::Error::Checkpoint(_) | streamload::Error::NotResumable { .. } => {
                    "CheckpointError"
                }
                _ => "Error",
            };
        }
        if let Some(e) = cause.downcast_ref::<std::io::Error>() {
            return match e.kind() {
                std::io::ErrorKind::NotFound => "NotFoundError",
                std::io::ErrorKind::PermissionDenied => "PermissionDeniedError",
                // Damaged compressed data (an inflate error, a cut stream): TensorFlow's
                // DataLossError.
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof => {
                    "DataLossError"
                }
                _ => "Error",
            };
        }
    }
    by_message(err)
}

/// Errors that reach here as messages only: the storage layer rebuilds an error from its
/// messages (to redact credentials), keeping the types of `std::io` and streamload but not
/// object_store's.
fn by_message(err: &anyhow::Error) -> &'static str {
    for cause in err.chain() {
        let text = cause.to_string();
        // object_store's `NotFound`: "Object at location {path} not found: ...".
        if text.starts_with("Object at location ") && text.contains(" not found") {
            return "NotFoundError";
        }
        // object_store's `PermissionDenied` / `Unauthenticated`.
        if text.starts_with("The operation lacked the necessary privileges")
            || text.starts_with("The operation lacked valid authentication credentials")
        {
            return "PermissionDeniedError";
        }
    }
    "Error"
}

/// The Python exception for a Rust error.
pub(crate) fn to_py(py: Python<'_>, err: anyhow::Error) -> PyErr {
    if let Some(e) = err.chain().find_map(|c| c.downcast_ref::<PyErr>()) {
        return e.clone_ref(py);
    }
    raise(py, classify(&err), format!("{err:#}"))
}

/// An exception of class `name` of `streamload.errors` with `message`.
pub(crate) fn raise(py: Python<'_>, name: &str, message: String) -> PyErr {
    let made = py
        .import("streamload.errors")
        .and_then(|m| m.getattr(name))
        .and_then(|class| class.call1((message.clone(),)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        // The package is broken; still say what went wrong.
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
    }
}

/// An `InvalidArgumentError` (a `ValueError`) with `message`.
pub(crate) fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    raise(py, "InvalidArgumentError", message.into())
}
