//! Choosing the policy, splitting the units into one shard per rank, and the equal count.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::{Distribute, Remainder, ShardPolicy, ShardSource, Unit, invalid};
use crate::hash::mix64;

/// The policy `dist` asks for, applied to these units: `Auto` resolved, the others checked.
pub(super) fn resolve<S: ShardSource + ?Sized>(
    dist: &Distribute,
    source: &S,
    units: &[Unit],
    phase: u32,
) -> anyhow::Result<ShardPolicy> {
    if phase > 0 {
        // The rest of an interrupted epoch: runs of records (see `ShardPlan::resume`).
        return Ok(ShardPolicy::Record);
    }
    let w = dist.world_size;
    let holding = units.iter().filter(|u| !u.is_empty()).count();
    let name = source.names().into_iter().next().unwrap_or_default();
    let files = units.len();
    Ok(match dist.policy {
        ShardPolicy::Auto if holding >= w && !row_groups_balance_better(source, units, w) => {
            ShardPolicy::File
        }
        ShardPolicy::Auto if source.seekable_records() => ShardPolicy::Record,
        ShardPolicy::Auto if source.row_groups().is_some() => ShardPolicy::RowGroup,
        ShardPolicy::Auto => ShardPolicy::Element,
        ShardPolicy::File if holding < w => {
            return Err(invalid(format!(
                "ShardPolicy::File needs at least one file holding elements per rank: {holding} \
                 of the {files} files ({name}, ...) hold elements, for {w} ranks; use \
                 ShardPolicy::Auto or ShardPolicy::Element"
            )));
        }
        ShardPolicy::Record if !source.seekable_records() => {
            return Err(invalid(format!(
                "ShardPolicy::Record needs a source that starts reading at a record without \
                 reading the ones before it (a TFRecord index); this one ({name}, ...) cannot: \
                 use ShardPolicy::File or ShardPolicy::Element"
            )));
        }
        ShardPolicy::RowGroup if source.row_groups().is_none() => {
            return Err(invalid(format!(
                "ShardPolicy::RowGroup needs a source that knows its row groups (Parquet); \
                 this one ({name}, ...) has none: use ShardPolicy::File or ShardPolicy::Element"
            )));
        }
        other => other,
    })
}

/// Whether dealing row groups leaves the ranks' element counts closer than dealing whole
/// files (a few large files among small ones): `Auto` then shards by row group, which reads
/// nothing twice either.
fn row_groups_balance_better<S: ShardSource + ?Sized>(
    source: &S,
    units: &[Unit],
    w: usize,
) -> bool {
    let Some(groups) = source.row_groups() else {
        return false;
    };
    let spread = |units: &[Unit]| {
        let sizes: Vec<u64> = balance(units, w)
            .iter()
            .map(|s| s.iter().map(|&u| units[u].len()).sum())
            .collect();
        sizes.iter().max().unwrap_or(&0) - sizes.iter().min().unwrap_or(&0)
    };
    let pieces: Vec<Unit> = groups
        .iter()
        .enumerate()
        .flat_map(|(file, sizes)| {
            sizes.iter().map(move |&n| Unit {
                file,
                start: 0,
                end: n,
            })
        })
        .collect();
    spread(&pieces) < spread(units)
}

/// The units to read and, for each shard, which of them, in reading order.
pub(super) fn shards<S: ShardSource + ?Sized>(
    dist: &Distribute,
    policy: ShardPolicy,
    source: &S,
    counts: &[u64],
    units: Vec<Unit>,
) -> anyhow::Result<(Vec<Unit>, Vec<Vec<usize>>)> {
    let w = dist.world_size;
    match policy {
        ShardPolicy::Element => Ok((units, Vec::new())),
        ShardPolicy::File => {
            let shards = balance(&units, w);
            Ok((units, shards))
        }
        ShardPolicy::RowGroup => {
            let groups = source.row_groups().unwrap_or_default();
            let mut pieces = Vec::new();
            for (file, sizes) in groups.iter().enumerate() {
                let total: u64 = sizes.iter().sum();
                if counts.get(file) != Some(&total) {
                    return Err(invalid(format!(
                        "the row groups of file {file} hold {total} elements, its count is {:?}",
                        counts.get(file)
                    )));
                }
                let mut start = 0;
                for &n in sizes {
                    pieces.push(Unit {
                        file,
                        start,
                        end: start + n,
                    });
                    start += n;
                }
            }
            let shards = balance(&pieces, w);
            Ok((pieces, shards))
        }
        // Contiguous runs: shard k holds records [k*T/w, (k+1)*T/w) of the units in order.
        _ => {
            let total: u64 = units.iter().map(Unit::len).sum();
            let bound = |k: usize| (u128::from(total) * k as u128 / w as u128) as u64;
            let mut pieces = Vec::new();
            let mut shards = vec![Vec::new(); w];
            let mut at = 0u64; // records of the units before `unit`
            for unit in units {
                let (lo, hi) = (at, at + unit.len());
                at = hi;
                for (k, shard) in shards.iter_mut().enumerate() {
                    let (a, b) = (bound(k).max(lo), bound(k + 1).min(hi));
                    if a < b {
                        shard.push(pieces.len());
                        pieces.push(Unit {
                            file: unit.file,
                            start: unit.start + (a - lo),
                            end: unit.start + (b - lo),
                        });
                    }
                }
            }
            Ok((pieces, shards))
        }
    }
}

