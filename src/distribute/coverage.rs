//! Per-rank summaries of what was read, their merge, and the rest of an interrupted epoch.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Distributed, Piece, Plan, ShardPolicy, Unit, assign};
use crate::error::Error;
use crate::hash::mix64;

/// An element's share of a file's fingerprint: order-independent sums of these.
fn hash(file: usize, record: u64) -> u64 {
    mix64(mix64(file as u64 ^ 0xF11E_5EED) ^ record)
}

/// The fingerprint of records `start..end` of `file`.
fn range_fingerprint(file: usize, start: u64, end: u64) -> u64 {
    (start..end).fold(0u64, |s, r| s.wrapping_add(hash(file, r)))
}

/// What one rank read of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    name: String,
    /// Elements the file holds.
    total: u64,
    /// Elements of it this rank took (padding aside).
    count: u64,
    /// The wrapping sum of the hashes of (file, record) of each.
    fingerprint: u64,
    /// The lowest record index taken, and one past the highest.
    first: u64,
    end: u64,
    /// The runs of records taken, in order, merged (a rank reads several runs of a file
    /// with `ShardPolicy::RowGroup`): what an elastic resume deals out again is the rest.
    #[serde(default)]
    runs: Vec<(u64, u64)>,
    /// More than [`MAX_RUNS`] runs (elements taken out of order): `runs` is not kept.
    #[serde(default)]
    scattered: bool,
    /// Documents taken in part (packed sequences, [`Coverage::add_pieces`]): record, and
    /// one past the last of its tokens taken.
    #[serde(default)]
    partial: BTreeMap<u64, u64>,
}

/// Runs of records kept per file, at most: past it, elements were taken out of order (a
/// shuffle after the plan's dataset) and an elastic resume is refused.
const MAX_RUNS: usize = 4096;

impl Entry {
    fn new(name: String, total: u64) -> Entry {
        Entry {
            name,
            total,
            count: 0,
            fingerprint: 0,
            first: u64::MAX,
            end: 0,
            runs: Vec::new(),
            scattered: false,
            partial: BTreeMap::new(),
        }
    }

    /// Adds record `r` to the runs.
    fn add_run(&mut self, r: u64) {
        if self.scattered {
            return;
        }
        if let Some(last) = self.runs.last_mut()
            && last.1 == r
        {
            last.1 += 1;
            return;
        }
        // The run starting after `r`, and the one before it.
        let i = self.runs.partition_point(|&(a, _)| a <= r);
        let joins_prev = i > 0 && self.runs[i - 1].1 >= r;
        let joins_next = self.runs.get(i).is_some_and(|&(a, _)| a == r + 1);
        match (joins_prev, joins_next) {
            // Already in a run (taken twice: the count and fingerprint tell), or extends it.
            (true, false) => self.runs[i - 1].1 = self.runs[i - 1].1.max(r + 1),
            (true, true) => {
                if self.runs[i - 1].1 == r {
                    self.runs[i - 1].1 = self.runs[i].1;
                    self.runs.remove(i);
                }
            }
            (false, true) => self.runs[i].0 = r,
            (false, false) => self.runs.insert(i, (r, r + 1)),
        }
        if self.runs.len() > MAX_RUNS {
            self.runs = Vec::new();
            self.scattered = true;
        }
    }
}

/// What one rank read in one epoch: for each file, how many elements and an
/// order-independent fingerprint of which ones; made by
/// [`ShardPlan::coverage`](super::ShardPlan::coverage), filled with [`add`](Coverage::add).
///
/// Serde-serializable and small (a few words per file the rank reads): gather every rank's
/// with your own collective (an all-gather of its bytes) and
/// [`merge`](CoverageReport::merge) them; save it with the rank's checkpoint, so a resumed
/// rank goes on adding to it, and an elastic resume ([`ShardPlan::resume`](super::ShardPlan::resume))
/// knows what was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    rank: usize,
    world_size: usize,
    epoch: u64,
    phase: u32,
    policy: ShardPolicy,
    listing: u64,
    files: usize,
    total: u64,
    target: u64,
    entries: BTreeMap<usize, Entry>,
    /// What the rank leaves out by design once it has yielded its count (`Remainder::Drop`).
    dropped: Vec<Unit>,
    taken: u64,
    padded: u64,
}

