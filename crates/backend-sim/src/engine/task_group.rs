//! Task groups: spans of captured nodes re-issued with new parameters (ACL's
//! `aclmdlRICaptureTaskGrpBegin`/`End`, `aclmdlRICaptureTaskUpdateBegin`/`End`).
//!
//! A group is the list of node indices captured on one stream between its begin and end. At
//! the end of the capture its handle is bound to the graph's shared nodes. An update collects
//! the operators submitted on the update stream and, at its end, replaces the group's nodes'
//! operators (dependencies unchanged) when there are exactly as many, each of the same kind
//! (a collective part: of the same communicator and rank, with a call the other ranks'
//! replays still match); otherwise nothing changes. The next launch of the graph replays the new operators (data
//! mode computes with their new scalars, bodies and buffers).

use super::{invalid, Engine};
use crate::capture::{GraphNodes, Node};
use crate::op::{CollectivePart, Op, OpKind};
use braid_stream_core::hal::{HalError, TaskGroupHandle};
use std::sync::{Arc, Weak};

/// One task group.
#[derive(Debug)]
pub(crate) struct GroupRecord {
    /// Indices of its nodes in the graph, in capture order.
    nodes: Vec<usize>,
    /// The graph's nodes, once its capture has ended.
    graph: Option<Weak<braid_stream_core::sync::RwLock<Arc<[Node]>>>>,
}

