//! Saved state: `[index of the element being split, rows of it passed on]`; over a small input
//! the input's state from before that element (it is read and split again after a restore),
//! otherwise its position (`held`) and the input's state now.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Start, error_stream};
use crate::engine::{Resumable, unsupported};
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
    type Stream = UnbatchStream<BoxStream<C>, C>;
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
        Ok(batch::build_with(ctx, &rows, config))
    }
}

/// The unbatch stream of one epoch over `input`: fresh, restored, or replaying saved rows
/// (each position is the element's keyed by the row's index in it: [`Prov::keyed`]).
fn build<C>(ctx: &Ctx, input: &Dataset<C>, stage: &'static str) -> UnbatchStream<BoxStream<C>, C>
where
    C: Rows + Send + 'static,
{
    if let Some(provs) = ctx.replaying() {
        return match RowReplay::new(provs) {
            Ok((replay, elements)) => {
                let elements = input.build(&ctx.for_input(0).with_replay(elements.into()));
                let mut unbatch = UnbatchStream::new(elements, stage, true);
                unbatch.replay = Some(Box::new(replay));
                unbatch
            }
            Err(e) => UnbatchStream::failed(e, stage),
        };
    }
    let Some(state) = ctx.restoring() else {
        return UnbatchStream::new(input.build(ctx), stage, ctx.provenance());
    };
    let (index, rows) = match (state.word(0), state.word(1)) {
        (Ok(index), Ok(rows)) => (index, rows),
        (Err(e), _) | (_, Err(e)) => return UnbatchStream::failed(e, stage),
    };
    let mut unbatch = UnbatchStream::new(input.build(&ctx.for_input(0)), stage, ctx.provenance());
    unbatch.index = index;
    unbatch.skip_rows = rows;
    if !state.held.is_empty() {
        // The element being split at the checkpoint, read again at its position.
        unbatch.front = Some(input.build(&ctx.for_input(0).with_replay(state.held.clone().into())));
    }
    unbatch
}

/// Stream for the [`unbatch`](crate::Dataset::unbatch) method, and the first step of
/// [`rebatch`](crate::Dataset::rebatch): yields the rows of each element, numbering the
/// elements so an error names the one it is about.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct UnbatchStream<St, C: Rows> {
    #[pin]
    input: St,
    current: Option<std::vec::IntoIter<C::Row>>,
    stage: &'static str,
    /// The index of the next input element (error elements are counted too).
    index: u64,
    /// Rows of the current element passed on.
    rows: u64,
    /// Take a mark of the input before each element (it is small and can save its position).
    marking: bool,
    /// The input's state before the next element, and before the current one.
    mark_next: Option<State>,
    mark: Option<State>,
    /// Record the current element's position (the input is not small, or a stage downstream
    /// asked for positions); `elem` is `None` when the input could not say.
    record: bool,
    elem: Option<Prov>,
    /// After a restore: rows of the first element that were passed on before.
    skip_rows: u64,
    /// After a restore over an input that is not small: the element being split at the
    /// checkpoint, read again, before the input.
    front: Option<BoxStream<C>>,
    /// In replay: the rows to make again.
    replay: Option<Box<RowReplay<C::Row>>>,
}

impl<C: Rows + Send + 'static> UnbatchStream<BoxStream<C>, C> {
    /// A stream that yields `e` and ends (a restore that failed).
    pub(crate) fn failed(e: anyhow::Error, stage: &'static str) -> Self {
        UnbatchStream::new(error_stream(e), stage, false)
    }
}

impl<St: Resumable, C: Rows> UnbatchStream<St, C> {
    /// `provenance`: a stage downstream asked for positions.
    pub(crate) fn new(input: St, stage: &'static str, provenance: bool) -> Self {
        let small = input.is_small();
        UnbatchStream {
            marking: small && input.resumable(),
            record: !small || provenance,
            input,
            current: None,
            stage,
            index: 0,
            rows: 0,
            mark_next: None,
            mark: None,
            elem: None,
            skip_rows: 0,
            front: None,
            replay: None,
        }
    }
}

