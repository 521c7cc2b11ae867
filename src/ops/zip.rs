//! Saved state: `[1 if the zip has ended, then a 0/1 per input: 1 when its element for the
//! next step was taken (a checkpoint while the step waits on another input)]`, the positions
//! of those taken elements (`held`, read again after a restore), and each input's state
//! (`inputs[i]`).

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::checkpoint::{Prov, State};
use crate::engine::error_stream;
use std::hash::{Hash, Hasher};

use crate::engine::{Beside, BoxStream, Cardinality, Combine, Ctx, Dataset, Input, Inputs};
use crate::engine::{Operation, Start};
use crate::engine::{Resumable, TakenThen, unsupported};

const STAGE: &str = "zip";

fn min_cardinality(cards: impl IntoIterator<Item = Cardinality>) -> Cardinality {
    cards
        .into_iter()
        .fold(Cardinality::Infinite, |acc, c| match (acc, c) {
            (Cardinality::Finite(a), Cardinality::Finite(b)) => Cardinality::Finite(a.min(b)),
            (Cardinality::Finite(a), _) | (_, Cardinality::Finite(a)) => Cardinality::Finite(a),
            (Cardinality::Unknown, _) | (_, Cardinality::Unknown) => Cardinality::Unknown,
            _ => Cardinality::Infinite,
        })
}

/// The [`zip`](crate::Dataset::zip) operation over its input and `other` (read beside it,
/// keyed by its fingerprint).
pub(crate) struct Zip<B> {
    pub(crate) other: Dataset<B>,
}

impl<B: Send + 'static> Hash for Zip<B> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let Zip { other } = self;
        other.fingerprint().hash(h);
    }
}

impl<A: Send + 'static, B: Send + 'static> Operation<A> for Zip<B> {
    type Out = (A, B);
    type Stream = ZipStream<Either<A, B>, fn(Vec<Either<A, B>>) -> anyhow::Result<(A, B)>>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        match (input, self.other.cardinality()) {
            // With one side unknown, the shorter side is unknown too.
            (Cardinality::Unknown, _) | (_, Cardinality::Unknown) => Cardinality::Unknown,
            (x, y) => min_cardinality([x, y]),
        }
    }

    fn beside(&self) -> Option<Beside> {
        Some(Beside::of(&self.other))
    }

    /// See [`build`]: the start is the context's.
    fn open(&self, ctx: &Ctx, input: Input<'_, A>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let a = input.dataset();
        let make = |i: usize, ctx: &Ctx| -> BoxStream<Either<A, B>> {
            match i {
                0 => Box::pin(Tag::new(a.build(ctx), Either::A)),
                _ => Box::pin(Tag::new(self.other.build(ctx), Either::B)),
            }
        };
        let ctx = ctx.for_merged(a.is_small() && self.other.is_small());
        Ok(build(&ctx, 2, &make, pair))
    }
}

fn pair<A, B>(mut v: Vec<Either<A, B>>) -> anyhow::Result<(A, B)> {
    match (v.pop(), v.pop()) {
        (Some(Either::B(y)), Some(Either::A(x))) => Ok((x, y)),
        _ => Err(anyhow::anyhow!("zip: internal error: misaligned inputs")),
    }
}

pub(crate) enum Either<A, B> {
    A(A),
    B(B),
}

/// The [`zip_all`](crate::Dataset::zip_all) operation.
#[derive(Hash)]
pub(crate) struct ZipAll;

impl<T: Send + 'static> Combine<T> for ZipAll {
    type Out = Vec<T>;
    type Stream = ZipStream<T, fn(Vec<T>) -> anyhow::Result<Vec<T>>>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, inputs: &[Cardinality]) -> Cardinality {
        if inputs.contains(&Cardinality::Unknown) {
            return Cardinality::Unknown;
        }
        min_cardinality(inputs.iter().copied())
    }

    /// See [`build`]: the start is the context's.
    fn open(&self, ctx: &Ctx, inputs: Inputs<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let make = |i: usize, ctx: &Ctx| inputs.dataset(i).build(ctx);
        let ctx = ctx.for_merged(inputs.small());
        Ok(build(&ctx, inputs.len(), &make, Ok))
    }
}

