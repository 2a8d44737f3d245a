//! The gated feed-forward block: down(act(gate · xb) ∘ (up · xb)), gate and up as two tensors
//! or one fused gate | up. Gate and up run as one parallel job whose tasks apply the gate to
//! the rows they produced. Reads `xb`, writes `proj`.

use crate::error::Result;

use super::super::hparams::Hparams;
use super::super::ops::{self, Product, SharedMut};
use super::super::scratch::grow;
use super::super::weights::Matrix;
use super::Pass;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activation {
    /// SwiGLU: silu(gate) * up.
    Silu,
    /// GeGLU with the tanh approximation of GELU.
    GeluTanh,
}

pub(crate) struct Glu {
    gate: Matrix,
    up: Matrix,
    down: Matrix,
    act: Activation,
}

impl Glu {
    /// Layer `il`'s `ffn_gate`, `ffn_up` and `ffn_down`, `n_ff` wide.
    pub fn load(h: &Hparams, il: usize, n_ff: usize, act: Activation) -> Result<Glu> {
        let (f, d) = (h.f, h.config.n_embd);
        Ok(Glu {
            gate: Matrix::load(f, &format!("blk.{il}.ffn_gate.weight"), d, n_ff)?,
            up: Matrix::load(f, &format!("blk.{il}.ffn_up.weight"), d, n_ff)?,
            down: Matrix::load(f, &format!("blk.{il}.ffn_down.weight"), n_ff, d)?,
            act,
        })
    }

    /// The same with gate and up fused in `ffn_up` (2 · `n_ff` rows: gate, then up).
    pub(crate) fn load_fused(h: &Hparams, il: usize, n_ff: usize, act: Activation) -> Result<Glu> {
        let (f, d) = (h.f, h.config.n_embd);
        let fused = Matrix::load(f, &format!("blk.{il}.ffn_up.weight"), d, 2 * n_ff)?;
        let [gate, up] = fused.split(f, [n_ff, n_ff])?;
        Ok(Glu { gate, up, down: Matrix::load(f, &format!("blk.{il}.ffn_down.weight"), n_ff, d)?, act })
    }

    pub(crate) fn matrices(&mut self) -> [&mut Matrix; 3] {
        [&mut self.gate, &mut self.up, &mut self.down]
    }

    /// proj = ffn(xb).
    pub fn forward(&self, p: &mut Pass<'_>) {
        let (e, n) = (p.exec, p.n);
        let (k, d, ff) = (e.kernels, self.gate.cols, self.gate.rows);
        let s = &mut *p.s;
        grow(&mut s.gate, n * ff);
        grow(&mut s.up, n * ff);
        s.qin.invalidate();
        s.qin.prepare(e.pool, k, &self.gate, &s.xb[..n * d], n);
        s.qin.prepare(e.pool, k, &self.up, &s.xb[..n * d], n);
        let (gate_ptr, up_ptr) = (SharedMut::new(s.gate.as_mut_ptr()), SharedMut::new(s.up.as_mut_ptr()));
        let (act, silu_mul, gelu_mul) = (self.act, k.silu_mul(), k.gelu_mul());
        let glu_rows = move |r0: usize, r1: usize| {
            for t in 0..n {
                // SAFETY: rows r0..r1 of every token belong to the calling task alone, and the
                // gate and up buffers hold n * ff values (grown above).
                let (g, u) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(gate_ptr.get().add(t * ff + r0), r1 - r0),
                        std::slice::from_raw_parts(up_ptr.get().add(t * ff + r0), r1 - r0),
                    )
                };
                match act {
                    Activation::Silu => silu_mul(g, u),
                    Activation::GeluTanh => gelu_mul(g, u),
                }
            }
        };
        let mut gate_up = [
            Product { w: &self.gate, act: s.qin.for_matrix(k, &self.gate), out: &mut s.gate[..n * ff] },
            Product { w: &self.up, act: s.qin.for_matrix(k, &self.up), out: &mut s.up[..n * ff] },
        ];
        ops::matmul_then(e.pool, k, e.file, &mut gate_up, n, Some(&glu_rows));
        e.project(&mut s.qin, &self.down, n, &s.gate, &mut s.proj);
    }
}
