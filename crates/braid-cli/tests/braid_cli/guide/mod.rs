//! The README's and the guide's blocks that are not Rust (docs/guide/README.md says the rules
//! every block follows): every `console` block is run here as printed and its output compared,
//! every `sh` command is accounted for in [`NOT_RUN`], and every other block has a kind some
//! test checks. The Rust blocks are doctests of the `braid` crate (`braid::guide`); the
//! torch_npu chapter runs as printed, install included, in `scripts/torch_npu_guide_test.py`.

mod blocks;
mod matching;

use blocks::{blocks, transcript, words, Block};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The guide's chapter files (`NN-name.md`), in order.
fn chapters() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("docs/guide"))
        .expect("docs/guide")
        .map(|e| e.expect("an entry").path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".md") && name.as_bytes()[0].is_ascii_digit()
        })
        .collect();
    files.sort();
    files
}

/// The files whose blocks are checked: the README, the guide's index and its chapters.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![
        root().join("README.md"),
        root().join("docs/guide/README.md"),
    ];
    files.extend(chapters());
    files
}

fn all_blocks() -> Vec<Block> {
    documents().iter().flat_map(|f| blocks(f)).collect()
}

/// Commands of `sh` blocks, which this test does not run, each with who runs it instead or why
/// it cannot run here. A command of an `sh` block must start with one of these (it counts for
/// the longest); an entry no command starts with is an error too.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "cargo test --workspace",
        ".ci/run runs it (this test is one of the tests it runs)",
    ),
    (
        "cargo test --workspace --test braid -- fault_soak",
        "the fault soak test itself checks the chapter's sample against its run",
    ),
    (
        "cargo test --release --workspace --test braid -- fault_soak --ignored",
        "a million operations, minutes long: run by hand",
    ),
    (
        "cargo run --release --example memory_reuse",
        "minutes in the debug build this test runs; the demo's memory_reuse rows, checked \
         here, are its figures",
    ),
    (
        "scripts/torch_npu_tests.sh -q -k llama",
        ".ci/run runs the torch_npu suite, test_llama_decode.py among it (it needs the \
         suite's Python environment, 5.8 GB)",
    ),
    (
        "cargo bench",
        ".ci/run compiles every bench (`cargo bench --no-run`); their runs take minutes, and \
         the ACL ones are for an Ascend server",
    ),
    (
        "scripts/side_by_side.sh",
        "minutes of timing in the torch_npu suite's Python environment (5.8 GB), on a quiet \
         machine: run by hand; its figures are in chapter 11 with the machine they were taken on",
    ),
    (
        "cargo build --release -p braid-cli",
        ".ci/run builds it; this test runs the `braid` binary cargo built for it",
    ),
    (
        "cargo doc",
        ".ci/run documents the workspace, where braid has every feature, with warnings as \
         errors; a project of your own is not at hand here",
    ),
    (
        "RUSTDOCFLAGS=\"--cfg docsrs\" cargo +nightly doc",
        "needs a nightly toolchain (docs.rs builds this way)",
    ),
    (
        "target/release/braid conformance > conformance.txt",
        "a step on an Ascend server; `braid conformance` itself runs here on braid-acl-sim",
    ),
    (
        "target/release/braid calibrate --output profile.json > calibrate.txt",
        "a step on an Ascend server (minutes); `braid calibrate --quick` runs here on \
         braid-acl-sim",
    ),
    (
        "target/release/braid demo --backend acl > demo.txt",
        "a step on an Ascend server; `braid demo --backend acl` runs here on braid-acl-sim",
    ),
    (
        "python3.11 -m venv npu-sim",
        "scripts/torch_npu_guide_test.py runs the torch_npu chapter's install as printed, on a \
         fresh account (.ci/run)",
    ),
    (
        ". npu-sim/bin/activate",
        "scripts/torch_npu_guide_test.py (see above)",
    ),
    (
        "pip install \"transformers>=5,<6\"",
        "scripts/torch_npu_guide_test.py (see above)",
    ),
    (
        "pip wheel --no-deps --wheel-dir wheels ~/braid/python/braid-acl-sim",
        "scripts/torch_npu_guide_test.py (see above)",
    ),
    (
        "pip install --find-links wheels \"braid-acl-sim[torch-npu]\"",
        "scripts/torch_npu_guide_test.py (see above)",
    ),
];

/// `text` blocks: samples a test produces and checks against the guide itself, each named by
/// its first line's start and the test that checks it.
const TEXT_SAMPLES: &[(&str, &str)] = &[(
    "fault soak (seed 1,",
    "crates/braid/tests/braid/fault_soak.rs checks these lines against its run",
)];

/// Rust blocks whose info string carries `ignore`: never compiled, so each needs a reason.
const IGNORED_RUST: &[(&str, &str)] = &[];