impl Coverage {
    pub(super) fn new(plan: &Plan, epoch: u64) -> Coverage {
        let units: Vec<Unit> = plan
            .rank_units(epoch)
            .into_iter()
            .map(|u| plan.units[u])
            .collect();
        let mut entries = BTreeMap::new();
        for unit in &units {
            entries.entry(unit.file).or_insert_with(|| {
                Entry::new(
                    plan.names.get(unit.file).cloned().unwrap_or_default(),
                    plan.counts.get(unit.file).copied().unwrap_or(0),
                )
            });
        }
        Coverage {
            rank: plan.dist.rank,
            world_size: plan.dist.world_size,
            epoch,
            phase: plan.phase,
            policy: plan.policy,
            listing: plan.listing,
            files: plan.counts.len(),
            total: plan.counts.iter().sum(),
            target: plan.target,
            entries,
            dropped: dropped(plan, &units),
            taken: 0,
            padded: 0,
        }
    }

    /// Counts an element the training loop took (padding is counted apart).
    pub fn add<T>(&mut self, element: &Distributed<T>) {
        self.add_record(element.file, element.record, element.padded);
    }

    /// Counts the documents of a packed sequence the training loop took (its
    /// [`pieces`](crate::text::Packed::pieces), when [`pack`](crate::Dataset::pack) read a
    /// [`ShardPlan::dataset`](super::ShardPlan::dataset)): a document counts as taken with
    /// the segment that ends it; one taken in part is kept as how many of its tokens were
    /// taken, so that an elastic resume ([`ShardPlan::resume`](super::ShardPlan::resume))
    /// hands on the rest of it ([`Distributed::offset`]) rather than all of it again.
    pub fn add_pieces(&mut self, pieces: &[Piece]) {
        for piece in pieces {
            if piece.last {
                if let Some(entry) = self.entries.get_mut(&piece.file) {
                    entry.partial.remove(&piece.record);
                }
                self.add_record(piece.file, piece.record, piece.padded);
            } else if !piece.padded {
                let end = self
                    .entry(piece.file)
                    .partial
                    .entry(piece.record)
                    .or_insert(0);
                *end = (*end).max(piece.end);
            }
        }
    }

    fn entry(&mut self, file: usize) -> &mut Entry {
        self.entries
            .entry(file)
            .or_insert_with(|| Entry::new(format!("file #{file}"), 0))
    }

    fn add_record(&mut self, file: usize, record: u64, padded: bool) {
        if padded {
            self.padded += 1;
            return;
        }
        self.taken += 1;
        let entry = self.entry(file);
        entry.count += 1;
        entry.fingerprint = entry.fingerprint.wrapping_add(hash(file, record));
        entry.first = entry.first.min(record);
        entry.end = entry.end.max(record + 1);
        entry.add_run(record);
    }

    /// The rank it describes.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The epoch it describes.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Elements taken, padding aside.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Padding elements taken.
    pub fn padded(&self) -> u64 {
        self.padded
    }

    /// Whether the rank took its whole count for the epoch.
    pub fn finished(&self) -> bool {
        self.taken + self.padded >= self.target
    }
}

/// The records a rank with `units` (in reading order) leaves out by design: those past the
/// plan's count (for `Element`, its last element, when it has one more than the count).
fn dropped(plan: &Plan, units: &[Unit]) -> Vec<Unit> {
    if plan.policy == ShardPolicy::Element {
        let sizes = assign::sizes(&plan.dist, plan.policy, &plan.units, &plan.shards);
        let own = sizes.get(plan.dist.rank).copied().unwrap_or(0);
        if own <= plan.target {
            return Vec::new();
        }
        // Its elements are rank, rank + w, ... in the whole dataset; the last ones go.
        let w = plan.dist.world_size as u64;
        let mut out = Vec::new();
        for k in plan.target..own {
            let mut g = plan.dist.rank as u64 + w * k;
            for (file, &n) in plan.counts.iter().enumerate() {
                if g < n {
                    out.push(Unit {
                        file,
                        start: g,
                        end: g + 1,
                    });
                    break;
                }
                g -= n;
            }
        }
        return out;
    }
    let mut out = Vec::new();
    let mut keep = plan.target;
    for unit in units {
        let kept = keep.min(unit.len());
        keep -= kept;
        if kept < unit.len() {
            out.push(Unit {
                file: unit.file,
                start: unit.start + kept,
                end: unit.end,
            });
        }
    }
    out
}

/// Records of a file read by more than one rank (or twice by one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overlap {
    /// The file.
    pub file: String,
    /// The ranks that took records of it (by the rank each summary names; a rank given
    /// twice appears twice).
    pub ranks: Vec<usize>,
    /// How many more elements were taken than the file holds (0 when as many were taken,
    /// but not the right ones).
    pub extra: u64,
}

