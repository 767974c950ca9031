//! Discovery for people and agents writing AILANG: `builtins`, `examples`, `iface`, `prompt`.
//! Every command has a `--json` form whose field names are stable.

use crate::ast::{Decl, TypeBody};
use crate::cli::{Io, json_text};
use crate::diag::Diagnostic;
use crate::stdlib::catalog::{BUILTINS, Builtin, STD_TYPES};

/// The guide `ailang prompt` prints.
pub const PROMPT: &str = include_str!("prompt.md");

/// The examples corpus compiled into the binary (the default for `ailang examples`).
pub const BUNDLED_EXAMPLES: &[(&str, &str)] = &[
    ("echo", include_str!("../examples/echo.ail")),
    ("folds", include_str!("../examples/folds.ail")),
    ("greet", include_str!("../examples/greet.ail")),
    ("io_fs", include_str!("../examples/io_fs.ail")),
    ("json_build", include_str!("../examples/json_build.ail")),
    ("json_decode", include_str!("../examples/json_decode.ail")),
    ("lists", include_str!("../examples/lists.ail")),
    ("options", include_str!("../examples/options.ail")),
    ("read_plan", include_str!("../examples/read_plan.ail")),
    ("records", include_str!("../examples/records.ail")),
    ("refuse_plan", include_str!("../examples/refuse_plan.ail")),
    ("shapes", include_str!("../examples/shapes.ail")),
    ("strings", include_str!("../examples/strings.ail")),
    ("test_blocks", include_str!("../examples/test_blocks.ail")),
    ("write_plan", include_str!("../examples/write_plan.ail")),
];

/// Flags anywhere among the arguments: `--json`, `--examples-dir D` / `--examples-dir=D`.
struct Args {
    json: bool,
    examples_dir: Option<String>,
    positional: Vec<String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut out = Args { json: false, examples_dir: None, positional: Vec::new() };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let flag = a.strip_prefix("--").or_else(|| a.strip_prefix('-')).filter(|_| a.len() > 1);
        match flag {
            Some("json") => out.json = true,
            Some("examples-dir") => {
                i += 1;
                out.examples_dir = Some(args.get(i).cloned().ok_or("flag needs an argument: -examples-dir")?);
            }
            Some(f) if f.starts_with("examples-dir=") => out.examples_dir = Some(f["examples-dir=".len()..].into()),
            Some(other) => return Err(format!("flag provided but not defined: -{other}")),
            None => out.positional.push(a.to_string()),
        }
        i += 1;
    }
    Ok(out)
}

fn fail(io: &mut Io<'_>, message: &str, code: i32) -> i32 {
    let _ = writeln!(io.err, "Error: {message}");
    code
}

fn builtin_json(b: &Builtin) -> String {
    format!(
        "{{\"module\":{},\"name\":{},\"signature\":{},\"effect\":{},\"description\":{}}}",
        json_text(b.module),
        json_text(b.name),
        json_text(b.signature),
        json_text(&b.effect()),
        json_text(b.doc)
    )
}

fn builtin_line(b: &Builtin) -> String {
    format!("{}.{} : {}  -- {}", b.module, b.name, b.signature, b.doc)
}

/// `ailang builtins list [--json]` and `ailang builtins show <name> [--json]`.
pub fn builtins_command(args: &[String], io: &mut Io<'_>) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => return fail(io, &e, 2),
    };
    match args.positional.first().map(String::as_str) {
        Some("list") | None => {
            if args.json {
                let items: Vec<String> = BUILTINS.iter().map(builtin_json).collect();
                let _ = writeln!(io.out, "{{\"builtins\":[{}]}}", items.join(","));
            } else {
                for b in BUILTINS {
                    let _ = writeln!(io.out, "{}", builtin_line(b));
                }
            }
            0
        }
        Some("show") => {
            let Some(name) = args.positional.get(1) else {
                return fail(io, "builtins show needs a name, such as encode or std/json.encode", 2);
            };
            let (module, bare) = match name.rsplit_once('.') {
                Some((m, n)) => (Some(m), n),
                None => (None, name.as_str()),
            };
            let found: Vec<&Builtin> =
                BUILTINS.iter().filter(|b| b.name == bare && module.is_none_or(|m| b.module == m)).collect();
            if found.is_empty() {
                let near: Vec<&str> = BUILTINS
                    .iter()
                    .map(|b| b.name)
                    .filter(|n| n.to_lowercase().contains(&bare.to_lowercase()))
                    .take(5)
                    .collect();
                let hint = if near.is_empty() { String::new() } else { format!(" (similar: {})", near.join(", ")) };
                return fail(io, &format!("no std function named '{name}'{hint}; see ailang builtins list"), 1);
            }
            if args.json {
                let items: Vec<String> = found.iter().map(|b| builtin_json(b)).collect();
                let _ = writeln!(io.out, "{{\"builtins\":[{}]}}", items.join(","));
            } else {
                for b in found {
                    let _ = writeln!(
                        io.out,
                        "{}.{}\n  signature:   {}\n  effect:      {}\n  description: {}\n  import:      {}",
                        b.module,
                        b.name,
                        b.signature,
                        if b.effect().is_empty() { "none (pure)".to_string() } else { b.effect() },
                        b.doc,
                        if b.module == "prelude" {
                            "none needed".to_string()
                        } else {
                            format!("import {} ({})", b.module, b.name)
                        }
                    );
                }
            }
            0
        }
        Some(other) => fail(io, &format!("unknown builtins command '{other}' (use list or show)"), 2),
    }
}

