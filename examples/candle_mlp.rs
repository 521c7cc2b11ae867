//! Data-parallel training with candle: a small MLP learns a function of 8 features from
//! TFRecord files this example writes; each batch's buffers become candle tensors without a
//! copy (`adapters::candle::tensor`).
//!
//! ```text
//! cargo run --example candle_mlp --features candle            # rank 0 of 1
//! RANK=1 WORLD_SIZE=2 cargo run --example candle_mlp --features candle
//! ```
//!
//! Each record is 9 little-endian `f32`s: the features, then the target. The loss of each
//! epoch is printed (it falls), then the pipeline's stage report; a checkpoint taken in the
//! middle of epoch 1 is resumed by a fresh epoch, which goes on with exactly the batches
//! that were left.

use candle_core::{D, Device, Tensor, Var};
use futures::StreamExt;
use streamload::adapters::candle::tensor;
use streamload::distribute::{Distribute, Distributed, Remainder};
use streamload::format::TFRecordDataset;
use streamload::ndarray::{Array1, Array2};
use streamload::{Checkpoint, Dataset};

#[path = "support/synthetic.rs"]
mod synthetic;
use synthetic::FEATURES;

const BATCH: usize = 32;

/// A record as (features, target, weight: 0 for padding).
fn parse(d: Distributed<bytes::Bytes>) -> anyhow::Result<(Array1<f32>, f32, f32)> {
    let (x, y) = synthetic::parse_record(&d.item, d.file, d.record)?;
    Ok((Array1::from(x.to_vec()), y, d.weight()))
}

struct Mlp {
    w1: Var,
    b1: Var,
    w2: Var,
    b2: Var,
}

impl Mlp {
    fn new(device: &Device) -> candle_core::Result<Self> {
        Ok(Mlp {
            w1: Var::randn(0f32, (2.0 / FEATURES as f32).sqrt(), (FEATURES, 32), device)?,
            b1: Var::zeros(32, candle_core::DType::F32, device)?,
            w2: Var::randn(0f32, (2.0 / 32f32).sqrt(), (32, 1), device)?,
            b2: Var::zeros(1, candle_core::DType::F32, device)?,
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let h = x
            .matmul(self.w1.as_tensor())?
            .broadcast_add(self.b1.as_tensor())?
            .relu()?;
        h.matmul(self.w2.as_tensor())?
            .broadcast_add(self.b2.as_tensor())
    }

    /// Weighted mean squared error (padding weighs 0), then one SGD step.
    fn step(&self, x: &Tensor, y: &Tensor, w: &Tensor, lr: f64) -> candle_core::Result<f32> {
        let err = (self.forward(x)?.squeeze(D::Minus1)? - y)?;
        let loss =
            ((err.sqr()? * w)?.sum_all()? / w.sum_all()?.to_scalar::<f32>()?.max(1.0) as f64)?;
        let grads = loss.backward()?;
        for var in [&self.w1, &self.b1, &self.w2, &self.b2] {
            if let Some(g) = grads.get(var) {
                var.set(&(var.as_tensor() - (g * lr)?)?)?;
            }
        }
        loss.to_scalar::<f32>()
    }
}

/// Trains on one batch of collated arrays; the arrays' buffers become the tensors.
fn train_on(
    model: &Mlp,
    (x, y, w): (Array2<f32>, Array1<f32>, Array1<f32>),
    device: &Device,
) -> anyhow::Result<f32> {
    let (x, y, w) = (tensor(x, device)?, tensor(y, device)?, tensor(w, device)?);
    Ok(model.step(&x, &y, &w, 0.05)?)
}

async fn run() -> anyhow::Result<()> {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (rank, world_size) = (env("RANK", 0), env("WORLD_SIZE", 1));
    let dir = std::env::temp_dir().join(format!("streamload-candle-mlp-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let files =
        synthetic::write_data(&dir, &[420, 130, 380, 250, 300, 220], 0x2545_F491_4F6C_DD1D).await?;
    let dist = Distribute::new(rank, world_size).remainder(Remainder::Pad);
    let plan = dist.plan(TFRecordDataset::new(&files)).await?;
    let batches = || -> Dataset<(Array2<f32>, Array1<f32>, Array1<f32>)> {
        plan.dataset()
            .try_map(parse)
            .batch(BATCH)
            .collate()
            .prefetch(2)
    };
    let per_epoch = batches().cardinality().finite().unwrap_or(0);
    println!(
        "rank {rank} of {world_size}: {} rows per epoch ({:?} sharding), {per_epoch} batches",
        plan.elements_per_rank(),
        plan.policy()
    );

    let device = Device::Cpu;
    let model = Mlp::new(&device)?;
    let train = batches();
    let mut saved = None;
    let mut losses = Vec::new();
    let mut stats = None;
    for epoch in 0..4 {
        let mut stream = train.iter();
        let (mut sum, mut steps) = (0.0f32, 0u64);
        while let Some(batch) = stream.next().await {
            sum += train_on(&model, batch?, &device)?;
            steps += 1;
            if epoch == 1 && steps == 10 {
                saved = Some(stream.checkpoint()?.to_bytes());
            }
        }
        let mean = sum / steps.max(1) as f32;
        println!("epoch {epoch}: {steps} steps, mean loss {mean:.4}");
        losses.push(mean);
        stats = Some(stream.stats());
    }
    if let Some(stats) = stats {
        println!("\n{stats}");
    }
    anyhow::ensure!(
        losses[losses.len() - 1] < 0.5 * losses[0],
        "the loss did not fall: {losses:?}"
    );

    // A restarted job: the same recipe goes on from the checkpoint.
    let bytes = saved.ok_or_else(|| anyhow::anyhow!("no checkpoint taken"))?;
    let mut resumed = batches().iter_from(&Checkpoint::from_bytes(&bytes)?)?;
    let mut rest = 0;
    while let Some(batch) = resumed.next().await {
        train_on(&model, batch?, &device)?;
        rest += 1;
    }
    println!(
        "resumed epoch 1 from its checkpoint after 10 batches: {rest} batches left (expected {})",
        per_epoch - 10
    );
    anyhow::ensure!(rest == per_epoch - 10, "resumed {rest} batches");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run())
}
