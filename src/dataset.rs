//! [`Dataset<T>`]: the cloneable, re-iterable recipe, and [`Epoch<T>`]: one pass over it.
//!
//! A `Dataset` holds configuration only. Each call to [`Dataset::iter`] builds one epoch: fresh
//! buffers, channels, tasks and random state. Every operation below is a thin method that
//! records a stage; the stream combinator that runs it lives in its own file under `ops/` (or
//! `source/`).
//!
//! Every stage's stream is made in one place, [`Dataset::stage`], with the epoch's [`Ctx`].
//! That is where cross-cutting machinery attaches without touching the operations:
//! - statistics: each stage's stream is wrapped in a counter registered in `Ctx`'s registry;
//! - autotuning: stages built with `AUTOTUNE` register a knob (an adjustable value they read
//!   as they run) with the epoch's tuner in `Ctx`, which updates it from those statistics
//!   (`runtime/autotune.rs`);
//! - checkpoint and resume (next): `Ctx` carries the state to restore; a stage that has state
//!   (a source's position, a shuffle's RNG counter and buffer, an interleave's cursor) saves
//!   and restores it through a small trait its stream implements, keyed like its statistics
//!   by (scope, stage), so stateless stages need no change.

use std::fmt;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll};

use futures::stream::{FusedStream, Stream, StreamExt};

use crate::checkpoint::{Checkpoint, ENDED, Opaque, Prov, Restored, StageStream, State};
use crate::ops;
use crate::options::{Options, Parallelism};
use crate::runtime::{self, Budget, Knob, KnobKind, Task, Tuner};
use crate::source;
use crate::stats::{Counted, StageCounters, Stats, Timed};
use crate::tensor::{Collate, PaddedCollate, RaggedCollate, Unbatch};

/// The stream type every stage produces: elements or errors, boxed once per stage, with its
/// position ([`Resumable`]).
pub(crate) type BoxStream<T> = Pin<Box<dyn StageStream<T>>>;

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

/// What every stage of one epoch can see: the pipeline's options and the epoch's statistics
/// registry (later also its checkpoint state).
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    options: Arc<Options>,
    stats: Stats,
    /// 0 for the top-level pipeline; for datasets built inside a stage (interleave's inner
    /// datasets), that stage's scope id.
    scope: u64,
    /// The stage being built: the consumer of the stages built with this context.
    current: Option<Arc<StageCounters>>,
    /// The epoch's autotuner: stages built with `AUTOTUNE` register their knobs here.
    tuner: Tuner,
    /// How the stage being built is counted.
    counting: Counting,
    /// The state to restore the stage being built from (a checkpoint's), if any.
    restore: Option<Arc<State>>,
    /// Replay: the stage being built yields exactly the elements at these positions, in
    /// this order (to refill a buffer after a restore), if any.
    replay: Option<Arc<[Prov]>>,
    /// A stage downstream holds elements by position: stages that move elements between
    /// tasks carry each one's position along.
    provenance: bool,
    /// Which epoch of the recipe this is, and which repetition of a `repeat` (mixed in):
    /// random stages key their draws by it.
    epoch: u64,
    /// The seeds unseeded random stages drew (from OS entropy when their recipe was built),
    /// by depth: one table for the epoch, saved with its checkpoints and restored from them,
    /// so a stage built after a restore (a later repetition, a replay) draws as before.
    seeds: Arc<std::sync::Mutex<std::collections::BTreeMap<u64, u64>>>,
    /// `seeds` was restored from a checkpoint.
    restored_seeds: bool,
    /// The next stage built with this context is plumbing the user did not write
    /// ([`Dataset::hidden`]), or has a name the user gave it ([`Dataset::named`]).
    hide_next: bool,
    label_next: Option<Arc<str>>,
    /// The epoch's refused resume, once a stage yielded one (see [`Refusal`]).
    refusal: Refusal,
    /// The files the epoch opened, and what the ones of the checkpoint it resumes from were.
    files: crate::checkpoint::opened::Ledger,
}

/// The first refused resume ([`Error::Checkpoint`](crate::Error)) any stage of an epoch
/// yielded, shared by all of them: the epoch yields it and ends, even where a stage between
/// that one and the consumer would drop or hold the error element (a window no element of
/// which is at its place, a shard, a bucket refilling).
pub(crate) type Refusal = Arc<std::sync::OnceLock<String>>;

/// Records `item` in `refusal` if it refuses a resume.
#[inline]
pub(crate) fn note_refusal<T>(refusal: &Refusal, item: &Option<anyhow::Result<T>>) {
    if let Some(Err(e)) = item
        && let Some(crate::Error::Checkpoint(why)) = e.downcast_ref::<crate::Error>()
    {
        let _ = refusal.set(why.clone());
    }
}

/// How a stage's element and error counts are kept (its other statistics do not depend on it).
///
/// Counting every element in a wrapper costs a few instructions per element and stage, which
/// shows on pipelines of nanosecond elements (W1); the cheapest stages count otherwise. With
/// [`Options::stats_timing`] every stage is wrapped and timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counting {
    /// A wrapper counts what the stream yields.
    Wrapped,
    /// One output per input, in step (a synchronous `map`): the counts are its input's, and
    /// the stage records the errors it makes itself ([`Ctx::own_counters`]).
    ByInput,
    /// The stream counts itself through [`Ctx::own_counters`] (a `range` counts in laps).
    ByStage,
}

/// A fresh id for a stage or a scope (never 0).
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Ctx {
    pub(crate) fn new(options: Options) -> Self {
        let timing = options.stats_timing == Some(true);
        let budget = options.budget();
        let tuner = Tuner::new(budget);
        Ctx {
            options: Arc::new(options),
            stats: Stats::new(timing, budget),
            scope: 0,
            current: None,
            tuner,
            counting: Counting::Wrapped,
            restore: None,
            replay: None,
            provenance: false,
            epoch: 0,
            seeds: Arc::default(),
            restored_seeds: false,
            hide_next: false,
            label_next: None,
            refusal: Refusal::default(),
            files: Default::default(),
        }
    }

    /// The files this epoch opened (see [`Ledger`](crate::checkpoint::opened::Ledger)).
    pub(crate) fn files(&self) -> &crate::checkpoint::opened::Ledger {
        &self.files
    }

    /// The state to restore the stage being built from.
    pub(crate) fn restoring(&self) -> Option<&State> {
        self.restore.as_deref()
    }

    /// The positions the stage being built must yield, in replay.
    pub(crate) fn replaying(&self) -> Option<&Arc<[Prov]>> {
        self.replay.as_ref()
    }

    /// Whether a stage downstream holds elements by position.
    pub(crate) fn provenance(&self) -> bool {
        self.provenance
    }

    /// The epoch number random stages key their draws by.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The context to build input `i` of the stage being built with: restored from input
    /// `i` of its saved state; replaying the same positions.
    pub(crate) fn for_input(&self, i: usize) -> Ctx {
        let restore = self.restore.as_ref().map(|s| {
            Arc::new(
                s.inputs
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| State::new("(missing)")),
            )
        });
        Ctx {
            restore,
            ..self.clone()
        }
    }

    /// This context, restoring the stage being built from `state` (or from nothing).
    pub(crate) fn with_restore(&self, state: Option<State>) -> Ctx {
        Ctx {
            restore: state.map(Arc::new),
            ..self.clone()
        }
    }

    /// This context, replaying `provs`. The saved state stays in reach (a replaying stage
    /// takes its seed from it), but replay comes first: a stage in replay restores nothing.
    pub(crate) fn with_replay(&self, provs: Arc<[Prov]>) -> Ctx {
        Ctx {
            replay: Some(provs),
            // What is replayed is held again by position.
            provenance: true,
            ..self.clone()
        }
    }

    /// This context, neither restoring nor replaying.
    pub(crate) fn fresh(&self) -> Ctx {
        Ctx {
            restore: None,
            replay: None,
            ..self.clone()
        }
    }

    /// This context, with positions asked for.
    pub(crate) fn with_provenance(&self) -> Ctx {
        Ctx {
            provenance: true,
            ..self.clone()
        }
    }

    /// This context for the inputs of a stage that merges several (zip, concatenate, the
    /// samplers): when they are not all small, a stage downstream may hold the merged
    /// elements by position, and an input that is small on its own must then place its
    /// elements too.
    pub(crate) fn for_merged(&self, all_small: bool) -> Ctx {
        if all_small || self.provenance {
            self.clone()
        } else {
            self.with_provenance()
        }
    }

    /// This context for repetition `n` of a `repeat`: the first is the epoch itself (as in
    /// tf.data, a dataset's first repetition draws what the dataset alone draws), the others
    /// derive from (epoch, n).
    pub(crate) fn repetition(&self, n: u64) -> Ctx {
        let epoch = match n {
            0 => self.epoch,
            n => mix64(self.epoch ^ mix64(n.wrapping_add(0x4E9E_A7ED))),
        };
        Ctx {
            epoch,
            ..self.clone()
        }
    }

    /// This context for epoch `epoch` as numbered by [`Ctx::epoch`] (a cache fills its
    /// store again as the epoch that started the fill).
    pub(crate) fn with_epoch(&self, epoch: u64) -> Ctx {
        Ctx {
            epoch,
            ..self.clone()
        }
    }

    /// The statistics a stage counted [`ByInput`](Counting::ByInput) or
    /// [`ByStage`](Counting::ByStage) must update itself (`None` when a wrapper counts it).
    pub(crate) fn own_counters(&self) -> Option<Arc<StageCounters>> {
        match self.counting {
            Counting::Wrapped => None,
            Counting::ByInput | Counting::ByStage => self.current.clone(),
        }
    }

    /// An autotuned value for the stage being built (`None` outside a stage).
    pub(crate) fn knob(&self, kind: KnobKind, initial: usize, max: usize) -> Option<Arc<Knob>> {
        let stage = self.current.as_ref()?;
        Some(self.tuner.knob(stage, kind, initial, max))
    }

    /// Samples the buffer fill of the stage being built while the epoch runs.
    pub(crate) fn gauge(&self) {
        if let Some(stage) = &self.current {
            self.tuner.gauge(stage);
        }
    }

    /// The budgets autotuned stages work within.
    pub(crate) fn budget(&self) -> Budget {
        self.tuner.budget()
    }

    /// The statistics of the stage being built, for operations that report gauges of their
    /// own (workers, parallelism).
    pub(crate) fn stage_counters(&self) -> Option<&StageCounters> {
        self.current.as_deref()
    }

    /// A handle on the statistics of the stage being built, for streams that report later.
    pub(crate) fn stats_handle(&self) -> Option<Arc<StageCounters>> {
        self.current.clone()
    }

    /// The context for datasets the stage being built builds inside itself (interleave's
    /// inner datasets, one per input element): their stages count in one row per (depth,
    /// name) within the stage, however many are built, in any epoch.
    pub(crate) fn nested(&self) -> Ctx {
        Ctx {
            scope: self.current.as_ref().map_or(0, |c| c.inner_scope()),
            ..self.clone()
        }
    }

    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    /// The seed a random stage uses: its own, else one derived from the global seed and the
    /// stage's depth in the pipeline, else `fallback` (drawn from OS entropy when the recipe was
    /// built).
    pub(crate) fn seed_for(&self, own: Option<u64>, depth: u64, fallback: u64) -> u64 {
        own.or_else(|| self.options.seed.map(|g| mix64(g ^ mix64(depth))))
            .unwrap_or_else(|| {
                // A fresh epoch records the seed it drew; a restored one (its table preloaded)
                // draws what the checkpointed epoch drew at that depth. (Two unseeded random
                // stages at one depth, branches of a zip, resume with the first one's seed:
                // give such stages seeds.)
                let mut seeds = self.seeds.lock().unwrap_or_else(PoisonError::into_inner);
                if self.restored_seeds {
                    *seeds.entry(depth).or_insert(fallback)
                } else {
                    seeds.entry(depth).or_insert(fallback);
                    fallback
                }
            })
    }
}

/// A stage's stream that yields `e` and ends.
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

/// SplitMix64's finaliser: a cheap, well-mixed hash of a 64-bit value, used to derive seeds.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A stage's parameters as one number for the recipe's fingerprint ([`Dataset::keyed`]):
/// every parameter that decides which elements come out, or in what order, goes in, each as
/// a word of its own (so no two parameters' values can cancel out).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key(u64);

impl Key {
    pub(crate) fn new() -> Self {
        Key(0x5EED_F1A9)
    }

    pub(crate) fn word(self, word: u64) -> Self {
        Key(mix64(self.0 ^ mix64(word)))
    }

    pub(crate) fn flag(self, on: bool) -> Self {
        self.word(u64::from(on))
    }

    /// An optional value: `None` and every `Some` differ.
    pub(crate) fn option(self, word: Option<u64>) -> Self {
        match word {
            Some(w) => self.word(1).word(w),
            None => self.word(0),
        }
    }

    pub(crate) fn bytes(self, bytes: &[u8]) -> Self {
        bytes
            .chunks(8)
            .fold(self.word(bytes.len() as u64), |key, chunk| {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                key.word(u64::from_le_bytes(word))
            })
    }

    pub(crate) fn finish(self) -> u64 {
        self.0
    }
}

type BuildFn<T> = dyn Fn(&Ctx) -> BoxStream<T> + Send + Sync;

