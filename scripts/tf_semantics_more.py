#!/usr/bin/env python3
# Runs small tf.data pipelines in TensorFlow and writes what they yield to
# tests/data/tensorflow/semantics_more.json, in the format of semantics.json (see
# tests/data/tensorflow/README.md): edge cases of every transformation streamload has.
# Nothing in that file is written by hand; regenerate it with
#   python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu==2.21.0
#   /tmp/tfenv/bin/python scripts/tf_semantics_more.py
# Each case's `pipeline` is the Python expression evaluated here, with `tf`, `Dataset`
# (tf.data.Dataset) and the helpers below in scope. A pipeline that is a dataset is iterated;
# any other value (reduce, cardinality) is the case's output.
import base64
import json
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

Dataset = tf.data.Dataset


def seqs(lengths):
    """Element i is [n] * n for n = lengths[i] (int64 vectors of different lengths)."""
    return Dataset.range(len(lengths)).map(
        lambda i: tf.fill([tf.gather(tf.constant(lengths, tf.int64), i)],
                          tf.gather(tf.constant(lengths, tf.int64), i)))


def faulty(values):
    """float32 elements 1 / x with check_numerics: x == 0 is an error element."""
    return Dataset.from_tensor_slices(tf.constant(values, tf.float32)).map(
        lambda x: tf.debugging.check_numerics(1.0 / x, "inf"))


def uneven(x):
    """range(10x, 10x + k[x]) with k = {1: 4, 2: 1, 3: 3, 4: 0, 5: 5}."""
    k = tf.gather(tf.constant([0, 4, 1, 3, 0, 5], tf.int64), x)
    return Dataset.range(10 * x, 10 * x + k)


def three(x):
    return Dataset.range(10 * x, 10 * x + 3)


SCOPE = {"tf": tf, "Dataset": Dataset, "seqs": seqs, "faulty": faulty, "uneven": uneven,
         "three": three}

