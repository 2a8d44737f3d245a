//! The template sandbox: what one render may build, compute and take.
//!
//! Templates come with model files, so they are untrusted code that runs inside the host app,
//! at `Engine::load` (probing) and at every send. minijinja's fuel counts VM instructions, but
//! one instruction can concatenate two huge strings, and one filter call can sort 100,000
//! items or ask for an indent of 10^11 spaces. So every render carries a [`Budget`]:
//! - memory: the bytes of every string, list and map the template builds, and of everything it
//!   writes (also into `{% set %}` blocks and macro calls), counted as they are made; a
//!   cumulative count, so it bounds what is alive at any moment;
//! - work: units paid by loop iterations, range items and by filters and methods in proportion
//!   to their input;
//! - time: a deadline checked wherever the template pays.
//!
//! The operators that build values (`~`, `+`, `*`) are routed here by rewriting the source
//! (`rewrite.rs`), which also makes every loop iteration and macro call pay for the literal
//! text its body writes; filters that can amplify their input (`indent`, `format`, `replace`,
//! `join`, `batch`, `slice`) check their result's size before building it; the other filters
//! and the Python string methods pay for their input before and for their result after. Going
//! over any budget is an [`Error::Template`](crate::Error::Template) that says which.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use minijinja::value::{Enumerator, Object, ObjectRepr, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

/// What one render may take. The defaults leave real templates (a few kB of work per
/// message) far inside, and stop hostile ones by memory or work within a few milliseconds to a
/// few hundred; the time limit is the last resort, set for slow phones and long conversations
/// under templates that are quadratic in the number of messages (Gemma 4's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateLimits {
    /// Bytes of values and output a render may build, beyond 16 bytes per byte of input
    /// (messages, tools and the template source).
    pub memory_bytes: usize,
    /// Work units (loop iterations, items and bytes handled by filters), beyond 16 per byte of
    /// input.
    pub work: u64,
    /// Wall-clock time of one render.
    pub time: Duration,
}

impl Default for TemplateLimits {
    fn default() -> Self {
        TemplateLimits { memory_bytes: 16 << 20, work: 5_000_000, time: Duration::from_secs(2) }
    }
}

/// Bytes counted for each item of a list or map (a minijinja `Value` and its share of the
/// container).
const ITEM_BYTES: usize = 32;

/// Work one run of a loop body or macro body pays: about what its VM instructions cost next to
/// the bytes a filter handles, so that a loop spinning without building anything stops on the
/// work budget after a few hundred thousand runs.
const RUN_WORK: u64 = 20;

/// Longest `raise_exception` message kept: the rest of a template's message is cut.
const MAX_EXCEPTION_MESSAGE: usize = 1024;

/// Deepest nesting of lists and maps a template may build: dropping, comparing or printing a
/// value recurses once per level, and the host's thread may have a small stack.
const MAX_NESTING: usize = 64;

/// Longest `range()`, as minijinja's own.
const MAX_RANGE: u64 = 100_000;

/// Which budget a render ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exceeded {
    Memory(usize),
    Work(u64),
    Time(Duration),
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exceeded::Memory(n) => write!(f, "the template built more than its memory budget of {n} bytes"),
            Exceeded::Work(n) => write!(f, "the template did more than its work budget of {n} units"),
            Exceeded::Time(t) => write!(f, "the template ran longer than its time limit of {} ms", t.as_millis()),
        }
    }
}

struct Budget {
    memory_limit: usize,
    work_limit: u64,
    time_limit: Duration,
    deadline: Instant,
    memory: usize,
    work: u64,
    exceeded: Option<Exceeded>,
}

thread_local! {
    /// The budget of the render running on this thread (renders are synchronous).
    static ACTIVE: RefCell<Option<Budget>> = const { RefCell::new(None) };
}

/// A render's budget, installed for as long as this lives.
pub(super) struct Session {
    previous: Option<Budget>,
}

impl Session {
    pub(super) fn start(limits: &TemplateLimits, input_bytes: usize) -> Session {
        let scaled = input_bytes.saturating_mul(16);
        let budget = Budget {
            memory_limit: limits.memory_bytes.saturating_add(scaled),
            work_limit: limits.work.saturating_add(scaled as u64),
            time_limit: limits.time,
            deadline: Instant::now() + limits.time,
            memory: 0,
            work: 0,
            exceeded: None,
        };
        Session { previous: ACTIVE.with(|a| a.borrow_mut().replace(budget)) }
    }

