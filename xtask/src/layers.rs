//! The kernel's module graph, checked against the layer list in docs/design.md.
//!
//! Why: "arch is a leaf, subsystems do not call each other in cycles" is a rule that erodes
//! one `crate::` path at a time unless something fails when it is broken. This module reads
//! every `kernel/src/**/*.rs`, finds the kernel modules each top module names (`crate::x`,
//! `$crate::x`, `use crate::{x, y::z}` groups, `super::x` that climbs to the crate root, and
//! bare `x::` paths in the crate root), and compares the arrows with the section "Layers" of
//! docs/design.md. The doc is the only copy of the allowed list: the test parses it, so the
//! two cannot drift.
//!
//! The doc's format (inside the section, one line per layer, highest first):
//!
//! ```text
//! - layer `main`, `tests`: any
//! - layer `proc`, `res`: `proc` -> `res`
//! - layer `arch`
//! - up `arch` -> `main`: why
//! - composition `percore`: why
//! ```
//!
//! A module may name any module of a *lower* layer. Within a layer only the arrows listed
//! after the colon are allowed (`any` allows every arrow out of that layer's modules).
//! An `up` line allows one arrow to a higher layer. A `composition` module is a record
//! that holds every subsystem's per-core state: any module may name it, and it may name
//! any module. Every top module of the kernel must be in exactly one layer.
//!
//! `cargo xtask layers` prints the graph and the check; `cargo test -p xtask` runs the check.

use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Arrows between top modules: from -> {to}.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The allowed structure read from docs/design.md.
#[derive(Debug, Default)]
pub struct Layers {
    /// Layer index of each module (0 = lowest).
    layer: BTreeMap<String, usize>,
    /// Arrows allowed inside a layer.
    same: BTreeSet<(String, String)>,
    /// Modules whose layer line says `any`.
    any: BTreeSet<String>,
    /// Arrows allowed to a higher layer.
    up: BTreeSet<(String, String)>,
    /// Composition modules (arrows in and out allowed).
    composition: BTreeSet<String>,
}

impl Layers {
    /// Parse the "Layers" section of the design document.
    pub fn parse(doc: &str) -> Result<Layers> {
        let start = doc
            .lines()
            .position(|l| l.starts_with("## ") && l.trim_end().ends_with("Layers"))
            .context("docs/design.md has no \"## ... Layers\" section")?;
        let section: Vec<&str> = doc
            .lines()
            .skip(start + 1)
            .take_while(|l| !l.starts_with("## "))
            .collect();
        let mut out = Layers::default();
        for l in &section {
            let l = l.trim_start();
            if let Some(rest) = l.strip_prefix("- up ") {
                let (arrow, _why) = rest.split_once(':').unwrap_or((rest, ""));
                match ticked(arrow).as_slice() {
                    [a, b] if arrow.contains("->") => out.up.insert((a.clone(), b.clone())),
                    _ => bail!("cannot read up arrow {arrow:?} in docs/design.md"),
                };
            } else if let Some(rest) = l.strip_prefix("- composition ") {
                let (names, _why) = rest.split_once(':').unwrap_or((rest, ""));
                out.composition.extend(ticked(names));
            }
        }
        let lines: Vec<&str> = section
            .iter()
            .copied()
            .filter(|l| l.trim_start().starts_with("- layer "))
            .collect();
        if lines.is_empty() {
            bail!("the Layers section of docs/design.md lists no \"- layer\" lines");
        }
        let n = lines.len();
        for (i, line) in lines.iter().enumerate() {
            let index = n - 1 - i;
            let body = line.trim_start().trim_start_matches("- layer ");
            let (names, rest) = body.split_once(':').unwrap_or((body, ""));
            let names = ticked(names);
            for m in &names {
                if out.layer.insert(m.clone(), index).is_some() || out.composition.contains(m) {
                    bail!("module `{m}` is in two layers of docs/design.md");
                }
            }
            let rest = rest.trim();
            if rest == "any" {
                out.any.extend(names.iter().cloned());
                continue;
            }
            for arrow in rest.split(',').map(str::trim).filter(|a| !a.is_empty()) {
                let ends = ticked(arrow);
                match ends.as_slice() {
                    [a, b] if arrow.contains("->") => {
                        if !names.contains(a) || !names.contains(b) {
                            bail!("arrow {arrow} in docs/design.md leaves its layer");
                        }
                        out.same.insert((a.clone(), b.clone()));
                    }
                    _ => bail!("cannot read arrow {arrow:?} in docs/design.md"),
                }
            }
        }
        Ok(out)
    }

    /// Whether `from` may name `to`.
    pub fn allows(&self, from: &str, to: &str) -> bool {
        if self.composition.contains(from)
            || self.composition.contains(to)
            || self.up.contains(&(from.to_string(), to.to_string()))
        {
            return true;
        }
        match (self.layer.get(from), self.layer.get(to)) {
            (Some(a), Some(b)) => {
                a > b
                    || self.any.contains(from)
                    || (a == b && self.same.contains(&(from.to_string(), to.to_string())))
            }
            _ => false,
        }
    }

