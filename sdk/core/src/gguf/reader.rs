//! A cursor over untrusted bytes: every read checks the length first.

use crate::error::{Error, Result};

pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let len = self.bytes.len() as u64;
        let start = self.pos as u64;
        let end = start.checked_add(n).filter(|&e| e <= len).ok_or_else(|| Error::Truncated {
            what: what.to_owned(),
            start,
            end: start.saturating_add(n),
            len,
        })?;
        let s = &self.bytes[self.pos..end as usize];
        self.pos = end as usize;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: u64 length, then that many UTF-8 bytes.
    pub fn string(&mut self, what: &str) -> Result<&'a str> {
        let n = self.u64(what)?;
        let s = self.take(n, what)?;
        std::str::from_utf8(s).map_err(|_| Error::Corrupt(format!("{what} is not valid UTF-8")))
    }
}
