//! The reference set: the scalar kernels of `reference` for every type in the table.

use super::base;
use crate::quant::dispatch::Kernels;

pub(in crate::quant) static REFERENCE: Kernels = base("reference");