    /// The budget the render ran out of, if it did.
    pub(super) fn exceeded(&self) -> Option<Exceeded> {
        ACTIVE.with(|a| a.borrow().as_ref().and_then(|b| b.exceeded))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let previous = self.previous.take();
        ACTIVE.with(|a| *a.borrow_mut() = previous);
    }
}

/// Pays `memory` bytes and `work` units from the running render's budget and checks its
/// deadline. Outside a render (no budget installed) nothing is counted.
pub(super) fn charge(memory: usize, work: u64) -> Result<(), Error> {
    ACTIVE.with(|a| {
        let mut a = a.borrow_mut();
        let Some(b) = a.as_mut() else { return Ok(()) };
        if b.exceeded.is_none() {
            b.memory = b.memory.saturating_add(memory);
            b.work = b.work.saturating_add(work);
            if b.memory > b.memory_limit {
                b.exceeded = Some(Exceeded::Memory(b.memory_limit));
            } else if b.work > b.work_limit {
                b.exceeded = Some(Exceeded::Work(b.work_limit));
            } else if Instant::now() > b.deadline {
                b.exceeded = Some(Exceeded::Time(b.time_limit));
            }
        }
        match b.exceeded {
            Some(e) => Err(Error::new(ErrorKind::InvalidOperation, e.to_string())),
            None => Ok(()),
        }
    })
}

/// Bytes the running render may still build (everything outside a render).
pub(super) fn memory_left() -> usize {
    ACTIVE.with(|a| a.borrow().as_ref().map_or(usize::MAX, |b| b.memory_limit.saturating_sub(b.memory)))
}

/// Pays for a Python string method on `s` (`content.replace(...)`, `sep.join(...)`): its input
/// now, its result's size before it is built where that can exceed the input.
pub(super) fn charge_method(s: &str, method: &str, args: &[Value]) -> Result<(), Error> {
    charge(0, s.len() as u64 + 1)?;
    let bound = match method {
        "replace" => {
            let mut with_self = vec![Value::from(s)];
            with_self.extend(args.iter().cloned());
            result_bound("replace", &with_self)?
        }
        "split" | "rsplit" | "splitlines" => result_bound("split", &[Value::from(s)])?,
        "join" => match args.first() {
            Some(items) => result_bound("join", &[items.clone(), Value::from(s)])?,
            None => None,
        },
        _ => None,
    };
    charge(bound.unwrap_or(0), 0)
}

/// What a value costs to hold, not counting what its items hold (they were paid for when built).
pub(super) fn size_of(v: &Value) -> usize {
    match v.kind() {
        ValueKind::String => v.as_str().map_or(0, str::len),
        ValueKind::Seq | ValueKind::Map => v.len().unwrap_or(0).saturating_mul(ITEM_BYTES),
        _ => 16,
    }
}

