//! The trees the drafter grows along a known answer, as a session would draft them: the
//! prompt calibrated by the session's default, then after every answer token a tree of
//! `DraftLimits::AUTO`'s bounds, uncapped by any controller. `tern-lab acceptance-data` labels
//! their nodes; `tern-lab bench-workloads` prices what they held (the tree bound).

use tern::speculative::drafter::{Drafter, TreeShape};
use tern::speculative::features::AcceptanceModel;
use tern::speculative::tree::DraftTree;
use tern::{DraftLimits, Engine, SpeculationOptions};
use tern_cli::error::Result;

/// The tree grown at every answer position: `DraftLimits::AUTO`'s bounds.
pub const SHAPE: TreeShape = TreeShape::of(DraftLimits::AUTO);

/// A drafter over `sources` (history texts, as token ids) and `prompt`, calibrated as a
/// session's prefill calibrates it by default (`tern::session::calibrated_drafter`).
pub fn calibrated_drafter(engine: &Engine, sources: &[Vec<u32>], prompt: &[u32]) -> Result<Drafter> {
    Ok(tern::session::calibrated_drafter(engine, sources, prompt, &SpeculationOptions::default())?)
}

/// Grows a tree after each token of `answer` but the last (the answer so far indexed), and
/// hands `visit` the position and the tree.
pub fn along_answer(
    drafter: &mut Drafter,
    answer: &[u32],
    acceptance: &AcceptanceModel,
    mut visit: impl FnMut(usize, &DraftTree) -> Result<()>,
) -> Result<()> {
    let mut tree = DraftTree::default();
    for i in 0..answer.len().saturating_sub(1) {
        drafter.push(&answer[i..=i]);
        drafter.draft(answer[i], SHAPE, acceptance, &mut tree);
        visit(i, &tree)?;
    }
    Ok(())
}

/// How many of the answer's next tokens `tree` (grown after `answer[i]`) held along one path.
pub fn held(tree: &DraftTree, answer: &[u32], i: usize) -> usize {
    let (mut node, mut depth) = (0, 0);
    while let Some(child) = answer.get(i + depth + 1).and_then(|&t| tree.child_with(node, t)) {
        node = child;
        depth += 1;
    }
    depth
}

/// For each position j of `answer`, how many tokens from `answer[j]` on the tree the drafter
/// grew before it held (0 for the first token, which the prefill chooses): `copy_runs`'
/// counterpart for the drafter's own trees.
pub fn tree_runs(engine: &Engine, sources: &[Vec<u32>], prompt: &[u32], answer: &[u32]) -> Result<Vec<usize>> {
    let mut drafter = calibrated_drafter(engine, sources, prompt)?;
    let mut runs = vec![0; answer.len()];
    along_answer(&mut drafter, answer, &AcceptanceModel::default(), |i, tree| {
        runs[i + 1] = held(tree, answer, i);
        Ok(())
    })?;
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern::speculative::features::Features;
    use tern::speculative::tree::Origin;

    #[test]
    fn held_follows_the_answer_down_whichever_branch_it_takes() {
        // After the root 7: 1 → 2 → 3, and 1 → 4 → 5.
        let mut t = DraftTree::default();
        t.reset(7);
        let one = t.push(0, 1, Origin::Context, 0.9, Features::default());
        let two = t.push(one, 2, Origin::Context, 0.9, Features::default());
        t.push(two, 3, Origin::Context, 0.9, Features::default());
        let four = t.push(one, 4, Origin::Context, 0.5, Features::default());
        t.push(four, 5, Origin::Context, 0.5, Features::default());
        assert_eq!(held(&t, &[7, 1, 4, 5, 9], 0), 3);
        assert_eq!(held(&t, &[7, 1, 2, 9], 0), 2);
        assert_eq!(held(&t, &[7, 8], 0), 0);
        assert_eq!(held(&t, &[0, 7, 1, 2, 3], 1), 3, "counted from the position's token");
        assert_eq!(held(&t, &[7, 1, 2], 0), 2, "not past the answer's end");
    }
}
