use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, FusedStream, Stream, StreamExt};

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Ctx, Dataset};
use crate::engine::{Resumable, unsupported};
use crate::runtime::catch_panic;

/// An open inner dataset in a slot of the cycle: a stream ([`Keyed`]), or a reader task's
/// receiver (`parallel_interleave`'s). Both interleaves save and place their elements through
/// it the same way ([`Cycle::save`], [`Cycle::last_prov`]).
pub(crate) trait Slot<U> {
    fn poll_slot(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>>;

    /// The position of the input element it reads (its key), when the input could say.
    fn key(&self) -> Option<&Prov>;

    /// Its inner stream's state as of the last element passed on.
    fn save_slot(&mut self) -> anyhow::Result<State>;

    /// Where the last element passed on came from in its inner dataset.
    fn last_inner(&self) -> anyhow::Result<Prov>;
}

/// tf.data's interleave cycle: `cycle_length` slots, and a cursor that says which slot is next
/// and how far into its block it is.
pub(crate) struct Cycle<S> {
    pub(crate) slots: Vec<Option<S>>,
    pub(crate) cycle_index: usize,
    block_index: usize,
    block_length: usize,
    pub(crate) num_open: usize,
    /// Whether an inner error element takes a place in its block (tf.data's parallel
    /// interleave) or not (its sequential interleave).
    errors_in_blocks: bool,
    /// The slot the last element came from.
    pub(crate) last: usize,
}

impl<S> Cycle<S> {
    pub(crate) fn new(cycle_length: usize, block_length: usize) -> Self {
        Cycle {
            slots: (0..cycle_length).map(|_| None).collect(),
            cycle_index: 0,
            block_index: 0,
            block_length,
            num_open: 0,
            errors_in_blocks: false,
            last: 0,
        }
    }

    /// Where the cursor stands: `(slot, elements taken from its current block)`.
    pub(crate) fn cursor(&self) -> (usize, usize) {
        (self.cycle_index, self.block_index)
    }

    /// Puts the cursor back where a checkpoint saved it.
    pub(crate) fn set_cursor(&mut self, slot: usize, taken: usize) {
        self.cycle_index = slot % self.slots.len().max(1);
        self.block_index = taken;
    }

    /// Counts inner error elements in their blocks, as tf.data's parallel interleave does
    /// (its sequential one does not).
    pub(crate) fn counting_errors_in_blocks(mut self) -> Self {
        self.errors_in_blocks = true;
        self
    }

    /// After an element was produced from slot `i`: count it in its block, and move on when
    /// the block is complete.
    pub(crate) fn advance_position(&mut self, i: usize) {
        if i != self.cycle_index {
            self.cycle_index = i;
            self.block_index = 0;
        }
        self.block_index += 1;
        if self.block_index == self.block_length {
            self.advance_to_next_in_cycle();
        }
    }

    /// Move on to the next slot, at the start of its block.
    pub(crate) fn advance_to_next_in_cycle(&mut self) {
        self.block_index = 0;
        self.cycle_index = (self.cycle_index + 1) % self.slots.len();
    }

    pub(crate) fn open(&mut self, i: usize, slot: S) {
        self.slots[i] = Some(slot);
        self.num_open += 1;
    }

    pub(crate) fn close(&mut self, i: usize) {
        self.slots[i] = None;
        self.num_open -= 1;
    }

