//! The tree's structural invariants, checked from outside the tree on a
//! quiescent tree through its public diagnostics ([`Tree::topology`], which
//! lists every node of the root's subtree with the key its parent holds it
//! under, and [`Tree::membership_count`], which counts coverage records by
//! raw slot, owned or not). The shuttle scenarios and the loom rank-removal
//! models (`models::scenarios`, `models::ranks`) run it after the join, so a
//! race that leaves a tree holding the right blocks in a broken shape fails
//! there, not only a race that changes scores or membership.
//!
//! Invariants (each fault names its node by the path of first local hashes
//! from the root):
//!
//! - **edges**: every edge is non-empty and chains from its parent: each
//!   pair's external hash is the chain hash of the previous external (the
//!   parent's last block at the head of the edge, none under the root) and
//!   its local hash, so every block sits under the block it follows;
//! - **keys**: a node is held under the first local hash of its edge, and no
//!   two children of one node share it, so a reader's walk by local hashes
//!   reaches every node;
//! - **coverage**: every cutoff `k` lies in `0 < k < len`; no rank is both
//!   full and cut on one node; a rank covering a node is full on its parent
//!   (the streams the scenarios check are strict, so coverage is a prefix
//!   of every path);
//! - **internal**: a node with children is internal (the flag is sticky);
//! - **root keys**: the root's key counts hold every child of the root
//!   (`crtc`'s `tree::key_filter`), so no lookup skips a linked child;
//! - **owned coverage**: every coverage record is credited to a rank that
//!   owns its slot (the raw record count equals the owned one), so no bit of
//!   a removed rank outlives its sweep on a vacated slot.
//!
//! Not checked here: anchors and their subtrees (`topology` does not list
//! them; the scenarios store none), lane lookups (private to the lanes), and
//! nodes unreachable from the root (by construction nothing lists them;
//! the membership and score checks catch coverage lost with them).

use crate::chain::chain_hash;
use crtc::harness::{NodeInfo, TreeHooks};
use crtc::types::ExternalSequenceBlockHash;
use crtc::Tree;
use crtc_strategies::ShapeGate;

/// The structural faults of `tree` (empty when it is sound). Call it on a
/// quiescent tree.
pub fn structural_faults<G: ShapeGate>(tree: &Tree<G>) -> Vec<String> {
    let nodes = tree.topology();
    let mut found = faults(&nodes, tree.membership_count());
    found.extend(
        (0..nodes.len())
            .filter(|&i| nodes[i].parent.is_none() && !tree.root_key_counted(nodes[i].key))
            .map(|i| format!("{}: under the root, not in its key counts", path(&nodes, i))),
    );
    found
}

/// The structural faults of a topology (parents before children, as
/// [`Tree::topology`] lists them) whose tree counts `raw_records` coverage
/// records.
pub fn faults(nodes: &[NodeInfo], raw_records: usize) -> Vec<String> {
    let mut found = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        let parent = node.parent.map(|p| &nodes[p]);
        let at = path(nodes, index);
        found.extend(
            edge_faults(node, parent)
                .into_iter()
                .map(|f| format!("{at}: {f}")),
        );
        found.extend(
            coverage_faults(node, parent)
                .into_iter()
                .map(|f| format!("{at}: {f}")),
        );
        let children: Vec<&NodeInfo> = nodes.iter().filter(|n| n.parent == Some(index)).collect();
        if children.len() != node.children {
            found.push(format!(
                "{at}: {} children listed under it, {} counted",
                children.len(),
                node.children
            ));
        }
        if !children.is_empty() && !node.internal {
            found.push(format!("{at}: has children but is not internal"));
        }
    }
    found.extend(sibling_faults(nodes));
    let owned: usize = nodes.iter().map(|n| n.full.len() + n.cutoffs.len()).sum();
    if owned != raw_records {
        found.push(format!(
            "{raw_records} coverage records, {owned} of them credited to a rank owning the slot"
        ));
    }
    found
}

/// The first local hashes from the root down to `index`, for messages.
fn path(nodes: &[NodeInfo], mut index: usize) -> String {
    let mut keys = Vec::new();
    loop {
        keys.push(nodes[index].key.0);
        match nodes[index].parent {
            Some(parent) => index = parent,
            None => break,
        }
    }
    keys.reverse();
    format!("node {keys:?}")
}

/// Empty edges, keys other than the first local, and pairs whose external
/// hash does not chain from the block before.
fn edge_faults(node: &NodeInfo, parent: Option<&NodeInfo>) -> Vec<String> {
    let Some(first) = node.edge.first() else {
        return vec!["empty edge".to_string()];
    };
    let mut found = Vec::new();
    if first.local != node.key {
        found.push(format!(
            "held under key {}, but its edge starts with {}",
            node.key.0, first.local.0
        ));
    }
    let mut before: Option<ExternalSequenceBlockHash> =
        parent.and_then(|p| p.edge.last()).map(|b| b.external);
    for (position, pair) in node.edge.iter().enumerate() {
        if pair.external != chain_hash(before, pair.local) {
            found.push(format!(
                "block {position} (local {}) does not chain from the block before it",
                pair.local.0
            ));
        }
        before = Some(pair.external);
    }
    found
}

