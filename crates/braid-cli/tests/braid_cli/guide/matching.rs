//! Expected output against actual output, with the guide's two placeholders: `[..]` in a
//! line stands for any text within that line, and a line `...` for any number of lines
//! (none included). Trailing whitespace, and blank lines at the start and the end, are not
//! compared.

/// Whether `actual` fits `expected` (one line).
pub fn line_matches(expected: &str, actual: &str) -> bool {
    let (expected, actual) = (expected.trim_end(), actual.trim_end());
    let parts: Vec<&str> = expected.split("[..]").collect();
    if parts.len() == 1 {
        return expected == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether the lines of `actual` fit the lines of `expected`.
pub fn lines_match(expected: &[String], actual: &str) -> bool {
    let actual: Vec<&str> = actual.lines().collect();
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    fits(trim_blank(&expected), trim_blank(&actual))
}

fn trim_blank<'a>(lines: &'a [&'a str]) -> &'a [&'a str] {
    let start = lines.iter().position(|l| !l.trim().is_empty());
    let end = lines.iter().rposition(|l| !l.trim().is_empty());
    match (start, end) {
        (Some(s), Some(e)) => &lines[s..=e],
        _ => &[],
    }
}

fn fits(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"...", rest)) => (0..=actual.len()).any(|skip| fits(rest, &actual[skip..])),
        Some((line, rest)) => {
            !actual.is_empty() && line_matches(line, actual[0]) && fits(rest, &actual[1..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    #[test]
    fn a_line_placeholder_stands_for_any_text_in_the_line() {
        assert!(line_matches("a [..] c", "a b b c"));
        assert!(line_matches("a [..] c", "a  c"));
        assert!(line_matches("[..]s)", "152 cases (0.9 s)"));
        assert!(line_matches("x [..] y [..] z", "x 1 y 2 z"));
        assert!(!line_matches("x [..] y [..] z", "x 1 z 2 y"));
        assert!(!line_matches("a [..] c", "a b d"));
        assert!(!line_matches("ab[..]ba", "aba"));
        assert!(line_matches("exact  ", "exact"));
        assert!(!line_matches("exact", "exactly"));
    }

    #[test]
    fn an_ellipsis_line_stands_for_any_lines() {
        assert!(lines_match(
            &lines("first\n...\nlast"),
            "first\na\nb\nlast\n"
        ));
        assert!(lines_match(&lines("first\n...\nlast"), "first\nlast"));
        assert!(lines_match(
            &lines("...\nRESULT x=[..]"),
            "a\nb\nRESULT x=1"
        ));
        assert!(!lines_match(&lines("...\nRESULT x=1"), "RESULT x=1\nmore"));
        assert!(!lines_match(&lines("a\nb"), "a\nb\nc"));
        assert!(lines_match(&lines("\na\n\n"), "a"));
        assert!(lines_match(&[], "\n"));
    }
}