/// The zip of one epoch over `n` inputs (`make(i, ctx)` builds input `i`): fresh, restored,
/// or replaying saved steps (each position is the group of its inputs' positions).
fn build<T: Send + 'static, O, F>(
    ctx: &Ctx,
    n: usize,
    make: &dyn Fn(usize, &Ctx) -> BoxStream<T>,
    finish: F,
) -> ZipStream<T, F>
where
    F: Fn(Vec<T>) -> anyhow::Result<O>,
{
    if let Some(provs) = ctx.replaying() {
        let mut lists = vec![Vec::new(); n];
        for prov in provs.iter() {
            match prov {
                Prov::Group(members, w) if w.is_empty() && members.len() == n => {
                    for (list, member) in lists.iter_mut().zip(members) {
                        list.push(member.clone());
                    }
                }
                other => {
                    let e = unsupported(STAGE, &format!("saved step is not a group: {other:?}"));
                    return ZipStream::new(vec![error_stream(e)], finish);
                }
            }
        }
        let inputs = lists
            .into_iter()
            .enumerate()
            .map(|(i, list)| make(i, &ctx.for_input(i).with_replay(list.into())))
            .collect();
        return ZipStream::new(inputs, finish);
    }
    let Some(state) = ctx.restoring() else {
        return ZipStream::new((0..n).map(|i| make(i, ctx)).collect(), finish);
    };
    // `[ended, then 1 per input whose element for the next step was taken]`, their positions:
    // those inputs hand them back first.
    let restored = (|| {
        let mut held = state.held.iter();
        let inputs = (0..n)
            .map(|i| {
                let input = make(i, &ctx.for_input(i));
                if state.words.get(1 + i) != Some(&1) {
                    return Ok(input);
                }
                let taken = vec![held.next().ok_or_else(|| state.malformed())?.clone()];
                let taken = make(i, &ctx.for_input(i).with_replay(taken.into()));
                Ok(Box::pin(TakenThen::new(taken, 1, input, STAGE)) as BoxStream<T>)
            })
            .collect::<anyhow::Result<_>>()?;
        Ok((inputs, state.word(0)? == 1))
    })();
    match restored {
        Ok((inputs, done)) => {
            let mut zip = ZipStream::new(inputs, finish);
            zip.done = done;
            zip
        }
        Err(e) => ZipStream::new(vec![error_stream(e)], finish),
    }
}

/// Stream for the [`zip`](crate::Dataset::zip) and [`zip_all`](crate::Dataset::zip_all) methods.
///
/// As tf.data's zip, every step takes one item from each input, even when an earlier input's
/// item is an error, so the inputs stay in step: a step with an error yields its first error
/// and drops the other inputs' items.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ZipStream<T, F> {
    inputs: Vec<BoxStream<T>>,
    /// One item waiting from each input.
    slots: Vec<Option<anyhow::Result<T>>>,
    done: bool,
    /// Makes a step's output from its items.
    finish: F,
}

// Elements are never pinned in place.
impl<T, F> Unpin for ZipStream<T, F> {}

impl<T, F> ZipStream<T, F> {
    pub(crate) fn new(inputs: Vec<BoxStream<T>>, finish: F) -> Self {
        let slots = inputs.iter().map(|_| None).collect();
        let done = inputs.is_empty();
        ZipStream {
            inputs,
            slots,
            done,
            finish,
        }
    }
}

impl<T, O, F> Stream for ZipStream<T, F>
where
    F: Fn(Vec<T>) -> anyhow::Result<O>,
{
    type Item = anyhow::Result<O>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let mut pending = false;
        for (input, slot) in this.inputs.iter_mut().zip(this.slots.iter_mut()) {
            if slot.is_some() {
                continue;
            }
            match input.as_mut().poll_next(cx) {
                Poll::Ready(Some(item)) => *slot = Some(item),
                Poll::Ready(None) => {
                    // One input has ended: so has the zip. An error already taken from
                    // another input in this step is still reported.
                    this.done = true;
                    let error = this.slots.iter_mut().find_map(|s| s.take()?.err());
                    this.slots.iter_mut().for_each(|s| *s = None);
                    return Poll::Ready(error.map(Err));
                }
                Poll::Pending => pending = true,
            }
        }
        if pending {
            return Poll::Pending;
        }
        // Empty every slot before looking for an error, so the next step starts afresh.
        let items: Vec<anyhow::Result<T>> =
            this.slots.iter_mut().filter_map(Option::take).collect();
        let items: anyhow::Result<Vec<T>> = items.into_iter().collect();
        Poll::Ready(Some(items.and_then(&this.finish)))
    }
}

impl<T, F> Resumable for ZipStream<T, F> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let mut words = vec![u64::from(this.done)];
        let mut held = Vec::new();
        for (input, slot) in this.inputs.iter().zip(&this.slots) {
            words.push(u64::from(slot.is_some()));
            match slot {
                None => {}
                Some(Ok(_)) => held.push(input.last_prov()?),
                Some(Err(_)) => {
                    return Err(unsupported(
                        STAGE,
                        "a checkpoint while a step that holds an error waits on another input",
                    ));
                }
            }
        }
        let mut state = State::new(STAGE).words(words).held(held);
        for input in &mut this.inputs {
            state = state.input(input.as_mut().save()?);
        }
        Ok(state)
    }

    /// The group of the step's elements' positions, one per input.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        let members = self
            .inputs
            .iter()
            .map(|input| input.last_prov())
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Prov::group(members))
    }
}

/// An input of `zip(a, b)`, its elements tagged with their side.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
struct Tag<St, F> {
    #[pin]
    input: St,
    tag: F,
}

impl<St, F> Tag<St, F> {
    fn new(input: St, tag: F) -> Self {
        Tag { input, tag }
    }
}

impl<St, F, T, E> Stream for Tag<St, F>
where
    St: Stream<Item = anyhow::Result<T>>,
    F: Fn(T) -> E,
{
    type Item = anyhow::Result<E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let item = std::task::ready!(this.input.poll_next(cx));
        Poll::Ready(item.map(|r| r.map(this.tag)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.input.size_hint()
    }
}

impl<St: Resumable, F> Resumable for Tag<St, F> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        self.project().input.save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.input.last_prov()
    }
}
