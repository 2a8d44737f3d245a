//! The one table of tensor types. A type is added here, once: its ggml id, its block struct
//! (in `blocks`), the activation format its dot products consume, and its scalar reference
//! functions (in `reference`). Everything else that lists types is expanded from this table:
//! [`GgmlType`] and its sizes, the [`Tensor`] marker types the kernel sets name blocks by, and
//! the reference kernel set, which every other set starts from (a set that has no kernel of
//! its own for a type runs the reference one).

use half::{bf16, f16};

pub use super::adapt::{Reference, Tensor};
use super::blocks::*;
use super::reference as r;

/// Calls `$then!` with the table. Sections:
/// - `weights`: `TYPE = id: block, activation type, reference dequantize, reference dot;`
/// - `activations` (formats that are never weights): `TYPE = id: block, reference dequantize;`
/// - `quantizers`: `ACTIVATION TYPE => reference quantize;`
#[allow(unused_macros)]
macro_rules! tensor_types {
    ($then:ident) => {
        $then! {
            weights {
                F32 = 0: f32, F32, dequantize_row_f32, vec_dot_f32_f32;
                F16 = 1: f16, F32, dequantize_row_f16, vec_dot_f16_f32;
                BF16 = 30: bf16, F32, dequantize_row_bf16, vec_dot_bf16_f32;
                Q4_0 = 2: BlockQ4_0, Q8_0, dequantize_row_q4_0, vec_dot_q4_0_q8_0;
                Q4_1 = 3: BlockQ4_1, Q8_1, dequantize_row_q4_1, vec_dot_q4_1_q8_1;
                Q5_0 = 6: BlockQ5_0, Q8_0, dequantize_row_q5_0, vec_dot_q5_0_q8_0;
                Q5_1 = 7: BlockQ5_1, Q8_1, dequantize_row_q5_1, vec_dot_q5_1_q8_1;
                Q8_0 = 8: BlockQ8_0, Q8_0, dequantize_row_q8_0, vec_dot_q8_0_q8_0;
                Q2_K = 10: BlockQ2K, Q8_K, dequantize_row_q2_k, vec_dot_q2_k_q8_k;
                Q3_K = 11: BlockQ3K, Q8_K, dequantize_row_q3_k, vec_dot_q3_k_q8_k;
                Q4_K = 12: BlockQ4K, Q8_K, dequantize_row_q4_k, vec_dot_q4_k_q8_k;
                Q5_K = 13: BlockQ5K, Q8_K, dequantize_row_q5_k, vec_dot_q5_k_q8_k;
                Q6_K = 14: BlockQ6K, Q8_K, dequantize_row_q6_k, vec_dot_q6_k_q8_k;
                IQ4_NL = 20: BlockIq4Nl, Q8_0, dequantize_row_iq4_nl, vec_dot_iq4_nl_q8_0;
                IQ4_XS = 23: BlockIq4Xs, Q8_K, dequantize_row_iq4_xs, vec_dot_iq4_xs_q8_k;
            }
            activations {
                Q8_1 = 9: BlockQ8_1, dequantize_row_q8_1;
                Q8_K = 15: BlockQ8K, dequantize_row_q8_k;
            }
            quantizers {
                F32 => quantize_row_f32;
                Q8_0 => quantize_row_q8_0;
                Q8_1 => quantize_row_q8_1;
                Q8_K => quantize_row_q8_k;
            }
        }
    };
}

