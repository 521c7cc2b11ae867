//! Feeding training frameworks: [`burn`] (feature `burn`: a `DataLoader` over a dataset) and
//! [`candle`] (feature `candle`: batches as tensors without a copy).
//!
//! Both go with [`distribute`](crate::distribute) for data-parallel training: each rank's
//! loader reads its [`ShardPlan`](crate::distribute::ShardPlan)'s dataset, and the
//! [`Distributed::weight`](crate::distribute::Distributed::weight) of each element gives
//! padding no weight in the loss.

#[cfg(feature = "burn")]
pub mod burn;
#[cfg(feature = "candle")]
pub mod candle;
