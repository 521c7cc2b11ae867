//! Stream for the [`ignore_errors_within`](crate::Dataset::ignore_errors_within) method, and
//! the policy it applies: an [`ErrorBudget`] (a count or a rate of error elements to skip)
//! and a [`Quarantine`] sink that hears of every element skipped.
//!
//! Saved state: `[seen, skipped]` (the elements and the errors that came through), then `[1]`
//! once it has ended (at the error that exhausted the budget: a resume passes on nothing
//! more), then the input's. The budget goes on counting from them after a restore; the
//! quarantine's sink is the recipe's (a JSON-lines file is appended to). The summary of an
//! exhausted budget names the files and first messages of the errors skipped since the
//! epoch (or its last resume) began: they are not saved.

use std::fmt;
use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::engine::Resumable;
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Start, error_stream};
use crate::stats::StageCounters;

const STAGE: &str = "ignore_errors_within";

/// How many error elements a pipeline (or a stage) may skip before its epoch fails: at most
/// `n` ([`count`](ErrorBudget::count)), or at most a fraction of the elements seen
/// ([`rate`](ErrorBudget::rate), as SPDL's `max_failures` takes a count or a rate); with an
/// optional [`Quarantine`] that hears of every skipped element. Used by
/// [`Dataset::ignore_errors_within`].
#[derive(Clone, Debug)]
pub struct ErrorBudget {
    limit: Limit,
    quarantine: Option<Quarantine>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Limit {
    Count(u64),
    Rate(f64),
}

impl ErrorBudget {
    /// The budget as a word of the recipe's fingerprint (the quarantine is not: it only
    /// reports).
    pub(crate) fn key(&self) -> u64 {
        let key = crate::hash::Key::new();
        match self.limit {
            Limit::Count(n) => key.word(0).word(n),
            Limit::Rate(f) => key.word(1).word(f.to_bits()),
        }
        .finish()
    }

    /// At most `n` error elements are skipped; the next one fails the epoch.
    pub fn count(n: u64) -> ErrorBudget {
        ErrorBudget {
            limit: Limit::Count(n),
            quarantine: None,
        }
    }

    /// At most `fraction` of the elements seen so far (errors included) may be errors,
    /// rounded up: after `seen` elements, `ceil(fraction * seen)` errors are allowed, so the
    /// first error is always within a rate above 0, and a burst early in the epoch fails it
    /// (with `rate(0.01)`, a second error within the first 100 elements).
    ///
    /// # Panics
    ///
    /// If `fraction` is not within `0.0..=1.0`.
    pub fn rate(fraction: f64) -> ErrorBudget {
        assert!(
            (0.0..=1.0).contains(&fraction),
            "ErrorBudget::rate: the fraction must be within 0.0..=1.0, not {fraction}"
        );
        ErrorBudget {
            limit: Limit::Rate(fraction),
            quarantine: None,
        }
    }

    /// Reports every skipped element to `sink`.
    pub fn quarantine(mut self, sink: Quarantine) -> ErrorBudget {
        self.quarantine = Some(sink);
        self
    }

    /// Whether `skipped` errors in `seen` elements are within the budget.
    fn allows(&self, skipped: u64, seen: u64) -> bool {
        match self.limit {
            Limit::Count(n) => skipped <= n,
            Limit::Rate(f) => skipped as f64 <= (f * seen as f64).ceil(),
        }
    }
}

impl fmt::Display for ErrorBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.limit {
            Limit::Count(n) => write!(f, "at most {n} errors"),
            Limit::Rate(r) => write!(f, "at most {}% of the elements", r * 100.0),
        }
    }
}

/// An element skipped by [`Dataset::ignore_errors_within`], as reported to its
/// [`Quarantine`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Skipped {
    /// The stage that skipped it (its [`named`](crate::Dataset::named) label, else
    /// `ignore_errors_within`).
    pub stage: String,
    /// Its index among the elements (and errors) that reached the stage this epoch.
    pub index: u64,
    /// The file or URL it came from, when the error names it (damaged data:
    /// [`Error::DataLoss`](crate::Error)).
    pub file: Option<String>,
    /// Its record's index in that file, when known.
    pub record: Option<u64>,
    /// Its byte offset in that file, when known.
    pub offset: Option<u64>,
    /// The bytes a TFRecord reader skipped to find the next good record, when it
    /// resynchronised ([`TFRecordDataset::resync`](crate::format::TFRecordDataset::resync)).
    pub skipped_bytes: Option<u64>,
    /// The error, with its causes (`{:#}`).
    pub error: String,
}