# (name, pipeline, compare[, notes])
CASES = [
    # ----- range -----
    ("range_start_after_stop", "Dataset.range(5, 0)", "exact"),
    ("range_negative_step_wrong_direction", "Dataset.range(0, 5, -1)", "exact"),
    ("range_negative_step_descending", "Dataset.range(5, 0, -1)", "exact"),
    ("range_step_beyond_stop", "Dataset.range(0, 10, 20)", "exact"),
    ("range_negative_bounds", "Dataset.range(-3, 3, 2)", "exact"),
    ("range_negative_step_uneven", "Dataset.range(-1, -10, -4)", "exact"),
    ("range_zero_step_empty_bounds", "Dataset.range(5, 0, 0)", "exact"),
    ("range_near_int64_max", "Dataset.range(9223372036854775805, 9223372036854775807)", "exact"),
    ("range_near_int64_min", "Dataset.range(-9223372036854775808, -9223372036854775806)", "exact"),
    ("counter_negative_step", "Dataset.counter(5, -2).take(4)", "exact"),
    ("counter_default", "Dataset.counter().take(3)", "exact"),
    # ----- take / skip -----
    ("take_0", "Dataset.range(5).take(0)", "exact"),
    ("take_minus_5", "Dataset.range(5).take(-5)", "exact"),
    ("take_exact_length", "Dataset.range(5).take(5)", "exact"),
    ("skip_0", "Dataset.range(5).skip(0)", "exact"),
    ("skip_exact_length", "Dataset.range(5).skip(5)", "exact"),
    ("skip_minus_5", "Dataset.range(5).skip(-5)", "exact"),
    ("take_then_skip", "Dataset.range(10).take(6).skip(2)", "exact"),
    ("skip_then_take_beyond", "Dataset.range(10).skip(7).take(5)", "exact"),
    ("take_minus_1_of_infinite_then_take", "Dataset.range(3).repeat().take(-1).take(7)", "exact"),
    ("skip_of_infinite_then_take", "Dataset.range(3).repeat().skip(4).take(5)", "exact"),
    ("take_of_filter", "Dataset.range(10).filter(lambda x: x % 3 == 0).take(2)", "exact"),
    ("skip_of_filter", "Dataset.range(10).filter(lambda x: x % 3 == 0).skip(2)", "exact"),
    ("cardinality_take_minus_1_infinite", "int(Dataset.range(3).repeat().take(-1).cardinality())", "exact"),
    ("cardinality_skip_infinite", "int(Dataset.range(3).repeat().skip(4).cardinality())", "exact"),
    ("cardinality_skip_minus_1_infinite", "int(Dataset.range(3).repeat().skip(-1).cardinality())", "exact"),
    ("cardinality_take_unknown", "int(Dataset.range(10).filter(lambda x: x < 3).take(2).cardinality())", "exact"),
    ("cardinality_take_0_unknown", "int(Dataset.range(10).filter(lambda x: x < 3).take(0).cardinality())", "exact"),
    ("cardinality_skip_unknown", "int(Dataset.range(10).filter(lambda x: x < 3).skip(2).cardinality())", "exact"),
    ("cardinality_skip_minus_1_unknown", "int(Dataset.range(10).filter(lambda x: x < 3).skip(-1).cardinality())", "exact"),
    # ----- repeat -----
    ("repeat_1", "Dataset.range(3).repeat(1)", "exact"),
    ("repeat_minus_2_take", "Dataset.range(2).repeat(-2).take(5)", "exact"),
    ("repeat_forever_of_empty", "Dataset.range(0).repeat()", "exact"),
    ("repeat_forever_of_filtered_empty", "Dataset.range(3).filter(lambda x: x > 5).repeat().take(3)", "exact"),
    ("repeat_zero_of_infinite", "Dataset.range(3).repeat().repeat(0)", "exact"),
    ("repeat_then_take_0", "Dataset.range(3).repeat().take(0)", "exact"),
    ("take_then_repeat", "Dataset.range(5).take(2).repeat(3)", "exact"),
    ("cardinality_repeat_unknown", "int(Dataset.range(3).filter(lambda x: x > 0).repeat(3).cardinality())", "exact"),
    ("cardinality_repeat_forever_unknown", "int(Dataset.range(3).filter(lambda x: x > 0).repeat().cardinality())", "exact"),
    ("cardinality_repeat_forever_empty", "int(Dataset.range(0).repeat().cardinality())", "exact"),
    ("cardinality_repeat_infinite_twice", "int(Dataset.range(3).repeat().repeat(2).cardinality())", "exact"),
    # ----- batch -----
    ("batch_size_1", "Dataset.range(3).batch(1)", "exact"),
    ("batch_size_equals_length", "Dataset.range(6).batch(6)", "exact"),
    ("batch_of_empty", "Dataset.range(0).batch(3)", "exact"),
    ("batch_drop_remainder_partial", "Dataset.range(10).batch(3, drop_remainder=True)", "exact"),
    ("batch_infinite_drop_remainder_take", "Dataset.range(3).repeat().batch(2, drop_remainder=True).take(3)", "exact"),
    ("batch_of_filter_drop_remainder", "Dataset.range(10).filter(lambda x: x % 2 == 0).batch(2, drop_remainder=True)", "exact"),
    ("batch_zero", "Dataset.range(5).batch(0)", "exact"),
    ("cardinality_batch_infinite", "int(Dataset.range(3).repeat().batch(2).cardinality())", "exact"),
    ("cardinality_batch_infinite_drop_remainder", "int(Dataset.range(3).repeat().batch(2, drop_remainder=True).cardinality())", "exact"),
    ("cardinality_batch_unknown", "int(Dataset.range(10).filter(lambda x: x < 3).batch(2).cardinality())", "exact"),
    ("batch_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0, 5.0]).batch(2).ignore_errors()", "exact",
     "the elements batched before an error element are lost with it"),
    # ----- padded_batch -----
    ("padded_batch_padding_value", "seqs([2, 1, 3]).padded_batch(2, padding_values=tf.constant(-1, tf.int64))", "exact"),
    ("padded_batch_drop_remainder", "seqs([1, 2, 3, 4, 5]).padded_batch(2, drop_remainder=True)", "exact"),
    ("padded_batch_shape_none", "seqs([1, 3, 2]).padded_batch(2, padded_shapes=[None])", "exact"),
    ("padded_batch_shape_minus_1", "seqs([1, 3, 2]).padded_batch(2, padded_shapes=[-1])", "exact"),
    ("padded_batch_shape_equal_longest", "seqs([3, 1]).padded_batch(2, padded_shapes=[3])", "exact"),
    ("padded_batch_empty_elements", "seqs([0, 0, 2]).padded_batch(2)", "exact"),
    ("padded_batch_2d", "Dataset.range(1, 4).map(lambda n: tf.fill([n, 4 - n], n)).padded_batch(3)", "exact"),
    ("padded_batch_2d_partly_fixed", "Dataset.range(1, 4).map(lambda n: tf.fill([n, 4 - n], n)).padded_batch(2, padded_shapes=[None, 4], padding_values=tf.constant(9, tf.int64))", "exact"),
    ("padded_batch_tuple_shapes", "Dataset.zip((seqs([2, 1, 3]), Dataset.range(3))).padded_batch(2, padded_shapes=([4], []), padding_values=(tf.constant(-1, tf.int64), tf.constant(0, tf.int64)))", "exact"),
    ("padded_batch_scalars_padding_value", "Dataset.range(5).padded_batch(2, padding_values=tf.constant(7, tf.int64))", "exact"),
    ("padded_batch_rank_mismatch", "seqs([1, 2]).padded_batch(2, padded_shapes=[3, 3])", "exact"),
    ("padded_batch_zero", "seqs([1, 2]).padded_batch(0)", "exact"),
    ("padded_batch_too_small_first_batch", "seqs([4, 1, 2]).padded_batch(2, padded_shapes=[2])", "exact"),
    ("cardinality_padded_batch_infinite", "int(seqs([1, 2]).repeat().padded_batch(2).cardinality())", "exact"),
    ("cardinality_padded_batch_drop_remainder", "int(seqs([1, 2, 3, 4, 5]).padded_batch(2, drop_remainder=True).cardinality())", "exact"),
    # ----- unbatch / rebatch -----
    ("unbatch_uneven_rows", "Dataset.range(4).map(lambda n: tf.range(n)).unbatch()", "exact"),
    ("unbatch_matrices", "Dataset.from_tensor_slices(tf.constant([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], tf.int64)).unbatch()", "exact"),
    ("unbatch_drop_remainder_batches", "Dataset.range(10).batch(3, drop_remainder=True).unbatch()", "exact"),
    ("unbatch_scalars", "Dataset.range(3).unbatch()", "exact"),
    ("cardinality_unbatch_infinite", "int(Dataset.range(4).batch(2).repeat().unbatch().cardinality())", "exact"),
    ("cardinality_unbatch_static_batch", "int(Dataset.range(9).batch(3, drop_remainder=True).unbatch().cardinality())", "exact"),
    ("rebatch_larger", "Dataset.range(10).batch(2).rebatch(3)", "exact"),
    ("rebatch_uneven_input", "Dataset.range(7).batch(3).rebatch(2)", "exact"),
    ("rebatch_drop_remainder_exact", "Dataset.range(8).batch(3).rebatch(4, drop_remainder=True)", "exact"),
    ("rebatch_list_of_sizes", "Dataset.range(10).batch(5).rebatch([1, 2])", "exact"),
    ("cardinality_rebatch_drop_remainder", "int(Dataset.range(12).batch(4).rebatch(3, drop_remainder=True).cardinality())", "exact"),
    # ----- window -----
    ("window_drop_remainder", "Dataset.range(10).window(3, drop_remainder=True).flat_map(lambda w: w.batch(1000))", "exact"),
    ("window_shift_gt_size_drop", "Dataset.range(10).window(2, shift=3, drop_remainder=True).flat_map(lambda w: w.batch(1000))", "exact"),
    ("window_stride3_drop", "Dataset.range(10).window(3, shift=1, stride=3, drop_remainder=True).flat_map(lambda w: w.batch(1000))", "exact"),
    ("window_size_1", "Dataset.range(4).window(1).flat_map(lambda w: w.batch(1000))", "exact"),
    ("window_of_empty", "Dataset.range(0).window(2).flat_map(lambda w: w.batch(1000))", "exact"),
    ("window_size_gt_length_drop", "Dataset.range(5).window(6, drop_remainder=True).flat_map(lambda w: w.batch(1000))", "exact"),
    ("window_shift_1_keep_remainder", "Dataset.range(5).window(3, shift=1).flat_map(lambda w: w.batch(1000))", "exact"),
    ("window_stride_2_keep_remainder", "Dataset.range(7).window(3, shift=2, stride=2).flat_map(lambda w: w.batch(1000))", "exact"),
    ("window_of_infinite_take", "Dataset.range(3).repeat().window(2, shift=1).flat_map(lambda w: w.batch(1000)).take(4)", "exact"),
    ("window_zero_size", "Dataset.range(5).window(0)", "exact"),
    ("window_zero_shift", "Dataset.range(5).window(2, shift=0)", "exact"),
    ("window_zero_stride", "Dataset.range(5).window(2, stride=0)", "exact"),
    ("cardinality_window", "int(Dataset.range(10).window(4, shift=3).cardinality())", "exact"),
    ("cardinality_window_drop_remainder", "int(Dataset.range(10).window(3, shift=2, stride=2, drop_remainder=True).cardinality())", "exact"),
    ("cardinality_window_drop_remainder_too_short", "int(Dataset.range(5).window(3, stride=3, drop_remainder=True).cardinality())", "exact"),
    ("cardinality_window_infinite", "int(Dataset.range(3).repeat().window(2).cardinality())", "exact"),
    ("cardinality_window_unknown", "int(Dataset.range(10).filter(lambda x: x < 5).window(2).cardinality())", "exact"),
    # ----- interleave / flat_map -----
    ("interleave_cycle_gt_inputs", "Dataset.range(1, 3).interleave(three, cycle_length=5, block_length=1)", "exact"),
    ("interleave_block_gt_count", "Dataset.range(1, 4).interleave(three, cycle_length=2, block_length=5)", "exact"),
    ("interleave_c1_b2", "Dataset.range(1, 6).interleave(uneven, cycle_length=1, block_length=2)", "exact"),
    ("interleave_uneven_c2_b3", "Dataset.range(1, 6).interleave(uneven, cycle_length=2, block_length=3)", "exact"),
    ("interleave_uneven_c5_b1", "Dataset.range(1, 6).interleave(uneven, cycle_length=5, block_length=1)", "exact"),
    ("interleave_parallel_c2_b2_p3", "Dataset.range(1, 6).interleave(uneven, cycle_length=2, block_length=2, num_parallel_calls=3, deterministic=True)", "exact"),
    ("interleave_parallel_c3_b1_p1", "Dataset.range(1, 6).interleave(uneven, cycle_length=3, block_length=1, num_parallel_calls=1, deterministic=True)", "exact"),
    ("interleave_parallel_c4_b3_p4", "Dataset.range(1, 6).interleave(uneven, cycle_length=4, block_length=3, num_parallel_calls=4, deterministic=True)", "exact"),
    ("interleave_of_empty", "Dataset.range(0).interleave(three, cycle_length=2)", "exact"),
    ("interleave_infinite_inner_take", "Dataset.range(2).interleave(lambda x: Dataset.range(x, x + 1).repeat(), cycle_length=2).take(6)", "exact"),
    ("interleave_nested", "Dataset.range(1, 3).interleave(lambda x: Dataset.range(2).interleave(lambda y: Dataset.range(100 * x + 10 * y, 100 * x + 10 * y + 2), cycle_length=2), cycle_length=2)", "exact"),
    ("interleave_block_length_zero", "Dataset.range(3).interleave(three, cycle_length=2, block_length=0)", "exact"),
    ("interleave_cycle_length_zero", "Dataset.range(3).interleave(three, cycle_length=0)", "exact"),
    ("interleave_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0]).interleave(lambda x: Dataset.from_tensors(x).repeat(2), cycle_length=2).ignore_errors()", "exact"),
    ("flat_map_empty_inners", "Dataset.range(4).flat_map(lambda x: Dataset.range(x))", "exact"),
    ("flat_map_repeat_inner", "Dataset.range(1, 4).flat_map(lambda x: Dataset.from_tensors(x).repeat(x))", "exact"),
    ("flat_map_of_infinite_take", "Dataset.range(3).repeat().flat_map(lambda x: Dataset.range(x)).take(5)", "exact"),
    ("cardinality_flat_map", "int(Dataset.range(3).flat_map(lambda x: Dataset.range(2)).cardinality())", "exact"),
    # ----- filter -----
    ("filter_none", "Dataset.range(5).filter(lambda x: x > 10)", "exact"),
    ("filter_all", "Dataset.range(5).filter(lambda x: x >= 0)", "exact"),
    ("filter_of_infinite_take", "Dataset.range(5).repeat().filter(lambda x: x % 2 == 1).take(5)", "exact"),
    ("cardinality_filter_infinite", "int(Dataset.range(5).repeat().filter(lambda x: x > 1).cardinality())", "exact"),
    # ----- shard -----
    ("shard_1_0", "Dataset.range(5).shard(1, 0)", "exact"),
    ("shard_num_shards_0", "Dataset.range(5).shard(0, 0)", "exact"),
    ("shard_negative_index", "Dataset.range(5).shard(2, -1)", "exact"),
    ("shard_then_batch", "Dataset.range(10).shard(3, 1).batch(2)", "exact"),
    ("shard_of_filter", "Dataset.range(20).filter(lambda x: x % 2 == 0).shard(3, 0)", "exact"),
    ("shard_of_infinite_take", "Dataset.range(5).repeat().shard(3, 2).take(5)", "exact"),
    ("shard_more_shards_than_elements", "Dataset.range(3).shard(5, 2)", "exact"),
    ("shard_of_interleave", "Dataset.range(1, 4).interleave(three, cycle_length=2).shard(2, 1)", "exact"),
    ("shard_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0, 5.0, 8.0]).shard(2, 0).ignore_errors()", "exact"),
    ("cardinality_shard_unknown", "int(Dataset.range(10).filter(lambda x: x < 3).shard(2, 0).cardinality())", "exact"),
    ("cardinality_shard_infinite", "int(Dataset.range(3).repeat().shard(2, 0).cardinality())", "exact"),
    ("cardinality_shard_exact", "int(Dataset.range(9).shard(3, 2).cardinality())", "exact"),
    # ----- zip / concatenate -----
    ("zip_with_empty", "Dataset.zip((Dataset.range(0), Dataset.range(3)))", "exact"),
    ("zip_three", "Dataset.zip((Dataset.range(3), Dataset.range(10, 14), Dataset.range(20, 22)))", "exact"),
    ("zip_infinite_and_finite", "Dataset.zip((Dataset.range(3).repeat(), Dataset.range(4)))", "exact"),
    ("zip_nested", "Dataset.zip((Dataset.range(3), Dataset.zip((Dataset.range(10, 13), Dataset.range(20, 23)))))", "exact"),
    ("zip_with_filter", "Dataset.zip((Dataset.range(10).filter(lambda x: x % 3 == 0), Dataset.range(100, 110)))", "exact"),
    ("cardinality_zip_infinite_infinite", "int(Dataset.zip((Dataset.range(3).repeat(), Dataset.range(2).repeat())).cardinality())", "exact"),
    ("cardinality_zip_infinite_unknown", "int(Dataset.zip((Dataset.range(3).repeat(), Dataset.range(3).filter(lambda x: x > 0))).cardinality())", "exact"),
    ("cardinality_zip_finite_unknown", "int(Dataset.zip((Dataset.range(3), Dataset.range(3).filter(lambda x: x > 0))).cardinality())", "exact"),
    ("concatenate_empty_first", "Dataset.range(0).concatenate(Dataset.range(3))", "exact"),
    ("concatenate_both_empty", "Dataset.range(0).concatenate(Dataset.range(0))", "exact"),
    ("concatenate_infinite_take", "Dataset.range(2).repeat().concatenate(Dataset.range(5)).take(5)", "exact"),
    ("concatenate_then_infinite_take", "Dataset.range(2).concatenate(Dataset.range(10, 12).repeat()).take(5)", "exact"),
    ("cardinality_concatenate_unknown_finite", "int(Dataset.range(3).filter(lambda x: x > 0).concatenate(Dataset.range(2)).cardinality())", "exact"),
    ("cardinality_concatenate_unknown_infinite", "int(Dataset.range(3).filter(lambda x: x > 0).concatenate(Dataset.range(2).repeat()).cardinality())", "exact"),
    ("cardinality_concatenate_infinite_unknown", "int(Dataset.range(2).repeat().concatenate(Dataset.range(3).filter(lambda x: x > 0)).cardinality())", "exact"),
    # ----- enumerate / scan / take_while / unique -----
    ("enumerate_default_start", "Dataset.range(10, 13).enumerate()", "exact"),
    ("enumerate_negative_start", "Dataset.range(3).enumerate(start=-2)", "exact"),
    ("enumerate_after_filter", "Dataset.range(10).filter(lambda x: x % 4 == 1).enumerate()", "exact"),
    ("enumerate_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0]).enumerate().ignore_errors()", "exact"),
    ("cardinality_enumerate_infinite", "int(Dataset.range(3).repeat().enumerate().cardinality())", "exact"),
    ("scan_of_empty", "Dataset.range(0).scan(tf.constant(0, tf.int64), lambda s, x: (s + x, s))", "exact"),
    ("scan_state_differs_from_output", "Dataset.range(1, 5).scan(tf.constant(1, tf.int64), lambda s, x: (s * x, s * x > 5))", "exact"),
    ("scan_of_infinite_take", "Dataset.range(3).repeat().scan(tf.constant(0, tf.int64), lambda s, x: (s + x, s + x)).take(5)", "exact"),
    ("cardinality_scan_infinite", "int(Dataset.range(3).repeat().scan(tf.constant(0, tf.int64), lambda s, x: (s, x)).cardinality())", "exact"),
    ("take_while_all", "Dataset.range(5).take_while(lambda x: x < 100)", "exact"),
    ("take_while_does_not_resume", "Dataset.from_tensor_slices(tf.constant([1, 2, 5, 1, 2], tf.int64)).take_while(lambda x: x < 3)", "exact"),
    ("take_while_of_infinite", "Dataset.range(3).repeat().enumerate().take_while(lambda i, x: i < 7).map(lambda i, x: x)", "exact"),
    ("take_while_of_empty", "Dataset.range(0).take_while(lambda x: x < 3)", "exact"),
    ("unique_strings", "Dataset.from_tensor_slices(['a', 'b', 'a', 'c', 'b']).unique()", "exact"),
    ("unique_of_empty", "Dataset.range(0).unique()", "exact"),
    ("unique_all_same", "Dataset.from_tensor_slices(tf.constant([7, 7, 7], tf.int64)).unique()", "exact"),
    ("unique_negative", "Dataset.from_tensor_slices(tf.constant([-1, 0, -1, 1, 0], tf.int64)).unique()", "exact"),
    ("unique_of_repeat", "Dataset.range(3).repeat(3).unique()", "exact"),
    # ----- group_by_window -----
    ("group_by_window_size_1", "Dataset.range(5).group_by_window(key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(5), window_size=1)", "exact"),
    ("group_by_window_negative_keys", "Dataset.range(6).group_by_window(key_func=lambda x: -1 - x % 3, reduce_func=lambda k, w: w.batch(5), window_size=5)", "exact"),
    ("group_by_window_reduce_filter", "Dataset.range(12).group_by_window(key_func=lambda x: x % 2, reduce_func=lambda k, w: w.filter(lambda x: x % 3 == 0), window_size=3)", "exact"),
    ("group_by_window_reduce_to_count", "Dataset.range(10).group_by_window(key_func=lambda x: x % 3, reduce_func=lambda k, w: w.batch(100).map(lambda b: (k, tf.size(b, out_type=tf.int64))), window_size=3)", "exact"),
    ("group_by_window_of_empty", "Dataset.range(0).group_by_window(key_func=lambda x: x, reduce_func=lambda k, w: w.batch(2), window_size=2)", "exact"),
    ("group_by_window_single_key", "Dataset.range(7).group_by_window(key_func=lambda x: tf.constant(0, tf.int64), reduce_func=lambda k, w: w.batch(3), window_size=3)", "exact"),
    ("group_by_window_window_size_func", "Dataset.range(10).group_by_window(key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(10), window_size_func=lambda k: k + 2)", "exact"),
    ("group_by_window_size_and_size_func", "Dataset.range(10).group_by_window(key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(10), window_size=2, window_size_func=lambda k: k + 2)", "exact"),
    ("group_by_window_window_size_zero", "Dataset.range(4).group_by_window(key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(10), window_size=0)", "exact"),
    ("group_by_window_key_not_int64", "Dataset.range(4).group_by_window(key_func=lambda x: tf.cast(x, tf.int32), reduce_func=lambda k, w: w.batch(10), window_size=2)", "exact"),
    # ----- bucket_by_sequence_length -----
    ("bucket_by_sequence_length_boundary_edge", "seqs([2, 3, 5, 4, 3, 2, 5]).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 2])", "exact"),
    ("bucket_by_sequence_length_pad_to_boundary", "seqs([1, 4, 2, 3, 1]).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 2], pad_to_bucket_boundary=True)", "exact"),
    ("bucket_by_sequence_length_pad_to_boundary_too_long", "seqs([1, 2, 6, 1]).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 2], pad_to_bucket_boundary=True)", "exact"),
    ("bucket_by_sequence_length_no_padding", "seqs([1, 1, 3, 3, 4]).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[2], bucket_batch_sizes=[2, 2], no_padding=True)", "exact"),
    ("bucket_by_sequence_length_no_padding_ragged", "seqs([3, 4, 1]).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[2], bucket_batch_sizes=[2, 2], no_padding=True)", "exact"),
    ("bucket_by_sequence_length_drop_all", "seqs([1, 4, 2]).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[3], bucket_batch_sizes=[2, 2], drop_remainder=True)", "exact"),
    ("bucket_by_sequence_length_padded_shapes", "seqs([1, 4, 2, 3]).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[3], bucket_batch_sizes=[2, 2], padded_shapes=[6], padding_values=tf.constant(-1, tf.int64))", "exact"),
    ("bucket_by_sequence_length_zero_length", "seqs([0, 1, 0]).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[1], bucket_batch_sizes=[2, 2])", "exact"),
    ("bucket_by_sequence_length_sizes_mismatch", "seqs([1, 2]).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2])", "exact"),
    ("bucket_by_sequence_length_unsorted_boundaries", "seqs([1, 2]).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[5, 3], bucket_batch_sizes=[2, 2, 2])", "exact"),
    # ----- sample_from_datasets / choose_from_datasets -----
    ("choose_from_datasets_stop_on_empty_false", "Dataset.choose_from_datasets([Dataset.range(0, 2), Dataset.range(10, 15)], Dataset.from_tensor_slices(tf.constant([0, 0, 0, 1, 0, 1], tf.int64)), stop_on_empty_dataset=False)", "exact"),
    ("choose_from_datasets_stop_on_empty_true", "Dataset.choose_from_datasets([Dataset.range(0, 2), Dataset.range(10, 15)], Dataset.from_tensor_slices(tf.constant([0, 0, 0, 1, 0, 1], tf.int64)), stop_on_empty_dataset=True)", "exact"),
    ("choose_from_datasets_choice_out_of_range", "Dataset.choose_from_datasets([Dataset.range(0, 2), Dataset.range(10, 15)], Dataset.from_tensor_slices(tf.constant([1, 2, 0], tf.int64)))", "exact"),
    ("choose_from_datasets_negative_choice", "Dataset.choose_from_datasets([Dataset.range(0, 2), Dataset.range(10, 15)], Dataset.from_tensor_slices(tf.constant([0, -1, 1], tf.int64)))", "exact"),
    ("choose_from_datasets_empty_choices", "Dataset.choose_from_datasets([Dataset.range(0, 2), Dataset.range(10, 15)], Dataset.range(0))", "exact"),
    ("choose_from_datasets_all_run_dry", "Dataset.choose_from_datasets([Dataset.range(0, 1), Dataset.range(10, 11)], Dataset.range(2).repeat(), stop_on_empty_dataset=False)", "exact"),
    ("choose_from_datasets_no_datasets", "Dataset.choose_from_datasets([], Dataset.range(2))", "exact"),
    ("sample_from_datasets_single_nonzero_weight", "Dataset.sample_from_datasets([Dataset.range(0, 3), Dataset.range(10, 15)], weights=[0.0, 1.0], seed=3)", "exact"),
    ("sample_from_datasets_one_dataset", "Dataset.sample_from_datasets([Dataset.range(0, 3)], seed=3)", "exact"),
    ("sample_from_datasets_uniform_multiset", "Dataset.sample_from_datasets([Dataset.range(0, 3), Dataset.range(10, 14)], seed=11, stop_on_empty_dataset=False)", "multiset"),
    ("sample_from_datasets_weights_length_mismatch", "Dataset.sample_from_datasets([Dataset.range(0, 3), Dataset.range(10, 14)], weights=[0.5, 0.3, 0.2])", "exact"),
    ("sample_from_datasets_no_datasets", "Dataset.sample_from_datasets([])", "exact"),
    ("cardinality_sample_from_datasets", "int(Dataset.sample_from_datasets([Dataset.range(3), Dataset.range(4)], seed=1).cardinality())", "exact"),
    ("cardinality_choose_from_datasets", "int(Dataset.choose_from_datasets([Dataset.range(3), Dataset.range(4)], Dataset.range(2)).cardinality())", "exact"),
    # ----- cache / reduce / ignore_errors / prefetch -----
    ("cache_take_then_repeat", "Dataset.range(5).cache().take(2).repeat(2)", "exact"),
    ("cache_of_empty_repeat", "Dataset.range(0).cache().repeat(3)", "exact"),
    ("cache_of_filter_repeat", "Dataset.range(6).filter(lambda x: x % 2 == 1).cache().repeat(2)", "exact"),
    ("cache_of_infinite_take", "Dataset.range(3).repeat().cache().take(5)", "exact"),
    ("reduce_of_empty", "int(Dataset.range(0).reduce(tf.constant(7, tf.int64), lambda s, x: s + x))", "exact"),
    ("reduce_count_of_filter", "int(Dataset.range(10).filter(lambda x: x % 3 == 0).reduce(tf.constant(0, tf.int64), lambda s, x: s + 1))", "exact"),
    ("reduce_tuple_state", "[int(v) for v in Dataset.range(1, 5).reduce((tf.constant(0, tf.int64), tf.constant(1, tf.int64)), lambda s, x: (s[0] + x, s[1] * x))]", "exact"),
    ("ignore_errors_take", "faulty([1.0, 0.0, 2.0, 0.0, 4.0]).ignore_errors().take(2)", "exact"),
    ("ignore_errors_all_errors", "faulty([0.0, 0.0]).ignore_errors()", "exact"),
    ("take_counts_no_errors", "faulty([1.0, 0.0, 2.0, 4.0]).take(2).ignore_errors()", "exact"),
    ("skip_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0]).skip(2).ignore_errors()", "exact"),
    ("map_error_stops_iteration", "faulty([1.0, 2.0, 0.0, 4.0])", "exact"),
    ("cardinality_ignore_errors_infinite", "int(Dataset.range(3).repeat().ignore_errors().cardinality())", "exact"),
    ("cardinality_ignore_errors_finite", "int(Dataset.range(3).ignore_errors().cardinality())", "exact"),
    ("prefetch_of_empty", "Dataset.range(0).prefetch(2)", "exact"),
    ("cardinality_prefetch_infinite", "int(Dataset.range(3).repeat().prefetch(2).cardinality())", "exact"),
    ("cardinality_cache_infinite", "int(Dataset.range(3).repeat().cache().cardinality())", "exact"),
    ("cardinality_map_infinite", "int(Dataset.range(3).repeat().map(lambda x: x + 1).cardinality())", "exact"),
    ("cardinality_unique_finite", "int(Dataset.range(3).unique().cardinality())", "exact"),
    ("cardinality_take_while_finite", "int(Dataset.range(3).take_while(lambda x: x < 2).cardinality())", "exact"),
    ("cardinality_group_by_window", "int(Dataset.range(4).group_by_window(key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(2), window_size=2).cardinality())", "exact"),
    # ----- error elements met by each transformation (then dropped by ignore_errors) -----
    ("batch_error_stops_iteration", "faulty([1.0, 2.0, 0.0, 4.0]).batch(2)", "exact"),
    ("padded_batch_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0, 5.0]).map(lambda x: tf.stack([x, x])).padded_batch(2).ignore_errors()", "exact"),
    ("unbatch_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0]).map(lambda x: tf.stack([x, x])).unbatch().ignore_errors()", "exact"),
    ("rebatch_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0, 5.0]).batch(1).rebatch(2).ignore_errors()", "exact"),
    ("window_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0, 5.0]).window(2).flat_map(lambda w: w.batch(9)).ignore_errors()", "exact"),
    ("zip_error_first_input", "Dataset.zip((faulty([1.0, 0.0, 2.0, 4.0]), Dataset.range(10, 14))).ignore_errors()", "exact"),
    ("zip_error_second_input", "Dataset.zip((Dataset.range(10, 14), faulty([1.0, 0.0, 2.0, 4.0]))).ignore_errors()", "exact"),
    ("concatenate_error_then_ignore_errors", "faulty([0.0, 1.0]).concatenate(faulty([2.0, 0.0, 4.0])).ignore_errors()", "exact"),
    ("repeat_error_then_ignore_errors", "faulty([1.0, 0.0]).repeat(2).ignore_errors()", "exact"),
    ("filter_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0]).filter(lambda x: x < 1).ignore_errors()", "exact"),
    ("take_while_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0]).take_while(lambda x: x > 0.3).ignore_errors()", "exact"),
    ("scan_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0]).scan(tf.constant(0.0), lambda s, x: (s + x, s + x)).ignore_errors()", "exact"),
    ("unique_error_then_ignore_errors", "faulty([1.0, 0.0, 1.0, 2.0]).map(lambda x: tf.cast(x * 4, tf.int64)).unique().ignore_errors()", "exact"),
    ("group_by_window_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0, 5.0, 8.0]).group_by_window(key_func=lambda x: tf.cast(x * 8, tf.int64) % 2, reduce_func=lambda k, w: w.batch(2), window_size=2).ignore_errors()", "exact"),
    ("interleave_inner_error_then_ignore_errors", "Dataset.range(1, 3).interleave(lambda x: faulty([1.0, 0.0, 2.0]).map(lambda y: y + tf.cast(x, tf.float32)), cycle_length=2).ignore_errors()", "exact"),
    ("flat_map_inner_error_then_ignore_errors", "Dataset.range(1, 3).flat_map(lambda x: faulty([1.0, 0.0, 2.0]).map(lambda y: y + tf.cast(x, tf.float32))).ignore_errors()", "exact"),
    ("cache_error_then_repeat", "faulty([1.0, 0.0, 2.0]).cache().repeat(2).ignore_errors()", "exact"),
    ("map_parallel_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0]).map(lambda x: x * 2, num_parallel_calls=2, deterministic=True).ignore_errors()", "exact"),
    ("prefetch_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0]).prefetch(1).ignore_errors()", "exact"),
    ("skip_after_skipping_error", "faulty([1.0, 2.0, 0.0, 4.0]).skip(2).ignore_errors()", "exact"),
    ("shard_error_index_1", "faulty([1.0, 0.0, 2.0, 4.0, 5.0, 8.0]).shard(2, 1).ignore_errors()", "exact"),
    ("enumerate_after_ignore_errors", "faulty([1.0, 0.0, 2.0]).ignore_errors().enumerate(start=5)", "exact"),
    ("choose_from_datasets_choice_error", "Dataset.choose_from_datasets([Dataset.range(0, 3), Dataset.range(10, 13)], faulty([1.0, 0.0, 1.0, 0.5]).map(lambda x: tf.cast(x, tf.int64) - 1 + tf.cast(x < 1, tf.int64) * 2)).ignore_errors()", "exact"),
    ("interleave_inner_error_block_2", "Dataset.range(1, 4).interleave(lambda x: faulty([1.0, 0.0, 2.0, 4.0]).map(lambda y: y + tf.cast(x, tf.float32)), cycle_length=2, block_length=2).ignore_errors()", "exact"),
    ("parallel_interleave_inner_error_then_ignore_errors", "Dataset.range(1, 4).interleave(lambda x: faulty([1.0, 0.0, 2.0, 4.0]).map(lambda y: y + tf.cast(x, tf.float32)), cycle_length=2, block_length=2, num_parallel_calls=2, deterministic=True).ignore_errors()", "exact"),
    ("bucket_by_sequence_length_error_then_ignore_errors", "faulty([1.0, 0.0, 0.5, 0.25, 0.5]).map(lambda x: tf.fill([tf.cast(x, tf.int32)], x)).bucket_by_sequence_length(element_length_func=lambda e: tf.size(e), bucket_boundaries=[2, 3], bucket_batch_sizes=[2, 2, 2]).ignore_errors()", "exact"),
    ("window_drop_remainder_error_then_ignore_errors", "faulty([1.0, 2.0, 0.0, 4.0, 5.0, 8.0, 10.0]).window(3, shift=2, drop_remainder=True).flat_map(lambda w: w.batch(9)).ignore_errors()", "exact"),
    ("padded_batch_drop_remainder_error_then_ignore_errors", "faulty([1.0, 0.0, 2.0, 4.0, 5.0]).map(lambda x: tf.stack([x, x])).padded_batch(2, drop_remainder=True).ignore_errors()", "exact"),
    ("take_while_error_stops_iteration", "faulty([1.0, 0.0, 2.0]).take_while(lambda x: x > 0.3)", "exact"),
    # ----- more argument edges -----
    ("shuffle_buffer_zero", "Dataset.range(5).shuffle(0)", "exact"),
    ("prefetch_zero", "Dataset.range(3).prefetch(0)", "exact"),
    ("counter_step_zero", "Dataset.counter(3, 0).take(3)", "exact"),
    ("rebatch_zero_take", "Dataset.range(4).batch(2).rebatch(0).take(3)", "exact"),
    ("ragged_batch_drop_remainder", "seqs([1, 3, 2]).ragged_batch(2, drop_remainder=True)", "exact"),
    ("ragged_batch_empty_rows", "seqs([0, 2, 0]).ragged_batch(3)", "exact"),
    ("ragged_batch_zero", "seqs([1, 2]).ragged_batch(0)", "exact"),
    ("sample_from_datasets_negative_weight", "Dataset.sample_from_datasets([Dataset.range(0, 3), Dataset.range(10, 14)], weights=[-1.0, 2.0], seed=5)", "exact"),
    ("sample_from_datasets_all_zero_weights", "Dataset.sample_from_datasets([Dataset.range(0, 3), Dataset.range(10, 14)], weights=[0.0, 0.0], seed=5)", "exact"),
    ("sample_from_datasets_stop_on_empty_single_input", "Dataset.sample_from_datasets([Dataset.range(0, 3), Dataset.range(10, 14)], weights=[1.0, 0.0], seed=5, stop_on_empty_dataset=True)", "exact"),
]


