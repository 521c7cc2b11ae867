//! An operation as one type: [`Operation`], what the façade's methods hand the engine
//! ([`Dataset::then`]).
//!
//! An operation's type holds its parameters, and nothing else is keyed: the recipe's
//! fingerprint hashes the type's fields ([`Hash`], derived; [`keyed_fields!`] for an
//! operation generic over functions), so a parameter added to an operation is part of the
//! fingerprint unless it is wrapped in [`Unkeyed`] (a function, which cannot be compared, or
//! a speed setting such as a parallelism or a buffer size, which may change between a
//! checkpoint and its resume). The compiler checks it: a field that is neither `Hash` nor
//! `Unkeyed` (nor listed in `keyed_fields!`) does not build.
//!
//! [`Operation::open`] makes the operation's stream for one epoch from its input and a
//! [`Start`]: fresh, restored from what its stream saved ([`Resumable::save`], written
//! beside `open` in the operation's file), or replaying positions.
//!
//! [`Resumable::save`]: super::Resumable::save

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::ctx::{Counting, Ctx};
use super::plan::{Cardinality, Dataset};
use super::resume::{BoxStream, Opened, StageStream};
use crate::checkpoint::{Prov, State};
use crate::hash::Key;

/// One operation of a recipe, over an input of `In`s (tf.data's dataset op and its iterator).
pub(crate) trait Operation<In: Send + 'static>: Hash + Send + Sync + 'static {
    /// What it yields.
    type Out: Send + 'static;
    /// Its stream for one epoch.
    type Stream: StageStream<Self::Out> + 'static;
    /// tf.data's name for it; its saved state is named by it too.
    const NAME: &'static str;
    /// How its statistics are kept (see [`Counting`]).
    const COUNTING: Counting = Counting::Wrapped;
    /// Its saved state is a few words. An operation that holds elements by position (a
    /// set of the ones seen, a shuffle buffer) is not small: stages downstream that hold
    /// elements keep their positions, not a mark of it.
    const SMALL: bool = true;
    /// Its stream saves its position only in deterministic order (a parallel map, a parallel
    /// interleave): under `Options::deterministic(false)` the stages holding its elements
    /// take no marks of it and keep no positions.
    const ORDERED: bool = false;

    /// Whether its stream saves its position (a `scan` whose running state cannot be
    /// serialized does not: a checkpoint through it is refused, naming it).
    fn resumable(&self) -> bool {
        true
    }

    /// Its name in the statistics and in its saved state: [`NAME`](Operation::NAME), unless
    /// its parameters make it another tf.data operation (`interleave(1, 1)` is `flat_map`).
    fn name(&self) -> &'static str {
        Self::NAME
    }

    /// How many elements it yields, given its input's count.
    fn cardinality(&self, input: Cardinality) -> Cardinality;

    /// A dataset of another type it reads beside its input (`zip`'s second): as
    /// [`Combine::beside`].
    fn beside(&self) -> Option<Beside> {
        None
    }

    /// Its stream for one epoch over `input`, from `start`.
    ///
    /// # Errors
    ///
    /// When a saved state is not this operation's (a checkpoint of another version): the
    /// epoch's element in its place is that error.
    fn open(
        &self,
        ctx: &Ctx,
        input: Input<'_, In>,
        start: Start<'_>,
    ) -> anyhow::Result<Self::Stream>;

    /// Its elements at `provs` made again by a stream other than its own (a batch's members
    /// read again and grouped: [`Members`](super::Members)); `None`, the default: its own
    /// stream replays them, opened with [`Start::Replay`].
    fn replay(&self, ctx: &Ctx, input: Input<'_, In>, provs: &Arc<[Prov]>) -> Replay<Self::Out> {
        let _ = (ctx, input, provs);
        None
    }
}

/// A stage's stream from `start`: in replay the stream `replay` gives, when it gives one;
/// otherwise the operation's own, from `open`.
fn opened<S, T>(
    start: Start<'_>,
    replay: impl FnOnce(&Arc<[Prov]>) -> Replay<T>,
    open: impl FnOnce() -> anyhow::Result<S>,
) -> anyhow::Result<Opened<S, T>> {
    if let Start::Replay(provs) = start
        && let Some(replay) = replay(provs)
    {
        return replay.map(Opened::Replay);
    }
    open().map(Opened::Own)
}

