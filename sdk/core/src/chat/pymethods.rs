//! The Python methods HF chat templates call on strings and dicts
//! (`content.strip()`, `role.startswith('a')`, `msg.get('x')`, `d.items()`, ...).
//! minijinja has no methods on primitive values; its unknown-method hook routes
//! here. Semantics follow Python's `str`/`dict`.

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

/// Positional arguments plus optional trailing keyword arguments, looked up by
/// position or Python parameter name.
struct Args<'a> {
    positional: &'a [Value],
    kwargs: Option<Kwargs>,
}

impl<'a> Args<'a> {
    fn new(args: &'a [Value]) -> Result<Self, Error> {
        match args.split_last() {
            Some((last, rest)) if last.is_kwargs() => {
                Ok(Args { positional: rest, kwargs: Some(Kwargs::try_from(last.clone())?) })
            }
            _ => Ok(Args { positional: args, kwargs: None }),
        }
    }

    /// Argument `pos`/`name`; `None` when absent or Python `None`.
    fn get(&self, pos: usize, name: &str) -> Result<Option<Value>, Error> {
        let v = match self.positional.get(pos) {
            Some(v) => Some(v.clone()),
            None => match &self.kwargs {
                Some(k) => k.get::<Option<Value>>(name)?,
                None => None,
            },
        };
        Ok(v.filter(|v| !v.is_none() && !v.is_undefined()))
    }

    fn str(&self, pos: usize, name: &str) -> Result<Option<String>, Error> {
        match self.get(pos, name)? {
            None => Ok(None),
            Some(v) => match v.as_str() {
                Some(s) => Ok(Some(s.to_owned())),
                None => Err(type_error(name, "a string")),
            },
        }
    }

    fn int(&self, pos: usize, name: &str) -> Result<Option<i64>, Error> {
        match self.get(pos, name)? {
            None => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| type_error(name, "an integer")),
        }
    }

    /// Rejects calls with more arguments than the method takes.
    fn at_most(&self, n: usize, method: &str) -> Result<(), Error> {
        if self.positional.len() > n {
            return Err(Error::new(ErrorKind::TooManyArguments, format!("{method}() takes at most {n} arguments")));
        }
        if let Some(k) = &self.kwargs {
            k.assert_all_used()?;
        }
        Ok(())
    }
}

fn type_error(name: &str, expected: &str) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("argument `{name}` must be {expected}"))
}

pub(super) fn call_method(state: &State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    let rv = match value.kind() {
        ValueKind::String => {
            super::sandbox::charge_method(value.as_str().unwrap_or_default(), method, args)?;
            str_method(state, value, method, args)?
        }
        ValueKind::Map => {
            super::sandbox::charge(0, value.len().unwrap_or(0) as u64 + 1)?;
            map_method(state, value, method, args)?
        }
        _ => return Err(Error::from(ErrorKind::UnknownMethod)),
    };
    super::sandbox::charge(super::sandbox::size_of(&rv), 0)?;
    Ok(rv)
}

fn str_method(state: &State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    let s = value.as_str().unwrap_or_default();
    let a = Args::new(args)?;
    let rv = match method {
        "strip" | "lstrip" | "rstrip" => {
            let chars = a.str(0, "chars")?;
            a.at_most(1, method)?;
            let is_strip = |c: char| match &chars {
                Some(set) => set.contains(c),
                None => c.is_whitespace(),
            };
            Value::from(match method {
                "strip" => s.trim_matches(is_strip),
                "lstrip" => s.trim_start_matches(is_strip),
                _ => s.trim_end_matches(is_strip),
            })
        }
        "startswith" | "endswith" => {
            let arg = a.get(0, "prefix")?.ok_or_else(|| Error::from(ErrorKind::MissingArgument))?;
            a.at_most(1, method)?;
            let test = |p: &str| if method == "startswith" { s.starts_with(p) } else { s.ends_with(p) };
            // Python accepts one string or a tuple of them.
            let hit = match arg.as_str() {
                Some(p) => test(p),
                None => {
                    let mut any = false;
                    for p in arg.try_iter()? {
                        any |= test(p.as_str().ok_or_else(|| type_error("prefix", "a string or tuple of strings"))?);
                    }
                    any
                }
            };
            Value::from(hit)
        }
        "split" | "rsplit" => {
            let sep = a.str(0, "sep")?;
            let max = a.int(1, "maxsplit")?.unwrap_or(-1);
            a.at_most(2, method)?;
            let max = usize::try_from(max).ok();
            let parts = match sep {
                Some(sep) if sep.is_empty() => {
                    return Err(Error::new(ErrorKind::InvalidOperation, "empty separator"));
                }
                Some(sep) => split_sep(s, &sep, max, method == "rsplit"),
                None => split_whitespace(s, max, method == "rsplit"),
            };
            Value::from(parts)
        }
        "splitlines" => {
            a.at_most(0, method)?;
            Value::from(split_lines(s))
        }
        "upper" => {
            a.at_most(0, method)?;
            Value::from(s.to_uppercase())
        }
        "lower" => {
            a.at_most(0, method)?;
            Value::from(s.to_lowercase())
        }
        "title" | "capitalize" => {
            a.at_most(0, method)?;
            state.apply_filter(method, std::slice::from_ref(value))?
        }
        "replace" => {
            let old = a.str(0, "old")?.ok_or_else(|| Error::from(ErrorKind::MissingArgument))?;
            let new = a.str(1, "new")?.ok_or_else(|| Error::from(ErrorKind::MissingArgument))?;
            let count = a.int(2, "count")?.unwrap_or(-1);
            a.at_most(3, method)?;
            Value::from(match usize::try_from(count) {
                Ok(n) => s.replacen(&old, &new, n),
                Err(_) => s.replace(&old, &new),
            })
        }
        "find" | "rfind" | "count" => {
            let sub = a.str(0, "sub")?.ok_or_else(|| Error::from(ErrorKind::MissingArgument))?;
            a.at_most(1, method)?;
            // Python counts in characters, not bytes.
            let chars_before = |byte: usize| s[..byte].chars().count() as i64;
            Value::from(match method {
                "find" => s.find(&sub).map_or(-1, chars_before),
                "rfind" => s.rfind(&sub).map_or(-1, chars_before),
                _ if sub.is_empty() => s.chars().count() as i64 + 1,
                _ => s.matches(&sub).count() as i64,
            })
        }
        "join" => {
            let items = a.get(0, "iterable")?.ok_or_else(|| Error::from(ErrorKind::MissingArgument))?;
            a.at_most(1, method)?;
            let mut out = String::new();
            for (i, item) in items.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(s);
                }
                out.push_str(item.as_str().ok_or_else(|| type_error("iterable", "a sequence of strings"))?);
            }
            Value::from(out)
        }
        "isdigit" | "isnumeric" | "isalpha" | "isalnum" | "isspace" | "islower" | "isupper" => {
            a.at_most(0, method)?;
            Value::from(str_predicate(s, method))
        }
        _ => return Err(Error::from(ErrorKind::UnknownMethod)),
    };
    Ok(rv)
}

