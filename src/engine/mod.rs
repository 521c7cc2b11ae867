//! The engine: what runs a recipe, below the operations and above the checkpoint's data.
//!
//! - [`plan`]: a recipe's node ([`Dataset`]'s stage) and the one place every stage's stream
//!   is made and wrapped;
//! - [`ctx`]: the context a stage is built with (options, statistics, tuner, what to restore
//!   or replay, seeds);
//! - [`op`]: an operation as one type ([`Operation`]) and how a dataset is followed by one;
//! - [`epoch`]: one pass over a recipe ([`Epoch`]), its checkpoints;
//! - [`resume`], [`hold`], [`route`], [`members`]: how streams save their position and are restored or
//!   replayed;
//! - [`counted`]: the wrappers that count and time what each stage yields.
//!
//! The engine imports the layers below it (`checkpoint`, `stats`, `runtime`, `storage`,
//! `options`, `hash`, `error`) and nothing above it: operations, sources and formats import
//! it, and the façade (`crate::dataset`, the methods users call) sits on top.

pub(crate) mod counted;
pub(crate) mod ctx;
pub(crate) mod epoch;
pub(crate) mod hold;
pub(crate) mod members;
pub(crate) mod op;
pub(crate) mod plan;
pub(crate) mod resume;
pub(crate) mod route;

pub(crate) use ctx::{Counting, Ctx};
pub use epoch::Epoch;
pub(crate) use hold::{Held, Hold};
pub(crate) use members::Members;
pub(crate) use op::{
    Beside, Combine, Input, Inputs, Operation, Replay, Source, Start, Unkeyed, keyed_fields,
    params_key,
};
pub(crate) use plan::Answers;
pub(crate) use plan::error_stream;
pub use plan::{Cardinality, Dataset};
pub(crate) use resume::{
    BoxStream, Opaque, ReplaySource, Resumable, StageStream, TakenThen, numbered, numbered_source,
    one_to_one, replay_or_open, replayed, replaying, unsupported,
};
pub(crate) use route::{ReadAgain, Routed};
