//! `Dataset::mix`: weights that follow a schedule, in proportion within statistical bounds,
//! each input in its order, and a resume under changed weights that goes on from its step.

use futures::StreamExt;
use streamload::{Checkpoint, Dataset, Error, Mixture};

/// Input `i` of `n`: `i, i + n, i + 2n, ...` (its elements say which input they are).
fn inputs(n: usize) -> Vec<Dataset<i64>> {
    (0..n as i64)
        .map(|i| Dataset::counter(i, n as i64))
        .collect()
}

/// How many of `draws` came from each of `n` inputs.
fn counts(draws: &[i64], n: usize) -> Vec<usize> {
    let mut c = vec![0; n];
    draws.iter().for_each(|&x| c[(x % n as i64) as usize] += 1);
    c
}

/// `count` of `total` draws is within 5 standard deviations of weight `p`.
fn near(count: usize, total: usize, p: f64) -> bool {
    let mean = total as f64 * p;
    let sd = (total as f64 * p * (1.0 - p)).sqrt();
    (count as f64 - mean).abs() <= 5.0 * sd.max(1.0)
}

#[tokio::test]
async fn proportions_follow_the_weights_at_each_step() {
    // Constant.
    let ds = Dataset::mix(inputs(3), Mixture::constant(vec![2.0, 3.0, 5.0]), Some(1));
    let draws = ds.take(30_000).collect().await.unwrap();
    let c = counts(&draws, 3);
    for (i, p) in [0.2, 0.3, 0.5].into_iter().enumerate() {
        assert!(near(c[i], 30_000, p), "constant: {c:?}");
    }
    // Piecewise: the weights change at step 10,000.
    let m = Mixture::piecewise(vec![(10_000, vec![0.25, 0.75]), (0, vec![1.0, 0.0])]);
    let draws = Dataset::mix(inputs(2), m, Some(2))
        .take(30_000)
        .collect()
        .await
        .unwrap();
    assert_eq!(counts(&draws[..10_000], 2), [10_000, 0]);
    let c = counts(&draws[10_000..], 2);
    assert!(near(c[1], 20_000, 0.75), "piecewise: {c:?}");
    // Linear from all of input 0 at step 0 to all of input 1 at step 20,000: each window's
    // share follows the line.
    let m = Mixture::linear(vec![(0, vec![1.0, 0.0]), (20_000, vec![0.0, 1.0])]);
    let draws = Dataset::mix(inputs(2), m, Some(3))
        .take(24_000)
        .collect()
        .await
        .unwrap();
    for w in 0..12 {
        let window = &draws[w * 2_000..(w + 1) * 2_000];
        let p = ((w as f64 + 0.5) * 2_000.0 / 20_000.0).min(1.0);
        let c = counts(window, 2);
        assert!(
            near(c[1], 2_000, p),
            "linear, window {w}: {c:?} against {p}"
        );
    }
    // Any function of the step.
    let m = Mixture::from_fn(|step| {
        if step % 2 == 0 {
            vec![1.0, 0.0]
        } else {
            vec![0.0, 1.0]
        }
    });
    let draws = Dataset::mix(inputs(2), m, None)
        .take(100)
        .collect()
        .await
        .unwrap();
    assert!(
        draws
            .iter()
            .enumerate()
            .all(|(s, x)| (x % 2) as usize == s % 2)
    );
}

#[tokio::test]
async fn each_input_keeps_its_order_and_an_ended_one_is_not_drawn_again() {
    let sources = vec![
        Dataset::range(0, 50),
        Dataset::range(100, 400),
        Dataset::range(1_000, 1_010),
    ];
    let m = Mixture::constant(vec![1.0, 1.0, 8.0]);
    let all = Dataset::mix(sources, m, Some(4)).collect().await.unwrap();
    for (lo, hi) in [(0, 50), (100, 400), (1_000, 1_010)] {
        let mine: Vec<i64> = all
            .iter()
            .copied()
            .filter(|x| (lo..hi).contains(x))
            .collect();
        assert_eq!(mine, (lo..hi).collect::<Vec<_>>());
    }
    assert_eq!(all.len(), 360);
}

/// The refusing mixtures of the test below, made again for a resume (by what they say).
fn m_again(says: &str) -> Mixture {
    match says {
        "are 1, for 2 datasets" => Mixture::piecewise(vec![(0, vec![1.0, 1.0]), (5, vec![1.0])]),
        "hold -1" => Mixture::from_fn(|s| vec![1.0, if s < 5 { 1.0 } else { -1.0 }]),
        _ => Mixture::from_fn(|s| vec![if s < 5 { 1.0 } else { 0.0 }; 2]),
    }
}

