//! Tensors in batches: `collate` (stacking), `padded_batch`, `bucket_by_sequence_length`,
//! `ragged_batch`, `unbatch` and `rebatch` of them, beyond the TensorFlow conformance cases;
//! `rebatch_sizes`, `window_datasets` and `group_by_window_with`.

use futures::StreamExt;
use ndarray::{Array1, Array2, Array3, ArrayD, IxDyn, array};
use streamload::tensor::{Collate, PaddedCollate, RaggedCollate, RaggedTensor};
use streamload::{BucketOptions, Cardinality, Dataset, Error};

/// Every item of one epoch, errors included, as `Ok`/`Err(message)`.
async fn items<T: Send + 'static>(ds: &Dataset<T>) -> Vec<Result<T, anyhow::Error>> {
    ds.iter().collect().await
}

fn seqs(lengths: &[usize]) -> Dataset<Vec<i64>> {
    Dataset::from_vec(lengths.iter().map(|&n| vec![n as i64; n]).collect())
}

#[tokio::test]
async fn collate_stacks_arrays_and_scalars_into_one_buffer() {
    let ds = Dataset::range(0, 5)
        .map(|i| {
            let image = Array3::from_shape_fn((2, 3, 4), |(y, x, c)| {
                (i * 1000 + (y * 100 + x * 10 + c) as i64) as f32
            });
            (image, i)
        })
        .batch(2)
        .collate();
    assert_eq!(ds.cardinality(), Cardinality::Finite(3));
    let batches = ds.collect().await.expect("same shapes");
    assert_eq!(batches.len(), 3);
    for (b, (images, labels)) in batches.iter().enumerate() {
        assert!(images.is_standard_layout(), "one contiguous buffer");
        for (k, label) in labels.iter().enumerate() {
            let i = (2 * b + k) as i64;
            assert_eq!(*label, i);
            assert_eq!(images[[k, 1, 2, 3]], (i * 1000 + 123) as f32);
        }
    }
    assert_eq!(batches[2].0.shape(), [1, 2, 3, 4]);
}

#[tokio::test]
async fn collate_copies_non_contiguous_arrays_in_logical_order() {
    let transposed = array![[1i64, 2, 3], [4, 5, 6]].reversed_axes(); // [[1, 4], [2, 5], [3, 6]]
    assert!(!transposed.is_standard_layout());
    let batch = <Array2<i64>>::collate(&[transposed.clone(), transposed]).expect("stacks");
    assert_eq!(batch.shape(), [2, 3, 2]);
    assert_eq!(
        batch.index_axis(ndarray::Axis(0), 1),
        array![[1, 4], [2, 5], [3, 6]]
    );
}

/// Shapes of more than one dimension print as TensorFlow prints them (`[2,3]`, no spaces;
/// TensorFlow: "First element had shape [420,540,1] and element 6 had shape [540,420,1].").
#[test]
fn a_shape_mismatch_has_tensorflows_words_and_shapes() {
    let err = <Array3<u8>>::collate(&[
        Array3::zeros((420, 540, 1)),
        Array3::zeros((420, 540, 1)),
        Array3::zeros((540, 420, 1)),
    ])
    .expect_err("shapes differ");
    assert_eq!(
        err.to_string(),
        "Cannot batch tensors with different shapes in component 0. \
         First element had shape [420,540,1] and element 2 had shape [540,420,1]."
    );
    // A parsed Tensor's shapes, in a tuple's second component.
    use streamload::tensor::{Tensor, Values};
    let tensor = |shape: Vec<usize>| {
        let n = shape.iter().product();
        Tensor::new(shape, Values::Int64(vec![0; n])).expect("a tensor")
    };
    let err = <(i64, Tensor)>::collate(&[(1, tensor(vec![2, 2])), (2, tensor(vec![4]))])
        .expect_err("shapes differ");
    assert_eq!(
        err.to_string(),
        "Cannot batch tensors with different shapes in component 1. \
         First element had shape [2,2] and element 1 had shape [4]."
    );
}

