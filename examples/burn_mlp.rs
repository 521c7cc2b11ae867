//! Data-parallel training with burn: a small MLP learns a function of 8 features from
//! TFRecord files this example writes, fed by a `StreamLoader` over this rank's shard.
//!
//! ```text
//! cargo run --example burn_mlp --features burn            # rank 0 of 1
//! RANK=1 WORLD_SIZE=2 cargo run --example burn_mlp --features burn
//! ```
//!
//! Each record is 9 little-endian `f32`s: the features, then the target. The loss of each
//! epoch is printed (it falls), then the pipeline's stage report; a checkpoint taken in the
//! middle of epoch 1 is resumed by a fresh loader, which goes on with exactly the batches
//! that were left.

use burn::backend::{Autodiff, NdArray};
use burn::data::dataloader::DataLoader;
use burn::data::dataloader::batcher::Batcher;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Tensor, TensorData};
use streamload::Dataset;
use streamload::adapters::burn::StreamLoader;
use streamload::distribute::{Distribute, Distributed, Remainder};
use streamload::format::TFRecordDataset;

#[path = "support/synthetic.rs"]
mod synthetic;
use synthetic::FEATURES;

/// The backend trained on: ndarray on the CPU, with autodiff.
type Train = Autodiff<NdArray>;

/// One training row: features, target, and its weight in the loss (0 for padding).
#[derive(Clone, Debug)]
struct Row {
    x: [f32; FEATURES],
    y: f32,
    weight: f32,
}

fn parse(d: Distributed<bytes::Bytes>) -> anyhow::Result<Row> {
    let (x, y) = synthetic::parse_record(&d.item, d.file, d.record)?;
    Ok(Row {
        x,
        y,
        weight: d.weight(),
    })
}

/// A batch on the device: features `[n, 8]`, targets and weights `[n, 1]`.
#[derive(Clone, Debug)]
struct Batch<B: Backend> {
    x: Tensor<B, 2>,
    y: Tensor<B, 2>,
    weight: Tensor<B, 2>,
}

struct RowBatcher;

impl<B: Backend> Batcher<B, Row, Batch<B>> for RowBatcher {
    fn batch(&self, rows: Vec<Row>, device: &B::Device) -> Batch<B> {
        let n = rows.len();
        let x: Vec<f32> = rows.iter().flat_map(|r| r.x).collect();
        let y: Vec<f32> = rows.iter().map(|r| r.y).collect();
        let w: Vec<f32> = rows.iter().map(|r| r.weight).collect();
        Batch {
            x: Tensor::from_data(TensorData::new(x, [n, FEATURES]), device),
            y: Tensor::from_data(TensorData::new(y, [n, 1]), device),
            weight: Tensor::from_data(TensorData::new(w, [n, 1]), device),
        }
    }
}

#[derive(Module, Debug)]
struct Mlp<B: Backend> {
    hidden: Linear<B>,
    out: Linear<B>,
    relu: Relu,
}

impl<B: Backend> Mlp<B> {
    fn new(device: &B::Device) -> Self {
        Mlp {
            hidden: LinearConfig::new(FEATURES, 32).init(device),
            out: LinearConfig::new(32, 1).init(device),
            relu: Relu::new(),
        }
    }

    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        self.out.forward(self.relu.forward(self.hidden.forward(x)))
    }

    /// Mean squared error, padding weighted 0.
    fn loss(&self, batch: &Batch<B>) -> Tensor<B, 1> {
        let err = self.forward(batch.x.clone()) - batch.y.clone();
        let weighted = err.clone() * err * batch.weight.clone();
        weighted.sum() / batch.weight.clone().sum().clamp_min(1.0)
    }
}

fn loader(items: Dataset<Row>) -> anyhow::Result<StreamLoader<Train, Row, Batch<Train>>> {
    StreamLoader::new(items, 32, RowBatcher, Default::default())
}

fn main() -> anyhow::Result<()> {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (rank, world_size) = (env("RANK", 0), env("WORLD_SIZE", 1));
    let dir = std::env::temp_dir().join(format!("streamload-burn-mlp-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let setup = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let files = setup.block_on(synthetic::write_data(
        &dir,
        &[420, 130, 380, 250, 300, 220],
        0x9E37_79B9_7F4A_7C15,
    ))?;
    // This rank's files, balanced by record count; padded so every rank takes as many steps.
    let dist = Distribute::new(rank, world_size).remainder(Remainder::Pad);
    let plan = setup.block_on(dist.plan(TFRecordDataset::new(&files)))?;
    let items = || plan.dataset().try_map(parse).prefetch(4);
    let train = loader(items())?;
    println!(
        "rank {rank} of {world_size}: {} rows per epoch ({:?} sharding), {} batches",
        train.num_items(),
        plan.policy(),
        train.num_items().div_ceil(32)
    );

    let device = Default::default();
    let mut model = Mlp::<Train>::new(&device);
    let mut optim = AdamConfig::new().init::<Train, Mlp<Train>>();
    let mut saved = None;
    let mut losses = Vec::new();
    for epoch in 0..4 {
        let (mut sum, mut steps) = (0.0f32, 0);
        for (step, batch) in train.iter().enumerate() {
            let loss = model.loss(&batch);
            sum += loss.clone().into_scalar().elem::<f32>();
            steps += 1;
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(1e-2, model, grads);
            if epoch == 1 && step == 9 {
                // The input pipeline's position after 10 batches, as a training job saves it
                // beside the model's.
                saved = Some((
                    train.checkpoint()?.to_bytes(),
                    train.num_items().div_ceil(32) - 10,
                ));
            }
        }
        if let Some(e) = train.take_error() {
            return Err(e.context(format!("epoch {epoch}")));
        }
        let mean = sum / steps.max(1) as f32;
        println!("epoch {epoch}: {steps} steps, mean loss {mean:.4}");
        losses.push(mean);
    }
    if let Some(stats) = train.stats() {
        println!("\n{stats}");
    }
    anyhow::ensure!(
        losses[losses.len() - 1] < 0.5 * losses[0],
        "the loss did not fall: {losses:?}"
    );

    // A restarted job: a fresh loader over the same recipe goes on from the checkpoint.
    let (bytes, left) = saved.ok_or_else(|| anyhow::anyhow!("no checkpoint taken"))?;
    let resumed = loader(items())?;
    resumed.resume_from(streamload::Checkpoint::from_bytes(&bytes)?);
    let rest = resumed.iter().count();
    if let Some(e) = resumed.take_error() {
        return Err(e);
    }
    println!(
        "resumed epoch 1 from its checkpoint after 10 batches: {rest} batches left (expected {left})"
    );
    anyhow::ensure!(rest == left, "resumed {rest} batches, expected {left}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
