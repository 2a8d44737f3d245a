//! Metadata values. Arrays stay in the file: they are validated once at parse time and decoded on
//! access, so a 150k-entry vocabulary costs no allocation until the tokenizer reads it.

use super::reader::Reader;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    pub(crate) fn from_u32(v: u32) -> Option<Self> {
        use ValueType::*;
        Some(match v {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// Fixed element size, or None for strings and arrays.
    fn fixed_size(self) -> Option<u64> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(ArrayValue),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A typed array left in the file: `data` is the byte range of its elements.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayValue {
    pub elem: ValueType,
    pub len: u64,
    start: usize,
    end: usize,
}

impl Value {
    pub(super) fn read(r: &mut Reader<'_>, ty: ValueType, key: &str) -> Result<Value> {
        Ok(match ty {
            ValueType::U8 => Value::U8(r.u8(key)?),
            ValueType::I8 => Value::I8(r.u8(key)? as i8),
            ValueType::U16 => Value::U16(r.u16(key)?),
            ValueType::I16 => Value::I16(r.u16(key)? as i16),
            ValueType::U32 => Value::U32(r.u32(key)?),
            ValueType::I32 => Value::I32(r.u32(key)? as i32),
            ValueType::F32 => Value::F32(f32::from_bits(r.u32(key)?)),
            ValueType::Bool => match r.u8(key)? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(Error::Corrupt(format!("metadata `{key}` has bool byte {b}"))),
            },
            ValueType::String => Value::String(r.string(key)?.to_owned()),
            ValueType::U64 => Value::U64(r.u64(key)?),
            ValueType::I64 => Value::I64(r.u64(key)? as i64),
            ValueType::F64 => Value::F64(f64::from_bits(r.u64(key)?)),
            ValueType::Array => {
                let elem = ValueType::from_u32(r.u32(key)?)
                    .ok_or_else(|| Error::Corrupt(format!("array `{key}` has an unknown element type")))?;
                let len = r.u64(key)?;
                let start = r.position();
                match elem.fixed_size() {
                    Some(size) => {
                        let total = len
                            .checked_mul(size)
                            .ok_or_else(|| Error::Corrupt(format!("array `{key}` size overflows")))?;
                        r.take(total, key)?;
                    }
                    None if elem == ValueType::String => {
                        for _ in 0..len {
                            r.string(key)?;
                        }
                    }
                    // Nested arrays appear in no model this SDK reads; refusing them keeps
                    // validation linear and recursion-free.
                    None => return Err(Error::Corrupt(format!("array `{key}` nests arrays"))),
                }
                Value::Array(ArrayValue { elem, len, start, end: r.position() })
            }
        })
    }

    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::F32(_) => "f32",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F64(_) => "f64",
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        Some(match *self {
            Value::U8(v) => v as i64,
            Value::I8(v) => v as i64,
            Value::U16(v) => v as i64,
            Value::I16(v) => v as i64,
            Value::U32(v) => v as i64,
            Value::I32(v) => v as i64,
            Value::U64(v) => i64::try_from(v).ok()?,
            Value::I64(v) => v,
            _ => return None,
        })
    }

    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U64(v) => Some(v),
            _ => u64::try_from(self.as_i64()?).ok(),
        }
    }

    pub(crate) fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => self.as_i64().map(|v| v as f32),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&ArrayValue> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

impl ArrayValue {
    fn data<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        &file[self.start..self.end]
    }

    /// The strings of a string array. `file` is [`super::GgufFile::bytes`].
    pub fn strings<'a>(&self, file: &'a [u8]) -> Option<StringIter<'a>> {
        (self.elem == ValueType::String).then(|| StringIter { data: self.data(file), left: self.len })
    }

    /// Numeric elements widened to f32 (f32, f64 and integer arrays).
    pub fn to_f32_vec(&self, file: &[u8]) -> Option<Vec<f32>> {
        let d = self.data(file);
        Some(match self.elem {
            ValueType::F32 => d.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            ValueType::F64 => {
                d.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32).collect()
            }
            _ => self.to_i64_vec(file)?.into_iter().map(|v| v as f32).collect(),
        })
    }

    /// Integer (or bool) elements widened to i64.
    pub(crate) fn to_i64_vec(&self, file: &[u8]) -> Option<Vec<i64>> {
        let d = self.data(file);
        Some(match self.elem {
            ValueType::U8 | ValueType::Bool => d.iter().map(|&b| b as i64).collect(),
            ValueType::I8 => d.iter().map(|&b| b as i8 as i64).collect(),
            ValueType::U16 => d.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as i64).collect(),
            ValueType::I16 => d.chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]]) as i64).collect(),
            ValueType::U32 => d.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).collect(),
            ValueType::I32 => d.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).collect(),
            ValueType::U64 | ValueType::I64 => {
                d.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect()
            }
            _ => return None,
        })
    }
}

/// Strings of a validated string array.
pub struct StringIter<'a> {
    data: &'a [u8],
    left: u64,
}

impl<'a> Iterator for StringIter<'a> {
    type Item = &'a str;
    fn next(&mut self) -> Option<&'a str> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Lengths and UTF-8 were checked when the array was parsed.
        let (len, rest) = self.data.split_at_checked(8)?;
        let n = u64::from_le_bytes(len.try_into().ok()?) as usize;
        let (s, rest) = rest.split_at_checked(n)?;
        self.data = rest;
        std::str::from_utf8(s).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}