#[tokio::test]
async fn a_shape_mismatch_names_batch_component_element_and_shapes() {
    // Batch 1 holds element 1 (shape [2]) and element 2 (shape [3]) in component 1.
    let ds = Dataset::from_vec(vec![1usize, 1, 2, 3, 4, 4])
        .map(|n| (n as i64, vec![0.5f32; n]))
        .batch(2)
        .collate();
    let got = items(&ds).await;
    assert_eq!(
        got.len(),
        3,
        "the error takes its batch's place; the epoch goes on"
    );
    let err = got[1].as_ref().expect_err("batch 1 has two shapes");
    assert_eq!(
        format!("{err:#}"),
        "collate: batch 1: Cannot batch tensors with different shapes in component 1. \
         First element had shape [2] and element 1 had shape [3]."
    );
    assert!(matches!(
        err.downcast_ref::<Error>(),
        Some(Error::InvalidArgument(_))
    ));
    let (labels, values) = got[2].as_ref().expect("batch 2 is fine");
    assert_eq!(labels, array![4, 4]);
    assert_eq!(values.shape(), [2, 4]);
}

#[test]
fn nested_tuples_number_their_components_flat() {
    type Item = ((i64, Vec<i64>), Vec<i64>);
    assert_eq!(<Item as Collate>::COMPONENTS, 3);
    let items: Vec<Item> = vec![((1, vec![1]), vec![1, 2]), ((2, vec![2]), vec![1])];
    let err = Item::collate(&items).expect_err("component 2 differs");
    assert!(
        err.to_string()
            .contains("in component 2. First element had shape [2] and element 1 had shape [1]"),
        "{err}"
    );
}

#[tokio::test]
async fn padded_batch_pads_every_dimension_of_n_d_arrays() {
    let a = array![[1i64, 2]]; // [1, 2]
    let b = array![[3i64], [4]]; // [2, 1]
    let ds = Dataset::from_vec(vec![a.clone(), b.clone()]);
    let out = ds
        .padded_batch(2, None, Some(9), false)
        .collect()
        .await
        .expect("pads");
    assert_eq!(out[0], array![[[1, 2], [9, 9]], [[3, 9], [4, 9]]]);

    // A fixed first dimension, the second to the longest.
    let out = ds
        .padded_batch(2, Some(vec![Some(3), None]), None, false)
        .collect()
        .await
        .expect("pads");
    assert_eq!(
        out[0],
        array![[[1, 2], [0, 0], [0, 0]], [[3, 0], [4, 0], [0, 0]]]
    );

    // Dynamic-rank arrays give dynamic-rank batches.
    let dynamic = Dataset::from_vec(vec![a.into_dyn(), b.into_dyn()]);
    let out: Vec<ArrayD<i64>> = dynamic
        .padded_batch(2, None, None, false)
        .collect()
        .await
        .expect("pads");
    assert_eq!(out[0].shape(), [2, 2, 2]);
}

#[tokio::test]
async fn padded_batch_takes_a_padding_value_per_component() {
    let items = vec![
        (vec![1.5f32], vec![7i64, 7], "a".to_string()),
        (vec![2.5, 2.5, 2.5], vec![8], "b".to_string()),
    ];
    let ds = Dataset::from_vec(items).padded_batch(
        2,
        Some((vec![None], vec![Some(3)], ())),
        Some((-1.0, -2, String::new())),
        false,
    );
    let (floats, ints, strings) = ds.collect().await.expect("pads").remove(0);
    assert_eq!(floats, array![[1.5, -1.0, -1.0], [2.5, 2.5, 2.5]]);
    assert_eq!(ints, array![[7, 7, -2], [8, -2, -2]]);
    assert_eq!(
        strings,
        Array1::from(vec!["a".to_string(), "b".to_string()])
    );
}

#[tokio::test]
async fn padded_batch_drops_the_remainder_when_asked() {
    let ds = seqs(&[1, 2, 3, 4, 5]).padded_batch(2, None, None, true);
    assert_eq!(ds.cardinality(), Cardinality::Finite(2));
    let out = ds.collect().await.expect("pads");
    assert_eq!(out.len(), 2);
    assert_eq!(out[1], array![[3, 3, 3, 0], [4, 4, 4, 4]]);
}

