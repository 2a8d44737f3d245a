//! The GGUF container: header, metadata and tensor table over a memory map (ggml `docs/gguf.md`).
//!
//! Parsing walks the whole header once and bounds-checks every length, count and offset against
//! the file, so that afterwards tensor data and metadata are plain views into the mapped bytes.

mod reader;
mod value;

pub use crate::quant::GgmlType;
pub use value::{ArrayValue, StringIter, Value, ValueType};

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use reader::Reader;

const MAGIC: [u8; 4] = *b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
/// Largest tensor rank GGUF allows.
const MAX_DIMS: u32 = 4;

/// Where the bytes live: a read-only map of the model file (and the file, for reads that
/// bypass the map), or memory (tests, fuzzing): owned, or the first `len` bytes of an image
/// shared with the caller.
enum Storage {
    Mapped { map: memmap2::Mmap, file: File },
    Owned(Vec<u8>),
    Shared { image: Arc<[u8]>, len: usize },
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped { map, .. } => map,
            Storage::Owned(v) => v,
            Storage::Shared { image, len } => &image[..*len],
        }
    }
}

/// One entry of the tensor table. `offset` is absolute in the file; `size` in bytes.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` is the contiguous (row) length.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    pub offset: u64,
    pub size: u64,
}

impl TensorInfo {
    pub(crate) fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

pub struct GgufFile {
    storage: Storage,
    version: u32,
    alignment: u64,
    metadata: BTreeMap<String, Value>,
    tensors: Vec<TensorInfo>,
    by_name: BTreeMap<String, usize>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version)
            .field("metadata_keys", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl GgufFile {
    /// Maps the file read-only and parses it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let not_found = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => Error::FileNotFound { path: path.to_owned() },
            _ => Error::Io { path: path.to_owned(), source: e },
        };
        // A directory, FIFO or device is refused before it is opened: opening a FIFO blocks
        // until a writer comes, and a device has no length to map.
        regular_file(path, &std::fs::metadata(path).map_err(not_found)?)?;
        let file = open_nonblocking(path).map_err(not_found)?;
        let meta = file.metadata().map_err(|e| Error::Io { path: path.to_owned(), source: e })?;
        // Checked again on the handle: the path may have been replaced in between.
        regular_file(path, &meta)?;
        let len = meta.len();
        if len == 0 {
            // mmap of an empty file fails on some platforms; it is a truncated file either way.
            return Err(Error::Truncated { what: "header".into(), start: 0, end: 4, len: 0 });
        }
        // SAFETY: the map is read-only. Another process truncating the file while it is mapped
        // would fault on access; that is the documented contract of every mmap-based loader.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::Io { path: path.to_owned(), source: e })?;
        Self::parse(Storage::Mapped { map, file })
    }