#[tokio::test]
async fn weights_that_are_not_weights_are_an_error_naming_the_step_and_end_the_mixture() {
    for (m, says) in [
        (
            Mixture::piecewise(vec![(0, vec![1.0, 1.0]), (5, vec![1.0])]),
            "are 1, for 2 datasets",
        ),
        (
            Mixture::from_fn(|s| vec![1.0, if s < 5 { 1.0 } else { -1.0 }]),
            "hold -1",
        ),
        (
            Mixture::from_fn(|s| vec![if s < 5 { 1.0 } else { 0.0 }; 2]),
            "has weight 0",
        ),
    ] {
        let mut epoch = Dataset::mix(inputs(2), m, Some(5)).iter();
        let mut out = Vec::new();
        for _ in 0..6 {
            out.push(epoch.next().await.expect("five elements and the error"));
        }
        // A checkpoint right after the error resumes at the end, without the error again.
        let bytes = epoch.checkpoint().unwrap().to_bytes();
        assert!(epoch.next().await.is_none(), "the error ends the mixture");
        let again = Dataset::mix(inputs(2), m_again(says), Some(5));
        let mut resumed = again
            .iter_from(&Checkpoint::from_bytes(&bytes).unwrap())
            .unwrap();
        assert!(
            resumed.next().await.is_none(),
            "{says}: resumed past its end"
        );
        let e = out[5].as_ref().unwrap_err();
        assert!(
            matches!(e.downcast_ref::<Error>(), Some(Error::InvalidArgument(_))),
            "{e:#}"
        );
        let message = format!("{e:#}");
        assert!(
            message.contains("step 5") && message.contains(says),
            "{message}"
        );
    }
}

#[tokio::test]
async fn a_resume_under_changed_weights_goes_on_from_its_step() {
    let (before, after) = (vec![0.9, 0.1], vec![0.1, 0.9]);
    for k in [0usize, 1, 37, 500] {
        let mut epoch = Dataset::mix(inputs(2), Mixture::constant(before.clone()), Some(6)).iter();
        let mut seen = Vec::new();
        for _ in 0..k {
            seen.push(epoch.next().await.unwrap().unwrap());
        }
        let bytes = epoch.checkpoint().unwrap().to_bytes();
        drop(epoch);
        // The training loop changed the weights: the recipe with the new schedule accepts the
        // checkpoint.
        let changed = Dataset::mix(inputs(2), Mixture::constant(after.clone()), Some(6));
        let checkpoint = Checkpoint::from_bytes(&bytes).unwrap();
        let resumed = changed.iter_from(&checkpoint).unwrap();
        seen.extend(
            resumed
                .take(1_000 - k)
                .map(Result::unwrap)
                .collect::<Vec<_>>()
                .await,
        );
        // As one epoch whose weights changed at step k.
        let (b, a) = (before.clone(), after.clone());
        let m = Mixture::from_fn(move |s| {
            if (s as usize) < k {
                b.clone()
            } else {
                a.clone()
            }
        });
        let whole = Dataset::mix(inputs(2), m, Some(6))
            .take(1_000)
            .collect()
            .await
            .unwrap();
        assert_eq!(seen, whole, "resumed at {k}");
    }
}

#[test]
#[should_panic(expected = "mix: `datasets` should not be empty")]
fn no_datasets_is_refused() {
    let _ = Dataset::<i64>::mix(Vec::new(), Mixture::constant(Vec::new()), None);
}

#[tokio::test]
async fn over_tokens_the_schedule_follows_the_tokens_passed_on() {
    // Documents of 1 to 9 tokens; the weights change after 5,000 tokens.
    let docs = |k: u32| Dataset::counter(0, 1).map(move |i| vec![k; (i % 9 + 1) as usize]);
    let m = Mixture::piecewise(vec![(0, vec![1.0, 0.0]), (5_000, vec![0.0, 1.0])]);
    let all = Dataset::mix_over_tokens(vec![docs(0), docs(1)], m, Some(8), Vec::len)
        .take(2_000)
        .collect()
        .await
        .unwrap();
    let mut tokens = 0;
    for doc in &all {
        // The source drawn is the one the schedule gives at the tokens passed on so far.
        assert_eq!(doc[0], u32::from(tokens >= 5_000), "at {tokens} tokens");
        tokens += doc.len();
    }
    // Resumed mid-way, it goes on counting the tokens.
    let make = || {
        let m = Mixture::piecewise(vec![(0, vec![0.9, 0.1]), (300, vec![0.1, 0.9])]);
        Dataset::mix_over_tokens(vec![docs(0), docs(1)], m, Some(9), Vec::len).take(200)
    };
    let whole = make().collect().await.unwrap();
    for k in [0, 1, 30, 77, 150] {
        let mut epoch = make().iter();
        let mut seen = Vec::new();
        for _ in 0..k {
            seen.push(epoch.next().await.unwrap().unwrap());
        }
        let bytes = epoch.checkpoint().unwrap().to_bytes();
        drop(epoch);
        let resumed = make()
            .iter_from(&Checkpoint::from_bytes(&bytes).unwrap())
            .unwrap();
        seen.extend(resumed.map(Result::unwrap).collect::<Vec<_>>().await);
        assert_eq!(seen, whole, "resumed at {k}");
    }
}
