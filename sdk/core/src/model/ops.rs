//! Element-wise and reduction kernels of the forward pass, and the threaded matrix product.

use crate::quant::packed::{OutRows, PackedAct};
use crate::quant::{GgmlType, Kernels};
use crate::runtime::ThreadPool;

use super::weights::Matrix;

/// out = x / rms(x) * w, row by row.
pub(crate) fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let n = w.len();
    for (xb, ob) in x.chunks(n * SQUARES_ROWS).zip(out.chunks_mut(n * SQUARES_ROWS)) {
        let inv = inverse_rms(xb, n, eps);
        for ((xr, or), &inv) in xb.chunks_exact(n).zip(ob.chunks_exact_mut(n)).zip(&inv) {
            for ((o, &v), &g) in or.iter_mut().zip(xr).zip(w) {
                *o = v * inv * g;
            }
        }
    }
}

/// In-place RMS norm of every `w.len()`-sized chunk (per-head QK norm).
pub(crate) fn rms_norm_inplace(x: &mut [f32], w: &[f32], eps: f32) {
    let n = w.len();
    for xb in x.chunks_mut(n * SQUARES_ROWS) {
        let inv = inverse_rms(xb, n, eps);
        for (xr, &inv) in xb.chunks_exact_mut(n).zip(&inv) {
            for (v, &g) in xr.iter_mut().zip(w) {
                *v = *v * inv * g;
            }
        }
    }
}

/// Rows whose sums of squares run side by side.
const SQUARES_ROWS: usize = 8;

/// `1 / sqrt(mean(v²) + eps)` of each `n`-long row of `rows` (at most [`SQUARES_ROWS`] rows).
/// Each row is summed in element order, as a plain fold would (so the bits are those of
/// `iter().map(|v| v * v).sum()`), but the rows together: their additions are independent, so
/// they overlap instead of each waiting on the one before (a batch's norms run on one thread
/// while the others idle).
fn inverse_rms(rows: &[f32], n: usize, eps: f32) -> [f32; SQUARES_ROWS] {
    let k = (rows.len() / n).min(SQUARES_ROWS);
    let mut ss = [0f32; SQUARES_ROWS];
    for i in 0..n {
        for (r, s) in ss.iter_mut().enumerate().take(k) {
            let v = rows[r * n + i];
            *s += v * v;
        }
    }
    ss.map(|s| 1.0 / (s / n as f32 + eps).sqrt())
}

pub(crate) fn add_inplace(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Adds `bias` to every row of `x`.
pub(crate) fn add_bias(x: &mut [f32], bias: &[f32]) {
    for row in x.chunks_exact_mut(bias.len()) {
        add_inplace(row, bias);
    }
}

/// Raw pointer that tasks on different threads write through at disjoint indices.
#[derive(Clone, Copy)]
pub(crate) struct SharedMut<T>(*mut T);
unsafe impl<T> Send for SharedMut<T> {}
unsafe impl<T> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    pub fn new(p: *mut T) -> Self {
        SharedMut(p)
    }

    /// The pointer. A method, so that closures capture the whole (Sync) wrapper.
    #[inline]
    pub fn get(self) -> *mut T {
        self.0
    }
}

/// Quantized copies of one activation matrix, one per activation layout asked for, so that
/// q/k/v (or gate/up) projections of the same input quantize it once. Buffers are kept between
/// inputs: no allocation once they have grown to the largest batch.
#[derive(Default)]
pub(crate) struct QuantizedInput {
    slots: Vec<Slot>,
}

/// An activation layout: a ggml format, or the layout a kernel set's packed kernels read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Ggml(GgmlType),
    Packed(PackedAct),
}

struct Slot {
    layout: Layout,
    valid: bool,
    len: usize,
    words: Vec<u32>,
}

impl QuantizedInput {
    /// Forget the previous input (buffers are kept).
    pub(crate) fn invalidate(&mut self) {
        self.slots.iter_mut().for_each(|s| s.valid = false);
    }

