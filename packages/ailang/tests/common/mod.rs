//! Helpers shared by the conformance tests: every run goes through the real binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_ailang");

pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Outcome {
    fn from(o: Output) -> Self {
        Outcome {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// The capsule's run: `ailang run --quiet --caps "" --entry main --args-file args.json
/// host/capsule/main.ail`.
pub const RUN: [&str; 9] =
    ["run", "--quiet", "--caps", "", "--entry", "main", "--args-file", "args.json", "host/capsule/main.ail"];

/// A capsule root: the source at host/capsule/main.ail and, optionally, args.json.
pub struct Capsule {
    pub root: tempfile::TempDir,
}

impl Capsule {
    pub fn new(source: &str, args_json: Option<&str>) -> Capsule {
        let root = tempfile::tempdir().expect("temp root");
        let dir = root.path().join("host/capsule");
        std::fs::create_dir_all(&dir).expect("capsule dir");
        std::fs::write(dir.join("main.ail"), source).expect("write source");
        if let Some(args) = args_json {
            std::fs::write(root.path().join("args.json"), args).expect("write args");
        }
        Capsule { root }
    }

    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// A command with exactly the capsule's cwd and environment.
    pub fn command(&self) -> Command {
        let root = self.path();
        let mut cmd = Command::new(BIN);
        cmd.current_dir(root)
            .env_clear()
            .env("AILANG_FS_SANDBOX", root)
            .env("AILANG_RELAX_MODULES", "1")
            .env("AILANG_CACHE_DIR", root.join(".cache"))
            .stdin(Stdio::null());
        cmd
    }

    pub fn run(&self) -> Outcome {
        self.run_args(&RUN)
    }

    pub fn run_args(&self, args: &[&str]) -> Outcome {
        self.command().args(args).output().expect("spawn ailang").into()
    }
}

/// The args.json World writes: the input text as one JSON string.
pub fn json_string(text: &str) -> String {
    let mut out = String::new();
    ailang::stdlib::json::encode_string(text, &mut out);
    out
}

/// Run `source` as a transition on `input` under the capsule contract.
pub fn transition(source: &str, input: &str) -> Outcome {
    Capsule::new(source, Some(&json_string(input))).run()
}

/// An AILANG string literal for `text`.
pub fn ail_str(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '$' => out.push_str("\\$"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Evaluate many expressions in one module (one process) and compare each line of output.
/// `prelude` holds imports and helper declarations.
pub fn expect_lines(prelude: &str, cases: &[(&str, &str)]) {
    let body: Vec<String> = cases.iter().map(|(expr, _)| format!("${{{expr}}}")).collect();
    let source = format!(
        "module corpus/batch\n{prelude}\nexport func main(input: string) -> string {{\n  \"{}\"\n}}\n",
        body.join("\\n")
    );
    let out = transition(&source, "{}");
    assert_eq!(out.code, 0, "source:\n{source}\nstderr: {}", out.stderr);
    let lines: Vec<&str> = out.stdout.strip_suffix('\n').unwrap_or(&out.stdout).split('\n').collect();
    assert_eq!(lines.len(), cases.len(), "stdout: {}", out.stdout);
    let mut failures = Vec::new();
    for ((expr, expected), got) in cases.iter().zip(&lines) {
        if got != expected {
            failures.push(format!("  {expr}\n    expected: {expected}\n    got:      {got}"));
        }
    }
    assert!(failures.is_empty(), "{} case(s) differ:\n{}", failures.len(), failures.join("\n"));
}

/// Run a program expected to fail; return its stderr after checking the exit code.
pub fn expect_failure(source: &str, input: &str, code: i32) -> String {
    let out = transition(source, input);
    assert_eq!(out.code, code, "stdout: {}\nstderr: {}", out.stdout, out.stderr);
    assert_eq!(out.stdout, "", "a failing run prints nothing on stdout");
    out.stderr
}

/// A run that fails with exit 1 and an error that holds `needle`; its stderr, for more checks.
pub fn fails_with(source: &str, input: &str, needle: &str) -> String {
    let stderr = expect_failure(source, input, 1);
    assert!(stderr.contains(needle), "{stderr}");
    stderr
}

/// A run that fails with exit 1 and an error that starts with `prefix`; its stderr.
pub fn fails_starting(source: &str, input: &str, prefix: &str) -> String {
    let stderr = expect_failure(source, input, 1);
    assert!(stderr.starts_with(prefix), "{stderr}");
    stderr
}

/// Runs `command` with `input` on its stdin.
pub fn with_stdin(command: &mut Command, input: &[u8]) -> Outcome {
    use std::io::Write;
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    child.stdin.take().expect("stdin").write_all(input).expect("write stdin");
    child.wait_with_output().expect("wait").into()
}

pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}
