//! `world-core up` on a fresh directory, driven through a pseudo-terminal: the attended publish
//! and mint on first run, then a served world an agent reaches through the configurations up
//! prints, pasted as an operator would (Claude Code's command run by a shell, a `.mcp.json` after
//! the export line) into the official MCP SDK; reruns that report the session's budgets and,
//! once one is spent, offer a session for a new episode; and a port in use named in one line.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use world_tests::{bin, get_json, lines_of, spawn_attended, test_python};

/// One run of `up`: the child, its stdout lines as they come, its stderr and the terminal.
struct Up {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
    terminal: std::thread::JoinHandle<String>,
}

/// What a stopped run left: its stderr and what it wrote to the terminal.
struct Stopped {
    stderr: String,
    terminal: String,
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn up(dir: &Path, answer: &str, extra: &[&str]) -> Up {
    let mut command = Command::new(bin("world-core"));
    command
        .current_dir(repository())
        .args(["up", "--core-listen", "127.0.0.1:0", "--edge-listen", "127.0.0.1:0", "--dir"])
        .arg(dir)
        .args(extra);
    let (mut child, terminal) = spawn_attended(command, answer);
    let stdout = child.stdout.take().unwrap();
    let received = lines_of(stdout);
    // Drained as it comes, so the core's log lines never fill the pipe.
    let mut pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    });
    Up { child, lines: received, stderr, terminal }
}

impl Up {
    /// The lines up prints once it serves, from `world is up.` to the Ctrl-C hint.
    fn banner(&mut self) -> Vec<String> {
        let mut banner = Vec::new();
        loop {
            match self.lines.recv_timeout(Duration::from_secs(120)) {
                Ok(line) => {
                    if line == "world is up." || !banner.is_empty() {
                        banner.push(line.clone());
                    }
                    if line.starts_with("Ctrl-C stops") {
                        return banner;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    let stderr = std::mem::replace(&mut self.stderr, std::thread::spawn(String::new));
                    panic!("up did not print its banner; stderr:\n{}", stderr.join().unwrap_or_default());
                }
            }
        }
    }

    fn interrupt(mut self) -> Stopped {
        // SAFETY: signals our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait().unwrap();
        let stopped = Stopped { stderr: self.stderr.join().unwrap(), terminal: self.terminal.join().unwrap() };
        assert!(status.success(), "up did not stop cleanly: {status}\n{}", stopped.stderr);
        stopped
    }
}

/// The banner's line that starts (after its indent) with `start`.
fn line<'a>(banner: &'a [String], start: &str) -> &'a str {
    banner
        .iter()
        .map(|l| l.trim())
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting {start:?} in {banner:#?}"))
}

/// The `.mcp.json` block: from a line `{` to the next line `}`.
fn mcp_json(banner: &[String]) -> String {
    let start = banner.iter().position(|l| l == "{").expect("a JSON block in the banner");
    let end = start + banner[start..].iter().position(|l| l == "}").expect("the JSON block's end");
    banner[start..=end].join("\n")
}

/// Runs `script` in bash with `pasted_config.py TOOL ARGS` as `$CLIENT`; what the client saw.
fn in_shell(script: &str, tool: &str, arguments: &Value) -> Value {
    let run = Command::new("bash")
        .arg("-c")
        .arg(script)
        .env_remove("WORLD_SESSION")
        .env("PY", test_python())
        .env("SCRIPT", Path::new(env!("CARGO_MANIFEST_DIR")).join("python/pasted_config.py"))
        .env("TOOL", tool)
        .env("ARGS", arguments.to_string())
        .output()
        .unwrap();
    serde_json::from_slice(&run.stdout).unwrap_or_else(|_| {
        panic!("the pasted configuration did not work:\n{}\n{script}", String::from_utf8_lossy(&run.stderr))
    })
}

/// Claude Code's printed command, run by a shell in which `claude` hands its arguments to the
/// SDK client.
fn paste_claude_command(banner: &[String], tool: &str, arguments: Value) -> Value {
    let command = line(banner, "claude mcp add");
    in_shell(
        &format!("claude() {{ exec \"$PY\" \"$SCRIPT\" \"$TOOL\" \"$ARGS\" claude \"$@\"; }}\n{command}"),
        tool,
        &arguments,
    )
}

/// The printed `.mcp.json`, saved to a file, read by the SDK client started in a shell that ran
/// the printed export line.
fn paste_mcp_json(banner: &[String], dir: &Path, tool: &str, arguments: Value) -> Value {
    let file = dir.join(".mcp.json");
    std::fs::write(&file, mcp_json(banner)).unwrap();
    let export = line(banner, "export WORLD_SESSION=");
    let script = format!("{export}\nexec \"$PY\" \"$SCRIPT\" \"$TOOL\" \"$ARGS\" mcp-json '{}'", file.display());
    in_shell(&script, tool, &arguments)
}