/// Records of a file no rank took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// The file (`file #N` when no summary names it).
    pub file: String,
    /// How many of its records no rank took, when known.
    pub missing: Option<u64>,
}

/// All ranks' [`Coverage`] merged: were the shards disjoint, did they cover the data?
///
/// See [`ShardPlan`](super::ShardPlan) for an example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageReport {
    /// Elements taken, padding aside.
    pub elements: u64,
    /// Padding elements taken.
    pub padded: u64,
    /// Elements left out by design (`Remainder::Drop`) by the ranks that finished.
    pub dropped: u64,
    /// Elements in the data.
    pub total: u64,
    /// Files read more than once.
    pub overlaps: Vec<Overlap>,
    /// Files not read whole.
    pub gaps: Vec<Gap>,
    /// Ranks that more than one summary names (two processes given the same rank).
    pub duplicate_ranks: Vec<usize>,
    /// Ranks no summary names.
    pub missing_ranks: Vec<usize>,
}

impl CoverageReport {
    /// Merges every rank's summary of one epoch (of an epoch resumed with another world size,
    /// the summaries of both runs).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when there are none, or
    /// they describe different data (other files or counts) or different epochs.
    pub fn merge(summaries: &[Coverage]) -> anyhow::Result<CoverageReport> {
        let first = check_same(summaries)?;
        let mut duplicate_ranks = Vec::new();
        let mut missing_ranks = Vec::new();
        for (world, ranks) in by_phase(summaries) {
            let mut seen = BTreeSet::new();
            for &r in &ranks {
                if !seen.insert(r) && !duplicate_ranks.contains(&r) {
                    duplicate_ranks.push(r);
                }
            }
            missing_ranks.extend((0..world).filter(|r| !seen.contains(r)));
        }
        let last_phase = summaries.iter().map(|s| s.phase).max().unwrap_or(0);
        // Per file: its name and total, what was taken, by whom, and what was dropped.
        struct File {
            name: String,
            total: u64,
            count: u64,
            fingerprint: u64,
            ranks: Vec<usize>,
            dropped: Vec<Unit>,
        }
        let mut files: BTreeMap<usize, File> = BTreeMap::new();
        for s in summaries {
            for (&f, e) in &s.entries {
                let file = files.entry(f).or_insert_with(|| File {
                    name: e.name.clone(),
                    total: e.total,
                    count: 0,
                    fingerprint: 0,
                    ranks: Vec::new(),
                    dropped: Vec::new(),
                });
                file.total = file.total.max(e.total);
                file.count += e.count;
                file.fingerprint = file.fingerprint.wrapping_add(e.fingerprint);
                if e.count > 0 {
                    file.ranks.push(s.rank);
                }
            }
            if s.phase == last_phase && s.finished() {
                for d in &s.dropped {
                    if let Some(file) = files.get_mut(&d.file) {
                        file.dropped.push(*d);
                    }
                }
            }
        }
        let mut report = CoverageReport {
            elements: summaries.iter().map(|s| s.taken).sum(),
            padded: summaries.iter().map(|s| s.padded).sum(),
            dropped: 0,
            total: first.total,
            overlaps: Vec::new(),
            gaps: Vec::new(),
            duplicate_ranks,
            missing_ranks,
        };
        let mut known = 0u64;
        for (&f, file) in &files {
            known += file.total;
            let dropped: u64 = file.dropped.iter().map(Unit::len).sum();
            report.dropped += dropped;
            let expected = file.total.saturating_sub(dropped);
            let expected_fp = file
                .dropped
                .iter()
                .fold(range_fingerprint(f, 0, file.total), |h, d| {
                    h.wrapping_sub(range_fingerprint(f, d.start, d.end))
                });
            let same = file.count == expected && file.fingerprint == expected_fp;
            if same {
                continue;
            }
            if file.count >= expected {
                report.overlaps.push(Overlap {
                    file: file.name.clone(),
                    ranks: file.ranks.clone(),
                    extra: file.count - expected,
                });
            }
            if file.count <= expected {
                report.gaps.push(Gap {
                    file: file.name.clone(),
                    missing: Some(expected - file.count),
                });
            }
        }
        // Files in no summary at all (none is missing when they hold nothing: empty files
        // no rank was given).
        let unnamed = (0..first.files).filter(|f| !files.contains_key(f));
        let rest = first.total.saturating_sub(known);
        let unnamed: Vec<usize> = if rest == 0 {
            Vec::new()
        } else {
            unnamed.collect()
        };
        for &f in &unnamed {
            report.gaps.push(Gap {
                file: format!("file #{f}"),
                missing: (unnamed.len() == 1).then_some(rest),
            });
        }
        Ok(report)
    }

