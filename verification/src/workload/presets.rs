//! Built-in seeded workloads (no files): `chat` and `agentx`.
//!
//! Both keep a pool of concurrent sessions and serve one turn of a randomly
//! chosen session at a time, so turns of different sessions interleave as
//! they would in a live fleet. Blocks are 128 tokens; text is random blocks
//! (unique), system prompts are shared blocks.
//!
//! - **chat**: multi-turn conversations under a few shared system prompts.
//!   Turn prompt = system prompt + previous turns + new user text; outputs of
//!   a few blocks; random placement, so a conversation's history is resident
//!   only where earlier turns ran (moderate reuse).
//! - **agentx**: long agent sessions. Turn prompt = previous prompt + previous
//!   output + tool text; long outputs; sticky placement (prefix hash through
//!   the session's first block). Most events are one-block decode stores on a
//!   request's tail: the traffic the tree's tail-append fast path targets.
//!
//! These definitions are ours: upstream's selection-replay workloads are not
//! public.

use super::engine::{Engine, EngineConfig, Placement, PrefixHashPlacement, RandomPlacement};
use super::Workload;
use crate::chain::mix;
use crate::Rng;
use crtc::types::LocalBlockHash;

/// The preset names [`preset`] accepts.
pub const PRESETS: [&str; 2] = ["chat", "agentx"];

/// The preset called `name` ("chat" or "agentx") with the default engine.
pub fn preset(name: &str, seed: u64, scale: f64) -> Result<Workload, String> {
    match name {
        "chat" => Ok(chat(seed, scale)),
        "agentx" => Ok(agentx(seed, scale)),
        _ => Err(format!(
            "unknown preset {name:?} (expected one of: {})",
            PRESETS.join(", ")
        )),
    }
}

/// Chat: 2,000 × `scale` conversations on the default engine (8 workers,
/// random placement).
pub fn chat(seed: u64, scale: f64) -> Workload {
    let config = EngineConfig {
        seed,
        ..EngineConfig::default()
    };
    chat_with(seed, scale, config, RandomPlacement::new(seed))
}

/// Chat on a given engine configuration and placement.
pub fn chat_with<P: Placement>(
    seed: u64,
    scale: f64,
    config: EngineConfig,
    placement: P,
) -> Workload {
    let mut engine = Engine::with_placement(config, placement);
    run(&mut engine, &CHAT, seed, scale);
    engine.finish("chat")
}

/// Agentx: 400 × `scale` agent sessions on the default engine (8 workers,
/// sticky prefix-hash placement).
pub fn agentx(seed: u64, scale: f64) -> Workload {
    let config = EngineConfig {
        seed,
        ..EngineConfig::default()
    };
    agentx_with(seed, scale, config, agentx_placement(seed))
}

/// Agentx on a given engine configuration and placement.
pub fn agentx_with<P: Placement>(
    seed: u64,
    scale: f64,
    config: EngineConfig,
    placement: P,
) -> Workload {
    let mut engine = Engine::with_placement(config, placement);
    run(&mut engine, &AGENTX, seed, scale);
    engine.finish("agentx")
}

/// The sticky placement agentx uses by default: hash through the system
/// prompt and the session's first task block.
pub fn agentx_placement(seed: u64) -> PrefixHashPlacement {
    PrefixHashPlacement::new(AGENTX.system_blocks.1 + 1, seed)
}

/// Inclusive ranges of block counts and sizes that define a preset.
struct Shape {
    salt: u64,
    sessions: usize,
    concurrency: usize,
    systems: usize,
    system_blocks: (usize, usize),
    turns: (usize, usize),
    first_text: (usize, usize),
    turn_text: (usize, usize),
    output: (usize, usize),
}

const CHAT: Shape = Shape {
    salt: 0x6368_6174,
    sessions: 2000,
    concurrency: 128,
    systems: 4,
    system_blocks: (4, 16),
    turns: (1, 8),
    first_text: (1, 4),
    turn_text: (1, 3),
    output: (1, 6),
};

