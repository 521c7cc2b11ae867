use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::stream::{Fuse, FusedStream, FuturesOrdered, FuturesUnordered, Stream, StreamExt};

use crate::dataset::BoxStream;
use crate::runtime::{self, CancelOnDrop, CancelToken, Task, catch_panic};

const STAGE: &str = "map_parallel";
/// A group of elements should take about this long, so handing it over costs little.
const TARGET_GROUP_TIME: Duration = Duration::from_micros(100);
/// The most elements in one group.
pub(crate) const MAX_GROUP: usize = 256;

type UserFn<T, U> = Arc<dyn Fn(T) -> anyhow::Result<U> + Send + Sync>;
type GroupOut<U> = (Vec<anyhow::Result<U>>, Duration);

/// In-flight groups, finished in input order or in completion order.
enum InFlight<U> {
    Ordered(FuturesOrdered<Task<GroupOut<U>>>),
    Unordered(FuturesUnordered<Task<GroupOut<U>>>),
}

impl<U: Send + 'static> InFlight<U> {
    fn len(&self) -> usize {
        match self {
            InFlight::Ordered(f) => f.len(),
            InFlight::Unordered(f) => f.len(),
        }
    }

    fn push(&mut self, task: Task<GroupOut<U>>) {
        match self {
            InFlight::Ordered(f) => f.push_back(task),
            InFlight::Unordered(f) => f.push(task),
        }
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<GroupOut<U>, tokio::task::JoinError>>> {
        match self {
            InFlight::Ordered(f) => f.poll_next_unpin(cx),
            InFlight::Unordered(f) => f.poll_next_unpin(cx),
        }
    }
}

/// Stream for the [`map_parallel`](crate::Dataset::map_parallel) method.
///
/// Elements are handed to blocking threads in groups: a group holds the elements the input
/// has ready, up to a size chosen from the measured cost of `f` (one element for slow
/// functions, up to [`MAX_GROUP`] for cheap ones). At most `parallelism` groups are in flight.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ParallelMap<T, U> {
    input: Fuse<BoxStream<T>>,
    f: UserFn<T, U>,
    in_flight: InFlight<U>,
    ready: VecDeque<anyhow::Result<U>>,
    parallelism: usize,
    group_size: usize,
    /// Smoothed cost of one call of `f`, in nanoseconds (0 until measured).
    nanos_per_call: f64,
    cancel: CancelToken,
    _cancel_on_drop: CancelOnDrop,
    failed: bool,
}

// Elements are never pinned in place: they sit in queues and are moved out.
impl<T, U> Unpin for ParallelMap<T, U> {}

impl<T: Send + 'static, U: Send + 'static> ParallelMap<T, U> {
    pub(crate) fn new(
        input: BoxStream<T>,
        f: UserFn<T, U>,
        parallelism: usize,
        deterministic: bool,
    ) -> Self {
        let cancel = CancelToken::default();
        ParallelMap {
            input: input.fuse(),
            f,
            in_flight: if deterministic {
                InFlight::Ordered(FuturesOrdered::new())
            } else {
                InFlight::Unordered(FuturesUnordered::new())
            },
            ready: VecDeque::new(),
            parallelism: parallelism.max(1),
            group_size: 1,
            nanos_per_call: 0.0,
            _cancel_on_drop: cancel.drop_guard(),
            cancel,
            failed: false,
        }
    }

    fn submit(&mut self, group: Vec<anyhow::Result<T>>) -> anyhow::Result<()> {
        let f = Arc::clone(&self.f);
        let cancel = self.cancel.clone();
        let task = runtime::spawn_blocking(STAGE, move || {
            let start = Instant::now();
            let mut out = Vec::with_capacity(group.len());
            for item in group {
                if cancel.is_cancelled() {
                    break;
                }
                out.push(item.and_then(|x| catch_panic(STAGE, || f(x))));
            }
            (out, start.elapsed())
        })?;
        self.in_flight.push(task);
        Ok(())
    }

    fn learn(&mut self, calls: usize, took: Duration) {
        if calls == 0 {
            return;
        }
        let per_call = took.as_nanos() as f64 / calls as f64;
        self.nanos_per_call = if self.nanos_per_call == 0.0 {
            per_call
        } else {
            0.8 * self.nanos_per_call + 0.2 * per_call
        };
        let ideal = TARGET_GROUP_TIME.as_nanos() as f64 / self.nanos_per_call.max(1.0);
        self.group_size = (ideal as usize).clamp(1, MAX_GROUP);
    }
}

impl<T: Send + 'static, U: Send + 'static> Stream for ParallelMap<T, U> {
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(item) = this.ready.pop_front() {
                return Poll::Ready(Some(item));
            }
            if this.failed {
                return Poll::Ready(None);
            }
            // Hand over groups while there is room and the input has elements ready.
            while this.in_flight.len() < this.parallelism && !this.input.is_terminated() {
                let mut group = Vec::new();
                while group.len() < this.group_size {
                    match this.input.poll_next_unpin(cx) {
                        Poll::Ready(Some(item)) => group.push(item),
                        Poll::Ready(None) | Poll::Pending => break,
                    }
                }
                if group.is_empty() {
                    break;
                }
                if let Err(e) = this.submit(group) {
                    this.failed = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
            match this.in_flight.poll_next(cx) {
                Poll::Ready(Some(Ok((out, took)))) => {
                    this.learn(out.len(), took);
                    this.ready.extend(out);
                }
                Poll::Ready(Some(Err(e))) => {
                    return Poll::Ready(Some(Err(runtime::join_error(STAGE, e))));
                }
                Poll::Ready(None) if this.input.is_terminated() => return Poll::Ready(None),
                // Nothing in flight and the input is pending: its waker is registered.
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }
}
