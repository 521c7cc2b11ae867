//! A tiny language model (candle) trained on packed, mixed sequences, killed mid-run and
//! resumed, with the same loss curve as an uninterrupted run.
//!
//! ```text
//! cargo run --release --example tiny_lm --features candle
//! ```
//!
//! The data: two sources of byte-level documents (a toy prose of a few words, and counting
//! digits), each shuffled and repeated, mixed by weights that change at document 400
//! (`Dataset::mix` with a `Mixture::piecewise`), packed best-fit into sequences of 64 tokens
//! (`pack`), batched by 8. The model: an embedding and a linear layer over 257 ids (the
//! bytes and an end-of-document id), next-token cross-entropy within each document (the
//! segment ids mask the pairs that cross documents and the padding), plain SGD.
//!
//! The run: the whole training in this process first; then the same training in a child
//! process that saves its state every 10 steps (the pipeline's checkpoint, the weights, the
//! losses so far) and is killed (`SIGKILL`) once it has saved step 30; then a second child
//! that resumes from the last state saved and trains to the end. The two loss curves must
//! be equal, step for step, bit for bit.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use candle_core::{D, DType, Device, Tensor, Var};
use futures::StreamExt;
use streamload::rand::{Rng, SeedableRng};
use streamload::text::{Packed, Packing};
use streamload::{ChaCha8Rng, Checkpoint, Dataset, Mixture};

const STEPS: usize = 60;
const SEQ: usize = 64;
const BATCH: usize = 8;
const VOCAB: usize = 257;
const END: u32 = 256;
const HIDDEN: usize = 32;
const SAVE_EVERY: usize = 10;
const KILL_AFTER: usize = 30;

