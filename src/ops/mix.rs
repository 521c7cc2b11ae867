//! `mix`: elements drawn from several datasets by weights that follow a schedule over the
//! steps of the epoch (the data mixtures of language-model training: Megatron-LM's blends,
//! MaxText's mixtures with their weights changed during training).
//!
//! Saved state: `[seed, the random generator's word position (low, high), the steps taken
//! (elements passed on, or their tokens for `mix_over_tokens`; `u64::MAX` once it has ended at
//! weights it refused), the input picked for the next element + 1 (0: none), then a 0/1 per
//! input: 1 once it has ended]` and each input's state (`inputs[i]`). The schedule is not in
//! the recipe's fingerprint: a checkpoint resumes under another schedule (the training loop
//! changed the weights), which goes on from the saved step.

use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::task::{Context, Poll};

use super::sample::{Count, Generator, Inputs, Pick, Select, replay_selecting};
use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Combine, Ctx, Inputs as Combined, Replay};
use crate::engine::{Start, Unkeyed};
use crate::error::Error;

const STAGE: &str = "mix";

/// The step saved once the mixture has ended at weights it refused.
const ENDED: u64 = u64::MAX;

/// The weights of [`Dataset::mix`](crate::Dataset::mix)'s inputs at each step (the number of
/// elements passed on so far in the epoch): constant, piecewise, interpolated, or any
/// function of the step. Weights need not sum to 1; an input whose weight is 0 at a step is
/// not drawn then.
///
/// ```
/// use streamload::Mixture;
///
/// let m = Mixture::linear(vec![(0, vec![1.0, 0.0]), (1_000, vec![0.5, 0.5])]);
/// assert_eq!(m.weights(0, 2)?, [1.0, 0.0]);
/// assert_eq!(m.weights(500, 2)?, [0.75, 0.25]);
/// assert_eq!(m.weights(5_000, 2)?, [0.5, 0.5]);
/// # anyhow::Ok::<()>(())
/// ```
#[derive(Clone)]
pub struct Mixture {
    kind: Kind,
    /// The schedule's step at the epoch's step 0 ([`Mixture::starting_at`]).
    start: u64,
}

#[derive(Clone)]
enum Kind {
    Constant(Vec<f64>),
    Piecewise(Vec<(u64, Vec<f64>)>),
    Linear(Vec<(u64, Vec<f64>)>),
    Function(Arc<dyn Fn(u64) -> Vec<f64> + Send + Sync>),
}

impl fmt::Debug for Mixture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Constant(w) => f.debug_tuple("Mixture::constant").field(w).finish(),
            Kind::Piecewise(p) => f.debug_tuple("Mixture::piecewise").field(p).finish(),
            Kind::Linear(p) => f.debug_tuple("Mixture::linear").field(p).finish(),
            Kind::Function(_) => f.write_str("Mixture::from_fn(..)"),
        }?;
        match self.start {
            0 => Ok(()),
            start => write!(f, ".starting_at({start})"),
        }
    }
}

impl Mixture {
    /// The same weights at every step.
    pub fn constant(weights: Vec<f64>) -> Mixture {
        Mixture {
            kind: Kind::Constant(weights),
            start: 0,
        }
    }

    /// `points[k].1` from step `points[k].0` until the next point's step (the first point's
    /// weights before it too). Points are sorted by step.
    pub fn piecewise(mut points: Vec<(u64, Vec<f64>)>) -> Mixture {
        points.sort_by_key(|p| p.0);
        Mixture {
            kind: Kind::Piecewise(points),
            start: 0,
        }
    }

    /// Interpolated linearly between the points' steps (the first point's weights before it,
    /// the last one's after it). Points are sorted by step.
    pub fn linear(mut points: Vec<(u64, Vec<f64>)>) -> Mixture {
        points.sort_by_key(|p| p.0);
        Mixture {
            kind: Kind::Linear(points),
            start: 0,
        }
    }

    /// The weights `f(step)` gives.
    pub fn from_fn(f: impl Fn(u64) -> Vec<f64> + Send + Sync + 'static) -> Mixture {
        Mixture {
            kind: Kind::Function(Arc::new(f)),
            start: 0,
        }
    }

    /// This schedule from its step `step` on: the epoch's step 0 is its step `step`. For an
    /// elastic resume, which starts each rank's mixture afresh on the rest of the epoch
    /// ([`ShardPlan::resume`](crate::distribute::ShardPlan::resume) for each source): the
    /// schedule goes on from the steps already taken rather than from its start.
    ///
    /// ```
    /// use streamload::Mixture;
    ///
    /// let m = Mixture::piecewise(vec![(0, vec![1.0, 0.0]), (100, vec![0.0, 1.0])]);
    /// assert_eq!(m.clone().starting_at(60).weights(40, 2)?, [0.0, 1.0]);
    /// # anyhow::Ok::<()>(())
    /// ```
    pub fn starting_at(mut self, step: u64) -> Mixture {
        self.start = step;
        self
    }

    /// The weights of `n` inputs at `step` (of the epoch: the schedule's step `step` after
    /// [`starting_at`](Mixture::starting_at)'s), or why they are not weights for them (another
    /// count, a negative or non-finite weight, no points).
    pub fn weights(&self, step: u64, n: usize) -> anyhow::Result<Vec<f64>> {
        self.weights_at(step, n).map(Cow::into_owned)
    }