def encode(x):
    """An element as JSON, as tests/data/tensorflow/README.md says."""
    if isinstance(x, tf.RaggedTensor):
        return encode(x.to_list())
    if isinstance(x, tuple) or isinstance(x, list):
        return [encode(v) for v in x]
    if isinstance(x, dict):
        return {k: encode(v) for k, v in x.items()}
    if isinstance(x, (tf.Tensor,)) or hasattr(x, "numpy"):
        x = x.numpy()
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            return encode(x.item() if x.dtype != object else x.item())
        return [encode(v) for v in x]
    if isinstance(x, np.generic):
        return encode(x.item())
    if isinstance(x, bytes):
        try:
            return x.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(x).decode()}
    if isinstance(x, bool) or isinstance(x, int) or isinstance(x, str) or x is None:
        return x
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return x
    raise TypeError(f"cannot encode {type(x)}: {x!r}")


def core_message(message):
    """TensorFlow's message without the function-node prefix, op suffix and node trace."""
    m = message.strip()
    if m.startswith("{{function_node"):
        m = m.split("}} ", 1)[-1]
    m = m.split(" [Op:", 1)[0]
    m = m.split("\n\t [[", 1)[0]
    return m.strip()


def error_of(e, stage, before=None):
    err = {
        "class": type(e).__name__,
        "module": type(e).__module__,
        "message": str(e),
        "core_message": core_message(str(e)),
        "stage": stage,
    }
    if before is not None:
        err["elements_before_error"] = before
    return err


