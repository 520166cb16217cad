//! The queries asked at a checkpoint.

use crate::reference::Reference;
use crate::{Catalog, Rng};
use crtc::types::LocalBlockHash;
use rustc_hash::FxHashSet;

/// A local hash no generated block uses, appended to make a query run one
/// block past everything stored.
pub const STRAY_LOCAL: LocalBlockHash = LocalBlockHash(0x57a7_57a7_57a7_57a7);

/// Random truncated catalog sequences asked per checkpoint.
const RANDOM_QUERIES: usize = 4;

/// The queries for a checkpoint, deduplicated: the empty query; for every
/// rank the model knows, the root path of each of its held leaves (its live
/// sequences, holes included); a few random catalog sequences truncated at a
/// random length; and one sequence extended by [`STRAY_LOCAL`].
pub fn queries_for(
    reference: &Reference,
    catalog: &Catalog,
    rng: &mut Rng,
) -> Vec<Vec<LocalBlockHash>> {
    let mut queries = vec![Vec::new()];
    for rank in reference.ranks() {
        for leaf in reference.held_leaves(rank) {
            queries.extend(catalog.locals(leaf));
        }
    }
    for _ in 0..RANDOM_QUERIES {
        let Some(&block) = rng.pick(catalog.blocks()) else {
            break;
        };
        if let Some(mut locals) = catalog.locals(block) {
            locals.truncate(rng.between(1, locals.len()));
            queries.push(locals);
        }
    }
    if let Some(mut stray) = rng.pick(&queries[1..]).cloned() {
        stray.push(STRAY_LOCAL);
        queries.push(stray);
    }
    let mut seen = FxHashSet::default();
    queries.retain(|q| seen.insert(q.clone()));
    queries
}