    /// No element was taken twice, and no rank was given twice.
    pub fn disjoint(&self) -> bool {
        self.overlaps.is_empty() && self.duplicate_ranks.is_empty()
    }

    /// Every element was taken (or dropped by design), by every rank there should be.
    pub fn complete(&self) -> bool {
        self.gaps.is_empty() && self.missing_ranks.is_empty()
    }
}

impl fmt::Display for CoverageReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} elements taken ({} padding, {} dropped by design): ",
            self.elements, self.total, self.padded, self.dropped
        )?;
        if self.disjoint() && self.complete() {
            return write!(f, "disjoint and complete");
        }
        let mut parts = Vec::new();
        if !self.duplicate_ranks.is_empty() {
            parts.push(format!(
                "ranks given to more than one process: {:?}",
                self.duplicate_ranks
            ));
        }
        if !self.missing_ranks.is_empty() {
            parts.push(format!("ranks missing: {:?}", self.missing_ranks));
        }
        for o in &self.overlaps {
            parts.push(if o.extra > 0 {
                format!(
                    "{} read {} times too many by ranks {:?}",
                    o.file, o.extra, o.ranks
                )
            } else {
                format!("{}: ranks {:?} took some records twice", o.file, o.ranks)
            });
        }
        for g in &self.gaps {
            parts.push(match g.missing {
                Some(n) => format!("{}: {n} records not read", g.file),
                None => format!("{}: not read", g.file),
            });
        }
        write!(f, "{}", parts.join("; "))
    }
}

/// The first summary, once all are checked to describe the same data and epoch.
fn check_same(summaries: &[Coverage]) -> anyhow::Result<&Coverage> {
    let first = summaries.first().ok_or_else(|| {
        anyhow::Error::from(Error::InvalidArgument(
            "coverage: no summaries to merge".into(),
        ))
    })?;
    for (i, s) in summaries.iter().enumerate() {
        if s.listing != first.listing {
            return Err(Error::InvalidArgument(format!(
                "coverage: summary {i} (rank {}) describes other data than summary 0 (other \
                 files, or other counts)",
                s.rank
            ))
            .into());
        }
        if s.epoch != first.epoch {
            return Err(Error::InvalidArgument(format!(
                "coverage: summary {i} (rank {}) is of epoch {}, summary 0 of epoch {}",
                s.rank, s.epoch, first.epoch
            ))
            .into());
        }
    }
    Ok(first)
}

/// The world size and ranks of each phase (a fresh plan, then each elastic resume).
fn by_phase(summaries: &[Coverage]) -> Vec<(usize, Vec<usize>)> {
    let mut phases: BTreeMap<u32, (usize, Vec<usize>)> = BTreeMap::new();
    for s in summaries {
        let phase = phases.entry(s.phase).or_insert((s.world_size, Vec::new()));
        phase.0 = phase.0.max(s.world_size);
        phase.1.push(s.rank);
    }
    phases.into_values().collect()
}

/// What the ranks of an interrupted epoch left: the runs of records no rank took, in file
/// order; the phase after theirs; and the documents taken in part, with how many of their
/// tokens were taken.
pub(super) type Rest = (Vec<Unit>, u32, BTreeMap<(usize, u64), u64>);