impl<St, C> Stream for UnbatchStream<St, C>
where
    St: Stream<Item = anyhow::Result<C>> + Resumable,
    C: Rows,
{
    type Item = anyhow::Result<C::Row>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        if let Some(replay) = this.replay.as_mut() {
            return replay.poll_next(this.input, cx);
        }
        loop {
            if let Some(x) = this.current.as_mut().and_then(Iterator::next) {
                *this.rows += 1;
                return Poll::Ready(Some(Ok(x)));
            }
            *this.current = None;
            let item = match this.front.as_mut() {
                Some(front) => match ready!(front.as_mut().poll_next(cx)) {
                    Some(item) => {
                        if *this.record {
                            *this.elem = front.last_prov().ok();
                        }
                        *this.front = None;
                        Some(item)
                    }
                    None => {
                        *this.front = None;
                        continue;
                    }
                },
                None => {
                    if *this.marking && this.mark_next.is_none() {
                        // Where the next element starts: restored from here, it is split again.
                        *this.mark_next = this.input.as_mut().save().ok();
                    }
                    let item = ready!(this.input.as_mut().poll_next(cx));
                    *this.mark = this.mark_next.take();
                    if *this.record && item.is_some() {
                        *this.elem = this.input.last_prov().ok();
                    }
                    item
                }
            };
            let index = *this.index;
            *this.index += 1;
            *this.rows = 0;
            match item {
                Some(Ok(c)) => match c.into_rows() {
                    Ok(rows) => {
                        let mut rows = rows.into_iter();
                        // After a restore: the rows passed on before the checkpoint.
                        let skip = std::mem::take(this.skip_rows);
                        for _ in 0..skip {
                            rows.next();
                        }
                        *this.rows = skip;
                        *this.current = Some(rows);
                    }
                    Err(e) => {
                        let stage = *this.stage;
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

impl<St: Resumable, C: Rows> Resumable for UnbatchStream<St, C> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.project();
        let stage = *this.stage;
        if this.replay.is_some() || this.front.is_some() {
            return Err(unsupported(
                stage,
                "a checkpoint before its first row after a restore",
            ));
        }
        let splitting = this.current.as_ref().is_some_and(|rows| rows.len() > 0);
        if !splitting {
            // Between two elements (or before the first after a restore, still to skip
            // `skip_rows` of it).
            return Ok(State::new(stage)
                .words([*this.index, *this.skip_rows])
                .input(this.input.save()?));
        }
        let state = State::new(stage).words([this.index.wrapping_sub(1), *this.rows]);
        if this.input.is_small() {
            let mark = this.mark.clone().ok_or_else(|| {
                unsupported(
                    stage,
                    "its input could not save its position before the element being split",
                )
            })?;
            return Ok(state.input(mark));
        }
        let elem = this.elem.clone().ok_or_else(|| {
            unsupported(stage, "its input cannot say where its elements come from")
        })?;
        Ok(state.held(vec![elem]).input(this.input.save()?))
    }

    /// The element's position and the row's index in it.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        if let Some(replay) = &self.replay {
            return replay.last_prov(self.stage);
        }
        let elem = self.elem.as_ref().ok_or_else(|| {
            unsupported(
                self.stage,
                "the position of the element being split was not recorded",
            )
        })?;
        elem.clone().keyed(&Prov::at(self.rows.wrapping_sub(1)))
    }

    fn is_small(&self) -> bool {
        self.input.is_small()
    }

    fn resumable(&self) -> bool {
        self.input.resumable()
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

    fn poll_next<St, C>(
        &mut self,
        mut input: Pin<&mut St>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<anyhow::Result<R>>>
    where
        St: Stream<Item = anyhow::Result<C>>,
        C: Rows<Row = R>,
    {
        let Some(&(k, row)) = self.route.get(self.next) else {
            return Poll::Ready(None);
        };
        while self.elements.len() <= k {
            let rows = match ready!(input.as_mut().poll_next(cx)) {
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
