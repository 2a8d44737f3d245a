//! Attention of a batch's queries over the KV cache, in fixed chunks of positions.
//!
//! Each query's visible positions (its causal, windowed or tree-shaped view, in position order)
//! are cut into chunks of [`CHUNK`] counted from the first visible one. A task handles one chunk
//! for one KV head and all the query heads sharing it (each key and value row is read once for
//! the group): scores, their maximum `m`, `l = Σ exp(s - m)` and the weighted value sum. The
//! chunks of a query are then combined in order, rescaled to the common maximum, by whichever
//! task finished the query's last chunk (so combining runs on every thread, inside the job).
//! Chunk bounds depend only on the query's own view, never on the batch, the thread count or
//! the core set, so a token gets the same bits alone, in a prefill chunk or as a tree node, and
//! long contexts split across threads.
//!
//! The chunks that lie wholly in the cache are the same for every query of a batch (when all
//! see the cache from its start): one task then serves every query's heads over such a chunk,
//! reading its key and value rows once for the batch instead of once per query. The kernels
//! compute each head on its own, so the bits do not change; a speculative tree or a prefill
//! chunk at long context no longer costs a pass over the cache per token.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use half::slice::HalfFloatSliceExt;

use crate::quant::Kernels;
use crate::runtime::ThreadPool;

use super::kv::KvCache;
use super::ops::SharedMut;

/// Positions per chunk.
pub(super) const CHUNK: usize = 256;

/// Queries served together over a shared chunk (bounds a task's buffers and keeps long prefill
/// chunks split into many tasks).
const SHARED_QUERIES: usize = 16;

/// Head geometry of one attention layer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Heads {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub scale: f32,
}

/// Per-pass buffers, grown to the largest batch and reused.
#[derive(Default)]
pub(super) struct Scratch {
    /// For each query, the index of its first chunk.
    first_chunk: Vec<usize>,
    /// For each chunk, its query.
    chunk_query: Vec<usize>,
    /// The chunks that one query's task computes alone (those not shared by the batch).
    own_chunks: Vec<usize>,
    /// Per chunk and query head: `m`, `l`, then the head's weighted value sum.
    partial: Vec<f32>,
    /// Per query and KV head: its own chunks still to compute, plus one while its shared chunks
    /// are (the task that brings it to zero combines them).
    remaining: Vec<AtomicUsize>,
    /// Per block of queries and KV head: shared chunks still to compute (the task that computes
    /// the last one counts them done for each query of the block: one atomic per task instead of
    /// one per query, each a fence that waits for the task's stores).
    shared_remaining: Vec<AtomicUsize>,
    /// The queries rounded to f16.
    q16: Vec<half::f16>,
}

/// A task's buffers.
struct TaskBuffers {
    slots: Vec<u32>,
    scores: Vec<f32>,
    /// Shared chunks: every query's heads of the KV head, and their partial results.
    queries: Vec<f32>,
    partial: Vec<f32>,
}

thread_local! {
    static TASK: RefCell<TaskBuffers> = const {
        RefCell::new(TaskBuffers { slots: Vec::new(), scores: Vec::new(), queries: Vec::new(), partial: Vec::new() })
    };
}

