//! "Did you mean" for mistyped names (hints, cluster keys, presets).

/// Levenshtein distance over bytes (the names compared are ASCII).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.as_bytes().iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("cb_nodes", "cb_nodes"), 0);
        assert_eq!(edit_distance("cb_node", "cb_nodes"), 1);
        assert_eq!(edit_distance("storag", "storage"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
