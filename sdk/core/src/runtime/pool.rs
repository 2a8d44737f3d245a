//! A persistent pool for parallel-for over a task index.
//!
//! - Workers spin briefly between jobs (decode issues a job every few microseconds) and park on a
//!   condition variable when idle, so an idle engine burns no CPU.
//! - The caller's thread takes part in every job as participant 0; workers are participants 1...
//!   A worker joins a job only while it is open; the caller closes it once every task is claimed
//!   and then waits only for the workers inside. A worker the OS has not scheduled (a busy phone,
//!   a shared machine) therefore never holds a job up: its tasks are stolen and it skips the job.
//! - Where the work goes: every participant owns a slot (a range of task indices with its own
//!   cursor, on its own cache line). It runs its own range first and then steals from the others',
//!   so every task runs exactly once and a slow or preempted core never holds a job up. With
//!   [`Split::Proportional`] (the default) each participant starts with a contiguous range sized
//!   by its measured speed: a core then reads one sequential stretch of each weight matrix, which
//!   the hardware prefetchers follow (handing out tiles alternately from one counter breaks every
//!   core's stream into 6 KB pieces, and decode, which waits on memory, ran about 1.45× slower).
//!   With [`Split::Shared`] all tasks start in slot 0 (one shared counter: faster cores simply
//!   take more). Speeds are learnt from how many tasks each participant ends up running.
//! - A [`CoreSelection`] decides which participants take part and, where the OS allows, pins each
//!   to its core. Switching it is one call between jobs; threads re-pin themselves on their next
//!   wake-up. Nothing else (KV cache, buffers) depends on it.
//! - No allocation per job or per switch.

use std::cell::{Cell, UnsafeCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::affinity::{pin_current_thread, CoreSelection, SavedAffinity};

/// Spin iterations before a worker parks (a few hundred microseconds).
const SPIN_LIMIT: u32 = 1 << 16;

/// Jobs with fewer tasks than this per participant do not update the speed estimates.
const LEARN_MIN_TASKS_PER_THREAD: usize = 4;

/// Weight of one job in the running estimate of a participant's speed.
const LEARN_RATE: f64 = 0.05;

type TaskFn = dyn Fn(usize) + Sync;

/// How a job's tasks are first handed out (stealing balances the rest either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Split {
    /// All tasks in one shared counter.
    Shared,
    /// A contiguous range per participant, in proportion to its measured speed.
    #[default]
    Proportional,
}

impl Split {
    /// `TERN_POOL_SPLIT=proportional` or `shared` (for comparisons); the default otherwise.
    fn from_env() -> Split {
        match std::env::var("TERN_POOL_SPLIT").as_deref() {
            Ok("proportional") => Split::Proportional,
            Ok("shared") => Split::Shared,
            _ => Split::default(),
        }
    }
}

#[derive(Clone, Copy)]
struct Job {
    /// Erased borrow of the caller's closure; valid until every worker has left the job.
    f: *const TaskFn,
    participants: usize,
}

/// One participant's range of the current job: `next..end`, claimed one index at a time.
#[repr(align(128))]
#[derive(Default)]
struct Slot {
    next: AtomicUsize,
    end: AtomicUsize,
    /// Tasks this participant ran in the last job (its own and stolen ones).
    done: AtomicUsize,
}

/// Which participants take part and where they run; changed only between jobs.
struct Placement {
    epoch: u64,
    /// The job generation when this placement took effect.
    generation: u64,
    /// Participants taking part, the caller included.
    active: usize,
    /// The core each participant is pinned to (None: wherever the OS puts it).
    cores: Vec<Option<usize>>,
}

struct Shared {
    generation: AtomicU64,
    job: UnsafeCell<Job>,
    slots: Box<[Slot]>,
    /// Workers inside the current job, plus `CLOSED` once the caller accepts no more.
    inside: AtomicUsize,
    panicked: AtomicBool,
    shutdown: AtomicBool,
    /// Published copy of `placement.epoch`, checked without the lock.
    epoch: AtomicU64,
    active: AtomicUsize,
    placement: Mutex<Placement>,
    sleepers: AtomicUsize,
    sleep_lock: Mutex<()>,
    /// Active workers waiting for a job.
    wake: Condvar,
    /// Workers left out of the current placement, waiting for the next one.
    standby: Condvar,
}

