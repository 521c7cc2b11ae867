//! Saved state: `[index of the element being split, rows of it passed on]` and the input's
//! [`Hold`](crate::engine::Hold), which holds that element (split again after a restore).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Replay, Start};
use crate::engine::{Hold, Opaque, ReadAgain, Resumable, replay_or_open, replayed, unsupported};
use crate::ops::batch::{self, Config, Sizes};
use crate::tensor::Unbatch as Rows;

/// The [`unbatch`](crate::Dataset::unbatch) operation: the rows of each element.
#[derive(Hash)]
pub(crate) struct Unbatch;

impl<C> Operation<C> for Unbatch
where
    C: Rows + Send + 'static,
    C::Row: Send + 'static,
{
    type Out = C::Row;
    type Stream = UnbatchStream<C>;
    const NAME: &'static str = "unbatch";

    /// As tf.data without a static batch size: infinite stays infinite, the rest is unknown.
    fn cardinality(&self, input: Cardinality) -> Cardinality {
        match input {
            Cardinality::Infinite => Cardinality::Infinite,
            _ => Cardinality::Unknown,
        }
    }

    /// See [`build`]: the start is the context's.
    fn open(&self, ctx: &Ctx, input: Input<'_, C>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        build(ctx, input.dataset(), "unbatch")
    }

    fn replay(&self, ctx: &Ctx, input: Input<'_, C>, _: &Arc<[Prov]>) -> Replay<C::Row> {
        replayed(replay(ctx, input.dataset(), "unbatch"))
    }
}

/// The [`rebatch`](crate::Dataset::rebatch) and [`rebatch_sizes`](crate::Dataset::rebatch_sizes)
/// operation: the rows of each element, batched again (`sizes` taken in turn when `cycling`).
#[derive(Hash)]
pub(crate) struct Rebatch {
    pub(crate) sizes: Vec<usize>,
    pub(crate) cycling: bool,
    pub(crate) drop_remainder: bool,
}

impl<C> Operation<C> for Rebatch
where
    C: Rows + Send + 'static,
    C::Row: Send + 'static,
{
    type Out = Vec<C::Row>;
    type Stream = BoxStream<Vec<C::Row>>;
    const NAME: &'static str = "rebatch";

    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Unknown
    }

    /// Saved state: the batch step's (see `batch::build_with`) over the unbatch step's.
    fn open(&self, ctx: &Ctx, input: Input<'_, C>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let dataset = input.dataset();
        let rows = |ctx: &Ctx| rows(ctx, dataset, "rebatch");
        let sizes = match (self.cycling, &self.sizes[..]) {
            (false, &[n]) => Sizes::One(n),
            _ => Sizes::Cycle(self.sizes.as_slice().into()),
        };
        let config = Config {
            sizes,
            drop_remainder: self.drop_remainder,
            stage: "rebatch",
        };
        Ok(batch::batches(ctx, &rows, dataset.answers(ctx), config))
    }
}

