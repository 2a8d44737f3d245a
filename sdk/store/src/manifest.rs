//! Models the store knows: file name, size and SHA-256 of each.

use std::io::Read;

use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};

/// A model file the store can fetch and check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// Short name (`smollm2`).
    pub name: String,
    /// File name in the store directory (no path).
    pub file_name: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the file, 64 lowercase hex digits.
    pub sha256: String,
}

impl ModelSpec {
    pub fn new(name: &str, file_name: &str, size: u64, sha256: &str) -> ModelSpec {
        ModelSpec { name: name.into(), file_name: file_name.into(), size, sha256: sha256.to_ascii_lowercase() }
    }

    /// A plain file name and a well-formed hash: nothing else may reach the file system.
    pub fn validate(&self) -> Result<()> {
        let f = &self.file_name;
        let plain = !f.is_empty()
            && f != "."
            && f != ".."
            && !f.ends_with(".part")
            && !f.contains(['/', '\\', '\0'])
            && !f.starts_with('.');
        if !plain {
            return Err(StoreError::InvalidSpec(format!("`{f}` is not a plain file name")));
        }
        let hash_ok = self.sha256.len() == 64 && self.sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !hash_ok {
            return Err(StoreError::InvalidSpec(format!("the SHA-256 of `{f}` is not 64 hex digits")));
        }
        if self.size == 0 {
            return Err(StoreError::InvalidSpec(format!("`{f}` has size 0")));
        }
        Ok(())
    }
}

/// The models Tern is tested with (the files of `sdk/core/tests/golden/MODELS.sha256`). They are
/// published in pieces inside PyPI wheels, which `cargo xtask models` assembles; an app serves
/// the assembled files from its own host and passes their URL to [`Store::download`].
///
/// [`Store::download`]: crate::Store::download
pub fn known_models() -> Vec<ModelSpec> {
    vec![
        ModelSpec::new(
            "smollm2",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            98_362_432,
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
        ModelSpec::new(
            "qwen2.5",
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        ModelSpec::new(
            "gemma3",
            "gemma-3-270m-q4_k_m.gguf",
            253_113_024,
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        ),
    ]
}

/// SHA-256 of everything `reader` yields, as lowercase hex.
pub fn sha256_hex(mut reader: impl Read) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_a_known_vector() {
        assert_eq!(
            sha256_hex(&b"abc"[..]).expect("in memory"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn specs_must_name_plain_files() {
        let ok = &known_models()[0];
        assert!(ok.validate().is_ok());
        for bad in ["", "..", "a/b.gguf", "..\\x", ".hidden", "x.gguf.part"] {
            let spec = ModelSpec { file_name: bad.into(), ..ok.clone() };
            assert!(matches!(spec.validate(), Err(StoreError::InvalidSpec(_))), "{bad:?}");
        }
        let spec = ModelSpec { sha256: "abc".into(), ..ok.clone() };
        assert!(matches!(spec.validate(), Err(StoreError::InvalidSpec(_))));
    }
}
