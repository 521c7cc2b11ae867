//! Saved state: `[index of the element being split, rows of it passed on]` and the input's
//! [`Hold`](crate::engine::Hold), which holds that element (split again after a restore).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::{
    Answers, BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Start, error_stream,
};
use crate::engine::{Hold, Resumable, unsupported};
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
        Ok(build(ctx, input.dataset(), "unbatch"))
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
    type Stream = batch::BatchStream<C::Row>;
    const NAME: &'static str = "rebatch";

    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Unknown
    }

    /// Saved state: the batch step's (see `batch::build_with`) over the unbatch step's.
    fn open(&self, ctx: &Ctx, input: Input<'_, C>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let dataset = input.dataset();
        let rows = |ctx: &Ctx| -> BoxStream<C::Row> { Box::pin(build(ctx, dataset, "rebatch")) };
        let sizes = match (self.cycling, &self.sizes[..]) {
            (false, &[n]) => Sizes::One(n),
            _ => Sizes::Cycle(self.sizes.as_slice().into()),
        };
        let config = Config {
            sizes,
            drop_remainder: self.drop_remainder,
            stage: "rebatch",
        };
        Ok(batch::build_with(ctx, &rows, dataset.answers(ctx), config))
    }
}

/// The unbatch stream of one epoch over `input`: fresh, restored (the element being split at
/// the checkpoint is handed back by the hold, and the rows passed on before are skipped), or
/// replaying saved rows (each position is the element's keyed by the row's index in it:
/// [`Prov::keyed`]).
fn build<C>(ctx: &Ctx, input: &Dataset<C>, stage: &'static str) -> UnbatchStream<C>
where
    C: Rows + Send + 'static,
{
    if let Some(provs) = ctx.replaying() {
        return match RowReplay::new(provs) {
            Ok((replay, elements)) => {
                let elements = input.build(&ctx.for_input(0).with_replay(elements.into()));
                let mut unbatch = UnbatchStream::new(Hold::new(
                    elements,
                    input.answers(ctx),
                    false,
                    false,
                    stage,
                ));
                unbatch.replay = Some(Box::new(replay));
                unbatch
            }
            Err(e) => UnbatchStream::failed(e, stage),
        };
    }
    let restored = (|| {
        let hold = Hold::open(
            ctx,
            &|ctx| input.build(ctx),
            input.answers(ctx),
            false,
            stage,
            2,
        )?;
        let mut unbatch = UnbatchStream::new(hold);
        if let Some(state) = ctx.restoring() {
            unbatch.index = state.word(0)?;
            unbatch.skip_rows = state.word(1)?;
        }
        Ok(unbatch)
    })();
    restored.unwrap_or_else(|e| UnbatchStream::failed(e, stage))
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
    /// In replay: the rows to make again.
    replay: Option<Box<RowReplay<C::Row>>>,
}

impl<C: Rows> Unpin for UnbatchStream<C> {}

impl<C: Rows + Send + 'static> UnbatchStream<C> {
    /// A stream that yields `e` and ends (a restore that failed).
    pub(crate) fn failed(e: anyhow::Error, stage: &'static str) -> Self {
        UnbatchStream::new(Hold::new(
            error_stream(e),
            Answers::PLAIN,
            false,
            false,
            stage,
        ))
    }

    fn new(input: Hold<C>) -> Self {
        UnbatchStream {
            input,
            current: None,
            index: 0,
            rows: 0,
            elem: None,
            skip_rows: 0,
            replay: None,
        }
    }
}

impl<C: Rows> Stream for UnbatchStream<C> {
    type Item = anyhow::Result<C::Row>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(replay) = this.replay.as_mut() {
            return replay.poll_next(&mut this.input, cx);
        }
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
        if this.replay.is_some() {
            return Err(unsupported(
                stage,
                "a stream replaying saved positions is not saved",
            ));
        }
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
        if let Some(replay) = &self.replay {
            return replay.last_prov(stage);
        }
        let elem = self.elem.as_ref().ok_or_else(|| {
            unsupported(
                stage,
                "the position of the element being split was not recorded",
            )
        })?;
        elem.clone().keyed(&Prov::at(self.rows.wrapping_sub(1)))
    }
}

/// In replay: rows at saved positions. The elements they come from are read again once each
/// (in the order of their first row), and split; each row is taken out when its turn comes.
pub(crate) struct RowReplay<R> {
    provs: Arc<[Prov]>,
    /// For each position: which element (in reading order) and which of its rows.
    route: Vec<(usize, u64)>,
    next: usize,
    /// The elements read again: their rows, or the error an element was (passed on in its
    /// place: row [`ERROR_ROW`]).
    elements: Vec<Result<Vec<Option<R>>, Option<anyhow::Error>>>,
}

/// The row of an error element of the input, passed on in its place (no row was split).
const ERROR_ROW: u64 = u64::MAX;

impl<R> RowReplay<R> {
    /// The replay of `provs`, and the positions of the elements to read again.
    fn new(provs: &Arc<[Prov]>) -> anyhow::Result<(Self, Vec<Prov>)> {
        let mut seen: HashMap<Prov, usize> = HashMap::new();
        let mut elements = Vec::new();
        let mut route = Vec::with_capacity(provs.len());
        for prov in provs.iter() {
            let (row, elem) = prov.split_key()?;
            let row = row.single()?;
            let k = *seen.entry(elem.clone()).or_insert_with(|| {
                elements.push(elem);
                elements.len() - 1
            });
            route.push((k, row));
        }
        let replay = RowReplay {
            provs: Arc::clone(provs),
            route,
            next: 0,
            elements: Vec::new(),
        };
        Ok((replay, elements))
    }

    fn poll_next<C>(
        &mut self,
        input: &mut Hold<C>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<anyhow::Result<R>>>
    where
        C: Rows<Row = R>,
    {
        let Some(&(k, row)) = self.route.get(self.next) else {
            return Poll::Ready(None);
        };
        while self.elements.len() <= k {
            let rows = match ready!(input.poll_next(cx)) {
                Some(Ok(c)) => c.into_rows(),
                Some(Err(e)) => Err(e),
                None => Err(crate::Error::Checkpoint(
                    "an element to split could not be read again".into(),
                )
                .into()),
            };
            match rows {
                Ok(rows) => self.elements.push(Ok(rows.into_iter().map(Some).collect())),
                // An error held at the checkpoint in its element's place: that error again.
                Err(e) if row == ERROR_ROW && !crate::error::is_refusal(&e) => {
                    self.elements.push(Err(Some(e)))
                }
                Err(e) => {
                    self.next = self.route.len();
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
        self.next += 1;
        let x = match &mut self.elements[k] {
            Err(e) if row == ERROR_ROW => {
                if let Some(e) = e.take() {
                    return Poll::Ready(Some(Err(e)));
                }
                None
            }
            Err(_) => None,
            Ok(rows) => rows.get_mut(row as usize).and_then(Option::take),
        };
        Poll::Ready(Some(x.ok_or_else(|| {
            crate::Error::Checkpoint(format!(
                "row {row} of an element read again is missing (or was wanted twice)"
            ))
            .into()
        })))
    }

    fn last_prov(&self, stage: &'static str) -> anyhow::Result<Prov> {
        self.next
            .checked_sub(1)
            .and_then(|i| self.provs.get(i))
            .cloned()
            .ok_or_else(|| unsupported(stage, "no element yielded yet"))
    }
}