/// Registers the budgeted operators, functions and filters.
pub(super) fn install(env: &mut Environment<'static>) {
    env.add_function("__tern_cat", concat);
    env.add_function("__tern_add", add);
    env.add_function("__tern_mul", mul);
    env.add_function("__tern_charge", |bytes: u64| -> Result<Value, Error> {
        charge(usize::try_from(bytes).unwrap_or(usize::MAX), RUN_WORK)?;
        Ok(Value::from(()))
    });
    env.add_function("__tern_list", |items: Rest<Value>| -> Result<Value, Error> {
        check_nesting(&items)?;
        charge(items.len().saturating_mul(ITEM_BYTES), items.len() as u64)?;
        Ok(Value::from(items.0))
    });
    env.add_function("__tern_map", |flat: Rest<Value>| -> Result<Value, Error> {
        check_nesting(&flat)?;
        charge(flat.len().saturating_mul(ITEM_BYTES), flat.len() as u64)?;
        // A key given twice keeps its last value, as in Python.
        Ok(Value::from_iter(flat.0.chunks_exact(2).map(|kv| (kv[0].clone(), kv[1].clone()))))
    });
    // namespace() and dict() nest the values given to them too.
    env.add_function("__tern_builtin_namespace", minijinja::functions::namespace);
    env.add_function("__tern_builtin_dict", minijinja::functions::dict);
    for name in ["namespace", "dict"] {
        env.add_function(name, move |state: &State, args: Rest<Value>| -> Result<Value, Error> {
            check_nesting(&args)?;
            charge(args.len().saturating_mul(ITEM_BYTES), 1)?;
            let builtin = state
                .lookup(if name == "dict" { "__tern_builtin_dict" } else { "__tern_builtin_namespace" })
                .ok_or_else(|| Error::from(ErrorKind::UnknownFunction))?;
            builtin.call(state, &args)
        });
    }
    env.add_function("__tern_slice", slice_op);
    env.add_function("__tern_in", |state: &State, needle: Value, haystack: Value| -> Result<Value, Error> {
        charge(0, input_units(&haystack).saturating_add(1))?;
        state.perform_test("in", &[needle, haystack]).map(Value::from)
    });
    env.add_function("range", range);
    env.add_function("raise_exception", raise_exception);
    // Debug dumps of the whole state and pretty-printing have no size bound worth keeping.
    env.add_function("debug", |_: Rest<Value>| -> Result<Value, Error> {
        Err(Error::new(ErrorKind::UnknownFunction, "debug() is not available"))
    });
    env.add_filter("pprint", |_: Value| -> Result<Value, Error> {
        Err(Error::new(ErrorKind::UnknownFilter, "pprint is not available"))
    });
    env.add_filter("batch", batch);
    env.add_filter("slice", slice);

    // Every other builtin filter pays for its input and result; the original stays reachable
    // under a reserved name (templates may not use `__tern` names).
    macro_rules! budgeted {
        ($($name:literal => $f:path),* $(,)?) => {$(
            env.add_filter(concat!("__tern_builtin_", $name), $f);
            env.add_filter($name, |state: &State, args: Rest<Value>| -> Result<Value, Error> {
                builtin_filter(state, $name, concat!("__tern_builtin_", $name), &args)
            });
        )*};
    }
    budgeted! {
        "lower" => minijinja::filters::lower,
        "upper" => minijinja::filters::upper,
        "title" => minijinja::filters::title,
        "capitalize" => minijinja::filters::capitalize,
        "replace" => minijinja::filters::replace,
        "dictsort" => minijinja::filters::dictsort,
        "items" => minijinja::filters::items,
        "reverse" => minijinja::filters::reverse,
        "trim" => minijinja::filters::trim,
        "join" => minijinja::filters::join,
        "split" => minijinja::filters::split,
        "lines" => minijinja::filters::lines,
        "min" => minijinja::filters::min,
        "max" => minijinja::filters::max,
        "sort" => minijinja::filters::sort,
        "list" => minijinja::filters::list,
        "string" => minijinja::filters::string,
        "sum" => minijinja::filters::sum,
        "indent" => minijinja::filters::indent,
        "select" => minijinja::filters::select,
        "reject" => minijinja::filters::reject,
        "selectattr" => minijinja::filters::selectattr,
        "rejectattr" => minijinja::filters::rejectattr,
        "map" => minijinja::filters::map,
        "groupby" => minijinja::filters::groupby,
        "unique" => minijinja::filters::unique,
        "chain" => minijinja::filters::chain,
        "zip" => minijinja::filters::zip,
        "format" => minijinja::filters::format,
        "escape" => minijinja::filters::escape,
        "e" => minijinja::filters::escape,
    }
}

/// The number of items or bytes a value hands to a filter.
fn input_units(v: &Value) -> u64 {
    match v.kind() {
        ValueKind::String => v.as_str().map_or(0, str::len) as u64,
        _ => v.len().unwrap_or(1) as u64,
    }
}

/// The display length of a value as `join`, `format` and `~` print it.
fn printed_len(v: &Value) -> usize {
    match v.as_str() {
        Some(s) => s.len(),
        None => v.to_string().len(),
    }
}

fn int_arg(v: Option<&Value>) -> Option<u64> {
    v.filter(|v| !v.is_kwargs()).and_then(|v| i64::try_from(v.clone()).ok()).map(|n| n.max(0) as u64)
}

fn str_arg(v: Option<&Value>) -> Option<&str> {
    v.filter(|v| !v.is_kwargs()).and_then(Value::as_str)
}

