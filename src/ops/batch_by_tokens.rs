//! `batch_by_tokens`: consecutive elements grouped into batches of at most a budget of tokens
//! (the token-budget batcher of variable-length training: fairseq's `max_tokens`, a packed
//! batch for attention over concatenated sequences).
//!
//! Saved state: the members of the batch being filled as [`Hold`] saves them (over a small
//! input, a mark before the first and their offsets from it: a batch's first element is the
//! one that did not fit in the last, so a restore may read up to one batch more again;
//! otherwise their positions).
//! Positions: a batch is the group of its members' positions; an error passed on is a group
//! of its own position alone.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::hold::Group;
use crate::engine::{Cardinality, Ctx, Hold, Input, Members, Operation, Replay, Resumable};
use crate::engine::{Start, Unkeyed, replayed};
use crate::error::Error;

const STAGE: &str = "batch_by_tokens";

/// How many tokens an element counts for.
pub(crate) type Length<T> = Arc<dyn Fn(&T) -> usize + Send + Sync>;

/// The [`batch_by_tokens`](crate::Dataset::batch_by_tokens) operation.
pub(crate) struct BatchByTokens<T> {
    pub(crate) max_tokens: usize,
    pub(crate) length: Unkeyed<Length<T>>,
}

crate::engine::keyed_fields!(impl[T] BatchByTokens<T> { keyed: [max_tokens], unkeyed: [length] });

impl<T: Send + 'static> Operation<T> for BatchByTokens<T> {
    type Out = Vec<T>;
    type Stream = TokenBatches<T>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        match input {
            Cardinality::Infinite => Cardinality::Infinite,
            Cardinality::Finite(0) => Cardinality::Finite(0),
            _ => Cardinality::Unknown,
        }
    }

    fn replay(&self, _: &Ctx, input: Input<'_, T>, provs: &Arc<[Prov]>) -> Replay<Vec<T>> {
        replayed(Members::new(provs, STAGE, None, |members| {
            input.replay(members)
        }))
    }

    fn open(&self, _: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        Ok(TokenBatches {
            hold: input.hold(STAGE, false, 0)?,
            max_tokens: self.max_tokens,
            length: Arc::clone(&self.length),
            buf: Vec::new(),
            used: 0,
            members: Group::default(),
            last: None,
        })
    }
}

/// Stream for the [`batch_by_tokens`](crate::Dataset::batch_by_tokens) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct TokenBatches<T> {
    hold: Hold<T>,
    max_tokens: usize,
    length: Length<T>,
    /// The batch being filled, its tokens, and its members as a checkpoint places them.
    buf: Vec<T>,
    used: usize,
    members: Group,
    /// The last batch's position, when recorded.
    last: Option<Prov>,
}

impl<T> Unpin for TokenBatches<T> {}

impl<T> TokenBatches<T> {
    /// Passes on the batch being filled.
    fn take(&mut self) -> Vec<T> {
        self.last = self.hold.passed(&mut self.members);
        self.used = 0;
        std::mem::take(&mut self.buf)
    }

    /// Adds the element the hold just handed out, `n` tokens long.
    fn add(&mut self, x: T, n: usize) {
        if self.buf.is_empty() {
            // No element before this one is held any more.
            self.hold.release(self.hold.index());
        }
        self.hold.add_to(&mut self.members);
        self.buf.push(x);
        self.used += n;
    }
}

impl<T> Stream for TokenBatches<T> {
    type Item = anyhow::Result<Vec<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.buf.is_empty() {
                this.hold.mark();
            }
            match ready!(this.hold.poll_next(cx)) {
                Some(Ok(x)) => {
                    let n = (this.length)(&x);
                    if n > this.max_tokens {
                        // Never cut: the element is refused, in its place, and the batch
                        // being filled goes on.
                        this.last = this.hold.alone();
                        let max = this.max_tokens;
                        return Poll::Ready(Some(Err(Error::InvalidArgument(format!(
                            "{STAGE}: an element of {n} tokens is longer than the budget of \
                             {max} tokens a batch may hold"
                        ))
                        .into())));
                    }
                    if this.used + n > this.max_tokens && !this.buf.is_empty() {
                        let batch = this.take();
                        this.add(x, n);
                        return Poll::Ready(Some(Ok(batch)));
                    }
                    this.add(x, n);
                }
                Some(Err(e)) => {
                    // Passed on at once, at its own position; the batch goes on.
                    this.last = this.hold.alone();
                    return Poll::Ready(Some(Err(e)));
                }
                None if this.buf.is_empty() => return Poll::Ready(None),
                None => {
                    this.hold.release(this.hold.count());
                    return Poll::Ready(Some(Ok(this.take())));
                }
            }
        }
    }
}

/// Saved state: see the module doc.
impl<T> Resumable for TokenBatches<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let members = std::iter::once(&this.members);
        this.hold.save_groups(State::new(STAGE), members)
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.hold.placed(&self.last, "its batches")
    }
}
