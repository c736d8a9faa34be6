//! The import rules of the workspace, read from the source (no Docker, no
//! build of the code under test): ARCHITECTURE.md's "Invariant:" lines on
//! imports, kept by a test that fails when an import breaks them.
//!
//! - No two files of one crate import each other, directly or around a
//!   circle (a file imports another when it names an item of it in a `use`,
//!   a path or a macro's tokens).
//! - The product modules of `system` (every module outside `sim/`, and its
//!   binaries) never import the simulator tree `sim` (the simulator, the
//!   swarm driver, the mutant matrix's detection driver); `system` and
//!   `reports` never import the harness (Cargo already refuses the reverse
//!   dependency; the rule states it for paths too).
//!
//! The reading is syn's parse of each file; a path is resolved to the file
//! of its longest module prefix (`crate::`, `self::`, `super::`, a child
//! module's name, or the crate's own name from a binary). Test modules count
//! like any code: a product module's tests do not drive the simulator.
//!
//! `doctored_imports_break_the_rules` shows each rule failing: the real
//! sources with one import added.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// One source file: its path under the crate and its text.
#[derive(Clone)]
struct Source {
    rel: String,
    text: String,
}

/// A crate's sources, read from disk.
fn crate_sources(dir: &str) -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(dir)
        .join("src");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    assert!(!out.is_empty(), "no sources under {}", root.display());
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<Source>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p: PathBuf = e.unwrap().path();
        if p.is_dir() {
            walk(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(Source {
                rel: p
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/"),
                text: std::fs::read_to_string(&p).unwrap(),
            });
        }
    }
}

/// The module path a file defines (`lib.rs` is the root; a binary's file is
/// a root of its own, named `bin/NAME`).
fn module_of(rel: &str) -> Vec<String> {
    if rel == "lib.rs" || rel == "main.rs" {
        return Vec::new();
    }
    if rel.starts_with("bin/") {
        return vec![rel.trim_end_matches(".rs").to_string()];
    }
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    parts
}

/// One import: the file that names the other, and the names it takes.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

/// The file-to-file imports of one crate whose library is called `lib_name`.
fn edges(sources: &[Source], lib_name: &str) -> Edges {
    let files: BTreeMap<Vec<String>, String> = sources
        .iter()
        .map(|s| (module_of(&s.rel), s.rel.clone()))
        .collect();
    let mut all = Edges::new();
    for s in sources {
        let ast = syn::parse_file(&s.text).unwrap_or_else(|e| panic!("{}: {e}", s.rel));
        let module = module_of(&s.rel);
        let is_bin = s.rel.starts_with("bin/");
        let mut v = Collector {
            files: &files,
            lib_name,
            is_bin,
            file: &s.rel,
            base: module.clone(),
            inline: Vec::new(),
            out: &mut all,
        };
        v.visit_file(&ast);
    }
    all
}

struct Collector<'a> {
    files: &'a BTreeMap<Vec<String>, String>,
    lib_name: &'a str,
    is_bin: bool,
    file: &'a str,
    base: Vec<String>,
    /// Inline modules (`mod tests { ... }`) around the current item.
    inline: Vec<String>,
    out: &'a mut Edges,
}