    /// Quantizes `x` (`n_rows` rows of `cols`) for the products of `w`, unless this input is
    /// already there in the layout `w` needs. Several rows are shared among the pool's threads.
    pub(crate) fn prepare(&mut self, pool: &ThreadPool, kernels: &Kernels, w: &Matrix, x: &[f32], n_rows: usize) {
        let cols = w.cols;
        let (layout, row_bytes) = match (w.packed(), kernels.packing()) {
            (Some(_), Some(p)) => {
                let Some(act) = (p.act)(w.ty) else { return };
                (Layout::Packed(act), act.row_bytes(cols).unwrap_or(0))
            }
            _ => (Layout::Ggml(w.ty.activation_type()), w.ty.activation_type().row_bytes(cols)),
        };
        let len = row_bytes * n_rows;
        let idx = match self.slots.iter().position(|s| s.layout == layout) {
            Some(i) => i,
            None => {
                self.slots.push(Slot { layout, valid: false, len: 0, words: Vec::new() });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[idx];
        if slot.valid && slot.len == len {
            return;
        }
        if slot.words.len() * 4 < len {
            slot.words.resize(len.div_ceil(4), 0);
        }
        let (ty, packing, quantize) = (w.ty, kernels.packing(), kernels.quantize(w.ty.activation_type()));
        let quantize_row = |xr: &[f32], out: &mut [u8]| match layout {
            Layout::Packed(_) => {
                if let Some(p) = packing {
                    (p.quantize_act)(ty, xr, out)
                }
            }
            Layout::Ggml(_) => {
                if let Some(q) = quantize {
                    q(xr, out)
                }
            }
        };
        let bytes = bytes_of_mut(&mut slot.words, len);
        let n_rows = n_rows.min(x.len() / cols.max(1));
        if n_rows > 1 && pool.threads() > 1 && row_bytes > 0 {
            let out = SharedMut::new(bytes.as_mut_ptr());
            pool.parallel_for(n_rows, &|t| {
                // SAFETY: row t of `bytes` (n_rows rows of row_bytes) is written by task t alone.
                let row = unsafe { std::slice::from_raw_parts_mut(out.get().add(t * row_bytes), row_bytes) };
                quantize_row(&x[t * cols..(t + 1) * cols], row);
            });
        } else {
            let rows = x.chunks_exact(cols).zip(bytes.chunks_exact_mut(row_bytes.max(1))).take(n_rows);
            rows.for_each(|(xr, out)| quantize_row(xr, out));
        }
        slot.valid = true;
        slot.len = len;
    }

    /// The quantized input for `w`, as [`prepare`](Self::prepare) left it (empty if it did not).
    pub(crate) fn for_matrix(&self, kernels: &Kernels, w: &Matrix) -> &[u8] {
        let layout = match (w.packed(), kernels.packing().and_then(|p| (p.act)(w.ty))) {
            (Some(_), Some(act)) => Layout::Packed(act),
            _ => Layout::Ggml(w.ty.activation_type()),
        };
        match self.slots.iter().find(|s| s.layout == layout && s.valid) {
            Some(s) => bytes_of(&s.words, s.len),
            None => &[],
        }
    }
}

fn bytes_of(words: &[u32], len: usize) -> &[u8] {
    // SAFETY: u32 storage viewed as bytes; len ≤ 4 * words.len().
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, len.min(words.len() * 4)) }
}

fn bytes_of_mut(words: &mut [u32], len: usize) -> &mut [u8] {
    // SAFETY: as above; the buffer is 4-byte aligned, which the activation blocks need.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, len.min(words.len() * 4)) }
}

/// Rows of the weight handled by one task on ggml's layout.
const ROWS_PER_TASK: usize = 16;

/// Tokens per tile when several tokens go through a weight at once (prefill): their
/// activations stay in the core's L2 while a task's weight rows are swept over them.
const TOKENS_PER_TILE: usize = 32;

/// Tasks per thread on the packed layout for one token: enough that a thread finishing early
/// waits little, few enough that large matrices are read in long contiguous runs.
const TASKS_PER_THREAD: usize = 32;

