//! The errors the library raises itself.
//!
//! Elements are `anyhow::Result<T>`; when streamload itself fails (a worker panicked, no tokio
//! runtime, corrupt data), the `anyhow::Error` holds one of these, so callers can
//! `err.downcast_ref::<streamload::Error>()` and match on it.

/// An error raised by streamload itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A user function or a spawned task panicked while producing an element.
    #[error("{stage}: a worker panicked: {message}")]
    WorkerPanicked {
        /// The stage whose work panicked, e.g. `map_parallel`.
        stage: &'static str,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// A stage needs to spawn tasks, but the stream is not polled inside a tokio runtime.
    #[error(
        "{stage}: no tokio runtime: iterate the dataset inside a tokio runtime (e.g. #[tokio::main]), or with Dataset::iter_blocking"
    )]
    NoRuntime {
        /// The stage that needed to spawn.
        stage: &'static str,
    },
    /// An argument or an element is out of the range an operation accepts.
    #[error("{0}")]
    InvalidArgument(String),
    /// Damaged data (TensorFlow's `DataLossError`): a CRC mismatch, a truncated record, or a
    /// damaged compressed stream. The message carries TensorFlow's words ("corrupted record
    /// at OFFSET", "truncated record at OFFSET", "GZIP inflate() failed (...)") and names the
    /// file and the record.
    #[error("{path}: {message} at {offset} (record {record})")]
    DataLoss {
        /// The file or URL being read.
        path: String,
        /// The 0-based index of the damaged record in that file.
        record: u64,
        /// The byte offset TensorFlow names: the payload's for a bad data CRC, the record's
        /// start otherwise (in the decompressed stream for a compressed file).
        offset: u64,
        /// What is wrong: `corrupted record`, `truncated record`, ...
        message: String,
    },
    /// An element is longer than the shape it is padded to (`padded_batch`,
    /// `bucket_by_sequence_length`): TensorFlow's `DataLossError` "Attempted to pad to a
    /// smaller size than the input element.", raised when the batch holding that element is made.
    #[error(
        "Attempted to pad to a smaller size than the input element. Component {component}, element {element} of its batch: shape {shape:?}, padded shape {padded:?}"
    )]
    PaddingTooSmall {
        /// The tensor component (tf.data's flattened structure: tuple fields count from 0).
        component: usize,
        /// The element's index in its batch.
        element: usize,
        /// The element's shape.
        shape: Vec<usize>,
        /// The shape it was to be padded to.
        padded: Vec<usize>,
    },
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}
