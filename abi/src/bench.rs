//! Numbers and names the user bench programs and xtask share: what a program runs and
//! what `cargo xtask bench` expects it to have run, written once.

/// P4 Fig. 8's children, `(program, text size in KiB)`, smallest first: `user/tkid` built
/// with 4 to 32 KiB of text. `user/tender` spawns each of them; `cargo xtask bench tender`
/// reads their sizes and lays out Fig. 8 by them. The first, `tkid`, is also the child of
/// Fig. 7.
pub const TENDER_CHILDREN: [(&str, u32); 8] = [
    ("tkid", 4),
    ("tkid8", 8),
    ("tkid12", 12),
    ("tkid16", 16),
    ("tkid20", 20),
    ("tkid24", 24),
    ("tkid28", 28),
    ("tkid32", 32),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tender_children_grow_by_4_kib_and_are_named_by_size() {
        for (i, (name, kib)) in TENDER_CHILDREN.iter().enumerate() {
            assert_eq!(*kib, 4 * (i as u32 + 1));
            let want = if i == 0 {
                "tkid".to_string()
            } else {
                format!("tkid{kib}")
            };
            assert_eq!(*name, want);
        }
    }
}
