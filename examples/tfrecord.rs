//! A command-line tool for TFRecord files.
//!
//! ```text
//! cargo run --release --example tfrecord -- count data/*.tfrecord
//! cargo run --release --example tfrecord -- verify data/*.tfrecord      # exit code 1 if any file is damaged
//! cargo run --release --example tfrecord -- head -n 3 --example data/train-00000.tfrecord
//! cargo run --release --example tfrecord -- cat data/train-00000.tfrecord   # --base64 for binary payloads
//! printf 'a\nb\n' | cargo run --release --example tfrecord -- write --gzip out.tfrecord.gz
//! echo '{"label": [1], "weights": [0.5, 2.0], "text": ["hi"]}' | cargo run --release --example tfrecord -- write --json out.tfrecord
//! ```
//!
//! `write` takes each line's bytes as they are (any bytes, not only UTF-8; the `\n` or `\r\n`
//! ending it dropped), or with `--json` an object of feature lists per line (integers are
//! int64, and one outside int64 is an error; lists with other numbers are floats; strings
//! are bytes). On an error (a line that is not such an object, a failed read or write) it
//! stops, closes the file holding the records of the lines before (whole and readable), and
//! exits with code 2 naming the line.
//!
//! Compression is taken from the file name (`.gz`, `.zz`) unless `--compression` says
//! otherwise. Paths may be URLs (`s3://bucket/train-00000.tfrecord`, `gs://...`, `az://...`,
//! `https://...`); stores are configured from the usual environment variables (`AWS_*`, ...).
//! A URL with glob characters names the objects it matches (`s3://bucket/train-*.tfrecord`,
//! listed through `streamload::storage::glob`; not over `http(s)`, which cannot list).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use base64::Engine;
use clap::{Parser, Subcommand, ValueEnum};
use futures::StreamExt;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use streamload::Error;
use streamload::format::{Compression, Example, Kind, TFRecordDataset, TFRecordWriter};
use streamload::storage::Location;
use tokio::io::AsyncBufReadExt;