fn token(session: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(session).unwrap().permissions().mode() & 0o777, 0o600);
    std::fs::read_to_string(session).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_serves_through_its_pasted_configurations_and_offers_a_new_episode_once_a_budget_is_spent() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join(".world");
    let store = state.join("world.db").display().to_string();
    let session = state.join("session");
    let phrases = format!("publish 1 transitions to {store}\npublish 8 transitions to {store}\n");

    // First run: both publishes and the mint are typed; every coding-tool grant holds 1 call.
    let mut first = up(&state, &format!("{phrases}y\n"), &["--budget", "1"]);
    let banner = first.banner();
    let mcp = line(&banner, "MCP URL:").trim_start_matches("MCP URL:").trim().to_owned();
    assert!(mcp.starts_with("http://127.0.0.1:") && mcp.ends_with("/mcp/"), "{mcp}");
    assert!(line(&banner, "session:").contains("(episode demo;"), "{banner:#?}");
    let demo = token(&session);
    let card = get_json(&format!("{}/.well-known/agent.json", mcp.trim_end_matches("/mcp/")), &demo).await;
    let skills: Vec<&str> = card["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert!(skills.contains(&"tools.echo") && skills.contains(&"ailang-read"), "{skills:?}");
    assert!(state.join("ws/demo/hello.ail").is_file(), "the demo worktree has the sample program");
    // Each printed configuration, pasted, connects the SDK and calls a coding tool.
    let read = paste_claude_command(&banner, "ailang-read", json!({"path": "hello.ail"}));
    assert_eq!(read["url"], mcp.as_str());
    assert!(read["output"]["content"].as_str().is_some_and(|c| c.contains("module hello")), "{read}");
    let checked = paste_mcp_json(&banner, dir.path(), "ailang-check", json!({"path": "hello.ail"}));
    assert_eq!(checked["output"]["passed"], true, "{checked}");
    assert!(mcp_json(&banner).contains("\"Authorization\": \"Bearer ${WORLD_SESSION}\""), "{banner:#?}");
    let stopped = first.interrupt();
    assert!(stopped.terminal.contains("publish 1 transitions to"), "{}", stopped.terminal);
    assert!(stopped.terminal.contains("publish 8 transitions to"), "{}", stopped.terminal);
    assert!(stopped.terminal.contains("Mint a demo session for episode demo"), "{}", stopped.terminal);

    // A rerun reports the budgets; two are spent, so it offers a new episode. Declined: it
    // says what it did not do and serves the old session.
    let mut declined = up(&state, "n\n", &[]);
    let banner = declined.banner();
    assert!(line(&banner, "session:").contains("(episode demo;"), "{banner:#?}");
    let stopped = declined.interrupt();
    let budgets = stopped.stderr.lines().find(|l| l.contains("budgets left in episode demo: ")).expect(&stopped.stderr);
    assert!(budgets.contains("Workspace.Read 0 of 1") && budgets.contains("Ailang.Check 0 of 1"), "{budgets}");
    assert!(budgets.contains("Workspace.Write 1 of 1"), "{budgets}");
    assert!(
        stopped.terminal.contains(
            "Spent in episode demo: Workspace.Read (spent 1 of 1), Ailang.Check (spent 1 of 1). Spend is counted per \
             episode, so a new session for demo would not help."
        ),
        "{}",
        stopped.terminal
    );
    assert!(stopped.terminal.contains("Mint a session for a new episode demo-2"), "{}", stopped.terminal);
    assert!(
        stopped.stderr.contains("world-core up: the mint was not confirmed: no session was minted and"),
        "{}",
        stopped.stderr
    );
    assert!(
        stopped.stderr.contains("still holds episode demo's session, which is served as it is"),
        "{}",
        stopped.stderr
    );
    assert!(stopped.stderr.contains("--episode demo-2 --preset se-tools"), "{}", stopped.stderr);
    assert_eq!(token(&session), demo, "declined: the session file is untouched");
    assert!(!state.join("ws/demo-2").exists(), "declined: no worktree was made");

    // Accepted: a session for episode demo-2 with a worktree of its own replaces the file.
    let mut accepted = up(&state, "y\n", &["--budget", "5"]);
    let banner = accepted.banner();
    assert!(line(&banner, "session:").contains("(episode demo-2;"), "{banner:#?}");
    assert!(line(&banner, "Try this").contains("ws/demo-2/"), "{banner:#?}");
    let renewed = token(&session);
    assert_ne!(renewed, demo);
    assert!(state.join("ws/demo-2/hello.ail").is_file());
    let read = paste_mcp_json(&banner, dir.path(), "ailang-read", json!({"path": "hello.ail"}));
    assert!(read["output"]["content"].as_str().is_some_and(|c| c.contains("module hello")), "{read}");
    let stopped = accepted.interrupt();
    assert!(stopped.stderr.contains("minted a session for episode demo-2"), "{}", stopped.stderr);

    // With budget left, a rerun reuses everything: nothing is typed, nothing is asked.
    let mut again = up(&state, "", &[]);
    again.banner();
    let stopped = again.interrupt();
    assert!(!stopped.terminal.contains("Type exactly") && !stopped.terminal.contains("[y/N]"), "{}", stopped.terminal);
    assert!(stopped.stderr.contains("Workspace.Read 4 of 5"), "{}", stopped.stderr);
    assert_eq!(token(&session), renewed, "the session was reused");
}

#[test]
fn a_port_in_use_ends_up_with_one_line_naming_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    for (flag, what, other) in [
        ("--core-listen", "the core's gRPC address", "--edge-listen"),
        ("--edge-listen", "the edge's HTTP address", "--core-listen"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let run = Command::new(bin("world-core"))
            .current_dir(repository())
            .args(["up", flag, &address, other, "127.0.0.1:0", "--dir"])
            .arg(dir.path().join(".world"))
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(1), "{flag}");
        let stderr = String::from_utf8_lossy(&run.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(
            lines,
            [format!(
                "world-core: cannot listen on {address} ({what}): it is already in use; stop what listens there or \
                 choose another address with {flag}"
            )],
            "{flag}"
        );
        assert!(!dir.path().join(".world").exists(), "{flag}: nothing was made before the ports were checked");
    }
}
