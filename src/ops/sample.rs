//! Saved state: `sample_from_datasets`: `[seed, the random generator's word position (low,
//! high), the input picked for the next element + 1 (0: none), then a 0/1 per input: 1 once
//! it has ended]` and each input's state (`inputs[i]`); `choose_from_datasets`: `[the input
//! chosen for the next element + 1, then the same 0/1 per input]`, the choices' state
//! (`inputs[0]`) and each input's (`inputs[1 + i]`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::checkpoint::{Prov, State};
use std::hash::{Hash, Hasher};

use crate::engine::{Beside, BoxStream, Cardinality, Combine, Ctx, Dataset, Start};
use crate::engine::{Inputs as Combined, Replay, Resumable, Routed, Unkeyed};
use crate::engine::{replayed, unsupported};
use crate::hash::mix64;

/// The state saved for an input that has ended.
const ENDED: &str = "(ended)";

/// The inputs of a selecting stage; `None` once an input has ended.
pub(crate) struct Inputs<T> {
    streams: Vec<Option<BoxStream<T>>>,
    stop_on_empty_dataset: bool,
    /// The input the last element came from.
    last: usize,
}

impl<T: Send + 'static> Inputs<T> {
    /// The inputs of one epoch: `first` of the saved state's inputs are not these (a
    /// choose's choices), and `flags` (the ended ones) start at word `flag_at`.
    pub(crate) fn build(
        ctx: &Ctx,
        datasets: &[Dataset<T>],
        stop_on_empty_dataset: bool,
        first: usize,
        flag_at: usize,
    ) -> anyhow::Result<Self> {
        let mut inputs = Inputs {
            streams: Vec::with_capacity(datasets.len()),
            stop_on_empty_dataset,
            last: 0,
        };
        for (i, d) in datasets.iter().enumerate() {
            let ended = match ctx.restoring() {
                Some(state) => state.word(flag_at + i)? == 1,
                None => false,
            };
            inputs
                .streams
                .push((!ended).then(|| d.build(&ctx.for_input(first + i))));
        }
        Ok(inputs)
    }

    /// The 0/1 per input (1: ended) and the inputs' states.
    fn save(&mut self, mut state: State) -> anyhow::Result<State> {
        state = state.words(self.streams.iter().map(|s| u64::from(s.is_none())));
        for stream in &mut self.streams {
            state = state.input(match stream {
                Some(stream) => stream.as_mut().save()?,
                None => State::new(ENDED),
            });
        }
        Ok(state)
    }

    /// The position of the last element, with its input's index.
    fn last_prov(&self, stage: &'static str) -> anyhow::Result<Prov> {
        let input = self.streams.get(self.last).and_then(Option::as_ref);
        let input = input.ok_or_else(|| unsupported(stage, "no element yielded yet"))?;
        input.last_prov()?.keyed(&Prov::at(self.last as u64))
    }
}

/// A selecting stage in replay (`first` of its saved state's inputs are not `datasets`): the
/// elements at the saved positions, each naming its input (what picked them is not read).
pub(crate) fn replay_selecting<T: Send + 'static>(
    ctx: &Ctx,
    datasets: &[Dataset<T>],
    first: usize,
    stage: &'static str,
    provs: &Arc<[Prov]>,
) -> Replay<T> {
    replayed(Routed::new(provs, datasets.len(), stage, |i, list| {
        datasets[i].build(&ctx.for_input(first + i).with_replay(list))
    }))
}

/// What polling the chosen input gave.
enum Polled<T> {
    Item(anyhow::Result<T>),
    /// The chosen input has ended (now or before); `stop`: so has the whole stage.
    Ended {
        stop: bool,
    },
}

impl<T> Inputs<T> {
    fn poll_input(&mut self, i: usize, cx: &mut Context<'_>) -> Poll<Polled<T>> {
        if let Some(input) = self.streams[i].as_mut() {
            if let Some(item) = ready!(input.as_mut().poll_next(cx)) {
                self.last = i;
                return Poll::Ready(Polled::Item(item));
            }
            self.streams[i] = None;
        }
        let stop = self.stop_on_empty_dataset || self.streams.iter().all(Option::is_none);
        if stop {
            self.streams.iter_mut().for_each(|s| *s = None);
        }
        Poll::Ready(Polled::Ended { stop })
    }
}

