//! Saved state: the positions of the distinct elements seen so far (`held`, in the order they
//! were first seen; the values are not saved: a restore reads them again to rebuild the set,
//! which compares values with `Eq` as before) and the input's state.

use std::collections::HashSet;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};
use pin_project::pin_project;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Ctx, Input, Operation, Resumable, Start, unsupported};

const STAGE: &str = "unique";

/// The [`unique`](crate::Dataset::unique) operation: each distinct element once, the first
/// time it comes.
#[derive(Hash)]
pub(crate) struct Unique;

impl<T> Operation<T> for Unique
where
    T: Clone + Eq + Hash + Send + 'static,
{
    type Out = T;
    type Stream = UniqueStream<BoxStream<T>, T>;
    const NAME: &'static str = STAGE;
    const SMALL: bool = false;

    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Unknown
    }

    /// Restored, the set is rebuilt by reading the distinct elements seen again at their
    /// positions; in replay the elements are ones it passed on, distinct: they pass through.
    fn open(&self, _: &Ctx, input: Input<'_, T>, start: Start<'_>) -> anyhow::Result<Self::Stream> {
        if let Start::Replay(_) = start {
            let mut unique = UniqueStream::new(input.open());
            unique.passthrough = true;
            return Ok(unique);
        }
        let mut unique = UniqueStream::new(input.open_placed());
        unique.seen_provs = unique.input.get_ref().resumable().then(Vec::new);
        if let Start::Restore(state) = start
            && !state.held.is_empty()
        {
            unique.refill = Some(input.replay(state.held.clone().into()).fuse());
            unique.seen_provs = Some(state.held.clone());
        }
        Ok(unique)
    }
}

/// Stream for the [`unique`](crate::Dataset::unique) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct UniqueStream<St, T> {
    #[pin]
    input: Fuse<St>,
    seen: HashSet<T>,
    /// The positions of the elements in `seen`, in the order seen (when the input can say).
    seen_provs: Option<Vec<Prov>>,
    /// After a restore: the distinct elements seen before the checkpoint, read again.
    refill: Option<Fuse<BoxStream<T>>>,
    /// In replay: elements pass through.
    passthrough: bool,
}

impl<St: Stream, T> UniqueStream<St, T> {
    fn new(input: St) -> Self {
        UniqueStream {
            input: input.fuse(),
            seen: HashSet::new(),
            seen_provs: None,
            refill: None,
            passthrough: false,
        }
    }
}

impl<St, T> Stream for UniqueStream<St, T>
where
    St: Stream<Item = anyhow::Result<T>> + Resumable,
    T: Clone + Eq + Hash,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        if *this.passthrough {
            return this.input.poll_next(cx);
        }
        if let Some(refill) = this.refill.as_mut() {
            while let Some(x) = ready!(refill.poll_next_unpin(cx)) {
                match x {
                    Ok(x) => {
                        this.seen.insert(x);
                    }
                    Err(e) => {
                        *this.refill = None;
                        *this.seen_provs = None;
                        return Poll::Ready(Some(Err(e)));
                    }
                }
            }
            *this.refill = None;
        }
        loop {
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    if !this.seen.contains(&x) {
                        this.seen.insert(x.clone());
                        if let Some(provs) = this.seen_provs.as_mut() {
                            match this.input.get_ref().last_prov() {
                                Ok(p) => provs.push(p),
                                // The input cannot say where its elements come from: no
                                // checkpoint can hold the set.
                                Err(_) => *this.seen_provs = None,
                            }
                        }
                        return Poll::Ready(Some(Ok(x)));
                    }
                }
                other => return Poll::Ready(other),
            }
        }
    }
}

impl<St: Resumable, T> Resumable for UniqueStream<St, T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.project();
        if this.refill.is_some() || *this.passthrough {
            return Err(unsupported(
                STAGE,
                "a checkpoint before its first element after a restore",
            ));
        }
        let held = this.seen_provs.clone().ok_or_else(|| {
            unsupported(STAGE, "its input cannot say where its elements come from")
        })?;
        Ok(State::new(STAGE)
            .held(held)
            .input(this.input.get_pin_mut().save()?))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.input.get_ref().last_prov()
    }

    fn is_small(&self) -> bool {
        false
    }

    fn resumable(&self) -> bool {
        self.input.get_ref().resumable()
    }
}