/// What an operation's `replay` gives: `None` when its own stream replays, else the stream
/// that makes its saved elements again (or why it cannot: [`replayed`](super::resume::replayed)).
pub(crate) type Replay<T> = Option<anyhow::Result<BoxStream<T>>>;

/// Where an operation's stream starts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Start<'a> {
    /// At the start of the epoch.
    Fresh,
    /// Where it was when its stream saved this state.
    Restore(&'a State),
    /// Yielding exactly the elements at these positions, in this order (a stage downstream
    /// refills a buffer it held by position). What an operation drops or holds back is never
    /// among them: it passes each on.
    Replay(&'a Arc<[Prov]>),
}

/// An operation's input, for its [`open`](Operation::open).
pub(crate) struct Input<'a, T> {
    dataset: &'a Dataset<T>,
    ctx: &'a Ctx,
}

impl<T> Clone for Input<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Input<'_, T> {}

impl<'a, T: Send + 'static> Input<'a, T> {
    /// `dataset` as the input of the stage `ctx` builds (an operation run inside another,
    /// not a stage of its own: `random_map`'s numbering).
    pub(crate) fn new(dataset: &'a Dataset<T>, ctx: &'a Ctx) -> Self {
        Input { dataset, ctx }
    }

    /// The input's stream for the epoch: fresh, restored from the state saved as this
    /// stage's input, or replaying the same positions, as the stage is.
    pub(crate) fn open(&self) -> BoxStream<T> {
        self.dataset.build(&self.ctx.for_input(0))
    }

    /// The input's stream for an operation that holds elements across a checkpoint (see
    /// [`Hold`](super::Hold)): fresh, or restored with the held elements handed back first
    /// (the hold's saved words start at word `at` of the operation's state).
    pub(crate) fn hold(
        &self,
        stage: &'static str,
        positions: bool,
        at: usize,
    ) -> anyhow::Result<super::Hold<T>> {
        super::Hold::of(self.ctx, self.dataset, positions, stage, at)
    }

    /// The input itself, for an operation that builds it several times (`repeat`, one
    /// stream per repetition).
    pub(crate) fn dataset(&self) -> &'a Dataset<T> {
        self.dataset
    }

    /// The input's stream, replaying `provs` (positions of its elements).
    pub(crate) fn replay(&self, provs: Arc<[Prov]>) -> BoxStream<T> {
        self.dataset
            .build(&self.ctx.for_input(0).with_replay(provs))
    }
}

/// A value an operation holds beside its parameters that is not part of the recipe's
/// fingerprint: a function (which cannot be compared), or a setting that changes speed but
/// not the elements nor their order (a parallelism, a buffer size).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Unkeyed<T>(pub(crate) T);

impl<T> Hash for Unkeyed<T> {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

impl<T> std::ops::Deref for Unkeyed<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// `Hash` for an operation generic over functions (which `derive(Hash)` would require to be
/// `Hash`), from a pattern that names every field: a field added later does not build until
/// it is listed, as keyed (hashed into the fingerprint) or unkeyed.
///
/// `keyed_fields!(impl[F] Map<F> { keyed: [], unkeyed: [f] });`
macro_rules! keyed_fields {
    (impl[$($g:tt)*] $ty:ident<$($p:ident),*> { keyed: [$($k:ident),*], unkeyed: [$($u:ident),*] }) => {
        impl<$($g)*> ::std::hash::Hash for $ty<$($p),*> {
            fn hash<H: ::std::hash::Hasher>(&self, _state: &mut H) {
                let $ty { $($k,)* $($u: _,)* } = self;
                $(::std::hash::Hash::hash($k, _state);)*
            }
        }
    };
}
pub(crate) use keyed_fields;

/// Feeds what a [`Hash`] writes into a [`Key`]: the same on every machine and in every
/// process (`std`'s hashers are seeded at random), one word per written value.
struct KeyHasher(Key);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = self.0.bytes(bytes);
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = self.0.word(word);
    }

    fn write_usize(&mut self, word: usize) {
        self.0 = self.0.word(word as u64);
    }

    fn write_i64(&mut self, word: i64) {
        self.0 = self.0.word(word as u64);
    }

    fn write_u8(&mut self, word: u8) {
        self.0 = self.0.word(u64::from(word));
    }

    fn write_u32(&mut self, word: u32) {
        self.0 = self.0.word(u64::from(word));
    }

    fn finish(&self) -> u64 {
        self.0.finish()
    }
}