/// The largest result an amplifying filter could build from `args`, where it can be larger than
/// its input.
fn result_bound(name: &str, args: &[Value]) -> Result<Option<usize>, Error> {
    let Some(first) = args.first() else { return Ok(None) };
    let len = first.as_str().map_or(0, str::len);
    Ok(Some(match name {
        "indent" => {
            // The width may be a string; every line gets it.
            let width = match args.get(1) {
                Some(v) if v.as_str().is_some() => v.as_str().map_or(0, str::len),
                v => int_arg(v).map_or(4, |w| usize::try_from(w).unwrap_or(usize::MAX)),
            };
            let lines = first.as_str().map_or(1, |s| s.bytes().filter(|&b| b == b'\n').count() + 1);
            len.saturating_add(lines.saturating_mul(width))
        }
        "replace" => {
            let (Some(old), Some(new)) = (str_arg(args.get(1)), str_arg(args.get(2))) else { return Ok(None) };
            let most = if old.is_empty() { len + 1 } else { len / old.len() };
            let most = int_arg(args.get(3)).map_or(most, |n| most.min(usize::try_from(n).unwrap_or(usize::MAX)));
            len.saturating_add(most.saturating_mul(new.len()))
        }
        "join" => {
            let sep = str_arg(args.get(1)).map_or(0, str::len);
            let mut total = 0usize;
            let mut n = 0usize;
            for item in first.try_iter()? {
                charge(0, 1)?;
                total = total.saturating_add(printed_len(&item));
                n += 1;
            }
            total.saturating_add(n.saturating_mul(sep))
        }
        "format" => {
            // printf-style: widths and precisions are numbers in the format string.
            let mut widths = 0usize;
            let mut number = 0usize;
            for b in first.as_str().unwrap_or_default().bytes() {
                if b.is_ascii_digit() {
                    number = number.saturating_mul(10).saturating_add((b - b'0') as usize);
                } else {
                    widths = widths.saturating_add(number);
                    number = 0;
                }
            }
            let printed: usize = args[1..].iter().map(printed_len).fold(0, usize::saturating_add);
            len.saturating_add(widths.saturating_add(number)).saturating_add(printed.saturating_mul(2))
        }
        "escape" | "e" => len.saturating_mul(6),
        // Every part may be one character: a list item each.
        "split" | "lines" => len.saturating_add(len.saturating_add(1).saturating_mul(ITEM_BYTES)),
        _ => return Ok(None),
    }))
}

/// Refuses values that would nest more than [`MAX_NESTING`] levels once put in a container,
/// paying a work unit per value looked at.
fn check_nesting(items: &[Value]) -> Result<(), Error> {
    fn too_deep(v: &Value, room: usize) -> Result<bool, Error> {
        if !matches!(v.kind(), ValueKind::Seq | ValueKind::Map) {
            return Ok(false);
        }
        charge(0, 1)?;
        if room == 0 {
            return Ok(v.len() != Some(0));
        }
        for child in v.try_iter()? {
            let child = if v.kind() == ValueKind::Map { v.get_item(&child)? } else { child };
            if too_deep(&child, room - 1)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
    for item in items {
        if too_deep(item, MAX_NESTING - 1)? {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("values nested deeper than {MAX_NESTING} levels"),
            ));
        }
    }
    Ok(())
}

fn builtin_filter(state: &State, name: &str, builtin: &str, args: &[Value]) -> Result<Value, Error> {
    let units = args.first().map_or(1, input_units).max(1);
    // Sorting-like filters compare n log n times.
    let log = 64 - units.leading_zeros() as u64;
    let work = match name {
        "sort" | "dictsort" | "groupby" | "unique" => units.saturating_mul(log.max(1)),
        _ => units,
    };
    charge(0, work)?;
    let bound = result_bound(name, args)?;
    if let Some(bytes) = bound {
        charge(bytes, 0)?;
    }
    let rv = state.apply_filter(builtin, args)?;
    if bound.is_none() {
        charge(size_of(&rv), 0)?;
    }
    Ok(rv)
}

/// `a ~ b`: both printed and joined.
fn concat(a: Value, b: Value) -> Result<Value, Error> {
    let (sa, sb) = (a.to_string(), b.to_string());
    charge(sa.len() + sb.len(), 1)?;
    Ok(Value::from(sa + &sb))
}

fn is_seq(v: &Value) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
}

