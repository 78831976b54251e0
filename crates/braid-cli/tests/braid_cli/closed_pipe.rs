//! Every command whose output pipe closes early (`braid plan | head`) ends quietly: no
//! "Broken pipe" error, a successful exit.

use crate::common;

use common::{braid, into_closed_pipe};

#[test]
fn a_closed_output_pipe_ends_every_command_quietly() {
    let dir = std::env::temp_dir().join(format!("braid-cli-{}-closed-pipe", std::process::id()));
    let dir = dir.to_str().expect("utf-8 path").to_string();
    let commands: [&[&str]; 4] = [
        &["plan", "--layers", "1", "--devices", "2"],
        &["demo"],
        &["acl-sim", "install", "--dir", &dir],
        &["--help"],
    ];
    for args in commands {
        let out = into_closed_pipe(braid().args(args));
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "braid {}: {}\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