struct Example {
    name: String,
    file: String,
    description: String,
    source: String,
}

/// The leading `--` comment lines of a source.
fn description(source: &str) -> String {
    source
        .lines()
        .take_while(|l| l.trim_start().starts_with("--"))
        .map(|l| l.trim_start().trim_start_matches("--").trim())
        .collect::<Vec<_>>()
        .join(" ")
}

fn load_examples(dir: Option<&str>) -> Result<Vec<Example>, String> {
    let Some(dir) = dir else {
        return Ok(BUNDLED_EXAMPLES
            .iter()
            .map(|(name, source)| Example {
                name: name.to_string(),
                file: format!("examples/{name}.ail"),
                description: description(source),
                source: source.to_string(),
            })
            .collect());
    };
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read examples directory '{dir}': {e}"))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "ail") {
            continue;
        }
        let source = std::fs::read_to_string(&path).map_err(|e| format!("cannot read '{}': {e}", path.display()))?;
        out.push(Example {
            name: path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
            file: path.to_string_lossy().into_owned(),
            description: description(&source),
            source,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn example_json(e: &Example, with_source: bool) -> String {
    let mut s = format!(
        "{{\"name\":{},\"file\":{},\"description\":{}",
        json_text(&e.name),
        json_text(&e.file),
        json_text(&e.description)
    );
    if with_source {
        s.push_str(&format!(",\"source\":{}", json_text(&e.source)));
    }
    s.push('}');
    s
}

/// `ailang examples list|search <words>|show <name> [--json] [--examples-dir D]`.
pub fn examples_command(args: &[String], io: &mut Io<'_>, env_dir: Option<String>) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => return fail(io, &e, 2),
    };
    let dir = args.examples_dir.clone().or(env_dir);
    let examples = match load_examples(dir.as_deref()) {
        Ok(e) => e,
        Err(e) => return fail(io, &e, 1),
    };
    let list = |io: &mut Io<'_>, items: &[&Example]| {
        if args.json {
            let items: Vec<String> = items.iter().map(|e| example_json(e, false)).collect();
            let _ = writeln!(io.out, "{{\"examples\":[{}]}}", items.join(","));
        } else {
            for e in items {
                let _ = writeln!(io.out, "{:<14} {}", e.name, e.description);
            }
        }
    };
    match args.positional.first().map(String::as_str) {
        Some("list") | None => {
            list(io, &examples.iter().collect::<Vec<_>>());
            0
        }
        Some("search") => {
            let words: Vec<String> = args.positional[1..].iter().map(|w| w.to_lowercase()).collect();
            if words.is_empty() {
                return fail(io, "examples search needs words to look for", 2);
            }
            let hits: Vec<&Example> = examples
                .iter()
                .filter(|e| {
                    let hay = format!("{} {} {}", e.name, e.description, e.source).to_lowercase();
                    words.iter().all(|w| hay.contains(w.as_str()))
                })
                .collect();
            list(io, &hits);
            0
        }
        Some("show") => {
            let Some(name) = args.positional.get(1) else {
                return fail(io, "examples show needs a name; see ailang examples list", 2);
            };
            let Some(e) = examples.iter().find(|e| &e.name == name || e.name == name.trim_end_matches(".ail")) else {
                return fail(io, &format!("no example named '{name}'; see ailang examples list"), 1);
            };
            if args.json {
                let _ = writeln!(io.out, "{}", example_json(e, true));
            } else {
                let _ = write!(io.out, "{}", e.source);
            }
            0
        }
        Some(other) => fail(io, &format!("unknown examples command '{other}' (use list, search or show)"), 2),
    }
}

