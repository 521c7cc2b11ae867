//! The tokio runtime Python epochs run on: one per process, made at the first iteration, a
//! worker thread per core. An epoch's own stages are polled on the Python thread that waits
//! for the next element (inside `block_on`, the GIL released); what they spawn (prefetch
//! producers, readers) runs on the runtime's threads.
//!
//! A child made by `fork()` (PyTorch's `DataLoader` workers, `multiprocessing`) has none of
//! its parent's threads: the first epoch it runs makes a runtime of its own. Iterators made
//! before the fork belong to the parent; make them in the child.

use std::sync::{Mutex, PoisonError};

use tokio::runtime::{Builder, Runtime};

/// The runtime and the process it belongs to.
static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);

/// This process's runtime, or why it could not be started (the OS refused threads).
pub(crate) fn runtime() -> anyhow::Result<&'static Runtime> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((owner, rt)) = *slot
        && owner == pid
    {
        return Ok(rt);
    }
    // The first epoch of this process, or of a child after fork(). The parent's runtime is
    // left as it is (leaked): dropping it would wait for threads that do not exist here.
    let rt = Builder::new_multi_thread()
        .worker_threads(streamload::available_cores())
        .thread_name("streamload-py")
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start streamload's tokio runtime: {e}"))?;
    let rt: &'static Runtime = Box::leak(Box::new(rt));
    *slot = Some((pid, rt));
    Ok(rt)
}
