//! `world-core session mint|list|revoke`, `genesis` and the serving lock of `serve` through the
//! real binary.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use world_tests::{bin, run_attended};

fn new_store() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("world.db");
    world_tests::commit_genesis(&store);
    (dir, store)
}

fn mint_command(store: &std::path::Path, extra: &[&str]) -> Command {
    let mut command = Command::new(bin("world-core"));
    command
        .args(["session", "mint", "--episode", "ep1", "--grant", "world.apply=world:10", "--store"])
        .arg(store)
        .args(extra);
    command
}

fn list(store: &std::path::Path) -> String {
    let output = Command::new(bin("world-core")).args(["session", "list", "--store"]).arg(store).output().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn mint_prints_the_credential_alone_and_its_id_on_stderr() {
    let (_dir, store) = new_store();
    let run = run_attended(mint_command(&store, &[]), "y\n");
    assert!(run.status.success(), "{}", run.stderr);
    assert!(
        run.terminal
            .contains("Confirm mint for episode ep1 (1 grant(s), expiry +3600s) with a session credential? [y/N] "),
        "prompt: {:?}",
        run.terminal
    );
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout carries the credential alone");
    let token = lines[0];
    assert!(token.len() == 64 && token.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    let credential_id = world_model::Credential::from_token(token).unwrap().credential_id();
    assert!(run.stderr.contains(&format!("credential_id={credential_id} (episode ep1, 1 grant(s), expires ")));

    let listed = list(&store);
    assert!(listed.contains(&credential_id), "{listed}");
    assert!(!listed.contains(token), "session list must never show a credential");
    assert!(listed.contains("world.apply=world:10"));
    assert!(listed.trim_end().ends_with("1 session credential(s)"));
}

#[test]
fn mint_to_a_file_writes_it_owner_only_and_confirms_on_one_line() {
    let (dir, store) = new_store();
    let out = dir.path().join("session");
    let run = run_attended(mint_command(&store, &["--out", out.to_str().unwrap()]), "y\n");
    assert!(run.status.success(), "{}", run.stderr);
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(&out).unwrap();
    assert_eq!(token.trim().len(), 64);
    let stdout = run.stdout.trim_end();
    assert!(!stdout.contains('\n'));
    assert!(stdout.starts_with("minted session credential for episode ep1: 1 grant(s), expires epoch "), "{stdout}");
    assert!(stdout.ends_with(&format!(", written to {}", out.display())));
    assert!(!stdout.contains(token.trim()));

    // An existing file is never overwritten.
    let again = run_attended(mint_command(&store, &["--out", out.to_str().unwrap()]), "y\n");
    assert_eq!(again.status.code(), Some(1));
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), token);
}

#[test]
fn mint_is_refused_under_ci_without_a_terminal_and_when_declined() {
    let (_dir, store) = new_store();

    let under_ci = mint_command(&store, &[]).env("CI", "true").output().unwrap();
    assert_eq!(under_ci.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&under_ci.stderr);
    assert!(stderr.contains("session mint is an attended step and CI is set"), "{stderr}");
    assert!(under_ci.stdout.is_empty());

    // No controlling terminal: a new session without one.
    let detached = world_tests::run_without_terminal(mint_command(&store, &[]));
    assert_eq!(detached.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&detached.stderr);
    assert!(stderr.contains("needs a controlling terminal"), "{stderr}");

    let declined = run_attended(mint_command(&store, &[]), "n\n");
    assert_eq!(declined.status.code(), Some(1));
    assert!(declined.stderr.contains("was not confirmed; nothing was done"), "{}", declined.stderr);

    assert!(list(&store).trim_end().ends_with("0 session credential(s)"), "a refused mint wrote a session");
}

