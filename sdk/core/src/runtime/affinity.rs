//! Core selections and thread affinity: where the threads of one phase (prefill or decode) run.
//!
//! Linux and Android pin one thread to each selected core; iOS cannot pin, so a selection there
//! is a thread count and the OS places the threads.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::topology::parse_cpu_list;
use crate::error::{Error, Result};

/// Most threads a selection may ask for (far above any phone's or desktop's core count; a
/// bigger count is a mistake, not a machine).
pub const MAX_SELECTION_THREADS: usize = 1024;

/// The cores (or the number of threads) a phase runs on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CoreSelection {
    /// One thread pinned to each of these CPU ids (ascending, no duplicates).
    Cores(Vec<usize>),
    /// This many threads, placed by the OS.
    Threads(usize),
}

impl CoreSelection {
    /// A pinned selection of these CPU ids (sorted and deduplicated), unchecked: for ids that
    /// come from this machine's own topology. Ids from an app or a file go through
    /// [`CoreSelection::checked`].
    pub fn cores(ids: impl IntoIterator<Item = usize>) -> CoreSelection {
        let mut v: Vec<usize> = ids.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        CoreSelection::Cores(v)
    }

    /// The one checked way in: a pinned selection of these ids, every one an online CPU of this
    /// machine, or [`Error::InvalidOption`] naming the first that is not (also for none at all).
    pub fn checked(ids: impl IntoIterator<Item = usize>) -> Result<CoreSelection> {
        let s = CoreSelection::cores(ids);
        s.validate()?;
        Ok(s)
    }

    /// Checks a selection built elsewhere (the variants are public): pinned ids must be online
    /// CPUs of this machine, a thread count 1 to 1,024.
    pub fn validate(&self) -> Result<()> {
        match self {
            CoreSelection::Cores(ids) => {
                if ids.is_empty() {
                    return Err(Error::InvalidOption("a core selection needs at least one CPU id".into()));
                }
                let online = online_cpus();
                if let Some(bad) = ids.iter().find(|id| online.binary_search(id).is_err()) {
                    return Err(Error::InvalidOption(format!(
                        "CPU {bad} is not an online CPU of this machine (online: {})",
                        cpu_list(&online)
                    )));
                }
                Ok(())
            }
            CoreSelection::Threads(n) if (1..=MAX_SELECTION_THREADS).contains(n) => Ok(()),
            CoreSelection::Threads(n) => Err(Error::InvalidOption(format!(
                "a core selection runs 1 to {MAX_SELECTION_THREADS} threads (got {n})"
            ))),
        }
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

/// The online CPU ids of this machine, ascending: Linux's `/sys/devices/system/cpu/online`,
/// else the CPUs this process may run on, else `0..available_parallelism`. Read once.
pub fn online_cpus() -> Vec<usize> {
    static ONLINE: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    ONLINE
        .get_or_init(|| {
            let from_sysfs = std::fs::read_to_string("/sys/devices/system/cpu/online")
                .ok()
                .and_then(|t| parse_cpu_list(&t))
                .map(|ids| ids.into_iter().filter(|&id| id < CPU_ID_LIMIT).collect::<Vec<_>>())
                .filter(|ids| !ids.is_empty());
            let mut ids = from_sysfs
                .or_else(|| current_thread_cores().filter(|c| !c.is_empty()))
                .unwrap_or_else(|| (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect());
            ids.sort_unstable();
            ids.dedup();
            ids
        })
        .clone()
}

/// `0-3,5` for the ids (ascending).
fn cpu_list(ids: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", ids[i], ids[j]) } else { ids[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

/// CPU ids the kernel's fixed-size affinity set can hold (`CPU_SETSIZE`): pinning to a larger id
/// would index past the set.
const CPU_ID_LIMIT: usize = 1024;

/// Pins the calling thread to one core. False where the OS refuses (or cannot pin), and for an
/// id that is not an online CPU (never handed to the OS: its affinity set has a fixed size).
pub fn pin_current_thread(core: usize) -> bool {
    pinning_supported()
        && core < CPU_ID_LIMIT
        && online_cpus().binary_search(&core).is_ok()
        && core_affinity::set_for_current(core_affinity::CoreId { id: core })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_print() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 5, 8, 9]), "0-3,5,8-9");
    }

    #[test]
    fn only_online_cpus_are_selections() {
        let online = online_cpus();
        assert!(!online.is_empty());
        let first = online[0];
        assert_eq!(CoreSelection::checked([first]).expect("an online CPU"), CoreSelection::Cores(vec![first]));
        for bad in [1024, 99_999, usize::MAX, online[online.len() - 1] + 1] {
            assert!(matches!(CoreSelection::checked([first, bad]), Err(Error::InvalidOption(_))), "{bad}");
            assert!(!pin_current_thread(bad), "{bad} is never handed to the OS");
        }
        assert!(matches!(CoreSelection::checked([]), Err(Error::InvalidOption(_))));
        assert!(CoreSelection::Threads(4).validate().is_ok());
        assert!(CoreSelection::Threads(0).validate().is_err());
        assert!(CoreSelection::Threads(usize::MAX).validate().is_err());
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