struct Stage<T> {
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
    epochs: AtomicU64,
    /// Its stream can save its position, and the state it saves is a few words (no element
    /// held by position): see [`Resumable`].
    resumable: bool,
    small: bool,
    build: Box<BuildFn<T>>,
}

/// A re-iterable recipe for a stream of `T`s: tf.data's `tf.data.Dataset`.
///
/// Cloning is cheap (one `Arc`); a `Dataset` is `Send + Sync` whatever `T` is, so it can be
/// shared between tasks. Each [`iter`](Dataset::iter) runs the recipe once, as a fresh
/// [`Epoch`] stream.
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

// ---------------------------------------------------------------------------------------------
// Plumbing shared by every operation.
// ---------------------------------------------------------------------------------------------
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
        Self::stage_resumable(name, cardinality, options, depth, counting, move |ctx| {
            Opaque::new(build(ctx), name)
        })
        .resumable(false)
    }

    /// A stage whose stream saves its position ([`Resumable`]), its statistics kept as
    /// `counting` says.
    pub(crate) fn stage_resumable<S>(
        name: &'static str,
        cardinality: Cardinality,
        options: Options,
        depth: u64,
        counting: Counting,
        build: impl Fn(&Ctx) -> S + Send + Sync + 'static,
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
            let stream = build(&inner);
            #[cfg(feature = "tracing")]
            let stream = crate::trace::Traced::new(stream, name, depth);
            let watched = ctx.tuner.watches(&counters);
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

    /// Sets whether this fresh stage's saved state is a few words (see [`Resumable`]).
    pub(crate) fn small(mut self, on: bool) -> Self {
        if let Some(stage) = Arc::get_mut(&mut self.stage) {
            stage.small = on;
        }
        self
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

    /// A stage that transforms this dataset's stream and saves its position. Its input is
    /// built with [`Ctx::for_input`]`(0)`: restored from input 0 of the stage's state.
    pub(crate) fn unary_resumable<U: Send + 'static, S>(
        &self,
        name: &'static str,
        cardinality: Cardinality,
        counting: Counting,
        op: impl Fn(&Ctx, BoxStream<T>) -> S + Send + Sync + 'static,
    ) -> Dataset<U>
    where
        S: StageStream<U> + 'static,
    {
        self.unary_with(name, cardinality, counting, move |ctx, input| {
            op(ctx, input.build(&ctx.for_input(0)))
        })
    }

    /// A stage over this dataset that builds its input itself (to restore or replay it in
    /// its own way), and saves its position.
    pub(crate) fn unary_with<U: Send + 'static, S>(
        &self,
        name: &'static str,
        cardinality: Cardinality,
        counting: Counting,
        op: impl Fn(&Ctx, &Dataset<T>) -> S + Send + Sync + 'static,
    ) -> Dataset<U>
    where
        S: StageStream<U> + 'static,
    {
        let input = self.clone();
        Dataset::stage_resumable(
            name,
            cardinality,
            self.stage.options.clone(),
            self.stage.depth + 1,
            counting,
            move |ctx| op(ctx, &input),
        )
        .keyed(self.fingerprint())
        .resumable(self.is_resumable())
        .small(self.is_small())
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

// ---------------------------------------------------------------------------------------------
// Iterating.
// ---------------------------------------------------------------------------------------------
impl<T: Send + 'static> Dataset<T> {
    /// Starts one epoch: builds a fresh stream of this recipe (tf.data's `iter(ds)`).
    ///
    /// Nothing runs until the stream is polled. Stages that spawn work (`prefetch`,
    /// `map_parallel`, `map_async`, `parallel_interleave`, `from_generator`) need the stream to
    /// be polled inside a tokio runtime; outside one they yield [`Error::NoRuntime`](crate::Error).
    ///
    /// # Cancellation
    ///
    /// Dropping the [`Epoch`] stops every task it spawned: async tasks are aborted, queued
    /// blocking jobs are cancelled, and a running blocking job stops at its next element.
    pub fn iter(&self) -> Epoch<T> {
        let epoch = self.stage.epochs.fetch_add(1, Ordering::Relaxed);
        self.start(epoch, None)
    }

    /// Goes on with an epoch from where [`Epoch::checkpoint`] saved it: the first element is
    /// the one after the last the checkpointed epoch's consumer received. The recipe must be
    /// the same (built by the same code, with the same parameters); the process may be
    /// another one.
    ///
    /// The buffers that were full at the checkpoint (a shuffle's) are refilled first by
    /// reading the records at their saved positions again; what was read or computed ahead of
    /// the consumer is made again. Later [`iter`](Dataset::iter) calls go on with the next
    /// epochs (so a reshuffle each epoch continues as it would have).
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::{Checkpoint, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 100).shuffle(10, Some(1)).batch(8);
    /// let all = ds.collect().await?; // the uninterrupted epoch
    ///
    /// let ds = Dataset::range(0, 100).shuffle(10, Some(1)).batch(8); // the same recipe
    /// let mut epoch = ds.iter();
    /// let mut seen = vec![epoch.next().await.unwrap()?, epoch.next().await.unwrap()?];
    /// let bytes = epoch.checkpoint()?.to_bytes();
    /// drop(epoch);
    ///
    /// // Later, maybe in another process:
    /// let mut resumed = ds.iter_from(&Checkpoint::from_bytes(&bytes)?)?;
    /// while let Some(batch) = resumed.next().await {
    ///     seen.push(batch?);
    /// }
    /// assert_eq!(seen, all);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Checkpoint`](crate::Error) when the checkpoint belongs to another recipe.
    /// Errors met while restoring (a file that changed or vanished) are the epoch's first
    /// element.
    pub fn iter_from(&self, checkpoint: &Checkpoint) -> anyhow::Result<Epoch<T>> {
        if checkpoint.fingerprint != self.fingerprint() {
            return Err(crate::Error::Checkpoint(format!(
                "it was taken from another recipe (fingerprint {:016x}, this recipe's is {:016x}): \
                 resume with the dataset built the same way",
                checkpoint.fingerprint,
                self.fingerprint()
            ))
            .into());
        }
        self.stage
            .epochs
            .fetch_max(checkpoint.epoch.saturating_add(1), Ordering::Relaxed);
        if checkpoint.state.stage == ENDED {
            let mut epoch = self.start(checkpoint.epoch, None);
            epoch.done = true;
            return Ok(epoch);
        }
        Ok(self.start(checkpoint.epoch, Some(checkpoint)))
    }

    fn start(&self, epoch: u64, restore: Option<&Checkpoint>) -> Epoch<T> {
        let mut ctx = Ctx::new(self.stage.options.clone());
        ctx.epoch = epoch;
        let ctx = match restore {
            Some(checkpoint) => {
                let (state, seeds) = (checkpoint.state.clone(), &checkpoint.seeds);
                ctx.files.restore(&checkpoint.files);
                ctx.seeds
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(seeds.iter().copied());
                ctx.restored_seeds = true;
                ctx.with_restore(Some(state))
            }
            None => ctx,
        };
        Epoch {
            stream: Some(self.build(&ctx)),
            stats: ctx.stats,
            tuner: TunerState::Idle(ctx.tuner),
            done: false,
            fingerprint: self.fingerprint(),
            epoch,
            seeds: ctx.seeds,
            refused: false,
            refusal: ctx.refusal,
            files: ctx.files,
        }
    }

    /// Starts one epoch as a blocking `Iterator` of `anyhow::Result<T>`, for synchronous
    /// training loops (burn's `DataLoader`, a `tch` loop, a plain `for batch in ...`): no
    /// async code, no runtime of your own.
    ///
    /// The epoch runs on a multi-thread tokio runtime streamload owns: one for the whole
    /// process, made at the first call, with a worker thread per core (its blocking threads run
    /// `map_parallel`'s calls). `next` blocks the calling thread until the next element is
    /// ready. The epoch makes at most one element ahead of the caller: the next one while the
    /// caller works on this one (add [`prefetch`](Dataset::prefetch) for more).
    /// [`BlockingEpoch::stats`](crate::BlockingEpoch::stats) shows the per-stage report, as
    /// for [`iter`](Dataset::iter).
    ///
    /// ```
    /// use streamload::{AUTOTUNE, Dataset};
    ///
    /// // A plain function: no runtime, no `.await`.
    /// fn train() -> anyhow::Result<i64> {
    ///     let ds = Dataset::range(0, 100).map_parallel(AUTOTUNE, |x| x * 2).batch(10).prefetch(2);
    ///     let mut total = 0;
    ///     for batch in ds.iter_blocking() {
    ///         total += batch?.iter().sum::<i64>(); // one training step
    ///     }
    ///     Ok(total)
    /// }
    /// assert_eq!(train()?, 2 * (0..100).sum::<i64>());
    /// # anyhow::Ok(())
    /// ```
    ///
    /// # Inside an async context
    ///
    /// Calling it from code that runs on a tokio runtime neither panics nor deadlocks: the
    /// epoch runs on streamload's runtime, not the caller's, and the calling thread waits on a
    /// channel. But waiting blocks that thread, and on an async worker thread that stalls the
    /// other tasks it would run: that is the caller's concern, as for any blocking call there
    /// (use [`iter`](Dataset::iter), or call this from `tokio::task::spawn_blocking`).
    ///
    /// # Errors
    ///
    /// Error elements come as `Err` items, in their place, and the iteration goes on, as for
    /// [`iter`](Dataset::iter). If streamload's runtime cannot be started (the OS refuses
    /// threads), the first item is that error and the iteration ends.
    ///
    /// # Cancellation
    ///
    /// Dropping the [`BlockingEpoch`](crate::BlockingEpoch) aborts the task that runs the
    /// epoch, which drops the epoch and so stops every task it spawned, as dropping an
    /// [`Epoch`] does. The tasks stop on streamload's runtime, right after the drop (the drop
    /// does not wait for them).
    pub fn iter_blocking(&self) -> crate::BlockingEpoch<T> {
        crate::BlockingEpoch::new(self.iter())
    }

    /// Runs one epoch and collects its elements; the first error ends it and is returned.
    pub async fn collect(&self) -> anyhow::Result<Vec<T>> {
        let mut out = Vec::with_capacity(
            self.cardinality()
                .finite()
                .map_or(0, |n| n.min(1 << 16) as usize),
        );
        let mut epoch = self.iter();
        while let Some(item) = epoch.next().await {
            out.push(item?);
        }
        Ok(out)
    }

    /// Runs one epoch and counts its elements; the first error ends it and is returned.
    pub async fn count(&self) -> anyhow::Result<u64> {
        let mut n = 0u64;
        let mut epoch = self.iter();
        while let Some(item) = epoch.next().await {
            item?;
            n += 1;
        }
        Ok(n)
    }

    /// Folds one epoch into a single value (tf.data's `reduce(initial_state, reduce_func)`).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(0, 5).reduce(0, |s, x| s + x).await?, 10);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub async fn reduce<S>(&self, init: S, mut f: impl FnMut(S, T) -> S) -> anyhow::Result<S> {
        let mut state = init;
        let mut epoch = self.iter();
        while let Some(item) = epoch.next().await {
            state = f(state, item?);
        }
        Ok(state)
    }

    /// Calls `f` on every element of one epoch; the first error ends it and is returned.
    pub async fn for_each(&self, mut f: impl FnMut(T)) -> anyhow::Result<()> {
        let mut epoch = self.iter();
        while let Some(item) = epoch.next().await {
            f(item?);
        }
        Ok(())
    }
}

/// One pass over a [`Dataset`]: a `Stream` of `anyhow::Result<T>`.
///
/// Made by [`Dataset::iter`]. It is `Send` and `Unpin`; drive it with
/// [`StreamExt::next`](futures::StreamExt::next). Dropping it stops all work it spawned.
#[must_use = "streams do nothing unless polled"]
pub struct Epoch<T> {
    /// `None` once a refused resume ended it (its tasks stopped).
    stream: Option<BoxStream<T>>,
    stats: Stats,
    tuner: TunerState,
    done: bool,
    /// The recipe's fingerprint, the epoch's number and its unseeded stages' seeds, for
    /// checkpoints.
    fingerprint: u64,
    epoch: u64,
    seeds: Arc<std::sync::Mutex<std::collections::BTreeMap<u64, u64>>>,
    /// The resume was refused (a file changed since the checkpoint): the epoch ended there,
    /// and has no position to save.
    refused: bool,
    /// Where its stages record a refused resume.
    refusal: Refusal,
    /// The files it opened.
    files: crate::checkpoint::opened::Ledger,
}

/// The epoch's tuning task: started at the first poll if any stage asked for it, aborted when
/// the epoch is dropped.
enum TunerState {
    Idle(Tuner),
    Running(#[allow(dead_code)] Task<()>), // held only to abort the task on drop
    Off,
}

impl<T> Epoch<T> {
    /// A live view of this epoch's per-stage counters; `Display` prints the report.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let mut epoch = Dataset::range(0, 10).filter(|x| x % 2 == 0).iter();
    /// while let Some(x) = epoch.next().await { x?; }
    /// let stages = epoch.stats().snapshot();
    /// let count = |name| stages.iter().find(|s| s.name == name).map(|s| s.elements);
    /// assert_eq!((count("range"), count("filter")), (Some(10), Some(5)));
    /// println!("{}", epoch.stats()); // the report, ending with the bottleneck
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn stats(&self) -> Stats {
        self.stats.clone()
    }