/// The rows of one epoch, fresh, restored or in replay ([`build`] or [`replay`]), for
/// `rebatch`'s batches.
fn rows<C>(ctx: &Ctx, input: &Dataset<C>, stage: &'static str) -> BoxStream<C::Row>
where
    C: Rows + Send + 'static,
    C::Row: Send + 'static,
{
    replay_or_open(
        ctx,
        || replay(ctx, input, stage),
        || build(ctx, input, stage),
    )
}

/// Saved rows made again: each position is the element's keyed by the row's index in it
/// ([`Prov::keyed`]).
fn replay<C>(
    ctx: &Ctx,
    input: &Dataset<C>,
    stage: &'static str,
) -> anyhow::Result<ReadAgain<C, C::Row>>
where
    C: Rows + Send + 'static,
    C::Row: Send + 'static,
{
    let provs = ctx
        .replaying()
        .ok_or_else(|| unsupported(stage, "not in replay"))?;
    ReadAgain::elements(
        provs,
        stage,
        |prov| prov.split_key().map(|(row, elem)| (elem, row)),
        |elems| input.build(&ctx.for_input(0).with_replay(elems)),
        move |c: C, wanted| {
            let mut rows: Vec<_> = c.into_rows()?.into_iter().map(Some).collect();
            let picked: Vec<anyhow::Result<C::Row>> = wanted
                .iter()
                .map(|row| {
                    let row = row.single()?;
                    let x = rows.get_mut(row as usize).and_then(Option::take);
                    x.ok_or_else(|| {
                        crate::Error::Checkpoint(format!(
                            "row {row} of an element read again is missing (or was wanted twice)"
                        ))
                        .into()
                    })
                })
                .collect();
            Ok(Box::pin(Opaque::new(futures::stream::iter(picked), stage)) as BoxStream<_>)
        },
    )
}

/// The unbatch stream of one epoch over `input`: fresh, or restored (the element being split
/// at the checkpoint is handed back by the hold, and the rows passed on before are skipped).
fn build<C>(ctx: &Ctx, input: &Dataset<C>, stage: &'static str) -> anyhow::Result<UnbatchStream<C>>
where
    C: Rows + Send + 'static,
    C::Row: Send + 'static,
{
    let mut unbatch = UnbatchStream::new(Hold::of(ctx, input, false, stage, 2)?);
    if let Some(state) = ctx.restoring() {
        unbatch.index = state.word(0)?;
        unbatch.skip_rows = state.word(1)?;
    }
    Ok(unbatch)
}

/// Stream for the [`unbatch`](crate::Dataset::unbatch) method, and the first step of
/// [`rebatch`](crate::Dataset::rebatch): yields the rows of each element, numbering the
/// elements so an error names the one it is about.
///
/// Saved state: `[index of the element being split (or of the next one), rows of it passed
/// on]`, then its input's [`Hold`], holding the element being split.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct UnbatchStream<C: Rows> {
    input: Hold<C>,
    current: Option<std::vec::IntoIter<C::Row>>,
    /// The index of the next input element (error elements are counted too).
    index: u64,
    /// Rows of the current element passed on.
    rows: u64,
    /// The current element's position (when recorded; `None` when the input could not say).
    elem: Option<Prov>,
    /// After a restore: rows of the element handed back that were passed on before.
    skip_rows: u64,
}

impl<C: Rows> Unpin for UnbatchStream<C> {}

impl<C: Rows + Send + 'static> UnbatchStream<C> {
    fn new(input: Hold<C>) -> Self {
        UnbatchStream {
            input,
            current: None,
            index: 0,
            rows: 0,
            elem: None,
            skip_rows: 0,
        }
    }
}

impl<C: Rows + Send + 'static> Stream for UnbatchStream<C>
where
    C::Row: Send + 'static,
{
    type Item = anyhow::Result<C::Row>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(x) = this.current.as_mut().and_then(Iterator::next) {
                this.rows += 1;
                return Poll::Ready(Some(Ok(x)));
            }
            // Nothing before the next element is held; restored from here, it is split again.
            this.current = None;
            this.input.release(this.input.count());
            this.input.mark();
            let item = ready!(this.input.poll_next(cx));
            this.elem = this.input.prov();
            let index = this.index;
            this.index += 1;
            this.rows = 0;
            match item {
                Some(Ok(c)) => match c.into_rows() {
                    Ok(rows) => {
                        let mut rows = rows.into_iter();
                        if this.input.again() {
                            // The rows passed on before the checkpoint.
                            let skip = std::mem::take(&mut this.skip_rows);
                            for _ in 0..skip {
                                rows.next();
                            }
                            this.rows = skip;
                        }
                        this.current = Some(rows);
                    }
                    Err(e) => {
                        let stage = this.input.stage();
                        return Poll::Ready(Some(Err(
                            e.context(format!("{stage}: element {index}"))
                        )));
                    }
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            }
        }
    }
}

impl<C: Rows> Resumable for UnbatchStream<C> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let stage = this.input.stage();
        let splitting = this.current.as_ref().is_some_and(|rows| rows.len() > 0);
        if !splitting {
            // Between two elements (or, after a restore, before the one handed back).
            let state = State::new(stage).words([this.index, this.skip_rows]);
            return this
                .input
                .save(state, std::iter::empty(), || Some(Vec::new()));
        }
        let state = State::new(stage).words([this.index - 1, this.rows]);
        let (at, elem) = (this.input.index(), this.elem.clone());
        this.input
            .save(state, std::iter::once(at), || elem.map(|e| vec![e]))
    }

    /// The element's position and the row's index in it.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        let stage = self.input.stage();
        let elem = self.elem.as_ref().ok_or_else(|| {
            unsupported(
                stage,
                "the position of the element being split was not recorded",
            )
        })?;
        // An error passed on in the element's place (no row was split): no row.
        let row = self
            .rows
            .checked_sub(1)
            .map_or_else(Prov::no_inner, Prov::at);
        elem.clone().keyed(&row)
    }
}