/// The key of an operation's parameters, for the recipe's fingerprint.
pub(crate) fn params_key(params: &impl Hash) -> u64 {
    let mut hasher = KeyHasher(Key::new());
    params.hash(&mut hasher);
    hasher.finish()
}

impl<T: Send + 'static> Dataset<T> {
    /// This dataset followed by `op`: a stage whose fingerprint is its name, its parameters
    /// and its input's, whose stream `op` opens from the epoch's start.
    pub(crate) fn then<O: Operation<T>>(&self, op: O) -> Dataset<O::Out> {
        let key = params_key(&op);
        let (options, depth, resumable, small, ordered) = Beside::add(
            op.beside(),
            self.options().clone(),
            self.depth() + 1,
            self.is_resumable() && op.resumable(),
            self.is_small() && O::SMALL,
            self.is_ordered() || O::ORDERED,
        );
        let op = Arc::new(op);
        let input = self.clone();
        Dataset::stage_fallible(
            op.name(),
            op.cardinality(self.cardinality()),
            options,
            depth,
            O::COUNTING,
            move |ctx| {
                let start = ctx.start();
                let input = Input {
                    dataset: &input,
                    ctx,
                };
                let replay = |provs: &Arc<[Prov]>| op.replay(ctx, input, provs);
                opened(start, replay, || op.open(ctx, input, start))
            },
        )
        .keyed(self.fingerprint())
        .keyed(key)
        .resumable(resumable)
        .small(small)
        .ordered(ordered)
    }
}

/// A source: an operation with no dataset input (`range`, a file reader's records).
pub(crate) trait Source: Hash + Send + Sync + 'static {
    /// What it yields.
    type Out: Send + 'static;
    /// Its stream for one epoch.
    type Stream: StageStream<Self::Out> + 'static;
    /// tf.data's name for it; its saved state is named by it too.
    const NAME: &'static str;
    /// How its statistics are kept (see [`Counting`]).
    fn counting(&self) -> Counting {
        Counting::Wrapped
    }

    /// Its name in the statistics and in its saved state: [`NAME`](Source::NAME), unless its
    /// parameters name it (a file's reader is named by its format).
    fn name(&self) -> &'static str {
        Self::NAME
    }

    /// How many elements it yields.
    fn cardinality(&self) -> Cardinality;

    /// Whether its stream can save its position (a plain generator's cannot: a checkpoint
    /// through it is refused, naming it).
    fn resumable(&self) -> bool {
        true
    }

    /// Its stream for one epoch, from `start`.
    ///
    /// # Errors
    ///
    /// As [`Operation::open`].
    fn open(&self, ctx: &Ctx, start: Start<'_>) -> anyhow::Result<Self::Stream>;

    /// As [`Operation::replay`].
    fn replay(&self, ctx: &Ctx, provs: &Arc<[Prov]>) -> Replay<Self::Out> {
        let _ = (ctx, provs);
        None
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// A dataset of `source`'s elements: a stage whose fingerprint is its name and its
    /// parameters.
    pub(crate) fn from_source<S: Source<Out = T>>(source: S) -> Dataset<T> {
        let key = params_key(&source);
        let resumable = source.resumable();
        let source = Arc::new(source);
        Dataset::stage_fallible(
            source.name(),
            source.cardinality(),
            crate::options::Options::default(),
            0,
            source.counting(),
            move |ctx| {
                let start = ctx.start();
                let replay = |provs: &Arc<[Prov]>| source.replay(ctx, provs);
                opened(start, replay, || source.open(ctx, start))
            },
        )
        .keyed(key)
        .resumable(resumable)
    }
}

/// An operation over several datasets of one type (`zip_all`, `concatenate`): as
/// [`Operation`], with its inputs in order.
pub(crate) trait Combine<In: Send + 'static>: Hash + Send + Sync + 'static {
    /// What it yields.
    type Out: Send + 'static;
    /// Its stream for one epoch.
    type Stream: StageStream<Self::Out> + 'static;
    /// tf.data's name for it; its saved state is named by it too.
    const NAME: &'static str;

    /// How many elements it yields, given its inputs' counts.
    fn cardinality(&self, inputs: &[Cardinality]) -> Cardinality;

    /// A dataset of another type it reads beside its inputs (`choose_from_datasets`'
    /// choices): its options, depth and answers count as an input's (its fingerprint is the
    /// operation's to hash, as a parameter).
    fn beside(&self) -> Option<Beside> {
        None
    }

    /// Its stream for one epoch over `inputs`, from `start`.
    ///
    /// # Errors
    ///
    /// As [`Operation::open`].
    fn open(
        &self,
        ctx: &Ctx,
        inputs: Inputs<'_, In>,
        start: Start<'_>,
    ) -> anyhow::Result<Self::Stream>;

    /// As [`Operation::replay`].
    fn replay(&self, ctx: &Ctx, inputs: Inputs<'_, In>, provs: &Arc<[Prov]>) -> Replay<Self::Out> {
        let _ = (ctx, inputs, provs);
        None
    }
}

/// What a dataset read beside a [`Combine`] operation's inputs adds to its stage.
pub(crate) struct Beside {
    options: crate::Options,
    depth: u64,
    resumable: bool,
    small: bool,
    ordered: bool,
}

impl Beside {
    pub(crate) fn of<X: Send + 'static>(dataset: &Dataset<X>) -> Self {
        Beside {
            options: dataset.options().clone(),
            depth: dataset.depth(),
            resumable: dataset.is_resumable(),
            small: dataset.is_small(),
            ordered: dataset.is_ordered(),
        }
    }

    /// A stage's options, depth, and whether it can be saved, is small and is saved only in
    /// deterministic order, from its inputs' (given), with `beside` counted as one more input.
    fn add(
        beside: Option<Beside>,
        options: crate::Options,
        depth: u64,
        resumable: bool,
        small: bool,
        ordered: bool,
    ) -> (crate::Options, u64, bool, bool, bool) {
        match beside {
            None => (options, depth, resumable, small, ordered),
            Some(b) => (
                options.merge(&b.options),
                depth.max(b.depth + 1),
                resumable && b.resumable,
                small && b.small,
                ordered || b.ordered,
            ),
        }
    }
}

