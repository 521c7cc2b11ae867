//! Saved state: `sample_from_datasets`: `[seed, the random generator's word position (low,
//! high), the input picked for the next element + 1 (0: none), then a 0/1 per input: 1 once
//! it has ended]` and each input's state (`inputs[i]`); `choose_from_datasets`: `[the input
//! chosen for the next element + 1, then the same 0/1 per input]`, the choices' state
//! (`inputs[0]`) and each input's (`inputs[1 + i]`).

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Counting, Ctx, Dataset};
use crate::engine::{Opaque, Resumable, Routed, unsupported};
use crate::hash::mix64;

/// The state saved for an input that has ended.
const ENDED: &str = "(ended)";

fn merged<T: Send + 'static>(datasets: &[Dataset<T>]) -> (crate::Options, u64) {
    let options = datasets
        .iter()
        .fold(crate::Options::default(), |o, d| o.merge(d.options()));
    (
        options,
        datasets.iter().map(Dataset::depth).max().unwrap_or(0) + 1,
    )
}

/// The inputs of a selecting stage; `None` once an input has ended.
struct Inputs<T> {
    streams: Vec<Option<BoxStream<T>>>,
    stop_on_empty_dataset: bool,
    /// The input the last element came from.
    last: usize,
    /// In replay: the elements at saved positions, each naming its input.
    replay: Option<Routed<T>>,
    /// The inputs' answers (whether or not they have ended).
    small: bool,
    resumable: bool,
    /// A restore that failed: yielded first, then the stage ends.
    failed: Option<anyhow::Error>,
}

impl<T: Send + 'static> Inputs<T> {
    /// The inputs of one epoch: `first` of the saved state's inputs are not these (a
    /// choose's choices), and `flags` (the ended ones) start at word `flag_at`.
    fn build(
        ctx: &Ctx,
        datasets: &[Dataset<T>],
        stop_on_empty_dataset: bool,
        first: usize,
        flag_at: usize,
        stage: &'static str,
    ) -> anyhow::Result<Self> {
        let mut inputs = Inputs {
            streams: Vec::with_capacity(datasets.len()),
            stop_on_empty_dataset,
            last: 0,
            replay: None,
            small: datasets.iter().all(Dataset::is_small),
            resumable: datasets.iter().all(Dataset::is_resumable),
            failed: None,
        };
        if let Some(provs) = ctx.replaying() {
            let routed = Routed::new(provs, datasets.len(), stage, |i, list| {
                datasets[i].build(&ctx.for_input(first + i).with_replay(list))
            })?;
            inputs.replay = Some(routed);
            return Ok(inputs);
        }
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

    /// No input: the stage yields `e` and ends.
    fn failed(e: anyhow::Error) -> Self {
        Inputs {
            streams: Vec::new(),
            stop_on_empty_dataset: true,
            last: 0,
            replay: None,
            small: true,
            resumable: false,
            failed: Some(e),
        }
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
        if let Some(replay) = &self.replay {
            return replay.last_prov();
        }
        let input = self.streams.get(self.last).and_then(Option::as_ref);
        let input = input.ok_or_else(|| unsupported(stage, "no element yielded yet"))?;
        input.last_prov()?.keyed(&Prov::at(self.last as u64))
    }
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
        0 => {
            return Dataset::stage_resumable(
                SAMPLE,
                Cardinality::Finite(0),
                crate::Options::default(),
                0,
                Counting::Wrapped,
                |_| Empty(std::marker::PhantomData),
            );
        }
        1 => return datasets.remove(0),
        _ => {}
    }
    let (options, depth) = merged(&datasets);
    let fallback: u64 = rand::random();
    let mut ds = Dataset::stage_resumable(
        SAMPLE,
        Cardinality::Unknown,
        options,
        depth,
        Counting::Wrapped,
        {
            let (datasets, weights) = (datasets.clone(), weights.clone());
            let small = datasets.iter().all(Dataset::is_small);
            move |ctx| {
                let ctx = &ctx.for_merged(small);
                let built = (|| {
                    let inputs =
                        Inputs::build(ctx, &datasets, stop_on_empty_dataset, 0, 4, SAMPLE)?;
                    let (base, pos, chosen) = match ctx.restoring() {
                        Some(state) if ctx.replaying().is_none() => {
                            let pos =
                                u128::from(state.word(1)?) | (u128::from(state.word(2)?) << 64);
                            (state.word(0)?, pos, state.word(3)?.checked_sub(1))
                        }
                        _ => (ctx.seed_for(seed, depth, fallback), 0, None),
                    };
                    // The same draws in every epoch, as tf.data's default
                    // (`rerandomize_each_iteration=False`).
                    let mut rng = ChaCha8Rng::seed_from_u64(mix64(base));
                    rng.set_word_pos(pos);
                    Ok(Sample {
                        inputs,
                        weights: weights.clone(),
                        rng,
                        base,
                        chosen: chosen.map(|c| c as usize),
                    })
                })();
                built.unwrap_or_else(|e: anyhow::Error| Sample::failed(e))
            }
        },
    )
    .keyed(seed.map_or(0, mix64) ^ u64::from(stop_on_empty_dataset))
    .resumable(datasets.iter().all(Dataset::is_resumable))
    .small(datasets.iter().all(Dataset::is_small));
    for (d, w) in datasets.iter().zip(&weights) {
        ds = ds.keyed(d.fingerprint()).keyed(w.to_bits());
    }
    ds
}