/// Document `i` of the prose source: words drawn from a few, by a generator seeded by `i`.
fn prose(i: i64) -> Vec<u32> {
    const WORDS: [&str; 8] = [
        "the ", "cat ", "sat ", "on ", "a ", "mat ", "and ", "slept ",
    ];
    let mut rng = ChaCha8Rng::seed_from_u64(i as u64);
    let n = rng.random_range(3..20);
    let mut text = String::new();
    for _ in 0..n {
        text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    text.bytes().map(u32::from).chain([END]).collect()
}

/// Document `i` of the counting source: digits counting up from `i % 10`, 10 to 59 of them.
fn counting(i: i64) -> Vec<u32> {
    let n = 10 + (i * 7 % 50) as usize;
    (0..n)
        .map(|k| u32::from(b'0') + ((i as usize + k) % 10) as u32)
        .chain([END])
        .collect()
}

/// The training batches: the two sources mixed (mostly prose, then mostly counting from
/// document 400 on), packed and batched.
fn batches() -> Dataset<Vec<Packed>> {
    let prose = Dataset::range(0, 300)
        .shuffle(64, Some(1))
        .map(prose)
        .repeat();
    let counting = Dataset::range(0, 200)
        .shuffle(64, Some(2))
        .map(counting)
        .repeat();
    let mixture = Mixture::piecewise(vec![(0, vec![0.8, 0.2]), (400, vec![0.3, 0.7])]);
    Dataset::mix(vec![prose, counting], mixture, Some(3))
        .pack(SEQ, Packing::BestFit { bins: 4 })
        .batch(BATCH)
        .prefetch(2)
}

struct Model {
    embedding: Var,
    w: Var,
    b: Var,
}

impl Model {
    /// Weights drawn from a seeded generator: every run starts from the same model.
    fn new(device: &Device) -> anyhow::Result<Model> {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut normal = |n: usize, scale: f32| -> Vec<f32> {
            (0..n)
                .map(|_| (rng.random::<f32>() - 0.5) * 2.0 * scale)
                .collect()
        };
        let embedding = Tensor::from_vec(normal(VOCAB * HIDDEN, 0.5), (VOCAB, HIDDEN), device)?;
        let w = Tensor::from_vec(normal(HIDDEN * VOCAB, 0.2), (HIDDEN, VOCAB), device)?;
        Ok(Model {
            embedding: Var::from_tensor(&embedding)?,
            w: Var::from_tensor(&w)?,
            b: Var::zeros(VOCAB, DType::F32, device)?,
        })
    }

    fn vars(&self) -> [&Var; 3] {
        [&self.embedding, &self.w, &self.b]
    }

    /// One SGD step on a batch of packed sequences; the mean loss over the pairs trained on.
    fn step(&self, batch: &[Packed], device: &Device) -> anyhow::Result<f32> {
        let (mut inputs, mut targets, mut mask) = (Vec::new(), Vec::new(), Vec::new());
        for row in batch {
            for t in 0..SEQ - 1 {
                inputs.push(row.tokens[t]);
                targets.push(row.tokens[t + 1]);
                // The next token of the same document (not padding, not the next document).
                let same = row.segment_ids[t] != 0 && row.segment_ids[t] == row.segment_ids[t + 1];
                mask.push(if same { 1f32 } else { 0.0 });
            }
        }
        let n = inputs.len();
        let inputs = Tensor::from_vec(inputs, n, device)?;
        let targets = Tensor::from_vec(targets, (n, 1), device)?;
        let mask = Tensor::from_vec(mask, n, device)?;
        let hidden = self.embedding.as_tensor().embedding(&inputs)?;
        let logits = hidden
            .matmul(self.w.as_tensor())?
            .broadcast_add(self.b.as_tensor())?;
        let picked = logits.gather(&targets, D::Minus1)?.squeeze(D::Minus1)?;
        let nll = (logits.log_sum_exp(D::Minus1)? - picked)?;
        let count = mask.sum_all()?.to_scalar::<f32>()?.max(1.0);
        let loss = ((nll * &mask)?.sum_all()? / f64::from(count))?;
        let grads = loss.backward()?;
        for var in self.vars() {
            if let Some(g) = grads.get(var) {
                var.set(&(var.as_tensor() - (g * 1.0)?)?)?;
            }
        }
        Ok(loss.to_scalar::<f32>()?)
    }

    fn weights(&self) -> anyhow::Result<Vec<f32>> {
        let mut out = Vec::new();
        for var in self.vars() {
            out.extend(var.as_tensor().flatten_all()?.to_vec1::<f32>()?);
        }
        Ok(out)
    }

    fn load(&self, weights: &[f32], device: &Device) -> anyhow::Result<()> {
        let mut at = 0;
        for var in self.vars() {
            let n = var.as_tensor().elem_count();
            let part = weights
                .get(at..at + n)
                .ok_or_else(|| anyhow::anyhow!("a saved state with too few weights"))?;
            var.set(&Tensor::from_vec(
                part.to_vec(),
                var.as_tensor().shape(),
                device,
            )?)?;
            at += n;
        }
        Ok(())
    }
}

/// What a training process saves: the step, the losses so far, the weights and the
/// pipeline's checkpoint, in one file written atomically (a kill leaves the last one whole).
fn save(
    dir: &Path,
    step: usize,
    losses: &[f32],
    weights: &[f32],
    pipeline: &[u8],
) -> anyhow::Result<()> {
    let mut bytes = Vec::new();
    for n in [step, losses.len(), weights.len(), pipeline.len()] {
        bytes.extend((n as u64).to_le_bytes());
    }
    losses
        .iter()
        .chain(weights)
        .for_each(|x| bytes.extend(x.to_le_bytes()));
    bytes.extend(pipeline);
    let tmp = dir.join("state.tmp");
    std::fs::write(&tmp, &bytes)?;
    std::fs::rename(tmp, dir.join("state"))?;
    Ok(())
}

type Saved = (usize, Vec<f32>, Vec<f32>, Vec<u8>);

fn load(dir: &Path) -> anyhow::Result<Option<Saved>> {
    let Ok(bytes) = std::fs::read(dir.join("state")) else {
        return Ok(None);
    };
    let word = |i: usize| -> anyhow::Result<usize> {
        let b = bytes
            .get(8 * i..8 * i + 8)
            .ok_or_else(|| anyhow::anyhow!("a short state"))?;
        Ok(u64::from_le_bytes(b.try_into()?) as usize)
    };
    let (step, n_losses, n_weights, n_pipeline) = (word(0)?, word(1)?, word(2)?, word(3)?);
    let floats = |from: usize, n: usize| -> anyhow::Result<Vec<f32>> {
        let b = bytes
            .get(from..from + 4 * n)
            .ok_or_else(|| anyhow::anyhow!("a short state"))?;
        Ok(b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    };
    let losses = floats(32, n_losses)?;
    let weights = floats(32 + 4 * n_losses, n_weights)?;
    let at = 32 + 4 * (n_losses + n_weights);
    let pipeline = bytes
        .get(at..at + n_pipeline)
        .ok_or_else(|| anyhow::anyhow!("a short state"))?;
    Ok(Some((step, losses, weights, pipeline.to_vec())))
}

/// Trains to `STEPS`, from the state saved in `dir` if there is one; with `dir`, saves every
/// `SAVE_EVERY` steps and prints `saved <step>`. Returns the whole loss curve.
async fn train(dir: Option<&Path>) -> anyhow::Result<Vec<f32>> {
    let device = Device::Cpu;
    let model = Model::new(&device)?;
    let (mut step, mut losses, mut epoch) = (0, Vec::new(), batches().iter());
    if let Some((saved_step, saved_losses, weights, pipeline)) =
        dir.map(load).transpose()?.flatten()
    {
        model.load(&weights, &device)?;
        epoch = batches().iter_from(&Checkpoint::from_bytes(&pipeline)?)?;
        (step, losses) = (saved_step, saved_losses);
        println!("resumed at step {step}");
    }
    while step < STEPS {
        let batch = epoch
            .next()
            .await
            .ok_or_else(|| anyhow::anyhow!("the pipeline ended"))??;
        losses.push(model.step(&batch, &device)?);
        step += 1;
        if let Some(dir) = dir
            && step % SAVE_EVERY == 0
        {
            save(
                dir,
                step,
                &losses,
                &model.weights()?,
                &epoch.checkpoint()?.to_bytes(),
            )?;
            println!("saved {step}");
            std::io::stdout().flush()?;
        }
    }
    Ok(losses)
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, dir] = &args[..]
        && flag == "--child"
    {
        let losses = runtime.block_on(train(Some(Path::new(dir))))?;
        let text: Vec<String> = losses.iter().map(|l| l.to_bits().to_string()).collect();
        std::fs::write(Path::new(dir).join("losses"), text.join("\n"))?;
        return Ok(());
    }

    let whole = runtime.block_on(train(None))?;
    println!(
        "uninterrupted: loss {:.3} at step 1, {:.3} at step {STEPS}",
        whole[0],
        whole[STEPS - 1]
    );

    let dir = std::env::temp_dir().join(format!("streamload-tiny-lm-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let exe = std::env::current_exe()?;
    let mut child = Command::new(&exe)
        .args(["--child", &dir.display().to_string()])
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    for line in BufReader::new(stdout).lines() {
        if line? == format!("saved {KILL_AFTER}") {
            child.kill()?;
            break;
        }
    }
    let status = child.wait()?;
    println!("training process killed after saving step {KILL_AFTER} ({status})");
    anyhow::ensure!(
        !status.success(),
        "the training process ended before it was killed"
    );

    let resumed = Command::new(&exe)
        .args(["--child", &dir.display().to_string()])
        .status()?;
    anyhow::ensure!(resumed.success(), "the resumed training failed: {resumed}");
    let curve: Vec<f32> = std::fs::read_to_string(dir.join("losses"))?
        .lines()
        .map(|l| Ok(f32::from_bits(l.parse()?)))
        .collect::<anyhow::Result<_>>()?;
    std::fs::remove_dir_all(&dir)?;

    for (step, (a, b)) in whole.iter().zip(&curve).enumerate().step_by(10) {
        println!(
            "step {:>2}: uninterrupted {a:.4}, killed and resumed {b:.4}",
            step + 1
        );
    }
    anyhow::ensure!(
        curve == whole,
        "the loss curves differ:\n{whole:?}\n{curve:?}"
    );
    anyhow::ensure!(
        whole[STEPS - 1] < 0.7 * whole[0],
        "the loss did not fall: {whole:?}"
    );
    println!("the same {STEPS} losses, bit for bit");
    Ok(())
}
