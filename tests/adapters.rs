//! The framework adapters, each under its feature: burn's `DataLoader` over a distributed
//! dataset (blocking iteration, `num_items`, `slice`, checkpoint and resume, errors kept),
//! and candle tensors made from batches without a copy.

#[cfg(feature = "burn")]
mod burn_loader {
    use burn::backend::NdArray;
    use burn::data::dataloader::DataLoader;
    use burn::data::dataloader::batcher::Batcher;
    use burn::tensor::{Tensor, TensorData};
    use streamload::Dataset;
    use streamload::adapters::burn::StreamLoader;
    use streamload::distribute::{Distribute, Remainder};

    type B = NdArray;
    /// A batch: the items as a tensor, and the items.
    type Pair = (Tensor<B, 1>, Vec<(i64, bool)>);

    /// Items as a 1-d tensor, and the items themselves (to check them).
    struct Keep;
    impl Batcher<B, (i64, bool), Pair> for Keep {
        fn batch(&self, items: Vec<(i64, bool)>, device: &burn::tensor::Device<B>) -> Pair {
            let values: Vec<f32> = items.iter().map(|&(x, _)| x as f32).collect();
            let n = values.len();
            (
                Tensor::from_data(TensorData::new(values, [n]), device),
                items,
            )
        }
    }

    fn loader(rank: usize, world: usize) -> StreamLoader<B, (i64, bool), Pair> {
        let plan = Dataset::range(0, 23)
            .distribute(&Distribute::new(rank, world).remainder(Remainder::Pad))
            .unwrap();
        let items = plan.dataset().map(|d| (d.item, d.padded));
        StreamLoader::new(items, 2, Keep, Default::default()).unwrap()
    }

    #[test]
    fn ranks_iterate_equal_batches_with_padding_marked() {
        let mut seen = Vec::new();
        for rank in 0..4 {
            let l = loader(rank, 4);
            assert_eq!(l.num_items(), 6);
            let mut it = l.iter();
            let mut batches = 0;
            for (tensor, items) in it.by_ref() {
                assert_eq!(tensor.dims()[0], items.len());
                let values = tensor.into_data().to_vec::<f32>().unwrap();
                assert_eq!(
                    values,
                    items.iter().map(|&(x, _)| x as f32).collect::<Vec<_>>()
                );
                seen.extend(
                    items
                        .into_iter()
                        .filter(|&(_, padded)| !padded)
                        .map(|(x, _)| x),
                );
                batches += 1;
            }
            assert_eq!(it.progress().items_processed, 6);
            assert_eq!(batches, 3, "rank {rank}");
            assert!(l.take_error().is_none());
            assert!(l.stats().is_some());
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..23).collect::<Vec<_>>());
    }

    #[test]
    fn slice_and_to_device_keep_the_items() {
        let l = loader(0, 1);
        let part = l.slice(5, 9);
        assert_eq!(part.num_items(), 4);
        let items: Vec<i64> = part
            .iter()
            .flat_map(|(_, items)| items)
            .map(|(x, _)| x)
            .collect();
        assert_eq!(items, [5, 6, 7, 8]);
        let moved = l.to_device(&Default::default());
        assert_eq!(moved.iter().count(), 12);
    }

    #[test]
    fn a_checkpoint_resumes_the_epoch_in_a_fresh_loader() {
        let full: Vec<Vec<(i64, bool)>> = loader(1, 3).iter().map(|(_, items)| items).collect();
        for k in [0, 1, 2, full.len()] {
            let l = loader(1, 3);
            let mut got: Vec<Vec<(i64, bool)>> = l.iter().take(k).map(|(_, items)| items).collect();
            let checkpoint = l.checkpoint().unwrap();
            let fresh = loader(1, 3);
            fresh.resume_from(checkpoint);
            got.extend(fresh.iter().map(|(_, items)| items));
            assert_eq!(got, full, "resumed after {k} batches");
            // The next epoch starts over.
            assert_eq!(fresh.iter().count(), full.len());
        }
    }

    #[test]
    fn an_error_ends_the_iteration_and_is_kept() {
        let items = Dataset::range(0, 10)
            .try_map(|x| {
                if x == 5 {
                    Err(anyhow::anyhow!("record {x} is damaged"))
                } else {
                    Ok((x, false))
                }
            })
            .assert_cardinality(10);
        let l = StreamLoader::new(items, 2, Keep, Default::default()).unwrap();
        assert_eq!(l.iter().count(), 2);
        let err = l.take_error().expect("the error is kept");
        assert!(err.to_string().contains("record 5 is damaged"), "{err}");
        let unknown = Dataset::range(0, 10)
            .filter(|x| x % 2 == 0)
            .map(|x| (x, false));
        let err = StreamLoader::new(unknown, 2, Keep, Default::default()).unwrap_err();
        assert!(err.to_string().contains("cardinality"), "{err}");
    }
}

#[cfg(feature = "candle")]
mod candle_tensors {
    use candle_core::{Device, Storage};
    use streamload::Dataset;
    use streamload::adapters::candle::{tensor, tensors};
    use streamload::ndarray::{Array2, Axis};

    /// The address of a CPU tensor's f32 buffer.
    fn buffer(t: &candle_core::Tensor) -> *const f32 {
        let (storage, layout) = t.storage_and_layout();
        assert_eq!(layout.start_offset(), 0);
        match &*storage {
            Storage::Cpu(candle_core::CpuStorage::F32(v)) => v.as_ptr(),
            other => panic!("not an f32 CPU tensor: {other:?}"),
        }
    }

    #[test]
    fn a_batch_becomes_a_tensor_without_a_copy() {
        let batch = Array2::from_shape_fn((4, 3), |(i, j)| (10 * i + j) as f32);
        let before = batch.as_ptr();
        let t = tensor(batch, &Device::Cpu).unwrap();
        assert_eq!(
            buffer(&t),
            before,
            "the tensor's storage is the batch's buffer"
        );
        assert_eq!(t.dims(), [4, 3]);
        assert_eq!(t.to_vec2::<f32>().unwrap()[2], [20.0, 21.0, 22.0]);
        // Transposed or sliced arrays are laid out row-major first.
        let t = tensor(
            Array2::from_shape_fn((2, 3), |(i, j)| (i * 3 + j) as f32).reversed_axes(),
            &Device::Cpu,
        )
        .unwrap();
        assert_eq!(
            t.to_vec2::<f32>().unwrap(),
            [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
        );
        let mut a = Array2::from_shape_fn((3, 2), |(i, j)| (i * 2 + j) as f32);
        a.remove_index(Axis(0), 0);
        assert_eq!(
            tensor(a, &Device::Cpu).unwrap().to_vec2::<f32>().unwrap(),
            [[2.0, 3.0], [4.0, 5.0]]
        );
    }

    #[tokio::test]
    async fn collated_batches_of_a_dataset_become_tensors() {
        let rows =
            Dataset::range(0, 10).map(|i| streamload::ndarray::arr1(&[i as f32, -(i as f32)]));
        let got = tensors(&rows.batch(4).collate(), Device::Cpu)
            .collect()
            .await
            .unwrap();
        let dims: Vec<Vec<usize>> = got.iter().map(|t| t.dims().to_vec()).collect();
        assert_eq!(dims, [vec![4, 2], vec![4, 2], vec![2, 2]]);
        assert_eq!(got[2].to_vec2::<f32>().unwrap(), [[8.0, -8.0], [9.0, -9.0]]);
    }
}
