//! A recipe's node: [`Dataset`]'s stage (name, cardinality, options, depth, fingerprint, and
//! how it builds its stream for an epoch), and the one place every stage's stream is made and
//! wrapped (statistics, restore). The methods users call are the façade's (`crate::dataset`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use futures::stream::Stream;

use super::counted::{Counted, Timed};
use super::ctx::{Counting, Ctx, Refusal, next_id};
use super::resume::{BoxStream, Opaque, Opened, Restored, StageStream};
use crate::hash::mix64;
use crate::options::Options;
use crate::stats::StageCounters;

/// How many elements a dataset yields, as far as is known before iterating it
/// (tf.data's `cardinality()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cardinality {
    /// Exactly this many elements per epoch.
    Finite(u64),
    /// Never ends (tf.data's `INFINITE_CARDINALITY`, -1).
    Infinite,
    /// Not known without iterating (tf.data's `UNKNOWN_CARDINALITY`, -2).
    Unknown,
}

impl Cardinality {
    /// tf.data's encoding: the count, -1 for infinite, -2 for unknown.
    pub fn as_i64(self) -> i64 {
        match self {
            Cardinality::Finite(n) => i64::try_from(n).unwrap_or(i64::MAX),
            Cardinality::Infinite => -1,
            Cardinality::Unknown => -2,
        }
    }

    /// The count, when finite.
    pub fn finite(self) -> Option<u64> {
        match self {
            Cardinality::Finite(n) => Some(n),
            _ => None,
        }
    }

    pub(crate) fn map_finite(self, f: impl FnOnce(u64) -> u64) -> Cardinality {
        match self {
            Cardinality::Finite(n) => Cardinality::Finite(f(n)),
            other => other,
        }
    }
}

pub(crate) fn error_stream<T: Send + 'static>(e: anyhow::Error) -> BoxStream<T> {
    Box::pin(Opaque::new(
        futures::stream::once(futures::future::ready(Err(e))),
        "(error)",
    ))
}

/// `stream` boxed, unless it is boxed already (a stage that builds one of several stream
/// types: a fresh source or its replay): a second box would cost an indirect call per element.
fn boxed<T: Send + 'static, S: StageStream<T> + 'static>(stream: S) -> BoxStream<T> {
    let mut slot = Some(stream);
    if let Some(inner) =
        (&mut slot as &mut dyn std::any::Any).downcast_mut::<Option<BoxStream<T>>>()
        && let Some(inner) = inner.take()
    {
        return inner;
    }
    match slot {
        Some(stream) => Box::pin(stream),
        None => error_stream(anyhow::anyhow!("internal error: a stage's stream was lost")),
    }
}

/// A stage's stream, boxed with the wrapper that counts it (see [`Counting`]).
fn finish<T: Send + 'static, S: StageStream<T> + 'static>(
    stream: S,
    timing: bool,
    counting: Counting,
    watched: bool,
    counters: Arc<StageCounters>,
    refusal: &Refusal,
) -> BoxStream<T> {
    let refusal = Arc::clone(refusal);
    if timing {
        Box::pin(Timed::new(stream, counters, refusal))
    } else if counting != Counting::Wrapped {
        if counting == Counting::ByInput {
            counters.set_counted_by_input();
        }
        boxed(stream)
    } else if watched {
        Box::pin(Counted::<_, true>::new(stream, counters, refusal))
    } else {
        Box::pin(Counted::<_, false>::new(stream, counters, refusal))
    }
}

type BuildFn<T> = dyn Fn(&Ctx) -> BoxStream<T> + Send + Sync;

