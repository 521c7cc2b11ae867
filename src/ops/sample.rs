use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::dataset::{BoxStream, Cardinality, Dataset, mix64};

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
            return Dataset::source("sample_from_datasets", Cardinality::Finite(0), |_| {
                futures::stream::empty()
            });
        }
        1 => return datasets.remove(0),
        _ => {}
    }
    let (options, depth) = merged(&datasets);
    let fallback: u64 = rand::random();
    Dataset::stage(
        "sample_from_datasets",
        Cardinality::Unknown,
        options,
        depth,
        move |ctx| {
            let rng = ChaCha8Rng::seed_from_u64(mix64(ctx.seed_for(seed, depth, fallback)));
            Box::pin(Sample {
                inputs: Inputs {
                    streams: datasets.iter().map(|d| Some(d.build(ctx))).collect(),
                    stop_on_empty_dataset,
                },
                weights: weights.clone(),
                rng,
                chosen: None,
            })
        },
    )
}

/// Stream for the [`sample_from_datasets`](crate::Dataset::sample_from_datasets) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Sample<T> {
    inputs: Inputs<T>,
    weights: Vec<f64>,
    rng: ChaCha8Rng,
    /// The input picked for the next element (kept while it is pending).
    chosen: Option<usize>,
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
    Dataset::stage(
        "choose_from_datasets",
        Cardinality::Unknown,
        options,
        depth.max(choices.depth() + 1),
        move |ctx| {
            Box::pin(Choose {
                choices: choices.build(ctx).fuse(),
                inputs: Inputs {
                    streams: datasets.iter().map(|d| Some(d.build(ctx))).collect(),
                    stop_on_empty_dataset,
                },
                chosen: None,
            })
        },
    )
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