#[tokio::test]
async fn padding_too_small_fails_only_its_batch() {
    let ds = seqs(&[1, 2, 5, 1, 2, 2]).padded_batch(2, Some(vec![Some(3)]), None, false);
    let got = items(&ds).await;
    assert_eq!(got.len(), 3);
    assert_eq!(
        *got[0].as_ref().expect("fits"),
        array![[1, 0, 0], [2, 2, 0]]
    );
    let err = got[1].as_ref().expect_err("5 > 3");
    match err.downcast_ref::<Error>() {
        Some(Error::PaddingTooSmall {
            component,
            element,
            shape,
            padded,
        }) => {
            assert_eq!((*component, *element), (0, 0));
            assert_eq!((shape.as_slice(), padded.as_slice()), (&[5][..], &[3][..]));
        }
        other => panic!("expected PaddingTooSmall, got {other:?}"),
    }
    let message = format!("{err:#}");
    assert!(message.starts_with("padded_batch: batch 1: "), "{message}");
    assert!(
        message.contains("Attempted to pad to a smaller size than the input element."),
        "{message}"
    );
    assert_eq!(
        *got[2].as_ref().expect("fits"),
        array![[2, 2, 0], [2, 2, 0]]
    );
}

#[tokio::test]
async fn padded_shapes_of_another_rank_and_mixed_ranks_are_invalid() {
    // A `Vec` is 1-D: a rank 2 padded shape is rejected when the dataset is made, with
    // TensorFlow's ValueError message.
    let built = std::panic::catch_unwind(|| {
        seqs(&[1, 2]).padded_batch(2, Some(vec![Some(3), Some(3)]), None, false)
    });
    let payload = built.expect_err("rank 2 shape for rank 1 elements");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        message,
        "padded_batch: The padded shape (3, 3) is not compatible with the shape (None,) of \
         the corresponding input component."
    );

    // An `ArrayD`'s rank is known only per element: checked batch by batch.
    let rows = Dataset::from_vec(vec![ArrayD::<i64>::zeros(IxDyn(&[2]))]);
    let err = rows
        .padded_batch(2, Some(vec![Some(3), Some(3)]), None, false)
        .collect()
        .await
        .expect_err("rank 2 shape for rank 1 elements");
    assert!(
        format!("{err:#}").contains("has 2 dimensions, but its elements have 1"),
        "{err:#}"
    );

    let mixed = vec![
        ArrayD::<i64>::zeros(IxDyn(&[2])),
        ArrayD::<i64>::zeros(IxDyn(&[2, 2])),
    ];
    let err = ArrayD::padded_collate(&mixed, None, None).expect_err("ranks differ");
    assert!(matches!(
        err.downcast_ref::<Error>(),
        Some(Error::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn bucket_by_sequence_length_pads_to_the_bucket_boundary() {
    // Buckets: [0, 3), [3, 6), [6, ...).
    let ds = seqs(&[1, 4, 2, 5]).bucket_by_sequence_length(
        |s| s.len(),
        vec![3, 6],
        vec![2, 2, 2],
        BucketOptions::default().pad_to_bucket_boundary(true),
    );
    assert_eq!(ds.cardinality(), Cardinality::Unknown);
    let out = ds.collect().await.expect("pads");
    assert_eq!(out[0], array![[1, 0], [2, 2]]); // boundary 3: width 2
    assert_eq!(out[1], array![[4, 4, 4, 4, 0], [5, 5, 5, 5, 5]]); // boundary 6: width 5

    // The last bucket has no boundary to pad to.
    let ds = seqs(&[1, 7, 7]).bucket_by_sequence_length(
        |s| s.len(),
        vec![3, 6],
        vec![2, 2, 2],
        BucketOptions::default().pad_to_bucket_boundary(true),
    );
    let got = items(&ds).await;
    let err = got[0].as_ref().expect_err("bucket 2 is the last");
    assert!(
        format!("{err:#}").contains(
            "When pad_to_bucket_boundary=True, elements must have length < max(bucket_boundaries)."
        ),
        "{err:#}"
    );
    assert_eq!(
        *got[1].as_ref().expect("bucket 0 at the end"),
        array![[1, 0]]
    );
}

#[tokio::test]
async fn bucket_by_sequence_length_without_padding_stacks() {
    let ds = seqs(&[2, 2, 5, 5]).bucket_by_sequence_length(
        |s| s.len(),
        vec![4],
        vec![2, 2],
        BucketOptions::default().no_padding(true),
    );
    let out = ds.collect().await.expect("equal lengths per bucket");
    assert_eq!(out, [array![[2, 2], [2, 2]], Array2::from_elem((2, 5), 5)]);

    let ds = seqs(&[1, 2]).bucket_by_sequence_length(
        |s| s.len(),
        vec![4],
        vec![2, 2],
        BucketOptions::default().no_padding(true),
    );
    let err = ds.collect().await.expect_err("lengths differ");
    assert!(format!("{err:#}").contains("Cannot batch tensors with different shapes"));
}

#[tokio::test]
async fn bucket_by_sequence_length_batches_tuples_and_survives_a_panicking_length() {
    let ds = Dataset::from_vec(vec![
        (vec![1i64], 10i64),
        (vec![2, 2], 20),
        (vec![], 0),
        (vec![3; 3], 30),
    ])
    .bucket_by_sequence_length(
        |(ids, _)| {
            assert!(!ids.is_empty(), "no empty sentences");
            ids.len()
        },
        vec![10],
        vec![2, 2],
        BucketOptions::default().padding_values((-1, 0)),
    );
    let got = items(&ds).await;
    assert_eq!(got.len(), 3);
    let (ids, labels) = got[0].as_ref().expect("first two");
    assert_eq!((ids, labels), (&array![[1, -1], [2, 2]], &array![10, 20]));
    let err = got[1].as_ref().expect_err("the length function panicked");
    assert!(matches!(
        err.downcast_ref::<Error>(),
        Some(Error::WorkerPanicked { .. })
    ));
    let (ids, labels) = got[2].as_ref().expect("the last, flushed");
    assert_eq!((ids, labels), (&array![[3, 3, 3]], &array![30]));
}

#[test]
#[should_panic(expected = "`len(bucket_batch_sizes)` must equal `len(bucket_boundaries) + 1`")]
fn bucket_sizes_must_match_boundaries() {
    let _ = seqs(&[1]).bucket_by_sequence_length(
        |s| s.len(),
        vec![3, 5],
        vec![2, 2],
        BucketOptions::default(),
    );
}

#[tokio::test]
async fn ragged_batch_keeps_inner_dimensions_and_stacks_scalars() {
    let items = vec![
        (Array2::from_elem((1, 2), 1.0f32), 1i64),
        (Array2::from_elem((3, 2), 3.0), 3),
        (Array2::from_elem((0, 2), 0.0), 0),
    ];
    let ds = Dataset::from_vec(items).ragged_batch(3, false);
    assert_eq!(ds.cardinality(), Cardinality::Finite(1));
    let (rows, labels) = ds.collect().await.expect("batches").remove(0);
    assert_eq!(rows.values().shape(), [4, 2]);
    assert_eq!(rows.row_splits(), [0, 1, 4, 4]);
    assert_eq!(rows.row(1), Array2::from_elem((3, 2), 3.0));
    assert_eq!(rows.row(2).shape(), [0, 2]);
    assert_eq!(labels, array![1, 3, 0]);

    let bad = vec![Array2::<f32>::zeros((1, 2)), Array2::zeros((1, 3))];
    let err = Array2::ragged_collate(&bad).expect_err("inner dimensions differ");
    assert!(
        err.to_string()
            .contains("only the first dimension may differ"),
        "{err}"
    );
}

#[test]
fn ragged_tensors_check_their_row_splits() {
    assert!(RaggedTensor::new(array![1i64, 2, 3], vec![0, 1, 3]).is_ok());
    assert!(RaggedTensor::new(array![1i64, 2, 3], vec![0, 1, 2]).is_err()); // does not end at 3
    assert!(RaggedTensor::new(array![1i64, 2, 3], vec![1, 3]).is_err()); // does not start at 0
    assert!(RaggedTensor::new(array![1i64, 2, 3], vec![0, 2, 1, 3]).is_err()); // decreases
    let empty = RaggedTensor::new(Array1::<i64>::zeros(0), vec![0]).expect("no rows");
    assert_eq!(empty.nrows(), 0);
}

#[tokio::test]
async fn collate_follows_rebatch_and_window() {
    let ds = Dataset::range(0, 6).batch(4).rebatch(3, false).collate();
    let out = ds.collect().await.expect("stacks");
    assert_eq!(out, [array![0, 1, 2], array![3, 4, 5]]);
    let ds = Dataset::range(0, 5).window(2, 2, 1, true).collate();
    assert_eq!(
        ds.collect().await.expect("stacks"),
        [array![0, 1], array![2, 3]]
    );
}

#[tokio::test]
async fn padded_batch_stats_show_the_stage() {
    let ds = seqs(&[1, 2, 3]).padded_batch(2, None, None, false);
    let mut epoch = ds.iter();
    while let Some(b) = epoch.next().await {
        b.expect("pads");
    }
    let stages = epoch.stats().snapshot();
    let padded = stages
        .iter()
        .find(|s| s.name == "padded_batch")
        .expect("a padded_batch stage");
    assert_eq!(padded.elements, 2);
}

#[test]
fn parsed_tensors_stack_by_type_and_shape() {
    use streamload::tensor::{Tensor, Values};
    let a = Tensor::new(vec![2], Values::Int64(vec![1, 2])).expect("valid");
    let b = Tensor::new(vec![2], Values::Int64(vec![3, 4])).expect("valid");
    let batch = Tensor::collate(&[a.clone(), b]).expect("same type and shape");
    assert_eq!(batch.shape(), [2, 2]);
    assert_eq!(batch.as_slice::<i64>(), Some(&[1, 2, 3, 4][..]));
    let floats = Tensor::new(vec![2], Values::Float32(vec![1.0, 2.0])).expect("valid");
    let err = Tensor::collate(&[a.clone(), floats]).expect_err("types differ");
    assert!(
        err.to_string()
            .contains("First element had type int64 and element 1 had type float"),
        "{err}"
    );
    let long = Tensor::new(vec![3], Values::Int64(vec![1, 2, 3])).expect("valid");
    let err = Tensor::collate(&[a, long]).expect_err("shapes differ");
    assert!(
        err.to_string()
            .contains("First element had shape [2] and element 1 had shape [3]"),
        "{err}"
    );
}

#[test]
fn the_new_public_types_are_send_sync_and_debug() {
    fn send_sync_debug<T: Send + Sync + std::fmt::Debug>() {}
    send_sync_debug::<RaggedTensor<i64>>();
    send_sync_debug::<RaggedTensor<f32, ndarray::Ix3>>();
    send_sync_debug::<BucketOptions<(Vec<i64>, i64)>>();
    send_sync_debug::<streamload::text::Vocabulary>();
}

/// An input that is pending (and wakes itself) before every element, to catch lost wake-ups.
fn pending_between(lengths: &'static [usize]) -> Dataset<Vec<i64>> {
    Dataset::from_stream(move || {
        futures::stream::iter(lengths).then(|&n| async move {
            tokio::task::yield_now().await;
            anyhow::Ok(vec![n as i64; n])
        })
    })
}

#[tokio::test]
async fn batching_ops_wake_up_after_a_pending_input() {
    const LENGTHS: &[usize] = &[1, 4, 2, 6, 3, 5, 2, 7, 1, 3];
    fn within<F: std::future::Future>(fut: F) -> tokio::time::Timeout<F> {
        tokio::time::timeout(std::time::Duration::from_secs(10), fut)
    }
    let bucketed = pending_between(LENGTHS).bucket_by_sequence_length(
        |s| s.len(),
        vec![3, 5],
        vec![2, 2, 2],
        BucketOptions::default(),
    );
    let out = within(bucketed.collect())
        .await
        .expect("no lost wake-up")
        .expect("pads");
    assert_eq!(out.len(), 6);
    let padded = pending_between(LENGTHS).padded_batch(4, None, None, false);
    let out = within(padded.collect())
        .await
        .expect("no lost wake-up")
        .expect("pads");
    assert_eq!(out.iter().map(|b| b.nrows()).collect::<Vec<_>>(), [4, 4, 2]);
    let ragged = pending_between(LENGTHS).ragged_batch(5, true);
    let out = within(ragged.collect())
        .await
        .expect("no lost wake-up")
        .expect("batches");
    assert_eq!(out[1].row_splits(), [0, 5, 7, 14, 15, 18]);
    let stacked = pending_between(&[2, 2, 2]).batch(2).collate();
    let out = within(stacked.collect())
        .await
        .expect("no lost wake-up")
        .expect("stacks");
    assert_eq!(out, [array![[2, 2], [2, 2]], array![[2, 2]]]);
}

#[tokio::test]
async fn pad_to_bucket_boundary_fills_unknown_dimensions_only() {
    // Given padded shapes: `None` becomes the boundary - 1, fixed sizes stay.
    let pairs = Dataset::from_vec(vec![(vec![1i64], vec![1i64]), (vec![2, 2], vec![2])]);
    let ds = pairs.bucket_by_sequence_length(
        |(a, _)| a.len(),
        vec![4],
        vec![2, 2],
        BucketOptions::default()
            .pad_to_bucket_boundary(true)
            .padded_shapes((vec![None], vec![Some(2)])),
    );
    let (a, b) = ds.collect().await.expect("pads").remove(0);
    assert_eq!(a, array![[1, 0, 0], [2, 2, 0]]);
    assert_eq!(b, array![[1, 0], [2, 0]]);

    // Without padded shapes, an array's first dimension goes to the boundary, the others to
    // the longest in the batch.
    let frames = Dataset::from_vec(vec![
        Array2::from_elem((1, 3), 1.0f32),
        Array2::from_elem((2, 3), 2.0),
    ]);
    let ds = frames.bucket_by_sequence_length(
        |f| f.nrows(),
        vec![5],
        vec![2, 2],
        BucketOptions::default().pad_to_bucket_boundary(true),
    );
    let batch = ds.collect().await.expect("pads").remove(0);
    assert_eq!(batch.shape(), [2, 4, 3]);
    assert_eq!(batch[[1, 1, 2]], 2.0);
    assert_eq!(batch[[1, 2, 0]], 0.0);
}

// ---------------------------------------------------------------------------------------------
// unbatch and rebatch of tensors, rebatch with a list of sizes, windows as datasets, a window
// size per key.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn unbatch_undoes_collate_for_arrays_scalars_and_tuples() {
    let elements: Vec<(Array2<f32>, i64)> = (0..5)
        .map(|i| (Array2::from_elem((2, 3), i as f32), i))
        .collect();
    let ds = Dataset::from_vec(elements.clone()).batch(2).collate();
    let rows = ds.unbatch();
    assert_eq!(rows.cardinality(), Cardinality::Unknown);
    assert_eq!(rows.collect().await.expect("splits"), elements);
    // One more dimension, and ArrayD.
    let cubes = Dataset::range(0, 3).map(|i| Array3::from_elem((1, 2, 2), i));
    let rows = cubes.batch(3).collate().unbatch().collect().await;
    assert_eq!(
        rows.expect("splits"),
        (0..3)
            .map(|i| Array3::from_elem((1, 2, 2), i))
            .collect::<Vec<_>>()
    );
    let dynamic = Dataset::from_vec(vec![ArrayD::from_elem(IxDyn(&[2, 1]), 7i64)]).unbatch();
    assert_eq!(
        dynamic.collect().await.expect("splits"),
        vec![ArrayD::from_elem(IxDyn(&[1]), 7i64); 2]
    );
}

#[tokio::test]
async fn unbatch_splits_padded_and_ragged_batches_into_rows() {
    let padded = seqs(&[1, 3, 2]).padded_batch(3, None, Some(-1), false);
    assert_eq!(
        padded.unbatch().collect().await.expect("splits"),
        [array![1, -1, -1], array![3, 3, 3], array![2, 2, -1]]
    );
    let ragged = seqs(&[1, 3, 2]).ragged_batch(2, false);
    assert_eq!(
        ragged.unbatch().collect().await.expect("splits"),
        [array![1], array![3, 3, 3], array![2, 2]]
    );
}

#[tokio::test]
async fn unbatch_of_bad_batches_yields_named_error_elements_and_goes_on() {
    // Components of a tuple must agree on the number of rows.
    let ds = Dataset::from_vec(vec![
        (array![1i64, 2], array![10i64, 20]),
        (array![3, 4, 5], array![30, 40]),
        (array![6], array![60]),
    ])
    .unbatch();
    let out = items(&ds).await;
    let ok: Vec<(i64, i64)> = out
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    assert_eq!(ok, [(1, 10), (2, 20), (6, 60)]);
    let err = out[2].as_ref().expect_err("element 1 is bad");
    assert!(matches!(
        err.downcast_ref::<Error>(),
        Some(Error::InvalidArgument(_))
    ));
    assert_eq!(
        format!("{err:#}"),
        "unbatch: element 1: Input element must have the same batch size in each component. \
         Component 0 had size 3 but component 1 had size 2."
    );
    // A 0-d ArrayD has no rows (TensorFlow's message, as it raises for scalar components).
    let ds = Dataset::from_vec(vec![
        ArrayD::from_elem(IxDyn(&[]), 1i64),
        ArrayD::from_elem(IxDyn(&[1]), 2i64),
    ])
    .unbatch();
    let out = items(&ds).await;
    assert_eq!(out.len(), 2);
    assert_eq!(
        format!("{:#}", out[0].as_ref().expect_err("a scalar")),
        "unbatch: element 0: Cannot unbatch an input with scalar components."
    );
    assert_eq!(
        out[1].as_ref().ok(),
        Some(&ArrayD::from_elem(IxDyn(&[]), 2i64))
    );
}

#[test]
fn parsed_tensors_unbatch_into_rows() {
    use streamload::tensor::{Tensor, Unbatch, Values};
    let t = Tensor::new(vec![2, 3], Values::Int64((0..6).collect())).expect("valid");
    let rows = t.into_rows().expect("a matrix");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].shape(), [3]);
    assert_eq!(rows[1].as_slice::<i64>(), Some(&[3, 4, 5][..]));
    let batch = <Tensor as Collate>::collate(&rows).expect("same shapes");
    assert_eq!(batch.as_slice::<i64>(), Some(&[0, 1, 2, 3, 4, 5][..]));
    let scalar = Tensor::new(vec![], Values::Float32(vec![1.0])).expect("valid");
    assert!(scalar.into_rows().is_err());
}