    /// [`weights`](Mixture::weights), borrowed where the schedule holds them (constant and
    /// piecewise: no allocation per draw).
    fn weights_at(&self, step: u64, n: usize) -> anyhow::Result<Cow<'_, [f64]>> {
        let step = step.saturating_add(self.start);
        let before = |points: &[(u64, Vec<f64>)]| points.partition_point(|p| p.0 <= step);
        let weights: Cow<'_, [f64]> = match &self.kind {
            Kind::Constant(w) => Cow::Borrowed(w),
            Kind::Piecewise(points) => match points.get(before(points).saturating_sub(1)) {
                Some((_, w)) => Cow::Borrowed(w),
                None => Cow::Borrowed(&[]),
            },
            Kind::Linear(points) => {
                let k = before(points);
                match (k.checked_sub(1).and_then(|i| points.get(i)), points.get(k)) {
                    (Some((s0, w0)), Some((s1, w1))) if w0.len() == w1.len() => {
                        let t = (step - s0) as f64 / (s1 - s0) as f64;
                        Cow::Owned(w0.iter().zip(w1).map(|(a, b)| a + (b - a) * t).collect())
                    }
                    (Some((_, w)), _) | (None, Some((_, w))) => Cow::Borrowed(w),
                    (None, None) => Cow::Borrowed(&[]),
                }
            }
            Kind::Function(f) => Cow::Owned(f(step)),
        };
        let bad = |why: String| {
            Error::InvalidArgument(format!(
                "{STAGE}: the mixture's weights at step {step} {why}"
            ))
        };
        if weights.len() != n {
            let got = weights.len();
            return Err(bad(format!("are {got}, for {n} datasets")).into());
        }
        if let Some(w) = weights.iter().find(|w| !w.is_finite() || **w < 0.0) {
            return Err(bad(format!("hold {w} (a weight is finite and not negative)")).into());
        }
        Ok(weights)
    }
}

/// The [`mix`](crate::Dataset::mix) operation (and
/// [`mix_over_tokens`](crate::Dataset::mix_over_tokens): `count` says how many steps an
/// element counts for).
pub(crate) struct Mix<T> {
    pub(crate) mixture: Unkeyed<Mixture>,
    pub(crate) count: Unkeyed<Option<Count<T>>>,
    pub(crate) seed: Option<u64>,
    /// The seed drawn when the recipe was made, for an unseeded run ([`Ctx::seed_for`]).
    pub(crate) fallback: Unkeyed<u64>,
}

impl<T> Hash for Mix<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let Mix {
            mixture: _,
            count,
            seed,
            fallback: _,
        } = self;
        // Steps counted in elements or in tokens: another schedule's axis.
        (seed, count.is_some()).hash(h);
    }
}

impl<T: Send + 'static> Combine<T> for Mix<T> {
    type Out = T;
    type Stream = Select<T, Scheduled>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, inputs: &[Cardinality]) -> Cardinality {
        if inputs.contains(&Cardinality::Infinite) {
            Cardinality::Infinite
        } else {
            Cardinality::Unknown
        }
    }

    fn open(
        &self,
        ctx: &Ctx,
        inputs: Combined<'_, T>,
        _: Start<'_>,
    ) -> anyhow::Result<Self::Stream> {
        let ctx = &ctx.for_merged(inputs.small());
        let selected = Inputs::build(ctx, inputs.all(), false, 0, 5)?;
        let state = ctx.restoring();
        let (step, chosen) = match state {
            Some(state) => (state.word(3)?, state.word(4)?.checked_sub(1)),
            None => (0, None),
        };
        let base = ctx.seed_for(self.seed, inputs.depth(), *self.fallback);
        let pick = Scheduled {
            mixture: self.mixture.0.clone(),
            generator: Generator::new(base, state)?,
            // A mixture that ended at refused weights saves its step as `ENDED`: resumed, it
            // stays ended (its error is not passed on again).
            step: if step == ENDED { 0 } else { step },
            failed: step == ENDED,
        };
        Ok(Select::new(selected, pick, chosen).counting(self.count.0.clone()))
    }

    fn replay(&self, ctx: &Ctx, inputs: Combined<'_, T>, provs: &Arc<[Prov]>) -> Replay<T> {
        let ctx = &ctx.for_merged(inputs.small());
        replay_selecting(ctx, inputs.all(), 0, STAGE, provs)
    }
}

/// `mix`'s pick: drawn at random by the weights of the step, among the inputs still open.
pub(crate) struct Scheduled {
    mixture: Mixture,
    generator: Generator,
    /// Elements passed on so far.
    step: u64,
    /// Its weights were refused (the error was passed on): the mixture has ended.
    failed: bool,
}

impl Pick for Scheduled {
    const STAGE: &'static str = STAGE;

    fn poll_pick<T>(
        &mut self,
        open: &[Option<BoxStream<T>>],
        _: &mut Context<'_>,
    ) -> Poll<Option<anyhow::Result<usize>>> {
        if self.failed || open.iter().all(Option::is_none) {
            return Poll::Ready(None);
        }
        let weights = match self.mixture.weights_at(self.step, open.len()) {
            Ok(weights) => weights,
            Err(e) => {
                self.failed = true;
                return Poll::Ready(Some(Err(e)));
            }
        };
        match self.generator.draw(open, &weights) {
            Some(i) => Poll::Ready(Some(Ok(i))),
            None => {
                self.failed = true;
                let e = format!(
                    "{STAGE}: at step {} every dataset still open has weight 0",
                    self.step
                );
                Poll::Ready(Some(Err(Error::InvalidArgument(e).into())))
            }
        }
    }

    fn taken(&mut self, n: u64) {
        self.step += n;
    }

    fn save(&mut self, state: State) -> anyhow::Result<State> {
        let step = if self.failed { ENDED } else { self.step };
        Ok(state.words(self.generator.words()).words([step]))
    }
}