pub(crate) fn sample_from_datasets<T: Send + 'static>(
    datasets: Vec<Dataset<T>>,
    weights: Option<Vec<f64>>,
    seed: Option<u64>,
    stop_on_empty_dataset: bool,
) -> Dataset<T> {
    assert!(
        !datasets.is_empty(),
        "sample_from_datasets: Invalid `datasets`. `datasets` should not be empty."
    );
    let weights = weights.unwrap_or_else(|| vec![1.0; datasets.len()]);
    assert!(
        weights.len() == datasets.len(),
        "sample_from_datasets: Invalid `weights`. `weights` should have the same length as \
         `datasets` but got `len(weights)={}` vs. `len(datasets)={}`.",
        weights.len(),
        datasets.len()
    );
    assert!(
        weights.iter().all(|w| !w.is_infinite()),
        "sample_from_datasets: weights must be finite"
    );
    // Like tf.data: inputs whose weight is not positive can never be chosen, so drop them now
    // (with one left, the stage is that input; with none, it is empty).
    let (mut datasets, weights): (Vec<_>, Vec<_>) = datasets
        .into_iter()
        .zip(weights)
        .filter(|(_, w)| *w > 0.0)
        .unzip();
    match datasets.len() {
        0 => return Dataset::from_source(Empty(std::marker::PhantomData)),
        1 => return datasets.remove(0),
        _ => {}
    }
    let fallback = Unkeyed(rand::random());
    let op = SampleFrom {
        weights,
        seed,
        stop_on_empty_dataset,
        fallback,
    };
    Dataset::combine(datasets, op)
}

/// The [`sample_from_datasets`](crate::Dataset::sample_from_datasets) operation, over the
/// inputs whose weight is positive.
pub(crate) struct SampleFrom {
    weights: Vec<f64>,
    seed: Option<u64>,
    stop_on_empty_dataset: bool,
    /// The seed drawn when the recipe was made, for an unseeded run ([`Ctx::seed_for`]).
    fallback: Unkeyed<u64>,
}

impl Hash for SampleFrom {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let SampleFrom {
            weights,
            seed,
            stop_on_empty_dataset,
            fallback: _,
        } = self;
        weights.iter().for_each(|w| w.to_bits().hash(h));
        (seed, stop_on_empty_dataset).hash(h);
    }
}

impl<T: Send + 'static> Combine<T> for SampleFrom {
    type Out = T;
    type Stream = Select<T, Draw>;
    const NAME: &'static str = SAMPLE;

    fn cardinality(&self, _: &[Cardinality]) -> Cardinality {
        Cardinality::Unknown
    }

    fn open(
        &self,
        ctx: &Ctx,
        inputs: Combined<'_, T>,
        _: Start<'_>,
    ) -> anyhow::Result<Self::Stream> {
        let ctx = &ctx.for_merged(inputs.small());
        let selected = Inputs::build(ctx, inputs.all(), self.stop_on_empty_dataset, 0, 4)?;
        let state = ctx.restoring();
        let chosen = state
            .map(|s| s.word(3))
            .transpose()?
            .and_then(|c| c.checked_sub(1));
        let base = ctx.seed_for(self.seed, inputs.depth(), *self.fallback);
        let draw = Draw {
            weights: self.weights.clone(),
            generator: Generator::new(base, state)?,
        };
        Ok(Select::new(selected, draw, chosen))
    }

    fn replay(&self, ctx: &Ctx, inputs: Combined<'_, T>, provs: &Arc<[Prov]>) -> Replay<T> {
        let ctx = &ctx.for_merged(inputs.small());
        replay_selecting(ctx, inputs.all(), 0, SAMPLE, provs)
    }
}

const SAMPLE: &str = "sample_from_datasets";
const CHOOSE: &str = "choose_from_datasets";

/// How a selecting stage picks the input of its next element: [`Draw`] or [`Choices`].
pub(crate) trait Pick {
    const STAGE: &'static str;

    /// The input of the next element, given which inputs are still open (`Some`); `None`
    /// when the stage ends.
    fn poll_pick<T>(
        &mut self,
        open: &[Option<BoxStream<T>>],
        cx: &mut Context<'_>,
    ) -> Poll<Option<anyhow::Result<usize>>>;

    /// Its words and inputs, first in the stage's saved state.
    fn save(&mut self, state: State) -> anyhow::Result<State>;

    /// An element of the picked input was passed on, counting for `n` steps.
    fn taken(&mut self, n: u64) {
        let _ = n;
    }
}

/// The generator a drawing stage picks its inputs with (`sample_from_datasets`, `mix`): a
/// ChaCha stream seeded by `base`, the same draws every epoch (tf.data's default,
/// `rerandomize_each_iteration=False`). Saved as `[base, word position (low, high)]`.
pub(crate) struct Generator {
    rng: ChaCha8Rng,
    base: u64,
}