    /// The position of this epoch after the last element it yielded, to go on from later with
    /// [`Dataset::iter_from`] (in this process or another).
    ///
    /// The checkpoint holds positions, not elements: a source's byte offset or index, a
    /// shuffle's random state and the positions of the elements in its buffer (a few bytes
    /// each), a batch's start. What stages read or computed ahead of the consumer is not in
    /// it; it is made again after the restore. The epoch goes on unchanged after a
    /// checkpoint. See the table in the README's "Checkpoints" section for what each
    /// operation saves.
    ///
    /// # Errors
    ///
    /// [`Error::NotResumable`](crate::Error) naming the first stage that cannot save its
    /// position (a plain generator, a `from_stream`, an operation not made resumable yet).
    pub fn checkpoint(&mut self) -> anyhow::Result<Checkpoint> {
        if self.refused {
            return Err(crate::Error::Checkpoint(
                "this epoch's resume was refused: it has no position to save".into(),
            )
            .into());
        }
        let state = match self.stream.as_mut() {
            Some(stream) if !self.done => stream.as_mut().save()?,
            _ => State::new(ENDED),
        };
        let seeds = self.seeds.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(Checkpoint {
            fingerprint: self.fingerprint,
            epoch: self.epoch,
            state,
            seeds: seeds.iter().map(|(&k, &v)| (k, v)).collect(),
            files: self.files.save(),
        })
    }
}

impl<T> fmt::Debug for Epoch<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Epoch")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<T> Stream for Epoch<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let TunerState::Idle(tuner) = &self.tuner {
            let tuner = tuner.clone();
            self.tuner = if tuner.wanted() {
                // No runtime: the stages report that themselves; they run untuned.
                match runtime::spawn("autotune", tuner.run(self.stats.clone())) {
                    Ok(task) => TunerState::Running(task),
                    Err(_) => TunerState::Off,
                }
            } else {
                TunerState::Off
            };
        }
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Ready(None);
        };
        let mut item = std::task::ready!(stream.as_mut().poll_next(cx));
        let mut refused = matches!(&item, Some(Err(e)) if crate::error::is_refusal(e));
        if !refused && let Some(why) = self.refusal.get() {
            // A stage refused the resume, and what stands between it and the consumer did
            // not pass the refusal on (yet): it comes now, in place of this item.
            item = Some(Err(crate::Error::Checkpoint(why.clone()).into()));
            refused = true;
        }
        if item.is_none() || refused {
            // A refused resume ends the epoch: nothing after it is trusted. Dropping the
            // stream stops its tasks.
            self.done = true;
            self.refused = refused;
            self.tuner = TunerState::Off;
            if refused {
                self.stream = None;
            }
        }
        Poll::Ready(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.stream {
            Some(stream) if !self.done => stream.size_hint(),
            _ => (0, Some(0)),
        }
    }
}

impl<T> FusedStream for Epoch<T> {
    fn is_terminated(&self) -> bool {
        self.done
    }
}

// ---------------------------------------------------------------------------------------------
// Sources.
// ---------------------------------------------------------------------------------------------
impl Dataset<i64> {
    /// The integers `start, start + 1, ..., stop - 1` (tf.data's `range(start, stop)`).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(2, 6).collect().await?, [2, 3, 4, 5]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn range(start: i64, stop: i64) -> Self {
        Self::range_step(start, stop, 1)
    }

    /// `start, start + step, ...` while before `stop` (tf.data's `range(start, stop, step)`);
    /// `step` may be negative.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range_step(3, -4, -2).collect().await?, [3, 1, -1, -3]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `step` is 0 (tf.data: "step must be a non-zero integer").
    pub fn range_step(start: i64, stop: i64, step: i64) -> Self {
        source::range::dataset(start, stop, step)
    }

    /// `start, start + step, ...` forever (tf.data's `Dataset.counter`); `step` may be negative,
    /// or 0 (`start` forever).
    pub fn counter(start: i64, step: i64) -> Self {
        source::range::counter(start, step)
    }
}

impl<T: Clone + Send + Sync + 'static> Dataset<T> {
    /// The elements of a vector, one per element (tf.data's `from_tensor_slices` on a list).
    /// Each epoch clones them out of a shared copy.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::from_vec(vec!["a", "b"]).collect().await?, ["a", "b"]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn from_vec(items: Vec<T>) -> Self {
        source::from_iter::from_vec(items)
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// The items of an iterable that can be cloned: each epoch iterates a fresh clone.
    /// Cardinality is known when the iterator's size hint is exact.
    #[allow(clippy::should_implement_trait)] // a tf.data-style constructor of a recipe, not a collection
    pub fn from_iter<I>(items: I) -> Self
    where
        I: IntoIterator<Item = T> + Clone + Send + Sync + 'static,
        I::IntoIter: Send + 'static,
    {
        source::from_iter::from_iter(items)
    }

    /// Elements from an async stream made afresh for each epoch by `make`.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::from_stream(|| futures::stream::iter((0..3).map(anyhow::Ok)));
    /// assert_eq!(ds.collect().await?, [0, 1, 2]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn from_stream<S>(make: impl Fn() -> S + Send + Sync + 'static) -> Self
    where
        S: Stream<Item = anyhow::Result<T>> + Send + 'static,
    {
        Dataset::source("from_stream", Cardinality::Unknown, move |_| {
            Box::pin(make())
        })
    }

    /// Elements from a blocking iterator made afresh for each epoch by `make` (tf.data's
    /// `from_generator`).
    ///
    /// The generator runs on a thread of its own (one of streamload's, not tokio's blocking
    /// pool, so it holds none of the readers' threads), at most `buffer` elements ahead of
    /// the consumer (a bounded channel; when the consumer falls behind, elements are handed
    /// over in chunks of up to `buffer / 2`, so the thread wakes once per chunk), so a slow
    /// Python-style generator never blocks the async workers. To make its work parallel, generate cheap indices or file names and do the work
    /// in [`map_parallel`](Dataset::map_parallel).
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch stops the generator after the element it is producing.
    ///
    /// # Errors
    ///
    /// A panic in `make` or in the iterator ends the epoch with [`Error::WorkerPanicked`](crate::Error).
    /// An iterator cannot be restarted in the middle: a [checkpoint](Epoch::checkpoint)
    /// through this stage is an [`Error::NotResumable`](crate::Error) naming it (use
    /// [`from_generator_at`](Dataset::from_generator_at), whose generator starts at a
    /// position).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::from_generator(4, || vec![3, 1, 2].into_iter());
    /// assert_eq!(ds.collect().await?, [3, 1, 2]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `buffer` is 0.
    pub fn from_generator<I>(buffer: usize, make: impl Fn() -> I + Send + Sync + 'static) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        Self::try_from_generator(buffer, move || make().into_iter().map(anyhow::Ok))
    }

    /// Like [`from_generator`](Dataset::from_generator), for a generator whose items may be errors.
    pub fn try_from_generator<I>(
        buffer: usize,
        make: impl Fn() -> I + Send + Sync + 'static,
    ) -> Self
    where
        I: IntoIterator<Item = anyhow::Result<T>>,
    {
        source::from_generator::dataset(buffer, make)
    }

    /// A generator that can be [checkpointed](Epoch::checkpoint): like
    /// [`from_generator`](Dataset::from_generator), but `make(start)` makes the iterator of
    /// the elements from element `start` on (0-based; `make(0)` is the whole epoch).
    ///
    /// A plain generator cannot be restarted in the middle, so a checkpoint through it is an
    /// error; this one saves its position (the elements it yielded), and an epoch resumed
    /// with [`iter_from`](Dataset::iter_from) calls `make(position)`. Where a stage
    /// downstream holds elements by position (a [`shuffle`](Dataset::shuffle)'s buffer),
    /// the resume makes them again: the positions are sorted and made in runs, one `make`
    /// per run of positions at most 16 apart (the elements between them made and dropped).
    /// `make(n)` must yield what `make(0)` yields from its `n`-th element on, every time: a
    /// generator that reads records by index, pages of an API by offset, or a seeded
    /// simulation that can skip ahead.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::{Checkpoint, Dataset};
    /// # tokio_test::block_on(async {
    /// // Squares from `start` on: a generator that can begin anywhere.
    /// let recipe = || {
    ///     Dataset::from_generator_at(4, |start| (start..10).map(|i| i * i)).shuffle(3, Some(1))
    /// };
    /// let all = recipe().collect().await?; // the uninterrupted epoch
    ///
    /// let mut epoch = recipe().iter();
    /// let mut seen = vec![epoch.next().await.unwrap()?, epoch.next().await.unwrap()?];
    /// let checkpoint = Checkpoint::from_bytes(&epoch.checkpoint()?.to_bytes())?;
    /// drop(epoch);
    /// // Later, maybe in another process, with the same recipe:
    /// let mut resumed = recipe().iter_from(&checkpoint)?;
    /// while let Some(x) = resumed.next().await {
    ///     seen.push(x?);
    /// }
    /// assert_eq!(seen, all);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Cancellation
    ///
    /// As [`from_generator`](Dataset::from_generator): dropping the epoch stops the generator
    /// after the element it is producing.
    ///
    /// # Errors
    ///
    /// A panic in `make` or in the iterator ends the epoch with
    /// [`Error::WorkerPanicked`](crate::Error). After a resume, a position saved in the
    /// checkpoint that the generator no longer reaches is an
    /// [`Error::Checkpoint`](crate::Error).
    ///
    /// # Panics
    ///
    /// If `buffer` is 0.
    pub fn from_generator_at<I>(
        buffer: usize,
        make: impl Fn(u64) -> I + Send + Sync + 'static,
    ) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        Self::try_from_generator_at(buffer, move |start| make(start).into_iter().map(anyhow::Ok))
    }

    /// Like [`from_generator_at`](Dataset::from_generator_at), for a generator whose items
    /// may be errors (an error counts as an element: it has a position).
    pub fn try_from_generator_at<I>(
        buffer: usize,
        make: impl Fn(u64) -> I + Send + Sync + 'static,
    ) -> Self
    where
        I: IntoIterator<Item = anyhow::Result<T>>,
    {
        source::from_generator::dataset_at(buffer, make)
    }

    /// Pairs of elements of two datasets, until the shorter ends (tf.data's `zip`).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::zip(Dataset::range(0, 5), Dataset::range(10, 13));
    /// assert_eq!(ds.collect().await?, [(0, 10), (1, 11), (2, 12)]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn zip<U: Send + 'static>(a: Dataset<T>, b: Dataset<U>) -> Dataset<(T, U)> {
        ops::zip::zip(a, b)
    }

    /// One vector per step with an element of each dataset, until the shortest ends.
    pub fn zip_all(datasets: Vec<Dataset<T>>) -> Dataset<Vec<T>> {
        ops::zip::zip_all(datasets)
    }

    /// Elements drawn at random from `datasets` (tf.data's `sample_from_datasets`).
    ///
    /// Each step picks input `i` with probability `weights[i]` (normalised; `None` means
    /// uniform) using a ChaCha RNG seeded by `seed` (else the global seed, else OS entropy).
    /// Inputs whose weight is not positive (0, negative, NaN) are dropped when the dataset is
    /// made, as tf.data does: with one input left it is that input, with none an empty
    /// dataset. When an input runs out, `stop_on_empty_dataset` ends the whole dataset;
    /// otherwise sampling goes on among the others. Each input's own order is preserved.
    ///
    /// # Panics
    ///
    /// If `datasets` is empty, or `weights` has another length (with TensorFlow's messages),
    /// or an infinite weight.
    pub fn sample_from_datasets(
        datasets: Vec<Dataset<T>>,
        weights: Option<Vec<f64>>,
        seed: Option<u64>,
        stop_on_empty_dataset: bool,
    ) -> Dataset<T> {
        ops::sample::sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset)
    }

    /// Elements taken from `datasets[choice]` for each `choice` that `choices` yields
    /// (tf.data's `choose_from_datasets`).
    ///
    /// A choice outside `0..datasets.len()` is an error element. When the chosen input has run
    /// out, `stop_on_empty_dataset` (tf.data's default: `true`) ends the dataset; otherwise that
    /// choice is skipped.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::choose_from_datasets(
    ///     vec![Dataset::range(0, 3), Dataset::range(10, 15)],
    ///     Dataset::range(0, 2).repeat_n(3),
    ///     true,
    /// );
    /// assert_eq!(ds.collect().await?, [0, 10, 1, 11, 2, 12]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn choose_from_datasets(
        datasets: Vec<Dataset<T>>,
        choices: Dataset<i64>,
        stop_on_empty_dataset: bool,
    ) -> Dataset<T> {
        ops::sample::choose_from_datasets(datasets, choices, stop_on_empty_dataset)
    }
}