fn str_predicate(s: &str, method: &str) -> bool {
    let all = |f: fn(char) -> bool| !s.is_empty() && s.chars().all(f);
    match method {
        "isdigit" => all(|c| c.is_ascii_digit()),
        "isnumeric" => all(char::is_numeric),
        "isalpha" => all(char::is_alphabetic),
        "isalnum" => all(char::is_alphanumeric),
        "isspace" => all(char::is_whitespace),
        // Python: at least one cased character and no character of the other case.
        "islower" => s.chars().any(char::is_lowercase) && !s.chars().any(char::is_uppercase),
        _ => s.chars().any(char::is_uppercase) && !s.chars().any(char::is_lowercase),
    }
}

/// `str.splitlines()`: Python's line boundaries (`\r\n` counts once), no trailing empty line.
fn split_lines(s: &str) -> Vec<String> {
    let boundary = |c: char| {
        matches!(c, '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}' | '\u{2029}')
    };
    let mut lines = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find(boundary) {
        lines.push(rest[..i].to_owned());
        let skip = if rest[i..].starts_with("\r\n") { 2 } else { rest[i..].chars().next().map_or(1, char::len_utf8) };
        rest = &rest[i + skip..];
    }
    if !rest.is_empty() {
        lines.push(rest.to_owned());
    }
    lines
}

/// `str.split(sep, maxsplit)` / `rsplit` with an explicit separator.
fn split_sep(s: &str, sep: &str, max: Option<usize>, from_right: bool) -> Vec<String> {
    match (max, from_right) {
        (None, _) => s.split(sep).map(str::to_owned).collect(),
        (Some(n), false) => s.splitn(n.saturating_add(1), sep).map(str::to_owned).collect(),
        (Some(n), true) => {
            let mut v: Vec<String> = s.rsplitn(n.saturating_add(1), sep).map(str::to_owned).collect();
            v.reverse();
            v
        }
    }
}

/// `str.split()` / `rsplit()` without separator: runs of whitespace, no empty parts;
/// with `maxsplit` the unsplit rest keeps its inner and far-side whitespace.
fn split_whitespace(s: &str, max: Option<usize>, from_right: bool) -> Vec<String> {
    let Some(max) = max else {
        return s.split_whitespace().map(str::to_owned).collect();
    };
    let mut parts = Vec::new();
    if from_right {
        let mut rest = s.trim_end();
        while !rest.is_empty() {
            if parts.len() == max {
                parts.push(rest.to_owned());
                break;
            }
            let start =
                rest.rfind(char::is_whitespace).map_or(0, |i| i + rest[i..].chars().next().map_or(1, char::len_utf8));
            parts.push(rest[start..].to_owned());
            rest = rest[..start].trim_end();
        }
        parts.reverse();
    } else {
        let mut rest = s.trim_start();
        while !rest.is_empty() {
            if parts.len() == max {
                parts.push(rest.to_owned());
                break;
            }
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            parts.push(rest[..end].to_owned());
            rest = rest[end..].trim_start();
        }
    }
    parts
}

fn map_method(state: &State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    let a = Args::new(args)?;
    match method {
        "items" => {
            a.at_most(0, method)?;
            state.apply_filter("items", std::slice::from_ref(value))
        }
        "keys" => {
            a.at_most(0, method)?;
            Ok(Value::from(value.try_iter()?.collect::<Vec<_>>()))
        }
        "values" => {
            a.at_most(0, method)?;
            let mut out = Vec::new();
            for key in value.try_iter()? {
                out.push(value.get_item(&key)?);
            }
            Ok(Value::from(out))
        }
        "get" => {
            let key = a.positional.first().cloned().ok_or_else(|| Error::from(ErrorKind::MissingArgument))?;
            let default = a.positional.get(1).cloned().unwrap_or(Value::from(()));
            if a.positional.len() > 2 {
                return Err(Error::new(ErrorKind::TooManyArguments, "get() takes at most 2 arguments"));
            }
            let v = value.get_item(&key)?;
            Ok(if v.is_undefined() { default } else { v })
        }
        _ => Err(Error::from(ErrorKind::UnknownMethod)),
    }
}
