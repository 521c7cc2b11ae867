//! The one place streamload spawns work.
//!
//! Every task handle aborts its task when dropped ([`AbortOnDropHandle`]), so dropping an epoch's
//! stream stops everything that epoch started. Async work (prefetch producers, interleave
//! readers, `map_async` calls) runs as tokio tasks; short blocking jobs (positioned reads of
//! local files, directory walks) on tokio's blocking threads; work that holds a thread for a
//! whole epoch (`map_parallel`'s workers, `from_generator`'s producer) on threads of
//! streamload's own (`threads.rs`), so that it can never take every blocking thread and
//! starve the readers; none of it on the async workers. Epochs iterated without a runtime of the
//! caller's ([`Dataset::iter_blocking`](crate::Dataset::iter_blocking)) run on one streamload
//! owns (`shared.rs`).

mod autotune;
mod chunks;
mod coop;
mod prefetch;
mod shared;
mod threads;
pub(crate) use autotune::{
    Budget, INITIAL_BUFFER, Knob, KnobKind, MAX_BUFFER, Tuner, physical_memory,
};
pub(crate) use chunks::{ChunkReceiver, ChunkSender, chunk_channel, forward, gauged_chunk_channel};
pub(crate) use coop::Coop;
pub(crate) use prefetch::prefetch_element;
pub(crate) use shared::spawn_shared;
#[cfg(feature = "burn")]
pub(crate) use shared::wait_shared;
pub(crate) use threads::spawn_thread;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinError;
use tokio_util::task::AbortOnDropHandle;

use crate::error::{Error, panic_message};

/// A spawned task that is aborted when this handle is dropped.
pub(crate) type Task<T> = AbortOnDropHandle<T>;

/// Spawns `fut` on the current tokio runtime; the task stops when the handle is dropped.
pub(crate) fn spawn<F>(stage: &'static str, fut: F) -> anyhow::Result<Task<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime { stage })?;
    Ok(AbortOnDropHandle::new(handle.spawn(fut)))
}

/// Runs `f` on a blocking thread. Dropping the handle before `f` starts cancels it; a running
/// `f` finishes (blocking code cannot be interrupted), so long jobs should check a
/// [`CancelToken`].
pub(crate) fn spawn_blocking<F, R>(stage: &'static str, f: F) -> anyhow::Result<Task<R>>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let handle = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime { stage })?;
    Ok(AbortOnDropHandle::new(handle.spawn_blocking(f)))
}

/// Turns a failed join into the error the consumer sees.
pub(crate) fn join_error(stage: &'static str, err: JoinError) -> anyhow::Error {
    if err.is_panic() {
        let payload = err.into_panic();
        Error::WorkerPanicked {
            stage,
            message: panic_message(payload.as_ref()),
        }
        .into()
    } else {
        anyhow::anyhow!("{stage}: a worker task was cancelled")
    }
}

/// Runs a user function, turning a panic into an error item.
pub(crate) fn catch_panic<R>(
    stage: &'static str,
    f: impl FnOnce() -> anyhow::Result<R>,
) -> anyhow::Result<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(Error::WorkerPanicked {
            stage,
            message: panic_message(payload.as_ref()),
        }
        .into()),
    }
}

/// Set when the stream that owns it is dropped; blocking jobs check it between elements.
#[derive(Debug, Clone, Default)]
pub(crate) struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    /// A guard that cancels this token when dropped.
    pub(crate) fn drop_guard(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }
}

/// Cancels its token when dropped.
#[derive(Debug)]
pub(crate) struct CancelOnDrop(CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        (self.0).0.store(true, Ordering::Relaxed);
    }
}