/// The items of a sequence, paid for as they are collected.
fn items(v: &Value) -> Result<Vec<Value>, Error> {
    let mut out = Vec::with_capacity(v.len().unwrap_or(0).min(1024));
    for item in v.try_iter()? {
        charge(ITEM_BYTES, 1)?;
        out.push(item);
    }
    Ok(out)
}

/// Integer or float arithmetic as minijinja does it (booleans count as integers).
fn numeric(
    a: &Value,
    b: &Value,
    op: &str,
    int: fn(i128, i128) -> Option<i128>,
    float: fn(f64, f64) -> f64,
) -> Result<Value, Error> {
    let is_num = |v: &Value| matches!(v.kind(), ValueKind::Number | ValueKind::Bool);
    if !is_num(a) || !is_num(b) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("tried to use {op} operator on unsupported types {} and {}", a.kind(), b.kind()),
        ));
    }
    let as_int = |v: &Value| {
        if v.kind() == ValueKind::Bool {
            Some(v.is_true() as i128)
        } else {
            i128::try_from(v.clone()).ok().filter(|_| v.is_integer())
        }
    };
    if let (Some(x), Some(y)) = (as_int(a), as_int(b)) {
        return match int(x, y) {
            Some(r) => Ok(match i64::try_from(r) {
                Ok(r) => Value::from(r),
                Err(_) => Value::from(r),
            }),
            None => Err(Error::new(ErrorKind::InvalidOperation, format!("unable to calculate {a} {op} {b}"))),
        };
    }
    let (x, y) = (f64::try_from(a.clone())?, f64::try_from(b.clone())?);
    Ok(Value::from(float(x, y)))
}

/// `a + b`: numbers, strings, or sequences (built whole and paid for).
fn add(a: Value, b: Value) -> Result<Value, Error> {
    if is_seq(&a) && is_seq(&b) {
        let mut out = items(&a)?;
        out.extend(items(&b)?);
        return Ok(Value::from(out));
    }
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        charge(x.len() + y.len(), 1)?;
        return Ok(Value::from([x, y].concat()));
    }
    numeric(&a, &b, "+", i128::checked_add, |x, y| x + y)
}

/// `a * b`: numbers, or a string or sequence repeated (its size paid before it is built).
fn mul(a: Value, b: Value) -> Result<Value, Error> {
    let repeated = if a.as_str().is_some() || is_seq(&a) {
        Some((&a, &b))
    } else if b.as_str().is_some() || is_seq(&b) {
        Some((&b, &a))
    } else {
        None
    };
    if let Some((what, n)) = repeated {
        let n = n.as_usize().ok_or_else(|| {
            Error::new(ErrorKind::InvalidOperation, "strings and sequences can only be multiplied with integers")
        })?;
        if let Some(s) = what.as_str() {
            charge(s.len().saturating_mul(n), n as u64)?;
            return Ok(Value::from(s.repeat(n)));
        }
        let len = what.len().unwrap_or(0);
        charge(len.saturating_mul(n).saturating_mul(ITEM_BYTES), len.saturating_mul(n) as u64)?;
        let one = items(what)?;
        let mut out = Vec::with_capacity(one.len().saturating_mul(n));
        for _ in 0..n {
            out.extend(one.iter().cloned());
        }
        return Ok(Value::from(out));
    }
    numeric(&a, &b, "*", i128::checked_mul, |x, y| x * y)
}

/// `range([start,] stop[, step])`, lazily: each item pays when it is read.
fn range(lower: i64, upper: Option<i64>, step: Option<i64>) -> Result<Value, Error> {
    let (start, stop) = match upper {
        Some(upper) => (lower, upper),
        None => (0, lower),
    };
    let step = step.unwrap_or(1);
    if step == 0 {
        return Err(Error::new(ErrorKind::InvalidOperation, "cannot create range with step of 0"));
    }
    let span = if step > 0 { stop as i128 - start as i128 } else { start as i128 - stop as i128 };
    let len = if span <= 0 { 0 } else { ((span - 1) / (step as i128).abs() + 1) as u64 };
    if len > MAX_RANGE {
        return Err(Error::new(ErrorKind::InvalidOperation, format!("range has too many elements (over {MAX_RANGE})")));
    }
    charge(16, 1)?;
    Ok(Value::from_object(Range { start, step, len: len as usize }))
}

