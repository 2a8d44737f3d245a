//! A task as a list of named, timed steps that stops at the first failure.

use std::time::{Duration, Instant};

use crate::util::TaskError;

pub struct Step<'a> {
    name: &'static str,
    run: Box<dyn FnOnce() -> Result<(), TaskError> + 'a>,
}

impl<'a> Step<'a> {
    pub fn new(name: &'static str, run: impl FnOnce() -> Result<(), TaskError> + 'a) -> Self {
        Step { name, run: Box::new(run) }
    }
}

enum Outcome {
    Passed(Duration),
    Failed(Duration),
    Skipped,
}

pub fn run_all(task: &str, steps: Vec<Step<'_>>) -> Result<(), TaskError> {
    let names: Vec<&'static str> = steps.iter().map(|s| s.name).collect();
    let mut outcomes = Vec::with_capacity(steps.len());
    let mut failure = None;
    let total = Instant::now();
    for (i, step) in steps.into_iter().enumerate() {
        if failure.is_some() {
            outcomes.push(Outcome::Skipped);
            continue;
        }
        eprintln!("\n==> [{}/{}] {}", i + 1, names.len(), step.name);
        let start = Instant::now();
        match (step.run)() {
            Ok(()) => outcomes.push(Outcome::Passed(start.elapsed())),
            Err(e) => {
                outcomes.push(Outcome::Failed(start.elapsed()));
                failure = Some((step.name, e));
            }
        }
    }

    eprintln!("\n{task} summary:");
    for (name, outcome) in names.iter().zip(&outcomes) {
        let (status, time) = match outcome {
            Outcome::Passed(d) => ("ok", fmt_duration(*d)),
            Outcome::Failed(d) => ("FAILED", fmt_duration(*d)),
            Outcome::Skipped => ("skipped", String::new()),
        };
        eprintln!("  {name:<16} {status:<8} {time:>9}");
    }
    eprintln!("  {:<16} {:<8} {:>9}", "total", "", fmt_duration(total.elapsed()));

    match failure {
        None => {
            eprintln!("{task}: all {} steps passed", names.len());
            Ok(())
        }
        Some((name, TaskError::Failed(msg))) | Some((name, TaskError::Usage(msg))) => {
            Err(TaskError::Failed(format!("{task}: step `{name}` failed: {msg}")))
        }
    }
}

fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{:04.1}s", (s / 60.0) as u64, s % 60.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn stops_at_first_failure() {
        let ran = Cell::new(0);
        let steps = vec![
            Step::new("a", || {
                ran.set(ran.get() + 1);
                Ok(())
            }),
            Step::new("b", || Err(TaskError::Failed("boom".into()))),
            Step::new("c", || {
                ran.set(ran.get() + 10);
                Ok(())
            }),
        ];
        let err = run_all("t", steps).unwrap_err();
        assert_eq!(ran.get(), 1);
        match err {
            TaskError::Failed(m) => assert!(m.contains("`b`") && m.contains("boom"), "{m}"),
            TaskError::Usage(_) => panic!("wrong kind"),
        }
    }

    #[test]
    fn formats_durations() {
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(fmt_duration(Duration::from_secs(125)), "2m05.0s");
    }
}