#[derive(Parser, Debug)]
#[command(about = "Count, verify, print and write TFRecord files")]
struct Cli {
    /// How the files are compressed (default: by extension).
    #[arg(long, value_enum, default_value_t = CompressionArg::Auto, global = true)]
    compression: CompressionArg,
    /// Print each file's stage report (records, MB/s, waits) to stderr (count, verify).
    #[arg(long, global = true)]
    report: bool,
    /// Time each stage, so that --report can name the bottleneck (costs a little speed).
    #[arg(long, global = true)]
    timing: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum CompressionArg {
    Auto,
    None,
    Gzip,
    Zlib,
}

impl From<CompressionArg> for Compression {
    fn from(c: CompressionArg) -> Self {
        match c {
            CompressionArg::Auto => Compression::Auto,
            CompressionArg::None => Compression::None,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Zlib => Compression::Zlib,
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Records per file and in total.
    Count { paths: Vec<Location> },
    /// Checks every CRC; reports each damaged file with the record, offset and error.
    Verify { paths: Vec<Location> },
    /// The first records of a file: payloads, or Examples decoded as JSON.
    Head {
        #[arg(short = 'n', default_value_t = 10)]
        n: usize,
        /// Decode each record as a tf.train.Example and print it as JSON.
        #[arg(long)]
        example: bool,
        path: Location,
    },
    /// Every record's payload, one per line (base64 with --base64, else as text).
    Cat {
        #[arg(long)]
        base64: bool,
        paths: Vec<Location>,
    },
    /// Reads lines from standard input and writes each as a record.
    Write {
        /// Each line is a JSON object of feature lists, written as a tf.train.Example.
        #[arg(long)]
        json: bool,
        /// GZIP-compress the output.
        #[arg(long, conflicts_with = "zlib")]
        gzip: bool,
        /// ZLIB-compress the output.
        #[arg(long)]
        zlib: bool,
        out: PathBuf,
    },
}

/// The files `paths` name: a URL with glob characters (`*`, `?`, `[`) stands for the objects
/// it matches, in order (the shell has expanded local patterns already).
async fn expand(paths: Vec<Location>) -> anyhow::Result<Vec<Location>> {
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        match &path {
            Location::Url(url) if url.path().contains(['*', '?', '[']) || url.query().is_some() => {
                files.extend(streamload::storage::glob(url.as_str()).await?);
            }
            _ => files.push(path),
        }
    }
    Ok(files)
}

fn records(
    path: &Location,
    compression: Compression,
    timing: bool,
) -> streamload::Epoch<bytes::Bytes> {
    TFRecordDataset::new([path.clone()])
        .compression(compression)
        .build()
        .with_options(streamload::Options::new().stats_timing(timing))
        .iter()
}

/// The stage report of `epoch`, whose advice for timing the stages names this tool's flag.
fn report<T>(epoch: &streamload::Epoch<T>) -> streamload::Stats {
    epoch.stats().with_timing_advice("run with --timing")
}

/// An Example as JSON: `{"name": {"int64_list": [...]}}`; bytes as text when UTF-8, else base64.
fn example_json(example: &Example) -> Value {
    let mut out = Map::new();
    for (name, feature) in example.features.iter().flat_map(|f| &f.feature) {
        let value = match &feature.kind {
            Some(Kind::Int64List(l)) => json!({ "int64_list": l.value }),
            Some(Kind::FloatList(l)) => {
                let values: Vec<Value> = l.value.iter().map(|f| float_json(*f)).collect();
                json!({ "float_list": values })
            }
            Some(Kind::BytesList(l)) => {
                let values: Vec<Value> = l.value.iter().map(|b| bytes_json(b)).collect();
                json!({ "bytes_list": values })
            }
            None => Value::Null,
        };
        out.insert(name.clone(), value);
    }
    Value::Object(out)
}

fn float_json(f: f32) -> Value {
    if f.is_finite() {
        json!(f)
    } else {
        json!(f.to_string())
    }
}

fn bytes_json(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => json!(s),
        Err(_) => json!({ "b64": base64::engine::general_purpose::STANDARD.encode(b) }),
    }
}

/// A JSON object of feature lists as an Example: integers -> int64 (an integer outside
/// int64 is an error, not a float), lists with other numbers -> float, strings -> bytes.
fn json_example(line: &[u8]) -> anyhow::Result<Example> {
    // Raw values, to tell an integer literal from a float one: serde_json reads an integer
    // too large for 64 bits as a float.
    let object: BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(line).context("expected a JSON object of feature lists")?;
    let mut example = Example::new();
    for (name, raw) in &object {
        let items: Vec<Box<RawValue>> = match serde_json::from_str(raw.get()) {
            Ok(items) => items,
            Err(_) => vec![raw.clone()],
        };
        let values: Vec<Value> = items
            .iter()
            .map(|item| serde_json::from_str(item.get()))
            .collect::<Result<_, _>>()?;
        let integer_literal = |raw: &RawValue| {
            let text = raw.get().strip_prefix('-').unwrap_or(raw.get());
            !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
        };
        example = if items.iter().all(|item| integer_literal(item)) {
            let ints = items
                .iter()
                .map(|item| {
                    item.get().parse::<i64>().map_err(|_| {
                        anyhow::anyhow!(
                            "feature {name:?}: integer {} is outside int64 \
                             [-9223372036854775808, 9223372036854775807]",
                            item.get()
                        )
                    })
                })
                .collect::<anyhow::Result<Vec<i64>>>()?;
            example.with_int64(name, ints)
        } else if values.iter().all(Value::is_number) {
            example.with_floats(
                name,
                values.iter().filter_map(Value::as_f64).map(|f| f as f32),
            )
        } else if values.iter().all(Value::is_string) {
            example.with_bytes(name, values.iter().filter_map(Value::as_str))
        } else {
            anyhow::bail!("feature {name:?}: a list of integers, numbers or strings expected");
        };
    }
    Ok(example)
}

/// Writes a record per line of `input` (a line's bytes without its `\n` or `\r\n`, or an
/// Example from a line of JSON) until the input ends or a line fails; returns the error
/// naming the line, if any. What was written stays written.
async fn write_lines<W>(
    writer: &mut TFRecordWriter<W>,
    input: impl tokio::io::AsyncBufRead + Unpin,
    json: bool,
) -> anyhow::Result<()>
where
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut input = input;
    let mut line = Vec::new();
    let mut line_no = 0u64;
    loop {
        line.clear();
        line_no += 1;
        let n = input
            .read_until(b'\n', &mut line)
            .await
            .with_context(|| format!("reading stdin line {line_no}"))?;
        if n == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        let written = if json {
            let example = json_example(&line).with_context(|| format!("stdin line {line_no}"))?;
            writer.write(&example.encode_to_bytes()).await
        } else {
            writer.write(&line).await
        };
        written.with_context(|| format!("writing the record of stdin line {line_no}"))?;
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let compression = Compression::from(cli.compression);
    // `Stdout` (not its lock) so the future stays `Send` across awaits.
    let mut out = std::io::BufWriter::new(std::io::stdout());
    match cli.command {
        Command::Count { paths } => {
            let paths = expand(paths).await?;
            let mut total = 0u64;
            for path in &paths {
                let mut epoch = records(path, compression, cli.timing);
                let mut n = 0u64;
                while let Some(record) = epoch.next().await {
                    record?;
                    n += 1;
                }
                if cli.report {
                    eprintln!("{path}:\n{}", report(&epoch));
                }
                writeln!(out, "{n}\t{}", path)?;
                total += n;
            }
            writeln!(out, "{total}\ttotal")?;
        }
        Command::Verify { paths } => {
            let paths = expand(paths).await?;
            let mut damaged = 0;
            for path in &paths {
                let mut epoch = records(path, compression, cli.timing);
                let mut n = 0u64;
                let mut failure = None;
                while let Some(record) = epoch.next().await {
                    match record {
                        Ok(_) => n += 1,
                        Err(e) => failure = Some(e),
                    }
                }
                if cli.report {
                    eprintln!("{path}:\n{}", report(&epoch));
                }
                match failure {
                    None => writeln!(out, "ok\t{n} records\t{}", path)?,
                    Some(e) => {
                        damaged += 1;
                        match e.downcast_ref::<Error>() {
                            Some(Error::DataLoss {
                                record,
                                offset,
                                message,
                                ..
                            }) => writeln!(
                                out,
                                "DAMAGED\trecord {record}\toffset {offset}\t{message}\t{}",
                                path
                            )?,
                            _ => writeln!(out, "ERROR\t{e:#}")?,
                        }
                    }
                }
            }
            out.flush()?;
            if damaged > 0 {
                eprintln!("{damaged} of {} files damaged", paths.len());
                return Ok(ExitCode::from(1));
            }
        }
        Command::Head { n, example, path } => {
            let mut epoch = records(&path, compression, cli.timing);
            let mut shown = 0;
            while shown < n {
                let Some(record) = epoch.next().await else {
                    break;
                };
                let record = record?;
                let line = if example {
                    example_json(
                        &Example::decode_record(record)
                            .with_context(|| format!("record {shown} of {}", path))?,
                    )
                } else {
                    bytes_json(&record)
                };
                writeln!(out, "{line}")?;
                shown += 1;
            }
        }
        Command::Cat { base64, paths } => {
            let paths = expand(paths).await?;
            for path in &paths {
                let mut epoch = records(path, compression, cli.timing);
                while let Some(record) = epoch.next().await {
                    let record = record?;
                    if base64 {
                        writeln!(
                            out,
                            "{}",
                            base64::engine::general_purpose::STANDARD.encode(&record)
                        )?;
                    } else {
                        out.write_all(&record)?;
                        out.write_all(b"\n")?;
                    }
                }
            }
        }
        Command::Write {
            json,
            gzip,
            zlib,
            out: path,
        } => {
            let compression = match (gzip, zlib) {
                (true, _) => Compression::Gzip,
                (_, true) => Compression::Zlib,
                _ => compression.for_path(&path),
            };
            let file = tokio::fs::File::create(&path)
                .await
                .with_context(|| format!("creating {}", path.display()))?;
            let mut writer = TFRecordWriter::new(tokio::io::BufWriter::new(file), compression);
            let stdin = tokio::io::BufReader::new(tokio::io::stdin());
            let written = write_lines(&mut writer, stdin, json).await;
            // Finished even after an error: the file holds the records accepted before it,
            // whole and readable (a GZIP/ZLIB stream closed).
            let records = writer.records();
            let finished = async {
                use tokio::io::AsyncWriteExt;
                writer.finish().await?.flush().await
            }
            .await
            .with_context(|| format!("finishing {}", path.display()));
            if let Err(e) = written {
                eprintln!(
                    "wrote {records} records to {} (the lines before the error)",
                    path.display()
                );
                if let Err(f) = finished {
                    eprintln!("error: {f:#}");
                }
                return Err(e);
            }
            finished?;
            eprintln!("wrote {records} records to {}", path.display());
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