    /// Parses a GGUF image held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::parse(Storage::Owned(bytes))
    }

    /// Parses the first `len` bytes (at most the image's length) of an image the caller keeps
    /// a handle to: a fuzzer mutates one copy of a large model between loads instead of copying
    /// it for each (`Arc::get_mut` succeeds again once the file and what was built from it are
    /// dropped).
    pub fn from_shared(image: Arc<[u8]>, len: usize) -> Result<Self> {
        let len = len.min(image.len());
        Self::parse(Storage::Shared { image, len })
    }

    fn parse(storage: Storage) -> Result<Self> {
        let bytes = storage.bytes();
        let mut r = Reader::new(bytes);
        let magic: [u8; 4] = r.array("magic")?;
        if magic != MAGIC {
            return Err(Error::NotGguf { magic });
        }
        let version = r.u32("version")?;
        if version != 2 && version != 3 {
            return Err(Error::UnsupportedVersion(version));
        }
        let n_tensors = r.u64("tensor count")?;
        let n_kv = r.u64("metadata count")?;

        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = r.string("metadata key")?.to_owned();
            let ty = ValueType::from_u32(r.u32("metadata type")?)
                .ok_or_else(|| Error::Corrupt(format!("metadata `{key}` has an unknown type")))?;
            let value = Value::read(&mut r, ty, &key)?;
            if metadata.insert(key.clone(), value).is_some() {
                return Err(Error::Corrupt(format!("metadata key `{key}` appears twice")));
            }
        }

        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() => a,
                _ => return Err(Error::Corrupt("general.alignment is not a power of two".into())),
            },
        };

        // Each tensor entry is at least 8 (name len) + 4 + 8 + 4 + 8 bytes: an impossible count
        // is caught before any allocation sized by it.
        if n_tensors > (bytes.len() as u64) / 32 {
            return Err(Error::Corrupt(format!("tensor count {n_tensors} exceeds what the file can hold")));
        }
        let mut raw = Vec::with_capacity(n_tensors as usize);
        for _ in 0..n_tensors {
            let name = r.string("tensor name")?.to_owned();
            let n_dims = r.u32("tensor rank")?;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(Error::Corrupt(format!("tensor `{name}` has rank {n_dims}")));
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                dims.push(r.u64("tensor dimension")?);
            }
            let ty_id = r.u32("tensor type")?;
            let rel_offset = r.u64("tensor offset")?;
            raw.push((name, dims, ty_id, rel_offset));
        }
        let data_start = align_up(r.position() as u64, alignment)
            .ok_or_else(|| Error::Corrupt("data section offset overflows".into()))?;
        let file_len = bytes.len() as u64;

        let mut tensors = Vec::with_capacity(raw.len());
        let mut by_name = BTreeMap::new();
        for (name, dims, ty_id, rel_offset) in raw {
            let ty = GgmlType::from_id(ty_id).ok_or_else(|| Error::UnsupportedTensorType {
                tensor: name.clone(),
                ty: format!("ggml type id {ty_id}"),
            })?;
            let n_elements = dims
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| Error::Corrupt(format!("tensor `{name}` element count overflows")))?;
            if dims[0] % ty.block_size() as u64 != 0 {
                return Err(Error::Corrupt(format!(
                    "tensor `{name}` row length {} is not a multiple of the {} block size {}",
                    dims[0],
                    ty.name(),
                    ty.block_size()
                )));
            }
            let size = (n_elements / ty.block_size() as u64)
                .checked_mul(ty.block_bytes() as u64)
                .ok_or_else(|| Error::Corrupt(format!("tensor `{name}` size overflows")))?;
            if rel_offset % alignment != 0 {
                return Err(Error::Corrupt(format!("tensor `{name}` data is not aligned to {alignment}")));
            }
            let offset = data_start
                .checked_add(rel_offset)
                .ok_or_else(|| Error::Corrupt(format!("tensor `{name}` offset overflows")))?;
            let end =
                offset.checked_add(size).ok_or_else(|| Error::Corrupt(format!("tensor `{name}` extent overflows")))?;
            if end > file_len {
                return Err(Error::Truncated { what: format!("tensor `{name}`"), start: offset, end, len: file_len });
            }
            if by_name.insert(name.clone(), tensors.len()).is_some() {
                return Err(Error::Corrupt(format!("tensor `{name}` appears twice")));
            }
            tensors.push(TensorInfo { name, dims, ty, offset, size });
        }

        Ok(GgufFile { storage, version, alignment, metadata, tensors, by_name })
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    pub fn metadata(&self) -> &BTreeMap<String, Value> {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    fn require(&self, key: &str) -> Result<&Value> {
        self.get(key).ok_or_else(|| Error::MissingMetadata(key.to_owned()))
    }

    pub fn get_str(&self, key: &str) -> Result<&str> {
        let v = self.require(key)?;
        v.as_str().ok_or_else(|| type_error(key, "a string", v))
    }

    /// Any integer type whose value fits in u64.
    pub(crate) fn get_u64(&self, key: &str) -> Result<u64> {
        let v = self.require(key)?;
        v.as_u64().ok_or_else(|| type_error(key, "an unsigned integer", v))
    }

    pub(crate) fn get_usize(&self, key: &str) -> Result<usize> {
        let n = self.get_u64(key)?;
        usize::try_from(n).map_err(|_| Error::Corrupt(format!("`{key}` = {n} does not fit in memory")))
    }

    /// Any integer type as i64.
    pub fn get_i64(&self, key: &str) -> Result<i64> {
        let v = self.require(key)?;
        v.as_i64().ok_or_else(|| type_error(key, "an integer", v))
    }

    /// F32 or F64 (narrowed), or an integer.
    pub(crate) fn get_f32(&self, key: &str) -> Result<f32> {
        let v = self.require(key)?;
        v.as_f32().ok_or_else(|| type_error(key, "a number", v))
    }

    pub(crate) fn get_bool(&self, key: &str) -> Result<bool> {
        let v = self.require(key)?;
        v.as_bool().ok_or_else(|| type_error(key, "a bool", v))
    }

    pub(crate) fn get_array(&self, key: &str) -> Result<&ArrayValue> {
        let v = self.require(key)?;
        v.as_array().ok_or_else(|| type_error(key, "an array", v))
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str> {
        self.get_str("general.architecture")
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).map(|&i| &self.tensors[i])
    }

    /// The tensor's bytes (checked against the file at parse time).
    pub fn tensor_data(&self, info: &TensorInfo) -> &[u8] {
        &self.bytes()[info.offset as usize..(info.offset + info.size) as usize]
    }

    /// Copies the file's bytes `start..start + out.len()` into `out` with a positioned read, not
    /// through the map, so that none of the file's pages joins this process's resident memory.
    /// (A read through the map maps the window around it and, where the page cache holds the
    /// file in large folios, whole folios of up to 2 MiB: scattered row lookups would bring most
    /// of a large table in.) In-memory files, and a read the system refuses, copy from the bytes.
    pub fn read_at(&self, start: usize, out: &mut [u8]) {
        #[cfg(unix)]
        if let Storage::Mapped { file, .. } = &self.storage {
            use std::os::unix::fs::FileExt;
            if file.read_exact_at(out, start as u64).is_ok() {
                return;
            }
        }
        out.copy_from_slice(&self.bytes()[start..start + out.len()]);
    }

    /// Drops the mapped pages lying wholly inside bytes `start..start + len` from this process's
    /// resident memory (e.g. a tensor now used from a repacked copy). The bytes stay readable:
    /// touching them again reads them back from the file. No-op for in-memory files.
    pub fn release(&self, start: usize, len: usize) {
        // Whole 64 KiB units: a multiple of every page size in use, so no neighbour is touched.
        const UNIT: usize = 64 << 10;
        let Storage::Mapped { map, .. } = &self.storage else { return };
        let base = map.as_ptr() as usize;
        let (lo, hi) = ((base + start).next_multiple_of(UNIT), (base + start + len) / UNIT * UNIT);
        if hi > lo && hi - base <= map.len() {
            // SAFETY: the map is read-only and private, so it holds no changes for DONTNEED to
            // discard: later reads fault the same bytes back in from the file.
            let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, lo - base, hi - lo) };
        }
    }
}

/// Refuses what is not a regular file (after symlinks), naming what it is.
fn regular_file(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    let what = if meta.is_dir() { "a directory" } else { "not a regular file (a FIFO, socket or device)" };
    Err(Error::InvalidOption(format!("model path {} is {what}", path.display())))
}

/// Opens for reading without waiting: where the path became a FIFO after it was checked, the
/// open returns at once instead of blocking until a writer comes.
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    opts.open(path)
}

fn type_error(key: &str, expected: &'static str, found: &Value) -> Error {
    Error::MetadataType { key: key.to_owned(), expected, found: found.type_name().to_owned() }
}

fn align_up(x: u64, a: u64) -> Option<u64> {
    Some(x.checked_add(a - 1)? / a * a)
}