impl Collector<'_> {
    fn current(&self) -> Vec<String> {
        let mut m = if self.is_bin {
            Vec::new()
        } else {
            self.base.clone()
        };
        m.extend(self.inline.iter().cloned());
        m
    }

    /// Whether `m` is a module of the crate (a file's or a prefix of one).
    fn is_module(&self, m: &[String]) -> bool {
        self.files.keys().any(|k| k.starts_with(m) && !m.is_empty())
    }

    /// Records the file that `segs` (a path as written here) points into.
    fn path(&mut self, segs: &[String]) {
        let Some(first) = segs.first() else { return };
        let abs: Vec<String> = match first.as_str() {
            "crate" if !self.is_bin => segs[1..].to_vec(),
            "self" | "super" => {
                let mut m = self.current();
                let mut rest = segs;
                if rest[0] == "self" {
                    rest = &rest[1..];
                }
                while rest.first().is_some_and(|s| s == "super") {
                    m.pop();
                    rest = &rest[1..];
                }
                m.extend(rest.iter().cloned());
                m
            }
            n if n == self.lib_name => segs[1..].to_vec(),
            n => {
                let mut m = self.current();
                m.push(n.to_string());
                if self.is_bin || !self.is_module(&m) {
                    return;
                }
                m.extend(segs[1..].iter().cloned());
                m
            }
        };
        // The longest prefix that is a file.
        let mut best: Option<(&String, usize)> = None;
        for (m, f) in self.files {
            if abs.starts_with(m) && best.is_none_or(|(_, l)| m.len() > l) {
                best = Some((f, m.len()));
            }
        }
        let Some((to, len)) = best else { return };
        if to == self.file {
            return;
        }
        let name = abs.get(len).cloned().unwrap_or_else(|| "*".to_string());
        self.out
            .entry((self.file.to_string(), to.clone()))
            .or_default()
            .insert(name);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, t: &syn::UseTree) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) if n.ident == "self" => {
                let p = prefix.clone();
                self.path(&p);
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                let p = prefix.clone();
                self.path(&p);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                let p = prefix.clone();
                self.path(&p);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => {
                let p = prefix.clone();
                self.path(&p);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// Paths inside a macro's tokens (`format!("{}", crate::a::b())`).
    fn tokens(&mut self, ts: proc_macro2::TokenStream) {
        let flat: Vec<proc_macro2::TokenTree> = ts.into_iter().collect();
        let mut i = 0;
        while i < flat.len() {
            match &flat[i] {
                proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                proc_macro2::TokenTree::Ident(id)
                    if matches!(id.to_string().as_str(), "crate" | "super" | "self")
                        || id == self.lib_name =>
                {
                    let mut segs = vec![id.to_string()];
                    let mut j = i + 1;
                    loop {
                        let colons = matches!(
                            (flat.get(j), flat.get(j + 1)),
                            (Some(proc_macro2::TokenTree::Punct(a)), Some(proc_macro2::TokenTree::Punct(b)))
                                if a.as_char() == ':' && b.as_char() == ':'
                        );
                        match (colons, flat.get(j + 2)) {
                            (true, Some(proc_macro2::TokenTree::Ident(n))) => {
                                segs.push(n.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    if segs.len() > 1 {
                        self.path(&segs);
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.inline.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.inline.pop();
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() > 1 {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.path(&segs);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

/// The circles of the file graph (strongly connected components of more
/// than one file), each with the edges inside it.
fn cycles(e: &Edges) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = e.keys().flat_map(|(a, b)| [a, b]).collect();
    let idx: BTreeMap<&String, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let names: Vec<&String> = nodes.iter().copied().collect();
    let mut adj = vec![Vec::new(); names.len()];
    for (a, b) in e.keys() {
        adj[idx[a]].push(idx[b]);
    }
    // Tarjan's algorithm, iterative enough for a few hundred files.
    struct T {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn strong(t: &mut T, adj: &[Vec<usize>], v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &adj[v] {
            match t.index[w] {
                None => {
                    strong(t, adj, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut c = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on[w] = false;
                c.push(w);
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                t.out.push(c);
            }
        }
    }
    let n = names.len();
    let mut t = T {
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            strong(&mut t, &adj, v);
        }
    }
    t.out
        .into_iter()
        .map(|c| {
            let mut c: Vec<String> = c.into_iter().map(|i| names[i].clone()).collect();
            c.sort();
            c
        })
        .collect()
}

/// Every broken rule of one crate, in words (empty: the rules hold).
fn violations(krate: &str, lib_name: &str, sources: &[Source]) -> Vec<String> {
    let e = edges(sources, lib_name);
    let mut out = Vec::new();
    for c in cycles(&e) {
        let inside: Vec<String> = e
            .iter()
            .filter(|((a, b), _)| c.contains(a) && c.contains(b))
            .map(|((a, b), n)| {
                format!(
                    "{a} -> {b}: {}",
                    n.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        out.push(format!(
            "{krate}: import cycle between {} files ({}): {}",
            c.len(),
            c.join(", "),
            inside.join("; ")
        ));
    }
    if krate == "system" {
        for ((from, to), names) in &e {
            if !from.starts_with("sim/") && to.starts_with("sim/") {
                out.push(format!(
                    "system: product module {from} imports the simulator tree ({to}: {}); \
                     move what it needs out of sim/, or move the importing code into sim/",
                    names.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    for s in sources {
        if krate != "harness" && (s.text.contains("harness::") || s.text.contains("use harness")) {
            let ast = syn::parse_file(&s.text).unwrap();
            let mut found = false;
            let mut v = NamesCrate {
                name: "harness",
                found: &mut found,
            };
            v.visit_file(&ast);
            if found {
                out.push(format!("{krate}: {} imports the harness", s.rel));
            }
        }
    }
    out
}

/// Whether a file names another crate in a path.
struct NamesCrate<'a> {
    name: &'a str,
    found: &'a mut bool,
}

impl<'ast> Visit<'ast> for NamesCrate<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if let syn::UseTree::Path(p) = &u.tree {
            *self.found |= p.ident == self.name;
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        *self.found |= p.segments.len() > 1 && p.segments[0].ident == self.name;
        syn::visit::visit_path(self, p);
    }
}

const CRATES: [(&str, &str); 3] = [
    ("system", "cdc_system"),
    ("harness", "harness"),
    ("reports", "reports"),
];

#[test]
fn the_workspace_keeps_its_import_rules() {
    let mut all = Vec::new();
    for (dir, lib) in CRATES {
        let sources = crate_sources(dir);
        let e = edges(&sources, lib);
        assert!(
            e.len() > 20,
            "{dir}: only {} file imports read; the reader is broken",
            e.len()
        );
        all.extend(violations(dir, lib, &sources));
    }
    assert!(all.is_empty(), "import rules broken:\n{}", all.join("\n"));
}

/// `sources` with `line` added at the end of `file`.
fn doctored(sources: &[Source], file: &str, line: &str) -> Vec<Source> {
    let mut out = sources.to_vec();
    let s = out
        .iter_mut()
        .find(|s| s.rel == file)
        .unwrap_or_else(|| panic!("no {file}"));
    s.text = format!("{}\n{line}\n", s.text);
    out
}

#[test]
fn doctored_imports_break_the_rules() {
    let system = crate_sources("system");
    assert!(violations("system", "cdc_system", &system).is_empty());
    let system_with =
        |file: &str, line: &str| violations("system", "cdc_system", &doctored(&system, file, line));

    // A product module that drives the simulator.
    let v = system_with("coordinator/mod.rs", "use crate::sim::Sim;");
    assert!(
        v.iter().any(|v| v.contains(
            "product module coordinator/mod.rs imports the simulator tree (sim/mod.rs: Sim)"
        )),
        "{v:?}"
    );

    // A circle: the messages leaf naming the coordinator, which imports it.
    let v = system_with("messages.rs", "use crate::coordinator::Coordinator;");
    assert!(
        v.iter().any(|v| v.contains("import cycle")
            && v.contains("coordinator/mod.rs")
            && v.contains("messages.rs -> coordinator/mod.rs: Coordinator")),
        "{v:?}"
    );

    // The same through a path in code and through a macro's tokens.
    let v = system_with(
        "node/clock.rs",
        "fn f() -> u64 { super::server::now_fenced(); 0 }",
    );
    assert!(
        v.iter()
            .any(|v| v.contains("node/clock.rs -> node/server.rs")),
        "{v:?}"
    );
    let v = system_with(
        "mutant.rs",
        "fn f() { let _ = format!(\"{:?}\", crate::failpoint::Faults::default()); }",
    );
    assert!(
        v.iter()
            .any(|v| v.contains("mutant.rs -> failpoint.rs: Faults")),
        "{v:?}"
    );

    // A binary of the product that names the simulator by the crate's name.
    let v = system_with("bin/cdc-server.rs", "use cdc_system::sim::swarm;");
    assert!(
        v.iter()
            .any(|v| v.contains("bin/cdc-server.rs imports the simulator tree")),
        "{v:?}"
    );

    // The harness, cycle-free, with one back edge: the runner naming the run
    // batch that drives it.
    let harness = crate_sources("harness");
    assert!(violations("harness", "harness", &harness).is_empty());
    let v = violations(
        "harness",
        "harness",
        &doctored(
            &harness,
            "runner/mod.rs",
            "use crate::runner::batch::RunRequest;",
        ),
    );
    assert!(
        v.iter()
            .any(|v| v.contains("import cycle") && v.contains("runner/batch.rs")),
        "{v:?}"
    );

    // The reports crate naming the harness.
    let reports = crate_sources("reports");
    let v = violations(
        "reports",
        "reports",
        &doctored(&reports, "html.rs", "use harness::checker;"),
    );
    assert!(
        v.iter().any(|v| v.contains("html.rs imports the harness")),
        "{v:?}"
    );
}

#[test]
fn the_reader_resolves_paths_the_way_rustc_does() {
    let files = |list: &[(&str, &str)]| -> Vec<Source> {
        list.iter()
            .map(|(rel, text)| Source {
                rel: rel.to_string(),
                text: text.to_string(),
            })
            .collect()
    };
    let e = edges(
        &files(&[
            ("lib.rs", "pub mod a; pub mod b; use a::X;"),
            ("a/mod.rs", "pub mod inner; use super::b::{Y, self}; pub struct X;"),
            ("a/inner.rs", "use super::super::b::Z; fn f() { crate::b::w(); }"),
            (
                "b.rs",
                "pub struct Y; pub struct Z; pub fn w() {} mod tests { use super::*; use std::fmt; }",
            ),
        ]),
        "k",
    );
    let got: Vec<String> = e
        .iter()
        .map(|((a, b), n)| {
            format!(
                "{a}>{b}:{}",
                n.iter().cloned().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "a/inner.rs>b.rs:Z,w",
            "a/mod.rs>b.rs:*,Y",
            "lib.rs>a/mod.rs:X",
        ]
    );
}
