//! `Dataset::batch_by_tokens`: batches of at most a budget of tokens, whole elements in order.

use futures::StreamExt;
use rand::{Rng, SeedableRng};
use streamload::{Dataset, Error};

#[tokio::test]
async fn batches_hold_as_many_whole_elements_as_the_budget_allows() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for round in 0..30 {
        let max = [1, 7, 64, 500][round % 4];
        let lengths: Vec<usize> = (0..rng.random_range(0..200))
            .map(|_| rng.random_range(0..=max))
            .collect();
        let batches = Dataset::from_vec((0..lengths.len()).collect::<Vec<_>>())
            .batch_by_tokens(max, {
                let lengths = lengths.clone();
                move |&i| lengths[i]
            })
            .collect()
            .await
            .unwrap();
        // Every element once, in order.
        let flat: Vec<usize> = batches.concat();
        assert_eq!(flat, (0..lengths.len()).collect::<Vec<_>>());
        for (b, batch) in batches.iter().enumerate() {
            let used: usize = batch.iter().map(|&i| lengths[i]).sum();
            assert!(
                !batch.is_empty() && used <= max,
                "batch {b}: {used} of {max}"
            );
            // Passed on only when the next element would not fit.
            if let Some(next) = batches.get(b + 1) {
                assert!(used + lengths[next[0]] > max, "batch {b} could hold more");
            }
        }
    }
}

#[tokio::test]
async fn an_element_longer_than_the_budget_is_refused_never_cut() {
    let docs = vec![vec![1u32; 3], vec![2; 9], vec![3; 2], vec![4; 4]];
    let mut epoch = Dataset::from_vec(docs).batch_by_tokens(6, Vec::len).iter();
    let mut out = Vec::new();
    while let Some(item) = epoch.next().await {
        out.push(item.map(|b| b.iter().map(Vec::len).collect::<Vec<_>>()));
    }
    assert_eq!(out.len(), 3, "{out:?}");
    let e = out[0].as_ref().unwrap_err();
    assert!(
        matches!(e.downcast_ref::<Error>(), Some(Error::InvalidArgument(_))),
        "{e:#}"
    );
    assert!(format!("{e:#}").contains("an element of 9 tokens is longer than the budget of 6"));
    // The batch being filled went on past it.
    assert_eq!(out[1].as_ref().unwrap(), &[3, 2]);
    assert_eq!(out[2].as_ref().unwrap(), &[4]);
}

#[test]
#[should_panic(expected = "batch_by_tokens: the budget must be at least 1 token")]
fn a_budget_of_zero_is_refused() {
    let _ = Dataset::from_vec(vec![vec![1u32]]).batch_by_tokens(0, Vec::len);
}