    /// Every arrow of `graph` the layers do not allow, and every module missing from them.
    pub fn violations(&self, graph: &Graph, modules: &BTreeSet<String>) -> Vec<String> {
        let mut v: Vec<String> = modules
            .iter()
            .filter(|m| !self.layer.contains_key(*m) && !self.composition.contains(*m))
            .map(|m| format!("module `{m}` is in no layer of docs/design.md"))
            .collect();
        for (from, tos) in graph {
            for to in tos {
                if !self.allows(from, to) {
                    v.push(format!("{from} -> {to} is not allowed by docs/design.md"));
                }
            }
        }
        v
    }
}

/// The names between backticks in `s`.
fn ticked(s: &str) -> Vec<String> {
    s.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, n)| n.trim().to_string())
        .collect()
}

/// The kernel's top modules (from the files under `src`) and the arrows between them.
pub fn kernel_graph(src: &Path) -> Result<(BTreeSet<String>, Graph)> {
    let mut files = Vec::new();
    collect_rs(src, &mut files)?;
    let mut modules = BTreeSet::new();
    let mut parsed = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(src)?;
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        // Module path of the file: a/b.rs -> [a, b]; a/mod.rs -> [a]; main.rs -> [].
        let mut path = parts.clone();
        if path.last().map(String::as_str) == Some("mod") || path == ["main"] {
            path.pop();
        }
        let top = parts[0].clone();
        modules.insert(top.clone());
        parsed.push((top, path, std::fs::read_to_string(f)?));
    }
    let mut graph = Graph::new();
    for (top, path, text) in &parsed {
        for to in file_targets(text, path, &modules) {
            if &to != top && modules.contains(&to) {
                graph.entry(top.clone()).or_default().insert(to);
            }
        }
    }
    Ok((modules, graph))
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            collect_rs(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path, // ::
    Open,
    Close,
    Comma,
    Bang,
    Other,
}

/// Tokens of Rust source with comments, strings and character literals dropped.
fn tokens(s: &str) -> Vec<Tok> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'#') | Some(b'"')) && {
            let mut j = i + 1;
            while b.get(j) == Some(&b'#') {
                j += 1;
            }
            b.get(j) == Some(&b'"')
        } {
            // Raw string r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push(Tok::Other);
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(Tok::Other);
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            } else if let Some(len) = s[i + 1..].chars().next().map(char::len_utf8) {
                if b.get(i + 1 + len) == Some(&b'\'') {
                    i += 2 + len;
                } else {
                    i += 1;
                }
            } else {
                i += 1;
            }
            out.push(Tok::Other);
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Other);
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push(Tok::Path);
            i += 2;
        } else {
            out.push(match c {
                b'{' => Tok::Open,
                b'}' => Tok::Close,
                b',' => Tok::Comma,
                b'!' => Tok::Bang,
                _ if c.is_ascii_whitespace() => {
                    i += 1;
                    continue;
                }
                _ => Tok::Other,
            });
            i += 1;
        }
    }
    out
}

/// The first names after a path prefix ending at `toks[i]` (just after a `::`): one
/// identifier (not a macro's: `crate::kprintln!`), or each item of a `{a, b::c}` group.
fn names_at(toks: &[Tok], i: usize) -> Vec<String> {
    match toks.get(i) {
        Some(Tok::Ident(_)) if toks.get(i + 1) == Some(&Tok::Bang) => Vec::new(),
        Some(Tok::Ident(n)) => vec![n.clone()],
        Some(Tok::Open) => {
            let mut out = Vec::new();
            let mut depth = 0;
            let mut expect = true;
            for t in &toks[i..] {
                match t {
                    Tok::Open => {
                        depth += 1;
                        if depth == 1 {
                            continue;
                        }
                    }
                    Tok::Close => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    Tok::Comma if depth == 1 => {
                        expect = true;
                        continue;
                    }
                    Tok::Ident(n) if depth == 1 && expect => out.push(n.clone()),
                    _ => {}
                }
                expect = false;
            }
            out
        }
        _ => Vec::new(),
    }
}

