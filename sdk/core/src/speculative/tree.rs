//! A draft token tree: the pending token at the root, drafted continuations below it, in the
//! order [`crate::model::Model::forward_tree`] takes them (parents before children).

use super::features::Features;

/// Where a drafted token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The root: the last chosen token, not drafted.
    Root,
    /// What followed the matched text somewhere in the index (prompt, history, answer).
    Context,
    /// The model's own prediction at a matched context position (calibration).
    Calibrated,
    /// The tail of an earlier draft that agreed with the model's predictions (draft reuse).
    Reused,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub token: u32,
    /// Index of the parent node; `None` for the root only.
    pub parent: Option<usize>,
    pub depth: usize,
    pub origin: Origin,
    /// Estimated probability that the model picks this token after its parent.
    pub p: f32,
    /// Estimated probability that the whole path to this node is accepted.
    pub p_path: f32,
    /// What the estimate was made from (the acceptance model learns from the outcome).
    pub features: Features,
}

#[derive(Debug, Clone, Default)]
pub struct DraftTree {
    nodes: Vec<Node>,
    tokens: Vec<u32>,
    parents: Vec<Option<usize>>,
}

impl DraftTree {
    /// Starts a tree holding only `root`.
    pub fn reset(&mut self, root: u32) {
        self.nodes.clear();
        self.tokens.clear();
        self.parents.clear();
        self.nodes.push(Node {
            token: root,
            parent: None,
            depth: 0,
            origin: Origin::Root,
            p: 1.0,
            p_path: 1.0,
            features: Features::default(),
        });
        self.tokens.push(root);
        self.parents.push(None);
    }

    /// Adds a node under `parent` (an existing node) and returns its index.
    pub fn push(&mut self, parent: usize, token: u32, origin: Origin, p: f32, features: Features) -> usize {
        let (depth, p_path) = (self.nodes[parent].depth + 1, self.nodes[parent].p_path * p);
        self.nodes.push(Node { token, parent: Some(parent), depth, origin, p, p_path, features });
        self.tokens.push(token);
        self.parents.push(Some(parent));
        self.nodes.len() - 1
    }

    /// Keeps the first `n` nodes (a prefix is still a tree: parents come first).
    pub fn truncate(&mut self, n: usize) {
        let n = n.max(1);
        self.nodes.truncate(n);
        self.tokens.truncate(n);
        self.parents.truncate(n);
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Drafted tokens (the root excluded).
    pub fn drafted(&self) -> usize {
        self.nodes.len().saturating_sub(1)
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    pub fn parents(&self) -> &[Option<usize>] {
        &self.parents
    }

    /// Children of node `i`, in the order they were drafted (most likely first).
    pub fn children(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        // Children always come after their parent.
        (i + 1..self.nodes.len()).filter(move |&j| self.nodes[j].parent == Some(i))
    }

    /// The child of node `i` holding `token`.
    pub fn child_with(&self, i: usize, token: u32) -> Option<usize> {
        self.children(i).find(|&j| self.nodes[j].token == token)
    }

    /// Depth of the deepest node.
    pub fn depth(&self) -> usize {
        self.nodes.iter().map(|n| n.depth).max().unwrap_or(0)
    }
}