/// A [`Combine`] operation's inputs, for its [`open`](Combine::open).
pub(crate) struct Inputs<'a, T> {
    datasets: &'a [Dataset<T>],
}

impl<T> Clone for Inputs<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Inputs<'_, T> {}

impl<'a, T: Send + 'static> Inputs<'a, T> {
    /// Input `i` (see [`Inputs::len`]).
    pub(crate) fn dataset(&self, i: usize) -> &'a Dataset<T> {
        &self.datasets[i]
    }

    pub(crate) fn len(&self) -> usize {
        self.datasets.len()
    }

    /// Every input, in order.
    pub(crate) fn all(&self) -> &'a [Dataset<T>] {
        self.datasets
    }

    /// The depth of the stage they are the inputs of.
    pub(crate) fn depth(&self) -> u64 {
        self.datasets.iter().map(Dataset::depth).max().unwrap_or(0) + 1
    }

    /// Whether every input's state is small.
    pub(crate) fn small(&self) -> bool {
        self.datasets.iter().all(Dataset::is_small)
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// `op` over `inputs`: a stage whose fingerprint is its name, its parameters and its
    /// inputs' (in order), whose stream `op` opens from the epoch's start.
    pub(crate) fn combine<O: Combine<T>>(inputs: Vec<Dataset<T>>, op: O) -> Dataset<O::Out> {
        let cards: Vec<Cardinality> = inputs.iter().map(Dataset::cardinality).collect();
        let (options, depth, resumable, small, ordered) = Beside::add(
            op.beside(),
            inputs
                .iter()
                .fold(crate::Options::default(), |o, d| o.merge(d.options())),
            inputs.iter().map(Dataset::depth).max().unwrap_or(0) + 1,
            inputs.iter().all(Dataset::is_resumable),
            inputs.iter().all(Dataset::is_small),
            inputs.iter().any(Dataset::is_ordered),
        );
        let mut key = Key::new().word(inputs.len() as u64).word(params_key(&op));
        for input in &inputs {
            key = key.word(input.fingerprint());
        }
        let op = Arc::new(op);
        Dataset::stage_fallible(
            O::NAME,
            op.cardinality(&cards),
            options,
            depth,
            Counting::Wrapped,
            move |ctx| {
                let (start, inputs) = (ctx.start(), Inputs { datasets: &inputs });
                let replay = |provs: &Arc<[Prov]>| op.replay(ctx, inputs, provs);
                opened(start, replay, || op.open(ctx, inputs, start))
            },
        )
        .keyed(key.finish())
        .resumable(resumable)
        .small(small)
        .ordered(ordered)
    }
}
