//! Core selections and thread affinity: where the threads of one phase (prefill or decode) run.
//!
//! Linux and Android pin one thread to each selected core; iOS cannot pin, so a selection there
//! is a thread count and the OS places the threads.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The cores (or the number of threads) a phase runs on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CoreSelection {
    /// One thread pinned to each of these CPU ids (ascending, no duplicates).
    Cores(Vec<usize>),
    /// This many threads, placed by the OS.
    Threads(usize),
}

impl CoreSelection {
    /// A pinned selection of these CPU ids (sorted and deduplicated).
    pub fn cores(ids: impl IntoIterator<Item = usize>) -> CoreSelection {
        let mut v: Vec<usize> = ids.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        CoreSelection::Cores(v)
    }

    /// Threads this selection runs (at least 1).
    pub fn threads(&self) -> usize {
        match self {
            CoreSelection::Cores(c) => c.len().max(1),
            CoreSelection::Threads(n) => (*n).max(1),
        }
    }

    /// The pinned CPU ids, if this selection pins.
    pub fn core_ids(&self) -> Option<&[usize]> {
        match self {
            CoreSelection::Cores(c) if !c.is_empty() => Some(c),
            _ => None,
        }
    }

    /// This selection as the platform can apply it: without pinning support, a thread count.
    pub fn for_platform(&self) -> CoreSelection {
        match self {
            CoreSelection::Cores(c) if !pinning_supported() => CoreSelection::Threads(c.len().max(1)),
            other => other.clone(),
        }
    }
}

impl fmt::Display for CoreSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreSelection::Cores(c) => {
                let ids: Vec<String> = c.iter().map(|i| i.to_string()).collect();
                write!(f, "cpu {}", ids.join(","))
            }
            CoreSelection::Threads(n) => write!(f, "{n} threads"),
        }
    }
}

/// Whether threads can be pinned to cores on this platform.
pub fn pinning_supported() -> bool {
    cfg!(any(target_os = "linux", target_os = "android"))
}

/// Pins the calling thread to one core. False where the OS refuses (or cannot pin).
pub fn pin_current_thread(core: usize) -> bool {
    pinning_supported() && core_affinity::set_for_current(core_affinity::CoreId { id: core })
}

/// The CPU ids the calling thread may run on (Linux and Android), from the kernel's own view.
pub fn current_thread_cores() -> Option<Vec<usize>> {
    SavedAffinity::capture().map(|m| m.cores())
}

/// A thread's affinity mask, captured to be restored after the thread was pinned for a while.
#[derive(Clone, Copy)]
pub struct SavedAffinity {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    mask: libc::cpu_set_t,
}

impl SavedAffinity {
    /// The calling thread's mask, or None where the OS has no such call.
    pub fn capture() -> Option<SavedAffinity> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            // SAFETY: cpu_set_t is plain bits; the kernel writes at most its size.
            let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut mask) };
            (rc == 0).then_some(SavedAffinity { mask })
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        None
    }

    /// Gives the calling thread this mask again.
    pub fn restore(&self) -> bool {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            // SAFETY: the mask came from sched_getaffinity.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.mask) == 0 }
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        false
    }

    pub fn cores(&self) -> Vec<usize> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
            // SAFETY: CPU_ISSET reads within the set for ids below its bit size.
            (0..max).filter(|&i| unsafe { libc::CPU_ISSET(i, &self.mask) }).collect()
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        Vec::new()
    }
}

/// CPU time this process has used so far (all threads), where the OS reports it.
pub fn process_cpu_time() -> Option<std::time::Duration> {
    #[cfg(unix)]
    {
        // SAFETY: clock_gettime writes one timespec.
        let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        (rc == 0).then(|| std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
    #[cfg(not(unix))]
    None
}