#[test]
fn mint_validates_before_asking() {
    let (_dir, store) = new_store();
    for (args, message) in [
        (vec!["--grant", "nonsense"], "invalid --grant \"nonsense\": want EFFECT=SCOPE:BUDGET"),
        (vec!["--grant", "a=b:-1"], "invalid --grant \"a=b:-1\": budget must be non-negative"),
        (vec!["--grant", "a=b:x"], "invalid --grant \"a=b:x\": budget \"x\" is not an integer"),
        (vec!["--grant", "=b:1"], "invalid --grant \"=b:1\": EFFECT and SCOPE must be non-empty"),
    ] {
        let mut command = Command::new(bin("world-core"));
        command.args(["session", "mint", "--episode", "ep1", "--store"]).arg(&store).args(&args).env("CI", "1");
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    let missing = tempfile::tempdir().unwrap();
    let nowhere = missing.path().join("absent.db");
    let output = run_attended(
        {
            let mut c = Command::new(bin("world-core"));
            c.args(["session", "mint", "--episode", "ep1", "--grant", "a=b:1", "--store"]).arg(&nowhere);
            c
        },
        "y\n",
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stderr.contains("does not exist; refusing to create one"), "{}", output.stderr);
    assert!(!nowhere.exists());
}

#[test]
fn revoke_removes_a_session_and_refuses_an_unknown_one() {
    let (_dir, store) = new_store();
    let token = world_tests::mint(&store, "ep1", &["world.apply=world:10"], 3600);
    let id = world_model::Credential::from_token(&token).unwrap().credential_id();
    let revoke = |target: &[&str]| {
        Command::new(bin("world-core"))
            .args(["session", "revoke", "--store"])
            .arg(&store)
            .args(target)
            .output()
            .unwrap()
    };
    let output = revoke(&[&id]);
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout), format!("revoked session credential {id}\n"));
    let again = revoke(&[&id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing was revoked"));
    let episode = revoke(&["--episode", "ep9"]);
    assert_eq!(episode.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&episode.stderr).contains("episode ep9 has no session credential"));
}

#[test]
fn genesis_is_refused_once_a_head_exists() {
    let (_dir, store) = new_store();
    let output = Command::new(bin("world-core")).args(["genesis", "--store"]).arg(&store).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("already has a selected world head (sha256:"), "{stderr}");
}

/// The serving lock holds across processes: a second core on a served SQLite store is refused,
/// and once the first has stopped the store serves again.
#[test]
fn a_second_core_on_a_served_sqlite_store_is_refused_until_the_first_stops() {
    let (dir, store) = new_store();
    let ailang = bin("ailang");
    let serve = ["--ailang-bin", ailang.to_str().unwrap()];
    let (first, _) = world_tests::start_core(&store, dir.path(), &serve);
    let mut second = Command::new(bin("world-core"));
    let second = second.args(["serve", "--listen", "127.0.0.1:0", "--store"]).arg(&store).args(serve).output().unwrap();
    assert_eq!(second.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!(
            "another world-core already serves {} (its serving lock is held); stop it first",
            store.display()
        )),
        "{stderr}"
    );
    assert!(first.terminate().success());
    let (again, _) = world_tests::start_core(&store, dir.path(), &serve);
    assert!(again.terminate().success());
}

#[test]
fn the_se_tools_preset_grants_every_coding_tool_effect() {
    let (_dir, store) = new_store();
    let mut command = Command::new(bin("world-core"));
    command
        .args(["session", "mint", "--episode", "demo", "--preset", "se-tools", "--budget", "7", "--store"])
        .arg(&store);
    let run = run_attended(command, "y\n");
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.terminal.contains("(6 grant(s),"), "{:?}", run.terminal);
    let listed = list(&store);
    for effect in world_model::SE_TOOLS_EFFECTS {
        assert!(listed.contains(&format!("{effect}=worktree:7")), "{effect}: {listed}");
    }
    let mut command = Command::new(bin("world-core"));
    command.args(["session", "mint", "--episode", "demo", "--preset", "other", "--store"]).arg(&store);
    let output = command.env_remove("CI").output().unwrap();
    assert!(!output.status.success(), "an unknown preset is refused");
}
