//! Tern's model store: models downloaded over HTTP(S) into an app directory, checked before use.
//!
//! The inference core (`tern`) has no network code; apps that fetch models at run time use this
//! crate. A download
//!
//! - checks the free disk space first,
//! - writes to `<file>.part` (locked, so two downloads of one model cannot interleave),
//! - reports progress events,
//! - resumes after a dropped connection with an HTTP `Range` request, by itself up to
//!   [`DownloadOptions::retries`] times and on the next call after that,
//! - checks the size and the SHA-256 of the whole file, deletes it if either is wrong,
//! - and only then renames it to its final name.
//!
//! So a file under a model's name is always complete and verified; a corrupt or partial download
//! is never returned by [`Store::installed`] or [`Store::download`].
//!
//! ```no_run
//! use tern_store::{known_models, DownloadOptions, Store};
//! let store = Store::open("/data/app/models")?;
//! let smollm2 = &known_models()[0];
//! let path = store.download(smollm2, "https://example.com/SmolLM2-135M-Instruct.Q4_1.gguf",
//!     &DownloadOptions::default(), &mut |event| eprintln!("{event:?}"))?;
//! # Ok::<(), tern_store::StoreError>(())
//! ```

mod download;
mod error;
mod manifest;
mod store;

pub use download::{DownloadEvent, DownloadOptions};
pub use error::{Result, StoreError};
pub use manifest::{known_models, sha256_hex, ModelSpec};
pub use store::{Store, StoredFile};
