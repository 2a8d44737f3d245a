//! Views of the model's tensors inside the mapped file, checked once at load.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::gguf::{GgufFile, TensorInfo};
use crate::quant::packed::{Arena, PackedMatrix, Packer, Packing};
use crate::quant::{kernels, GgmlType};

/// A weight matrix of `rows` outputs by `cols` inputs, row-major as ggml stores it
/// (`dims = [cols, rows]`). The location in the mapped file is kept; products read either
/// those bytes or, once `Matrix::packer` has run, a copy in the kernel set's tiled layout.
#[derive(Debug, Clone)]
pub struct Matrix {
    pub name: String,
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    offset: usize,
    row_bytes: usize,
    packed: Option<Arc<PackedMatrix>>,
}

impl Matrix {
    pub fn load(f: &GgufFile, name: &str, cols: usize, rows: usize) -> Result<Matrix> {
        let t = f.tensor(name).ok_or_else(|| Error::MissingTensor(name.to_owned()))?;
        Self::from_info(f, t, cols, rows)
    }

    pub(crate) fn from_info(f: &GgufFile, t: &TensorInfo, cols: usize, rows: usize) -> Result<Matrix> {
        let expected = [cols as u64, rows as u64];
        let found: Vec<u64> = t.dims.to_vec();
        let shape_ok = found.len() >= 2 && found[..2] == expected && found[2..].iter().all(|&d| d == 1);
        if !shape_ok {
            return Err(Error::TensorShape { name: t.name.clone(), expected: expected.to_vec(), found });
        }
        let k = kernels();
        if k.vec_dot(t.ty).is_none() || k.dequantize(t.ty).is_none() {
            return Err(Error::UnsupportedTensorType { tensor: t.name.clone(), ty: t.ty.name().to_owned() });
        }
        // Kernels view rows as blocks with 2-byte fields: the data must start 4-byte aligned.
        let start = f.bytes().as_ptr() as usize + t.offset as usize;
        if start % 4 != 0 {
            return Err(Error::Corrupt(format!("tensor `{}` data is not 4-byte aligned", t.name)));
        }
        Ok(Matrix {
            name: t.name.clone(),
            ty: t.ty,
            rows,
            cols,
            offset: t.offset as usize,
            row_bytes: t.ty.row_bytes(cols),
            packed: None,
        })
    }

    /// The parts of a fused tensor (Phi-3's q | k | v, gate | up) as matrices of their own:
    /// consecutive runs of `rows` rows (summing to this matrix's), each checked like a tensor.
    pub fn split<const N: usize>(&self, f: &GgufFile, rows: [usize; N]) -> Result<[Matrix; N]> {
        let total: usize = rows.iter().sum();
        if total != self.rows {
            return Err(Error::TensorShape {
                name: self.name.clone(),
                expected: vec![self.cols as u64, total as u64],
                found: vec![self.cols as u64, self.rows as u64],
            });
        }
        let mut first = 0;
        let mut offsets = [0; N];
        for (i, &n) in rows.iter().enumerate() {
            offsets[i] = self.offset + first * self.row_bytes;
            if (f.bytes().as_ptr() as usize + offsets[i]) % 4 != 0 {
                return Err(Error::Corrupt(format!("part {i} of tensor `{}` is not 4-byte aligned", self.name)));
            }
            first += n;
        }
        Ok(std::array::from_fn(|i| Matrix {
            name: format!("{}[{i}]", self.name),
            rows: rows[i],
            offset: offsets[i],
            packed: None,
            ..self.clone()
        }))
    }

    /// Bytes the tiled copy would take (`None` when `p` does not pack this type or shape).
    pub(crate) fn packed_size(&self, p: &Packing) -> Option<usize> {
        PackedMatrix::size(p, self.ty, self.rows, self.cols)
    }

    /// Starts the tiled copy (its bytes taken from `arena` while it has room); `None` when `p`
    /// does not pack this type or shape. Products use the copy once [`Matrix::set_packed`]
    /// hands it over.
    pub(crate) fn packer<'a>(&self, file: &'a [u8], p: &Packing, arena: Option<&Arc<Arena>>) -> Option<Packer<'a>> {
        Packer::new(p, self.ty, self.rows, self.cols, self.rows(file, 0, self.rows), arena)
    }

    /// Products read `packed` (built from this matrix by [`Matrix::packer`]) from now on.
    pub(crate) fn set_packed(&mut self, packed: PackedMatrix) {
        self.packed = Some(Arc::new(packed));
    }

    /// The tiled copy, if the matrix has been packed.
    pub fn packed(&self) -> Option<&PackedMatrix> {
        self.packed.as_deref()
    }

    /// Byte range of the matrix in the file: `(start, len)`.
    pub(crate) fn file_range(&self) -> (usize, usize) {
        (self.offset, self.bytes())
    }

    /// Bytes of row `r` (`file` is the bytes of the file it was loaded from).
    #[inline]
    pub fn row<'a>(&self, file: &'a [u8], r: usize) -> &'a [u8] {
        let s = self.offset + r * self.row_bytes;
        &file[s..s + self.row_bytes]
    }

    /// Copies row `r` out of `file` with a positioned read (see [`GgufFile::read_at`]); `out`
    /// holds [`row_bytes`](Self::row_bytes).
    pub(crate) fn read_row(&self, file: &GgufFile, r: usize, out: &mut [u8]) {
        file.read_at(self.offset + r * self.row_bytes, &mut out[..self.row_bytes]);
    }

    /// Bytes of rows `r0..r1`, contiguous.
    #[inline]
    pub fn rows<'a>(&self, file: &'a [u8], r0: usize, r1: usize) -> &'a [u8] {
        &file[self.offset + r0 * self.row_bytes..self.offset + r1 * self.row_bytes]
    }

    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    pub fn bytes(&self) -> usize {
        self.row_bytes * self.rows
    }
}

/// A small float vector (norm weights, biases), copied out of the file as f32.
pub(crate) fn load_vector(f: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>> {
    let t = f.tensor(name).ok_or_else(|| Error::MissingTensor(name.to_owned()))?;
    if t.n_elements() != len as u64 {
        return Err(Error::TensorShape { name: name.to_owned(), expected: vec![len as u64], found: t.dims.clone() });
    }
    let bytes = f.tensor_data(t);
    Ok(match t.ty {
        GgmlType::F32 => bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        GgmlType::F16 => bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        GgmlType::BF16 => bytes.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        other => return Err(Error::UnsupportedTensorType { tensor: name.to_owned(), ty: other.name().to_owned() }),
    })
}

pub(crate) fn load_optional_vector(f: &GgufFile, name: &str, len: usize) -> Result<Option<Vec<f32>>> {
    match f.tensor(name) {
        Some(_) => load_vector(f, name, len).map(Some),
        None => Ok(None),
    }
}

/// A depthwise convolution's weights `name`, stored `{kernel, channels}`: `kernel` taps per
/// channel, channel-major (LFM2's `shortconv.conv`, Qwen3.5's `ssm_conv1d`).
pub(crate) fn load_conv_taps(f: &GgufFile, name: &str, kernel: usize, channels: usize) -> Result<Vec<f32>> {
    let t = f.tensor(name).ok_or_else(|| Error::MissingTensor(name.to_owned()))?;
    if t.dims.first().copied() != Some(kernel as u64) {
        return Err(Error::TensorShape {
            name: name.to_owned(),
            expected: vec![kernel as u64, channels as u64],
            found: t.dims.clone(),
        });
    }
    load_vector(f, name, kernel * channels)
}
