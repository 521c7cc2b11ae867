//! `from_generator`: a blocking iterator on a thread of its own, behind a bounded channel.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::Stream;

use crate::dataset::{Cardinality, Dataset};
use crate::runtime::{self, ChunkReceiver, ChunkSender, Task, chunk_channel};

const STAGE: &str = "from_generator";

/// Makes the generator and sends its items until it ends or the receiver is gone.
type RunFn<T> = dyn Fn(&mut ChunkSender<anyhow::Result<T>>) + Send + Sync;

pub(crate) fn dataset<T, I>(
    buffer: usize,
    make: impl Fn() -> I + Send + Sync + 'static,
) -> Dataset<T>
where
    T: Send + 'static,
    I: IntoIterator<Item = anyhow::Result<T>>,
{
    assert!(buffer > 0, "from_generator: buffer must be at least 1");
    let run: Arc<RunFn<T>> = Arc::new(move |tx| {
        for item in make() {
            if tx.blocking_send(item).is_err() {
                return; // the epoch was dropped
            }
        }
        let _ = tx.blocking_flush();
    });
    Dataset::source(STAGE, Cardinality::Unknown, move |ctx| {
        // One thread runs the generator: its busy time is the stage's worker time.
        let stats = ctx.stats_handle();
        if let Some(stats) = &stats {
            stats.set_parallelism(1);
        }
        Generator::new(Arc::clone(&run), buffer, stats)
    })
}

enum State<T> {
    Idle(Arc<RunFn<T>>),
    Running {
        rx: ChunkReceiver<anyhow::Result<T>>,
        _task: Task<()>,
    },
    Done,
}

/// Stream for [`Dataset::from_generator`].
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Generator<T> {
    state: State<T>,
    buffer: usize,
    stats: Option<Arc<crate::stats::StageCounters>>,
}

// Elements are never pinned in place.
impl<T> Unpin for Generator<T> {}

impl<T> std::fmt::Debug for Generator<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator")
            .field("buffer", &self.buffer)
            .finish_non_exhaustive()
    }
}

impl<T> Generator<T> {
    fn new(
        run: Arc<RunFn<T>>,
        buffer: usize,
        stats: Option<Arc<crate::stats::StageCounters>>,
    ) -> Self {
        Generator {
            state: State::Idle(run),
            buffer,
            stats,
        }
    }
}

impl<T: Send + 'static> Stream for Generator<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                State::Idle(run) => {
                    let run = Arc::clone(run);
                    let (mut tx, rx) = chunk_channel(this.buffer.div_ceil(2));
                    let stats = this.stats.take();
                    let job = move || {
                        if let Some(stats) = stats {
                            tx.time_work(stats);
                        }
                        // A panic in the generator becomes its last element, never a quiet end.
                        let result =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut tx)));
                        if let Err(payload) = result {
                            let message = crate::error::panic_message(payload.as_ref());
                            let err = crate::Error::WorkerPanicked {
                                stage: STAGE,
                                message,
                            };
                            let _ = tx.blocking_send(Err(err.into()));
                            let _ = tx.blocking_flush();
                        }
                    };
                    match runtime::spawn_blocking(STAGE, job) {
                        Ok(task) => this.state = State::Running { rx, _task: task },
                        Err(e) => {
                            this.state = State::Done;
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                }
                State::Running { rx, .. } => {
                    let item = std::task::ready!(rx.poll_recv(cx));
                    if item.is_none() {
                        this.state = State::Done;
                    }
                    return Poll::Ready(item);
                }
                State::Done => return Poll::Ready(None),
            }
        }
    }
}