#[tokio::test]
async fn rebatch_regroups_array_batches_and_collate_stacks_them_again() {
    let ds = Dataset::range(0, 7)
        .batch(3)
        .collate()
        .rebatch(2, false)
        .collate();
    assert_eq!(
        ds.collect().await.expect("stacks"),
        [array![0, 1], array![2, 3], array![4, 5], array![6]]
    );
}

#[tokio::test]
async fn rebatch_sizes_cycle_and_drop_a_short_final_batch_when_asked() {
    let ds = Dataset::range(0, 10).batch(4).rebatch_sizes(&[3, 1], false);
    assert_eq!(ds.cardinality(), Cardinality::Unknown);
    assert_eq!(
        ds.collect().await.expect("runs"),
        vec![vec![0, 1, 2], vec![3], vec![4, 5, 6], vec![7], vec![8, 9]]
    );
    // [8, 9] is short of its turn's 3: dropped. A final batch of its turn's size is kept.
    let ds = Dataset::range(0, 10).batch(4).rebatch_sizes(&[3, 1], true);
    assert_eq!(
        ds.collect().await.expect("runs"),
        vec![vec![0, 1, 2], vec![3], vec![4, 5, 6], vec![7]]
    );
    let ds = Dataset::range(0, 8).batch(4).rebatch_sizes(&[3, 1], true);
    assert_eq!(ds.collect().await.expect("runs").len(), 4);
    // One size is rebatch.
    let one = Dataset::range(0, 10).batch(4).rebatch_sizes(&[3], false);
    let same = Dataset::range(0, 10).batch(4).rebatch(3, false);
    assert_eq!(one.collect().await.ok(), same.collect().await.ok());
}

