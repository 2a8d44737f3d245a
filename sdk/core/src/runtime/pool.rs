//! A persistent pool for parallel-for over a task index. Workers spin briefly between jobs (decode
//! issues a job every few microseconds) and park on a condition variable when idle, so an idle
//! engine burns no CPU. Tasks are claimed from a shared counter, so faster cores simply take more
//! of them. No allocation per job.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Spin iterations before a worker parks (a few hundred microseconds).
const SPIN_LIMIT: u32 = 1 << 16;

type TaskFn = dyn Fn(usize) + Sync;

#[derive(Clone, Copy)]
struct Job {
    /// Erased borrow of the caller's closure; valid until every worker has left the job.
    f: *const TaskFn,
    n_tasks: usize,
}

struct Shared {
    generation: AtomicU64,
    job: UnsafeCell<Job>,
    next_task: AtomicUsize,
    active_workers: AtomicUsize,
    panicked: AtomicBool,
    shutdown: AtomicBool,
    sleepers: AtomicUsize,
    sleep_lock: Mutex<()>,
    wake: Condvar,
}

// SAFETY: `job` is written only by the thread holding `ThreadPool::submit` while no worker is
// inside a job (active_workers == 0), and read by workers only after they observe a new
// generation (Acquire), which the writer publishes with a SeqCst increment after the write.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serialises callers: two sessions generating at once take turns per job.
    submit: Mutex<()>,
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool").field("threads", &self.threads()).finish()
    }
}

impl ThreadPool {
    /// A pool of `threads` threads in all: the caller's thread takes part in every job, so
    /// `threads - 1` workers are spawned.
    pub fn new(threads: usize) -> Self {
        let threads = threads.max(1);
        let noop: &TaskFn = &|_| {};
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            job: UnsafeCell::new(Job { f: noop as *const TaskFn, n_tasks: 0 }),
            next_task: AtomicUsize::new(0),
            active_workers: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            sleep_lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let workers = (1..threads)
            .filter_map(|i| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("tern-worker-{i}"))
                    .spawn(move || worker_loop(&shared))
                    .ok()
            })
            .collect();
        ThreadPool { shared, workers, submit: Mutex::new(()) }
    }

    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `f(i)` for every `i` in `0..n_tasks` across the pool and returns when all are done.
    pub fn parallel_for(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if n_tasks == 0 {
            return;
        }
        if self.workers.is_empty() || n_tasks == 1 {
            (0..n_tasks).for_each(f);
            return;
        }
        let _turn = self.submit.lock().unwrap_or_else(|p| p.into_inner());
        let s = &*self.shared;
        // SAFETY: the lifetime is erased only for the duration of this call: we wait below
        // until every worker has finished with the job before returning.
        let f_raw: *const (dyn Fn(usize) + Sync + '_) = f;
        let f_static: *const TaskFn = unsafe { std::mem::transmute(f_raw) };
        unsafe { *s.job.get() = Job { f: f_static, n_tasks } };
        s.next_task.store(0, Relaxed);
        s.panicked.store(false, Relaxed);
        s.active_workers.store(self.workers.len(), SeqCst);
        s.generation.fetch_add(1, SeqCst);
        if s.sleepers.load(SeqCst) > 0 {
            let _g = s.sleep_lock.lock().unwrap_or_else(|p| p.into_inner());
            s.wake.notify_all();
        }
        let caller_panic = catch_unwind(AssertUnwindSafe(|| run_tasks(s, f, n_tasks))).err();
        let mut spins = 0u32;
        while s.active_workers.load(Acquire) != 0 {
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        if let Some(p) = caller_panic {
            std::panic::resume_unwind(p);
        }
        if s.panicked.load(Acquire) {
            panic!("a compute task panicked on a worker thread");
        }
    }
}

fn run_tasks(s: &Shared, f: &(dyn Fn(usize) + Sync + '_), n_tasks: usize) {
    loop {
        let i = s.next_task.fetch_add(1, Relaxed);
        if i >= n_tasks {
            break;
        }
        f(i);
    }
}

fn worker_loop(s: &Shared) {
    let mut seen = 0u64;
    loop {
        let mut spins = 0u32;
        loop {
            let g = s.generation.load(Acquire);
            if g != seen {
                seen = g;
                break;
            }
            if s.shutdown.load(Acquire) {
                return;
            }
            if spins < SPIN_LIMIT {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            let guard = s.sleep_lock.lock().unwrap_or_else(|p| p.into_inner());
            s.sleepers.fetch_add(1, SeqCst);
            if s.generation.load(SeqCst) == seen && !s.shutdown.load(SeqCst) {
                drop(s.wake.wait(guard).unwrap_or_else(|p| p.into_inner()));
            }
            s.sleepers.fetch_sub(1, SeqCst);
            spins = 0;
        }
        // SAFETY: see `Shared`; the caller keeps the closure alive until active_workers is 0.
        let job = unsafe { *s.job.get() };
        let f = unsafe { &*job.f };
        if catch_unwind(AssertUnwindSafe(|| run_tasks(s, f, job.n_tasks))).is_err() {
            s.panicked.store(true, Release);
        }
        s.active_workers.fetch_sub(1, Release);
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, SeqCst);
        {
            let _g = self.shared.sleep_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.wake.notify_all();
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

    #[test]
    fn every_task_runs_once() {
        let pool = ThreadPool::new(3);
        for n in [0usize, 1, 2, 7, 1000] {
            let hits: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
            pool.parallel_for(n, &|i| {
                hits[i].fetch_add(1, Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Relaxed) == 1));
        }
    }

    #[test]
    fn survives_parking_and_many_jobs() {
        let pool = ThreadPool::new(2);
        let sum = AtomicU64::new(0);
        for round in 0..200u64 {
            if round % 50 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(20)); // let workers park
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
            .map(|_| {
                let (pool, total) = (Arc::clone(&pool), Arc::clone(&total));
                std::thread::spawn(move || {
                    for _ in 0..100 {
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