#[derive(Debug)]
struct Range {
    start: i64,
    step: i64,
    len: usize,
}

impl Object for Range {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let i = key.as_usize().filter(|&i| i < self.len)?;
        // A failed charge ends the iteration; the render reports the budget at its end.
        charge(0, 1).ok()?;
        Some(Value::from(self.start + self.step * i as i64))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.len)
    }
}

/// `value[start:stop:step]` as Python slices strings and lists, the copy paid for first.
fn slice_op(value: Value, start: Option<i64>, stop: Option<i64>, step: Option<i64>) -> Result<Value, Error> {
    let step = step.unwrap_or(1);
    if step == 0 {
        return Err(Error::new(ErrorKind::InvalidOperation, "cannot slice by step size of 0"));
    }
    // Python's slice.indices: the positions taken, for a sequence of `len` items.
    let positions = |len: usize| -> Vec<usize> {
        let len = len as i64;
        let clamp = |v: Option<i64>, default: i64, lo: i64, hi: i64| match v {
            None => default,
            Some(v) if v < 0 => (v + len).max(lo),
            Some(v) => v.min(hi),
        };
        let (mut i, end) = if step > 0 {
            (clamp(start, 0, 0, len), clamp(stop, len, 0, len))
        } else {
            (clamp(start, len - 1, -1, len - 1), clamp(stop, -1, -1, len - 1))
        };
        let mut out = Vec::new();
        while (step > 0 && i < end) || (step < 0 && i > end) {
            out.push(i as usize);
            i += step;
        }
        out
    };
    if let Some(s) = value.as_str() {
        let chars: Vec<char> = {
            charge(s.len().saturating_mul(5), s.len() as u64)?;
            s.chars().collect()
        };
        return Ok(Value::from(positions(chars.len()).into_iter().map(|i| chars[i]).collect::<String>()));
    }
    if value.is_undefined() || value.is_none() {
        return Ok(Value::from(Vec::<Value>::new()));
    }
    if !matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("value of type {} cannot be sliced", value.kind()),
        ));
    }
    let all = items(&value)?;
    Ok(Value::from(positions(all.len()).into_iter().map(|i| all[i].clone()).collect::<Vec<_>>()))
}

/// `batch(n, fill)`: items in rows of `n`, the last padded with `fill` if given.
fn batch(value: Value, count: usize, fill: Option<Value>) -> Result<Value, Error> {
    if count == 0 {
        return Err(Error::new(ErrorKind::InvalidOperation, "count cannot be 0"));
    }
    let all = items(&value)?;
    let rows = all.len().div_ceil(count);
    charge(rows.saturating_mul(ITEM_BYTES), rows as u64)?;
    let mut out: Vec<Value> = Vec::with_capacity(rows);
    for chunk in all.chunks(count) {
        let mut row = chunk.to_vec();
        if let Some(fill) = &fill {
            let pad = count - row.len();
            charge(pad.saturating_mul(ITEM_BYTES), pad as u64)?;
            row.extend(std::iter::repeat_n(fill.clone(), pad));
        }
        out.push(Value::from(row));
    }
    Ok(Value::from(out))
}

/// `slice(n, fill)`: items in `n` columns, the shorter ones padded with `fill` if given.
fn slice(value: Value, count: usize, fill: Option<Value>) -> Result<Value, Error> {
    if count == 0 {
        return Err(Error::new(ErrorKind::InvalidOperation, "count cannot be 0"));
    }
    let all = items(&value)?;
    charge(count.saturating_mul(ITEM_BYTES), count as u64)?;
    let per = all.len() / count;
    let extra = all.len() % count;
    let mut out = Vec::new();
    let mut offset = 0;
    for i in 0..count {
        let take = per + usize::from(i < extra);
        let mut col = all[offset..offset + take].to_vec();
        offset += take;
        if let Some(fill) = &fill {
            if i >= extra {
                charge(ITEM_BYTES, 1)?;
                col.push(fill.clone());
            }
        }
        out.push(Value::from(col));
    }
    Ok(Value::from(out))
}

fn raise_exception(message: String) -> Result<Value, Error> {
    let mut end = message.len().min(MAX_EXCEPTION_MESSAGE);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    Err(Error::new(ErrorKind::InvalidOperation, message[..end].to_owned()))
}
