//! `tracing` spans per stage (the `tracing` feature).
//!
//! Every stage's stream is wrapped, where stages are built (`Dataset::stage`), in [`Traced`]:
//! a `streamload.stage` span named after the operation, entered whenever the stage is polled
//! (so a subscriber sees time inside each stage, nested as the stages poll each other, and
//! the events user functions emit inside it), and a `DEBUG` event when the stage ends, with
//! the elements and errors it yielded.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::Stream;

/// Stream wrapper that enters the stage's span on every poll.
#[pin_project::pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Traced<S> {
    #[pin]
    inner: S,
    span: tracing::Span,
    elements: u64,
    errors: u64,
}

impl<S> Traced<S> {
    pub(crate) fn new(inner: S, name: &'static str, depth: u64) -> Self {
        Traced {
            inner,
            span: tracing::debug_span!("streamload.stage", stage = name, depth),
            elements: 0,
            errors: 0,
        }
    }
}

impl<S, T> Stream for Traced<S>
where
    S: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let _entered = this.span.enter();
        let item = this.inner.poll_next(cx);
        match &item {
            Poll::Ready(Some(Ok(_))) => *this.elements += 1,
            Poll::Ready(Some(Err(e))) => {
                *this.errors += 1;
                tracing::debug!(error = %format!("{e:#}"), "error element");
            }
            Poll::Ready(None) => {
                tracing::debug!(
                    elements = *this.elements,
                    errors = *this.errors,
                    "stage ended"
                );
            }
            Poll::Pending => {}
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<S: crate::engine::Resumable> crate::engine::Resumable for Traced<S> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<crate::checkpoint::State> {
        self.project().inner.save()
    }

    fn last_prov(&self) -> anyhow::Result<crate::checkpoint::Prov> {
        self.inner.last_prov()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    use crate::Dataset;

    /// A subscriber that records the stage names of the spans it is given and counts the
    /// events, enough to see that each stage has its span.
    #[derive(Default)]
    struct Recorder {
        stages: Mutex<BTreeSet<String>>,
        events: AtomicU64,
        next: AtomicU64,
    }

    struct StageName<'a>(&'a mut Option<String>);

    impl tracing::field::Visit for StageName<'_> {
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            if field.name() == "stage" {
                *self.0 = Some(value.to_string());
            }
        }
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() == "stage" {
                *self.0 = Some(format!("{value:?}"));
            }
        }
    }

    /// The subscriber handed to `tracing`; the test keeps another handle on the recorder.
    struct Shared(Arc<Recorder>);

    impl Subscriber for Shared {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, span: &Attributes<'_>) -> Id {
            let mut name = None;
            span.record(&mut StageName(&mut name));
            if let Some(name) = name {
                self.0
                    .stages
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(name);
            }
            Id::from_u64(self.0.next.fetch_add(1, Ordering::Relaxed) + 1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {
            self.0.events.fetch_add(1, Ordering::Relaxed);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn every_stage_has_a_span_and_reports_its_end() {
        let recorder = Arc::new(Recorder::default());
        let subscriber = Shared(Arc::clone(&recorder));
        tracing::subscriber::with_default(subscriber, || {
            let ds = Dataset::range(0, 10).map(|x| x + 1).filter(|x| x % 2 == 0);
            let got = futures::executor::block_on(ds.collect());
            assert_eq!(got.ok(), Some(vec![2, 4, 6, 8, 10]));
        });
        let stages = recorder
            .stages
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        assert_eq!(
            stages,
            ["filter", "map", "range"].map(String::from).into(),
            "stage spans"
        );
        // One "stage ended" event per stage.
        assert_eq!(recorder.events.load(Ordering::Relaxed), 3);
    }
}
