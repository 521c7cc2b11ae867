//! [`BlockingEpoch`]: one pass over a dataset as a plain, blocking `Iterator`, for synchronous
//! training loops.
//!
//! The epoch's stream runs in a task on the runtime streamload owns
//! (`runtime::spawn_shared`); the calling thread waits on a channel for each element. The task
//! polls the stream for the next element only when it holds a credit, and the iterator hands
//! one back each time it returns an element: at most one element is made ahead of the caller
//! (the next one is made while the caller works on this one).

use std::fmt;
use std::iter::FusedIterator;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use tokio::sync::Semaphore;

use crate::engine::Epoch;
use crate::error::{Error, panic_message};
use crate::runtime::{self, Task};
use crate::stats::Stats;

const STAGE: &str = "iter_blocking";

/// One pass over a [`Dataset`](crate::Dataset) as a blocking `Iterator` of
/// `anyhow::Result<T>`: the synchronous counterpart of [`Epoch`], for training loops that are
/// not async (burn's `DataLoader`, a `tch` loop, a plain `for batch in ...`).
///
/// Made by [`Dataset::iter_blocking`](crate::Dataset::iter_blocking), which documents where the
/// epoch runs. Dropping it stops all work the epoch spawned.
#[must_use = "iterators do nothing unless iterated"]
pub struct BlockingEpoch<T> {
    /// Elements from the task, `None` for the end of the epoch.
    items: crossbeam_channel::Receiver<Option<anyhow::Result<T>>>,
    /// Credits for the task to make the next element.
    credits: Arc<Semaphore>,
    stats: Stats,
    /// The task driving the epoch; aborted (and the epoch with it) when this is dropped.
    driver: Option<Task<()>>,
    /// Why the task could not be started, reported by the first `next`.
    failed: Option<anyhow::Error>,
    done: bool,
}

impl<T: Send + 'static> BlockingEpoch<T> {
    pub(crate) fn new(epoch: Epoch<T>) -> Self {
        let stats = epoch.stats();
        let (tx, items) = crossbeam_channel::unbounded();
        // One credit to start with: the first element is made at once, before `next` asks.
        let credits = Arc::new(Semaphore::new(1));
        let driver = runtime::spawn_shared(drive(epoch, tx, Arc::clone(&credits)));
        let (driver, failed) = match driver {
            Ok(task) => (Some(task), None),
            Err(e) => (None, Some(e)),
        };
        BlockingEpoch {
            items,
            credits,
            stats,
            driver,
            failed,
            done: false,
        }
    }
}

/// Polls the epoch for one element per credit and sends them on; ends after the epoch ends, or
/// when the iterator is gone.
async fn drive<T>(
    mut epoch: Epoch<T>,
    tx: crossbeam_channel::Sender<Option<anyhow::Result<T>>>,
    credits: Arc<Semaphore>,
) {
    loop {
        match credits.acquire().await {
            Ok(permit) => permit.forget(),
            Err(_) => return, // closed: the iterator was dropped
        }
        // The stages catch panics in user code; one anywhere else must reach the caller as
        // an error, never as a quiet, short epoch.
        let (item, last) = match AssertUnwindSafe(epoch.next()).catch_unwind().await {
            Ok(item) => {
                let last = item.is_none();
                (item, last)
            }
            Err(payload) => {
                let error = Error::WorkerPanicked {
                    stage: STAGE,
                    message: panic_message(payload.as_ref()),
                };
                (Some(Err(error.into())), true)
            }
        };
        // The channel is unbounded, but never holds more than one element: the credits.
        if tx.send(item).is_err() || last {
            return;
        }
    }
}

impl<T> BlockingEpoch<T> {
    /// A live view of this epoch's per-stage counters; `Display` prints the report (as
    /// [`Epoch::stats`]).
    pub fn stats(&self) -> Stats {
        self.stats.clone()
    }
}

impl<T> Iterator for BlockingEpoch<T> {
    type Item = anyhow::Result<T>;

    fn next(&mut self) -> Option<anyhow::Result<T>> {
        if self.done {
            return None;
        }
        if let Some(e) = self.failed.take() {
            self.done = true;
            return Some(Err(e));
        }
        match self.items.recv() {
            Ok(Some(item)) => {
                // Let the task make the next element while the caller works on this one.
                self.credits.add_permits(1);
                Some(item)
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(_) => {
                // The task ended without the end of the epoch: it was cancelled (the runtime
                // is shutting down). Say so rather than end quietly.
                self.done = true;
                Some(Err(anyhow::anyhow!(
                    "{STAGE}: the task running the epoch stopped before the epoch ended"
                )))
            }
        }
    }
}

impl<T> FusedIterator for BlockingEpoch<T> {}

impl<T> Drop for BlockingEpoch<T> {
    fn drop(&mut self) {
        // Wakes a task waiting for a credit; dropping `driver` then aborts it, which drops the
        // epoch, and with it every task the epoch spawned.
        self.credits.close();
        self.driver.take();
    }
}

impl<T> fmt::Debug for BlockingEpoch<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingEpoch")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