def run(name, pipeline, compare, notes=None):
    if os.environ.get("VERBOSE"):
        print(name, file=sys.stderr, flush=True)
    case = {"name": name, "pipeline": pipeline, "compare": compare}
    try:
        value = eval(pipeline, dict(SCOPE))
    except Exception as e:  # noqa: BLE001 -- TensorFlow's construction errors are the data
        case["output"] = []
        case["error"] = error_of(e, "construction")
        return finish(case, notes)
    if not isinstance(value, tf.data.Dataset):
        case["output"] = encode(value)
        return finish(case, notes)
    case["element_spec"] = str(value.element_spec)
    case["cardinality"] = int(value.cardinality())
    output = []
    try:
        for element in value:
            output.append(encode(element))
    except Exception as e:  # noqa: BLE001 -- iteration errors are the data
        case["output"] = output
        case["error"] = error_of(e, "iteration", len(output))
        return finish(case, notes)
    case["output"] = output
    return finish(case, notes)


def finish(case, notes):
    if notes:
        case["notes"] = notes
    return case


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    out = os.path.join(root, "tests", "data", "tensorflow", "semantics_more.json")
    names = [c[0] for c in CASES]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        sys.exit(f"duplicate case names: {sorted(dupes)}")
    cases = [run(*c) for c in CASES]
    document = {
        "tf_version": tf.__version__,
        "generator": "scripts/tf_semantics_more.py",
        "encoding": "as semantics.json: scalars -> numbers, tensors -> nested lists, tuples -> "
                    "lists, dicts -> objects, strings -> UTF-8 text (or {'b64': ...}), "
                    "non-finite floats as 'NaN'/'Infinity'/'-Infinity'. 'error' (when present) "
                    "happened after 'output' was yielded (stage=iteration) or when building "
                    "the pipeline (stage=construction). cardinality: -1 INFINITE, -2 UNKNOWN. "
                    "A pipeline that is not a dataset (reduce, cardinality) has its value as "
                    "'output'.",
        "compare": {
            "exact": "output must match element for element",
            "multiset": "same elements in any order (TF RNG-specific order recorded for reference)",
        },
        "cases": cases,
    }
    with open(out, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"wrote {len(cases)} cases ({errors} with errors) to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
