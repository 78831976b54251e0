//! A communicator across processes on 127.0.0.1: this test binary re-runs itself as the other
//! ranks. Rank 0 (the test) creates the simulator's root info, publishes it over
//! [`TcpRootInfoTransport`]; every child fetches it, joins, and all ranks run exchanges whose
//! results each checks.
#![cfg(feature = "sim")]

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use braid_backend_sim::RemoteGroup;
use braid_collective::{RootInfoTransport, TcpRootInfoTransport};
use braid_stream_core::hal::HalError;

/// Set in a child: `<test name> <rank> <ranks> <rank 0's transport address>`.
const CHILD_ROLE: &str = "BRAID_MULTI_PROCESS_CHILD";
const WAIT: Duration = Duration::from_secs(5);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// This rank's part of the all-reduce: `rank + 1` in each of 4 `f32`s.
fn part(rank: u32) -> Vec<u8> {
    [(rank + 1) as f32; 4]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect()
}

/// Sums the ranks' `f32` parts elementwise.
fn reduce_sum(parts: &[Vec<u8>]) -> Vec<f32> {
    let mut sum = vec![0f32; 4];
    for part in parts {
        for (i, bytes) in part.chunks_exact(4).enumerate() {
            sum[i] += f32::from_le_bytes(bytes.try_into().unwrap());
        }
    }
    sum
}

/// What every rank does once it has joined: an all-reduce through the exchange, then a call
/// on which the last rank is out of step (every rank must get the typed error), then an
/// exchange that still works.
fn run_rank(group: &RemoteGroup) {
    let ranks = group.ranks();
    let gathered = group.exchange(0, part(group.rank())).unwrap();
    assert_eq!(gathered.len(), ranks as usize);
    let expected = (1..=ranks).sum::<u32>() as f32;
    assert_eq!(reduce_sum(&gathered), vec![expected; 4]);

    let call = if group.rank() == ranks - 1 { 2 } else { 1 };
    match group.exchange(call, vec![group.rank() as u8]) {
        Err(HalError::InvalidArgument(why)) => assert!(
            why.contains(&format!(
                "rank 0 is at call 1, rank {} at call 2",
                ranks - 1
            )),
            "{why}"
        ),
        other => panic!(
            "rank {}: expected an invalid argument, got {other:?}",
            group.rank()
        ),
    }

    let names = group
        .exchange(3, format!("rank {}", group.rank()).into_bytes())
        .unwrap();
    let expected: Vec<Vec<u8>> = (0..ranks)
        .map(|r| format!("rank {r}").into_bytes())
        .collect();
    assert_eq!(names, expected);
}

/// The children of one run, killed if the test fails before they finish.
struct Children(Vec<(u32, Child)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `test` as rank 0 of `ranks` ranks, the others as children of this test binary, or,
/// in a child, as the rank its role names.
fn communicator_across_processes(test: &str, ranks: u32) {
    if let Ok(role) = std::env::var(CHILD_ROLE) {
        let fields: Vec<&str> = role.split(' ').collect();
        if fields[0] == test {
            let rank: u32 = fields[1].parse().unwrap();
            let ranks: u32 = fields[2].parse().unwrap();
            let addr: SocketAddr = fields[3].parse().unwrap();
            let transport: Box<dyn RootInfoTransport> =
                Box::new(TcpRootInfoTransport::connect(addr));
            let info = runtime().block_on(transport.fetch(WAIT)).unwrap();
            let group = RemoteGroup::join(&info, ranks, rank, WAIT).unwrap();
            run_rank(&group);
        }
        return;
    }

    let rt = runtime();
    let any_port: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let transport = rt
        .block_on(TcpRootInfoTransport::bind(any_port, ranks as usize - 1))
        .unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut children = Children(Vec::new());
    for rank in 1..ranks {
        let role = format!("{test} {rank} {ranks} {}", transport.local_addr());
        let child = Command::new(&exe)
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ROLE, role)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        children.0.push((rank, child));
    }

    let info = RemoteGroup::root_info().unwrap();
    let transport: &dyn RootInfoTransport = &transport;
    rt.block_on(transport.publish(&info, WAIT)).unwrap();
    let group = RemoteGroup::join(&info, ranks, 0, WAIT).unwrap();
    run_rank(&group);

    for (rank, child) in std::mem::take(&mut children.0) {
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "rank {rank} failed: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        // The child really ran this test (not zero tests by a wrong filter).
        assert!(stdout.contains("1 passed"), "rank {rank}: {stdout}");
    }
}

#[test]
fn a_communicator_across_two_processes() {
    communicator_across_processes("a_communicator_across_two_processes", 2);
}

#[test]
fn a_communicator_across_four_processes() {
    communicator_across_processes("a_communicator_across_four_processes", 4);
}