/// The same for 2 to [`TOKENS_PER_TILE`] tokens (speculative trees, short prompts), whose tasks
/// are compute-bound and short: fewer, larger ones (SmolLM2's 576-row products in 64-row tasks
/// instead of 16) spend less on calls, copies and each tile's first requests. On a Zen 5 EPYC,
/// 2 threads, `pass_cost` at depth 700 alternated with 32: SmolLM2 4 to 16 tokens 3 to 11%
/// cheaper (32 tokens 4%), Qwen2.5 2%, Gemma 3 1%; 8 did a little less well, 2 no better.
/// Longer prefill chunks keep the finer split (with 4, Qwen2.5's 512-token prefill lost 1-2%).
const TASKS_PER_THREAD_BATCH: usize = 4;

/// One matrix product of a parallel job: `out[t * w.rows + r] = W[r] · x[t]` for `n_tok`
/// tokens, `act` being `x` quantized by [`QuantizedInput`] for `w`.
pub(crate) struct Product<'a> {
    pub w: &'a Matrix,
    pub act: &'a [u8],
    pub out: &'a mut [f32],
}

/// How one product is cut into tasks of whole rows.
#[derive(Clone, Copy)]
struct Split {
    rows_per_task: usize,
    tasks: usize,
}

impl Split {
    fn new(w: &Matrix, threads: usize, n_tok: usize) -> Split {
        let rows_per_task = match w.packed() {
            Some(p) => {
                let unit = p.tile_rows;
                let batch = (2..=TOKENS_PER_TILE).contains(&n_tok);
                let per_thread = if batch { TASKS_PER_THREAD_BATCH } else { TASKS_PER_THREAD };
                (w.rows / (threads * per_thread)).max(unit) / unit * unit
            }
            None => ROWS_PER_TASK,
        };
        Split { rows_per_task, tasks: w.rows.div_ceil(rows_per_task) }
    }
}

/// Runs products of the same tokens as one parallel job (one wait for all). A product whose
/// buffers are too short for its matrix is skipped. Rows are split across tasks, never the
/// reduction: every output is computed whole by one kernel call, so results do not depend on
/// the thread count.
pub(crate) fn matmul(pool: &ThreadPool, kernels: &Kernels, file: &[u8], products: &mut [Product], n_tok: usize) {
    matmul_then(pool, kernels, file, products, n_tok, None::<&(dyn Fn(usize, usize) + Sync)>)
}

/// As [`matmul`] for two products over the same rows (gate and up), each task then calling
/// `then(r0, r1)` once both have rows `r0..r1` of every token (to combine them in place).
pub(crate) fn matmul_then(
    pool: &ThreadPool,
    kernels: &Kernels,
    file: &[u8],
    products: &mut [Product],
    n_tok: usize,
    then: Option<&(dyn Fn(usize, usize) + Sync)>,
) {
    const MAX: usize = 4;
    if products.is_empty() || products.len() > MAX || n_tok == 0 {
        return;
    }
    let threads = pool.threads();
    let mut jobs: [Option<Job>; MAX] = [None; MAX];
    for (j, p) in products.iter_mut().enumerate() {
        let act_row = match p.w.packed() {
            Some(m) => kernels.packing().and_then(|k| k.act_row_bytes(m.ty, m.cols)),
            None => Some(p.w.ty.activation_type().row_bytes(p.w.cols)),
        };
        let Some(act_row) = act_row else { continue };
        if p.act.len() < act_row * n_tok || p.out.len() < p.w.rows * n_tok {
            continue;
        }
        jobs[j] =
            Some(Job { act_row, split: Split::new(p.w, threads, n_tok), out: SharedMut::new(p.out.as_mut_ptr()) });
    }
    // With a combining step every product shares the first one's row split.
    if then.is_some() {
        let (Some(first), rows) = (jobs[0], products[0].w.rows) else { return };
        if products.iter().any(|p| p.w.rows != rows) || jobs[..products.len()].iter().any(Option::is_none) {
            return;
        }
        jobs.iter_mut().flatten().for_each(|j| j.split = first.split);
    }
    let tasks: usize = match then {
        Some(_) => jobs[0].map_or(0, |j| j.split.tasks),
        None => jobs.iter().flatten().map(|j| j.split.tasks).sum(),
    };
    let products = &*products;
    pool.parallel_for(tasks, &|task| {
        if let Some(then) = then {
            let (mut r0, mut r1) = (0, 0);
            for (p, job) in products.iter().zip(&jobs) {
                if let Some(job) = job {
                    (r0, r1) = job.rows(p.w, task);
                    run_task(kernels, file, p, job, n_tok, r0, r1);
                }
            }
            then(r0, r1);
            return;
        }
        let mut t = task;
        for (p, job) in products.iter().zip(&jobs) {
            let Some(job) = job else { continue };
            if t < job.split.tasks {
                let (r0, r1) = job.rows(p.w, t);
                run_task(kernels, file, p, job, n_tok, r0, r1);
                return;
            }
            t -= job.split.tasks;
        }
    });
}