impl Skipped {
    fn of(stage: &str, index: u64, error: &anyhow::Error) -> Skipped {
        let mut skipped = Skipped {
            stage: stage.to_string(),
            index,
            file: None,
            record: None,
            offset: None,
            skipped_bytes: None,
            error: format!("{error:#}"),
        };
        if let Some(crate::Error::DataLoss {
            path,
            record,
            offset,
            skipped: bytes,
            ..
        }) = error.downcast_ref::<crate::Error>()
        {
            skipped.file = Some(path.clone());
            skipped.record = Some(*record);
            skipped.offset = Some(*offset);
            skipped.skipped_bytes = bytes.as_ref().map(|r| r.end - r.start);
        }
        skipped
    }

    /// One line of JSON: `{"stage":..,"index":..,"file":..,"record":..,"offset":..,
    /// "skipped_bytes":..,"error":..}` (absent fields are `null`).
    pub fn to_json(&self) -> String {
        let text = |s: &Option<String>| s.as_deref().map_or("null".to_string(), json_string);
        let number = |n: Option<u64>| n.map_or("null".to_string(), |n| n.to_string());
        format!(
            r#"{{"stage":{},"index":{},"file":{},"record":{},"offset":{},"skipped_bytes":{},"error":{}}}"#,
            json_string(&self.stage),
            self.index,
            text(&self.file),
            number(self.record),
            number(self.offset),
            number(self.skipped_bytes),
            json_string(&self.error)
        )
    }
}

/// `s` as a JSON string.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Where [`Dataset::ignore_errors_within`] reports the elements it skips: a JSON-lines
/// file (one [`Skipped::to_json`] line per element) or a callback. Cheap to clone (shared).
#[derive(Clone)]
pub struct Quarantine(Arc<dyn Fn(&Skipped) + Send + Sync>);

impl fmt::Debug for Quarantine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Quarantine")
    }
}

impl Quarantine {
    /// Calls `f` with every skipped element, on the task that polls the stage (keep it
    /// short: it runs between two elements).
    pub fn callback(f: impl Fn(&Skipped) + Send + Sync + 'static) -> Quarantine {
        Quarantine(Arc::new(f))
    }

    /// Appends one JSON line per skipped element to the file at `path` (created if
    /// missing), each line written whole as the element is skipped. A failed write is
    /// reported on standard error (the epoch goes on).
    ///
    /// # Errors
    ///
    /// When the file cannot be opened for appending.
    pub fn json_lines(path: impl AsRef<std::path::Path>) -> anyhow::Result<Quarantine> {
        let path = path.as_ref().to_path_buf();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("opening the quarantine log {}: {e}", path.display()))?;
        let file = Mutex::new(file);
        Ok(Quarantine::callback(move |skipped| {
            let mut line = skipped.to_json();
            line.push('\n');
            let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = file.write_all(line.as_bytes()) {
                eprintln!(
                    "streamload: writing the quarantine log {}: {e}",
                    path.display()
                );
            }
        }))
    }
}

/// Stream for the [`ignore_errors_within`](crate::Dataset::ignore_errors_within) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct IgnoreErrorsWithinStream<St> {
    #[pin]
    input: St,
    budget: ErrorBudget,
    stage: String,
    seen: u64,
    skipped: u64,
    /// Skipped errors by file (the first few files), and the first few messages.
    files: Vec<(String, u64)>,
    first: Vec<String>,
    stats: Option<Arc<StageCounters>>,
    done: bool,
}

/// Files and messages kept for the summary of an exhausted budget.
const SUMMARY: usize = 5;

/// The [`ignore_errors_within`](crate::Dataset::ignore_errors_within) operation: its budget
/// is keyed ([`ErrorBudget::key`]; the quarantine only reports).
pub(crate) struct IgnoreErrorsWithin {
    pub(crate) budget: ErrorBudget,
}

impl std::hash::Hash for IgnoreErrorsWithin {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.budget.key().hash(state);
    }
}

impl<T: Send + 'static> Operation<T> for IgnoreErrorsWithin {
    type Out = T;
    type Stream = IgnoreErrorsWithinStream<BoxStream<T>>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Unknown
    }

    /// See [`build`]: the start is the context's.
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        Ok(build(ctx, input.dataset(), &self.budget))
    }
}

