//! What each stage saves, and the trait every stage's stream implements to save it.

use std::borrow::Cow;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::Stream;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::error::Error;

/// One stage's saved state, as of the last element it yielded, with the states of the stages
/// it reads from.
///
/// A generic tree rather than a type per operation: every stage keeps a few numbers
/// (`words`: a position, counters, a random generator's position), the positions of the
/// elements it holds (`held`: a shuffle buffer's members, never their contents), and its
/// inputs' states, in the order the operation documents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct State {
    /// The operation's name (tf.data's), checked on restore.
    pub(crate) stage: Cow<'static, str>,
    pub(crate) words: Vec<u64>,
    pub(crate) held: Vec<Prov>,
    pub(crate) inputs: Vec<State>,
}

impl State {
    pub(crate) fn new(stage: &'static str) -> Self {
        State {
            stage: Cow::Borrowed(stage),
            words: Vec::new(),
            held: Vec::new(),
            inputs: Vec::new(),
        }
    }

    pub(crate) fn words(mut self, words: impl IntoIterator<Item = u64>) -> Self {
        self.words.extend(words);
        self
    }

    pub(crate) fn input(mut self, input: State) -> Self {
        self.inputs.push(input);
        self
    }

    pub(crate) fn held(mut self, held: Vec<Prov>) -> Self {
        self.held = held;
        self
    }

    /// Word `i`, or an error naming the stage (a checkpoint of another version or recipe).
    pub(crate) fn word(&self, i: usize) -> anyhow::Result<u64> {
        self.words.get(i).copied().ok_or_else(|| self.malformed())
    }

    /// Input state `i`.
    pub(crate) fn input_state(&self, i: usize) -> anyhow::Result<&State> {
        self.inputs.get(i).ok_or_else(|| self.malformed())
    }

    pub(crate) fn malformed(&self) -> anyhow::Error {
        Error::Checkpoint(format!(
            "the saved state of stage `{}` is not what this recipe's stage saves",
            self.stage
        ))
        .into()
    }
}

/// Where an element came from: enough to make it again after a restore, without having saved
/// its contents (its *provenance*).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) enum Prov {
    /// A position: the source's words first (a record's byte offset, an index), then a word
    /// for each stage on the way that adds one (an interleave's input element, a random map's
    /// element index), innermost first.
    At(SmallVec<[u64; 3]>),
    /// The elements an aggregate was made of (a batch), in order, then the words stages
    /// downstream of it added.
    Group(Vec<Prov>, SmallVec<[u64; 2]>),
    /// An element of an interleave whose inner or input position is not a plain one (a
    /// batch's): the inner position, the input element's, then the words added downstream.
    Nest(Box<Prov>, Box<Prov>, SmallVec<[u64; 2]>),
}

impl Prov {
    /// The inner position of an interleave's element that is an error of its input (no
    /// inner dataset was opened for it): see `interleave::input_error_position`.
    pub(crate) fn no_inner() -> Prov {
        Prov::Group(Vec::new(), smallvec::smallvec![u64::MAX])
    }

    pub(crate) fn is_no_inner(&self) -> bool {
        matches!(self, Prov::Group(members, words) if members.is_empty() && words[..] == [u64::MAX])
    }

    pub(crate) fn at(word: u64) -> Prov {
        Prov::At(smallvec::smallvec![word])
    }

    /// The position of an aggregate of these members.
    pub(crate) fn group(members: Vec<Prov>) -> Prov {
        Prov::Group(members, SmallVec::new())
    }

    /// This position with one more word, added by a stage downstream of the source.
    pub(crate) fn push(self, word: u64) -> anyhow::Result<Prov> {
        Ok(match self {
            Prov::At(mut words) => {
                words.push(word);
                Prov::At(words)
            }
            Prov::Group(members, mut words) => {
                words.push(word);
                Prov::Group(members, words)
            }
            Prov::Nest(inner, key, mut words) => {
                words.push(word);
                Prov::Nest(inner, key, words)
            }
        })
    }

    /// The last word and the position without it (undoing [`push`](Prov::push)).
    pub(crate) fn pop(&self) -> anyhow::Result<(u64, Prov)> {
        let popped = match self {
            Prov::At(words) => words
                .split_last()
                .map(|(&last, rest)| (last, Prov::At(rest.into()))),
            Prov::Group(members, words) => words
                .split_last()
                .map(|(&last, rest)| (last, Prov::Group(members.clone(), rest.into()))),
            Prov::Nest(inner, key, words) => words
                .split_last()
                .map(|(&last, rest)| (last, Prov::Nest(inner.clone(), key.clone(), rest.into()))),
        };
        popped.ok_or_else(|| self.unexpected())
    }

