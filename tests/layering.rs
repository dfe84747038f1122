//! The layering check: a top-level module imports only the modules listed before it (or
//! beside it, in the same layer) in ARCHITECTURE.md's "Layers" list. Reads every
//! `crate::` path (and `super::` paths that climb to the crate root) in `src/`, and every
//! use of an exported macro (they are named after the module that defines them); fails on
//! each edge that runs up the list, naming the file and line. Items under `#[cfg(test)]`
//! (unit-test modules) are not read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Layers from ARCHITECTURE.md: lines `N. `mod`, `mod` ...` under `## Layers`.
fn layers() -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md");
    let section = text
        .split("\n## Layers")
        .nth(1)
        .expect("ARCHITECTURE.md has a '## Layers' section");
    let section = section.split("\n## ").next().unwrap();
    let mut rank = BTreeMap::new();
    for line in section.lines() {
        let line = line.trim();
        let Some((num, rest)) = line.split_once(". ") else {
            continue;
        };
        let Ok(n) = num.parse::<usize>() else {
            continue;
        };
        // The module names are the backticked words before any dash of commentary.
        let names = rest.split(" — ").next().unwrap();
        for name in names.split('`').skip(1).step_by(2) {
            rank.insert(name.to_string(), n);
        }
    }
    assert!(
        rank.len() >= 8,
        "the Layers list names too few modules: {rank:?}"
    );
    rank
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to, and whether it is that module's root file
/// (where `super::` is the crate root).
fn module_of(src: &Path, file: &Path) -> Option<(String, bool)> {
    let rel = file.strip_prefix(src).unwrap();
    let parts: Vec<&str> = rel.iter().map(|p| p.to_str().unwrap()).collect();
    match parts.as_slice() {
        [f] if *f == "lib.rs" || *f == "main.rs" => None,
        [f] => Some((f.trim_end_matches(".rs").to_string(), true)),
        [dir, f] => Some((dir.to_string(), *f == "mod.rs")),
        [dir, ..] => Some((dir.to_string(), false)),
        [] => None,
    }
}

/// Code without comments (line comments and doc comments; block comments are not used).
fn code_of(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// Every top-level module a line refers to.
fn references(line: &str, is_root_file: bool, macros: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    let code = code_of(line);
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + 7..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // `crate::name!` is an exported macro: it lives at the crate root but belongs to
        // the module that defines it.
        if after[name.len()..].starts_with('!') {
            if let Some(m) = macros.get(&name) {
                out.push(m.clone());
            }
        } else if !name.is_empty() {
            out.push(name);
        }
        rest = after;
    }
    // `super::x` in a module's root file is `crate::x`; `super::super::x` anywhere below.
    let mut rest = code;
    while let Some(i) = rest.find("super::") {
        let after = &rest[i + 7..];
        let (climbs_to_root, after) = match after.strip_prefix("super::") {
            Some(a) => (true, a),
            None => (is_root_file, after),
        };
        if climbs_to_root {
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
        rest = after;
    }
    // Exported macros used bare (`warning!(...)`) after a `use crate::warning;`.
    for (mac, m) in macros {
        let bare = format!("{mac}!(");
        if code.contains(&bare) && !code.contains(&format!("crate::{bare}")) {
            out.push(m.clone());
        }
    }
    out
}

#[test]
fn no_module_imports_one_listed_after_it() {
    let rank = layers();
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    // Exported macros and the module that defines each.
    let mut macros = BTreeMap::new();
    for f in &files {
        let Some((module, _)) = module_of(src, f) else {
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        let mut exported = false;
        for line in text.lines() {
            if line.trim() == "#[macro_export]" {
                exported = true;
            } else if exported {
                if let Some(rest) = line.trim().strip_prefix("macro_rules! ") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    macros.insert(name, module.clone());
                }
                exported = false;
            }
        }
    }
    let mut upward = Vec::new();
    // Module → the modules it uses, for the cycle check (a layer's modules may use each
    // other, but not both ways).
    let mut edges: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let Some((module, is_root_file)) = module_of(src, f) else {
            continue;
        };
        let rel = f.strip_prefix(src).unwrap().display().to_string();
        let Some(&from) = rank.get(&module) else {
            upward.push(format!(
                "{rel}: module `{module}` is not in ARCHITECTURE.md's Layers list"
            ));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        // Items under `#[cfg(test)]` (unit-test modules, test-only declarations) may build
        // what they need from any layer: they are not part of the module's dependencies.
        // A test module's body ends at the first line that is exactly `}` (rustfmt's layout).
        let mut after_cfg_test = false;
        let mut in_test_module = false;
        for (n, line) in text.lines().enumerate() {
            if in_test_module {
                in_test_module = line != "}";
                continue;
            }
            if line == "#[cfg(test)]" {
                after_cfg_test = true;
                continue;
            }
            if after_cfg_test {
                after_cfg_test = false;
                in_test_module = line.trim_end().ends_with('{');
                continue;
            }
            for target in references(line, is_root_file, &macros) {
                if target == module {
                    continue;
                }
                let Some(&to) = rank.get(&target) else {
                    continue; // not a module of ours (e.g. a macro's helper at the root)
                };
                edges
                    .entry(module.clone())
                    .or_default()
                    .insert(target.clone());
                if to <= from {
                    continue;
                }
                upward.push(format!(
                    "{rel}:{}: `{module}` (layer {from}) uses `{target}` (layer {to})",
                    n + 1
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "{} imports run up the layers:\n{}",
        upward.len(),
        upward.join("\n")
    );
    if let Some(cycle) = find_cycle(&edges) {
        panic!("top-level modules use each other: {}", cycle.join(" -> "));
    }
}

/// A cycle in the module graph, as the modules along it (first repeated at the end).
fn find_cycle(edges: &BTreeMap<String, std::collections::BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        edges: &BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in edges.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    for m in edges.keys() {
        if let Some(c) = visit(m, edges, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_checker_finds_a_cycle() {
    let mut edges: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    edges.entry("log".into()).or_default().insert("util".into());
    assert_eq!(find_cycle(&edges), None);
    edges.entry("util".into()).or_default().insert("log".into());
    assert_eq!(
        find_cycle(&edges),
        Some(vec![
            "log".to_string(),
            "util".to_string(),
            "log".to_string()
        ])
    );
}

#[test]
fn the_checker_sees_an_upward_edge() {
    let macros = BTreeMap::from([("warning".to_string(), "log".to_string())]);
    assert_eq!(
        references(
            "use crate::server::Server; // crate::commands",
            false,
            &macros
        ),
        vec!["server"]
    );
    assert_eq!(
        references("    crate::warning!(\"x\");", false, &macros),
        vec!["log"]
    );
    assert_eq!(
        references("use super::super::config;", false, &macros),
        vec!["config"]
    );
    assert_eq!(references("use super::keys;", true, &macros), vec!["keys"]);
    assert!(references("use super::keys;", false, &macros).is_empty());
}