fn build<T: Send + 'static>(
    ctx: &Ctx,
    input: &Dataset<T>,
    budget: &ErrorBudget,
) -> IgnoreErrorsWithinStream<BoxStream<T>> {
    let stats = ctx.stats_handle();
    let stage = stats
        .as_ref()
        .and_then(|s| s.label())
        .unwrap_or_else(|| STAGE.to_string());
    let counts = match ctx.restoring().filter(|_| ctx.replaying().is_none()) {
        None => Ok((0, 0)),
        Some(state) => state.word(0).and_then(|seen| Ok((seen, state.word(1)?))),
    };
    // Ended: at the end of its input, or at the error that exhausted the budget.
    let done = ctx
        .restoring()
        .is_some_and(|state| state.words.get(2) == Some(&1));
    let (input, (seen, skipped)) = match counts {
        Ok(counts) => (input.build(&ctx.for_input(0)), counts),
        Err(e) => (error_stream(e), (0, 0)),
    };
    IgnoreErrorsWithinStream {
        input,
        budget: budget.clone(),
        stage,
        seen,
        skipped,
        files: Vec::new(),
        first: Vec::new(),
        stats,
        done,
    }
}

impl<St> IgnoreErrorsWithinStream<St> {
    /// The error that ends the epoch: `e`, in the context of what was skipped.
    fn exhausted(
        e: anyhow::Error,
        budget: &ErrorBudget,
        stage: &str,
        seen: u64,
        skipped: u64,
        files: &[(String, u64)],
        first: &[String],
    ) -> anyhow::Error {
        let mut summary = format!(
            "{stage}: error budget exhausted ({budget}): {skipped} errors in {seen} elements"
        );
        if !files.is_empty() {
            let by_file: Vec<String> = files.iter().map(|(f, n)| format!("{f} ({n})")).collect();
            summary.push_str(&format!("; damaged files: {}", by_file.join(", ")));
        }
        if !first.is_empty() {
            summary.push_str(&format!("; first skipped: {}", first.join(" | ")));
        }
        summary.push_str("; the last error");
        e.context(summary)
    }
}

impl<St, T> Stream for IgnoreErrorsWithinStream<St>
where
    St: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        loop {
            let e = match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    *this.seen += 1;
                    return Poll::Ready(Some(Ok(x)));
                }
                None => {
                    *this.done = true;
                    return Poll::Ready(None);
                }
                // A refused resume is not an error of the data: passed on, never counted.
                Some(Err(e)) if crate::error::is_refusal(&e) => {
                    return Poll::Ready(Some(Err(e)));
                }
                Some(Err(e)) => e,
            };
            let index = *this.seen;
            *this.seen += 1;
            *this.skipped += 1;
            if !this.budget.allows(*this.skipped, *this.seen) {
                *this.done = true;
                let e = Self::exhausted(
                    e,
                    this.budget,
                    this.stage,
                    *this.seen,
                    *this.skipped - 1,
                    this.files,
                    this.first,
                );
                return Poll::Ready(Some(Err(e)));
            }
            let skipped = Skipped::of(this.stage, index, &e);
            if let Some(file) = &skipped.file {
                match this.files.iter().position(|(f, _)| f == file) {
                    Some(at) => this.files[at].1 += 1,
                    None if this.files.len() < SUMMARY => this.files.push((file.clone(), 1)),
                    None => {}
                }
            }
            if this.first.len() < SUMMARY {
                this.first.push(format!("{e:#}"));
            }
            if let Some(stats) = this.stats {
                stats.add_skipped();
            }
            if let Some(sink) = &this.budget.quarantine {
                (sink.0)(&skipped);
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.input.size_hint().1)
    }
}

crate::engine::one_to_one!(
    impl[St: Resumable] IgnoreErrorsWithinStream<St>,
    |s| STAGE,
    [s.seen, s.skipped].into_iter().chain(s.done.then_some(1))
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_count_and_rate() {
        let count = ErrorBudget::count(2);
        assert!(count.allows(2, 2) && !count.allows(3, 100));
        let rate = ErrorBudget::rate(0.01);
        assert!(
            rate.allows(1, 1),
            "the first error is within any rate above 0"
        );
        assert!(!rate.allows(2, 50));
        assert!(rate.allows(2, 101));
        assert!(!ErrorBudget::rate(0.0).allows(1, 1000));
    }

    #[test]
    fn skipped_elements_are_json_lines() {
        let e: anyhow::Error = crate::Error::DataLoss {
            path: "a \"b\".tfrecord".into(),
            record: 3,
            offset: 120,
            message: "corrupted record".into(),
            looks_compressed: None,
            skipped: Some(120..200),
        }
        .into();
        let line = Skipped::of("s", 7, &e).to_json();
        assert!(
            line.starts_with(
                r#"{"stage":"s","index":7,"file":"a \"b\".tfrecord","record":3,"offset":120,"skipped_bytes":80,"error":"#
            ),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }
}
