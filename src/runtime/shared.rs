//! The tokio runtime streamload owns, for callers without one of their own
//! ([`Dataset::iter_blocking`](crate::Dataset::iter_blocking)).
//!
//! One runtime for the whole process, made at first use: a multi-thread runtime with a worker
//! per core (its blocking threads run `map_parallel`'s calls, as on any runtime). It lives in a
//! `static`, so it is never dropped: dropping a runtime from inside an async context panics,
//! and a runtime per blocking iterator would cost a thread per core for each one. Its threads
//! sleep while no epoch runs on it.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};
use tokio_util::task::AbortOnDropHandle;

use super::Task;
use crate::options::available_cores;

/// The shared runtime, or why it could not be made (the OS refused threads).
fn runtime() -> anyhow::Result<&'static Runtime> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            Builder::new_multi_thread()
                .worker_threads(available_cores())
                .thread_name("streamload-worker")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| anyhow::anyhow!("starting streamload's tokio runtime: {e}"))
}

/// Spawns `fut` on the shared runtime, whatever runtime (if any) the caller is in; the task
/// stops when the handle is dropped.
pub(crate) fn spawn_shared<F>(fut: F) -> anyhow::Result<Task<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(AbortOnDropHandle::new(runtime()?.spawn(fut)))
}

/// Runs `fut` to completion on the shared runtime and waits for it on the calling thread
/// (which may be any thread: the future does not run on it).
#[cfg(feature = "burn")]
pub(crate) fn wait_shared<F>(fut: F) -> anyhow::Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let task = spawn_shared(fut)?;
    futures::executor::block_on(task).map_err(|e| super::join_error("burn", e))
}
