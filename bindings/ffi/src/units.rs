//! Unit conversions the records share; a leaf module, so that the records of each domain
//! (energy, speculation, stats) can use them without importing each other.

use std::time::Duration;

/// A duration in milliseconds, as the foreign records carry it.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
