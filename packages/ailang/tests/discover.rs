//! Discovery through the real binary: `builtins`, `examples`, `iface`, `prompt`; the std
//! catalog matches the native modules, every example passes `check` and `test`, and every
//! code sample in the prompt passes `check`.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn ailang(args: &[&str]) -> Outcome {
    Command::new(BIN)
        .args(args)
        .env("AILANG_RELAX_MODULES", "1")
        .env_remove("AILANG_EXAMPLES")
        .output()
        .expect("spawn")
        .into()
}

#[test]
fn the_catalog_names_every_std_function_and_nothing_else() {
    use ailang::stdlib::{MODULES, catalog, prelude};
    let mut natives: Vec<(String, String)> = Vec::new();
    for m in MODULES.iter().copied().chain(std::iter::once(&prelude::MODULE)) {
        for f in m.funcs {
            natives.push((m.path.to_string(), f.name.to_string()));
            let entry = catalog::lookup(m.path, f.name);
            assert!(entry.is_some(), "{}.{} has no signature", m.path, f.name);
        }
    }
    for b in catalog::BUILTINS {
        assert!(
            natives.contains(&(b.module.to_string(), b.name.to_string())),
            "{}.{} is not a native",
            b.module,
            b.name
        );
        let sig = b.signature.split_once("=>").map_or(b.signature, |(_, s)| s.trim());
        let ty = ailang::parser::parse_type(sig).unwrap_or_else(|e| panic!("{}.{}: {e}", b.module, b.name));
        match ty {
            ailang::ast::TypeExpr::Func(params, _, _) => {
                let arity = m_arity(b.module, b.name);
                assert_eq!(params.len().max(1), arity, "{}.{} arity", b.module, b.name);
            }
            other => panic!("{}.{} is not a function type: {other:?}", b.module, b.name),
        }
    }
}

#[test]
fn builtins_list_prints_the_catalog_file_line_by_line() {
    let entries: Vec<&str> = include_str!("../src/stdlib/catalog.txt")
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with("--"))
        .collect();
    let list = ailang(&["builtins", "list"]);
    assert_eq!(list.code, 0);
    assert_eq!(list.stdout.lines().collect::<Vec<_>>(), entries);
}

fn m_arity(module: &str, name: &str) -> usize {
    use ailang::stdlib::{MODULES, prelude};
    let m =
        MODULES.iter().copied().chain(std::iter::once(&prelude::MODULE)).find(|m| m.path == module).expect("module");
    m.funcs.iter().find(|f| f.name == name).expect("func").arity
}

