//! What is known of the values a shape's documents give later steps, and how much
//! of its next reply to walk for them: walking every reply costs most of the
//! grouping, so a shape is walked whole in its first [`WALK_ALL_FIRST`] replies and
//! in one of [`WALK_EVERY`] after, and otherwise only at the paths that linked.

/// Replies of a shape walked whole before sampling.
const WALK_ALL_FIRST: u64 = 16;
/// Then one in this many.
const WALK_EVERY: u64 = 64;
/// Paths of a shape followed.
const MAX_LINKED: usize = 8;

/// One shape's replies seen, and the paths of its values that later steps took.
#[derive(Default)]
pub(super) struct Carrier {
    seen: u64,
    linked: Vec<Box<[u8]>>,
    /// Replies walked at the linked paths, and links later taken from this shape:
    /// a shape whose values rarely link again (an id that once coincided) is then
    /// walked in two replies of [`WALK_EVERY`] only (one whole, one at the paths).
    walked: u64,
    hits: u64,
}

/// How much of a reply to walk.
pub(super) enum Walk<'c> {
    /// Every value of its first documents.
    Whole,
    /// Only the values at these paths.
    AtPaths(&'c [Box<[u8]>]),
}

impl Carrier {
    /// A later step took a value of this shape's documents at `path`: its next
    /// replies are followed there.
    pub(super) fn linked_at(&mut self, path: &[u8]) {
        self.hits += 1;
        if self.linked.len() < MAX_LINKED && !self.linked.iter().any(|p| &p[..] == path) {
            self.linked.push(path.into());
        }
    }

    /// Counts one more reply of the shape, and says how much of it to walk (none:
    /// `None`).
    pub(super) fn next_reply(&mut self) -> Option<Walk<'_>> {
        self.seen += 1;
        if self.seen <= WALK_ALL_FIRST || self.seen % WALK_EVERY == 0 {
            return Some(Walk::Whole);
        }
        let at_paths = !self.linked.is_empty()
            && (self.walked < WALK_ALL_FIRST * 4
                || self.hits * 16 >= self.walked
                || self.seen % WALK_EVERY == 1);
        if !at_paths {
            return None;
        }
        self.walked += 1;
        Some(Walk::AtPaths(&self.linked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_replies_are_walked_whole_then_at_the_linked_paths_while_they_link() {
        let mut c = Carrier::default();
        for _ in 0..WALK_ALL_FIRST {
            assert!(matches!(c.next_reply(), Some(Walk::Whole)));
        }
        // Nothing linked yet: nothing to walk until the next whole one.
        assert!(c.next_reply().is_none());
        c.linked_at(b"authorId");
        c.linked_at(b"authorId");
        assert!(matches!(c.next_reply(), Some(Walk::AtPaths(p)) if p.len() == 1 && &p[0][..] == b"authorId"));
        // Links stop coming. Of the next 640 replies (the 19th to the 658th): every
        // 64th whole (10), at the paths until 64 walks there (63 more, the 64th reply
        // being a whole one), then the one after each whole one (129th ... 641st: 9).
        let walked = (0..10 * WALK_EVERY).filter(|_| c.next_reply().is_some()).count();
        assert_eq!(walked, 10 + 63 + 9, "replies walked of {}", 10 * WALK_EVERY);
    }

    #[test]
    fn a_shape_whose_values_keep_linking_is_walked_at_its_paths_every_time() {
        let mut c = Carrier::default();
        for _ in 0..WALK_ALL_FIRST {
            c.next_reply();
        }
        c.linked_at(b"authorId");
        for seen in WALK_ALL_FIRST + 1..=1_000 {
            // A link taken from (nearly) every reply keeps hits * 16 above the walks.
            c.linked_at(b"authorId");
            let walk = c.next_reply();
            assert!(walk.is_some(), "reply {seen} not walked");
        }
    }
}
