//! The trait every stage's stream implements to save its position ([`Resumable`]), and the
//! streams the engine wraps stages in to restore and replay them.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::error::Error;

/// The stream type every stage produces: elements or errors, boxed once per stage, with its
/// position ([`Resumable`]).
pub(crate) type BoxStream<T> = Pin<Box<dyn StageStream<T>>>;

/// What every stage's stream implements besides `Stream`: saving its position.
///
/// The contract (see the module doc of `checkpoint`):
/// - [`save`](Resumable::save) describes the stream as of the last element it yielded: what
///   it read or computed ahead is not part of it (it is redone after a restore). It is called
///   between polls, never during one.
/// - [`last_prov`](Resumable::last_prov) says where the last element it yielded came from.
///   Sources and one-to-one stages answer from what they hold anyway; stages that transport
///   elements between tasks answer only when their build context asked for positions
///   (`Ctx::provenance`), which a stage holding elements by position (shuffle) asks for.
///
/// Whether a stream's state is small and whether it can be saved at all are the plan's to
/// answer, not the stream's: [`Dataset::answers`](super::Dataset::answers). A stage that
/// holds elements in order (batch, prefetch, a parallel map's calls in flight) keeps a mark
/// of a small input (its state before the first of them) and redoes them from there after a
/// restore; over an input that is not small it keeps each element's position instead.
pub(crate) trait Resumable {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State>;

    fn last_prov(&self) -> anyhow::Result<Prov>;
}

/// [`Resumable`] for a one-to-one stage's stream, whose pinned field `input` is its input:
/// it saves its stage's name and words (both read from the stream, `s`), then the input's
/// state; its elements' positions are the input's.
///
/// `one_to_one!(impl[St: Resumable] TakeStream<St>, |s| "take", [s.remaining]);`
macro_rules! one_to_one {
    (impl[$($g:tt)*] $ty:ty, |$s:pat_param| $stage:expr, $words:expr) => {
        impl<$($g)*> $crate::engine::Resumable for $ty {
            fn save(
                self: ::std::pin::Pin<&mut Self>,
            ) -> ::anyhow::Result<$crate::checkpoint::State> {
                let $s = &*self;
                let state = $crate::checkpoint::State::new($stage).words($words);
                Ok(state.input(self.project().input.save()?))
            }

            fn last_prov(&self) -> ::anyhow::Result<$crate::checkpoint::Prov> {
                self.input.last_prov()
            }
        }
    };
}
pub(crate) use one_to_one;

/// [`Resumable`] for a source that numbers its elements: it saves its stage's name and the
/// count yielded (both read from the stream, `s`), and its last element's position is its
/// number ([`numbered`]).
///
/// `numbered_source!(impl[] RandomStream, |s| "random", s.next);`
macro_rules! numbered_source {
    (impl[$($g:tt)*] $ty:ty, |$s:ident| $stage:expr, $next:expr) => {
        impl<$($g)*> $crate::engine::Resumable for $ty {
            fn save(
                self: ::std::pin::Pin<&mut Self>,
            ) -> ::anyhow::Result<$crate::checkpoint::State> {
                let $s = &*self;
                Ok($crate::checkpoint::State::new($stage).words([$next]))
            }

            fn last_prov(&self) -> ::anyhow::Result<$crate::checkpoint::Prov> {
                let $s = self;
                $crate::engine::numbered($stage, $next, None)
            }
        }
    };
}
pub(crate) use numbered_source;

/// A stage's stream: elements or errors, and its position.
pub(crate) trait StageStream<T>:
    Stream<Item = anyhow::Result<T>> + Resumable + Send
{
}

impl<S, T> StageStream<T> for S where S: Stream<Item = anyhow::Result<T>> + Resumable + Send {}

impl<T> Resumable for Pin<Box<dyn StageStream<T>>> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        self.get_mut().as_mut().save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        (**self).last_prov()
    }
}

/// The error for a stage that cannot be saved (yet, or ever: a plain generator).
pub(crate) fn unsupported(stage: &str, why: &str) -> anyhow::Error {
    Error::NotResumable {
        stage: stage.to_string(),
        reason: why.to_string(),
    }
    .into()
}

/// A stream of an operation that does not save its position: a checkpoint through it is an
/// error naming it.
#[pin_project::pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Opaque<S> {
    #[pin]
    inner: S,
    stage: &'static str,
}

impl<S> Opaque<S> {
    pub(crate) fn new(inner: S, stage: &'static str) -> Self {
        Opaque { inner, stage }
    }
}

impl<S: Stream> Stream for Opaque<S> {
    type Item = S::Item;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.project().inner.poll_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<S> Resumable for Opaque<S> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Err(unsupported(
            self.stage,
            "this operation does not save its position yet",
        ))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        Err(unsupported(
            self.stage,
            "this operation does not save its position yet",
        ))
    }
}

/// A stage's stream for one epoch as its operation opened it: its own (fresh or restored), or
/// in replay a stream that makes its saved elements again ([`ReadAgain`](super::ReadAgain),
/// [`Members`](super::Members)), which refuses to be saved. The operation's own stream then
/// knows nothing of replay, and is wrapped as it is (no branch per element).
pub(crate) enum Opened<S, T> {
    Own(S),
    Replay(BoxStream<T>),
}