impl Engine {
    /// Opens a task group on capturing stream `s`.
    pub fn begin_task_group(&mut self, s: u32) -> Result<(), HalError> {
        self.host_call("task_group_begin");
        if self.updates.contains_key(&s) {
            return Err(invalid(format!("stream {s} is updating a task group")));
        }
        self.with_frontier(s, |cap, _| match cap.open_groups.entry(s) {
            std::collections::btree_map::Entry::Occupied(_) => Err(invalid(format!(
                "stream {s} already has an open task group"
            ))),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(Vec::new());
                Ok(())
            }
        })?
    }

    /// Closes the task group open on stream `s`; returns its handle.
    pub fn end_task_group(&mut self, s: u32) -> Result<TaskGroupHandle, HalError> {
        self.host_call("task_group_end");
        let handle = self.next_task_group;
        let nodes = self.with_frontier(s, |cap, _| {
            let nodes = cap.open_groups.remove(&s);
            if nodes.is_some() {
                cap.groups.push(handle);
            }
            nodes
        })?;
        let Some(nodes) = nodes else {
            return Err(invalid(format!("stream {s} has no open task group")));
        };
        self.next_task_group += 1;
        self.task_groups
            .insert(handle, GroupRecord { nodes, graph: None });
        Ok(TaskGroupHandle(handle))
    }

    /// Binds the task groups of an ended capture to its graph's nodes, and forgets groups of
    /// graphs gone.
    pub(crate) fn bind_task_groups(&mut self, groups: &[u64], graph: &GraphNodes) {
        for h in groups {
            if let Some(rec) = self.task_groups.get_mut(h) {
                rec.graph = Some(Arc::downgrade(graph));
            }
        }
        self.task_groups
            .retain(|_, rec| rec.graph.as_ref().is_none_or(|g| g.strong_count() > 0));
    }

    /// Begins re-issuing `group` on eager stream `s`.
    pub fn begin_task_update(&mut self, s: u32, group: TaskGroupHandle) -> Result<(), HalError> {
        self.host_call("task_update_begin");
        if self.stream(s)?.capture.is_some() {
            return Err(invalid(format!(
                "stream {s} is capturing: update a task group on an eager stream"
            )));
        }
        if self.updates.contains_key(&s) {
            return Err(invalid(format!(
                "stream {s} is already updating a task group"
            )));
        }
        match self.task_groups.get(&group.0) {
            None => return Err(invalid(format!("unknown task group {}", group.0))),
            Some(rec) if rec.graph.is_none() => {
                return Err(invalid(format!(
                    "task group {}: its capture has not ended",
                    group.0
                )))
            }
            Some(_) => {}
        }
        self.updates.insert(s, (group.0, Vec::new()));
        Ok(())
    }

    /// Ends the update on stream `s`: with `commit`, replaces the group's operators, or
    /// changes nothing and refuses when the re-issued operators differ in count or kind;
    /// without, discards them.
    pub fn end_task_update(&mut self, s: u32, commit: bool) -> Result<(), HalError> {
        self.host_call("task_update_end");
        let Some((group, ops)) = self.updates.remove(&s) else {
            return Err(invalid(format!(
                "stream {s} has no task update in progress: begin one first"
            )));
        };
        if !commit {
            return Ok(());
        }
        let rec = self
            .task_groups
            .get(&group)
            .ok_or_else(|| invalid(format!("unknown task group {group}")))?;
        if ops.len() != rec.nodes.len() {
            return Err(invalid(format!(
                "task group {group} holds {} operators, the update re-issued {}; nothing changed",
                rec.nodes.len(),
                ops.len()
            )));
        }
        let cell = rec
            .graph
            .as_ref()
            .and_then(Weak::upgrade)
            .ok_or_else(|| invalid(format!("task group {group}: its graph was destroyed")))?;
        let mut graph = cell.write();
        let mut nodes: Vec<Node> = graph.to_vec();
        for (i, (&n, op)) in rec.nodes.iter().zip(&ops).enumerate() {
            let captured = &nodes[n].op;
            if captured.kind.name() != op.kind.name() || captured.label != op.label {
                return Err(invalid(format!(
                    "task group {group}, operator {i}: captured `{}` ({}), re-issued `{}` ({}); \
                     nothing changed",
                    captured.label,
                    captured.kind.name(),
                    op.label,
                    op.kind.name()
                )));
            }
            if let (OpKind::Collective(old), OpKind::Collective(new)) = (&captured.kind, &op.kind) {
                if let Some(difference) = collective_difference(old, new) {
                    return Err(invalid(format!(
                        "task group {group}, operator {i} (`{}`): {difference}; nothing changed",
                        op.label
                    )));
                }
            }
        }
        for (&n, mut op) in rec.nodes.iter().zip(ops) {
            if let (OpKind::Collective(old), OpKind::Collective(new)) =
                (&nodes[n].op.kind, &op.kind)
            {
                // Replays match the other ranks' by the captured part's number.
                let part = CollectivePart {
                    captured: old.captured,
                    ..(**new).clone()
                };
                op.kind = OpKind::Collective(Arc::new(part));
            }
            let stream = nodes[n].op.stream;
            nodes[n].op = op;
            nodes[n].op.stream = stream;
        }
        *graph = nodes.into();
        tracing::debug!(stream = s, group, "sim task group updated");
        Ok(())
    }

    /// Whether stream `s` is re-issuing a task group.
    pub(crate) fn is_updating(&self, s: u32) -> bool {
        self.updates.contains_key(&s)
    }

    /// Keeps `op`, re-issued on stream `s` into the task group it updates: it replaces the
    /// group's operator at the end of the update instead of running.
    pub(crate) fn reissue(&mut self, s: u32, op: Op) -> Result<(), HalError> {
        let (_, ops) = self
            .updates
            .get_mut(&s)
            .ok_or_else(|| invalid(format!("stream {s} has no task update in progress")))?;
        ops.push(op);
        Ok(())
    }
}

/// Why a re-issued collective part cannot replace the captured one: another communicator or
/// rank, or a call the other ranks' replays would not match (operation, count, data type).
fn collective_difference(captured: &CollectivePart, reissued: &CollectivePart) -> Option<String> {
    if (captured.comm, captured.rank) != (reissued.comm, reissued.rank) {
        return Some(format!(
            "captured as rank {} of communicator {}, re-issued as rank {} of communicator {}",
            captured.rank, captured.comm, reissued.rank, reissued.comm
        ));
    }
    let (old, new) = (captured.call.signature(), reissued.call.signature());
    (old != new).then(|| old.difference(&new))
}