/// Causal (optionally sliding-window) attention of the batch's query rows `q` over the cache of
/// layer `il`: query t sees the cached positions and the batch keys `layout` lists for it, in
/// position order. Writes `out` (rows of `n_head * head_dim`). The queries are first rounded to
/// f16, as ggml rounds them for its f16 key products (the reference outputs were made so).
#[allow(clippy::too_many_arguments)]
pub(super) fn attend(
    pool: &ThreadPool,
    kernels: &Kernels,
    kv: &KvCache,
    il: usize,
    q: &mut [f32],
    layout: &BatchLayout,
    window: Option<usize>,
    h: Heads,
    out: &mut [f32],
    s: &mut Scratch,
) {
    let n = layout.positions.len();
    let (hd, nh) = (h.head_dim, h.n_head);
    s.q16.resize(q.len(), half::f16::ZERO);
    s.q16.convert_from_f32_slice(q);
    s.q16.convert_to_f32_slice(q);
    let q = &*q;
    let group = nh / h.n_head_kv;
    let slots = layout.pos0 + n;
    let lo_of = |t: usize| window.map_or(0, |w| (layout.positions[t] + 1).saturating_sub(w));

    // Every query sees the cache from slot 0 on: its first `shared` chunks are cache slots
    // c * CHUNK.. for all of them.
    let shared = if n > 1 && (0..n).all(|t| lo_of(t) == 0) { layout.pos0 / CHUNK } else { 0 };
    s.first_chunk.clear();
    s.chunk_query.clear();
    s.own_chunks.clear();
    for t in 0..n {
        let first = s.chunk_query.len();
        s.first_chunk.push(first);
        let visible = layout.visible_slots(t, lo_of(t)).len();
        let count = visible.div_ceil(CHUNK).max(1);
        s.chunk_query.extend(std::iter::repeat_n(t, count));
        s.own_chunks.extend(first + shared.min(count)..first + count);
    }
    let chunks = s.chunk_query.len();
    let per_head = hd + 2;
    s.partial.resize(chunks * nh * per_head, 0.0);
    let n_kv = h.n_head_kv;
    if s.remaining.len() < n * n_kv {
        s.remaining.resize_with(n * n_kv, AtomicUsize::default);
    }
    for t in 0..n {
        // Every query has at least `shared` chunks (they all see the shared cache slots).
        let count = chunks_of(&s.first_chunk, t, chunks).len() - shared + usize::from(shared > 0);
        s.remaining[t * n_kv..(t + 1) * n_kv].iter().for_each(|r| r.store(count, Ordering::Relaxed));
    }
    let query_blocks = n.div_ceil(SHARED_QUERIES);
    if s.shared_remaining.len() < query_blocks * n_kv {
        s.shared_remaining.resize_with(query_blocks * n_kv, AtomicUsize::default);
    }
    s.shared_remaining[..query_blocks * n_kv].iter().for_each(|r| r.store(shared, Ordering::Relaxed));

    let attn_chunk = kernels.attn_chunk();
    let partial = SharedMut::new(s.partial.as_mut_ptr());
    // Chunk ci's results for KV head g's query heads.
    let heads_out = |ci: usize, g: usize| {
        // SAFETY: each (chunk, KV head) pair is computed by exactly one task (a chunk below
        // `shared` by its shared task, any other by its query's own), and `partial` holds
        // chunks * nh * per_head values.
        unsafe { std::slice::from_raw_parts_mut(partial.get().add((ci * nh + g * group) * per_head), group * per_head) }
    };
    let (first_chunk, chunk_query, own_chunks) = (&s.first_chunk, &s.chunk_query, &s.own_chunks);
    let output = SharedMut::new(out.as_mut_ptr());
    // Query t's chunks for KV head g are done: combine them into its heads' outputs, in chunk
    // order, rescaled to their common maximum. Run by the task that finished the last of them,
    // so that combining is spread over the threads instead of following the job.
    let chunk_done = |t: usize, g: usize| {
        if s.remaining[t * n_kv + g].fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        for head in g * group..(g + 1) * group {
            // SAFETY: every chunk of (t, g) is written (the counter's acquire orders those
            // writes before these reads) and no task writes it again in this pass; out holds
            // n * nh * hd values and head `head` of query t is combined here only.
            let part = |c: usize| unsafe {
                std::slice::from_raw_parts(partial.get().add((c * nh + head) * per_head) as *const f32, per_head)
            };
            let o = unsafe { std::slice::from_raw_parts_mut(output.get().add((t * nh + head) * hd), hd) };
            combine_chunks(chunks_of(first_chunk, t, chunks).map(part), o);
        }
    };
    let shared_tasks = shared * h.n_head_kv * query_blocks;
    pool.parallel_for(shared_tasks + own_chunks.len() * h.n_head_kv, &|task| {
        TASK.with(|buf| {
            let b = &mut *buf.borrow_mut();
            b.slots.clear();
            if task < shared_tasks {
                // Chunk c of queries t0..t1, for KV head g.
                let (c, rest) = (task / (h.n_head_kv * query_blocks), task % (h.n_head_kv * query_blocks));
                let (g, qb) = (rest / query_blocks, rest % query_blocks);
                let (t0, t1) = (qb * SHARED_QUERIES, ((qb + 1) * SHARED_QUERIES).min(n));
                b.slots.extend((c * CHUNK) as u32..((c + 1) * CHUNK) as u32);
                b.queries.clear();
                for t in t0..t1 {
                    b.queries.extend_from_slice(&q[t * nh * hd + g * group * hd..][..group * hd]);
                }
                let heads = (t1 - t0) * group;
                b.scores.resize(heads * CHUNK, 0.0);
                b.partial.resize(heads * per_head, 0.0);
                let rows = kv.head_rows(il, g, slots);
                attn_chunk(&b.queries, heads, rows, &b.slots, h.scale, &mut b.scores, &mut b.partial);
                for (t, part) in (t0..t1).zip(b.partial.chunks_exact(group * per_head)) {
                    heads_out(first_chunk[t] + c, g).copy_from_slice(part);
                }
                // The last shared chunk of the block: its acquire sees the other shared tasks'
                // writes, and `chunk_done`'s release passes them on.
                if s.shared_remaining[qb * n_kv + g].fetch_sub(1, Ordering::AcqRel) == 1 {
                    (t0..t1).for_each(|t| chunk_done(t, g));
                }
                return;
            }
            let task = task - shared_tasks;
            let (ci, g) = (own_chunks[task / h.n_head_kv], task % h.n_head_kv);
            let t = chunk_query[ci];
            let c = ci - first_chunk[t];
            let mut visible = layout.visible_slots(t, lo_of(t));
            if c > 0 {
                visible.nth(c * CHUNK - 1);
            }
            visible.take_into(CHUNK, &mut b.slots);
            b.scores.resize(group * CHUNK, 0.0);
            let qg = &q[t * nh * hd + g * group * hd..][..group * hd];
            attn_chunk(qg, group, kv.head_rows(il, g, slots), &b.slots, h.scale, &mut b.scores, heads_out(ci, g));
            chunk_done(t, g);
        });
    });
}