    fn unexpected(&self) -> anyhow::Error {
        Error::Checkpoint(format!(
            "a saved position is not what was expected: {self:?}"
        ))
        .into()
    }

    /// This position followed by an interleave's input element's (`key`): plain positions
    /// are joined as words (the key's words, then their count: no allocation per element),
    /// others nested.
    pub(crate) fn push_prov(self, key: &Prov) -> anyhow::Result<Prov> {
        match (self, key) {
            (Prov::At(mut words), Prov::At(tail)) => {
                words.extend_from_slice(tail);
                words.push(tail.len() as u64);
                Ok(Prov::At(words))
            }
            (inner, key) => Ok(Prov::Nest(
                Box::new(inner),
                Box::new(key.clone()),
                SmallVec::new(),
            )),
        }
    }

    /// Undoes [`push_prov`](Prov::push_prov): `(key, inner)`.
    pub(crate) fn pop_prov(&self) -> anyhow::Result<(Prov, Prov)> {
        match self {
            Prov::Nest(inner, key, words) if words.is_empty() => {
                Ok(((**key).clone(), (**inner).clone()))
            }
            Prov::At(_) => {
                let (n, mut rest) = self.pop()?;
                let mut tail = SmallVec::new();
                for _ in 0..n {
                    let (w, r) = rest.pop()?;
                    tail.insert(0, w);
                    rest = r;
                }
                Ok((Prov::At(tail), rest))
            }
            _ => Err(self.unexpected()),
        }
    }

    /// This position (of an element of an inner dataset, or of one input among several) with
    /// the position of what it came through (its key: an interleave's input element, the
    /// index of a concatenation's input) last: [`push_prov`](Prov::push_prov).
    pub(crate) fn keyed(self, key: &Prov) -> anyhow::Result<Prov> {
        self.push_prov(key)
    }

    /// Undoes [`keyed`](Prov::keyed): `(key, inner)`.
    pub(crate) fn split_key(&self) -> anyhow::Result<(Prov, Prov)> {
        self.pop_prov()
    }

    /// The only word of a one-word position.
    pub(crate) fn single(&self) -> anyhow::Result<u64> {
        match self {
            Prov::At(words) if words.len() == 1 => Ok(words[0]),
            _ => Err(Error::Checkpoint(format!(
                "a saved position is not what was expected: {self:?}"
            ))
            .into()),
        }
    }
}

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
/// - [`is_small`](Resumable::is_small): whether its state is a few words (no element held by
///   position). A stage that holds elements in order (batch, prefetch, a parallel map's calls
///   in flight) keeps a mark of a small input (its state before the first of them) and
///   redoes them from there after a restore; over an input that is not small it keeps each
///   element's position instead.
pub(crate) trait Resumable {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State>;

    fn last_prov(&self) -> anyhow::Result<Prov>;

    fn is_small(&self) -> bool {
        true
    }

    /// Whether [`save`](Resumable::save) can succeed at all (false through a stage that does
    /// not save its position): stages skip taking marks of inputs that cannot be saved.
    fn resumable(&self) -> bool {
        true
    }

    /// The positions this stream will yield before what its [`save`](Resumable::save)
    /// describes: a restored input still replaying what its consumer held ([`Resumed`]). A
    /// stage that saves positions saves these after its own.
    fn pending(&self) -> Vec<Prov> {
        Vec::new()
    }
}

/// The methods of [`Resumable`] a one-to-one stage answers as its `input` field does: where
/// its last element came from, whether its state is small, whether it can be saved.
macro_rules! positions_of_input {
    () => {
        fn last_prov(&self) -> anyhow::Result<$crate::checkpoint::Prov> {
            self.input.last_prov()
        }

        fn is_small(&self) -> bool {
            self.input.is_small()
        }

        fn resumable(&self) -> bool {
            self.input.resumable()
        }
    };
}
pub(crate) use positions_of_input;

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

    fn is_small(&self) -> bool {
        (**self).is_small()
    }

    fn resumable(&self) -> bool {
        (**self).resumable()
    }

    fn pending(&self) -> Vec<Prov> {
        (**self).pending()
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
    fn resumable(&self) -> bool {
        false
    }

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

    fn is_small(&self) -> bool {
        self.inner.is_small()
    }

    fn resumable(&self) -> bool {
        self.inner.resumable()
    }
}

/// For a stage holding elements in order over a small input: its input's state before the
/// oldest element not yet passed on, and how many elements made since that mark were passed
/// on. A restore rebuilds the input from the mark and skips that many.
#[derive(Debug, Default)]
pub(crate) struct Marker {
    pub(crate) mark: Option<State>,
    pub(crate) skip: u64,
}