#[test]
fn every_chapter_is_a_module_of_the_facade_and_listed_in_the_index() {
    let facade = std::fs::read_to_string(root().join("crates/braid/src/guide.rs")).unwrap();
    let index = std::fs::read_to_string(root().join("docs/guide/README.md")).unwrap();
    let chapters = chapters();
    assert!(chapters.len() >= 11, "{chapters:?}");
    for chapter in chapters {
        let name = chapter.file_name().unwrap().to_string_lossy();
        assert!(
            facade.contains(&format!("include_str!(\"../../../docs/guide/{name}\")")),
            "crates/braid/src/guide.rs does not include {name}: its Rust blocks would not be tested"
        );
        assert!(
            index.contains(&format!("]({name})")),
            "docs/guide/README.md does not link {name}"
        );
    }
}

#[test]
fn every_block_has_a_kind_that_is_tested() {
    let mut errors = Vec::new();
    for block in all_blocks() {
        let torch_chapter = block.file.ends_with("07-torch-npu.md");
        let ok = match block.lang.as_str() {
            "rust" => {
                let ignored = block.tags.iter().any(|t| t == "ignore");
                !ignored
                    || IGNORED_RUST
                        .iter()
                        .any(|(first, _)| block.body[0].contains(first))
            }
            "console" => block.tags.is_empty() || (torch_chapter && block.tags == ["torch_npu"]),
            "sh" | "toml" => true,
            "text" => TEXT_SAMPLES
                .iter()
                .any(|(first, _)| block.body.first().is_some_and(|l| l.starts_with(first))),
            "python" | "json" => torch_chapter && block.tags.len() == 1,
            _ => false,
        };
        if !ok {
            errors.push(format!(
                "{}: a `{}` block ({:?}) no test checks; docs/guide/README.md lists the kinds",
                block.place(),
                block.lang,
                block.tags
            ));
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn every_sh_command_is_accounted_for() {
    let mut used = vec![false; NOT_RUN.len()];
    let mut errors = Vec::new();
    for block in all_blocks().iter().filter(|b| b.lang == "sh") {
        for (i, line) in block.body.iter().enumerate() {
            let command = line.split("  #").next().unwrap().trim();
            if command.is_empty() || command.starts_with('#') {
                continue;
            }
            // The longest entry the command starts with (`cargo test --workspace` starts
            // longer ones).
            let entry = NOT_RUN
                .iter()
                .enumerate()
                .filter(|(_, (start, _))| command.starts_with(start))
                .max_by_key(|(_, (start, _))| start.len());
            match entry.map(|(k, _)| k) {
                Some(k) => used[k] = true,
                None => errors.push(format!(
                    "{}:{}: `{command}` is neither run (a `console` block) nor listed in NOT_RUN",
                    block.file.display(),
                    block.line + 1 + i
                )),
            }
        }
    }
    for (k, (start, _)) in NOT_RUN.iter().enumerate() {
        if !used[k] {
            errors.push(format!("NOT_RUN lists `{start}`, which no sh block has"));
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// What runs a command of a `console` block.
#[derive(Debug, PartialEq)]
struct Invocation {
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// The command asks for the `acl` feature (`cargo run --features acl`).
    acl: bool,
}

/// Where cargo put the examples of the build this test belongs to (`cargo test` builds every
/// example of the packages it tests).
fn example(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let path = profile_dir.join("examples").join(name);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} is not built: `cargo test --workspace` builds every example (or `cargo build -p \
             braid --examples`)",
            path.display()
        ))
    }
}

/// The program, arguments and variables of a command the guide prints.
fn invocation(command: &str, home: &Path) -> Result<Invocation, String> {
    let mut words = words(command, home)?;
    let mut env = Vec::new();
    while let Some((name, value)) = words.first().and_then(|w| w.split_once('=')) {
        if !name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
        {
            break;
        }
        env.push((name.to_string(), value.to_string()));
        words.remove(0);
    }
    let braid = PathBuf::from(env!("CARGO_BIN_EXE_braid"));
    let program = words.first().cloned().unwrap_or_default();
    if program == "braid" || program == "target/release/braid" {
        return Ok(Invocation {
            program: braid,
            args: words[1..].to_vec(),
            env,
            acl: false,
        });
    }
    if words.get(..2) != Some(&["cargo".to_string(), "run".to_string()]) {
        return Err("not a command the guide test runs (put it in an sh block)".into());
    }
    let (mut package, mut example_name, mut args, mut acl) = (None, None, Vec::new(), false);
    let mut rest = words[2..].iter();
    while let Some(word) = rest.next() {
        match word.as_str() {
            "--release" => {}
            "-p" => package = rest.next().cloned(),
            // The examples run as `cargo test` built them; a workspace build has `acl` on.
            "--features" if rest.next().is_some_and(|f| f == "braid/acl") => acl = true,
            "--example" => example_name = rest.next().cloned(),
            "--" => {
                args = rest.cloned().collect();
                break;
            }
            other => return Err(format!("`cargo run {other}`: not an option the test knows")),
        }
    }
    let program = match (package.as_deref(), example_name) {
        (Some("braid-cli"), None) => braid,
        // Without `-p`, cargo resolves features for the whole workspace, as `cargo test
        // --workspace` did: the example it built is reused, nothing is compiled.
        (None, Some(name)) => example(&name)?,
        (Some(_), Some(_)) => {
            return Err(
                "`-p` with an example: cargo would resolve that package's features \
                        alone, unlike `cargo test --workspace`, and rebuild most of the \
                        workspace; write `cargo run --example NAME`"
                    .into(),
            )
        }
        _ => return Err("`cargo run` of something other than braid-cli or an example".into()),
    };
    Ok(Invocation {
        program,
        args,
        env,
        acl,
    })
}

/// What a command printed.
struct Ran {
    ok: bool,
    status: String,
    stdout: String,
    stderr: String,
}

/// Runs `inv` from the repository's root with `home` as its `HOME`.
fn run(inv: &Invocation, home: &Path) -> Ran {
    let out = Command::new(&inv.program)
        .args(&inv.args)
        .current_dir(root())
        // Nothing of this machine's: braid-acl-sim rather than a CANN installed here, the
        // allocator's defaults, a home of its own for `~` and what the command writes.
        .env_remove("BRAID_ACL_LIB")
        .env_remove("ASCEND_HOME_PATH")
        .env_remove("ASCEND_TOOLKIT_HOME")
        .env_remove("BRAID_ALLOC_CONF")
        .env("HOME", home)
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", inv.program.display()));
    Ran {
        ok: out.status.success(),
        status: out.status.to_string(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn every_console_block_prints_what_the_guide_says() {
    let home = std::env::temp_dir().join(format!("braid-guide-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let mut errors = Vec::new();
    // Each step with the invocation it stands for; a command printed twice runs once.
    let mut steps = Vec::new();
    let mut commands: Vec<Invocation> = Vec::new();
    let blocks = all_blocks();
    for block in blocks
        .iter()
        .filter(|b| b.lang == "console" && b.tags.is_empty())
    {
        for step in transcript(block) {
            let place = format!("{}:{}", block.file.display(), step.line);
            match invocation(&step.command, &home) {
                Ok(inv) => {
                    let k = commands.iter().position(|c| *c == inv).unwrap_or_else(|| {
                        commands.push(inv);
                        commands.len() - 1
                    });
                    steps.push((place, step, k));
                }
                Err(why) => errors.push(format!("{place}: `{}`: {why}", step.command)),
            }
        }
    }
    assert!(steps.len() >= 20, "{} commands", steps.len());
    // The commands are independent: a few at a time.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    let mut ran: Vec<(usize, Ran)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        match commands.get(k) {
                            Some(inv) => mine.push((k, run(inv, &home))),
                            None => return mine,
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a worker"))
            .collect()
    });
    ran.sort_by_key(|(k, _)| *k);
    for (place, step, k) in steps {
        let out = &ran[k].1;
        if commands[k].acl && out.stdout.starts_with("running on the simulated device") {
            errors.push(format!(
                "{place}: `{}` asks for `--features acl`, but the examples were built without \
                 it: `cargo test --workspace` builds them with it (the CLI turns it on), or \
                 `cargo build -p braid --examples --features acl-sim`",
                step.command
            ));
        } else if !out.ok {
            errors.push(format!(
                "{place}: `{}` failed ({})\n--- stdout\n{}--- stderr\n{}",
                step.command, out.status, out.stdout, out.stderr
            ));
        } else if !matching::lines_match(&step.expected, &out.stdout) {
            errors.push(format!(
                "{place}: `{}` printed what the guide does not say\n--- the guide\n{}\n--- the \
                 run\n{}",
                step.command,
                step.expected.join("\n"),
                out.stdout
            ));
        }
    }
    std::fs::remove_dir_all(&home).ok();
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

#[test]
fn commands_map_to_the_binaries_cargo_built() {
    let home = Path::new("/h");
    let braid = PathBuf::from(env!("CARGO_BIN_EXE_braid"));
    let inv = invocation(
        "cargo run --release -p braid-cli -- demo --dtype float32",
        home,
    )
    .unwrap();
    assert_eq!(
        (inv.program, inv.args),
        (
            braid.clone(),
            vec!["demo".into(), "--dtype".into(), "float32".into()]
        )
    );
    let inv = invocation("X_Y=1 target/release/braid plan --profile ~/p.json", home).unwrap();
    assert_eq!(inv.program, braid);
    assert_eq!(inv.env, [("X_Y".to_string(), "1".to_string())]);
    assert_eq!(inv.args, ["plan", "--profile", "/h/p.json"]);
    let inv = invocation("cargo run --example wait_stream --features braid/acl", home);
    assert!(inv.is_ok_and(|inv| inv.acl) || example("wait_stream").is_err());
    let err = invocation("cargo run -p braid --example wait_stream", home).unwrap_err();
    assert!(err.contains("cargo run --example NAME"), "{err}");
    assert!(invocation("cargo run -p braid-benches", home).is_err());
    assert!(invocation("cargo build -p braid", home).is_err());
    assert!(invocation("python prog.py", home).is_err());
}