#[test]
#[should_panic(
    expected = "rebatch: Batch size must be greater than zero, but batch_sizes is [2, 0]."
)]
fn rebatch_sizes_rejects_a_zero_size() {
    let _ = Dataset::range(0, 4).batch(2).rebatch_sizes(&[2, 0], false);
}

#[test]
#[should_panic(expected = "rebatch: batch_sizes must not be empty.")]
fn rebatch_sizes_rejects_no_sizes() {
    let _ = Dataset::range(0, 4).batch(2).rebatch_sizes(&[], false);
}

#[tokio::test]
async fn window_datasets_flat_map_as_in_tf_data() {
    // tf.data's idiom: each window a dataset, batched back into one element.
    let ds = Dataset::range(0, 10)
        .window_datasets(4, 3, 2, false)
        .flat_map(|w| w.batch(1000));
    assert_eq!(
        ds.collect().await.expect("runs"),
        vec![vec![0, 2, 4, 6], vec![3, 5, 7, 9], vec![6, 8], vec![9]]
    );
    // A window is a dataset like any other: reduce it, iterate it twice.
    let sums = Dataset::range(0, 6)
        .window_datasets(3, 3, 1, true)
        .map(|w| (w.clone(), w.cardinality()));
    let mut out = Vec::new();
    for (w, card) in sums.collect().await.expect("runs") {
        assert_eq!(card, Cardinality::Finite(3));
        assert_eq!(w.collect().await.ok(), w.collect().await.ok());
        out.push(w.reduce(0, |s, x| s + x).await.expect("sums"));
    }
    assert_eq!(out, [3, 12]);
}

