//! Speed of `ailang run`, reported as ratios against baselines measured in the same run:
//!
//! * spawning `ailang run` on an echo capsule versus spawning `/bin/true` the same way (target <= 3x);
//! * spawning `ailang check` on a 300-line module versus `/bin/true` (target <= 3x);
//! * parsing, loading, checking and running a 300-line module in process.
//!
//! Run with `cargo bench -p ailang --bench run_speed`. Prints numbers; asserts nothing.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use common::{Capsule, RUN};

const ECHO: &str =
    "module quickstart/echo\n\nexport func main(input: string) -> string {\n  \"{\\\"echo\\\":${input}}\"\n}\n";

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time_spawn(make: &mut dyn FnMut() -> Command) -> Duration {
    let mut cmd = make();
    cmd.stdout(Stdio::null()).stderr(Stdio::null()).stdin(Stdio::null());
    let start = Instant::now();
    let status = cmd.status().expect("spawn");
    let elapsed = start.elapsed();
    assert!(status.success(), "benchmark command failed");
    elapsed
}

/// The median spawn time of each command, sampled in turn within every round: a burst of
/// load from elsewhere on the machine then weighs on all of them alike instead of on
/// whichever happened to be measured during it.
fn time_spawns_interleaved(rounds: usize, makers: &mut [&mut dyn FnMut() -> Command]) -> Vec<Duration> {
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); makers.len()];
    for _ in 0..rounds {
        for (make, taken) in makers.iter_mut().zip(&mut samples) {
            taken.push(time_spawn(*make));
        }
    }
    samples.into_iter().map(median).collect()
}

/// A module of about 300 lines: 50 small functions chained from `main`, plus JSON work.
fn module_300_lines() -> String {
    let mut src = String::from(
        "module bench/big\n\nimport std/json (encode, decode, jo, js, jint, kv)\nimport std/list (map, foldl)\n\n",
    );
    for i in 0..50 {
        src.push_str(&format!(
            "func step{i}(xs: [int]) -> [int] {{\n  let ys = map(\\x. x + {i}, xs);\n  let total = foldl(\\a x. a + x, 0, ys)\n  if total % 2 == 0 then ys else map(\\x. x - 1, ys)\n}}\n\n"
        ));
    }
    src.push_str("export func main(input: string) -> string {\n  let xs = [1, 2, 3, 4, 5, 6, 7, 8]\n");
    let chain = (0..50).fold("xs".to_string(), |acc, i| format!("step{i}({acc})"));
    src.push_str(&format!("  let result = {chain}\n"));
    src.push_str("  encode(jo([kv(\"input\", js(input)), kv(\"sum\", jint(foldl(\\a x. a + x, 0, result)))]))\n}\n");
    src
}

fn main() {
    let root = std::env::temp_dir().join(format!("ailang-bench-{}", std::process::id()));
    std::fs::create_dir_all(&root).expect("bench dir");
    let bin = env!("CARGO_BIN_EXE_ailang");
    let rounds = 200;

    let mut truth = || Command::new("/bin/true");
    let capsule = Capsule::new(ECHO, Some("\"{\\\"a\\\":1}\""));
    let mut run = || {
        let mut c = capsule.command();
        c.args(RUN);
        c
    };
    let source = module_300_lines();
    let lines = source.lines().count();
    std::fs::write(root.join("big.ail"), &source).expect("write big");
    let mut check = || {
        let mut c = Command::new(bin);
        c.current_dir(&root).env("AILANG_RELAX_MODULES", "1").args(["check", "big.ail"]);
        c
    };
    // Warm every path once so that the page cache treats them alike.
    let _ = time_spawns_interleaved(5, &mut [&mut truth, &mut run, &mut check]);
    let medians = time_spawns_interleaved(rounds, &mut [&mut truth, &mut run, &mut check]);
    let (baseline, echo, checked) = (medians[0], medians[1], medians[2]);
    println!("spawn /bin/true         median {:>9.3} ms", baseline.as_secs_f64() * 1e3);
    println!("spawn ailang run echo   median {:>9.3} ms", echo.as_secs_f64() * 1e3);
    println!("ratio ailang/true       {:.2}x (target <= 3x)", echo.as_secs_f64() / baseline.as_secs_f64());
    println!("spawn ailang check {lines}-line module median {:>9.3} ms", checked.as_secs_f64() * 1e3);
    println!("ratio check/true        {:.2}x (target <= 3x)", checked.as_secs_f64() / baseline.as_secs_f64());

    let iterations = 200;
    let start = Instant::now();
    for _ in 0..iterations {
        let value = ailang::run_source(&source, "big.ail", "main", "\"x\"").expect("module runs");
        std::hint::black_box(value);
    }
    let per_run = start.elapsed() / iterations;
    let start = Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(ailang::check_source(&source, "big.ail", true));
    }
    let per_check = start.elapsed() / iterations;
    println!("in-process check of a {lines}-line module: {:.3} ms", per_check.as_secs_f64() * 1e3);
    println!("in-process parse+run of a {lines}-line module: {:.3} ms per run", per_run.as_secs_f64() * 1e3);
    println!(
        "ratio in-process {lines}-line run / spawn /bin/true: {:.2}x",
        per_run.as_secs_f64() / baseline.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&root);
}
