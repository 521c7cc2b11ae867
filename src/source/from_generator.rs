//! `from_generator`: a blocking iterator on a thread of its own, behind a bounded channel.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::Stream;
use tokio::sync::mpsc;

use crate::dataset::{Cardinality, Dataset};
use crate::runtime::{self, Task};

const STAGE: &str = "from_generator";

type Chunk<T> = Vec<anyhow::Result<T>>;
/// Makes the generator and sends its items, in chunks of at most the given size, until it
/// ends or the receiver is gone.
type RunFn<T> = dyn Fn(&mpsc::Sender<Chunk<T>>, usize) + Send + Sync;

pub(crate) fn dataset<T, I>(
    buffer: usize,
    make: impl Fn() -> I + Send + Sync + 'static,
) -> Dataset<T>
where
    T: Send + 'static,
    I: IntoIterator<Item = anyhow::Result<T>>,
{
    assert!(buffer > 0, "from_generator: buffer must be at least 1");
    let run: Arc<RunFn<T>> = Arc::new(move |tx, max_chunk| {
        // Hand items over at once while the consumer keeps up; when it falls behind, gather
        // them into a chunk, so the generator thread sleeps and wakes once per chunk rather
        // than once per element. At most one chunk waits in the channel and one is gathered.
        let mut pending: Chunk<T> = Vec::new();
        for item in make() {
            pending.push(item);
            let sent = if pending.len() >= max_chunk {
                tx.blocking_send(std::mem::take(&mut pending)).is_ok()
            } else {
                match tx.try_send(std::mem::take(&mut pending)) {
                    Ok(()) => true,
                    Err(mpsc::error::TrySendError::Full(back)) => {
                        pending = back;
                        true
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => false,
                }
            };
            if !sent {
                return; // the epoch was dropped
            }
        }
        if !pending.is_empty() {
            let _ = tx.blocking_send(pending);
        }
    });
    Dataset::source(STAGE, Cardinality::Unknown, move |_| {
        Generator::new(Arc::clone(&run), buffer)
    })
}

enum State<T> {
    Idle(Arc<RunFn<T>>),
    Running {
        rx: mpsc::Receiver<Chunk<T>>,
        chunk: std::vec::IntoIter<anyhow::Result<T>>,
        _task: Task<()>,
    },
    Done,
}

/// Stream for [`Dataset::from_generator`].
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Generator<T> {
    state: State<T>,
    buffer: usize,
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
    fn new(run: Arc<RunFn<T>>, buffer: usize) -> Self {
        Generator {
            state: State::Idle(run),
            buffer,
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
                    let (tx, rx) = mpsc::channel(1);
                    let max_chunk = this.buffer.div_ceil(2);
                    let job = move || {
                        // A panic in the generator becomes its last element, never a quiet end.
                        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            run(&tx, max_chunk)
                        }));
                        if let Err(payload) = result {
                            let message = crate::error::panic_message(payload.as_ref());
                            let err = crate::Error::WorkerPanicked {
                                stage: STAGE,
                                message,
                            };
                            let _ = tx.blocking_send(vec![Err(err.into())]);
                        }
                    };
                    match runtime::spawn_blocking(STAGE, job) {
                        Ok(task) => {
                            this.state = State::Running {
                                rx,
                                chunk: Vec::new().into_iter(),
                                _task: task,
                            }
                        }
                        Err(e) => {
                            this.state = State::Done;
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                }
                State::Running { rx, chunk, .. } => {
                    if let Some(item) = chunk.next() {
                        return Poll::Ready(Some(item));
                    }
                    match std::task::ready!(rx.poll_recv(cx)) {
                        Some(next) => *chunk = next.into_iter(),
                        None => {
                            this.state = State::Done;
                            return Poll::Ready(None);
                        }
                    }
                }
                State::Done => return Poll::Ready(None),
            }
        }
    }
}
