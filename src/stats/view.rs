//! The statistics as the user wrote the pipeline: the registry's rows with the plumbing of
//! file datasets merged into their readers, and the figures the report and the diagnosis
//! read.

use std::time::Duration;

use super::{StageSnapshot, Stats};

/// One registered stage as measured, with what the report needs beyond its snapshot.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) snap: StageSnapshot,
    /// How many copies of it run at once (the readers of the parallel interleaves it sits
    /// in); its busy and wait times add up over them.
    pub(super) copies: u64,
}

/// The statistics as the report shows them: one row per stage the user wrote, upstream
/// stages after their consumers, and the figures the diagnosis judges.
#[derive(Debug, Clone)]
pub(super) struct View {
    pub(super) wall: Duration,
    /// The machine's cores.
    pub(super) cores: usize,
    /// Share of the time (0..=1) the consumer spent inside the pipeline: polling its last
    /// stage (inline work) or waiting on it. The rest is the consumer's own work.
    pub(super) in_pipeline: f64,
    pub(super) rows: Vec<Row>,
}

impl Stats {
    /// The stages as the user wrote them: hidden plumbing merged into the user's stages.
    pub(super) fn view(&self) -> View {
        let (rows, in_pipeline, flags) = self.measure();
        View {
            wall: self.elapsed(),
            cores: crate::available_cores(),
            in_pipeline,
            rows: merge_hidden(rows, |i| flags[i].0, |i| flags[i].1),
        }
    }
}

/// Merges hidden stages into the user's: a hidden stage that builds inner datasets (the
/// interleave of a file dataset) is replaced by the top stage of those (the file reader),
/// which takes its place in the pipeline (its consumer, scope and parallelism); any other
/// hidden stage (the list of file names) is merged into the stage that stands for its
/// consumer. Busy and worker times move with them; the rows left are renumbered.
fn merge_hidden(
    mut rows: Vec<Row>,
    hidden: impl Fn(usize) -> bool,
    scope: impl Fn(usize) -> u64,
) -> Vec<Row> {
    let n = rows.len();
    if !(0..n).any(&hidden) {
        return rows;
    }
    let consumer: Vec<Option<usize>> = rows.iter().map(|r| r.snap.consumer).collect();
    // The top of the inner dataset a hidden stage builds, itself resolved if hidden.
    let face_of = |h: usize| -> Option<usize> {
        let mut at = h;
        loop {
            let top =
                (at + 1..n).find(|&f| scope(f) == at as u64 + 1 && consumer[f] == Some(at))?;
            if !hidden(top) {
                return Some(top);
            }
            at = top;
        }
    };
    let face: Vec<Option<usize>> = (0..n)
        .map(|h| if hidden(h) { face_of(h) } else { None })
        .collect();
    // The visible stage each stage's figures go to (`None`: dropped).
    let mut target: Vec<Option<usize>> = vec![None; n];
    for i in 0..n {
        target[i] = if !hidden(i) {
            Some(i)
        } else {
            face[i].or_else(|| consumer[i].filter(|&c| c < i).and_then(|c| target[c]))
        };
    }
    // A hidden stage with no consumer gets its target only from its face: fill in those
    // that point upstream (registered later).
    for i in 0..n {
        if target[i].is_none() && hidden(i) {
            target[i] = face[i];
        }
    }
    for h in (0..n).filter(|&h| hidden(h)) {
        let Some(t) = target[h] else { continue };
        let (busy, workers) = (rows[h].snap.busy, rows[h].snap.worker_busy);
        rows[t].snap.busy += busy;
        rows[t].snap.worker_busy += workers;
        // The reader takes the place of the outermost hidden stage whose face it is (not of
        // a hidden stage inside another's inner dataset: that one stands in for nothing).
        let inner_link = consumer[h]
            .is_some_and(|c| hidden(c) && scope(h) == c as u64 + 1 && face[c] == Some(t));
        if face[h] == Some(t) && !inner_link {
            let outer = rows[h].clone();
            let row = &mut rows[t];
            row.snap.consumer = outer.snap.consumer;
            row.snap.nested = outer.snap.nested;
            if row.snap.parallelism == 0 {
                row.snap.parallelism = outer.snap.parallelism;
            }
            if row.snap.label.is_none() {
                row.snap.label = outer.snap.label;
            }
        }
    }
    // Consumers that are hidden stand for the visible stage that replaces them, or, for the
    // stage that replaces them, for their own consumer.
    let mut next = 0;
    let new_index: Vec<Option<usize>> = (0..n)
        .map(|i| {
            (!hidden(i)).then(|| {
                next += 1;
                next - 1
            })
        })
        .collect();
    let resolve = |i: usize, mut c: usize| -> Option<usize> {
        for _ in 0..n {
            if !hidden(c) {
                return new_index[c];
            }
            match target[c] {
                Some(t) if t != i => return new_index[t],
                _ => c = consumer[c]?,
            }
        }
        None
    };
    let consumers: Vec<Option<usize>> = (0..n)
        .map(|i| rows[i].snap.consumer.and_then(|c| resolve(i, c)))
        .collect();
    rows.into_iter()
        .zip(consumers)
        .enumerate()
        .filter(|(i, _)| !hidden(*i))
        .map(|(_, (mut row, consumer))| {
            row.snap.consumer = consumer;
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::diagnosis::tests::{S, STAGE, view};

    #[test]
    fn a_file_datasets_plumbing_merges_into_its_reader() {
        // repeat <- flat_map (hidden) <- from_tensor_slices (hidden), and the flat_map's
        // inner reader (scope 2: the flat_map's), as the registry holds them.
        let rows = view(
            1.0,
            &[
                S {
                    name: "repeat",
                    ..STAGE
                },
                S {
                    name: "flat_map",
                    consumer: Some(0),
                    busy: 0.1,
                    parallelism: 4,
                    ..STAGE
                },
                S {
                    name: "from_tensor_slices",
                    consumer: Some(1),
                    busy: 0.01,
                    ..STAGE
                },
                S {
                    name: "tfrecord",
                    consumer: Some(1),
                    nested: true,
                    busy: 0.2,
                    ..STAGE
                },
            ],
        )
        .rows;
        let merged = merge_hidden(rows, |i| i == 1 || i == 2, |i| if i == 3 { 2 } else { 0 });
        let names: Vec<&str> = merged.iter().map(|r| r.snap.name).collect();
        assert_eq!(names, ["repeat", "tfrecord"]);
        let reader = &merged[1].snap;
        // In the flat_map's place: consumed by repeat, at the top level, with its readers.
        assert_eq!(reader.consumer, Some(0));
        assert!(!reader.nested);
        assert_eq!(reader.parallelism, 4);
        // Its own time and the plumbing's.
        assert_eq!(reader.busy, Duration::from_secs_f64(0.31));
    }
}