/// The top modules a file names, given the file's module path. A name at the crate root
/// that is not a module (`crate::kmain_bsp`, `crate::KERNEL_STACK_PAGES`) is the root's,
/// `main`.
fn file_targets(text: &str, file_path: &[String], modules: &BTreeSet<String>) -> Vec<String> {
    let root = |names: Vec<String>| {
        names.into_iter().map(|n| {
            if modules.contains(&n) || n == "self" {
                n
            } else {
                "main".to_string()
            }
        })
    };
    let toks = tokens(text);
    let mut out = Vec::new();
    // Inline `mod x {` blocks: the brace depth at which each was opened.
    let mut inline: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth = depth.saturating_sub(1);
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
            }
            Tok::Ident(k) if k == "mod" => {
                if let (Some(Tok::Ident(_)), Some(Tok::Open)) = (toks.get(i + 1), toks.get(i + 2)) {
                    inline.push(depth);
                }
            }
            Tok::Ident(k) if k == "crate" && toks.get(i + 1) == Some(&Tok::Path) => {
                out.extend(root(names_at(&toks, i + 2)));
            }
            Tok::Ident(k) if k == "super" && toks.get(i + 1) == Some(&Tok::Path) => {
                let mut supers = 0;
                let mut j = i;
                while matches!(&toks.get(j), Some(Tok::Ident(k)) if k == "super")
                    && toks.get(j + 1) == Some(&Tok::Path)
                {
                    supers += 1;
                    j += 2;
                }
                if supers == file_path.len() + inline.len() {
                    out.extend(root(names_at(&toks, j)));
                }
                i = j;
                continue;
            }
            Tok::Ident(n)
                if file_path.is_empty()
                    && inline.is_empty()
                    && modules.contains(n)
                    && toks.get(i + 1) == Some(&Tok::Path)
                    && !matches!(i.checked_sub(1).map(|p| &toks[p]), Some(Tok::Path)) =>
            {
                out.push(n.clone());
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// `cargo xtask layers`: print the kernel's module graph (of `src`, by default the
/// workspace's kernel/src) and check it.
pub fn run(src: Option<PathBuf>) -> Result<()> {
    let root = crate::build::workspace_root();
    let (modules, graph) = kernel_graph(&src.unwrap_or_else(|| root.join("kernel/src")))?;
    let n: usize = graph.values().map(BTreeSet::len).sum();
    println!("kernel module graph: {} modules, {n} arrows", modules.len());
    for (from, tos) in &graph {
        let tos: Vec<&str> = tos.iter().map(String::as_str).collect();
        println!("  {from} -> {}", tos.join(", "));
    }
    let doc = std::fs::read_to_string(root.join("docs/design.md"))?;
    let v = Layers::parse(&doc)?.violations(&graph, &modules);
    for line in &v {
        println!("  NOT ALLOWED: {line}");
    }
    if !v.is_empty() {
        bail!("{} arrows break the layers of docs/design.md", v.len());
    }
    println!("layers: every arrow is allowed by docs/design.md");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(text: &str, path: &[&str]) -> Vec<String> {
        let modules: BTreeSet<String> = ["a", "b", "c", "d", "e", "main"].map(String::from).into();
        let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        file_targets(text, &path, &modules)
    }

    #[test]
    fn paths_are_found_in_code_only() {
        let src = "use crate::a::x;\n// crate::b::y\nfn f() { let s = \"crate::c\"; crate::d::g('x', '\\n'); }\n/* crate::e */";
        assert_eq!(targets(src, &["m"]), ["a", "d"]);
        // Root items are `main`'s; exported macros are not followed.
        assert_eq!(
            targets("crate::boot_state(); crate::kprintln!(\"x\");", &["m"]),
            ["main"]
        );
    }

    #[test]
    fn groups_super_and_root_paths() {
        assert_eq!(
            targets("use crate::{a, b::{x, y}, c as z};", &["m"]),
            ["a", "b", "c"]
        );
        // From m/n.rs one `super` is m itself; two climb to the root.
        assert_eq!(
            targets("use super::a; use super::super::b;", &["m", "n"]),
            ["b"]
        );
        // An inline module adds a level.
        assert_eq!(targets("mod t { use super::super::c; }", &["m"]), ["c"]);
        // The crate root names modules without `crate::`, but not after another path.
        assert_eq!(
            targets("a::f(); x::b::g(); $crate::e::h()", &[]),
            ["a", "e"]
        );
    }

    #[test]
    fn layer_rules() {
        let doc = "x\n## 3. Layers\n- layer `top`: any\n- layer `p`, `q`: `p` -> `q`\n- layer `leaf`\n- up `leaf` -> `q`: an event\n- composition `rec`: fields\n## Next\n- layer `z`\n";
        let l = Layers::parse(doc).unwrap();
        assert!(l.allows("p", "leaf") && l.allows("p", "q") && l.allows("top", "p"));
        assert!(!l.allows("q", "p") && !l.allows("leaf", "p") && !l.allows("p", "top"));
        assert!(l.allows("leaf", "q") && l.allows("leaf", "rec") && l.allows("rec", "top"));
        assert!(
            !l.allows("z", "leaf"),
            "lines after the section are not read"
        );
        let modules: BTreeSet<String> = ["p", "q", "r", "rec"].map(String::from).into();
        let mut g = Graph::new();
        g.entry("q".into()).or_default().insert("p".into());
        assert_eq!(l.violations(&g, &modules).len(), 2);
    }

    #[test]
    fn kernel_follows_the_layers_of_docs_design() {
        let root = crate::build::workspace_root();
        let (modules, graph) = kernel_graph(&root.join("kernel/src")).unwrap();
        assert!(modules.contains("arch") && modules.len() > 10);
        let doc = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
        let v = Layers::parse(&doc).unwrap().violations(&graph, &modules);
        assert!(
            v.is_empty(),
            "kernel module arrows break docs/design.md:\n{}",
            v.join("\n")
        );
    }
}
