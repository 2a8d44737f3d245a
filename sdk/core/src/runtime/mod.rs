//! Compute runtime: the thread pool that forward passes run on, the CPU topology it runs over,
//! and core selections (which cores a phase's threads are pinned to).

mod affinity;
mod pool;
mod topology;

pub use affinity::{
    current_thread_cores, online_cpus, pin_current_thread, pinning_supported, process_cpu_time, CoreSelection,
    SavedAffinity, MAX_SELECTION_THREADS,
};
pub use pool::{Split, ThreadPool};
pub use topology::{parse_cpu_list, Cluster, CpuCore, CpuPart, CpuTopology};

/// Threads to use when the app does not say: one per core the process may run on.
pub(crate) fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 8)
}

/// Peak resident memory of this process (Linux and Android: `VmHWM`), if the OS reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