impl Generator {
    /// Fresh from `base`, or where `state`'s first three words left it.
    pub(crate) fn new(base: u64, state: Option<&State>) -> anyhow::Result<Generator> {
        let (base, pos) = match state {
            Some(state) => {
                let pos = u128::from(state.word(1)?) | (u128::from(state.word(2)?) << 64);
                (state.word(0)?, pos)
            }
            None => (base, 0),
        };
        let mut rng = ChaCha8Rng::seed_from_u64(mix64(base));
        rng.set_word_pos(pos);
        Ok(Generator { rng, base })
    }

    pub(crate) fn words(&self) -> [u64; 3] {
        let pos = self.rng.get_word_pos();
        [self.base, pos as u64, (pos >> 64) as u64]
    }

    /// An input drawn by `weights` among those still open (`Some`) whose weight is
    /// positive; `None` when they weigh nothing together.
    pub(crate) fn draw<T>(
        &mut self,
        open: &[Option<BoxStream<T>>],
        weights: &[f64],
    ) -> Option<usize> {
        let live = || {
            open.iter()
                .zip(weights)
                .enumerate()
                .filter(|(_, (s, w))| s.is_some() && **w > 0.0)
                .map(|(i, (_, &w))| (i, w))
        };
        let total: f64 = live().map(|(_, w)| w).sum();
        if total <= 0.0 {
            return None;
        }
        let mut r = self.rng.random::<f64>() * total;
        let mut last = None;
        for (i, w) in live() {
            last = Some(i);
            if r < w {
                break;
            }
            r -= w;
        }
        last
    }
}

/// `sample_from_datasets`' pick: drawn at random, by weight among the inputs still open.
/// Saved words: the generator's.
pub(crate) struct Draw {
    weights: Vec<f64>,
    generator: Generator,
}

impl Pick for Draw {
    const STAGE: &'static str = SAMPLE;

    fn poll_pick<T>(
        &mut self,
        open: &[Option<BoxStream<T>>],
        _: &mut Context<'_>,
    ) -> Poll<Option<anyhow::Result<usize>>> {
        Poll::Ready(self.generator.draw(open, &self.weights).map(Ok))
    }

    fn save(&mut self, state: State) -> anyhow::Result<State> {
        Ok(state.words(self.generator.words()))
    }
}

/// `choose_from_datasets`' pick: read from a dataset of indices (saved as the stage's first
/// input).
pub(crate) struct Choices {
    choices: Fuse<BoxStream<i64>>,
}

impl Pick for Choices {
    const STAGE: &'static str = CHOOSE;

    fn poll_pick<T>(
        &mut self,
        open: &[Option<BoxStream<T>>],
        cx: &mut Context<'_>,
    ) -> Poll<Option<anyhow::Result<usize>>> {
        if open.iter().all(Option::is_none) {
            return Poll::Ready(None);
        }
        let Some(c) = ready!(self.choices.poll_next_unpin(cx)) else {
            return Poll::Ready(None);
        };
        Poll::Ready(Some(c.and_then(|c| {
            usize::try_from(c)
                .ok()
                .filter(|c| *c < open.len())
                .ok_or_else(|| {
                    let n = open.len();
                    crate::Error::InvalidArgument(format!(
                        "choose_from_datasets: Selector index out of range: {c} >= {n}"
                    ))
                    .into()
                })
        })))
    }

    fn save(&mut self, state: State) -> anyhow::Result<State> {
        Ok(state.input(self.choices.get_mut().as_mut().save()?))
    }
}

/// Stream for the [`sample_from_datasets`](crate::Dataset::sample_from_datasets) and
/// [`choose_from_datasets`](crate::Dataset::choose_from_datasets) methods: each element from
/// the input `P` picks (an ended input is picked again, unless it stops the stage).
///
/// Saved state: the pick's words and inputs, `[the input picked for the next element + 1 (0:
/// none)]`, then the inputs' (see [`Inputs::save`]).
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Select<T, P> {
    inputs: Inputs<T>,
    pick: P,
    /// The input picked for the next element (kept while it is pending).
    chosen: Option<usize>,
    /// How many steps an element counts for (`mix_over_tokens`: its tokens); one when unset.
    count: Option<Count<T>>,
}

/// How many steps of a mixture's schedule an element counts for.
pub(crate) type Count<T> = std::sync::Arc<dyn Fn(&T) -> u64 + Send + Sync>;

impl<T: Send + 'static, P> Select<T, P> {
    pub(crate) fn new(inputs: Inputs<T>, pick: P, chosen: Option<u64>) -> Self {
        Select {
            inputs,
            pick,
            chosen: chosen.map(|c| c as usize),
            count: None,
        }
    }

    /// Each element counts for `count(element)` steps (an error for none).
    pub(crate) fn counting(mut self, count: Option<Count<T>>) -> Self {
        self.count = count;
        self
    }
}