// Each turn adds 1 prompt store, `output` decode stores and at most one
// removal batch: 8 decode stores in ~10 events puts the share near 80%.
const AGENTX: Shape = Shape {
    salt: 0x6167_656e_7478,
    sessions: 400,
    concurrency: 64,
    systems: 3,
    system_blocks: (24, 24),
    turns: (20, 60),
    first_text: (2, 8),
    turn_text: (1, 3),
    output: (4, 12),
};

struct Session {
    context: Vec<LocalBlockHash>,
    turns_left: usize,
}

/// `n` blocks of fresh text.
fn text(rng: &mut Rng, n: usize) -> impl Iterator<Item = LocalBlockHash> + '_ {
    (0..n).map(move |_| LocalBlockHash(rng.next_u64()))
}

fn between(rng: &mut Rng, (lo, hi): (usize, usize)) -> usize {
    rng.between(lo, hi)
}

/// `base × scale` rounded, at least 1.
fn scaled(base: usize, scale: f64) -> usize {
    let n = (base as f64 * scale).round();
    if n.is_finite() && n >= 1.0 {
        n as usize
    } else {
        1
    }
}

/// Serves every turn of every session of `shape` through `engine`.
fn run<P: Placement>(engine: &mut Engine<P>, shape: &Shape, seed: u64, scale: f64) {
    let mut rng = Rng::new(mix(seed ^ shape.salt));
    let systems: Vec<Vec<LocalBlockHash>> = (0..shape.systems)
        .map(|_| {
            let n = between(&mut rng, shape.system_blocks);
            text(&mut rng, n).collect()
        })
        .collect();
    let total = scaled(shape.sessions, scale);
    let (mut started, mut pool) = (0, Vec::<Session>::new());
    loop {
        while pool.len() < shape.concurrency && started < total {
            let mut context = systems[rng.below(systems.len())].clone();
            let n = between(&mut rng, shape.first_text);
            context.extend(text(&mut rng, n));
            let turns_left = between(&mut rng, shape.turns);
            pool.push(Session {
                context,
                turns_left,
            });
            started += 1;
        }
        if pool.is_empty() {
            return;
        }
        let i = rng.below(pool.len());
        let output = between(&mut rng, shape.output);
        let served = engine.submit(&pool[i].context, output);
        let session = &mut pool[i];
        session.context.extend(served.output);
        session.turns_left -= 1;
        if session.turns_left == 0 {
            pool.swap_remove(i);
        } else {
            let n = between(&mut rng, shape.turn_text);
            session.context.extend(text(&mut rng, n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::check::check_strict;

    #[test]
    fn agentx_default_is_decode_heavy_strict_and_deterministic() {
        let w = agentx(1, 1.0);
        let share = w.decode_share();
        assert!((0.75..=0.90).contains(&share), "decode share {share}");
        assert!((100_000..=300_000).contains(&w.events()), "{}", w.events());
        assert!(w.stats().removed > 0, "agentx should evict");
        check_strict(&w).unwrap();
        assert_eq!(agentx(1, 0.1), agentx(1, 0.1));
        assert_ne!(agentx(1, 0.1).ops, agentx(2, 0.1).ops);
    }

    #[test]
    fn chat_reuses_prompt_blocks_and_evicts() {
        let config = EngineConfig {
            seed: 5,
            ..EngineConfig::default()
        };
        let mut engine = Engine::with_placement(config, RandomPlacement::new(5));
        run(&mut engine, &CHAT, 5, 1.0);
        let stats = engine.stats();
        assert!(stats.reused_blocks > 0);
        assert!(stats.reused_blocks < stats.prompt_blocks);
        assert!(stats.evicted_blocks > 0);
        let w = engine.finish("chat");
        check_strict(&w).unwrap();
        assert_eq!(w, chat(5, 1.0));
    }

    #[test]
    fn preset_dispatch_and_scale() {
        assert_eq!(preset("chat", 3, 0.05).unwrap(), chat(3, 0.05));
        assert!(preset("nope", 3, 1.0).unwrap_err().contains("agentx"));
        assert!(agentx(3, 0.05).queries() < agentx(3, 0.1).queries());
        assert_eq!(scaled(400, 0.0), 1);
        assert_eq!(scaled(400, f64::NAN), 1);
        assert_eq!(scaled(400, 2.5), 1000);
    }
}
