//! The tokio runtime Python epochs run on: one per process, made at the first iteration, a
//! worker thread per core. An epoch's own stages are polled on the Python thread that waits
//! for the next element (inside `block_on`, the GIL released); what they spawn (prefetch
//! producers, readers, `map`'s parallel calls) runs on the runtime's threads.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The runtime, or why it could not be started (the OS refused threads).
pub(crate) fn runtime() -> anyhow::Result<&'static Runtime> {
    RUNTIME
        .get_or_init(|| {
            Builder::new_multi_thread()
                .worker_threads(streamload::available_cores())
                .thread_name("streamload-py")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start streamload's tokio runtime: {e}"))
        })
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}
