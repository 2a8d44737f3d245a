//! Where the SDK's `log` records go, and at what level: the app decides with `set_log_level`.
//!
//! Apple platforms: the unified log (subsystem `dev.tern`, category = the Rust module), seen in
//! Console.app and `log stream`. Android: logcat, tag `Tern`. Elsewhere (desktop JVM, Linux
//! tests): stderr. Nothing is logged until the app sets a level. The SDK logs counts and
//! timings at `Info` and above; prompt and answer text never appear above `Debug`.

use std::sync::Once;

use log::LevelFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl From<LogLevel> for LevelFilter {
    fn from(l: LogLevel) -> Self {
        match l {
            LogLevel::Off => LevelFilter::Off,
            LogLevel::Error => LevelFilter::Error,
            LogLevel::Warn => LevelFilter::Warn,
            LogLevel::Info => LevelFilter::Info,
            LogLevel::Debug => LevelFilter::Debug,
            LogLevel::Trace => LevelFilter::Trace,
        }
    }
}

/// Routes the SDK's log to the platform's log (installed on the first call) and keeps records
/// at `level` and above. Callable any number of times, from any thread. If the app already
/// installed a Rust logger of its own, that one is kept and only the level changes.
#[uniffi::export]
pub fn set_log_level(level: LogLevel) {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(install_platform_logger);
    log::set_max_level(level.into());
}

#[cfg(target_vendor = "apple")]
fn install_platform_logger() {
    // Filters by `log::max_level()`, so later level changes apply.
    let _ = oslog::OsLogger::new("dev.tern").init();
}

#[cfg(target_os = "android")]
fn install_platform_logger() {
    // Its own filter lets everything through; `log::max_level()` does the filtering.
    android_logger::init_once(android_logger::Config::default().with_tag("Tern").with_max_level(LevelFilter::Trace));
}

#[cfg(not(any(target_vendor = "apple", target_os = "android")))]
fn install_platform_logger() {
    let _ = log::set_logger(&StderrLogger);
}

/// One line per record: `[tern INFO tern::engine] model loaded ...`.
#[cfg(not(any(target_vendor = "apple", target_os = "android")))]
struct StderrLogger;

#[cfg(not(any(target_vendor = "apple", target_os = "android")))]
impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!("[tern {} {}] {}", record.level(), record.target(), record.args());
        }
    }

    fn flush(&self) {}
}