// SAFETY: `job` and the slots' ranges are written only by the thread holding
// `ThreadPool::control` while no worker is inside a job (the last one was closed and emptied),
// and read by workers only after joining the job (an AcqRel CAS on `inside`, which the writer
// reset with a SeqCst store after the writes).
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

/// State owned by whoever holds the pool: callers take turns through this lock.
struct Control {
    split: Split,
    selection: Option<CoreSelection>,
    /// Estimated relative speed of each participant (sums to about 1 over the active ones).
    weights: Vec<f64>,
}

pub struct ThreadPool {
    /// Tells this pool's placement apart from another pool's in a caller thread's memory.
    id: usize,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    control: Mutex<Control>,
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool").field("threads", &self.threads()).finish()
    }
}

static NEXT_POOL_ID: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// (pool id, placement epoch) the calling thread was last placed for.
    static CALLER_PLACED: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
    /// The calling thread's own mask from before a pool pinned it.
    static CALLER_MASK: Cell<Option<SavedAffinity>> = const { Cell::new(None) };
}

impl ThreadPool {
    /// A pool of `threads` threads in all: the caller's thread takes part in every job, so
    /// `threads - 1` workers are spawned. Until a selection is set, all take part, unpinned.
    pub fn new(threads: usize) -> Self {
        let threads = threads.max(1);
        let noop: &TaskFn = &|_| {};
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            job: UnsafeCell::new(Job { f: noop as *const TaskFn, participants: 1 }),
            slots: (0..threads).map(|_| Slot::default()).collect(),
            inside: AtomicUsize::new(CLOSED),
            panicked: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            epoch: AtomicU64::new(1),
            active: AtomicUsize::new(threads),
            placement: Mutex::new(Placement { epoch: 1, generation: 0, active: threads, cores: vec![None; threads] }),
            sleepers: AtomicUsize::new(0),
            sleep_lock: Mutex::new(()),
            wake: Condvar::new(),
            standby: Condvar::new(),
        });
        // Participant indices must have no gaps: stop at the first worker the OS refuses.
        let workers: Vec<JoinHandle<()>> = (1..threads)
            .map_while(|i| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new().name(format!("tern-worker-{i}")).spawn(move || worker_loop(&shared, i)).ok()
            })
            .collect();
        let spawned = workers.len() + 1;
        if spawned < threads {
            lock(&shared.placement).active = spawned;
            shared.active.store(spawned, SeqCst);
        }
        let control =
            Control { split: Split::from_env(), selection: None, weights: vec![1.0 / spawned as f64; threads] };
        ThreadPool { id: NEXT_POOL_ID.fetch_add(1, Relaxed), shared, workers, control: Mutex::new(control) }
    }

    /// Threads the pool has (the caller's included).
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Threads that take part in jobs under the current selection.
    pub fn active_threads(&self) -> usize {
        self.shared.active.load(Acquire)
    }

    /// The selection in force (None: every thread, placed by the OS).
    pub fn selection(&self) -> Option<CoreSelection> {
        lock(&self.control).selection.clone()
    }

    pub fn split(&self) -> Split {
        lock(&self.control).split
    }

    pub fn set_split(&self, split: Split) {
        let mut ctl = lock(&self.control);
        ctl.split = split;
        reset_weights(&mut ctl.weights, self.active_threads());
    }

    /// Runs later jobs on `selection` (None: every thread, unpinned). Takes effect at the next
    /// job; a selection wider than the pool uses its first `threads()` cores. Cheap when nothing
    /// changes, so it can be called at every phase boundary.
    pub fn set_selection(&self, selection: Option<&CoreSelection>) {
        let selection = selection.map(CoreSelection::for_platform);
        let mut ctl = lock(&self.control);
        if ctl.selection == selection {
            return;
        }
        let spawned = self.threads();
        let active = selection.as_ref().map_or(spawned, |s| s.threads().min(spawned));
        {
            let s = &*self.shared;
            let mut p = lock(&s.placement);
            p.epoch += 1;
            p.generation = s.generation.load(SeqCst);
            p.active = active;
            let ids = selection.as_ref().and_then(|s| s.core_ids()).unwrap_or(&[]);
            for (j, core) in p.cores.iter_mut().enumerate() {
                *core = ids.get(j).copied().filter(|_| j < active);
            }
            s.active.store(active, SeqCst);
            s.epoch.store(p.epoch, SeqCst);
        }
        {
            let _g = lock(&self.shared.sleep_lock);
            self.shared.wake.notify_all();
            self.shared.standby.notify_all();
        }
        reset_weights(&mut ctl.weights, active);
        ctl.selection = selection;
    }

    /// Gives the calling thread back the affinity it had before this pool pinned it (call when
    /// the thread is done generating; the next job pins it again).
    pub fn release_caller(&self) {
        if CALLER_PLACED.get().0 == self.id {
            if let Some(mask) = CALLER_MASK.take() {
                mask.restore();
            }
            CALLER_PLACED.set((0, 0));
        }
    }

    /// Runs `f(i)` for every `i` in `0..n_tasks` across the pool and returns when all are done.
    pub fn parallel_for(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if n_tasks == 0 {
            return;
        }
        self.place_caller();
        if n_tasks == 1 || self.shared.active.load(Relaxed) <= 1 {
            (0..n_tasks).for_each(f);
            return;
        }
        let mut ctl = lock(&self.control);
        let s = &*self.shared;
        let k = s.active.load(Relaxed).min(self.threads());
        if k <= 1 {
            drop(ctl);
            (0..n_tasks).for_each(f);
            return;
        }
        // SAFETY: the lifetime is erased only for the duration of this call: we wait below
        // until every worker has finished with the job before returning.
        let f_raw: *const (dyn Fn(usize) + Sync + '_) = f;
        let f_static: *const TaskFn = unsafe { std::mem::transmute(f_raw) };
        unsafe { *s.job.get() = Job { f: f_static, participants: k } };
        assign_ranges(&s.slots[..k], n_tasks, ctl.split, &ctl.weights[..k]);
        s.panicked.store(false, Relaxed);
        s.inside.store(0, SeqCst);
        s.generation.fetch_add(1, SeqCst);
        if s.sleepers.load(SeqCst) > 0 {
            let _g = lock(&s.sleep_lock);
            s.wake.notify_all();
        }
        let caller_panic = catch_unwind(AssertUnwindSafe(|| run_tasks(&s.slots[..k], 0, f))).err();
        // Every task is claimed: late workers must not join any more; wait for those inside.
        s.inside.fetch_or(CLOSED, AcqRel);
        let mut spins = 0u32;
        while s.inside.load(Acquire) != CLOSED {
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        if ctl.split == Split::Proportional && n_tasks >= LEARN_MIN_TASKS_PER_THREAD * k {
            for (w, slot) in ctl.weights[..k].iter_mut().zip(&s.slots[..k]) {
                let share = slot.done.load(Relaxed) as f64 / n_tasks as f64;
                *w += LEARN_RATE * (share - *w);
            }
        }
        drop(ctl);
        if let Some(p) = caller_panic {
            std::panic::resume_unwind(p);
        }
        if s.panicked.load(Acquire) {
            panic!("a compute task panicked on a worker thread");
        }
    }

    /// Pins the calling thread as participant 0 of the current placement (or gives it its own
    /// mask back), once per placement and thread.
    fn place_caller(&self) {
        let epoch = self.shared.epoch.load(Acquire);
        if CALLER_PLACED.get() == (self.id, epoch) {
            return;
        }
        let p = lock(&self.shared.placement);
        match p.cores.first().copied().flatten() {
            Some(core) => {
                // The thread's own mask, from before any pool pinned it.
                if CALLER_MASK.get().is_none() {
                    CALLER_MASK.set(SavedAffinity::capture());
                }
                pin_current_thread(core);
            }
            None => {
                if let Some(mask) = CALLER_MASK.take() {
                    mask.restore();
                }
            }
        }
        CALLER_PLACED.set((self.id, p.epoch));
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn reset_weights(weights: &mut [f64], active: usize) {
    let w = 1.0 / active.max(1) as f64;
    weights.iter_mut().for_each(|x| *x = w);
}

/// Splits `0..n_tasks` into the participants' starting ranges.
fn assign_ranges(slots: &[Slot], n_tasks: usize, split: Split, weights: &[f64]) {
    // A participant that never joins the job keeps a count of 0.
    slots.iter().for_each(|s| s.done.store(0, Relaxed));
    match split {
        Split::Shared => {
            for (j, slot) in slots.iter().enumerate() {
                slot.next.store(0, Relaxed);
                slot.end.store(if j == 0 { n_tasks } else { 0 }, Relaxed);
            }
        }
        Split::Proportional => {
            let total: f64 = weights.iter().sum::<f64>().max(f64::MIN_POSITIVE);
            let mut acc = 0.0;
            let mut start = 0;
            for (j, (slot, w)) in slots.iter().zip(weights).enumerate() {
                acc += w.max(0.0);
                let end =
                    if j + 1 == slots.len() { n_tasks } else { ((acc / total) * n_tasks as f64).round() as usize };
                let end = end.clamp(start, n_tasks);
                slot.next.store(start, Relaxed);
                slot.end.store(end, Relaxed);
                start = end;
            }
        }
    }
}

/// Runs participant `me`'s own range, then steals from the others' in turn.
fn run_tasks(slots: &[Slot], me: usize, f: &(dyn Fn(usize) + Sync + '_)) {
    let k = slots.len();
    let mut done = 0;
    for off in 0..k {
        let slot = &slots[(me + off) % k];
        let end = slot.end.load(Relaxed);
        while slot.next.load(Relaxed) < end {
            let i = slot.next.fetch_add(1, Relaxed);
            if i >= end {
                break;
            }
            f(i);
            done += 1;
        }
    }
    slots[me].done.store(done, Relaxed);
}

/// Set in `Shared::inside` when a job takes no more workers.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// Enters the open job; false if it is closed (its tasks are all claimed).
fn join(inside: &AtomicUsize) -> bool {
    let mut cur = inside.load(Acquire);
    loop {
        if cur & CLOSED != 0 {
            return false;
        }
        match inside.compare_exchange_weak(cur, cur + 1, AcqRel, Acquire) {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
}

fn worker_loop(s: &Shared, index: usize) {
    let own_mask = SavedAffinity::capture();
    let mut pinned = false;
    let mut epoch = 0u64;
    let mut seen = 0u64;
    let mut active = false;
    loop {
        if s.shutdown.load(Acquire) {
            return;
        }
        if s.epoch.load(Acquire) != epoch {
            let p = lock(&s.placement);
            epoch = p.epoch;
            seen = p.generation;
            active = index < p.active;
            match p.cores.get(index).copied().flatten() {
                Some(core) => pinned = pin_current_thread(core) || pinned,
                None if pinned => {
                    own_mask.as_ref().map(SavedAffinity::restore);
                    pinned = false;
                }
                None => {}
            }
        }
        if !active {
            let mut g = lock(&s.sleep_lock);
            while s.epoch.load(SeqCst) == epoch && !s.shutdown.load(SeqCst) {
                g = s.standby.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            continue;
        }
        // Wait for a job, a new placement, or shutdown.
        let mut spins = 0u32;
        let g = loop {
            let g = s.generation.load(Acquire);
            if g != seen || s.epoch.load(Acquire) != epoch || s.shutdown.load(Acquire) {
                break g;
            }
            if spins < SPIN_LIMIT {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            let guard = lock(&s.sleep_lock);
            s.sleepers.fetch_add(1, SeqCst);
            if s.generation.load(SeqCst) == seen && s.epoch.load(SeqCst) == epoch && !s.shutdown.load(SeqCst) {
                drop(s.wake.wait(guard).unwrap_or_else(|p| p.into_inner()));
            }
            s.sleepers.fetch_sub(1, SeqCst);
            spins = 0;
        };
        // A job published after a placement change we have not read yet: read it first.
        if g == seen || s.epoch.load(Acquire) != epoch {
            continue;
        }
        seen = g;
        if !join(&s.inside) {
            continue;
        }
        // SAFETY: see `Shared`; the caller keeps the job alive until no worker is inside.
        let job = unsafe { *s.job.get() };
        if index < job.participants {
            let f = unsafe { &*job.f };
            if catch_unwind(AssertUnwindSafe(|| run_tasks(&s.slots[..job.participants], index, f))).is_err() {
                s.panicked.store(true, Release);
            }
        }
        s.inside.fetch_sub(1, Release);
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.release_caller();
        self.shared.shutdown.store(true, SeqCst);
        {
            let _g = lock(&self.shared.sleep_lock);
            self.shared.wake.notify_all();
            self.shared.standby.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn check_every_task_runs_once(pool: &ThreadPool) {
        for n in [0usize, 1, 2, 7, 1000] {
            let hits: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
            pool.parallel_for(n, &|i| {
                hits[i].fetch_add(1, Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Relaxed) == 1), "n = {n}");
        }
    }

    #[test]
    fn every_task_runs_once() {
        let pool = ThreadPool::new(3);
        check_every_task_runs_once(&pool);
        pool.set_split(Split::Proportional);
        for _ in 0..50 {
            check_every_task_runs_once(&pool);
        }
    }

    #[test]
    fn selections_change_the_threads_that_work() {
        let pool = ThreadPool::new(4);
        for split in [Split::Shared, Split::Proportional] {
            pool.set_split(split);
            for sel in [
                Some(CoreSelection::Threads(1)),
                Some(CoreSelection::Threads(2)),
                None,
                Some(CoreSelection::Threads(9)),
            ] {
                pool.set_selection(sel.as_ref());
                let expect = sel.as_ref().map_or(4, |s| s.threads().min(4));
                assert_eq!(pool.active_threads(), expect);
                let names = Mutex::new(std::collections::HashSet::new());
                for _ in 0..20 {
                    check_every_task_runs_once(&pool);
                    pool.parallel_for(64, &|_| {
                        std::thread::sleep(std::time::Duration::from_micros(50));
                        lock(&names).insert(std::thread::current().id());
                    });
                }
                assert!(lock(&names).len() <= expect, "{split:?} {sel:?}: more threads worked than selected");
            }
        }
    }

    #[test]
    fn proportional_ranges_follow_the_weights() {
        let slots: Vec<Slot> = (0..3).map(|_| Slot::default()).collect();
        assign_ranges(&slots, 100, Split::Proportional, &[0.5, 0.25, 0.25]);
        let ranges: Vec<(usize, usize)> = slots.iter().map(|s| (s.next.load(Relaxed), s.end.load(Relaxed))).collect();
        assert_eq!(ranges, vec![(0, 50), (50, 75), (75, 100)]);
        assign_ranges(&slots, 7, Split::Shared, &[0.5, 0.25, 0.25]);
        assert_eq!((slots[0].end.load(Relaxed), slots[1].end.load(Relaxed)), (7, 0));
    }

    #[test]
    fn proportional_split_learns_a_slow_participant() {
        let pool = ThreadPool::new(2);
        pool.set_split(Split::Proportional);
        let caller = std::thread::current().id();
        for _ in 0..60 {
            pool.parallel_for(32, &|_| {
                // The caller is far slower than the worker (and sleeping leaves the worker a core
                // even on a busy machine).
                if std::thread::current().id() == caller {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            });
        }
        let w = lock(&pool.control).weights.clone();
        assert!(w[1] > 2.0 * w[0], "the faster worker should get the larger share: {w:?}");
    }

    #[test]
    fn survives_parking_and_many_jobs() {
        let pool = ThreadPool::new(2);
        let sum = AtomicU64::new(0);
        for round in 0..200u64 {
            if round % 50 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(20)); // let workers park
                pool.set_selection(if round % 100 == 0 { Some(&CoreSelection::Threads(1)) } else { None });
            }
            pool.parallel_for(4, &|i| {
                sum.fetch_add(i as u64, Relaxed);
            });
        }
        assert_eq!(sum.load(Relaxed), 200 * 6);
    }

    #[test]
    fn concurrent_callers_take_turns() {
        let pool = Arc::new(ThreadPool::new(2));
        let total = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..3)
            .map(|t| {
                let (pool, total) = (Arc::clone(&pool), Arc::clone(&total));
                std::thread::spawn(move || {
                    for r in 0..100 {
                        if t == 0 && r % 10 == 0 {
                            pool.set_split(if r % 20 == 0 { Split::Proportional } else { Split::Shared });
                        }
                        pool.parallel_for(8, &|_| {
                            total.fetch_add(1, Relaxed);
                        });
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(total.load(Relaxed), 3 * 100 * 8);
    }
}
