use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use crate::engine::{
    BoxStream, Cardinality, Counting, Ctx, Input, Operation, Resumable, Start, Unkeyed,
};
use futures::stream::Stream;
use pin_project::{pin_project, pinned_drop};

use crate::stats::StageCounters;

/// Elements kept between two additions to the shared count.
const FLUSH_EVERY: u64 = 64;

/// The [`filter`](crate::Dataset::filter) operation: the elements `predicate` keeps.
pub(crate) struct Filter<P> {
    pub(crate) predicate: Unkeyed<Arc<P>>,
}

crate::engine::keyed_fields!(impl[P] Filter<P> { keyed: [], unkeyed: [predicate] });

impl<T, P> Operation<T> for Filter<P>
where
    T: Send + 'static,
    P: Fn(&T) -> bool + Send + Sync + 'static,
{
    type Out = T;
    type Stream = FilterStream<BoxStream<T>, P>;
    const NAME: &'static str = "filter";
    const COUNTING: Counting = Counting::ByStage;

    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Unknown
    }

    /// Saved state: the input's. In replay it keeps every element (they are ones it kept).
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        Ok(FilterStream {
            input: input.open(),
            predicate: Arc::clone(&self.predicate),
            counters: ctx.own_counters(),
            kept: 0,
        })
    }
}

/// Stream for the [`filter`](crate::Dataset::filter) method.
///
/// It counts itself (when the stage is not timed): the elements it keeps, added to the
/// stage's count every [`FLUSH_EVERY`], at the end and when dropped; errors as they pass.
#[pin_project(PinnedDrop)]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct FilterStream<St, P> {
    #[pin]
    input: St,
    predicate: Arc<P>,
    counters: Option<Arc<StageCounters>>,
    kept: u64,
}

#[cold]
#[inline(never)]
fn flush(counters: &Option<Arc<StageCounters>>, kept: &mut u64) {
    if let Some(counters) = counters {
        counters.add_elements(*kept);
    }
    *kept = 0;
}

#[cold]
#[inline(never)]
fn count_error(counters: &Option<Arc<StageCounters>>) {
    if let Some(counters) = counters {
        counters.add_own_error();
    }
}

#[pinned_drop]
impl<St, P> PinnedDrop for FilterStream<St, P> {
    fn drop(self: Pin<&mut Self>) {
        let this = self.project();
        flush(this.counters, this.kept);
    }
}

impl<St, P, T> Stream for FilterStream<St, P>
where
    St: Stream<Item = anyhow::Result<T>>,
    P: Fn(&T) -> bool,
{
    type Item = anyhow::Result<T>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    let p = &**this.predicate;
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p(&x))) {
                        Ok(true) => {
                            *this.kept += 1;
                            if *this.kept == FLUSH_EVERY {
                                flush(this.counters, this.kept);
                            }
                            return Poll::Ready(Some(Ok(x)));
                        }
                        Ok(false) => continue,
                        Err(payload) => {
                            count_error(this.counters);
                            let message = crate::error::panic_message(payload.as_ref());
                            return Poll::Ready(Some(Err(crate::Error::WorkerPanicked {
                                stage: "filter",
                                message,
                            }
                            .into())));
                        }
                    }
                }
                Some(Err(e)) => {
                    count_error(this.counters);
                    return Poll::Ready(Some(Err(e)));
                }
                None => {
                    flush(this.counters, this.kept);
                    return Poll::Ready(None);
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.input.size_hint().1)
    }
}

crate::engine::one_to_one!(impl[St: Resumable, P] FilterStream<St, P>, |_| "filter", []);