pub(super) struct Stage<T> {
    /// tf.data's name for the operation, e.g. `"map_parallel"`.
    name: &'static str,
    cardinality: Cardinality,
    /// Options set on this stage or any stage upstream of it.
    options: Options,
    /// Number of stages upstream of this one (seeds derive from it).
    depth: u64,
    /// A hash of this stage, its parameters and its inputs' fingerprints: a checkpoint names
    /// the recipe it belongs to by it.
    fingerprint: u64,
    /// Epochs started ([`Dataset::iter`]) with this stage at the top.
    pub(super) epochs: AtomicU64,
    /// Its stream can save its position, and the state it saves is a few words (no element
    /// held by position): see [`Resumable`].
    resumable: bool,
    small: bool,
    /// A stage in it saves its position only in deterministic order (a parallel map, a
    /// parallel interleave): with `Options::deterministic(false)` it cannot be saved.
    ordered: bool,
    build: Box<BuildFn<T>>,
}

/// A re-iterable recipe for a stream of `T`s: tf.data's `tf.data.Dataset`.
///
/// Cloning is cheap (one `Arc`); a `Dataset` is `Send + Sync` whatever `T` is, so it can be
/// shared between tasks. Each [`iter`](Dataset::iter) runs the recipe once, as a fresh
/// [`Epoch`](super::Epoch) stream.
///
/// # Examples
///
/// ```
/// use streamload::Dataset;
/// # tokio_test::block_on(async {
/// let ds = Dataset::range(0, 10).filter(|x| x % 2 == 0).map(|x| x * 10).batch(2);
/// assert_eq!(ds.collect().await?, vec![vec![0, 20], vec![40, 60], vec![80]]);
/// // A dataset is a recipe: iterate it again and it runs again.
/// assert_eq!(ds.count().await?, 3);
/// # anyhow::Ok(()) }).unwrap();
/// ```
pub struct Dataset<T> {
    stage: Arc<Stage<T>>,
}

impl<T> Dataset<T> {
    pub(super) fn node(&self) -> &Stage<T> {
        &self.stage
    }
}

impl<T> Clone for Dataset<T> {
    fn clone(&self) -> Self {
        Dataset {
            stage: Arc::clone(&self.stage),
        }
    }
}