/// What no rank of `old` took (see [`Rest`]).
pub(super) fn rest(plan: &Plan, old: &[Coverage]) -> anyhow::Result<Rest> {
    let refuse =
        |m: String| -> anyhow::Error { Error::Checkpoint(format!("elastic resume: {m}")).into() };
    let first = check_same(old).map_err(|e| refuse(e.to_string()))?;
    if first.listing != plan.listing {
        return Err(refuse(
            "the summaries describe other data than this plan (other files, or other counts)"
                .into(),
        ));
    }
    if let Some(s) = old.iter().find(|s| s.policy == ShardPolicy::Element) {
        return Err(refuse(format!(
            "rank {} read by element (every rank reads every file, keeping every {}-th \
             element): what it did not take is not a run of records to deal out again; \
             resume with the same world size (each rank's checkpoint), or shard by file",
            s.rank, s.world_size
        )));
    }
    for (world, ranks) in by_phase(old) {
        let mut seen = BTreeSet::new();
        for r in ranks {
            if !seen.insert(r) {
                return Err(refuse(format!(
                    "rank {r} of {world} has two summaries: two processes were given rank {r}"
                )));
            }
        }
        if let Some(r) = (0..world).find(|r| !seen.contains(r)) {
            return Err(refuse(format!(
                "no summary of rank {r} of {world}: every rank's summary is needed to know what was taken"
            )));
        }
    }
    // Per file, the runs taken (with the rank and phase that took each), and the documents
    // taken in part.
    let mut taken: BTreeMap<usize, Vec<(u64, u64, usize, u32)>> = BTreeMap::new();
    let mut partial: BTreeMap<(usize, u64), (u64, usize, u32)> = BTreeMap::new();
    for s in old {
        for (&f, e) in &s.entries {
            for (&record, &end) in &e.partial {
                let at = partial.entry((f, record)).or_insert((0, s.rank, s.phase));
                if end > at.0 {
                    *at = (end, s.rank, s.phase);
                }
            }
            if e.count == 0 {
                continue;
            }
            // Summaries written before runs were kept hold one run.
            let runs = if e.runs.is_empty() && !e.scattered {
                vec![(e.first, e.end)]
            } else {
                e.runs.clone()
            };
            let len: u64 = runs.iter().map(|&(a, b)| b - a).sum();
            let fingerprint = runs.iter().fold(0u64, |h, &(a, b)| {
                h.wrapping_add(range_fingerprint(f, a, b))
            });
            if e.scattered {
                return Err(refuse(format!(
                    "rank {} took {} elements of {} in more than {MAX_RUNS} runs of records \
                     (between records {} and {}): was there a shuffle between the plan's \
                     dataset and the training loop? What it took is then not kept by position",
                    s.rank, e.count, e.name, e.first, e.end
                )));
            }
            if len != e.count || e.fingerprint != fingerprint {
                return Err(refuse(format!(
                    "rank {} took {} elements of {} that are not runs of records each taken \
                     once (between records {} and {}): it took some twice",
                    s.rank, e.count, e.name, e.first, e.end
                )));
            }
            for (a, b) in runs {
                taken.entry(f).or_default().push((a, b, s.rank, s.phase));
            }
        }
    }
    let name = |file: usize| plan.names.get(file).map_or("?", String::as_str).to_owned();
    // A document taken in part stays in the rest, to go on where it was; unless a later
    // phase took it whole (it went on there).
    let mut offsets = BTreeMap::new();
    for ((file, record), (end, rank, phase)) in partial {
        let whole = taken
            .get(&file)
            .and_then(|runs| runs.iter().find(|r| r.0 <= record && record < r.1));
        match whole {
            Some(&(_, _, _, later)) if later > phase => {}
            Some(&(_, _, other, _)) => {
                return Err(refuse(format!(
                    "rank {other} took record {record} of {} whole and rank {rank} took \
                     {end} of its tokens: the epoch already read them twice",
                    name(file)
                )));
            }
            None => {
                offsets.insert((file, record), end);
            }
        }
    }
    let mut units = Vec::new();
    for (file, &total) in plan.counts.iter().enumerate() {
        let mut runs = taken.remove(&file).unwrap_or_default();
        runs.sort_unstable();
        let mut at = 0;
        for (i, &(a, b, rank, _)) in runs.iter().enumerate() {
            if a < at {
                let other = runs[i - 1].2;
                return Err(refuse(format!(
                    "ranks {other} and {rank} both took records of {} from record {a}: the \
                     epoch already read them twice",
                    name(file)
                )));
            }
            if a > at {
                units.push(Unit {
                    file,
                    start: at,
                    end: a,
                });
            }
            at = b;
        }
        if at < total {
            units.push(Unit {
                file,
                start: at,
                end: total,
            });
        }
    }
    let phase = old.iter().map(|s| s.phase).max().unwrap_or(0) + 1;
    Ok((units, phase, offsets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_in_any_order_and_give_up_past_the_limit() {
        let mut entry = Entry::new("f".into(), 0);
        for r in [5, 0, 6, 2, 1, 9, 3, 8, 4, 3] {
            entry.add_run(r);
        }
        // 3 twice is kept once: the count (checked against the runs) tells.
        assert_eq!(entry.runs, [(0, 7), (8, 10)]);
        let mut entry = Entry::new("f".into(), 0);
        for r in (0..=MAX_RUNS as u64).map(|r| 2 * r) {
            entry.add_run(r);
        }
        assert!(entry.scattered && entry.runs.is_empty());
    }
}