/// A stream built inside another stage's (`padded_batch`'s batches, `rebatch`'s rows): in
/// replay (as `ctx` says) the one `replay` makes, else `open`'s, boxed; an error in its place.
pub(crate) fn replay_or_open<T, R, S>(
    ctx: &super::Ctx,
    replay: impl FnOnce() -> anyhow::Result<R>,
    open: impl FnOnce() -> anyhow::Result<S>,
) -> BoxStream<T>
where
    T: Send + 'static,
    R: StageStream<T> + 'static,
    S: StageStream<T> + 'static,
{
    let stream = match ctx.replaying() {
        Some(_) => replay().map(|r| Box::pin(r) as BoxStream<T>),
        None => open().map(|s| Box::pin(s) as BoxStream<T>),
    };
    stream.unwrap_or_else(super::error_stream)
}

/// A stream that makes an operation's saved elements again (or the error in its place), as
/// its [`replay`](super::Operation::replay) gives it.
pub(crate) fn replayed<T: Send + 'static, R: StageStream<T> + 'static>(
    replay: anyhow::Result<R>,
) -> Option<anyhow::Result<BoxStream<T>>> {
    Some(replay.map(|r| Box::pin(r) as BoxStream<T>))
}

/// A stage's stream built to go on from a saved state: until its first element, its position
/// is the one it was restored from (whatever it read or refilled meanwhile is done again by a
/// restore from that state), so a checkpoint right after a restore needs nothing of it.
#[pin_project::pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Restored<S> {
    #[pin]
    inner: S,
    state: Option<std::sync::Arc<State>>,
}

impl<S> Restored<S> {
    pub(crate) fn new(inner: S, state: std::sync::Arc<State>) -> Self {
        Restored {
            inner,
            state: Some(state),
        }
    }
}

impl<S: Stream> Stream for Restored<S> {
    type Item = S::Item;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = self.project();
        let poll = this.inner.poll_next(cx);
        if let Poll::Ready(Some(_)) = &poll {
            *this.state = None;
        }
        poll
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<S: Resumable> Resumable for Restored<S> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.project();
        match this.state {
            Some(state) => Ok(State::clone(state)),
            None => this.inner.save(),
        }
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.inner.last_prov()
    }
}

/// The position of the last of the `next` elements a source yielded: its number, or in
/// replay (`picks`) the saved position it was made from.
pub(crate) fn numbered(
    stage: &'static str,
    next: u64,
    picks: Option<&std::sync::Arc<[Prov]>>,
) -> anyhow::Result<Prov> {
    let last = next.checked_sub(1);
    let prov = match picks {
        None => last.map(Prov::at),
        Some(picks) => last.and_then(|i| picks.get(usize::try_from(i).ok()?).cloned()),
    };
    prov.ok_or_else(|| unsupported(stage, "no element yielded yet"))
}

/// The error of a stream replaying saved positions asked to save its own (it never is: the
/// stage holding the replayed elements saves their positions).
pub(crate) fn replaying(stage: &'static str) -> anyhow::Error {
    unsupported(stage, "a stream replaying saved positions is not saved")
}

/// A source in replay: the elements at `provs` (one-word positions), in order, each made by
/// `make` from its position.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ReplaySource<F> {
    provs: std::sync::Arc<[Prov]>,
    next: usize,
    make: F,
    stage: &'static str,
}

impl<F> ReplaySource<F> {
    pub(crate) fn new(provs: std::sync::Arc<[Prov]>, stage: &'static str, make: F) -> Self {
        ReplaySource {
            provs,
            next: 0,
            make,
            stage,
        }
    }
}

impl<F> Unpin for ReplaySource<F> {}

impl<T, F> Stream for ReplaySource<F>
where
    F: FnMut(u64) -> anyhow::Result<T>,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Some(prov) = this.provs.get(this.next) else {
            return Poll::Ready(None);
        };
        this.next += 1;
        Poll::Ready(Some(prov.single().and_then(&mut this.make)))
    }
}

impl<F> Resumable for ReplaySource<F> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Err(replaying(self.stage))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        numbered(self.stage, self.next as u64, Some(&self.provs))
    }
}

/// An input restored with elements its stage had taken from it before the checkpoint and
/// not yet passed on (zip's element of a step waiting on another input): those elements made
/// again from their saved positions first, then the input restored. Until they are all back
/// it cannot be saved; its position is theirs while it hands them back.
pub(crate) struct TakenThen<T> {
    taken: Option<BoxStream<T>>,
    /// How many elements were taken (saved), and how many were handed back.
    want: usize,
    got: usize,
    input: BoxStream<T>,
    stage: &'static str,
}

impl<T> TakenThen<T> {
    /// `taken` replays the `want` saved positions; `input` is the input restored.
    pub(crate) fn new(
        taken: BoxStream<T>,
        want: usize,
        input: BoxStream<T>,
        stage: &'static str,
    ) -> Self {
        TakenThen {
            taken: (want > 0).then_some(taken),
            want,
            got: 0,
            input,
            stage,
        }
    }
}

impl<T> Stream for TakenThen<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.got == this.want {
            this.taken = None;
        }
        let Some(taken) = this.taken.as_mut() else {
            return this.input.as_mut().poll_next(cx);
        };
        match std::task::ready!(taken.as_mut().poll_next(cx)) {
            Some(item) => {
                this.got += 1;
                Poll::Ready(Some(item))
            }
            None => {
                this.taken = None;
                this.got = this.want;
                Poll::Ready(Some(Err(Error::Checkpoint(format!(
                    "{}: an element taken before the checkpoint could not be read again",
                    this.stage
                ))
                .into())))
            }
        }
    }
}

impl<T> Resumable for TakenThen<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        if this.got < this.want {
            return Err(unsupported(
                this.stage,
                "a checkpoint before the elements it had taken are back",
            ));
        }
        this.input.as_mut().save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        match &self.taken {
            Some(taken) => taken.last_prov(),
            None => self.input.last_prov(),
        }
    }
}