/// A product's checked sizes and row split, shared by its tasks.
#[derive(Clone, Copy)]
struct Job {
    act_row: usize,
    split: Split,
    out: SharedMut<f32>,
}

impl Job {
    fn rows(&self, w: &Matrix, task: usize) -> (usize, usize) {
        let r0 = task * self.split.rows_per_task;
        (r0, (r0 + self.split.rows_per_task).min(w.rows))
    }
}

/// Rows `r0..r1` of one product for every token.
fn run_task(kernels: &Kernels, file: &[u8], p: &Product, job: &Job, n_tok: usize, r0: usize, r1: usize) {
    let (rows, cols, o) = (p.w.rows, p.w.cols, job.out);
    let act = |t0: usize, t1: usize| &p.act[t0 * job.act_row..t1 * job.act_row];
    // SAFETY (all writes below): tasks own disjoint row ranges; out holds n_tok * rows (checked).
    let dst = |t: usize, r0: usize, n: usize| unsafe { std::slice::from_raw_parts_mut(o.get().add(t * rows + r0), n) };
    if let Some(m) = p.w.packed() {
        if n_tok == 1 {
            (m.kernel)(cols, m.tiles_for_rows(r0, r1), r1 - r0, act(0, 1), 1, OutRows::of(dst(0, r0, r1 - r0)), r1 - r0);
            return;
        }
        // Several tokens: a few tiles at a time, each over the tokens in groups that stay in
        // the core's cache, written straight into place.
        const ROWS: usize = 64;
        let step = (ROWS / m.tile_rows).max(1) * m.tile_rows;
        for g0 in (r0..r1).step_by(step) {
            let g1 = (g0 + step).min(r1);
            for t0 in (0..n_tok).step_by(TOKENS_PER_TILE) {
                let t1 = (t0 + TOKENS_PER_TILE).min(n_tok);
                // SAFETY: rows g0..g1 of tokens t0..t1 are this task's; out holds n_tok * rows.
                let out = unsafe { OutRows::from_raw(o.get().add(t0 * rows + g0), (t1 - t0 - 1) * rows + g1 - g0) };
                (m.kernel)(cols, m.tiles_for_rows(g0, g1), g1 - g0, act(t0, t1), t1 - t0, out, rows);
            }
        }
        return;
    }
    let weights = p.w.rows(file, r0, r1);
    let n_rows = r1 - r0;
    match kernels.mat_mat(p.w.ty).filter(|_| n_tok > 1) {
        Some(mat_mat) => {
            // The tile is token-major with a stride of ROWS_PER_TASK, then copied to its place.
            let mut tile = [0f32; ROWS_PER_TASK * TOKENS_PER_TILE];
            for t0 in (0..n_tok).step_by(TOKENS_PER_TILE) {
                let t1 = (t0 + TOKENS_PER_TILE).min(n_tok);
                mat_mat(cols, weights, n_rows, act(t0, t1), t1 - t0, &mut tile, ROWS_PER_TASK);
                for t in t0..t1 {
                    dst(t, r0, n_rows)
                        .copy_from_slice(&tile[(t - t0) * ROWS_PER_TASK..(t - t0) * ROWS_PER_TASK + n_rows]);
                }
            }
        }
        None => {
            if let Some(mat_vec) = kernels.mat_vec(p.w.ty) {
                for t in 0..n_tok {
                    mat_vec(cols, weights, act(t, t + 1), dst(t, r0, n_rows));
                }
            }
        }
    }
}