/// The chunk indices of query `t` (of `chunks` in all).
fn chunks_of(first_chunk: &[usize], t: usize, chunks: usize) -> std::ops::Range<usize> {
    first_chunk[t]..first_chunk.get(t + 1).copied().unwrap_or(chunks)
}

/// One query head's output from its chunks' partial results (`m`, `l`, then the weighted value
/// sum), in chunk order, rescaled to their common maximum.
fn combine_chunks<'a>(parts: impl Iterator<Item = &'a [f32]> + Clone, o: &mut [f32]) {
    let m = parts.clone().map(|p| p[0]).fold(f32::NEG_INFINITY, f32::max);
    o.fill(0.0);
    let mut l = 0.0;
    for p in parts {
        let w = (p[0] - m).exp();
        l += w * p[1];
        for (o, &a) in o.iter_mut().zip(&p[2..]) {
            *o += w * a;
        }
    }
    let inv = 1.0 / l;
    o.iter_mut().for_each(|v| *v *= inv);
}

/// Where the tokens of one pass sit: their positions and, for a token tree, which batch slots
/// each may see. Rebuilt per pass into buffers that only grow.
#[derive(Default)]
pub(super) struct BatchLayout {
    /// KV slot of the first batch token (= the cached length).
    pos0: usize,
    /// Position of each batch token (its rotary position and its place in the sequence).
    pub(super) positions: Vec<usize>,
    /// Tree passes only: for token t, `ancestors[starts[t]..starts[t + 1]]` are the batch
    /// indices of its ancestors and itself, ascending.
    ancestors: Vec<usize>,
    starts: Vec<usize>,
    is_tree: bool,
}

