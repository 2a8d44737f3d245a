//! What moving a thread pool between two core selections costs, as a session does at the
//! prefill→decode boundary (`tern energy tune` reports it beside the tuned modes).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::runtime::{CoreSelection, ThreadPool};

#[derive(Debug, Clone, Serialize)]
pub struct SwitchCost {
    /// Median time of a selection change plus the job right after it, minus a job without change.
    pub median_us: f64,
    pub p90_us: f64,
    /// Median of the `set_selection` call alone.
    pub call_median_us: f64,
    pub between: [String; 2],
    pub samples: usize,
}

/// The cost of moving a pool between two selections, as a session does at the prefill→decode
/// boundary: the change plus the first job after it (threads wake and re-pin), less the same job
/// without a change. If the two selections are the same, a one-core selection stands in for the
/// second so that something changes.
pub fn measure_switch_cost(threads: usize, a: &CoreSelection, b: &CoreSelection) -> SwitchCost {
    const SAMPLES: usize = 400;
    let b = if a == b {
        CoreSelection::cores(a.core_ids().and_then(|c| c.last().copied())).for_platform()
    } else {
        b.clone()
    };
    let pool = ThreadPool::new(threads);
    let job = |pool: &ThreadPool| {
        pool.parallel_for(threads * 8, &|i| {
            std::hint::black_box(i);
        })
    };
    let (mut with, mut without, mut call) = (Vec::new(), Vec::new(), Vec::new());
    pool.set_selection(Some(a));
    for _ in 0..50 {
        job(&pool);
    }
    for i in 0..SAMPLES {
        let t0 = Instant::now();
        job(&pool);
        without.push(t0.elapsed());
        let target = if i % 2 == 0 { &b } else { a };
        let t0 = Instant::now();
        pool.set_selection(Some(target));
        call.push(t0.elapsed());
        job(&pool);
        with.push(t0.elapsed());
    }
    pool.release_caller();
    let us = |v: &mut Vec<Duration>, q: f64| {
        v.sort();
        v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6
    };
    let base = us(&mut without, 0.5);
    SwitchCost {
        median_us: us(&mut with, 0.5) - base,
        p90_us: us(&mut with, 0.9) - base,
        call_median_us: us(&mut call, 0.5),
        between: [a.to_string(), b.to_string()],
        samples: SAMPLES,
    }
}
