//! Stream for the [`map_async`](crate::Dataset::map_async) method: every call a spawned task,
//! in input order (as `buffered`) or in completion order (as `buffer_unordered`).
//!
//! Saved state (input order only): as `map_parallel`'s (see `parallel_map::InFlight`), the
//! calls in flight taken in runs of up to [`MARK_EVERY`] elements: over a small input `[skip]`
//! and the input's state before the oldest run not wholly passed on, otherwise the positions
//! of the elements whose calls are in flight (`held`) and the input's state now. The calls
//! in flight are made again after a restore.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{FuturesOrdered, FuturesUnordered, Stream, StreamExt};

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Operation, Start, Unkeyed};
use crate::engine::{Resumable, StageStream};
use crate::ops::parallel_map::InFlight;
use crate::runtime::{self, catch_panic};

const STAGE: &str = "map_async";

/// A mark of a small input is taken before one element in this many: a restore redoes fewer
/// than this many calls beyond those that were in flight.
const MARK_EVERY: usize = 32;

/// The [`map_async`](crate::Dataset::map_async) operation: `f`'s futures, `parallelism` at
/// once. The parallelism changes the speed only: it is not keyed.
pub(crate) struct MapAsync<F> {
    pub(crate) f: Unkeyed<Arc<F>>,
    pub(crate) parallelism: Unkeyed<usize>,
}

crate::engine::keyed_fields!(impl[F] MapAsync<F> { keyed: [], unkeyed: [f, parallelism] });

impl<T, U, F, Fut> Operation<T> for MapAsync<F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<U>> + Send + 'static,
{
    type Out = U;
    type Stream = BoxStream<U>;
    const NAME: &'static str = STAGE;
    const ORDERED: bool = true;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        input
    }

    /// See [`build`]: the start is the context's.
    fn open(
        &self,
        ctx: &Ctx,
        input: crate::engine::Input<'_, T>,
        _: Start<'_>,
    ) -> anyhow::Result<BoxStream<U>> {
        Ok(Box::pin(build(
            ctx,
            input.dataset(),
            &self.f,
            *self.parallelism,
        )))
    }
}

/// The map_async of one epoch: fresh, restored (as `map_parallel`: from a mark and the
/// count passed on since, or the positions of the calls in flight replayed), or in replay
/// (one output per input element, in order: the positions pass through).
pub(crate) fn build<T, U, F, Fut>(
    ctx: &Ctx,
    input: &Dataset<T>,
    f: &Arc<F>,
    parallelism: usize,
) -> impl StageStream<U> + use<T, U, F, Fut>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<U>> + Send + 'static,
{
    let in_flight = InFlight::open(
        ctx,
        &|ctx: &Ctx| input.build(ctx),
        input.answers(ctx),
        STAGE,
        Vec::new(),
    );
    let deterministic = in_flight.deterministic();
    let f = Arc::clone(f);
    let call = move |item: anyhow::Result<T>| {
        let f = Arc::clone(&f);
        async move {
            let fut = catch_panic(STAGE, || Ok(f(item?)))?;
            // The task is aborted if this future is dropped (the epoch was dropped).
            let task = runtime::spawn(STAGE, fut)?;
            task.await.map_err(|e| runtime::join_error(STAGE, e))?
        }
    };
    MapAsyncStream {
        call,
        calls: if deterministic {
            Calls::Ordered(FuturesOrdered::new())
        } else {
            Calls::Unordered(FuturesUnordered::new())
        },
        parallelism: parallelism.max(1),
        in_flight,
    }
}

/// The calls in flight: yielded in input order, or as they finish.
enum Calls<C: Future> {
    Ordered(FuturesOrdered<C>),
    Unordered(FuturesUnordered<C>),
}

/// Stream for the [`map_async`](crate::Dataset::map_async) method: as futures' `buffered`
/// (or `buffer_unordered`) over the calls.
#[must_use = "streams do nothing unless polled"]
struct MapAsyncStream<T, M, C: Future> {
    /// Makes the call of an element.
    call: M,
    calls: Calls<C>,
    parallelism: usize,
    /// The input, and the calls in flight as a checkpoint places them.
    in_flight: InFlight<T>,
}

// The calls are boxed in the futures' queues; nothing is pinned in place.
impl<T, M, C: Future> Unpin for MapAsyncStream<T, M, C> {}

impl<T, U, M, C> Stream for MapAsyncStream<T, M, C>
where
    M: Fn(anyhow::Result<T>) -> C,
    C: Future<Output = anyhow::Result<U>>,
{
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let tracking = this.in_flight.deterministic();
        // As `buffered`: first start as many calls as there is room for.
        loop {
            let len = match &this.calls {
                Calls::Ordered(calls) => calls.len(),
                Calls::Unordered(calls) => calls.len(),
            };
            if len >= this.parallelism {
                break;
            }
            if tracking && this.in_flight.open_len().is_none_or(|n| n >= MARK_EVERY) {
                this.in_flight.close_group();
                this.in_flight.open_group();
            }
            match this.in_flight.poll_input(cx) {
                Poll::Ready(Some(item)) => {
                    this.in_flight.took();
                    let call = (this.call)(item);
                    match &mut this.calls {
                        Calls::Ordered(calls) => calls.push_back(call),
                        Calls::Unordered(calls) => calls.push(call),
                    }
                }
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        let next = match &mut this.calls {
            Calls::Ordered(calls) => calls.poll_next_unpin(cx),
            Calls::Unordered(calls) => calls.poll_next_unpin(cx),
        };
        if let Some(out) = std::task::ready!(next) {
            this.in_flight.passed_on();
            return Poll::Ready(Some(out));
        }
        if this.in_flight.is_terminated() {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    }
}

/// Saved state: see the module doc.
impl<T, M, C: Future> Resumable for MapAsyncStream<T, M, C> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        this.in_flight.save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.in_flight.last_prov()
    }
}