    /// tf.data's `InterleaveDatasetOp::GetNext`: take from the slot under the cursor; an
    /// exhausted slot is freed and the cursor moves on at once; a free slot under the cursor
    /// is filled with the next input element (`next`, which yields `Ready(None)` once the input
    /// has ended). An error is yielded without moving the cursor, as tf.data's `GetNext`
    /// returning an error does, unless errors count in blocks
    /// ([`counting_errors_in_blocks`](Cycle::counting_errors_in_blocks)).
    pub(crate) fn poll_in_order<U>(
        &mut self,
        cx: &mut Context<'_>,
        mut next: impl FnMut(&mut Context<'_>) -> Poll<Option<anyhow::Result<S>>>,
    ) -> Poll<Option<anyhow::Result<U>>>
    where
        S: Slot<U>,
    {
        let mut input_ended = false;
        loop {
            let ci = self.cycle_index;
            if let Some(slot) = &mut self.slots[ci] {
                match ready!(slot.poll_slot(cx)) {
                    Some(Ok(x)) => {
                        self.last = ci;
                        self.advance_position(ci);
                        return Poll::Ready(Some(Ok(x)));
                    }
                    Some(Err(e)) => {
                        self.last = ci;
                        if self.errors_in_blocks {
                            self.advance_position(ci);
                        }
                        return Poll::Ready(Some(Err(e)));
                    }
                    None => {
                        self.close(ci);
                        self.advance_to_next_in_cycle();
                    }
                }
            } else if !input_ended {
                match ready!(next(cx)) {
                    Some(Ok(slot)) => self.open(ci, slot),
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => input_ended = true,
                }
            } else if self.num_open == 0 {
                return Poll::Ready(None);
            } else {
                self.advance_to_next_in_cycle();
            }
        }
    }
}

/// After a restore, the slots of an interleave's cycle that were open at the checkpoint: each
/// open input's element, read again from its saved position (its key), with its slot and its
/// inner stream's saved state. Shared by both interleaves, which save the same layout:
/// `[slot, taken from its block, slots, then a 0/1 per slot: open]`, the open slots' keys
/// (`held`), then the input's state and each open slot's inner state.
pub(crate) struct Reopen<T> {
    elements: Fuse<BoxStream<T>>,
    pending: std::collections::VecDeque<(usize, Prov, State)>,
}

impl<T: Send + 'static> Reopen<T> {
    /// Reads the layout: puts the cycle's cursor back and returns the slots to reopen.
    pub(crate) fn restore<S>(
        ctx: &Ctx,
        input: &Dataset<T>,
        state: &State,
        cycle: &mut Cycle<S>,
    ) -> anyhow::Result<Option<Self>> {
        let (slot, taken, slots) = (state.word(0)?, state.word(1)?, state.word(2)?);
        if slots as usize != cycle.slots.len() {
            return Err(state.malformed());
        }
        cycle.set_cursor(slot as usize, taken as usize);
        let mut pending = std::collections::VecDeque::new();
        for i in 0..slots as usize {
            if state.word(3 + i)? == 1 {
                let n = pending.len();
                let key = state.held.get(n).ok_or_else(|| state.malformed())?.clone();
                pending.push_back((i, key, state.input_state(1 + n)?.clone()));
            }
        }
        if pending.is_empty() {
            return Ok(None);
        }
        let keys: Vec<Prov> = pending.iter().map(|(_, key, _)| key.clone()).collect();
        let elements = input.build(&ctx.for_input(0).with_replay(keys.into()));
        Ok(Some(Reopen {
            elements: elements.fuse(),
            pending,
        }))
    }