/// Longest-processing-time balancing: the largest unit first, each to the shard with the
/// fewest elements (the lowest index on ties); each shard then read in the units' order.
fn balance(units: &[Unit], w: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by_key(|&u| (std::cmp::Reverse(units[u].len()), u));
    let mut shards = vec![Vec::new(); w];
    let mut totals = vec![0u64; w];
    for u in order {
        let k = (0..w).min_by_key(|&k| (totals[k], k)).unwrap_or(0);
        totals[k] += units[u].len();
        shards[k].push(u);
    }
    for shard in &mut shards {
        shard.sort_unstable();
    }
    shards
}

/// The elements of each shard (for `Element`, of each rank).
pub(super) fn sizes(
    dist: &Distribute,
    policy: ShardPolicy,
    units: &[Unit],
    shards: &[Vec<usize>],
) -> Vec<u64> {
    let w = dist.world_size as u64;
    if policy == ShardPolicy::Element {
        let n: u64 = units.iter().map(Unit::len).sum();
        return (0..w).map(|r| n / w + u64::from(r < n % w)).collect();
    }
    shards
        .iter()
        .map(|s| s.iter().map(|&u| units[u].len()).sum())
        .collect()
}

/// The elements every rank yields per epoch.
pub(super) fn target(
    dist: &Distribute,
    policy: ShardPolicy,
    units: &[Unit],
    shards: &[Vec<usize>],
) -> anyhow::Result<u64> {
    let sizes = sizes(dist, policy, units, shards);
    let (min, max) = (
        sizes.iter().copied().min().unwrap_or(0),
        sizes.iter().copied().max().unwrap_or(0),
    );
    match dist.remainder {
        Remainder::Drop => Ok(min),
        Remainder::Pad => {
            if min == 0 && max > 0 {
                let empty = sizes.iter().position(|&n| n == 0).unwrap_or(0);
                return Err(invalid(format!(
                    "Remainder::Pad: shard {empty} of {} has no elements to repeat ({} in all, \
                     {max} in the largest shard): use fewer ranks, Remainder::Drop, or \
                     ShardPolicy::Element",
                    dist.world_size,
                    units.iter().map(Unit::len).sum::<u64>()
                )));
            }
            Ok(max)
        }
    }
}

/// The shard each rank reads in `epoch`: a permutation drawn from `(seed, epoch)`.
pub(super) fn rotation(seed: u64, epoch: u64, w: usize) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..w).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(mix64(seed ^ mix64(epoch ^ 0xD157_0000)));
    perm.shuffle(&mut rng);
    perm
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(file: usize, n: u64) -> Unit {
        Unit {
            file,
            start: 0,
            end: n,
        }
    }

    #[test]
    fn balance_puts_the_largest_first_where_least_is() {
        let units = [unit(0, 5), unit(1, 2), unit(2, 7), unit(3, 3)];
        assert_eq!(balance(&units, 2), [vec![1, 2], vec![0, 3]]); // 9 and 8
        assert_eq!(balance(&units, 3), [vec![2], vec![0], vec![1, 3]]);
    }

    #[test]
    fn runs_split_records_evenly_across_files() {
        let dist = Distribute::new(0, 3);
        struct NoSource;
        impl ShardSource for NoSource {
            type Item = ();
            fn names(&self) -> Vec<String> {
                Vec::new()
            }
            fn count(&self) -> futures::future::BoxFuture<'_, anyhow::Result<Vec<u64>>> {
                Box::pin(async { Ok(Vec::new()) })
            }
            fn read(&self, _: Unit) -> crate::Dataset<()> {
                crate::Dataset::from_vec(Vec::new())
            }
        }
        let (pieces, shards) = shards(
            &dist,
            ShardPolicy::Record,
            &NoSource,
            &[4, 3],
            vec![unit(0, 4), unit(1, 3)],
        )
        .unwrap();
        let got: Vec<Vec<Unit>> = shards
            .iter()
            .map(|s| s.iter().map(|&u| pieces[u]).collect())
            .collect();
        let run = |file, start, end| Unit { file, start, end };
        assert_eq!(
            got,
            [vec![run(0, 0, 2)], vec![run(0, 2, 4)], vec![run(1, 0, 3)]]
        );
    }

    #[test]
    fn rotation_is_a_permutation_that_changes() {
        let perms: Vec<Vec<usize>> = (0..8).map(|e| rotation(7, e, 5)).collect();
        for p in &perms {
            let mut s = p.clone();
            s.sort_unstable();
            assert_eq!(s, [0, 1, 2, 3, 4]);
        }
        assert!(perms.iter().any(|p| p != &perms[0]));
        assert_eq!(rotation(7, 3, 5), perms[3]);
    }
}