#[tokio::test]
async fn group_by_window_with_sizes_per_key() {
    // Key 0 in windows of 1, key 1 of 2, key 2 of 3.
    let ds = Dataset::range(0, 12).group_by_window_with(
        |x| x % 3,
        |k, w| w.batch(10).map(move |b| (k, b)),
        |k| *k as usize + 1,
    );
    assert_eq!(
        ds.collect().await.expect("runs"),
        vec![
            (0, vec![0]),
            (0, vec![3]),
            (1, vec![1, 4]),
            (0, vec![6]),
            (2, vec![2, 5, 8]),
            (0, vec![9]),
            (1, vec![7, 10]),
            (2, vec![11]), // flushed at the end
        ]
    );
}

#[tokio::test]
async fn group_by_window_with_a_zero_size_is_an_error_element() {
    // As TensorFlow, which checks window_size_func's answer when an element arrives.
    let ds = Dataset::range(0, 4).group_by_window_with(
        |x| x % 2,
        |_, w| w.batch(10),
        |k| if *k == 1 { 0 } else { 2 },
    );
    let out = items(&ds).await;
    let messages: Vec<String> = out
        .iter()
        .map(|r| match r {
            Ok(b) => format!("{b:?}"),
            Err(e) => e.to_string(),
        })
        .collect();
    let zero = "group_by_window: Window size must be greater than zero, but got 0.";
    // Elements 1 and 3 (key 1) fail in their place; key 0's window is unaffected.
    assert_eq!(messages, [zero, "[0, 2]", zero].map(String::from));
    assert!(matches!(
        out[0].as_ref().expect_err("size 0").downcast_ref::<Error>(),
        Some(Error::InvalidArgument(_))
    ));
}
