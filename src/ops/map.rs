use std::pin::Pin;
use std::task::{Context, Poll, ready};

use std::sync::Arc;

use futures::stream::Stream;
use pin_project::pin_project;

use crate::engine::{
    BoxStream, Cardinality, Counting, Ctx, Input, Operation, Resumable, Start, Unkeyed,
};
use crate::runtime::catch_panic;
use crate::stats::StageCounters;

/// The [`map`](crate::Dataset::map) and [`try_map`](crate::Dataset::try_map) operation: `f`
/// on every element, in order, on the consumer's task.
pub(crate) struct Map<F> {
    pub(crate) f: Unkeyed<Arc<F>>,
}

crate::engine::keyed_fields!(impl[F] Map<F> { keyed: [], unkeyed: [f] });

impl<T, U, F> Operation<T> for Map<F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> anyhow::Result<U> + Send + Sync + 'static,
{
    type Out = U;
    type Stream = MapStream<BoxStream<T>, F>;
    const NAME: &'static str = "map";
    /// One output per input: its counts are its input's, less the errors `f` makes.
    const COUNTING: Counting = Counting::ByInput;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        input
    }

    /// Saved state: the input's; in replay it maps the elements replayed.
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        Ok(MapStream {
            input: input.open(),
            f: Arc::clone(&self.f),
            counters: ctx.own_counters(),
        })
    }
}

/// Stream for the [`map`](crate::Dataset::map) and [`try_map`](crate::Dataset::try_map) methods.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct MapStream<St, F> {
    #[pin]
    input: St,
    f: Arc<F>,
    /// Where the errors `f` makes are counted, when the stage is counted by its input (its
    /// elements are its input's, less those errors).
    counters: Option<Arc<StageCounters>>,
}

impl<St, F> MapStream<St, F> {
    /// `f` over `input`'s elements, in another operation's stream (a replay's).
    pub(crate) fn over(input: St, f: Arc<F>) -> Self {
        MapStream {
            input,
            f,
            counters: None,
        }
    }
}

impl<St, F, T, U> Stream for MapStream<St, F>
where
    St: Stream<Item = anyhow::Result<T>>,
    F: Fn(T) -> anyhow::Result<U>,
{
    type Item = anyhow::Result<U>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let item = ready!(this.input.poll_next(cx));
        let f = &**this.f;
        Poll::Ready(match item {
            Some(Ok(x)) => match catch_panic("map", || f(x)) {
                Ok(y) => Some(Ok(y)),
                Err(e) => {
                    if let Some(counters) = this.counters {
                        counters.add_own_error();
                    }
                    Some(Err(e))
                }
            },
            Some(Err(e)) => Some(Err(e)),
            None => None,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.input.size_hint()
    }
}

crate::engine::one_to_one!(impl[St: Resumable, F] MapStream<St, F>, |_| "map", []);