/// `ailang iface <std/module | file.ail> [--json]`: the types and function signatures a
/// module offers.
pub fn iface_command(args: &[String], io: &mut Io<'_>, relax: bool) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => return fail(io, &e, 2),
    };
    let Some(target) = args.positional.first() else {
        return fail(io, "iface needs a module: std/json, or a file such as tools/x.ail", 2);
    };
    let (module, types, funcs): Iface = if crate::stdlib::module(target).is_some() || target == "prelude" {
        let types = STD_TYPES
            .iter()
            .filter(|(m, _)| m == target)
            .map(|(_, d)| (d.split_whitespace().nth(1).unwrap_or("").to_string(), d.to_string()))
            .collect();
        let funcs = BUILTINS
            .iter()
            .filter(|b| b.module == target)
            .map(|b| (b.name.to_string(), b.signature.to_string(), b.effect()))
            .collect();
        (target.clone(), types, funcs)
    } else if target.ends_with(".ail") {
        match file_iface(target, relax) {
            Ok(x) => x,
            Err(d) => return fail(io, &d.to_string(), 1),
        }
    } else {
        let known: Vec<&str> = crate::stdlib::MODULES.iter().map(|m| m.path).collect();
        return fail(io, &format!("module not found: {target} (std modules: {})", known.join(", ")), 1);
    };
    if args.json {
        let types: Vec<String> = types
            .iter()
            .map(|(n, d)| format!("{{\"name\":{},\"declaration\":{}}}", json_text(n), json_text(d)))
            .collect();
        let funcs: Vec<String> = funcs
            .iter()
            .map(|(n, s, e)| {
                format!("{{\"name\":{},\"signature\":{},\"effect\":{}}}", json_text(n), json_text(s), json_text(e))
            })
            .collect();
        let _ = writeln!(
            io.out,
            "{{\"module\":{},\"types\":[{}],\"functions\":[{}]}}",
            json_text(&module),
            types.join(","),
            funcs.join(",")
        );
    } else {
        let _ = writeln!(io.out, "module {module}");
        for (_, d) in &types {
            let _ = writeln!(io.out, "  {d}");
        }
        for (n, s, _) in &funcs {
            let _ = writeln!(io.out, "  {n} : {s}");
        }
    }
    0
}

type Iface = (String, Vec<(String, String)>, Vec<(String, String, String)>);

/// The exported types and functions of a source file, as declared.
fn file_iface(file: &str, relax: bool) -> Result<Iface, Diagnostic> {
    use crate::argdecode::type_text;
    let source = std::fs::read_to_string(file)
        .map_err(|e| Diagnostic::new("ERROR", format!("cannot read file '{file}': {e}"), None))?;
    let loaded = crate::loader::load(&source, file, crate::loader::LoadOptions { relax_modules: relax });
    let Some(program) = loaded.program else {
        return Err(loaded.errors.into_iter().next().unwrap_or_else(|| Diagnostic::new("ERROR", "cannot load", None)));
    };
    let name = program.module.name.as_ref().map(|(n, _)| n.clone()).unwrap_or_else(|| file.to_string());
    let mut types = Vec::new();
    let mut funcs = Vec::new();
    for decl in &program.module.decls {
        match decl {
            Decl::Type(t) if t.exported => {
                let params = if t.params.is_empty() { String::new() } else { format!("[{}]", t.params.join(", ")) };
                let body = match &t.body {
                    TypeBody::Alias(te) => type_text(te),
                    TypeBody::Variants(vs) => vs
                        .iter()
                        .map(|v| {
                            if v.fields.is_empty() {
                                v.name.to_string()
                            } else {
                                format!("{}({})", v.name, v.fields.iter().map(type_text).collect::<Vec<_>>().join(", "))
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(" | "),
                };
                types.push((t.name.to_string(), format!("type {}{params} = {body}", t.name)));
            }
            Decl::Func(f) if f.exported => {
                let params: Vec<String> =
                    f.params.iter().map(|p| p.ty.as_ref().map(type_text).unwrap_or_else(|| "_".into())).collect();
                let ret = f.ret.as_ref().map(type_text).unwrap_or_else(|| "_".into());
                let effect = f.effects.as_ref().map(|e| e.labels.join(", ")).unwrap_or_default();
                let sig = if effect.is_empty() {
                    format!("({}) -> {ret}", params.join(", "))
                } else {
                    format!("({}) -> {ret} ! {{{effect}}}", params.join(", "))
                };
                funcs.push((f.name.to_string(), sig, effect));
            }
            _ => {}
        }
    }
    Ok((name, types, funcs))
}

/// `ailang prompt [--json]`.
pub fn prompt_command(args: &[String], io: &mut Io<'_>) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => return fail(io, &e, 2),
    };
    if args.json {
        let _ = writeln!(io.out, "{{\"prompt\":{}}}", json_text(PROMPT));
    } else {
        let _ = write!(io.out, "{PROMPT}");
    }
    0
}

/// The fenced ```ailang samples of the prompt, for the test that checks each one.
pub fn prompt_samples() -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in PROMPT.lines() {
        match (&mut current, line.trim()) {
            (None, "```ailang") => current = Some(String::new()),
            (Some(_), "```") => out.extend(current.take()),
            (Some(buf), _) => {
                buf.push_str(line);
                buf.push('\n');
            }
            _ => {}
        }
    }
    out
}
