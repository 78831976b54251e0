//! The child-process helper (`braid_conformance::child_process`): this test executable
//! starts itself again as the child, the two exchange lines, and a child that fails is
//! reported with its standard error.

use braid_conformance::child_process::{next_line, ChildTest};
use std::io::Cursor;

const ROLE: &str = "BRAID_CHILD_PROCESS_TEST_ROLE";

#[test]
fn next_line_trims_and_ends_with_the_input() {
    let mut input = Cursor::new("  first \nsecond\n");
    assert_eq!(next_line(&mut input).as_deref(), Some("first"));
    assert_eq!(next_line(&mut input).as_deref(), Some("second"));
    assert_eq!(next_line(&mut input), None);
}

#[test]
fn a_child_answers_lines_and_its_exit_is_seen() {
    if let Ok(role) = std::env::var(ROLE) {
        assert_eq!(role, "answering");
        println!("ready");
        let go = next_line(&mut std::io::stdin().lock());
        println!("got {}", go.unwrap_or_default());
        return;
    }
    let env = [(ROLE, "answering".to_string())];
    let mut child = ChildTest::spawn(
        "child_process::a_child_answers_lines_and_its_exit_is_seen",
        &env,
    )
    .unwrap();
    assert!(child.id() > 0);
    child.expect("ready").unwrap();
    child.send("go").unwrap();
    child.expect("got go").unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_child_that_fails_before_the_awaited_line_is_reported_with_its_stderr() {
    if std::env::var(ROLE).is_ok() {
        panic!("the child gives up here");
    }
    let env = [(ROLE, "failing".to_string())];
    let mut child = ChildTest::spawn(
        "child_process::a_child_that_fails_before_the_awaited_line_is_reported_with_its_stderr",
        &env,
    )
    .unwrap();
    let ended = child.expect("never printed").unwrap_err();
    assert_eq!(ended.awaited, "never printed");
    assert!(ended.stderr.contains("the child gives up here"), "{ended}");
    assert!(
        ended
            .to_string()
            .starts_with("the child ended before \"never printed\": "),
        "{ended}"
    );
    assert!(!child.wait().unwrap().success());
}