/// Cutoffs outside the edge, ranks both full and cut or listed twice, and
/// ranks covering a node without being full on its parent.
fn coverage_faults(node: &NodeInfo, parent: Option<&NodeInfo>) -> Vec<String> {
    let mut found = Vec::new();
    let len = node.edge.len();
    for &(rank, k) in &node.cutoffs {
        if k == 0 || k as usize >= len {
            found.push(format!("rank {rank} cut at {k} on an edge of {len}"));
        }
        if node.full.contains(&rank) {
            found.push(format!("rank {rank} is both full and cut at {k}"));
        }
    }
    let cut: Vec<_> = node.cutoffs.iter().map(|&(r, _)| r).collect();
    if has_duplicates(&node.full) || has_duplicates(&cut) {
        found.push("a rank is listed twice".to_string());
    }
    let mut ranks = node.full.clone();
    ranks.extend(cut);
    ranks.sort_unstable();
    ranks.dedup();
    if let Some(parent) = parent {
        for rank in ranks.iter().filter(|r| !parent.full.contains(r)) {
            found.push(format!(
                "rank {rank} covers the node but is not full on its parent"
            ));
        }
    }
    found
}

fn has_duplicates<T: Ord + Clone>(items: &[T]) -> bool {
    let mut sorted = items.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[0] == w[1])
}

/// Children of one parent (or of the root) sharing a first local hash.
fn sibling_faults(nodes: &[NodeInfo]) -> Vec<String> {
    let mut keys: Vec<(Option<usize>, u64)> = nodes
        .iter()
        .filter_map(|n| n.edge.first().map(|b| (n.parent, b.local.0)))
        .collect();
    let all = keys.len();
    keys.sort_unstable();
    keys.dedup();
    if keys.len() == all {
        return Vec::new();
    }
    vec![format!(
        "{} children share a first local hash with a sibling",
        all - keys.len()
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::chained;
    use crtc::types::{LocalBlockHash, WorkerWithDpRank};

    fn rank(worker: u64) -> WorkerWithDpRank {
        WorkerWithDpRank::new(worker, 0)
    }

    /// The root child `[1,2]` (ranks 1 and 2 full, internal) with the
    /// child `[3]` (rank 1 full), and the root child `[5,6]` (rank 2 cut
    /// at 1).
    fn sound() -> Vec<NodeInfo> {
        let top = chained(None, &[1, 2]);
        let child = chained(Some(top[1].external), &[3]);
        let other = chained(None, &[5, 6]);
        vec![
            NodeInfo {
                parent: None,
                key: LocalBlockHash(1),
                depth: 0,
                edge: top,
                full: vec![rank(1), rank(2)],
                cutoffs: vec![],
                internal: true,
                children: 1,
            },
            NodeInfo {
                parent: Some(0),
                key: LocalBlockHash(3),
                depth: 2,
                edge: child,
                full: vec![rank(1)],
                cutoffs: vec![],
                internal: false,
                children: 0,
            },
            NodeInfo {
                parent: None,
                key: LocalBlockHash(5),
                depth: 0,
                edge: other,
                full: vec![],
                cutoffs: vec![(rank(2), 1)],
                internal: false,
                children: 0,
            },
        ]
    }

    #[test]
    fn a_sound_topology_has_no_faults() {
        assert_eq!(faults(&sound(), 4), Vec::<String>::new());
    }

    /// A fault the report must name, and how to break a sound topology so.
    type Break = (&'static str, fn(&mut Vec<NodeInfo>));

    #[test]
    fn each_broken_invariant_is_reported() {
        let breaks: [Break; 7] = [
            ("held under key", |n| n[1].key = LocalBlockHash(9)),
            ("does not chain", |n| n[1].edge[0].external.0 ^= 1),
            ("cut at 2", |n| n[2].cutoffs[0].1 = 2),
            ("both full and cut", |n| n[0].cutoffs.push((rank(1), 1))),
            ("not full on its parent", |n| n[1].full.push(rank(3))),
            ("not internal", |n| n[0].internal = false),
            ("share a first local", |n| {
                let mut twin = n[2].clone();
                twin.key = LocalBlockHash(5);
                n.push(twin);
            }),
        ];
        for (expected, apply) in breaks {
            let mut nodes = sound();
            apply(&mut nodes);
            let raw = nodes.iter().map(|n| n.full.len() + n.cutoffs.len()).sum();
            let found = faults(&nodes, raw);
            assert!(
                found.iter().any(|f| f.contains(expected)),
                "{expected:?} not reported: {found:?}"
            );
        }
        assert!(faults(&sound(), 5)[0].contains("credited to a rank owning the slot"));
    }
}