#[test]
fn builtins_list_and_show_in_text_and_json() {
    let list = ailang(&["builtins", "list", "--json"]);
    assert_eq!(list.code, 0);
    assert!(list.stdout.starts_with("{\"builtins\":[{\"module\":\"prelude\",\"name\":\"show\",\"signature\":\"(a) -> string\",\"effect\":\"\",\"description\":"), "{}", list.stdout);
    assert_eq!(list.stdout.matches("\"module\":").count(), ailang::stdlib::catalog::BUILTINS.len());
    assert!(list.stdout.contains(
        "{\"module\":\"std/fs\",\"name\":\"readFile\",\"signature\":\"(string) -> string ! {FS}\",\"effect\":\"FS\","
    ));
    let show = ailang(&["builtins", "show", "std/json.encode"]);
    assert_eq!(show.code, 0);
    assert_eq!(
        show.stdout,
        "std/json.encode\n  signature:   (Json) -> string\n  effect:      none (pure)\n  description: JSON text, no whitespace, keys in list order\n  import:      import std/json (encode)\n"
    );
    let several = ailang(&["builtins", "show", "length", "--json"]);
    assert_eq!(several.stdout.matches("\"name\":\"length\"").count(), 4, "{}", several.stdout);
    let missing = ailang(&["builtins", "show", "lenght"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.starts_with("Error: no std function named 'lenght'"), "{}", missing.stderr);
}

fn examples_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

#[test]
fn the_bundled_examples_are_the_examples_directory() {
    let mut on_disk: Vec<String> = std::fs::read_dir(examples_dir())
        .expect("examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "ail"))
        .map(|p| p.file_stem().expect("stem").to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let bundled: Vec<String> = ailang::discover::BUNDLED_EXAMPLES.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(bundled, on_disk);
    assert!(bundled.len() >= 12);
    for (name, source) in ailang::discover::BUNDLED_EXAMPLES {
        let disk = std::fs::read_to_string(examples_dir().join(format!("{name}.ail"))).expect("read");
        assert_eq!(&disk, source);
    }
}

#[test]
fn every_example_passes_check_and_its_inline_tests() {
    for (name, source) in ailang::discover::BUNDLED_EXAMPLES {
        let path = examples_dir().join(format!("{name}.ail"));
        let path = path.to_str().expect("path");
        let check = ailang(&["check", path]);
        assert_eq!(check.code, 0, "{name}: {}", check.stderr);
        assert!(!check.stderr.contains("Warning"), "{name}: {}", check.stderr);
        let test = ailang(&["test", path]);
        let last = test.stdout.lines().last().unwrap_or("");
        assert_eq!(test.code, 0, "{name}: {}", test.stdout);
        assert!(last.ends_with(" passed, 0 failed") && !last.starts_with("0 "), "{name}: {last}");
        assert!(source.starts_with("--"), "{name} starts with a description comment");
    }
}

#[test]
fn examples_list_search_and_show_over_the_bundled_corpus_and_a_directory() {
    let list = ailang(&["examples", "list", "--json"]);
    assert_eq!(list.code, 0);
    assert!(list.stdout.contains("{\"name\":\"read_plan\",\"file\":\"examples/read_plan.ail\",\"description\":\"An effectful transition (v2) with one effect and a finish phase."), "{}", list.stdout);
    let search = ailang(&["examples", "search", "finish", "Workspace.Read"]);
    assert_eq!(
        search.stdout.lines().map(|l| l.split(' ').next().unwrap_or("")).collect::<Vec<_>>(),
        ["read_plan"],
        "{}",
        search.stdout
    );
    let show = ailang(&["examples", "show", "echo"]);
    assert_eq!(show.stdout, ailang::discover::BUNDLED_EXAMPLES[0].1);

    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("mine.ail"), "-- my own example\nmodule mine\n").expect("write");
    let flag = ailang(&["examples", "list", "--examples-dir", dir.path().to_str().expect("path")]);
    assert_eq!(flag.stdout, "mine           my own example\n");
    let env: Outcome = Command::new(BIN)
        .args(["examples", "show", "mine", "--json"])
        .env("AILANG_EXAMPLES", dir.path())
        .output()
        .expect("spawn")
        .into();
    assert!(env.stdout.starts_with("{\"name\":\"mine\",\"file\":"), "{}", env.stdout);
    assert!(
        env.stdout
            .ends_with(",\"description\":\"my own example\",\"source\":\"-- my own example\\nmodule mine\\n\"}\n"),
        "{}",
        env.stdout
    );
    let missing = ailang(&["examples", "show", "nope"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("no example named 'nope'"));
}

#[test]
fn iface_describes_std_modules_and_source_files() {
    let std = ailang(&["iface", "std/option"]);
    assert_eq!(std.code, 0);
    assert!(
        std.stdout.starts_with(
            "module std/option\n  type Option[a] = Some(a) | None\n  map : ((a) -> b, Option[a]) -> Option[b]\n"
        ),
        "{}",
        std.stdout
    );
    let file = examples_dir().join("io_fs.ail");
    let json = ailang(&["iface", "--json", file.to_str().expect("path")]);
    assert_eq!(
        json.stdout,
        "{\"module\":\"examples/io_fs\",\"types\":[],\"functions\":[{\"name\":\"main\",\"signature\":\"(string) -> string ! {IO, FS}\",\"effect\":\"IO, FS\"}]}\n"
    );
    let unknown = ailang(&["iface", "std/nope"]);
    assert_eq!(unknown.code, 1);
    assert!(unknown.stderr.starts_with("Error: module not found: std/nope"), "{}", unknown.stderr);
}

#[test]
fn every_code_sample_in_the_prompt_passes_check_and_its_tests() {
    let prompt = ailang(&["prompt"]);
    assert_eq!(prompt.code, 0);
    assert_eq!(prompt.stdout, ailang::discover::PROMPT);
    for needle in ["world/effect-plan/v1", "\"phase\":\"finish\"", "\"phase\":\"plan\"", "Common mistakes"] {
        assert!(prompt.stdout.contains(needle), "the prompt covers {needle}");
    }
    let samples = ailang::discover::prompt_samples();
    assert!(samples.len() >= 2);
    let dir = tempfile::tempdir().expect("tmp");
    for (i, sample) in samples.iter().enumerate() {
        let file = dir.path().join(format!("sample{i}.ail"));
        std::fs::write(&file, sample).expect("write");
        let check = ailang(&["check", file.to_str().expect("path")]);
        assert_eq!(check.code, 0, "sample {i}:\n{sample}\n{}", check.stderr);
        let test = ailang(&["test", file.to_str().expect("path")]);
        assert_eq!(test.code, 0, "sample {i}: {}", test.stdout);
    }
    let json = ailang(&["prompt", "--json"]);
    assert!(json.stdout.starts_with("{\"prompt\":\"# Writing an AILANG transition\\n"), "{}", json.stdout);
}
