//! `Dataset.distribute`: this rank's share of a dataset for data-parallel training
//! (`streamload::distribute`). A file reader made from a list of files keeps how to shard
//! its files ([`Sharder`]: TFRecord files by file, Parquet files by row group); any other
//! dataset of known cardinality is sharded by element.

use std::sync::Arc;

use pyo3::prelude::*;
use streamload::Dataset;
use streamload::distribute::{Distribute, Distributed, Remainder, ShardPolicy};

use crate::dataset::PyDataset;
use crate::errors;
use crate::runtime::runtime;
use crate::value::Value;

/// How a file reader plans its shards: the plan reads what it needs (TFRecord files are
/// counted, Parquet footers read) when `distribute` is called.
pub(crate) type Sharder =
    Arc<dyn Fn(&Distribute) -> anyhow::Result<Dataset<Distributed<Value>>> + Send + Sync>;

/// A sharder over a `ShardSource`: the plan, then its elements converted by `convert`.
pub(crate) fn sharder<S, F>(
    source: impl Fn() -> anyhow::Result<S> + Send + Sync + 'static,
    convert: F,
) -> Sharder
where
    S: streamload::distribute::ShardSource,
    F: Fn(S::Item) -> anyhow::Result<Value> + Send + Sync + Clone + 'static,
{
    Arc::new(move |d: &Distribute| {
        let source = source()?;
        let plan = runtime()?.block_on(d.plan(source))?;
        let convert = convert.clone();
        Ok(plan.dataset().try_map(move |x| {
            let Distributed {
                item,
                padded,
                file,
                record,
                offset,
            } = x;
            Ok(Distributed {
                item: convert(item)?,
                padded,
                file,
                record,
                offset,
            })
        }))
    })
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// `ds.distribute(rank, world_size, ...)`; see `Dataset.distribute`.
#[allow(clippy::too_many_arguments)] // the keyword arguments, passed on
pub(crate) fn distribute(
    py: Python<'_>,
    ds: &PyDataset,
    rank: Option<usize>,
    world_size: Option<usize>,
    policy: &str,
    remainder: &str,
    rotate: Option<u64>,
    weights: bool,
) -> PyResult<PyDataset> {
    let (rank, world_size) = match (rank, world_size) {
        (Some(r), Some(w)) => (r, w),
        (None, None) => match (env_usize("RANK"), env_usize("WORLD_SIZE")) {
            (Some(r), Some(w)) => (r, w),
            _ => {
                return Err(errors::invalid(
                    py,
                    "distribute: give rank and world_size, or set RANK and WORLD_SIZE (as \
                     torchrun does)",
                ));
            }
        },
        _ => {
            return Err(errors::invalid(
                py,
                "distribute: give both rank and world_size",
            ));
        }
    };
    if world_size == 0 || rank >= world_size {
        return Err(errors::invalid(
            py,
            format!("distribute: rank {rank} must be below world_size {world_size}"),
        ));
    }
    let policy = match policy {
        "auto" => ShardPolicy::Auto,
        "file" => ShardPolicy::File,
        "record" => ShardPolicy::Record,
        "row_group" => ShardPolicy::RowGroup,
        "element" => ShardPolicy::Element,
        other => {
            return Err(errors::invalid(
                py,
                format!(
                    "distribute: policy must be \"auto\", \"file\", \"record\", \"row_group\" \
                     or \"element\", not {other:?}"
                ),
            ));
        }
    };
    let remainder = match remainder {
        "drop" => Remainder::Drop,
        "pad" => Remainder::Pad,
        other => {
            return Err(errors::invalid(
                py,
                format!("distribute: remainder must be \"drop\" or \"pad\", not {other:?}"),
            ));
        }
    };
    let mut plan = Distribute::new(rank, world_size)
        .policy(policy)
        .remainder(remainder);
    if let Some(seed) = rotate {
        plan = plan.rotate(seed);
    }
    let sharded = py.detach(|| match &ds.sharder {
        Some(sharder) => sharder(&plan),
        None => ds.inner.distribute(&plan).map(|p| p.dataset()),
    });
    let sharded = sharded.map_err(|e| errors::to_py(py, e))?;
    Ok(PyDataset::wrap(sharded.map(move |d| {
        if weights {
            let weight = Value::scalar(d.weight());
            Value::Tuple(vec![d.item, weight])
        } else {
            d.item
        }
    })))
}
