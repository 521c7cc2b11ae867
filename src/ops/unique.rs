//! Saved state: the positions of the distinct elements seen so far (`held`, in the order they
//! were first seen; the values are not saved: a restore reads them again to rebuild the set,
//! which compares values with `Eq` as before) and the input's state.

use std::collections::HashSet;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::{Cardinality, Ctx, Hold, Input, Operation, Resumable, Start, unsupported};

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
    type Stream = UniqueStream<T>;
    const NAME: &'static str = STAGE;
    const SMALL: bool = false;

    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Unknown
    }

    /// Restored, the set is rebuilt from the distinct elements seen, which the hold hands
    /// back first (read again at their positions); in replay the elements are ones it passed
    /// on, distinct: they pass through.
    fn open(&self, _: &Ctx, input: Input<'_, T>, start: Start<'_>) -> anyhow::Result<Self::Stream> {
        let hold = input.hold(STAGE, true, 0)?;
        Ok(UniqueStream {
            seen_provs: hold.resumable().then(Vec::new),
            hold,
            seen: HashSet::new(),
            passthrough: matches!(start, Start::Replay(_)),
        })
    }
}

/// Stream for the [`unique`](crate::Dataset::unique) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct UniqueStream<T> {
    hold: Hold<T>,
    seen: HashSet<T>,
    /// The positions of the elements in `seen`, in the order seen (when the input can say).
    seen_provs: Option<Vec<Prov>>,
    /// In replay: elements pass through.
    passthrough: bool,
}

impl<T> Unpin for UniqueStream<T> {}

impl<T: Clone + Eq + Hash> Stream for UniqueStream<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.passthrough {
            return this.hold.poll_next(cx);
        }
        loop {
            let item = ready!(this.hold.poll_next(cx));
            match item {
                Some(Ok(x)) => {
                    // After a restore the distinct elements seen before come back first.
                    let again = this.hold.again();
                    if again || !this.seen.contains(&x) {
                        this.seen.insert(x.clone());
                        this.hold.keep(&mut this.seen_provs);
                        if !again {
                            return Poll::Ready(Some(Ok(x)));
                        }
                    }
                }
                Some(Err(e)) if this.hold.restoring() => {
                    // Made again from the positions saved, an element failed: the set could
                    // not be rebuilt, and no checkpoint can hold it.
                    this.seen_provs = None;
                    return Poll::Ready(Some(Err(e)));
                }
                other => return Poll::Ready(other),
            }
        }
    }
}

impl<T> Resumable for UniqueStream<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        if this.passthrough {
            return Err(unsupported(STAGE, "a stream replaying saved positions"));
        }
        let held = &this.seen_provs;
        this.hold
            .save(State::new(STAGE), std::iter::empty(), || held.clone())
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.hold.last_prov()
    }
}