impl<T, P> Unpin for Select<T, P> {}

impl<T: Send + 'static, P: Pick> Stream for Select<T, P> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let i = match this.chosen {
                Some(i) => i,
                None => match ready!(this.pick.poll_pick(&this.inputs.streams, cx)) {
                    Some(Ok(i)) => *this.chosen.insert(i),
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => return Poll::Ready(None),
                },
            };
            let polled = ready!(this.inputs.poll_input(i, cx));
            this.chosen = None;
            match polled {
                Polled::Item(item) => {
                    let n = match (&this.count, &item) {
                        (None, _) => 1,
                        (Some(count), Ok(x)) => count(x),
                        (Some(_), Err(_)) => 0,
                    };
                    this.pick.taken(n);
                    return Poll::Ready(Some(item));
                }
                Polled::Ended { stop: true } => return Poll::Ready(None),
                Polled::Ended { stop: false } => {}
            }
        }
    }
}

impl<T: Send + 'static, P: Pick> Resumable for Select<T, P> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let state = this.pick.save(State::new(P::STAGE))?;
        let state = state.words([this.chosen.map_or(0, |c| c as u64 + 1)]);
        this.inputs.save(state)
    }

    /// The input's position, with the input's index.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.inputs.last_prov(P::STAGE)
    }
}

pub(crate) fn choose_from_datasets<T: Send + 'static>(
    datasets: Vec<Dataset<T>>,
    choices: Dataset<i64>,
    stop_on_empty_dataset: bool,
) -> Dataset<T> {
    assert!(
        !datasets.is_empty(),
        "choose_from_datasets: Invalid `datasets`. `datasets` should not be empty."
    );
    let op = ChooseFrom {
        choices,
        stop_on_empty_dataset,
    };
    Dataset::combine(datasets, op)
}

/// The [`choose_from_datasets`](crate::Dataset::choose_from_datasets) operation: its
/// choices are read beside its inputs (keyed by their fingerprint).
pub(crate) struct ChooseFrom {
    choices: Dataset<i64>,
    stop_on_empty_dataset: bool,
}

impl Hash for ChooseFrom {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let ChooseFrom {
            choices,
            stop_on_empty_dataset,
        } = self;
        (choices.fingerprint(), stop_on_empty_dataset).hash(h);
    }
}

impl<T: Send + 'static> Combine<T> for ChooseFrom {
    type Out = T;
    type Stream = Select<T, Choices>;
    const NAME: &'static str = CHOOSE;

    fn cardinality(&self, _: &[Cardinality]) -> Cardinality {
        Cardinality::Unknown
    }

    fn beside(&self) -> Option<Beside> {
        Some(Beside::of(&self.choices))
    }

    fn open(
        &self,
        ctx: &Ctx,
        inputs: Combined<'_, T>,
        _: Start<'_>,
    ) -> anyhow::Result<Self::Stream> {
        let ctx = &ctx.for_merged(inputs.small() && self.choices.is_small());
        let selected = Inputs::build(ctx, inputs.all(), self.stop_on_empty_dataset, 1, 1)?;
        let chosen = match ctx.restoring() {
            Some(state) => state.word(0)?.checked_sub(1),
            None => None,
        };
        let choices = self.choices.build(&ctx.for_input(0)).fuse();
        Ok(Select::new(selected, Choices { choices }, chosen))
    }

    /// The positions name the inputs: the choices are not read.
    fn replay(&self, ctx: &Ctx, inputs: Combined<'_, T>, provs: &Arc<[Prov]>) -> Replay<T> {
        let ctx = &ctx.for_merged(inputs.small() && self.choices.is_small());
        replay_selecting(ctx, inputs.all(), 1, CHOOSE, provs)
    }
}

/// Stream for a `sample_from_datasets` whose weights are all zero: no element.
#[must_use = "streams do nothing unless polled"]
struct Empty<T>(std::marker::PhantomData<fn() -> T>);

/// No parameter: its inputs all weighed nothing.
impl<T> Hash for Empty<T> {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

impl<T: Send + 'static> crate::engine::Source for Empty<T> {
    type Out = T;
    type Stream = Empty<T>;
    const NAME: &'static str = SAMPLE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Finite(0)
    }

    fn open(&self, _: &Ctx, _: Start<'_>) -> anyhow::Result<Empty<T>> {
        Ok(Empty(std::marker::PhantomData))
    }
}

impl<T> Stream for Empty<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(None)
    }
}

impl<T> Resumable for Empty<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new(SAMPLE))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        Err(unsupported(SAMPLE, "no element yielded"))
    }
}