impl Marker {
    /// A new mark (the input's state before the next element it makes).
    pub(crate) fn set(&mut self, mark: State) {
        self.mark = Some(mark);
        self.skip = 0;
    }

    /// The state to save: `[skip]` and the mark as the input.
    pub(crate) fn save(&self, stage: &'static str) -> anyhow::Result<State> {
        let mark = self
            .mark
            .clone()
            .ok_or_else(|| unsupported(stage, "no mark was taken before its first element"))?;
        Ok(State::new(stage).words([self.skip]).input(mark))
    }
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
        Err(unsupported(
            self.stage,
            "a stream replaying saved positions is not saved",
        ))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.next
            .checked_sub(1)
            .and_then(|i| self.provs.get(i))
            .cloned()
            .ok_or_else(|| unsupported(self.stage, "no element yielded yet"))
    }
}

/// A restored input that first drops the elements its consumer had already passed on since
/// the mark it was restored from.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Skipping<T> {
    inner: Pin<Box<dyn StageStream<T>>>,
    remaining: u64,
}

impl<T> Skipping<T> {
    pub(crate) fn new(inner: Pin<Box<dyn StageStream<T>>>, remaining: u64) -> Self {
        Skipping { inner, remaining }
    }
}

impl<T> Stream for Skipping<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        while this.remaining > 0 {
            match std::task::ready!(this.inner.as_mut().poll_next(cx)) {
                // A refused restore (a file changed since the checkpoint) is not one of the
                // elements passed on before: it goes to the consumer at once.
                Some(Err(e)) if crate::error::is_refusal(&e) => {
                    this.remaining = 0;
                    return Poll::Ready(Some(Err(e)));
                }
                Some(_) => this.remaining -= 1,
                None => return Poll::Ready(None),
            }
        }
        this.inner.as_mut().poll_next(cx)
    }
}

impl<T> Resumable for Skipping<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        if this.remaining > 0 {
            return Err(unsupported(
                "(restore)",
                "still skipping what was passed on before",
            ));
        }
        this.inner.as_mut().save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.inner.last_prov()
    }

    fn is_small(&self) -> bool {
        self.inner.is_small()
    }

    fn resumable(&self) -> bool {
        self.inner.resumable()
    }
}

/// The state of a stream that has ended.
pub(crate) const ENDED: &str = "(ended)";

/// A restored input that had ended: yields nothing and saves as ended again; `small` as the
/// input it stands for.
#[derive(Debug)]
pub(crate) struct Ended<T> {
    small: bool,
    _items: std::marker::PhantomData<fn() -> T>,
}

impl<T> Ended<T> {
    pub(crate) fn new(small: bool) -> Self {
        Ended {
            small,
            _items: std::marker::PhantomData,
        }
    }
}

impl<T> Stream for Ended<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(None)
    }
}

impl<T> Resumable for Ended<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new(ENDED))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        Err(unsupported(ENDED, "no element yielded"))
    }

    fn is_small(&self) -> bool {
        self.small
    }
}

/// A restored input of a stage that held elements by position: those elements, replayed from
/// their positions, then the input restored from its saved state. A checkpoint taken before
/// the replay is over saves the positions not yet replayed ([`Resumable::pending`]) and the
/// restored input's state.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Resumed<T> {
    replay: Option<Pin<Box<dyn StageStream<T>>>>,
    positions: std::sync::Arc<[Prov]>,
    replayed: usize,
    back: Pin<Box<dyn StageStream<T>>>,
}

impl<T> Resumed<T> {
    pub(crate) fn new(
        replay: Pin<Box<dyn StageStream<T>>>,
        positions: std::sync::Arc<[Prov]>,
        back: Pin<Box<dyn StageStream<T>>>,
    ) -> Self {
        Resumed {
            replay: Some(replay),
            positions,
            replayed: 0,
            back,
        }
    }
}

impl<T> Stream for Resumed<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(replay) = this.replay.as_mut() {
            match std::task::ready!(replay.as_mut().poll_next(cx)) {
                Some(item) => {
                    this.replayed += 1;
                    return Poll::Ready(Some(item));
                }
                None => this.replay = None,
            }
        }
        this.back.as_mut().poll_next(cx)
    }
}

impl<T> Resumable for Resumed<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        self.get_mut().back.as_mut().save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        match &self.replay {
            Some(replay) => replay.last_prov(),
            None => self.back.last_prov(),
        }
    }

    fn is_small(&self) -> bool {
        self.back.is_small()
    }

    fn resumable(&self) -> bool {
        self.back.resumable()
    }

    fn pending(&self) -> Vec<Prov> {
        match &self.replay {
            Some(_) => self
                .positions
                .get(self.replayed..)
                .unwrap_or_default()
                .to_vec(),
            None => Vec::new(),
        }
    }
}
