//! Rewrites a template's source so that what minijinja's VM does by itself goes through the
//! sandbox (`sandbox.rs`): the operators that build values (`a ~ b`, `a + b`, `a * b`) become
//! calls of budgeted functions, and every loop body and macro body starts by paying for the
//! literal text it writes (`{% do __tern_charge(N) %}`), which the VM emits without a hook.
//!
//! The rewrite works on spans of minijinja's own parse of the source, so it sees exactly the
//! expressions minijinja would run; whitespace control is kept by giving the inserted tag the
//! same closing marker (`-%}`, `+%}`) as the tag it follows.

use minijinja::machinery::ast::{self, BinOpKind, CallArg, CompareOpKind, Expr, Stmt};
use minijinja::machinery::{parse, Span, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;

use crate::error::{Error, Result};

/// Names the sandbox adds; a template may not use them itself.
pub(super) const RESERVED: &str = "__tern";

/// One replacement of `source[start..end]`.
struct Edit {
    start: usize,
    end: usize,
    text: String,
}

/// The budgeted form of `source`.
pub(super) fn rewrite(source: &str, name: &str) -> Result<String> {
    if source.contains(RESERVED) {
        return Err(Error::Template(format!("templates may not use names starting with `{RESERVED}`")));
    }
    let ws = WhitespaceConfig { keep_trailing_newline: false, lstrip_blocks: true, trim_blocks: true };
    let ast = parse(source, name, SyntaxConfig, ws).map_err(super::template_error)?;
    let mut edits = Vec::new();
    stmt(source, &ast, &mut edits)?;
    Ok(apply(source, 0, source.len(), &mut edits))
}

fn range(span: Span) -> (usize, usize) {
    (span.start_offset as usize, span.end_offset as usize)
}

/// `source[start..end]` with the edits inside it applied.
fn apply(source: &str, start: usize, end: usize, edits: &mut [Edit]) -> String {
    edits.sort_by_key(|e| (e.start, e.end));
    let mut out = String::with_capacity(end - start + edits.len() * 24);
    let mut at = start;
    for e in edits.iter().filter(|e| e.start >= start && e.end <= end) {
        if e.start < at {
            continue; // nested in an edit already applied (cannot happen: edits are outermost)
        }
        out.push_str(&source[at..e.start]);
        out.push_str(&e.text);
        at = e.end;
    }
    out.push_str(&source[at..end]);
    out
}

fn body(source: &str, stmts: &[Stmt<'_>], edits: &mut Vec<Edit>) -> Result<()> {
    for s in stmts {
        stmt(source, s, edits)?;
    }
    Ok(())
}

/// Bytes of literal text a body writes each time it runs, not counting nested loop and macro
/// bodies (they pay for themselves).
fn raw_bytes(stmts: &[Stmt<'_>]) -> usize {
    stmts
        .iter()
        .map(|s| match s {
            Stmt::EmitRaw(r) => r.raw.len(),
            Stmt::IfCond(c) => raw_bytes(&c.true_body) + raw_bytes(&c.false_body),
            Stmt::WithBlock(w) => raw_bytes(&w.body),
            Stmt::SetBlock(b) => raw_bytes(&b.body),
            Stmt::AutoEscape(b) => raw_bytes(&b.body),
            Stmt::FilterBlock(b) => raw_bytes(&b.body),
            Stmt::Block(b) => raw_bytes(&b.body),
            Stmt::ForLoop(f) => raw_bytes(&f.else_body),
            _ => 0,
        })
        .sum()
}

/// An edit inserting the charge of a body right after the tag that opens it, which ends at the
/// first `%}` at or after `after`.
fn charge_after(source: &str, after: usize, stmts: &[Stmt<'_>], edits: &mut Vec<Edit>) -> Result<()> {
    let close = source[after..]
        .find("%}")
        .map(|i| after + i)
        .ok_or_else(|| Error::Template("cannot find the end of a block tag".into()))?;
    let marker = match source.as_bytes()[..close].last() {
        Some(b'-') => "-",
        Some(b'+') => "+",
        _ => "",
    };
    let at = close + 2;
    let text = format!("{{% do {RESERVED}_charge({}) {marker}%}}", raw_bytes(stmts) + 1);
    edits.push(Edit { start: at, end: at, text });
    Ok(())
}

fn stmt(source: &str, s: &Stmt<'_>, edits: &mut Vec<Edit>) -> Result<()> {
    match s {
        Stmt::Template(t) => body(source, &t.children, edits)?,
        Stmt::EmitExpr(e) => expr(source, &e.expr, edits),
        Stmt::EmitRaw(_) => {}
        Stmt::ForLoop(f) => {
            // Targets are names (or tuples of names) assigned to, never rewritten.
            expr(source, &f.iter, edits);
            let mut tag_end = range(f.iter.span()).1.max(range(f.target.span()).1);
            if let Some(filter) = &f.filter_expr {
                expr(source, filter, edits);
                tag_end = tag_end.max(range(filter.span()).1);
            }
            charge_after(source, tag_end, &f.body, edits)?;
            body(source, &f.body, edits)?;
            body(source, &f.else_body, edits)?;
        }
        Stmt::IfCond(c) => {
            expr(source, &c.expr, edits);
            body(source, &c.true_body, edits)?;
            body(source, &c.false_body, edits)?;
        }
        Stmt::WithBlock(w) => {
            for (_, value) in &w.assignments {
                expr(source, value, edits);
            }
            body(source, &w.body, edits)?;
        }
        Stmt::Set(set) => expr(source, &set.expr, edits),
        Stmt::SetBlock(b) => {
            if let Some(f) = &b.filter {
                expr(source, f, edits);
            }
            body(source, &b.body, edits)?;
        }
        Stmt::AutoEscape(b) => {
            expr(source, &b.enabled, edits);
            body(source, &b.body, edits)?;
        }
        Stmt::FilterBlock(b) => {
            expr(source, &b.filter, edits);
            body(source, &b.body, edits)?;
        }
        Stmt::Block(b) => body(source, &b.body, edits)?,
        Stmt::Import(i) => {
            expr(source, &i.expr, edits);
            expr(source, &i.name, edits);
        }
        Stmt::FromImport(i) => expr(source, &i.expr, edits),
        Stmt::Extends(e) => expr(source, &e.name, edits),
        Stmt::Include(i) => expr(source, &i.name, edits),
        Stmt::Macro(m) => {
            let tag_start = range(s_span(s)).0;
            macro_decl(source, m, tag_start, edits)?;
        }
        Stmt::CallBlock(c) => {
            call(source, &c.call, edits);
            let tag_end = range(c.call.span()).1;
            for d in &c.macro_decl.defaults {
                expr(source, d, edits);
            }
            charge_after(source, tag_end, &c.macro_decl.body, edits)?;
            body(source, &c.macro_decl.body, edits)?;
        }
        Stmt::Do(d) => call(source, &d.call, edits),
        Stmt::Continue(_) | Stmt::Break(_) => {}
    }
    Ok(())
}

fn s_span(s: &Stmt<'_>) -> Span {
    match s {
        Stmt::Macro(m) => m.span(),
        _ => Span::default(),
    }
}

fn macro_decl(source: &str, m: &ast::Macro<'_>, tag_start: usize, edits: &mut Vec<Edit>) -> Result<()> {
    let mut tag_end = tag_start;
    for a in m.args.iter().chain(&m.defaults) {
        expr(source, a, edits);
        tag_end = tag_end.max(range(a.span()).1);
    }
    charge_after(source, tag_end, &m.body, edits)?;
    body(source, &m.body, edits)
}

fn call(source: &str, c: &ast::Call<'_>, edits: &mut Vec<Edit>) {
    expr(source, &c.expr, edits);
    args(source, &c.args, edits);
}

fn args(source: &str, list: &[CallArg<'_>], edits: &mut Vec<Edit>) {
    for a in list {
        match a {
            CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) | CallArg::KwargSplat(e) => {
                expr(source, e, edits)
            }
        }
    }
}

/// The budgeted function standing for an operator, if it builds values.
fn budgeted_op(op: BinOpKind) -> Option<&'static str> {
    match op {
        BinOpKind::Concat => Some("cat"),
        BinOpKind::Add => Some("add"),
        BinOpKind::Mul => Some("mul"),
        _ => None,
    }
}

/// Collects the edits of `e`: an operator that builds values becomes a call (its operands
/// rewritten inside it); anything else is searched for such operators.
fn expr(source: &str, e: &Expr<'_>, edits: &mut Vec<Edit>) {
    match e {
        Expr::BinOp(b) => {
            if let Some(f) = budgeted_op(b.op) {
                let (start, end) = range(b.span());
                let text = format!("{RESERVED}_{f}({}, {})", operand(source, &b.left), operand(source, &b.right));
                edits.push(Edit { start, end, text });
            } else {
                expr(source, &b.left, edits);
                expr(source, &b.right, edits);
            }
        }
        Expr::Var(_) | Expr::Const(_) => {}
        // Slices copy (reversing a string collects its characters first): paid for in the sandbox.
        Expr::Slice(s) => {
            let part = |p: &Option<Expr<'_>>| p.as_ref().map_or_else(|| "none".to_owned(), |p| operand(source, p));
            let text = format!(
                "{RESERVED}_slice({}, {}, {}, {})",
                operand(source, &s.expr),
                part(&s.start),
                part(&s.stop),
                part(&s.step)
            );
            let (start, end) = extent(source, e);
            edits.push(Edit { start, end, text });
        }
        Expr::UnaryOp(u) => expr(source, &u.expr, edits),
        // `a in b` scans `b`: paid for in the sandbox (chained comparisons are left alone).
        Expr::Compare(c) if c.ops.len() == 1 && matches!(c.ops[0].op, CompareOpKind::In | CompareOpKind::NotIn) => {
            let call = format!("{RESERVED}_in({}, {})", operand(source, &c.expr), operand(source, &c.ops[0].expr));
            let text = if matches!(c.ops[0].op, CompareOpKind::NotIn) { format!("(not {call})") } else { call };
            let (start, end) = extent(source, e);
            edits.push(Edit { start, end, text });
        }
        Expr::Compare(c) => {
            expr(source, &c.expr, edits);
            for op in &c.ops {
                expr(source, &op.expr, edits);
            }
        }
        Expr::IfExpr(i) => {
            expr(source, &i.test_expr, edits);
            expr(source, &i.true_expr, edits);
            if let Some(f) = &i.false_expr {
                expr(source, f, edits);
            }
        }
        Expr::Filter(f) => {
            if let Some(inner) = &f.expr {
                expr(source, inner, edits);
            }
            args(source, &f.args, edits);
        }
        Expr::Test(t) => {
            expr(source, &t.expr, edits);
            args(source, &t.args, edits);
        }
        Expr::GetAttr(g) => expr(source, &g.expr, edits),
        Expr::GetItem(g) => {
            expr(source, &g.expr, edits);
            expr(source, &g.subscript_expr, edits);
        }
        Expr::Call(c) => call(source, c, edits),
        // Literals built from values (`[ns.l]`) go through the sandbox, which bounds how deep
        // values nest: dropping or comparing a value recurses once per level.
        Expr::List(l) if l.as_const().is_none() => {
            let items: Vec<String> = l.items.iter().map(|i| operand(source, i)).collect();
            let (start, end) = range(l.span());
            edits.push(Edit { start, end, text: format!("{RESERVED}_list({})", items.join(", ")) });
        }
        Expr::Map(m) if m.as_const().is_none() => {
            let pairs: Vec<String> = m
                .keys
                .iter()
                .zip(&m.values)
                .map(|(k, v)| format!("{}, {}", operand(source, k), operand(source, v)))
                .collect();
            let (start, end) = range(m.span());
            edits.push(Edit { start, end, text: format!("{RESERVED}_map({})", pairs.join(", ")) });
        }
        Expr::List(_) | Expr::Map(_) => {}
    }
}

/// The rewritten text of an operand.
fn operand(source: &str, e: &Expr<'_>) -> String {
    let mut inner = Vec::new();
    expr(source, e, &mut inner);
    let (start, end) = extent(source, e);
    apply(source, start, end, &mut inner)
}

/// The source range of an expression. minijinja's span of a postfix expression (a filter, a
/// test, an attribute, an item, a slice, a call) starts at its operator, so the range starts
/// where the expression it applies to does; an expression that begins inside parentheses it
/// closes (`(a ~ b)|upper`) takes them in.
fn extent(source: &str, e: &Expr<'_>) -> (usize, usize) {
    let end = range(e.span()).1;
    let inner = match e {
        Expr::Filter(f) => f.expr.as_ref(),
        Expr::Test(t) => Some(&t.expr),
        Expr::GetAttr(g) => Some(&g.expr),
        Expr::GetItem(g) => Some(&g.expr),
        Expr::Slice(s) => Some(&s.expr),
        Expr::Call(c) => Some(&c.expr),
        Expr::Compare(c) => Some(&c.expr),
        _ => None,
    };
    let own = range(e.span()).0;
    let mut start = inner.map_or(own, |i| extent(source, i).0.min(own));
    let mut end = end;
    // Some spans start at an opening parenthesis and end before its match, others the reverse.
    let (mut closes, mut opens) = unbalanced(&source[start..end]);
    while closes > 0 {
        let before = source[..start].trim_end();
        if !before.ends_with('(') {
            break;
        }
        start = before.len() - 1;
        closes -= 1;
    }
    while opens > 0 {
        let after = &source[end..];
        let skipped = after.len() - after.trim_start().len();
        if !after[skipped..].starts_with(')') {
            break;
        }
        end += skipped + 1;
        opens -= 1;
    }
    (start, end)
}

/// How many `)` without a `(` before them, and `(` without a `)` after them, a piece of
/// expression source has, outside string literals.
fn unbalanced(text: &str) -> (usize, usize) {
    let (mut depth, mut unclosed) = (0usize, 0usize);
    let mut quote = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' => depth += 1,
                ')' if depth == 0 => unclosed += 1,
                ')' => depth -= 1,
                _ => {}
            },
        }
    }
    (unclosed, depth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_become_calls_and_bodies_pay() {
        let src = "{{ a ~ (b ~ c)|upper }}{% for x in xs -%}\n  {{ x + 1 }}!{% endfor %}{{ 2 * 3 - 1 }}";
        assert_eq!(
            rewrite(src, "t").unwrap(),
            "{{ __tern_cat(a, (__tern_cat(b, c))|upper) }}{% for x in xs -%}{% do __tern_charge(2) -%}\n  \
             {{ __tern_add(x, 1) }}!{% endfor %}{{ __tern_mul(2, 3) - 1 }}"
        );
        let src = "{% macro m(a, b='%}') %}[{{ a ~ b }}]{% endmacro %}{{ m(1) }}";
        assert_eq!(
            rewrite(src, "t").unwrap(),
            "{% macro m(a, b='%}') %}{% do __tern_charge(3) %}[{{ __tern_cat(a, b) }}]{% endmacro %}{{ m(1) }}"
        );
        assert!(rewrite("{{ __tern_add(1, 2) }}", "t").is_err());
        assert_eq!(
            rewrite("{% for a, b in [(x, 1), [2]] %}{% set ns.l = [ns.l] %}{{ {'k': v, 'c': 1} }}{% endfor %}", "t").unwrap(),
            "{% for a, b in __tern_list(__tern_list(x, 1), [2]) %}{% do __tern_charge(1) %}{% set ns.l = __tern_list(ns.l) %}\
             {{ __tern_map('k', v, 'c', 1) }}{% endfor %}"
        );
        assert_eq!(
            rewrite("{% set s = s + (\"x\" if s else \"\") + \"y\" %}", "t").unwrap(),
            "{% set s = __tern_add(__tern_add(s, (\"x\" if s else \"\")), \"y\") %}"
        );
        assert_eq!(
            rewrite("{{ 'a' + m[0]['c'] + m.x.y(1)[1:] }}", "t").unwrap(),
            "{{ __tern_add(__tern_add('a', m[0]['c']), __tern_slice(m.x.y(1), 1, none, none)) }}"
        );
        assert_eq!(
            rewrite("{{ x|e ~ (y is string) ~ (\"(\" ~ z)|trim }}", "t").unwrap(),
            "{{ __tern_cat(__tern_cat(x|e, y is string), (__tern_cat(\"(\", z))|trim) }}"
        );
    }
}