    /// Opens the slots that were open at the checkpoint (`reopen`, taken once all are or at
    /// an error): each made by `make` from its key, its inner stream's saved state and its
    /// input element read again.
    pub(crate) fn poll_open<S>(
        reopen: &mut Option<Self>,
        cx: &mut Context<'_>,
        cycle: &mut Cycle<S>,
        mut make: impl FnMut(Prov, State, T) -> anyhow::Result<S>,
    ) -> Poll<anyhow::Result<()>> {
        while let Some(this) = reopen.as_mut() {
            if this.pending.is_empty() {
                *reopen = None;
                break;
            }
            let x = ready!(this.elements.poll_next_unpin(cx));
            let Some((slot, key, inner)) = this.pending.pop_front() else {
                break;
            };
            let opened = match x {
                Some(x) => x.and_then(|x| make(key, inner, x)),
                None => Err(crate::Error::Checkpoint(
                    "an input element of an open slot could not be read again".into(),
                )
                .into()),
            };
            match opened {
                Ok(s) => cycle.open(slot, s),
                Err(e) => {
                    *reopen = None;
                    return Poll::Ready(Err(e));
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S> Cycle<S> {
    /// The layout [`Reopen`] reads: the cursor, the open slots' keys (`held`), the input's
    /// state (`input`), then each open slot's inner state.
    pub(crate) fn save<U>(&mut self, stage: &'static str, input: State) -> anyhow::Result<State>
    where
        S: Slot<U>,
    {
        let (slot, taken) = self.cursor();
        let mut words = vec![slot as u64, taken as u64, self.slots.len() as u64];
        let mut held = Vec::new();
        let mut inputs = vec![input];
        for open in &mut self.slots {
            words.push(u64::from(open.is_some()));
            if let Some(open) = open {
                held.push(open.key().cloned().ok_or_else(|| no_key(stage))?);
                inputs.push(open.save_slot()?);
            }
        }
        let mut state = State::new(stage).words(words).held(held);
        state.inputs = inputs;
        Ok(state)
    }

    /// The position of the last element yielded: its inner position keyed by its input
    /// element's, or, for an error of the input (`input_error`, at that element's position
    /// if known), [`input_error_position`].
    pub(crate) fn last_prov<U>(
        &self,
        input_error: Option<&Option<Prov>>,
        stage: &'static str,
    ) -> anyhow::Result<Prov>
    where
        S: Slot<U>,
    {
        if let Some(key) = input_error {
            return input_error_position(key.as_ref(), stage);
        }
        let open = self.slots.get(self.last).and_then(Option::as_ref);
        let open = open.ok_or_else(|| unsupported(stage, "no element yielded yet"))?;
        let key = open.key().ok_or_else(|| no_key(stage))?;
        open.last_inner()?.keyed(key)
    }
}

fn no_key(stage: &'static str) -> anyhow::Error {
    unsupported(stage, "its input cannot say where its elements come from")
}

/// An open inner stream and the position of the input element it was made from (its key),
/// when the input can say.
pub(crate) struct Keyed<S> {
    pub(crate) stream: S,
    pub(crate) key: Option<Prov>,
}

impl<U> Slot<U> for Keyed<BoxStream<U>> {
    fn poll_slot(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>> {
        self.stream.as_mut().poll_next(cx)
    }

    fn key(&self) -> Option<&Prov> {
        self.key.as_ref()
    }

    fn save_slot(&mut self) -> anyhow::Result<State> {
        self.stream.as_mut().save()
    }

    fn last_inner(&self) -> anyhow::Result<Prov> {
        self.stream.last_prov()
    }
}

/// Opens the inner dataset for one input element, turning a panic in `f` into an error.
pub(crate) fn open<T, U, F>(
    f: &F,
    x: T,
    ctx: &Ctx,
    stage: &'static str,
) -> anyhow::Result<BoxStream<U>>
where
    U: Send + 'static,
    F: Fn(T) -> Dataset<U>,
{
    catch_panic(stage, || Ok(f(x))).map(|ds| ds.build(ctx))
}

/// The [`interleave`](crate::Dataset::interleave) operation (and `flat_map`, its cycle and
/// blocks of one): `f`'s datasets, `cycle_length` at a time, `block_length` elements from
/// each in turn. The cycle length is the resolved one (AUTOTUNE's count of cores): another
/// count makes another order.
pub(crate) struct Interleave<F> {
    pub(crate) cycle_length: usize,
    pub(crate) block_length: usize,
    pub(crate) f: crate::engine::Unkeyed<Arc<F>>,
}

crate::engine::keyed_fields!(impl[F] Interleave<F> { keyed: [cycle_length, block_length], unkeyed: [f] });

impl<T, U, F> crate::engine::Operation<T> for Interleave<F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U> + Send + Sync + 'static,
{
    type Out = U;
    type Stream = InterleaveStream<T, U, F>;
    const NAME: &'static str = "interleave";

    fn name(&self) -> &'static str {
        if self.cycle_length == 1 && self.block_length == 1 {
            "flat_map"
        } else {
            Self::NAME
        }
    }

    fn cardinality(&self, _: crate::engine::Cardinality) -> crate::engine::Cardinality {
        crate::engine::Cardinality::Unknown
    }

    /// Fresh, or restored: its input, its cursor, and each open input's element replayed
    /// from its saved position and its inner stream restored.
    fn open(
        &self,
        ctx: &Ctx,
        input: crate::engine::Input<'_, T>,
        _: crate::engine::Start<'_>,
    ) -> anyhow::Result<Self::Stream> {
        let input = input.dataset();
        let upstream = input.build(&ctx.for_input(0).with_provenance());
        let (f, nested) = (Arc::clone(&self.f), ctx.nested().fresh());
        let mut interleave =
            InterleaveStream::new(upstream, f, nested, self.cycle_length, self.block_length);
        interleave.stage = crate::engine::Operation::<T>::name(self);
        if let Some(state) = ctx.restoring() {
            interleave.reopen = Reopen::restore(ctx, input, state, &mut interleave.cycle)?;
        }
        Ok(interleave)
    }

    /// Each saved position's last word names the input element.
    fn replay(
        &self,
        ctx: &Ctx,
        input: crate::engine::Input<'_, T>,
        _: &Arc<[Prov]>,
    ) -> crate::engine::Replay<U> {
        let name = crate::engine::Operation::<T>::name(self);
        Some(Ok(replay(
            ctx,
            input.dataset(),
            &self.f,
            ctx.nested(),
            name,
        )))
    }
}

/// Stream for the [`interleave`](crate::Dataset::interleave) and
/// [`flat_map`](crate::Dataset::flat_map) methods: [`Cycle::poll_in_order`] over inner
/// streams polled in place.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct InterleaveStream<T, U, F> {
    input: Fuse<BoxStream<T>>,
    f: Arc<F>,
    ctx: Ctx,
    cycle: Cycle<Keyed<BoxStream<U>>>,
    /// After a restore: the open inputs' elements (replayed) and, for each, its slot and its
    /// inner stream's saved state, opened before anything else.
    reopen: Option<Reopen<T>>,
    /// `interleave` or `flat_map`.
    stage: &'static str,
    /// The last element yielded is an error of the input (`Some`: an input's error element,
    /// or one opening its inner dataset), at that input element's position (if recorded).
    input_error: Option<Option<Prov>>,
}

/// The position of an error element of an interleave's input (no inner dataset was opened
/// for it): the input element's position as the key, and [`Prov::no_inner`] as the inner
/// position. Its replay yields the input's error again, in its place.
pub(crate) fn input_error_position(
    key: Option<&Prov>,
    stage: &'static str,
) -> anyhow::Result<Prov> {
    let key =
        key.ok_or_else(|| unsupported(stage, "its input cannot say where its elements come from"))?;
    Prov::no_inner().keyed(key)
}

impl<T, U, F> InterleaveStream<T, U, F> {
    pub(crate) fn new(
        input: BoxStream<T>,
        f: Arc<F>,
        ctx: Ctx,
        cycle_length: usize,
        block_length: usize,
    ) -> Self {
        InterleaveStream {
            input: input.fuse(),
            f,
            ctx,
            cycle: Cycle::new(cycle_length, block_length),
            reopen: None,
            stage: "interleave",
            input_error: None,
        }
    }
}

impl<T, U, F> Stream for InterleaveStream<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U>,
{
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        // After a restore: the slots open at the checkpoint, each restored, first.
        let (f, ctx) = (&this.f, &this.ctx);
        let reopened = Reopen::poll_open(&mut this.reopen, cx, &mut this.cycle, |key, inner, x| {
            let stream = open(&**f, x, &ctx.with_restore(Some(inner)), "interleave")?;
            let key = Some(key);
            Ok(Keyed { stream, key })
        });
        if let Err(e) = ready!(reopened) {
            return Poll::Ready(Some(Err(e)));
        }
        let InterleaveStream {
            input,
            f,
            ctx,
            cycle,
            input_error,
            ..
        } = this;
        let mut error_key = None;
        let item = ready!(cycle.poll_in_order(cx, |cx| {
            if input.is_terminated() {
                return Poll::Ready(None);
            }
            Poll::Ready(ready!(input.poll_next_unpin(cx)).map(|x| {
                let key = input.get_ref().last_prov().ok();
                let opened = x
                    .and_then(|x| open(&**f, x, ctx, "interleave"))
                    .map(|stream| Keyed {
                        stream,
                        key: key.clone(),
                    });
                if opened.is_err() {
                    error_key = Some(key);
                }
                opened
            }))
        }));
        *input_error = match &item {
            Some(Err(_)) => error_key,
            _ => None,
        };
        Poll::Ready(item)
    }
}

/// Saved state: the layout of [`Cycle::save`], each open slot's inner stream's own state.
impl<T, U, F> Resumable for InterleaveStream<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
{
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        if this.reopen.is_some() {
            return Err(unsupported(
                this.stage,
                "a checkpoint before its inputs were reopened after a restore",
            ));
        }
        let input = this.input.get_mut().as_mut().save()?;
        this.cycle.save(this.stage, input)
    }

    /// The inner position, with the input element's position as its last word.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.cycle.last_prov(self.input_error.as_ref(), self.stage)
    }
}

/// An interleave (sequential or parallel) in replay, as a stage's stream.
pub(crate) fn replay<T, U, F>(
    ctx: &Ctx,
    input: &Dataset<T>,
    f: &Arc<F>,
    nested: Ctx,
    stage: &'static str,
) -> BoxStream<U>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U> + Send + Sync + 'static,
{
    replay_with(ctx, &|ctx: &Ctx| input.build(ctx), f, nested, stage)
}

/// [`replay`] over input elements the caller's `input` makes (given the replaying context):
/// group_by_window replays its windows so.
pub(crate) fn replay_with<T, U, F>(
    ctx: &Ctx,
    input: &dyn Fn(&Ctx) -> BoxStream<T>,
    f: &Arc<F>,
    nested: Ctx,
    stage: &'static str,
) -> BoxStream<U>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U> + Send + Sync + 'static,
{
    let Some(provs) = ctx.replaying() else {
        return crate::engine::error_stream(unsupported(stage, "not in replay"));
    };
    let (f, nested) = (Arc::clone(f), nested.fresh());
    let again = crate::engine::ReadAgain::elements(
        provs,
        stage,
        Prov::split_key,
        |keys| input(&ctx.for_input(0).with_replay(keys)),
        move |x, wanted| open(&*f, x, &nested.with_replay(wanted), stage),
    );
    match again {
        Ok(again) => Box::pin(again),
        Err(e) => crate::engine::error_stream(e),
    }
}