impl<T> fmt::Debug for Dataset<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dataset")
            .field("stage", &self.stage.name)
            .field("cardinality", &self.stage.cardinality)
            .field("options", &self.stage.options)
            .finish()
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// A stage with no dataset input.
    pub(crate) fn source<S>(
        name: &'static str,
        cardinality: Cardinality,
        build: impl Fn(&Ctx) -> S + Send + Sync + 'static,
    ) -> Self
    where
        S: Stream<Item = anyhow::Result<T>> + Send + 'static,
    {
        Self::stage(name, cardinality, Options::default(), 0, build)
    }

    /// A stage with explicit options and depth (for operations with several inputs).
    pub(crate) fn stage<S>(
        name: &'static str,
        cardinality: Cardinality,
        options: Options,
        depth: u64,
        build: impl Fn(&Ctx) -> S + Send + Sync + 'static,
    ) -> Self
    where
        S: Stream<Item = anyhow::Result<T>> + Send + 'static,
    {
        Self::stage_counted(name, cardinality, options, depth, Counting::Wrapped, build)
    }

    /// A stage whose statistics are kept as `counting` says, for an operation that does not
    /// save its position: a checkpoint through it is an error naming it.
    pub(crate) fn stage_counted<S>(
        name: &'static str,
        cardinality: Cardinality,
        options: Options,
        depth: u64,
        counting: Counting,
        build: impl Fn(&Ctx) -> S + Send + Sync + 'static,
    ) -> Self
    where
        S: Stream<Item = anyhow::Result<T>> + Send + 'static,
    {
        Self::stage_fallible(name, cardinality, options, depth, counting, move |ctx| {
            Ok(Opened::Own(Opaque::new(build(ctx), name)))
        })
        .resumable(false)
    }

    /// A stage whose stream saves its position, made by `build` (its own, or in replay one
    /// that makes its saved elements again) or failing to be (an error element in its place:
    /// a saved state that is not this stage's).
    pub(crate) fn stage_fallible<S>(
        name: &'static str,
        cardinality: Cardinality,
        options: Options,
        depth: u64,
        counting: Counting,
        build: impl Fn(&Ctx) -> anyhow::Result<Opened<S, T>> + Send + Sync + 'static,
    ) -> Self
    where
        S: StageStream<T> + 'static,
    {
        let id = next_id();
        // The one place every stage's stream is made: count what it yields.
        let counted = move |ctx: &Ctx| -> BoxStream<T> {
            if let Some(state) = ctx.restoring()
                && ctx.replaying().is_none()
                && state.stage != name
            {
                return error_stream(state.malformed());
            }
            let key = if ctx.scope == 0 {
                (0, id, name)
            } else {
                (ctx.scope, depth, name)
            };
            let counters = ctx.stats.counters(crate::stats::Registration {
                key,
                name,
                depth,
                consumer: ctx.stage_counters(),
                hidden: ctx.hide_next,
                label: ctx.label_next.as_deref(),
            });
            let timing = ctx.options.stats_timing == Some(true);
            let counting = if timing { Counting::Wrapped } else { counting };
            let inner = Ctx {
                current: Some(Arc::clone(&counters)),
                counting,
                hide_next: false,
                label_next: None,
                ..ctx.clone()
            };
            // Watched by the tuner: asked for while it was built (a knob, a gauge).
            let stream = match build(&inner) {
                Ok(Opened::Own(stream)) => stream,
                Ok(Opened::Replay(stream)) => {
                    #[cfg(feature = "tracing")]
                    let stream = crate::trace::Traced::new(stream, name, depth);
                    let watched = ctx.tuner.watches(&counters);
                    return finish(stream, timing, counting, watched, counters, &ctx.refusal);
                }
                Err(e) => {
                    let (stream, watched) = (error_stream(e), ctx.tuner.watches(&counters));
                    return finish(stream, timing, counting, watched, counters, &ctx.refusal);
                }
            };
            let watched = ctx.tuner.watches(&counters);
            #[cfg(feature = "tracing")]
            let stream = crate::trace::Traced::new(stream, name, depth);
            match ctx.restore.as_ref().filter(|_| ctx.replay.is_none()) {
                // Restored: its position is the saved one until its first element.
                Some(state) => {
                    let stream = Restored::new(stream, Arc::clone(state));
                    finish(stream, timing, counting, watched, counters, &ctx.refusal)
                }
                None => finish(stream, timing, counting, watched, counters, &ctx.refusal),
            }
        };
        let mut fingerprint = mix64(name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
        }));
        fingerprint = mix64(fingerprint ^ mix64(depth) ^ cardinality.as_i64() as u64);
        Dataset {
            stage: Arc::new(Stage {
                name,
                cardinality,
                options,
                depth,
                fingerprint,
                epochs: AtomicU64::new(0),
                resumable: true,
                small: true,
                ordered: false,
                build: Box::new(counted),
            }),
        }
    }

    /// Mixes `key` (a parameter, or an input's fingerprint) into this fresh stage's
    /// fingerprint.
    pub(crate) fn keyed(mut self, key: u64) -> Self {
        match Arc::get_mut(&mut self.stage) {
            Some(stage) => stage.fingerprint = mix64(stage.fingerprint ^ mix64(key)),
            None => debug_assert!(false, "keyed on a shared stage"),
        }
        self
    }

    /// Sets whether this fresh stage's stream can save its position.
    pub(crate) fn resumable(mut self, on: bool) -> Self {
        if let Some(stage) = Arc::get_mut(&mut self.stage) {
            stage.resumable = on;
        }
        self
    }

    /// Sets whether a stage of this fresh stage's recipe saves its position only in
    /// deterministic order.
    pub(crate) fn ordered(mut self, on: bool) -> Self {
        if let Some(stage) = Arc::get_mut(&mut self.stage) {
            stage.ordered = on;
        }
        self
    }

    /// Whether a stage in this recipe saves its position only in deterministic order.
    pub(crate) fn is_ordered(&self) -> bool {
        self.stage.ordered
    }

    /// Sets whether this fresh stage's saved state is a few words (see [`Resumable`]).
    pub(crate) fn small(mut self, on: bool) -> Self {
        if let Some(stage) = Arc::get_mut(&mut self.stage) {
            stage.small = on;
        }
        self
    }

    /// What a stage holding this recipe's elements needs to know of it, for an epoch built
    /// with `ctx`: whether its state is small, and whether its streams can save their
    /// position (answered by the plan and the epoch's options, not by each stream).
    pub(crate) fn answers(&self, ctx: &Ctx) -> Answers {
        Answers {
            small: self.is_small(),
            resumable: self.is_resumable()
                && (!self.is_ordered() || ctx.options().is_deterministic()),
        }
    }

    /// Whether this recipe's streams can save their position.
    pub(crate) fn is_resumable(&self) -> bool {
        self.stage.resumable
    }

    /// Whether this recipe's saved state is a few words.
    pub(crate) fn is_small(&self) -> bool {
        self.stage.small
    }

    /// This recipe's fingerprint (see [`Checkpoint`]).
    pub(crate) fn fingerprint(&self) -> u64 {
        self.stage.fingerprint
    }

    /// Builds this stage's stream (and so every stage upstream of it) for one epoch.
    pub(crate) fn build(&self, ctx: &Ctx) -> BoxStream<T> {
        (self.stage.build)(ctx)
    }

    pub(crate) fn depth(&self) -> u64 {
        self.stage.depth
    }

    pub(crate) fn options(&self) -> &Options {
        &self.stage.options
    }

    /// The name of the operation that made this dataset, in tf.data's vocabulary.
    pub fn name(&self) -> &'static str {
        self.stage.name
    }

    /// How many elements one epoch yields, when known without iterating (tf.data's
    /// `cardinality()`).
    ///
    /// ```
    /// use streamload::{Cardinality, Dataset};
    /// assert_eq!(Dataset::range(0, 10).batch(3).cardinality(), Cardinality::Finite(4));
    /// assert_eq!(Dataset::range(0, 10).filter(|x| *x < 3).cardinality(), Cardinality::Unknown);
    /// assert_eq!(Dataset::range(0, 10).repeat().take(7).cardinality(), Cardinality::Finite(7));
    /// ```
    pub fn cardinality(&self) -> Cardinality {
        self.stage.cardinality
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// This stage again (the same name, fingerprint and properties), with `options` and built
    /// by `build` (which builds this stage with a context of its own).
    pub(crate) fn same_stage(
        &self,
        options: Options,
        build: impl Fn(&Ctx) -> BoxStream<T> + Send + Sync + 'static,
    ) -> Dataset<T> {
        Dataset {
            stage: Arc::new(Stage {
                name: self.stage.name,
                cardinality: self.stage.cardinality,
                options,
                depth: self.stage.depth,
                fingerprint: self.stage.fingerprint,
                epochs: AtomicU64::new(0),
                resumable: self.stage.resumable,
                small: self.stage.small,
                ordered: self.stage.ordered,
                build: Box::new(build),
            }),
        }
    }

    /// This dataset's last stage as plumbing the user did not write (a file dataset's list of
    /// names and its interleave): the statistics merge it into the user's stage (see
    /// [`Stats::snapshot`](crate::Stats::snapshot)).
    pub(crate) fn hidden(&self) -> Dataset<T> {
        let inner = self.clone();
        self.same_stage(self.options().clone(), move |ctx| {
            inner.build(&ctx.hiding())
        })
    }
}

/// A recipe's answers (see [`Dataset::answers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answers {
    /// Its saved state is a few words (no element held by position).
    pub(crate) small: bool,
    /// Its streams can save their position (false through a stage that does not).
    pub(crate) resumable: bool,
}

impl Answers {
    /// For a stream that is no recipe's (an error in a stage's place, an empty input): small
    /// and resumable, as every stage is unless it says otherwise.
    pub(crate) const PLAIN: Answers = Answers {
        small: true,
        resumable: true,
    };
}