const SAMPLE: &str = "sample_from_datasets";
const CHOOSE: &str = "choose_from_datasets";

/// Stream for the [`sample_from_datasets`](crate::Dataset::sample_from_datasets) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Sample<T> {
    inputs: Inputs<T>,
    weights: Vec<f64>,
    rng: ChaCha8Rng,
    /// The seed the generator was made from (saved by checkpoints).
    base: u64,
    /// The input picked for the next element (kept while it is pending).
    chosen: Option<usize>,
}

impl<T: Send + 'static> Sample<T> {
    /// A stream that yields `e` and ends (a restore that failed).
    fn failed(e: anyhow::Error) -> Self {
        Sample {
            inputs: Inputs::failed(e),
            weights: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(0),
            base: 0,
            chosen: None,
        }
    }
}

impl<T> Sample<T> {
    fn pick(&mut self) -> Option<usize> {
        let total: f64 = self
            .inputs
            .streams
            .iter()
            .zip(&self.weights)
            .filter(|(s, _)| s.is_some())
            .map(|(_, w)| w)
            .sum();
        if total <= 0.0 {
            return None;
        }
        let mut r = self.rng.random::<f64>() * total;
        let mut last = None;
        for (i, (s, w)) in self.inputs.streams.iter().zip(&self.weights).enumerate() {
            if s.is_none() {
                continue;
            }
            last = Some(i);
            if r < *w {
                return Some(i);
            }
            r -= w;
        }
        last
    }
}

impl<T> Stream for Sample<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(e) = this.inputs.failed.take() {
            return Poll::Ready(Some(Err(e)));
        }
        if let Some(replay) = this.inputs.replay.as_mut() {
            return replay.poll_next_unpin(cx);
        }
        loop {
            let i = match this.chosen {
                Some(i) => i,
                None => match this.pick() {
                    Some(i) => *this.chosen.insert(i),
                    None => return Poll::Ready(None),
                },
            };
            let polled = ready!(this.inputs.poll_input(i, cx));
            this.chosen = None;
            match polled {
                Polled::Item(item) => return Poll::Ready(Some(item)),
                Polled::Ended { stop: true } => return Poll::Ready(None),
                Polled::Ended { stop: false } => {}
            }
        }
    }
}