impl BatchLayout {
    pub(super) fn build(&mut self, pos0: usize, n: usize, tree: Option<&[Option<usize>]>) {
        self.pos0 = pos0;
        self.positions.clear();
        self.ancestors.clear();
        self.starts.clear();
        self.is_tree = tree.is_some();
        let Some(parents) = tree else {
            self.positions.extend(pos0..pos0 + n);
            return;
        };
        self.starts.push(0);
        for (i, parent) in parents.iter().enumerate() {
            // A parent's list is complete before its children's (parents come first).
            let begin = self.ancestors.len();
            if let Some(p) = *parent {
                let (s, e) = (self.starts[p], self.starts[p + 1]);
                self.ancestors.extend_from_within(s..e);
            }
            self.ancestors.push(i);
            self.starts.push(self.ancestors.len());
            self.positions.push(pos0 + (self.ancestors.len() - begin) - 1);
        }
    }

    /// Whether the batch is a token tree.
    pub(super) fn is_tree(&self) -> bool {
        self.is_tree
    }

    /// The batch index of the token `k` steps back along token `t`'s path (`k = 0`: `t`
    /// itself), or `Err(j)` when that token is the `j`-th before the batch (1: the last
    /// cached one). What a layer with state over the sequence reads (a convolution window).
    pub(super) fn predecessor(&self, t: usize, k: usize) -> Result<usize, usize> {
        let depth = self.positions[t] - self.pos0;
        if k > depth {
            return Err(k - depth);
        }
        if !self.is_tree {
            return Ok(t - k);
        }
        Ok(self.ancestors[self.starts[t] + depth - k])
    }

    /// KV slots query `t` attends to, ascending: cached slots from `lo` on (slot = position
    /// there), then the batch slots of its ancestors and itself at positions ≥ `lo`.
    fn visible_slots(&self, t: usize, lo: usize) -> VisibleSlots<'_> {
        let cached = lo.min(self.pos0)..self.pos0;
        if !self.is_tree {
            return VisibleSlots { cached: lo.min(self.pos0 + t + 1)..self.pos0 + t + 1, batch: &[], layout: self, lo };
        }
        VisibleSlots { cached, batch: &self.ancestors[self.starts[t]..self.starts[t + 1]], layout: self, lo }
    }
}

/// Iterator over the KV slots one query sees (see [`BatchLayout::visible_slots`]).
#[derive(Clone)]
struct VisibleSlots<'a> {
    cached: std::ops::Range<usize>,
    batch: &'a [usize],
    layout: &'a BatchLayout,
    lo: usize,
}

impl VisibleSlots<'_> {
    fn len(&self) -> usize {
        self.cached.len() + self.batch.iter().filter(|&&j| self.layout.positions[j] >= self.lo).count()
    }

    /// Appends the next `count` slots (fewer at the end) to `out`: the cached run as one range
    /// (a loop that vectorises), then the batch slots.
    fn take_into(&mut self, count: usize, out: &mut Vec<u32>) {
        let cached = self.cached.start..self.cached.end.min(self.cached.start + count);
        self.cached.start = cached.end;
        out.extend(cached.clone().map(|j| j as u32));
        out.extend(self.take(count - cached.len()).map(|j| j as u32));
    }
}

impl Iterator for VisibleSlots<'_> {
    type Item = usize;

    /// Skips within the cached range in O(1) (chunks start deep into long contexts).
    fn nth(&mut self, n: usize) -> Option<usize> {
        let skip = n.min(self.cached.len());
        self.cached.start += skip;
        for _ in skip..n {
            self.next()?;
        }
        self.next()
    }

    fn next(&mut self) -> Option<usize> {
        if let Some(j) = self.cached.next() {
            return Some(j);
        }
        while let Some((&j, rest)) = self.batch.split_first() {
            self.batch = rest;
            if self.layout.positions[j] >= self.lo {
                return Some(self.layout.pos0 + j);
            }
        }
        None
    }
}
