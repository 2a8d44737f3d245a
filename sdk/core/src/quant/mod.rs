//! Tensor element types: block layouts, dequantization and dot products against quantized
//! activations. `reference` is the scalar truth that every fast kernel is tested against.

/// ggml tensor types this SDK reads (ids from ggml's `ggml_type`). `Q8_1` and `Q8_K` appear only
/// as activation formats.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q8_0,
    Q8_1,
    Q4_K,
    Q6_K,
    Q8_K,
}

impl GgmlType {
    pub fn from_id(id: u32) -> Option<Self> {
        use GgmlType::*;
        Some(match id {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            8 => Q8_0,
            9 => Q8_1,
            12 => Q4_K,
            14 => Q6_K,
            15 => Q8_K,
            30 => BF16,
            _ => return None,
        })
    }

    pub fn id(self) -> u32 {
        use GgmlType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q5_0 => 6,
            Q8_0 => 8,
            Q8_1 => 9,
            Q4_K => 12,
            Q6_K => 14,
            Q8_K => 15,
            BF16 => 30,
        }
    }

    pub fn name(self) -> &'static str {
        use GgmlType::*;
        match self {
            F32 => "F32",
            F16 => "F16",
            BF16 => "BF16",
            Q4_0 => "Q4_0",
            Q4_1 => "Q4_1",
            Q5_0 => "Q5_0",
            Q8_0 => "Q8_0",
            Q8_1 => "Q8_1",
            Q4_K => "Q4_K",
            Q6_K => "Q6_K",
            Q8_K => "Q8_K",
        }
    }

    /// Elements per block.
    pub fn block_size(self) -> usize {
        use GgmlType::*;
        match self {
            F32 | F16 | BF16 => 1,
            Q4_0 | Q4_1 | Q5_0 | Q8_0 | Q8_1 => 32,
            Q4_K | Q6_K | Q8_K => 256,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        use GgmlType::*;
        match self {
            F32 => 4,
            F16 | BF16 => 2,
            Q4_0 => 18,
            Q4_1 => 20,
            Q5_0 => 22,
            Q8_0 => 34,
            Q8_1 => 36,
            Q4_K => 144,
            Q6_K => 210,
            Q8_K => 292,
        }
    }

    /// Bytes of a row of `n` elements (`n` a multiple of the block size).
    pub fn row_bytes(self, n: usize) -> usize {
        n / self.block_size() * self.block_bytes()
    }
}