/// Every table-driven function that lists types reads the table through this macro's output.
macro_rules! define_types {
    (
        weights { $($W:ident = $wid:literal: $WB:ty, $WA:ident, $wdeq:ident, $wdot:ident;)* }
        activations { $($A:ident = $aid:literal: $AB:ty, $adeq:ident;)* }
        quantizers { $($Q:ident => $qf:ident;)* }
    ) => {
        /// ggml tensor types this SDK reads (ids from ggml's `ggml_type`). The activation-only
        /// formats appear only as what weight types' dot products consume.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum GgmlType {
            $($W,)*
            $($A,)*
        }

        /// Number of [`GgmlType`]s (the size of a kernel table).
        pub(crate) const N_TYPES: usize = [$(GgmlType::$W,)* $(GgmlType::$A,)*].len();

        /// Number of weight types.
        pub const N_WEIGHTS: usize = [$(GgmlType::$W,)*].len();

        impl GgmlType {
            /// Every type, weights first.
            pub const ALL: [GgmlType; N_TYPES] = [$(GgmlType::$W,)* $(GgmlType::$A,)*];

            /// The weight types (those with a dot product).
            pub const WEIGHTS: [GgmlType; N_WEIGHTS] = [$(GgmlType::$W,)*];

            pub(crate) fn from_id(id: u32) -> Option<Self> {
                match id {
                    $($wid => Some(GgmlType::$W),)*
                    $($aid => Some(GgmlType::$A),)*
                    _ => None,
                }
            }

            pub fn id(self) -> u32 {
                match self {
                    $(GgmlType::$W => $wid,)*
                    $(GgmlType::$A => $aid,)*
                }
            }

            pub fn name(self) -> &'static str {
                match self {
                    $(GgmlType::$W => stringify!($W),)*
                    $(GgmlType::$A => stringify!($A),)*
                }
            }

            /// Elements per block.
            pub fn block_size(self) -> usize {
                match self {
                    $(GgmlType::$W => <$WB as Block>::ELEMS,)*
                    $(GgmlType::$A => <$AB as Block>::ELEMS,)*
                }
            }

            /// Bytes per block.
            pub(crate) fn block_bytes(self) -> usize {
                match self {
                    $(GgmlType::$W => size_of::<$WB>(),)*
                    $(GgmlType::$A => size_of::<$AB>(),)*
                }
            }

            /// Activation format the dot product of this weight type consumes (F32 for float
            /// weights). Activation-only types map to themselves.
            pub fn activation_type(self) -> GgmlType {
                match self {
                    $(GgmlType::$W => GgmlType::$WA,)*
                    $(GgmlType::$A => GgmlType::$A,)*
                }
            }

            /// Whether this is an activation format (a type a row can be quantized to).
            pub fn is_activation(self) -> bool {
                matches!(self, $(GgmlType::$Q)|*)
            }

            /// Index in a kernel table.
            pub(crate) const fn slot(self) -> usize {
                self as usize
            }
        }

        /// Marker types, one per [`GgmlType`], for naming a type's blocks in generic code.
        #[allow(non_camel_case_types)]
        pub mod ty {
            $(pub struct $W;)*
            $(pub struct $A;)*
        }

        $(impl Tensor for ty::$W {
            const TYPE: GgmlType = GgmlType::$W;
            type Block = $WB;
            type Act = <ty::$WA as Tensor>::Block;
        }
        impl Reference for ty::$W {
            const DOT: fn(&[Self::Block], &[Self::Act]) -> f32 = r::$wdot;
        })*
        $(impl Tensor for ty::$A {
            const TYPE: GgmlType = GgmlType::$A;
            type Block = $AB;
            type Act = $AB;
        })*

        /// The reference set's tables, which every set starts from.
        pub(super) mod reference_tables {
            use super::*;
            use crate::quant::adapt::{dequantize_with, mat_mat_ref, mat_vec_ref, quantize_with, vec_dot_ref};
            use crate::quant::{DequantizeFn, MatMatFn, MatVecFn, QuantizeFn, VecDotFn};

            pub(crate) const DOT: [Option<VecDotFn>; N_TYPES] = {
                let mut t: [Option<VecDotFn>; N_TYPES] = [None; N_TYPES];
                $(t[GgmlType::$W.slot()] = Some(vec_dot_ref::<ty::$W>);)*
                t
            };
            pub(crate) const MAT_VEC: [Option<MatVecFn>; N_TYPES] = {
                let mut t: [Option<MatVecFn>; N_TYPES] = [None; N_TYPES];
                $(t[GgmlType::$W.slot()] = Some(mat_vec_ref::<ty::$W>);)*
                t
            };
            pub(crate) const MAT_MAT: [Option<MatMatFn>; N_TYPES] = {
                let mut t: [Option<MatMatFn>; N_TYPES] = [None; N_TYPES];
                $(t[GgmlType::$W.slot()] = Some(mat_mat_ref::<ty::$W>);)*
                t
            };
            pub(crate) const DEQUANTIZE: [Option<DequantizeFn>; N_TYPES] = {
                let mut t: [Option<DequantizeFn>; N_TYPES] = [None; N_TYPES];
                $(t[GgmlType::$W.slot()] = Some({
                    fn deq(w: &[u8], out: &mut [f32]) {
                        dequantize_with::<$WB>(w, out, r::$wdeq)
                    }
                    deq
                });)*
                $(t[GgmlType::$A.slot()] = Some({
                    fn deq(w: &[u8], out: &mut [f32]) {
                        dequantize_with::<$AB>(w, out, r::$adeq)
                    }
                    deq
                });)*
                t
            };
            pub(crate) const QUANTIZE: [Option<QuantizeFn>; N_TYPES] = {
                let mut t: [Option<QuantizeFn>; N_TYPES] = [None; N_TYPES];
                $(t[GgmlType::$Q.slot()] = Some({
                    fn quant(x: &[f32], out: &mut [u8]) {
                        quantize_with::<<ty::$Q as Tensor>::Block>(x, out, r::$qf)
                    }
                    quant
                });)*
                t
            };
        }
    };
}

tensor_types!(define_types);
