//! `--caps IO,FS` through the real binary: std/io and std/fs work when granted, fail with
//! the missing-capability error when not, and std/fs never reaches outside the sandbox root
//! (checked on the filesystem: symlinks, hard links, FIFOs, `..` and absolute paths).

mod common;
use common::*;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};

/// A sandbox root holding `main.ail`, and a sibling directory outside it.
struct Sandbox {
    top: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let top = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(top.path().join("root/sub")).expect("root");
        std::fs::create_dir_all(top.path().join("outside")).expect("outside");
        std::fs::write(top.path().join("outside/secret.txt"), "secret").expect("secret");
        Sandbox { top }
    }

    fn root(&self) -> std::path::PathBuf {
        self.top.path().join("root")
    }

    fn outside(&self, name: &str) -> std::path::PathBuf {
        self.top.path().join("outside").join(name)
    }

    /// Run `body` as main's body with `caps`, cwd and AILANG_FS_SANDBOX at the root.
    fn run(&self, caps: &str, effects: &str, body: &str, stdin: &str) -> Outcome {
        let source = format!(
            "module main\nimport std/fs (readFile, writeFile, exists, listDir)\nimport std/io (print, println, readLine)\nexport func main(input: string) -> string ! {{{effects}}} {{\n{body}\n}}\n"
        );
        std::fs::write(self.root().join("main.ail"), source).expect("write source");
        let mut child = Command::new(BIN)
            .current_dir(self.root())
            .env_clear()
            .env("AILANG_FS_SANDBOX", self.root())
            .env("AILANG_RELAX_MODULES", "1")
            .args(["run", "--quiet", "--caps", caps, "--args-json", "\"in\"", "main.ail"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        use std::io::Write;
        child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("stdin");
        child.wait_with_output().expect("wait").into()
    }

    fn read(&self, caps: &str, path: &str) -> Outcome {
        self.run(caps, "FS", &format!("readFile({})", ail_str(path)), "")
    }
}

#[test]
fn io_and_fs_work_inside_the_sandbox_when_granted() {
    let sb = Sandbox::new();
    std::fs::write(sb.root().join("in.txt"), "hello").expect("write");
    let body = "println(\"first\");\n  let name = readLine();\n  writeFile(\"sub/out.txt\", \"${name}:${input}\");\n  \"${readFile(\"in.txt\")}|${show(exists(\"sub/out.txt\"))}|${show(exists(\"nope\"))}|${show(listDir(\"sub\"))}\"";
    let out = sb.run("IO,FS", "IO, FS", body, "ada\nrest\n");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "first\nhello|true|false|[\"out.txt\"]\n");
    assert_eq!(std::fs::read_to_string(sb.root().join("sub/out.txt")).expect("written"), "ada:in");
}

#[test]
fn an_effect_without_its_capability_fails_with_the_missing_capability_error() {
    let sb = Sandbox::new();
    for caps in ["", "IO"] {
        let out = sb.read(caps, "main.ail");
        assert_eq!(out.code, 1);
        assert_eq!(out.stdout, "");
        assert!(out.stderr.starts_with("Error: execution failed: EVA004: missing capability: FS"), "{}", out.stderr);
    }
    let out = sb.run("FS", "IO", "println(input);\n  input", "");
    assert!(out.stderr.starts_with("Error: execution failed: EVA004: missing capability: IO"), "{}", out.stderr);
}

#[test]
fn reads_cannot_leave_the_sandbox() {
    let sb = Sandbox::new();
    symlink(sb.outside("secret.txt"), sb.root().join("link")).expect("symlink");
    symlink(sb.top.path().join("outside"), sb.root().join("dirlink")).expect("dir symlink");
    std::fs::hard_link(sb.outside("secret.txt"), sb.root().join("hard")).expect("hard link");
    let cases = [
        ("link", "the path leads outside the sandbox root"),
        ("dirlink/secret.txt", "the path leads outside the sandbox root"),
        ("../outside/secret.txt", "the path leads outside the sandbox root"),
        ("sub/../../outside/secret.txt", "the path leads outside the sandbox root"),
        ("hard", "has more than one hard link"),
        ("/etc/passwd", "absolute paths are refused"),
        ("sub", "is a directory"),
    ];
    for (path, why) in cases {
        let out = sb.read("FS", path);
        assert_eq!(out.code, 1, "{path}: {}", out.stdout);
        assert!(!out.stdout.contains("secret") && !out.stderr.contains("secret\n"), "{path} leaked");
        assert!(out.stderr.contains(why), "{path}: {}", out.stderr);
    }
    // A symlink that stays inside the root is followed.
    std::fs::write(sb.root().join("sub/in.txt"), "inside").expect("write");
    symlink("sub/in.txt", sb.root().join("good")).expect("symlink");
    assert_eq!(sb.read("FS", "good").stdout, "inside\n");
}

#[test]
fn fifos_are_refused_without_blocking() {
    let sb = Sandbox::new();
    let fifo = sb.root().join("fifo");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let out = sb.read("FS", "fifo");
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("is not a regular file"), "{}", out.stderr);
}

#[test]
fn writes_to_links_or_outside_paths_are_refused_and_touch_nothing() {
    let sb = Sandbox::new();
    symlink(sb.outside("secret.txt"), sb.root().join("link")).expect("symlink");
    std::fs::hard_link(sb.outside("secret.txt"), sb.root().join("hard")).expect("hard link");
    symlink(sb.top.path().join("outside"), sb.root().join("dirlink")).expect("dir symlink");
    for path in ["link", "hard", "dirlink/new.txt", "../outside/new.txt", "/tmp/ailang-escape.txt"] {
        let out = sb.run("FS", "FS", &format!("writeFile({}, \"pwned\");\n  \"done\"", ail_str(path)), "");
        assert_eq!(out.code, 1, "{path}: {}", out.stdout);
    }
    assert_eq!(std::fs::read_to_string(sb.outside("secret.txt")).expect("secret"), "secret");
    assert!(!sb.outside("new.txt").exists());
    assert!(!Path::new("/tmp/ailang-escape.txt").exists());
    assert!(std::fs::symlink_metadata(sb.root().join("link")).expect("link").file_type().is_symlink());
    let names: Vec<String> = std::fs::read_dir(sb.root())
        .expect("root")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("ailang-tmp")), "temporary files left: {names:?}");
}

#[test]
fn empty_caps_grant_nothing_even_to_a_module_that_declares_effects() {
    let sb = Sandbox::new();
    let out = sb.run("", "IO", "print(\"x\");\n  input", "");
    assert_eq!((out.code, out.stdout.as_str()), (1, ""));
    assert!(out.stderr.contains("EVA004: missing capability: IO"), "{}", out.stderr);
}