impl<T: Send + 'static> Resumable for Sample<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        if this.inputs.replay.is_some() {
            return Err(unsupported(
                SAMPLE,
                "a stream replaying saved positions is not saved",
            ));
        }
        let pos = this.rng.get_word_pos();
        let state = State::new(SAMPLE).words([
            this.base,
            pos as u64,
            (pos >> 64) as u64,
            this.chosen.map_or(0, |c| c as u64 + 1),
        ]);
        this.inputs.save(state)
    }

    /// The input's position, with the input's index.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.inputs.last_prov(SAMPLE)
    }

    fn is_small(&self) -> bool {
        self.inputs.small
    }

    fn resumable(&self) -> bool {
        self.inputs.resumable
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
    let (options, depth) = merged(&datasets);
    let options = options.merge(choices.options());
    let resumable = choices.is_resumable() && datasets.iter().all(Dataset::is_resumable);
    let small = choices.is_small() && datasets.iter().all(Dataset::is_small);
    let mut ds = Dataset::stage_resumable(
        CHOOSE,
        Cardinality::Unknown,
        options,
        depth.max(choices.depth() + 1),
        Counting::Wrapped,
        {
            let (datasets, choices) = (datasets.clone(), choices.clone());
            move |ctx| {
                let ctx = &ctx.for_merged(small);
                let built = (|| {
                    let inputs =
                        Inputs::build(ctx, &datasets, stop_on_empty_dataset, 1, 1, CHOOSE)?;
                    let chosen = match ctx.restoring() {
                        Some(state) if ctx.replaying().is_none() => state.word(0)?.checked_sub(1),
                        _ => None,
                    };
                    // In replay the positions name the inputs: the choices are not read.
                    let choices = match ctx.replaying() {
                        Some(_) => Box::pin(Opaque::new(futures::stream::empty(), CHOOSE)),
                        None => choices.build(&ctx.for_input(0)),
                    };
                    Ok(Choose {
                        choices: choices.fuse(),
                        inputs,
                        chosen: chosen.map(|c| c as usize),
                    })
                })();
                built.unwrap_or_else(|e: anyhow::Error| Choose {
                    choices: (Box::pin(Opaque::new(futures::stream::empty(), CHOOSE))
                        as BoxStream<i64>)
                        .fuse(),
                    inputs: Inputs::failed(e),
                    chosen: None,
                })
            }
        },
    )
    .keyed(choices.fingerprint() ^ u64::from(stop_on_empty_dataset))
    .resumable(resumable)
    .small(small);
    for d in &datasets {
        ds = ds.keyed(d.fingerprint());
    }
    ds
}

/// Stream for the [`choose_from_datasets`](crate::Dataset::choose_from_datasets) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Choose<T> {
    choices: Fuse<BoxStream<i64>>,
    inputs: Inputs<T>,
    chosen: Option<usize>,
}

impl<T> Stream for Choose<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(e) = this.inputs.failed.take() {
            return Poll::Ready(Some(Err(e)));
        }
        if let Some(replay) = this.inputs.replay.as_mut() {
            return replay.poll_next_unpin(cx);
        }
        loop {
            if this.inputs.streams.iter().all(Option::is_none) {
                return Poll::Ready(None);
            }
            let i = match this.chosen {
                Some(i) => i,
                None => match ready!(this.choices.poll_next_unpin(cx)) {
                    Some(Ok(c)) => match usize::try_from(c)
                        .ok()
                        .filter(|c| *c < this.inputs.streams.len())
                    {
                        Some(c) => *this.chosen.insert(c),
                        None => {
                            let n = this.inputs.streams.len();
                            return Poll::Ready(Some(Err(crate::Error::InvalidArgument(format!(
                                "choose_from_datasets: Selector index out of range: {c} >= {n}"
                            ))
                            .into())));
                        }
                    },
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => return Poll::Ready(None),
                },
            };
            let polled = ready!(this.inputs.poll_input(i, cx));
            this.chosen = None;
            match polled {
                Polled::Item(item) => return Poll::Ready(Some(item)),
                Polled::Ended { stop: true } => return Poll::Ready(None),
                Polled::Ended { stop: false } => {}
            }
        }
    }
}

impl<T: Send + 'static> Resumable for Choose<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        if this.inputs.replay.is_some() {
            return Err(unsupported(
                CHOOSE,
                "a stream replaying saved positions is not saved",
            ));
        }
        let state = State::new(CHOOSE)
            .words([this.chosen.map_or(0, |c| c as u64 + 1)])
            .input(this.choices.get_mut().as_mut().save()?);
        this.inputs.save(state)
    }

    /// The input's position, with the input's index.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.inputs.last_prov(CHOOSE)
    }

    fn is_small(&self) -> bool {
        self.inputs.small && self.choices.get_ref().is_small()
    }

    fn resumable(&self) -> bool {
        self.inputs.resumable && self.choices.get_ref().resumable()
    }
}

/// Stream for a `sample_from_datasets` whose weights are all zero: no element.
#[must_use = "streams do nothing unless polled"]
struct Empty<T>(std::marker::PhantomData<fn() -> T>);

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