// ---------------------------------------------------------------------------------------------
// Random transformations: reproducible per-element randomness.
// ---------------------------------------------------------------------------------------------
impl<T: Send + 'static> Dataset<T> {
    /// Applies `f` to every element with a random generator of that element's own, on
    /// `parallelism` blocking threads (Grain's `RandomMapTransform`; in tf.data, a map whose
    /// function uses stateless random ops seeded per element): the way to write random
    /// augmentations that give the same output whatever the parallelism.
    ///
    /// The generator is ChaCha8, keyed by (seed, epoch) and set to stream `index`, where
    /// `index` is the element's position in this stage's input (counting error elements too)
    /// and `epoch` counts the iterations of this recipe (0 for the first `iter()`, then 1, ...).
    /// So an element's randomness depends only on (seed, epoch, index): never on which worker
    /// runs the call, in what order, or how many workers there are. The seed is `seed`, else
    /// one derived from the global [`Options::seed`](crate::Options) and the stage's position,
    /// else one drawn from OS entropy when the recipe is made (so unseeded pipelines differ
    /// between runs, as for [`shuffle`](Dataset::shuffle)).
    ///
    /// Calls run on [`map_parallel`](Dataset::map_parallel)'s machinery: groups of
    /// consecutive elements on `parallelism` blocking threads.
    ///
    /// `f` cannot fail; for a function returning `anyhow::Result<U>` use
    /// [`try_random_map`](Dataset::try_random_map). The generator is [`ChaCha8Rng`](crate::ChaCha8Rng)
    /// of the `rand` version this crate re-exports as [`streamload::rand`](crate::rand): bring
    /// its traits into scope from there (`use streamload::rand::Rng;`), so a different major
    /// version of `rand` in your own dependencies cannot get in the way.
    ///
    /// # Examples
    ///
    /// ```
    /// use streamload::rand::Rng;
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let noisy = |p: usize| {
    ///     Dataset::range(0, 100).random_map(p, Some(7), |x, rng| x * 1000 + rng.random_range(0..1000))
    /// };
    /// let one = noisy(1).collect().await?;
    /// assert_eq!(one, noisy(4).collect().await?); // the same whatever the parallelism
    /// let ds = noisy(2);
    /// let (a, b) = (ds.collect().await?, ds.collect().await?);
    /// assert_eq!(a, one);
    /// assert_ne!(a, b); // fresh randomness in the next epoch
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Ordering
    ///
    /// Input order, unless the pipeline's [`Options::deterministic`](crate::Options) is
    /// `false`: then elements come as their calls finish, each still with its own randomness.
    /// The results are reproducible as long as this stage's input order is.
    ///
    /// # Errors
    ///
    /// A panic in `f` becomes an error element in that element's place
    /// ([`Error::WorkerPanicked`](crate::Error)); the epoch goes on.
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch cancels queued calls; a running group stops at its next element.
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    pub fn random_map<U: Send + 'static>(
        &self,
        parallelism: impl Into<Parallelism>,
        seed: Option<u64>,
        f: impl Fn(T, &mut rand_chacha::ChaCha8Rng) -> U + Send + Sync + 'static,
    ) -> Dataset<U> {
        self.try_random_map(parallelism, seed, move |x, rng| Ok(f(x, rng)))
    }

    /// Like [`random_map`](Dataset::random_map), for a function that can fail: an `Err`
    /// becomes an error element in the element's place (drop those with
    /// [`ignore_errors`](Dataset::ignore_errors)); the epoch goes on.
    ///
    /// ```
    /// use streamload::Dataset;
    /// use streamload::rand::Rng;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 4).try_random_map(2, Some(1), |x, rng| {
    ///     anyhow::ensure!(x != 2, "element {x} is bad");
    ///     Ok(x + 10 * rng.random_range(0..10))
    /// });
    /// let out = ds.ignore_errors().collect().await?;
    /// assert_eq!(out.iter().map(|y| y % 10).collect::<Vec<_>>(), [0, 1, 3]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    pub fn try_random_map<U: Send + 'static>(
        &self,
        parallelism: impl Into<Parallelism>,
        seed: Option<u64>,
        f: impl Fn(T, &mut rand_chacha::ChaCha8Rng) -> anyhow::Result<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        let parallelism = nonzero(parallelism.into(), "random_map");
        ops::random_map::dataset(self, parallelism, seed, Arc::new(f))
    }
}

// ---------------------------------------------------------------------------------------------
// Transformations.
// ---------------------------------------------------------------------------------------------
impl<T: Send + 'static> Dataset<T> {
    /// Applies `f` to every element, in order, on the consumer's task (tf.data's `map` without
    /// `num_parallel_calls`). For CPU-heavy functions use [`map_parallel`](Dataset::map_parallel).
    ///
    /// `f` cannot fail. A function that returns `anyhow::Result<U>` belongs in
    /// [`try_map`](Dataset::try_map): given to `map`, it would make a `Dataset<Result<U>>`
    /// whose errors are ordinary elements, never error elements. Every mapping operation comes
    /// in these two forms: `map` / `try_map`, [`map_parallel`](Dataset::map_parallel) /
    /// [`try_map_parallel`](Dataset::try_map_parallel), [`map_async`](Dataset::map_async) /
    /// [`try_map_async`](Dataset::try_map_async), [`random_map`](Dataset::random_map) /
    /// [`try_random_map`](Dataset::try_random_map).
    ///
    /// # Errors
    ///
    /// A panic in `f` becomes an error element ([`Error::WorkerPanicked`](crate::Error)); the
    /// epoch goes on.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(0, 5).map(|x| x * x).collect().await?, [0, 1, 4, 9, 16]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn map<U: Send + 'static>(&self, f: impl Fn(T) -> U + Send + Sync + 'static) -> Dataset<U> {
        let f = Arc::new(f);
        self.unary_resumable(
            "map",
            self.cardinality(),
            Counting::ByInput,
            move |ctx, input| {
                let f = Arc::clone(&f);
                ops::map::Map::new(input, move |x| Ok(f(x)), ctx.own_counters())
            },
        )
    }

    /// Like [`map`](Dataset::map), for a function that can fail: an `Err` becomes an error
    /// element in the element's place (drop those with [`ignore_errors`](Dataset::ignore_errors)).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::from_vec(vec![1.0f32, 0.0, 2.0])
    ///     .try_map(|x| if x == 0.0 { anyhow::bail!("division by zero") } else { Ok(1.0 / x) });
    /// assert_eq!(ds.ignore_errors().collect().await?, [1.0, 0.5]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn try_map<U: Send + 'static>(
        &self,
        f: impl Fn(T) -> anyhow::Result<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        let f = Arc::new(f);
        let card = self.cardinality();
        self.unary_resumable("map", card, Counting::ByInput, move |ctx, input| {
            let f = Arc::clone(&f);
            ops::map::Map::new(input, move |x| f(x), ctx.own_counters())
        })
    }

    /// Applies a CPU-bound function on `parallelism` blocking threads at once (tf.data's
    /// `map(f, num_parallel_calls=...)`).
    ///
    /// `f` cannot fail; for a function returning `anyhow::Result<U>` use
    /// [`try_map_parallel`](Dataset::try_map_parallel).
    ///
    /// Calls run on `parallelism` threads of streamload's own (started at the first poll;
    /// never the async workers, nor tokio's blocking pool, which the workers would hold for the
    /// whole epoch and so could starve the readers of pipelines running at once), which take
    /// groups of consecutive elements from a queue the stream keeps
    /// topped up, so no worker waits for the consumer. A group is sized from the measured cost
    /// of `f` to take about 1 ms (one element for slow functions, up to 256 for cheap ones),
    /// so the hand-over costs little whatever `f` costs. At most `2 × parallelism` groups are
    /// in flight (queued, running, or finished and waiting for their turn). When elements are
    /// byte strings (`Bytes`, `Vec<u8>`: records to parse), a worker asks the cache for the
    /// first and last lines of the element two calls ahead while `f` runs, so records that
    /// come out of a large shuffle buffer cold do not stall `f` one read at a time.
    ///
    /// # Autotune
    ///
    /// With `AUTOTUNE`, the stage starts [`Options::cpu_budget`](crate::Options) workers (the
    /// cores) and the epoch's tuner sets workers aside while they are busy less than 45% of
    /// the time (the stage is not the bottleneck) and brings them back while the consumer
    /// waits on a stage whose workers are busy; all autotuned stages together stay within
    /// the CPU budget. The report shows the number in use.
    ///
    /// # Ordering
    ///
    /// Input order, unless the pipeline's [`Options::deterministic`](crate::Options) is
    /// `false`, in which case elements come in the order their calls finish.
    ///
    /// # Errors
    ///
    /// A panic in `f` becomes an error element in that element's place
    /// ([`Error::WorkerPanicked`](crate::Error)); the epoch goes on.
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch cancels queued calls; a running group stops at its next element.
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    ///
    /// ```
    /// use streamload::{AUTOTUNE, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 100).map_parallel(AUTOTUNE, |x| x * 2);
    /// assert_eq!(ds.collect().await?, (0..100).map(|x| x * 2).collect::<Vec<_>>());
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn map_parallel<U: Send + 'static>(
        &self,
        parallelism: impl Into<Parallelism>,
        f: impl Fn(T) -> U + Send + Sync + 'static,
    ) -> Dataset<U> {
        self.try_map_parallel(parallelism, move |x| Ok(f(x)))
    }

    /// Like [`map_parallel`](Dataset::map_parallel), for a function that can fail: an `Err`
    /// becomes an error element in the element's place (drop those with
    /// [`ignore_errors`](Dataset::ignore_errors)); the epoch goes on.
    ///
    /// ```
    /// use streamload::{AUTOTUNE, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::from_vec(vec!["1", "x", "3"]).try_map_parallel(AUTOTUNE, |s| Ok(s.parse::<i64>()?));
    /// let mut epoch = ds.iter();
    /// # use futures::StreamExt;
    /// assert_eq!(epoch.next().await.unwrap()?, 1);
    /// assert!(epoch.next().await.unwrap().is_err()); // "x" is an error element
    /// assert_eq!(epoch.next().await.unwrap()?, 3);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    pub fn try_map_parallel<U: Send + 'static>(
        &self,
        parallelism: impl Into<Parallelism>,
        f: impl Fn(T) -> anyhow::Result<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        let parallelism = nonzero(parallelism.into(), "map_parallel");
        let f: Arc<dyn Fn(T) -> anyhow::Result<U> + Send + Sync> = Arc::new(f);
        self.unary_with(
            "map_parallel",
            self.cardinality(),
            Counting::Wrapped,
            move |ctx, input| {
                let build = |ctx: &Ctx| input.build(ctx);
                let input = ops::parallel_map::Input::of(input, &build);
                ops::parallel_map::build(
                    ctx,
                    &input,
                    Arc::clone(&f),
                    parallelism,
                    "map_parallel",
                    Vec::new(),
                )
            },
        )
    }

    /// Applies an async function to every element, up to `parallelism` calls at once, each
    /// call a spawned tokio task (for I/O-bound work: fetching, opening files).
    ///
    /// `f`'s futures cannot fail; for futures of `anyhow::Result<U>` use
    /// [`try_map_async`](Dataset::try_map_async).
    ///
    /// # Ordering
    ///
    /// Input order (`buffered`), or completion order (`buffer_unordered`) when the pipeline's
    /// [`Options::deterministic`](crate::Options) is `false`.
    ///
    /// # Errors and cancellation
    ///
    /// A panic becomes an error element; dropping the epoch aborts the tasks.
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 4).map_async(2, |x| async move { x + 1 });
    /// assert_eq!(ds.collect().await?, [1, 2, 3, 4]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn map_async<U, F, Fut>(&self, parallelism: impl Into<Parallelism>, f: F) -> Dataset<U>
    where
        U: Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = U> + Send + 'static,
    {
        use futures::FutureExt;
        self.try_map_async(parallelism, move |x| f(x).map(anyhow::Ok))
    }

    /// Like [`map_async`](Dataset::map_async), for async functions that can fail: an `Err`
    /// becomes an error element in the element's place (drop those with
    /// [`ignore_errors`](Dataset::ignore_errors)); the epoch goes on.
    ///
    /// # Errors and cancellation
    ///
    /// An `Err` or a panic becomes an error element; dropping the epoch aborts the tasks.
    ///
    /// # Panics
    ///
    /// If `parallelism` is `Fixed(0)`.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 4).try_map_async(2, |x| async move {
    ///     anyhow::ensure!(x != 1, "no {x}");
    ///     Ok(x + 1)
    /// });
    /// assert_eq!(ds.ignore_errors().collect().await?, [1, 3, 4]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn try_map_async<U, F, Fut>(&self, parallelism: impl Into<Parallelism>, f: F) -> Dataset<U>
    where
        U: Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = anyhow::Result<U>> + Send + 'static,
    {
        let parallelism = nonzero(parallelism.into(), "map_async");
        let f = Arc::new(f);
        self.unary_with(
            "map_async",
            self.cardinality(),
            Counting::Wrapped,
            move |ctx, input| ops::map_async::build(ctx, input, &f, parallelism.resolve()),
        )
    }

    /// Keeps the elements for which `predicate` is true (tf.data's `filter`). Error elements
    /// pass through.
    pub fn filter(&self, predicate: impl Fn(&T) -> bool + Send + Sync + 'static) -> Dataset<T> {
        let p = Arc::new(predicate);
        self.unary_resumable(
            "filter",
            Cardinality::Unknown,
            Counting::ByStage,
            move |ctx, input| ops::filter::Filter::new(input, Arc::clone(&p), ctx.own_counters()),
        )
    }

    /// Maps each element to a dataset and yields all of their elements in turn (tf.data's
    /// `flat_map`; the same as `interleave(1, 1, f)`).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(1, 4).flat_map(|x| Dataset::range(0, x));
    /// assert_eq!(ds.collect().await?, [0, 0, 1, 0, 1, 2]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn flat_map<U: Send + 'static>(
        &self,
        f: impl Fn(T) -> Dataset<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        self.interleave(1, 1, f)
    }

    /// Maps each element to a dataset and cycles through `cycle_length` of them at once,
    /// `block_length` elements from each in turn (tf.data's `interleave`, sequential).
    ///
    /// The order is exactly tf.data's: an exhausted inner dataset frees its slot and the cursor
    /// moves on at once; the next input element is opened into the freed slot only when the
    /// cursor comes back to it. For reading many files concurrently see
    /// [`parallel_interleave`](Dataset::parallel_interleave).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(1, 4).interleave(2, 1, |x| Dataset::range(10 * x, 10 * x + 3));
    /// assert_eq!(ds.collect().await?, [10, 20, 11, 21, 12, 22, 30, 31, 32]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `cycle_length` is `Fixed(0)` or `block_length` is 0.
    pub fn interleave<U: Send + 'static>(
        &self,
        cycle_length: impl Into<Parallelism>,
        block_length: usize,
        f: impl Fn(T) -> Dataset<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        let cycle_length = nonzero(cycle_length.into(), "interleave: cycle_length");
        assert!(
            block_length > 0,
            "interleave: block_length must be greater than zero."
        );
        let f = Arc::new(f);
        let name = if matches!(cycle_length, Parallelism::Fixed(1)) && block_length == 1 {
            "flat_map"
        } else {
            "interleave"
        };
        self.unary_with(
            name,
            Cardinality::Unknown,
            Counting::Wrapped,
            move |ctx, input| {
                ops::interleave::build(
                    ctx,
                    input,
                    &f,
                    ctx.nested(),
                    cycle_length.resolve(),
                    block_length,
                    name,
                )
            },
        )
        .keyed(
            Key::new()
                .word(cycle_length.resolve() as u64)
                .word(block_length as u64)
                .finish(),
        )
    }

    /// [`interleave`](Dataset::interleave) with each open inner dataset driven by a task of its
    /// own (tf.data's `interleave(..., num_parallel_calls=...)`): the way to read many files at
    /// once and hide storage latency.
    ///
    /// `num_parallel_calls` is how many inner datasets are read at once: the `cycle_length`
    /// open ones, plus `num_parallel_calls - cycle_length` opened ahead of the cursor when it
    /// is larger. `AUTOTUNE` opens `cycle_length` ahead (`2 * cycle_length` readers), as
    /// tf.data's parallel interleave prefetches input elements (its default: twice the
    /// cycle) to overlap opening the next files, a round trip each on object storage, with
    /// reading the current ones. `Fixed(cycle_length)` opens none ahead.
    ///
    /// # Memory
    ///
    /// Each reader holds at most `max(block_length, 128)` elements ahead of the consumer,
    /// handed over in chunks of half that, plus what is left of the chunk being read, and
    /// what its inner dataset buffers (for files, the read-ahead blocks).
    ///
    /// # Ordering
    ///
    /// With deterministic options (the default) the order is exactly that of `interleave`,
    /// except that an error element from an inner dataset takes a place in its block, as in
    /// tf.data's parallel interleave (its sequential interleave does not count it).
    /// Otherwise the cursor skips inner datasets with nothing ready, so output follows arrival.
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch aborts every reader task.
    ///
    /// # Panics
    ///
    /// If `cycle_length` or `num_parallel_calls` is `Fixed(0)` or `block_length` is 0.
    ///
    /// ```
    /// use streamload::{AUTOTUNE, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(1, 4).parallel_interleave(2, 1, AUTOTUNE, |x| Dataset::range(10 * x, 10 * x + 3));
    /// assert_eq!(ds.collect().await?, [10, 20, 11, 21, 12, 22, 30, 31, 32]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn parallel_interleave<U: Send + 'static>(
        &self,
        cycle_length: impl Into<Parallelism>,
        block_length: usize,
        num_parallel_calls: impl Into<Parallelism>,
        f: impl Fn(T) -> Dataset<U> + Send + Sync + 'static,
    ) -> Dataset<U> {
        let cycle_length = nonzero(cycle_length.into(), "parallel_interleave: cycle_length");
        let num_parallel_calls = nonzero(
            num_parallel_calls.into(),
            "parallel_interleave: num_parallel_calls",
        );
        assert!(
            block_length > 0,
            "parallel_interleave: block_length must be greater than zero."
        );
        let f = Arc::new(f);
        self.unary_with(
            "parallel_interleave",
            Cardinality::Unknown,
            Counting::Wrapped,
            move |ctx, input| {
                let cycle = cycle_length.resolve();
                let parallel = match num_parallel_calls {
                    Parallelism::Fixed(n) => n,
                    Parallelism::Autotune => 2 * cycle,
                };
                if let Some(stats) = ctx.stage_counters() {
                    stats.set_nested_detached(parallel.max(cycle));
                    // The readers as the user asked for them: AUTOTUNE's readers opened
                    // ahead of the cycle are not shown as workers of their own.
                    stats.set_parallelism(match num_parallel_calls {
                        Parallelism::Fixed(_) => parallel.max(cycle),
                        Parallelism::Autotune => cycle,
                    });
                }
                ops::parallel_interleave::build(
                    ctx,
                    input,
                    &f,
                    ctx.nested(),
                    ops::parallel_interleave::Config {
                        cycle_length: cycle,
                        block_length,
                        prefetch_input_elements: parallel.saturating_sub(cycle),
                        buffer_output_elements: block_length.max(128),
                        deterministic: ctx.options().is_deterministic(),
                    },
                )
            },
        )
        // Not `num_parallel_calls`: with deterministic options the order is `interleave`'s
        // whatever it is (and a nondeterministic interleave cannot be saved).
        .keyed(
            Key::new()
                .word(cycle_length.resolve() as u64)
                .word(block_length as u64)
                .finish(),
        )
    }

    /// Groups consecutive elements into vectors of `batch_size`; the last may be shorter
    /// (tf.data's `batch(batch_size)`). An error element passes through at once and, as in
    /// tf.data, takes the partial batch being filled with it: the elements gathered before it
    /// are dropped, and the next batch starts after it.
    ///
    /// # Panics
    ///
    /// If `batch_size` is 0.
    pub fn batch(&self, batch_size: usize) -> Dataset<Vec<T>> {
        self.batch_with(batch_size, false)
    }

    /// Like [`batch`](Dataset::batch), dropping a final short batch (tf.data's
    /// `batch(batch_size, drop_remainder=True)`).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(0, 7).batch_drop_remainder(3).collect().await?, [[0, 1, 2], [3, 4, 5]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn batch_drop_remainder(&self, batch_size: usize) -> Dataset<Vec<T>> {
        self.batch_with(batch_size, true)
    }

    fn batch_with(&self, batch_size: usize, drop_remainder: bool) -> Dataset<Vec<T>> {
        assert!(
            batch_size > 0,
            "batch: Batch size must be greater than zero."
        );
        let card = ops::batch::cardinality(self.cardinality(), batch_size as u64, drop_remainder);
        self.unary_with("batch", card, Counting::Wrapped, move |ctx, input| {
            ops::batch::build(ctx, input, batch_size, drop_remainder)
        })
        .keyed(batch_size as u64 ^ (u64::from(drop_remainder) << 63))
    }

    /// Splits every element into its rows (tf.data's `unbatch`): the items of a `Vec` batch,
    /// or the slices along the first dimension of the `ndarray` batches that
    /// [`collate`](Dataset::collate) and [`padded_batch`](Dataset::padded_batch) make (an
    /// `Array2<f32>` into `Array1<f32>`s, an `Array1<i64>` into `i64`s, a tuple of arrays into
    /// tuples of rows); see [`Unbatch`](crate::tensor::Unbatch) for every type. Cardinality:
    /// infinite for an infinite input, else unknown (tf.data knows more only from static
    /// shapes).
    ///
    /// ```
    /// use ndarray::{array, Array1};
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(0, 5).batch(2).unbatch().collect().await?, [0, 1, 2, 3, 4]);
    ///
    /// // Padded (or collated) batches split back into rows, as in tf.data.
    /// let seqs = Dataset::from_vec(vec![vec![1i64], vec![2, 2], vec![3, 3, 3]]);
    /// let rows: Vec<Array1<i64>> = seqs.padded_batch(2, None, None, false).unbatch().collect().await?;
    /// assert_eq!(rows, [array![1, 0], array![2, 2], array![3, 3, 3]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// An element that cannot be split is an error element naming it (`unbatch: element 3:
    /// ...`; [`Error::InvalidArgument`](crate::Error)), and the epoch goes on: a 0-d `ArrayD`
    /// or `Tensor` ("Cannot unbatch an input with scalar components.", TensorFlow's words), or
    /// a tuple whose components have different numbers of rows. An error element of the input
    /// passes through in its place.
    pub fn unbatch(&self) -> Dataset<T::Row>
    where
        T: Unbatch,
        T::Row: Send + 'static,
    {
        // As tf.data without a static batch size: infinite stays infinite, the rest is unknown.
        let card = match self.cardinality() {
            Cardinality::Infinite => Cardinality::Infinite,
            _ => Cardinality::Unknown,
        };
        self.unary_with("unbatch", card, Counting::Wrapped, |ctx, input| {
            ops::unbatch::build(ctx, input, "unbatch")
        })
    }

    /// Re-groups batches into batches of `batch_size` (tf.data's `rebatch(batch_size,
    /// drop_remainder)`; the same elements as `unbatch().batch(batch_size)`, with
    /// `drop_remainder` dropping a final short batch). It takes what
    /// [`unbatch`](Dataset::unbatch) takes and yields `Vec`s of rows: add
    /// [`collate`](Dataset::collate) to stack them into arrays again. Cardinality unknown.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 7).batch(3).rebatch(2, false);
    /// assert_eq!(ds.collect().await?, [vec![0, 1], vec![2, 3], vec![4, 5], vec![6]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As [`unbatch`](Dataset::unbatch); an error element takes the batch being filled with
    /// it, as in [`batch`](Dataset::batch).
    ///
    /// # Panics
    ///
    /// If `batch_size` is 0 (TensorFlow 2.21's `rebatch(0)` yields empty batches forever).
    pub fn rebatch(&self, batch_size: usize, drop_remainder: bool) -> Dataset<Vec<T::Row>>
    where
        T: Unbatch,
        T::Row: Send + 'static,
    {
        assert!(
            batch_size > 0,
            "rebatch: Batch size must be greater than zero."
        );
        self.rebatch_with(ops::batch::Sizes::One(batch_size), drop_remainder)
            .keyed(batch_size as u64 ^ (u64::from(drop_remainder) << 63))
    }

    /// Re-groups batches into batches whose sizes cycle through `batch_sizes` (tf.data's
    /// `rebatch` with a list of batch sizes): `batch_sizes[0]` elements, then
    /// `batch_sizes[1]`, ..., then `batch_sizes[0]` again. The final batch may be shorter
    /// than its turn's size; `drop_remainder` drops it, as in tf.data. Otherwise as
    /// [`rebatch`](Dataset::rebatch).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 8).batch(4).rebatch_sizes(&[2, 1, 1], false);
    /// assert_eq!(ds.collect().await?, [vec![0, 1], vec![2], vec![3], vec![4, 5], vec![6], vec![7]]);
    /// let ds = Dataset::range(0, 9).batch(4).rebatch_sizes(&[2, 3], true);
    /// assert_eq!(ds.collect().await?, [vec![0, 1], vec![2, 3, 4], vec![5, 6]]); // [7, 8] of 3 dropped
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As [`rebatch`](Dataset::rebatch).
    ///
    /// # Panics
    ///
    /// If `batch_sizes` is empty or holds a 0.
    pub fn rebatch_sizes(&self, batch_sizes: &[usize], drop_remainder: bool) -> Dataset<Vec<T::Row>>
    where
        T: Unbatch,
        T::Row: Send + 'static,
    {
        assert!(
            !batch_sizes.is_empty(),
            "rebatch: batch_sizes must not be empty."
        );
        assert!(
            batch_sizes.iter().all(|&n| n > 0),
            "rebatch: Batch size must be greater than zero, but batch_sizes is {batch_sizes:?}."
        );
        let key = batch_sizes
            .iter()
            .fold(u64::from(drop_remainder), |h, &n| mix64(h ^ n as u64));
        self.rebatch_with(ops::batch::Sizes::Cycle(batch_sizes.into()), drop_remainder)
            .keyed(key)
    }

    /// `rebatch` and `rebatch_sizes`: `unbatch`, then `batch` (both saving their positions).
    fn rebatch_with(&self, sizes: ops::batch::Sizes, drop_remainder: bool) -> Dataset<Vec<T::Row>>
    where
        T: Unbatch,
        T::Row: Send + 'static,
    {
        self.unary_with(
            "rebatch",
            Cardinality::Unknown,
            Counting::Wrapped,
            move |ctx, input| {
                let rows = |ctx: &Ctx| ops::unbatch::build(ctx, input, "rebatch");
                let config = ops::batch::Config {
                    sizes: sizes.clone(),
                    drop_remainder,
                    stage: "rebatch",
                };
                ops::batch::build_with(
                    ctx,
                    &rows,
                    |e| ops::unbatch::Unbatch::failed(e, "rebatch"),
                    config,
                )
            },
        )
    }

    /// Randomly shuffles the elements with a buffer of `buffer_size` (tf.data's `shuffle`),
    /// with a fresh order every iteration.
    ///
    /// Fills the buffer, then repeatedly yields a uniformly chosen buffered element and puts
    /// the next input in its place, so output `i` comes from the first `i + buffer_size`
    /// inputs. The RNG is ChaCha8 seeded by `seed` (else the global seed of the options, else
    /// OS entropy drawn when the recipe is made) mixed with the iteration number, so a seeded
    /// pipeline gives the same orders on every run.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 10).shuffle(10, Some(42));
    /// let (a, b) = (ds.collect().await?, ds.collect().await?);
    /// assert_ne!(a, b); // reshuffled each iteration
    /// let mut sorted = a.clone();
    /// sorted.sort();
    /// assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `buffer_size` is 0.
    pub fn shuffle(&self, buffer_size: usize, seed: Option<u64>) -> Dataset<T> {
        self.shuffle_with(buffer_size, seed, true)
    }

    /// [`shuffle`](Dataset::shuffle) with tf.data's `reshuffle_each_iteration` flag: with
    /// `false`, every iteration of this dataset yields the same order.
    pub fn shuffle_with(
        &self,
        buffer_size: usize,
        seed: Option<u64>,
        reshuffle_each_iteration: bool,
    ) -> Dataset<T> {
        assert!(
            buffer_size > 0,
            "shuffle: buffer_size must be greater than zero or UNKNOWN_CARDINALITY (tf.data's \
             -2, for the whole dataset, which streamload does not take)."
        );
        ops::shuffle::dataset(self, buffer_size, seed, reshuffle_each_iteration)
    }

    /// Repeats the dataset forever (tf.data's `repeat()`). Each repetition builds the upstream
    /// anew, so shuffles reshuffle. It stops if a repetition yields nothing, rather than
    /// spinning. Cardinality: infinite, unless the input is known to be empty (then 0). For a
    /// given number of repetitions, see [`repeat_n`](Dataset::repeat_n).
    ///
    /// ```
    /// use streamload::{Cardinality, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 2).repeat();
    /// assert_eq!(ds.cardinality(), Cardinality::Infinite);
    /// assert_eq!(ds.take(5).collect().await?, [0, 1, 0, 1, 0]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn repeat(&self) -> Dataset<T> {
        ops::repeat::dataset(self, None)
    }

    /// Repeats the dataset `count` times (tf.data's `repeat(count)`; `0` gives an empty
    /// dataset). Each repetition builds the upstream anew, so shuffles reshuffle. Cardinality:
    /// `count` times the input's when that is known. To repeat forever, see
    /// [`repeat`](Dataset::repeat).
    ///
    /// ```
    /// use streamload::{Cardinality, Dataset};
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 2).repeat_n(3);
    /// assert_eq!(ds.cardinality(), Cardinality::Finite(6));
    /// assert_eq!(ds.collect().await?, [0, 1, 0, 1, 0, 1]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn repeat_n(&self, count: u64) -> Dataset<T> {
        ops::repeat::dataset(self, Some(count))
    }

    /// The first `count` elements; a negative `count` takes everything (tf.data's `take`).
    /// Error elements are passed on and not counted.
    pub fn take(&self, count: i64) -> Dataset<T> {
        let card = if count < 0 {
            self.cardinality()
        } else {
            match self.cardinality() {
                Cardinality::Finite(n) => Cardinality::Finite(n.min(count as u64)),
                Cardinality::Infinite => Cardinality::Finite(count as u64),
                Cardinality::Unknown => Cardinality::Unknown,
            }
        };
        let limit = if count < 0 { u64::MAX } else { count as u64 };
        self.unary_resumable("take", card, Counting::Wrapped, move |ctx, input| {
            // In replay the elements are ones it passed on: none is held back.
            let limit = match (ctx.replaying(), ctx.restoring()) {
                (Some(_), _) => u64::MAX,
                (None, Some(state)) => state.word(0).unwrap_or(limit),
                (None, None) => limit,
            };
            ops::take::Take::new(input, limit)
        })
        .keyed(limit)
    }

    /// Everything after the first `count` elements; a negative `count` skips everything
    /// (tf.data's `skip`). Error elements are passed on and not counted; as in tf.data, an
    /// error met while skipping starts the count again after it.
    pub fn skip(&self, count: i64) -> Dataset<T> {
        let n = if count < 0 { u64::MAX } else { count as u64 };
        // As tf.data: an infinite or unknown input keeps its cardinality.
        let card = self.cardinality().map_finite(|m| m.saturating_sub(n));
        self.unary_resumable("skip", card, Counting::Wrapped, move |ctx, input| {
            // In replay the elements are ones it passed on: none is skipped.
            let remaining = match (ctx.replaying(), ctx.restoring()) {
                (Some(_), _) => 0,
                (None, Some(state)) => state.word(0).unwrap_or(n),
                (None, None) => n,
            };
            ops::skip::Skip::new(input, n).remaining(remaining)
        })
        .keyed(n)
    }

    /// Elements while `predicate` holds; ends at the first that fails it (tf.data's `take_while`).
    pub fn take_while(&self, predicate: impl Fn(&T) -> bool + Send + Sync + 'static) -> Dataset<T> {
        let p = Arc::new(predicate);
        self.unary_with(
            "take_while",
            Cardinality::Unknown,
            Counting::Wrapped,
            move |ctx, input| ops::take_while::build(ctx, input, Arc::clone(&p)),
        )
    }

    /// Every `num_shards`-th element starting at `index` (tf.data's `shard`), for splitting a
    /// dataset between workers. Error elements reach every shard.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(0, 10).shard(3, 2).collect().await?, [2, 5, 8]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `num_shards` is 0 or `index >= num_shards`.
    pub fn shard(&self, num_shards: u64, index: u64) -> Dataset<T> {
        assert!(
            num_shards > 0,
            "shard: Number of shards must be greater than zero (currently num_shards = 0)."
        );
        assert!(
            index < num_shards,
            "shard: Index must be between 0 and {} (currently index = {index})",
            num_shards - 1
        );
        let card = self
            .cardinality()
            .map_finite(|n| n / num_shards + u64::from(index < n % num_shards));
        self.unary_with("shard", card, Counting::Wrapped, move |ctx, input| {
            ops::shard::build(ctx, input, num_shards, index)
        })
        .keyed(num_shards ^ index.rotate_left(32))
    }

    /// Pairs each element with its index, counting from `start` (tf.data's `enumerate`). An
    /// error element takes an index too, as in tf.data (a zip with a counter).
    pub fn enumerate(&self, start: i64) -> Dataset<(i64, T)> {
        self.unary_with(
            "enumerate",
            self.cardinality(),
            Counting::Wrapped,
            move |ctx, input| ops::enumerate::build(ctx, input, start),
        )
        .keyed(start as u64)
    }

    /// Appends the elements of `other` (tf.data's `concatenate`).
    pub fn concatenate(&self, other: &Dataset<T>) -> Dataset<T> {
        ops::concatenate::concatenate(self, other)
    }

    /// Pairs this dataset's elements with `other`'s (see [`Dataset::zip`]).
    pub fn zip_with<U: Send + 'static>(&self, other: &Dataset<U>) -> Dataset<(T, U)> {
        ops::zip::zip(self.clone(), other.clone())
    }

    /// A running state over the elements: `f(state, x)` returns the next state and the output
    /// (tf.data's `scan`). Its state need not be serializable, so a checkpoint through it is
    /// refused, naming `scan`: [`scan_resumable`](Dataset::scan_resumable) saves it.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let sums = Dataset::range(1, 6).scan(0, |s, x| (s + x, s + x));
    /// assert_eq!(sums.collect().await?, [1, 3, 6, 10, 15]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn scan<S, U>(
        &self,
        initial_state: S,
        f: impl Fn(S, T) -> (S, U) + Send + Sync + 'static,
    ) -> Dataset<U>
    where
        S: Clone + Send + Sync + 'static,
        U: Send + 'static,
    {
        let f = Arc::new(f);
        self.unary_with(
            "scan",
            self.cardinality(),
            Counting::Wrapped,
            move |ctx, input| ops::scan::build(ctx, input, &initial_state, &f, None),
        )
        .resumable(false)
    }

    /// [`scan`](Dataset::scan) with a running state that checkpoints save
    /// ([`Epoch::checkpoint`]): it is serialized with serde (postcard's encoding) into the
    /// checkpoint, and read back by [`Dataset::iter_from`]. The elements are the same as
    /// `scan`'s.
    ///
    /// A scan's elements depend on the running state before them: when a stage after the
    /// scan holds its elements by position (a `shuffle` after it, or a `batch` after it when
    /// a shuffle comes before it), each element's position is its input element's with the
    /// running state it was made with, and a resume applies `f` to that state again. Such a
    /// position costs the state's serialized size, so keep the state small there (a plain
    /// `scan` is refused instead).
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::{Checkpoint, Dataset};
    /// # tokio_test::block_on(async {
    /// let sums = || Dataset::range(1, 6).scan_resumable(0i64, |s, x| (s + x, s + x));
    /// let mut epoch = sums().iter();
    /// assert_eq!(epoch.next().await.unwrap()?, 1);
    /// assert_eq!(epoch.next().await.unwrap()?, 3);
    /// let saved = epoch.checkpoint()?.to_bytes();
    /// let rest = sums().iter_from(&Checkpoint::from_bytes(&saved)?)?;
    /// let rest: Vec<i64> = rest.map(|x| x.unwrap()).collect().await;
    /// assert_eq!(rest, [6, 10, 15]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As `scan`: a panic in `f` is an error element and ends the stage.
    pub fn scan_resumable<S, U>(
        &self,
        initial_state: S,
        f: impl Fn(S, T) -> (S, U) + Send + Sync + 'static,
    ) -> Dataset<U>
    where
        S: Clone + serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static,
        U: Send + 'static,
    {
        let f = Arc::new(f);
        let codec = ops::scan::Codec::postcard();
        let key = (codec.save)(&initial_state).map_or(0, |bytes| {
            bytes.iter().fold(0x5CA7, |h, &b| mix64(h ^ u64::from(b)))
        });
        self.unary_with(
            "scan",
            self.cardinality(),
            Counting::Wrapped,
            move |ctx, input| ops::scan::build(ctx, input, &initial_state, &f, Some(codec)),
        )
        .keyed(key)
    }

    /// Drops error elements (tf.data's `ignore_errors`). Sources whose damage leaves the rest
    /// unreadable (a corrupt file) end that file after the error, so this goes on with the next.
    pub fn ignore_errors(&self) -> Dataset<T> {
        // tf.data reports unknown whatever the input (even an infinite one).
        self.unary_resumable(
            "ignore_errors",
            Cardinality::Unknown,
            Counting::Wrapped,
            |_, input| ops::ignore_errors::IgnoreErrors::new(input),
        )
    }

    /// Skips error elements within an error `budget`, and fails the epoch past it: tf.data's
    /// [`ignore_errors`](Dataset::ignore_errors) with SPDL's `max_failures` (a count,
    /// [`ErrorBudget::count`](crate::ErrorBudget::count), or a rate,
    /// [`ErrorBudget::rate`](crate::ErrorBudget::rate)). Every skipped element is reported to
    /// the budget's [`Quarantine`](crate::Quarantine) (a JSON-lines file or a callback: the
    /// file or URL, record index and byte offset of damaged data, the element's index, the
    /// error) and counted in the stage's statistics
    /// ([`StageSnapshot::skipped`](crate::StageSnapshot::skipped)).
    ///
    /// Place it at the end of a pipeline for a budget of the whole pipeline (errors travel
    /// downstream as elements: a reader's damaged records, a `map`'s or `map_parallel`'s
    /// failed calls), or right after a stage for a budget of that stage. Every reader's errors
    /// come through it: TFRecord, text, CSV and fixed-length files yield an
    /// [`Error::DataLoss`](crate::Error) for damage and then end that file (as in
    /// TensorFlow), except a TFRecord file read with
    /// [`resync`](crate::format::TFRecordDataset::resync), which goes on after the damage, so
    /// that a flipped bit costs one record. See README's "Damaged data".
    ///
    /// # Examples
    ///
    /// ```
    /// use streamload::{Dataset, ErrorBudget, Quarantine};
    /// use std::sync::{Arc, Mutex};
    /// # tokio_test::block_on(async {
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = Arc::clone(&seen);
    /// let budget = ErrorBudget::count(2)
    ///     .quarantine(Quarantine::callback(move |s| log.lock().unwrap().push(s.index)));
    /// let parsed = Dataset::from_iter(["1", "x", "3", "y"])
    ///     .try_map(|s| Ok(s.parse::<i64>()?))
    ///     .ignore_errors_within(budget.clone());
    /// assert_eq!(parsed.collect().await?, [1, 3]);
    /// assert_eq!(*seen.lock().unwrap(), [1, 3], "the indices of the skipped elements");
    ///
    /// // A third error exhausts the budget: the epoch ends with an error summing it up.
    /// let err = Dataset::from_iter(["x", "y", "z", "4"])
    ///     .try_map(|s| Ok(s.parse::<i64>()?))
    ///     .ignore_errors_within(ErrorBudget::count(2))
    ///     .collect()
    ///     .await
    ///     .unwrap_err();
    /// assert!(format!("{err:#}").contains("error budget exhausted (at most 2 errors)"));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// The error that exceeds the budget, in the context of a summary ("error budget
    /// exhausted (...): N errors in M elements; damaged files: ...; first skipped: ..."),
    /// after which the epoch ends. The error keeps its type (`downcast_ref` finds a
    /// `DataLoss`).
    ///
    /// # Checkpoints
    ///
    /// Resumable: the counts of elements seen and errors skipped are saved, so a resumed epoch
    /// goes on with the budget where it was (the summary's lists start afresh).
    pub fn ignore_errors_within(&self, budget: crate::ErrorBudget) -> Dataset<T> {
        let key = budget.key();
        self.unary_with(
            "ignore_errors_within",
            Cardinality::Unknown,
            Counting::Wrapped,
            move |ctx, input| ops::ignore_errors_within::build(ctx, input, &budget),
        )
        .keyed(key)
    }

    /// Runs the upstream in a spawned task that keeps up to `buffer_size` elements ready
    /// (tf.data's `prefetch`), so producing and consuming overlap. `0` adds no stage.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 1000).batch(64).prefetch(1);
    /// let batches = ds.collect().await?;
    /// assert_eq!(batches.len(), 16);
    /// assert_eq!(batches[15], (960..1000).collect::<Vec<_>>());
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// With `AUTOTUNE` the buffer starts at 2 elements and the epoch's tuner doubles it while
    /// the consumer waits on it and the producer finds it full, up to 1,024 elements and within
    /// [`Options::ram_budget`](crate::Options); it halves it when the pipeline's buffers hold
    /// more than the budget. The report shows the size it chose.
    ///
    /// At most `buffer_size` elements wait. The producer runs ahead only while overlapping
    /// pays: while both the consumer's time away between elements and the time the upstream
    /// takes per element exceed 50 us (moving averages), since handing an element to another
    /// thread and waking it costs tens of microseconds. Otherwise, when nothing is ready, the
    /// consumer polls the upstream itself, in order, with no hand-over (a fast consumer of
    /// cheap batches gets them at the speed of the pipeline without prefetch). The same holds
    /// for an autotuned buffer, whose size the tuner sets while the producer runs ahead. A
    /// waiting consumer is woken once per half buffer of elements ready at once. As in tf.data,
    /// prefetch after `batch`.
    ///
    /// # Errors
    ///
    /// A panic in the producer task reaches the consumer as an error element, never as a quiet,
    /// short epoch.
    ///
    /// # Cancellation
    ///
    /// Dropping the epoch aborts the producer task, and with it everything upstream.
    pub fn prefetch(&self, buffer_size: impl Into<Parallelism>) -> Dataset<T> {
        let buffer_size = buffer_size.into();
        if buffer_size == Parallelism::Fixed(0) {
            return self.clone();
        }
        self.unary_with(
            "prefetch",
            self.cardinality(),
            Counting::Wrapped,
            move |ctx, input| {
                // Not detached: the consumer polls the upstream itself when overlap does not pay,
                // so the upstream's busy time is taken out of prefetch's own; but it also runs in
                // the producer task, so prefetch's own time does not bound it.
                if let Some(stats) = ctx.stage_counters() {
                    stats.set_inputs_shared();
                }
                ctx.gauge();
                let knob = match buffer_size {
                    Parallelism::Autotune => ctx.knob(
                        KnobKind::Buffer,
                        runtime::INITIAL_BUFFER,
                        runtime::MAX_BUFFER,
                    ),
                    Parallelism::Fixed(_) => None,
                };
                let fixed = buffer_size.resolve().max(1);
                ops::prefetch::build(ctx, input, fixed, knob)
            },
        )
    }

    /// Names this stage in the statistics and the report (tf.data's `name=` argument of
    /// every transformation): `ds.map_parallel(AUTOTUNE, decode).named("decode")` shows as
    /// `map_parallel (decode)`. The pipeline is otherwise unchanged.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let mut epoch = Dataset::range(0, 4).map(|x| x * 2).named("double").iter();
    /// while let Some(x) = epoch.next().await { x?; }
    /// let stages = epoch.stats().snapshot();
    /// assert!(stages.iter().any(|s| s.display_name() == "map (double)" && s.elements == 4));
    /// assert!(epoch.stats().to_string().contains("map (double)"));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn named(&self, label: &str) -> Dataset<T> {
        let inner = self.clone();
        let label: Arc<str> = label.into();
        // The stage's statistics take the label when they are registered.
        self.same_stage(self.stage.options.clone(), move |ctx| {
            let ctx = Ctx {
                label_next: Some(Arc::clone(&label)),
                ..ctx.clone()
            };
            inner.build(&ctx)
        })
    }

    /// This stage again (the same name, fingerprint and properties), with `options` and built
    /// by `build` (which builds this stage with a context of its own).
    fn same_stage(
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
                build: Box::new(build),
            }),
        }
    }

    /// This dataset's last stage as plumbing the user did not write (a file dataset's list of
    /// names and its interleave): the statistics merge it into the user's stage (see
    /// [`Stats::snapshot`](crate::Stats::snapshot)).
    pub(crate) fn hidden(&self) -> Dataset<T> {
        let inner = self.clone();
        self.same_stage(self.stage.options.clone(), move |ctx| {
            let ctx = Ctx {
                hide_next: true,
                ..ctx.clone()
            };
            inner.build(&ctx)
        })
    }

    /// Applies a transformation function to the whole dataset (tf.data's `apply`).
    pub fn apply<U>(&self, f: impl FnOnce(Dataset<T>) -> Dataset<U>) -> Dataset<U> {
        f(self.clone())
    }

    /// Sets pipeline-wide [`Options`] (tf.data's `with_options`): they apply to every stage of
    /// the pipeline this dataset ends, upstream included.
    ///
    /// ```
    /// use streamload::{Dataset, Options};
    /// let ds = Dataset::range(0, 100).map_parallel(4, |x| x).with_options(Options::new().deterministic(false));
    /// ```
    pub fn with_options(&self, options: Options) -> Dataset<T> {
        let merged = self.stage.options.merge(&options);
        let input = self.clone();
        // Not a stage of its own: it only changes the options, so it is not counted. The
        // options that decide the elements and their order (the global seed, determinism)
        // are part of the recipe; the budgets and statistics are not.
        let key = Key::new()
            .option(merged.seed)
            .option(merged.deterministic.map(u64::from))
            .finish();
        let mut ds = self.same_stage(merged, move |ctx| input.build(ctx));
        if options.seed.is_some() || options.deterministic.is_some() {
            ds = ds.keyed(key);
        }
        ds
    }

    /// Overlapping or strided windows of elements (tf.data's `window(size, shift, stride,
    /// drop_remainder)`), each as a vector (tf.data yields each window as a small dataset:
    /// [`window_datasets`](Dataset::window_datasets) does too).
    ///
    /// Window `k` starts at input `k * shift` and takes every `stride`-th element up to `size`.
    /// Windows cut short by the end are kept unless `drop_remainder`. As in tf.data, an error
    /// element takes its position like any element, and every window that would hold it is
    /// yielded as that error, in its place.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 10).window(3, 2, 2, false);
    /// assert_eq!(ds.collect().await?, vec![vec![0, 2, 4], vec![2, 4, 6], vec![4, 6, 8], vec![6, 8], vec![8]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `size`, `shift` or `stride` is 0.
    pub fn window(
        &self,
        size: usize,
        shift: usize,
        stride: usize,
        drop_remainder: bool,
    ) -> Dataset<Vec<T>>
    where
        T: Clone,
    {
        assert!(size > 0, "window: Window size must be greater than zero.");
        assert!(shift > 0, "window: Window shift must be greater than zero.");
        assert!(
            stride > 0,
            "window: Window stride must be greater than zero."
        );
        let card = ops::window::cardinality(
            self.cardinality(),
            size as u64,
            shift as u64,
            stride as u64,
            drop_remainder,
        );
        self.unary_with("window", card, Counting::Wrapped, move |ctx, input| {
            ops::window::build(ctx, input, size, shift, stride, drop_remainder)
        })
        .keyed(
            mix64(size as u64)
                ^ mix64(shift as u64 ^ 0x5817)
                ^ (stride as u64) << 1
                ^ u64::from(drop_remainder),
        )
    }

    /// [`window`](Dataset::window) with each window as a dataset, as tf.data's `window(size,
    /// shift, stride, drop_remainder)` yields them: so `flat_map(|w| w.batch(n))` and the
    /// other idioms of tf.data carry over. Each window is gathered (as `window` does) and
    /// handed on as [`Dataset::from_vec`]; iterating it does not touch the input again.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 7).window_datasets(3, 2, 1, false).flat_map(|w| w.batch(3));
    /// assert_eq!(ds.collect().await?, vec![vec![0, 1, 2], vec![2, 3, 4], vec![4, 5, 6], vec![6]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As [`window`](Dataset::window): a window that would hold an error element is that
    /// error, in its place.
    ///
    /// # Panics
    ///
    /// If `size`, `shift` or `stride` is 0.
    pub fn window_datasets(
        &self,
        size: usize,
        shift: usize,
        stride: usize,
        drop_remainder: bool,
    ) -> Dataset<Dataset<T>>
    where
        T: Clone + Sync,
    {
        self.window(size, shift, stride, drop_remainder)
            .map(Dataset::from_vec)
    }

    /// Caches the elements in memory (tf.data's `cache()`): the first epoch that runs to its
    /// end fills the cache, and later epochs read from it without running the upstream. An
    /// epoch that is dropped early or meets an error leaves no cache behind, never a truncated
    /// one. The cache holds the whole dataset: use it for data that fits in memory.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 5).shuffle(5, None).cache();
    /// assert_eq!(ds.collect().await?, ds.collect().await?); // the order is frozen
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn cache(&self) -> Dataset<T>
    where
        T: Clone + Sync,
    {
        ops::cache::dataset(self)
    }

    /// Drops elements seen before (tf.data's `unique`). Remembers every distinct element.
    pub fn unique(&self) -> Dataset<T>
    where
        T: Clone + Eq + Hash,
    {
        self.unary_with(
            "unique",
            Cardinality::Unknown,
            Counting::Wrapped,
            ops::unique::build,
        )
        .small(false)
    }

    /// Groups elements by `key_func` into windows of up to `window_size`, and yields the
    /// elements of `reduce_func(key, window)` for each full window (tf.data's
    /// `group_by_window`). At the end, unfinished windows are reduced in ascending key order.
    /// For a window size per key, see [`group_by_window_with`](Dataset::group_by_window_with).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 10).group_by_window(|x| x % 3, |_key, w| w.batch(2), 2);
    /// assert_eq!(ds.collect().await?, vec![vec![0, 3], vec![1, 4], vec![2, 5], vec![6, 9], vec![7], vec![8]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `window_size` is 0.
    pub fn group_by_window<K, U>(
        &self,
        key_func: impl Fn(&T) -> K + Send + Sync + 'static,
        reduce_func: impl Fn(K, Dataset<T>) -> Dataset<U> + Send + Sync + 'static,
        window_size: usize,
    ) -> Dataset<U>
    where
        T: Clone + Sync,
        K: Ord + Clone + Send + Sync + 'static,
        U: Send + 'static,
    {
        assert!(
            window_size > 0,
            "group_by_window: Window size must be greater than zero, but got 0."
        );
        self.group_by_window_with(key_func, reduce_func, move |_| window_size)
            .keyed(window_size as u64)
    }

    /// [`group_by_window`](Dataset::group_by_window) with a window size per key (tf.data's
    /// `group_by_window(key_func, reduce_func, window_size_func=...)`): the window of `key`
    /// is reduced once it holds `window_size_func(&key)` elements.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// // Even numbers in windows of 2, odd ones in windows of 3.
    /// let ds = Dataset::range(0, 10).group_by_window_with(|x| x % 2, |_, w| w.batch(10), |k| *k as usize + 2);
    /// assert_eq!(ds.collect().await?, vec![vec![0, 2], vec![1, 3, 5], vec![4, 6], vec![8], vec![7, 9]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// When `window_size_func` returns 0 for an element's key, that element is an error element
    /// ([`Error::InvalidArgument`](crate::Error), "Window size must be greater than zero, but
    /// got 0.", TensorFlow's words, raised as it does when the window is filled) and the epoch
    /// goes on; a panic in it, in `key_func` or in `reduce_func` is an error element too.
    pub fn group_by_window_with<K, U>(
        &self,
        key_func: impl Fn(&T) -> K + Send + Sync + 'static,
        reduce_func: impl Fn(K, Dataset<T>) -> Dataset<U> + Send + Sync + 'static,
        window_size_func: impl Fn(&K) -> usize + Send + Sync + 'static,
    ) -> Dataset<U>
    where
        T: Clone + Sync,
        K: Ord + Clone + Send + Sync + 'static,
        U: Send + 'static,
    {
        let funcs = Arc::new(ops::group_by_window::Funcs {
            key: key_func,
            reduce: reduce_func,
            window_size: window_size_func,
        });
        self.unary_with(
            "group_by_window",
            Cardinality::Unknown,
            Counting::Wrapped,
            move |ctx, input| ops::group_by_window::build(ctx, input, &funcs),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Tensors in batches: stacked, padded, bucketed, ragged.
// ---------------------------------------------------------------------------------------------
impl<T: Send + 'static> Dataset<Vec<T>> {
    /// Stacks each batch into contiguous arrays with a leading batch dimension: what tf.data's
    /// `batch` does to tensors. `batch(n).collate()` over `(Array3<f32>, i64)` elements yields
    /// `(Array4<f32>, Array1<i64>)` (see [`Collate`](crate::tensor::Collate) for the element
    /// types: scalars, `Vec`s of scalars, `ndarray` arrays, tuples of these).
    ///
    /// Why a step of its own after `batch` rather than a stacking `batch`: a `Dataset<T>` may
    /// hold anything, so `batch` yields `Vec<T>`; `collate` turns any batch into tensors,
    /// whichever operation made it (`batch`, `batch_drop_remainder`, `rebatch`, `window`,
    /// `group_by_window`), and shows as a stage of its own in [`Epoch::stats`]. Each element's
    /// data is copied once, into the batch's buffer. For very large batches, stacking can run
    /// on the worker threads instead:
    /// `batch(n).try_map_parallel(AUTOTUNE, |b| Collate::collate(&b))`.
    ///
    /// ```
    /// use ndarray::{Array1, Array3, Array4};
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 5)
    ///     .map(|i| (Array3::<f32>::from_elem((2, 2, 3), i as f32), i))
    ///     .batch(2)
    ///     .collate();
    /// let batches: Vec<(Array4<f32>, Array1<i64>)> = ds.collect().await?;
    /// assert_eq!(batches[0].0.shape(), [2, 2, 2, 3]);
    /// assert_eq!(batches[0].0[[1, 1, 1, 2]], 1.0);
    /// assert_eq!(batches[2].1.to_vec(), [4]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// A batch whose elements differ in shape is an error element naming the batch, the
    /// component, the element and both shapes: `collate: batch 3: Cannot batch tensors with
    /// different shapes in component 0. First element had shape [2,3] and element 1 had shape
    /// [3,3].` ([`Error::InvalidArgument`](crate::Error); the epoch goes on). After the
    /// batch's name it is tf.data's message word for word (TensorFlow names no batch and ends
    /// with ` [Op:IteratorGetNext]`); [`Collate`](crate::tensor::Collate) lists the messages
    /// that are the crate's own. To batch such
    /// elements, pad them ([`padded_batch`](Dataset::padded_batch)) or keep them ragged
    /// ([`ragged_batch`](Dataset::ragged_batch)).
    pub fn collate(&self) -> Dataset<T::Batch>
    where
        T: Collate,
        T::Batch: Send + 'static,
    {
        self.unary_with(
            "collate",
            self.cardinality(),
            Counting::Wrapped,
            |ctx, input| {
                let batches = input.build(&ctx.for_input(0));
                ops::collate::build(ctx, batches, "collate", |batch: Vec<T>| T::collate(&batch))
            },
        )
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// Batches elements of different shapes by padding them to a common shape (tf.data's
    /// `padded_batch(batch_size, padded_shapes, padding_values, drop_remainder)`).
    ///
    /// Each component (a tuple's fields; see [`PaddedCollate`](crate::tensor::PaddedCollate)) is
    /// padded at the end of every dimension: to its [`PaddedShape`](crate::tensor::PaddedShape)
    /// entry when given (`Some(n)`), else to the longest in the batch. `padding_values` defaults
    /// to `0` / `false` / empty strings. Scalars are stacked. The output is `ndarray` arrays:
    /// `Vec<i64>` elements give `Array2<i64>`, `ArrayD` elements `ArrayD` batches of one more
    /// dimension. Cardinality as [`batch`](Dataset::batch).
    ///
    /// ```
    /// use ndarray::array;
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let seqs = Dataset::from_vec(vec![vec![1i64], vec![3, 3, 3], vec![2, 2]]);
    /// let ds = seqs.padded_batch(2, None, None, false);
    /// assert_eq!(ds.collect().await?, [array![[1, 0, 0], [3, 3, 3]], array![[2, 2]]]);
    ///
    /// // A tuple: token ids padded with -1 to length 4, labels stacked.
    /// let pairs = Dataset::zip(seqs, Dataset::range(0, 3));
    /// let ds = pairs.padded_batch(3, Some((vec![Some(4)], ())), Some((-1, 0)), false);
    /// let (ids, labels) = ds.collect().await?.remove(0);
    /// assert_eq!(ids, array![[1, -1, -1, -1], [3, 3, 3, -1], [2, 2, -1, -1]]);
    /// assert_eq!(labels, array![0, 1, 2]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// An element longer than its padded shape makes its batch an error element,
    /// [`Error::PaddingTooSmall`](crate::Error) ("Attempted to pad to a smaller size than the
    /// input element.", TensorFlow's `DataLossError`), raised when that batch is made, as
    /// tf.data does; earlier batches are yielded and the epoch goes on. Elements of different
    /// ranks, or a padded shape of another rank than `ArrayD` elements, are
    /// [`Error::InvalidArgument`](crate::Error).
    ///
    /// # Panics
    ///
    /// If `batch_size` is 0, or a padded shape has another rank than its `Vec` or fixed-rank
    /// array component (TensorFlow's construction-time `ValueError`, with its message).
    pub fn padded_batch(
        &self,
        batch_size: usize,
        padded_shapes: Option<T::PaddedShapes>,
        padding_values: Option<T::PaddingValues>,
        drop_remainder: bool,
    ) -> Dataset<T::Batch>
    where
        T: PaddedCollate,
        T::Batch: Send + 'static,
    {
        assert!(
            batch_size > 0,
            "padded_batch: Batch size must be greater than zero."
        );
        if let Some(Err(message)) = padded_shapes.as_ref().map(T::check_padded_shapes) {
            panic!("padded_batch: {message}");
        }
        let card = ops::batch::cardinality(self.cardinality(), batch_size as u64, drop_remainder);
        let values = padding_values.unwrap_or_else(T::default_padding_values);
        self.unary_with(
            "padded_batch",
            card,
            Counting::Wrapped,
            move |ctx, input| {
                ops::padded_batch::build(
                    ctx,
                    input,
                    batch_size,
                    drop_remainder,
                    padded_shapes.clone(),
                    values.clone(),
                )
            },
        )
        .keyed(batch_size as u64 ^ (u64::from(drop_remainder) << 63))
    }

    /// Batches rows of different lengths without padding (tf.data's `ragged_batch(batch_size,
    /// drop_remainder)`): `Vec` and array components become a
    /// [`RaggedTensor`](crate::tensor::RaggedTensor) (the rows' values concatenated, plus row
    /// splits), scalars an `Array1`. Only the first dimension of an array may differ between
    /// elements. Cardinality as [`batch`](Dataset::batch).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::from_vec(vec![vec![1i64], vec![3, 3, 3], vec![2, 2]]).ragged_batch(2, false);
    /// let batches = ds.collect().await?;
    /// assert_eq!(batches[0].row_splits(), [0, 1, 4]);
    /// assert_eq!(batches[0].values().to_vec(), [1, 3, 3, 3]);
    /// assert_eq!(batches[1].to_vecs(), vec![vec![2, 2]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// A batch whose arrays differ in rank or after the first dimension is an error element
    /// ([`Error::InvalidArgument`](crate::Error)).
    ///
    /// # Panics
    ///
    /// If `batch_size` is 0.
    pub fn ragged_batch(&self, batch_size: usize, drop_remainder: bool) -> Dataset<T::Ragged>
    where
        T: RaggedCollate,
        T::Ragged: Send + 'static,
    {
        assert!(
            batch_size > 0,
            "ragged_batch: Batch size must be greater than zero."
        );
        let card = ops::batch::cardinality(self.cardinality(), batch_size as u64, drop_remainder);
        self.unary_with(
            "ragged_batch",
            card,
            Counting::Wrapped,
            move |ctx, input| ops::ragged_batch::build(ctx, input, batch_size, drop_remainder),
        )
        .keyed(batch_size as u64 ^ (u64::from(drop_remainder) << 63))
    }

    /// Groups elements of similar length into buckets and pads each bucket's batches
    /// (tf.data's `bucket_by_sequence_length(element_length_func, bucket_boundaries,
    /// bucket_batch_sizes, padded_shapes, padding_values, pad_to_bucket_boundary, no_padding,
    /// drop_remainder)`; the optional arguments are in [`BucketOptions`](crate::BucketOptions)).
    ///
    /// Bucket `i` takes the elements whose `element_length_func` is in
    /// `[bucket_boundaries[i - 1], bucket_boundaries[i])` (the first from 0, the last without
    /// end), and yields a batch padded as [`padded_batch`](Dataset::padded_batch) does as soon
    /// as it holds `bucket_batch_sizes[i]` elements; at the end, the unfinished buckets are
    /// yielded in ascending bucket order (unless `drop_remainder`). This is the order of
    /// tf.data, which builds the operation from `group_by_window` and `padded_batch`. With
    /// `pad_to_bucket_boundary`, the unknown dimensions of bucket `i` are padded to
    /// `bucket_boundaries[i] - 1`: without padded shapes, that is the first dimension (the
    /// sequence; TensorFlow pads every dimension its static shape leaves unknown, and
    /// `ndarray` arrays carry no static shape), the others to the batch's longest.
    /// Cardinality unknown.
    ///
    /// ```
    /// use ndarray::array;
    /// use streamload::{BucketOptions, Dataset};
    /// # tokio_test::block_on(async {
    /// let seqs = Dataset::from_vec(vec![1usize, 4, 2, 6, 3]).map(|n| vec![n as i64; n]);
    /// let ds = seqs.bucket_by_sequence_length(
    ///     |s| s.len(),
    ///     vec![3, 5],
    ///     vec![2, 2, 2],
    ///     BucketOptions::default().padding_values(-1),
    /// );
    /// assert_eq!(
    ///     ds.collect().await?,
    ///     [
    ///         array![[1, -1], [2, 2]],                 // bucket 0 full
    ///         array![[4, 4, 4, 4], [3, 3, 3, -1]],     // bucket 1 full
    ///         array![[6, 6, 6, 6, 6, 6]],              // bucket 2 flushed at the end
    ///     ]
    /// );
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As `padded_batch`; with `no_padding`, as [`collate`](Dataset::collate). With
    /// `pad_to_bucket_boundary`, a batch of the last bucket is an error element ("When
    /// pad_to_bucket_boundary=True, elements must have length < max(bucket_boundaries).",
    /// TensorFlow's assertion). A panic in `element_length_func` is an error element.
    ///
    /// # Panics
    ///
    /// If `bucket_batch_sizes` does not have one more entry than `bucket_boundaries` (with
    /// TensorFlow's message), a batch size is 0, or `padded_shapes` has another rank than the
    /// elements (as [`padded_batch`](Dataset::padded_batch)). Boundaries need not increase:
    /// as in tf.data, an element goes to the first bucket `i` with
    /// `bucket_boundaries[i - 1] <= length < bucket_boundaries[i]`.
    pub fn bucket_by_sequence_length(
        &self,
        element_length_func: impl Fn(&T) -> usize + Send + Sync + 'static,
        bucket_boundaries: Vec<usize>,
        bucket_batch_sizes: Vec<usize>,
        options: crate::BucketOptions<T>,
    ) -> Dataset<T::Batch>
    where
        T: PaddedCollate,
        T::Batch: Send + 'static,
    {
        assert!(
            bucket_batch_sizes.len() == bucket_boundaries.len() + 1,
            "bucket_by_sequence_length: `len(bucket_batch_sizes)` must equal \
             `len(bucket_boundaries) + 1` but `len(bucket_batch_sizes)={}` and \
             `len(bucket_boundaries)={}`.",
            bucket_batch_sizes.len(),
            bucket_boundaries.len()
        );
        assert!(
            bucket_batch_sizes.iter().all(|&n| n > 0),
            "bucket_by_sequence_length: Batch size must be greater than zero."
        );
        if let Some(Err(message)) = options.padded_shapes.as_ref().map(T::check_padded_shapes) {
            panic!("bucket_by_sequence_length: {message}");
        }
        let config = Arc::new(ops::bucket_by_sequence_length::Config {
            length: element_length_func,
            boundaries: bucket_boundaries,
            batch_sizes: bucket_batch_sizes,
            options,
        });
        let key = config
            .boundaries
            .iter()
            .chain(&config.batch_sizes)
            .fold(0xB0C4, |h, &n| mix64(h ^ n as u64));
        let flags = [
            config.options.pad_to_bucket_boundary,
            config.options.no_padding,
            config.options.drop_remainder,
        ];
        self.unary_with(
            "bucket_by_sequence_length",
            Cardinality::Unknown,
            Counting::Wrapped,
            move |ctx, input| ops::bucket_by_sequence_length::build(ctx, input, &config),
        )
        .keyed(key ^ flags.iter().fold(0, |h, &f| (h << 1) | u64::from(f)))
    }
}

fn nonzero(p: Parallelism, what: &str) -> Parallelism {
    assert!(
        p != Parallelism::Fixed(0),
        "{what} must be greater than zero (or AUTOTUNE)"
    );
    p
}
